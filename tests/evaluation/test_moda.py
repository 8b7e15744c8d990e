"""Tests of evaluation.metrics.moda: CLEAR MOD on hand-made boxes with known answers."""

from __future__ import annotations

import math

import numpy as np
import pytest

from semcodec.evaluation.data.groundtruth import GroundTruth
from semcodec.evaluation.metrics.moda import (
    GroundPlaneError,
    ModaResult,
    apply_homography,
    box_iou,
    clear_mod,
    clear_mod_ground,
    fit_ground_homography,
    image_to_ground,
)


def make_gt(rows: list[tuple], world: list[tuple] | None = None) -> GroundTruth:
    """rows: (frame, x1, y1, x2, y2, counted); world: (wx, wy) per row (default unknown)."""
    arr = np.array([r[:5] for r in rows], dtype=np.float64).reshape(-1, 5)
    boxes = np.concatenate([arr[:, 1:3], arr[:, 3:5] - arr[:, 1:3]], axis=1)
    return GroundTruth(
        frame_numbers=arr[:, 0].astype(int),
        ids=np.arange(len(rows)),
        boxes=boxes,
        counted=[bool(r[5]) for r in rows],
        world_xy=np.full((len(rows), 2), np.nan) if world is None else world,
    )


FOUR = make_gt(
    [
        (1, 0, 0, 10, 20, 1),
        (1, 50, 0, 60, 20, 1),
        (2, 0, 0, 10, 20, 1),
        (2, 100, 100, 120, 140, 1),
    ]
)


def test_perfect_detections() -> None:
    dets = {f: FOUR.boxes_xyxy(f) for f in (1, 2)}
    result = clear_mod(dets, FOUR)
    assert (result.moda, result.modp) == (1.0, 1.0)
    assert (result.true_positives, result.misses, result.false_positives) == (4, 0, 0)
    assert result.gt_objects == 4 and result.frames == 2


def test_one_miss_one_false_positive() -> None:
    dets = {1: FOUR.boxes_xyxy(1), 2: np.array([[0, 0, 10, 20], [300, 300, 310, 320]])}
    result = clear_mod(dets, FOUR)
    assert (result.misses, result.false_positives, result.true_positives) == (1, 1, 3)
    assert result.moda == pytest.approx(0.5)
    assert result.modp == pytest.approx(1.0)


def test_detection_on_ignore_region_is_dropped() -> None:
    gt = make_gt([(1, 0, 0, 10, 20, 1), (1, 100, 0, 200, 100, 0)])
    by_iou = np.array([[0, 0, 10, 20], [102, 2, 198, 98]])  # IoU with the ignore box 0.92
    by_cover = np.array([[0, 0, 10, 20], [150, 40, 170, 80]])  # small, fully inside
    outside = np.array([[0, 0, 10, 20], [180, 0, 240, 100]])  # 1/3 inside, IoU 0.14
    for dets, fp in ((by_iou, 0), (by_cover, 0), (outside, 1)):
        result = clear_mod({1: dets}, gt)
        assert result.false_positives == fp and result.true_positives == 1
        assert result.ignored_detections == 1 - fp
    # The ignore region itself is never a miss.
    assert clear_mod({1: gt.boxes_xyxy(1)}, gt).moda == 1.0


def test_iou_just_below_threshold_is_miss_and_false_positive() -> None:
    gt = make_gt([(1, 0, 0, 100, 100, 1)])
    # A box shifted right by s has IoU (100 - s) / (100 + s); 0.5 at s = 100 / 3.
    below = clear_mod({1: np.array([[33.4, 0, 133.4, 100]])}, gt)
    assert (below.true_positives, below.misses, below.false_positives) == (0, 1, 1)
    assert below.moda == -1.0 and math.isnan(below.modp)
    above = clear_mod({1: np.array([[33.3, 0, 133.3, 100]])}, gt)
    assert above.true_positives == 1 and above.modp == pytest.approx(66.7 / 133.3)


