"""``semcodec-bench sidebyside``: a picture of frames, the original beside reconstructions."""

from __future__ import annotations

import numpy as np
import pytest

from semcodec.evaluation.sidebyside import side_by_side


def test_one_row_per_frame_and_one_panel_per_codec():
    rng = np.random.default_rng(0)
    pixels = rng.integers(0, 255, (6, 48, 64, 3), np.uint8)
    picture = side_by_side(pixels, 10.0, [("jpeg", "q=90"), ("raw", "")], at=[1, 6],
                           width=64)  # fmt: skip
    assert picture.shape == (2 * 48, 3 * 64, 3) and picture.dtype == np.uint8
    raw_panel = picture[48:, 128:]  # frame 6, raw: the original itself below the label band
    np.testing.assert_array_equal(raw_panel[20:], pixels[5, 20:])


def test_frames_outside_the_clip_are_refused():
    with pytest.raises(ValueError, match="outside"):
        side_by_side(np.zeros((3, 16, 16, 3), np.uint8), 5.0, [], at=[4])
