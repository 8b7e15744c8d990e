"""Temporal consistency: known answers for flicker and the warping error."""

from __future__ import annotations

import numpy as np
import pytest

from semcodec.evaluation.metrics.temporal import temporal_consistency


def _moving_texture(frames: int = 8) -> np.ndarray:
    """A random texture sliding right by 4 px a frame, (T, 96, 128, 3) uint8."""
    rng = np.random.default_rng(3)
    import cv2

    base = cv2.GaussianBlur(rng.integers(0, 256, (96, 200, 3)).astype(np.uint8), (0, 0), 1.5)
    return np.stack([base[:, 60 - 4 * t : 188 - 4 * t] for t in range(frames)])


def test_identical_video_scores_zero():
    video = _moving_texture()
    assert temporal_consistency(video, video) == {"flicker": 0.0, "twe": pytest.approx(0.0)}
    assert temporal_consistency(video[:1], video[:1]) == {"flicker": None, "twe": None}


def test_brightness_pumping_is_flicker():
    video = _moving_texture()
    pumped = video.astype(np.int16)
    pumped[1::2] += 10  # every other frame 10 levels brighter
    pumped = np.clip(pumped, 0, 255).astype(np.uint8)
    result = temporal_consistency(video, pumped)
    luma_step = 10 * (65.481 + 128.553 + 24.966) / 255  # 10 RGB levels in BT.601 luma
    assert result["flicker"] == pytest.approx(luma_step, rel=0.05)  # +step, -step, ...


def test_a_frozen_video_has_a_large_warping_error():
    video = _moving_texture()
    frozen = np.repeat(video[:1], len(video), axis=0)
    shaken = np.stack([np.roll(f, 3 * (i % 2), axis=1) for i, f in enumerate(video)])
    assert temporal_consistency(video, frozen)["twe"] > 5
    assert temporal_consistency(video, shaken)["twe"] > 5
    assert temporal_consistency(video, frozen)["flicker"] < 0.5  # no brightness change
    with pytest.raises(ValueError, match="differ"):
        temporal_consistency(video, video[:2])
