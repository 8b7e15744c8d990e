"""Detector calibration on ground truth; the detector itself is :mod:`codec.scaffold.detector`.

The person detector (SSDLite-MobileNetV2 with optional tiling) moved to
:mod:`codec.scaffold.detector` because the edge's scaffold encoder needs it too and ``codec``
cannot import ``evaluation``; its names are re-exported here so existing imports keep working.

:func:`calibrate_detector` chooses the score threshold and the tiling by MODA on
uncompressed frames.
"""

from __future__ import annotations

import dataclasses
import os
import time
from collections.abc import Sequence

import numpy as np

from semcodec.codec.scaffold.detector import (
    INPUT_SIZE,
    MODEL_NAME,
    PERSON_CLASS,
    Detections,
    DetectorConfig,
    InvalidFrameError,
    PersonDetector,
    check_frame,
    nms,
    tile_windows,
)
from semcodec.evaluation.data.groundtruth import GroundTruth
from semcodec.evaluation.metrics.moda import MATCH_IOU, ModaResult, clear_mod

__all__ = [
    "INPUT_SIZE",
    "MODEL_NAME",
    "PERSON_CLASS",
    "Detections",
    "DetectorConfig",
    "InvalidFrameError",
    "PersonDetector",
    "calibrate_detector",
    "check_frame",
    "nms",
    "tile_windows",
]


def calibrate_detector(
    frames: np.ndarray | Sequence[np.ndarray],
    gt: GroundTruth,
    frame_numbers: Sequence[int],
    thresholds: Sequence[float] = (0.3, 0.4, 0.5, 0.6),
    tilings: Sequence[int] = (1, 2),
    models_dir: str | os.PathLike | None = None,
    base_config: DetectorConfig | None = None,
    threads: int | None = None,
    iou_threshold: float = MATCH_IOU,
) -> tuple[DetectorConfig, list[dict]]:
    """Chooses the score threshold and tiling with the best MODA on (uncompressed) frames.

    Each tiling is run once, keeping every score >= ``min(thresholds)``; each threshold is
    then a filter of those detections (greedy NMS commutes with a score cut, so this equals
    running at that threshold).

    Args:
        frames: (T, H, W, 3) uint8 RGB frames.
        gt: ground truth in the frames' pixel coordinates (use ``gt.scaled`` for resized ones).
        frame_numbers: the T frame numbers of ``frames`` (as in ``gt``).
        thresholds: score thresholds to try.
        tilings: values of ``DetectorConfig.tiles`` to try.
        models_dir: passed to :class:`PersonDetector`.
        base_config: the other settings (overlap, NMS, ...); default :class:`DetectorConfig`.
        threads: onnxruntime intra-op threads.
        iou_threshold: IoU of a match for MODA.

    Returns:
        The best config (ties: higher MODP, then fewer tiles, then lower threshold) and one
        row per (tiles, threshold): ``tiles, threshold, moda, modp, fps`` plus
        ``true_positives, misses, false_positives, gt_objects``. ``fps`` is frames per second
        of detection (whole tiling, including resizing), the same for every threshold.
    """
    if not thresholds or not tilings:
        raise ValueError("calibrate_detector needs at least one threshold and one tiling")
    if len(frames) != len(frame_numbers) or len(frames) == 0:
        raise ValueError(f"{len(frames)} frames but {len(frame_numbers)} frame numbers")
    base = base_config or DetectorConfig()
    low = min(thresholds)
    detector = PersonDetector(dataclasses.replace(base, score_threshold=low), models_dir, threads)
    rows: list[dict] = []
    for tiles in tilings:
        tiled = detector.with_config(dataclasses.replace(base, tiles=tiles, score_threshold=low))
        start = time.perf_counter()
        found = tiled.detect_many(frames, frame_numbers)
        fps = len(frames) / max(time.perf_counter() - start, 1e-9)
        for threshold in sorted(thresholds):
            cut = {n: d.above(threshold) for n, d in found.items()}
            result = clear_mod(cut, gt, frames=list(frame_numbers), iou_threshold=iou_threshold)
            rows.append({"tiles": tiles, "threshold": float(threshold), **_row(result, fps)})
    best = max(rows, key=_rank)
    config = dataclasses.replace(base, tiles=best["tiles"], score_threshold=best["threshold"])
    return config, rows


def _row(result: ModaResult, fps: float) -> dict:
    return {
        "moda": result.moda,
        "modp": result.modp,
        "fps": fps,
        "true_positives": result.true_positives,
        "misses": result.misses,
        "false_positives": result.false_positives,
        "gt_objects": result.gt_objects,
    }


def _rank(row: dict) -> tuple[float, float, int, float]:
    moda = row["moda"] if np.isfinite(row["moda"]) else -np.inf
    modp = row["modp"] if np.isfinite(row["modp"]) else -np.inf
    return (moda, modp, -row["tiles"], -row["threshold"])


def calibration_name(sequence: str, frames: int, every: int = 1, start: int = 1) -> str:
    """File name of a sequence's detector calibration in ``OUT/detector/``."""
    name = f"{sequence}-{frames}f" if start == 1 else f"{sequence}-from{start}-{frames}f"
    return f"{name}.json" if every == 1 else f"{name}-every{every}.json"
