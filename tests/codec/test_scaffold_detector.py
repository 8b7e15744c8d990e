"""Tests of codec.scaffold.detector: geometry and NMS offline, the ONNX detector on PETS09-S2L1."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from semcodec.codec.scaffold.detector import (
    Detections,
    DetectorConfig,
    InvalidFrameError,
    PersonDetector,
    box_iou,
    check_frame,
    nms,
    tile_windows,
)


def test_tile_windows_cover_frame_with_overlap() -> None:
    windows = tile_windows(576, 768, tiles=2, overlap=0.25, include_full_frame=True)
    assert windows[0] == (0, 0, 768, 576) and len(windows) == 5
    tiles = windows[1:]
    assert {(w[2] - w[0], w[3] - w[1]) for w in tiles} == {(439, 329)}
    assert tiles[0][:2] == (0, 0) and tiles[-1][2:] == (768, 576)
    assert tiles[0][2] - tiles[1][0] == pytest.approx(0.25 * 439, abs=1)
    assert tile_windows(10, 10, tiles=1, overlap=0.5, include_full_frame=False) == [(0, 0, 10, 10)]
    assert len(tile_windows(3, 3, tiles=3, overlap=0.0, include_full_frame=False)) == 9


def test_nms_keeps_best_of_overlapping() -> None:
    boxes = np.array([[0, 0, 10, 10], [1, 0, 11, 10], [50, 50, 60, 60], [0, 0, 10, 10]], float)
    scores = np.array([0.6, 0.9, 0.5, 0.1])
    assert nms(boxes, scores, 0.5).tolist() == [1, 2]
    assert nms(np.zeros((0, 4)), np.zeros(0), 0.5).tolist() == []


def test_config_validation_and_frame_checks() -> None:
    for bad in (
        {"score_threshold": 1.5},
        {"tiles": 0},
        {"tiles": 1.5},
        {"tile_overlap": 1.0},
        {"nms_iou": 0.0},
        {"min_box_px": -1},
        {"input_resize": "nearest"},
    ):
        with pytest.raises(ValueError, match="DetectorConfig"):
            DetectorConfig(**bad)
    with pytest.raises(InvalidFrameError, match="non-empty"):
        check_frame(np.zeros((0, 10, 3), np.uint8))
    with pytest.raises(InvalidFrameError, match="uint8"):
        check_frame(np.zeros((10, 10, 3), np.float32))
    with pytest.raises(ValueError, match=r"\(H, W, 3\)"):
        check_frame(np.zeros((10, 10), np.uint8))
    dets = Detections(np.array([[0, 0, 1, 1], [0, 0, 2, 2]]), np.array([0.9, 0.4]))
    assert dets.boxes.dtype == np.float32 and len(dets.above(0.5)) == 1


@pytest.mark.shared
def test_finds_persons_on_pets_frame(pets_frame, detector: PersonDetector, pets_gt) -> None:
    frame = pets_frame(1)
    dets = detector.detect(frame)
    assert dets.boxes.dtype == np.float32 and dets.scores.dtype == np.float32
    assert np.all(np.diff(dets.scores) <= 0) and dets.scores.min() >= 0.3
    iou = box_iou(dets.boxes, pets_gt.boxes_xyxy(1))
    assert (iou.max(axis=0) >= 0.3).sum() >= 2
    # Letting the graph resize gives nearly the same best boxes as the INTER_AREA input.
    graph = detector.with_config(dataclasses.replace(detector.config, input_resize="graph"))
    same = box_iou(dets.above(0.9).boxes, graph.detect(frame).boxes)
    assert len(same) and same.max(axis=1).min() > 0.8


@pytest.mark.shared
def test_tiled_boxes_in_frame_coordinates(pets_frame, detector: PersonDetector, pets_gt) -> None:
    frame = pets_frame(51)
    tiled = detector.with_config(DetectorConfig(score_threshold=0.3, tiles=2))
    dets = tiled.detect(frame)
    assert (dets.boxes[:, :2] >= 0).all() and (dets.boxes[:, 2] <= 768).all()
    assert (dets.boxes[:, 3] <= 576).all()
    matched = box_iou(dets.boxes, pets_gt.boxes_xyxy(51)).max(axis=0) >= 0.5
    assert matched.sum() >= 2
    # Tiles alone (no whole frame) also find the people in the right places.
    only_tiles = tiled.with_config(dataclasses.replace(tiled.config, include_full_frame=False))
    iou = box_iou(only_tiles.detect(frame).boxes, pets_gt.boxes_xyxy(51))
    assert (iou.max(axis=0) >= 0.5).sum() >= 2
    with pytest.raises(ValueError):
        detector.detect(np.zeros((0, 0, 3), np.uint8))
    with pytest.raises(ValueError):
        detector.detect(frame.astype(np.float32))


def test_box_iou_known_answers() -> None:
    a = np.array([[0, 0, 10, 10], [5, 5, 15, 15]], np.float64)
    np.testing.assert_allclose(box_iou(a, a), [[1, 25 / 175], [25 / 175, 1]])
    assert box_iou([[2, 2, 1, 1]], [[0, 0, 3, 3]])[0, 0] == 0.0  # inverted box: no area
    assert box_iou(np.zeros((0, 4)), a).shape == (0, 2)
    assert box_iou([[0, 0, 2, 2]], [[1, 1, 3, 3]])[0, 0] == pytest.approx(1 / 7)


def test_threads_must_be_positive_int() -> None:
    for bad in (0, -1, 1.5, True):
        with pytest.raises(ValueError, match="threads"):
            PersonDetector(threads=bad)


@pytest.mark.shared
def test_one_session_per_instance(detector: PersonDetector) -> None:
    other = detector.with_config(DetectorConfig(tiles=2))
    assert other._session is detector._session and other.threads == detector.threads == 2
    assert other.config.tiles == 2 and detector.config.tiles == 1