def test_hungarian_beats_greedy() -> None:
    # 1-D layout (same rows): G1 = [0, 10], G2 = [3, 13], D1 = [2, 12], D2 = [5, 15].
    # Greedy takes the best pair D1-G2 (IoU 0.818) and leaves D2-G1 (0.333): one match.
    # The optimal assignment D1-G1 (0.667) + D2-G2 (0.667) matches both.
    gt = make_gt([(1, 0, 0, 10, 10, 1), (1, 3, 0, 13, 10, 1)])
    dets = np.array([[2, 0, 12, 10], [5, 0, 15, 10]], dtype=float)
    iou = box_iou(dets, gt.boxes_xyxy(1))
    assert iou[0, 1] > iou[0, 0] >= 0.5 and iou[1, 0] < 0.5 <= iou[1, 1]
    result = clear_mod({1: dets}, gt)
    assert result.true_positives == 2 and result.moda == 1.0
    assert result.modp == pytest.approx(2 / 3)


def test_empty_frames_and_missing_detections() -> None:
    # Frame 3 has no ground truth: its detection is a false positive; frame 2 has no entry
    # in the detections: its two objects are misses; frame 4 is empty.
    dets = {1: FOUR.boxes_xyxy(1), 3: np.array([[0, 0, 5, 5]]), 4: np.zeros((0, 4))}
    result = clear_mod(dets, FOUR, frames=[1, 2, 3, 4])
    assert (result.true_positives, result.misses, result.false_positives) == (2, 2, 1)
    assert result.frames == 4 and result.moda == pytest.approx(1 - 3 / 4)
    nothing = clear_mod({}, make_gt([]), frames=[1, 2])
    assert nothing.frames == 2 and math.isnan(nothing.moda) and math.isnan(nothing.modp)
    # Default frames: ground-truth frames plus detection keys.
    assert clear_mod(dets, FOUR).frames == 4


def test_combine_pools_like_one_run() -> None:
    dets = {1: FOUR.boxes_xyxy(1)[:1] + 1, 2: np.array([[0, 0, 10, 20], [300, 300, 310, 320]])}
    whole = clear_mod(dets, FOUR)
    parts = [clear_mod(dets, FOUR, frames=[f]) for f in (1, 2)]
    pooled = ModaResult.combine(parts)
    assert pooled == parts[0] + parts[1]
    assert pooled.as_dict() == pytest.approx(whole.as_dict())


def test_bad_detections_and_threshold() -> None:
    with pytest.raises(ValueError, match=r"\(N, 4\)"):
        clear_mod({1: np.zeros((2, 3))}, FOUR)
    with pytest.raises(ValueError, match="iou_threshold"):
        clear_mod({}, FOUR, iou_threshold=0)


H_TRUE = np.array([[0.02, 0.001, -5.0], [0.0005, 0.03, -8.0], [1e-5, 4e-4, 1.0]])


def synthetic_ground_gt(n: int = 40, seed: int = 0) -> GroundTruth:
    """n boxes on 4 frames whose foot points map to their world coordinates by H_TRUE."""
    rng = np.random.default_rng(seed)
    feet = np.stack([rng.uniform(0, 768, n), rng.uniform(150, 576, n)], axis=1)
    w, h = rng.uniform(15, 40, n), rng.uniform(40, 100, n)
    rows = [
        (1 + i % 4, u - wi / 2, v - hi, u + wi / 2, v, 1)
        for i, ((u, v), wi, hi) in enumerate(zip(feet, w, h, strict=True))
    ]
    return make_gt(rows, world=apply_homography(feet, H_TRUE))


@pytest.mark.parametrize("ransac", [0.5, None])
def test_fit_ground_homography_recovers_known_h(ransac: float | None) -> None:
    gt = synthetic_ground_gt()
    h = fit_ground_homography(gt, ransac_threshold_m=ransac)
    np.testing.assert_allclose(h, H_TRUE, rtol=1e-3, atol=1e-6)
    feet = image_to_ground(gt.boxes_xyxy(1), h)
    np.testing.assert_allclose(feet, gt.world(1), atol=1e-3)


