"""Person-region metrics: crops around ground-truth people, known answers."""

from __future__ import annotations

import numpy as np
import pytest

from semcodec.evaluation.data.groundtruth import GroundTruth
from semcodec.evaluation.metrics.person_region import (
    CROP_SIZE,
    crop_windows,
    frozen_person_blocks,
    person_crops,
    person_region_scores,
    seam_score,
)


def _gt(rows, one_person: bool = False) -> GroundTruth:
    """rows: (frame, x, y, w, h, counted); every row its own id, or all one person's."""
    rows = np.array(rows, dtype=np.float64).reshape(-1, 6)
    ids = np.ones(len(rows), np.int64) if one_person else np.arange(len(rows))
    return GroundTruth(frame_numbers=rows[:, 0].astype(np.int64),
                       ids=ids, boxes=rows[:, 1:5],
                       counted=rows[:, 5].astype(bool),
                       world_xy=np.full((len(rows), 2), np.nan))  # fmt: skip


def test_windows_are_the_box_enlarged_about_its_centre_and_clipped():
    gt = _gt([(1, 40, 20, 20, 50, 1), (1, 0, 0, 10, 10, 1), (1, 5, 5, 30, 30, 0),
              (2, 90, 90, 2, 2, 1)])  # fmt: skip
    assert crop_windows(gt, 1, 100, 80) == [(38, 15, 62, 75), (0, 0, 11, 11)]  # no ignore row
    assert crop_windows(gt, 2, 100, 80) == []  # 2x2 box at the corner: clipped below 4 px
    assert crop_windows(gt, 3, 100, 80) == []


def test_scores_see_only_the_people():
    rng = np.random.default_rng(0)
    reference = rng.integers(0, 256, (4, 80, 100, 3), dtype=np.uint8)
    gt = _gt([(n, 40, 10, 20, 50, 1) for n in (1, 2, 3, 4)])
    background_changed = reference.copy()
    background_changed[:, :, :30] = 0  # far from the person's crop (x 38..62)
    same = person_region_scores(reference, background_changed, gt)
    assert same == {"person_psnr": 100.0, "person_st_lpips": pytest.approx(0.0, abs=1e-6),
                    "person_crops": 4}  # fmt: skip
    person_changed = reference.copy()
    person_changed[:, 10:60, 40:60] //= 2
    worse = person_region_scores(reference, person_changed, gt, every=2)
    assert worse["person_crops"] == 2 and worse["person_psnr"] < 20
    assert worse["person_st_lpips"] > 0.05
    ref, dec = person_crops(reference, person_changed, gt, [1])
    assert ref.shape == dec.shape == (1, CROP_SIZE[1], CROP_SIZE[0], 3)


def test_no_people_no_scores():
    frames = np.zeros((2, 40, 40, 3), np.uint8)
    assert person_region_scores(frames, frames, _gt([])) == {
        "person_psnr": None, "person_st_lpips": None, "person_crops": 0}
    with pytest.raises(ValueError, match="differ"):
        person_crops(frames, frames[:1], _gt([]), [1])


def _walking_person(frames: int, speed: float = 2.0) -> GroundTruth:
    """One person 20x40 walking right by ``speed`` px a frame, from x = 10."""
    return _gt([(n, 10 + speed * (n - 1), 10, 20, 40, 1) for n in range(1, frames + 1)], True)


def test_a_person_frozen_into_the_picture_is_found():
    rng = np.random.default_rng(2)
    video = rng.integers(0, 256, (30, 60, 80, 3), dtype=np.uint8)  # every block changes
    gt = _walking_person(30)
    assert frozen_person_blocks(video, gt, fps=10) == {"frozen_blocks": 0, "frozen_max_s": 0.0}
    frozen = video.copy()
    frozen[:, 20:30, 30:40] = frozen[0, 20:30, 30:40]  # one block never changes
    result = frozen_person_blocks(frozen, gt, fps=10)
    # the block x 30..40 lies inside the walking box (x from 10+2(n-1) to 30+2(n-1)) for
    # frames 6..11 only: 6 frozen frames, 0.6 s, under the 2 s limit
    assert result == {"frozen_blocks": 0, "frozen_max_s": pytest.approx(0.6)}
    slow_wide = _gt([(n, 0.5 * (n - 1), 10, 40, 40, 1) for n in range(1, 31)], True)
    assert frozen_person_blocks(frozen, slow_wide, fps=10) == {
        "frozen_blocks": 1, "frozen_max_s": pytest.approx(2.9)}  # covered while it walks
    still = _gt([(n, 20, 10, 30, 40, 1) for n in range(1, 31)], True)  # standing: not moving
    assert frozen_person_blocks(frozen, still, fps=10)["frozen_blocks"] == 0


def test_scaffold_person_recall_counts_matched_ground_truth_people():
    from semcodec.evaluation.bench.grid import scaffold_person_recall

    gt = _gt([(1, 10, 10, 20, 40, 1), (1, 50, 10, 20, 40, 1), (2, 10, 10, 20, 40, 1),
              (2, 0, 0, 5, 5, 0)])  # fmt: skip  (the last row: an ignore region)
    boxes = [np.array([[10, 10, 30, 50], [80, 0, 90, 10]], np.float32),  # 1 of 2 people
             np.array([[11, 12, 31, 52]], np.float32)]  # IoU 0.83: matched
    assert scaffold_person_recall(boxes, gt) == {"person_recall": pytest.approx(2 / 3),
                                                 "scaffold_people": 1.5}  # fmt: skip
    empty = [np.zeros((0, 4), np.float32)] * 2
    assert scaffold_person_recall(empty, gt)["person_recall"] == 0.0


def test_seam_is_zero_for_identical_or_blurred_frames_and_positive_for_a_pasted_box():
    """A textured background with a smooth person; the decoded frame pastes the person's box
    cut from another background (a rectangle whose edges the original does not have)."""
    import cv2

    rng = np.random.default_rng(1)
    background = cv2.GaussianBlur(rng.integers(0, 256, (120, 160, 3), dtype=np.uint8),
                                  (0, 0), 3)  # fmt: skip
    reference = np.stack([background] * 2)
    reference[:, 30:90, 60:84] = 200  # the person, 24 x 60
    gt = _gt([(n, 60, 30, 24, 60, 1) for n in (1, 2)])
    assert seam_score(reference, reference, gt) == {"seam": 0.0}
    blurred = np.stack([cv2.GaussianBlur(f, (0, 0), 2) for f in reference])
    assert seam_score(reference, blurred, gt) == {"seam": 0.0}  # less edge, no excess
    pasted = reference.copy()
    pasted[:, 22:98, 55:89] = 40  # a box of foreign (dark) background around the person
    pasted[:, 30:90, 60:84] = 200
    assert seam_score(reference, pasted, gt)["seam"] > 0.5
    assert seam_score(reference, pasted, _gt([(3, 60, 30, 24, 60, 1)])) == {"seam": None}
    with pytest.raises(ValueError, match="differ"):
        seam_score(reference, pasted[:1], gt)
