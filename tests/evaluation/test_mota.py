"""CLEAR MOT of tracked boxes (issue 40: the boxes a level-1 stream carries), known answers:
misses, false positives, identity switches, a match kept while it holds, ignore regions."""

from __future__ import annotations

import numpy as np
import pytest

from semcodec.evaluation.data.groundtruth import GroundTruth
from semcodec.evaluation.metrics.mota import clear_mot, transmitted_box_scores

A, B = (0, 0, 10, 20), (50, 0, 60, 20)  # two people standing still, x1, y1, x2, y2
FAR, IGNORED = (200, 200, 210, 220), (300, 0, 320, 40)


def _gt(frames: int = 3) -> GroundTruth:
    """People 7 (at A) and 8 (at B) on frames 1..frames, an ignore region at IGNORED."""
    rows = [(f, i, box, True) for f in range(1, frames + 1) for i, box in ((7, A), (8, B))]
    rows += [(f, -1, IGNORED, False) for f in range(1, frames + 1)]
    xyxy = np.array([r[2] for r in rows], float)
    return GroundTruth(frame_numbers=[r[0] for r in rows], ids=[r[1] for r in rows],
                       boxes=np.concatenate([xyxy[:, :2], xyxy[:, 2:] - xyxy[:, :2]], 1),
                       counted=[r[3] for r in rows], world_xy=np.full((len(rows), 2), np.nan))


def _t(*pairs):
    boxes = np.array([b for b, _ in pairs], float).reshape(-1, 4)
    return boxes, np.array([i for _, i in pairs])


def test_switches_misses_and_false_positives_known_answer():
    tracks = {1: _t((A, 1), (B, 2)),
              2: _t((A, 2), (B, 1)),  # the two tracks swap people: 2 switches
              3: _t((A, 2), (FAR, 5), (IGNORED, 6))}  # B missed, a false positive, one ignored
    result = clear_mot(tracks, _gt(), [1, 2, 3])
    assert (result.matches, result.misses, result.false_positives, result.id_switches,
            result.gt_objects) == (5, 1, 1, 2, 6)  # fmt: skip
    assert result.mota == pytest.approx(1 - 4 / 6) and result.motp == pytest.approx(1.0)


def test_a_match_is_kept_while_it_holds():
    # frame 2: track 1 drifts off A (IoU 0.6) while a new track 3 sits exactly on A: track 1
    # keeps person 7 (no switch), track 3 is a false positive
    drifted = (2, 0, 12, 20)
    tracks = {1: _t((A, 1), (B, 2)), 2: _t((drifted, 1), (A, 3), (B, 2))}
    result = clear_mot(tracks, _gt(2), [1, 2])
    assert (result.id_switches, result.false_positives, result.matches) == (0, 1, 4)
    # a person lost for a frame and found again by another track is a switch
    tracks = {1: _t((A, 1), (B, 2)), 2: _t((B, 2)), 3: _t((A, 4), (B, 2))}
    result = clear_mot(tracks, _gt(), [1, 2, 3])
    assert (result.id_switches, result.misses) == (1, 1)


def test_transmitted_box_scores_equal_mod_without_switches():
    boxes = [np.array([A, B], float), np.array([A], float), np.array([A, B, FAR], float)]
    ids = [np.array([1, 2]), np.array([1]), np.array([1, 2, 9])]
    scores = transmitted_box_scores(boxes, ids, _gt())
    assert scores["track_id_switches"] == 0
    assert scores["track_moda"] == pytest.approx(1 - 2 / 6)  # one miss, one false positive
    assert scores["track_mota"] == pytest.approx(scores["track_moda"])
    with pytest.raises(ValueError, match="track ids"):
        clear_mot({1: (np.array([A], float), np.array([1, 2]))}, _gt(1), [1])