def test_ground_plane_matching() -> None:
    gt = synthetic_ground_gt()
    perfect = {f: gt.boxes_xyxy(f) for f in gt.frames()}
    result = clear_mod_ground(perfect, gt, H_TRUE)
    assert result.moda == 1.0 and result.modp == pytest.approx(1.0)

    # One object of frame 1: a box whose foot lies 0.5 m away matches (overlap 1 - 0.5 / 1);
    # one 3 m away is a miss and a false positive.
    box = gt.boxes_xyxy(1)[:1]
    world = gt.world(1)[0]

    def box_at(offset_m: float) -> np.ndarray:
        target = world + np.array([offset_m, 0.0])
        u, v = apply_homography(target[None], np.linalg.inv(H_TRUE))[0]
        half = (box[0, 2] - box[0, 0]) / 2
        return np.array([[u - half, v - 50, u + half, v]])

    gt1 = make_gt([(1, *box[0], 1)], world=[world])
    near = clear_mod_ground({1: box_at(0.5)}, gt1, H_TRUE)
    assert near.true_positives == 1 and near.modp == pytest.approx(0.5, abs=1e-6)
    far = clear_mod_ground({1: box_at(3.0)}, gt1, H_TRUE)
    assert (far.misses, far.false_positives) == (1, 1)


def test_ground_homography_errors() -> None:
    with pytest.raises(GroundPlaneError, match="no world coordinates"):
        fit_ground_homography(FOUR)
    few = synthetic_ground_gt(n=5)
    with pytest.raises(GroundPlaneError, match="at least 8"):
        fit_ground_homography(few)
    with pytest.raises(GroundPlaneError, match=r"\(3, 3\)"):
        image_to_ground(np.zeros((1, 4)), np.eye(2))


# --------------------------------------------------------------- boundaries (mutation-tested)


def test_iou_of_exactly_the_threshold_is_a_match() -> None:
    gt = make_gt([(1, 0, 0, 100, 100, 1)])
    half = np.array([[0.0, 0.0, 100.0, 50.0]])  # IoU = 5000 / 10000 = 0.5 exactly
    assert box_iou(half, gt.boxes_xyxy(1))[0, 0] == 0.5
    result = clear_mod({1: half}, gt, iou_threshold=0.5)
    assert (result.true_positives, result.misses, result.false_positives) == (1, 0, 0)
    assert result.moda == 1.0 and result.modp == pytest.approx(0.5)


def test_modp_is_averaged_over_frames_with_matches_only() -> None:
    gt = make_gt(
        [
            (1, 0, 0, 100, 100, 1),  # matched exactly: frame overlap 1.0
            (2, 0, 0, 100, 100, 1),  # missed: no match, so no part in MODP
            (3, 0, 0, 100, 100, 1),  # two people matched with IoU 1.0 and 0.5:
            (3, 200, 0, 300, 100, 1),  # frame overlap 0.75
        ]
    )
    dets = {
        1: np.array([[0, 0, 100, 100]]),
        2: np.zeros((0, 4)),
        3: np.array([[0, 0, 100, 100], [200, 0, 300, 50]]),
    }
    result = clear_mod(dets, gt)
    assert result.matched_frames == 2 and result.frames == 3
    # mean of the per-frame means over frames 1 and 3; not over 3 frames, not over matches
    assert result.modp == pytest.approx((1.0 + 0.75) / 2)
    assert result.moda == pytest.approx(1 - 1 / 4)


def test_a_matched_detection_inside_an_ignore_region_is_a_true_positive() -> None:
    gt = make_gt([(1, 0, 0, 10, 20, 1), (1, 0, 0, 12, 22, 0)])  # counted person in a crowd box
    result = clear_mod({1: np.array([[0, 0, 10, 20]])}, gt)
    assert (result.true_positives, result.false_positives) == (1, 0)
    assert result.ignored_detections == 0 and result.moda == 1.0


def test_ground_plane_match_at_exactly_the_distance() -> None:
    gt = make_gt([(1, 0, 0, 20, 20, 1)], world=[(10.0, 20.0)])
    identity = np.eye(3)  # image pixels are ground metres: the foot point is the position

    def det_with_foot(u: float) -> dict:
        return {1: np.array([[u - 0.5, 10.0, u + 0.5, 20.0]])}

    at = clear_mod_ground(det_with_foot(11.0), gt, identity, distance_m=1.0)  # d = 1.0 exactly
    assert at.true_positives == 1 and at.modp == pytest.approx(0.0)
    beyond = clear_mod_ground(det_with_foot(11.0 + 1e-9), gt, identity, distance_m=1.0)
    assert (beyond.true_positives, beyond.misses, beyond.false_positives) == (0, 1, 1)
