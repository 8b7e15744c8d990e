"""Tests of evaluation.metrics.detector: calibration by MODA on PETS09-S2L1, and the re-exports."""

from __future__ import annotations

import numpy as np
import pytest

import semcodec.codec.scaffold.detector as codec_detector
from semcodec.evaluation.metrics.detector import (
    Detections,
    PersonDetector,
    calibrate_detector,
)


def test_detector_names_are_reexported() -> None:
    import semcodec.evaluation.metrics.detector as evaluation_detector

    for name in evaluation_detector.__all__:
        if name != "calibrate_detector":
            assert getattr(evaluation_detector, name) is getattr(codec_detector, name)


def test_calibrate_rejects_empty_grids() -> None:
    frames = np.zeros((1, 8, 8, 3), np.uint8)
    with pytest.raises(ValueError, match="at least one threshold"):
        calibrate_detector(frames, None, [1], thresholds=())  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="frame numbers"):
        calibrate_detector(frames, None, [1, 2])  # type: ignore[arg-type]


@pytest.mark.shared
def test_calibrate_on_two_frames(pets_frame, detector: PersonDetector, pets_gt) -> None:
    frames = np.stack([pets_frame(1), pets_frame(101)])
    config, rows = calibrate_detector(
        frames, pets_gt, [1, 101], thresholds=(0.5, 0.3), tilings=(1, 2), threads=2
    )
    assert [(r["tiles"], r["threshold"]) for r in rows] == [(1, 0.3), (1, 0.5), (2, 0.3), (2, 0.5)]
    best = max(r["moda"] for r in rows)
    assert any(
        r["moda"] == best and (r["tiles"], r["threshold"]) == (config.tiles, config.score_threshold)
        for r in rows
    )
    assert all(r["fps"] > 0 and r["gt_objects"] == 3 + 6 for r in rows)
    many = detector.detect_many(frames, [1, 101])
    assert sorted(many) == [1, 101] and all(isinstance(d, Detections) for d in many.values())
