"""The cloud's threshold of a detect-mode stream, on synthetic scores with known answers
(issue 40): the threshold whose decoded count matches the uncompressed detector's."""

from __future__ import annotations

import numpy as np
import pytest

from semcodec.codec.task.calibrate import REFERENCE_THRESHOLD, match_threshold


def test_the_threshold_whose_decoded_count_matches_the_uncompressed_one():
    # the uncompressed detector finds 3 people per frame at 0.4; the decoded features score
    # lower: 3 per frame only at thresholds in (0.05, 0.22], and the one nearest 0.4 is 0.22
    reference = [np.array([0.9, 0.6, 0.45, 0.2]), np.array([0.8, 0.5, 0.41, 0.1])]
    decoded = [np.array([0.7, 0.4, 0.25, 0.05]), np.array([0.6, 0.3, 0.22, 0.01])]
    threshold, target, matched = match_threshold(reference, decoded)
    assert (threshold, target, matched) == (0.22, 3.0, 3.0)
    # decoded features that score higher than the real ones: the threshold goes up
    higher = [s + 0.3 for s in reference]  # 3 per frame in (0.5, 0.75]: nearest 0.4 is 0.51
    assert match_threshold(reference, higher)[0] == 0.51
    # identical scores: the reference's own operating point
    assert match_threshold(reference, reference)[0] == REFERENCE_THRESHOLD


def test_counts_are_averaged_over_frames_and_the_nearest_count_wins():
    reference = [np.array([0.9, 0.8]), np.array([0.9, 0.8])]  # 2 per frame
    decoded = [np.array([0.35]), np.array([0.3, 0.29, 0.28])]  # 1 + 3: 2 on average at 0.28
    threshold, target, matched = match_threshold(reference, decoded)
    assert target == 2.0 and matched == 2.0 and threshold == 0.28
    # 5 per frame is out of reach: the nearest count (2), at the threshold nearest 0.4
    reference = [np.full(5, 0.9), np.full(5, 0.9)]
    assert match_threshold(reference, decoded) == (0.28, 5.0, 2.0)
    with pytest.raises(ValueError, match="same"):
        match_threshold(reference, decoded[:1])
    with pytest.raises(ValueError):
        match_threshold([], [])
