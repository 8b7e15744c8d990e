"""CLEAR MOT tracking metrics (Bernardin and Stiefelhagen, "Evaluating multiple object
tracking performance: the CLEAR MOT metrics", EURASIP JIVP 2008) of tracked boxes, e.g. the
boxes a level-1 stream carries (``tracks.txt``).

Per frame, a ground-truth person matched to a track in the frame before stays matched to it
while their IoU is at least ``iou_threshold``; the others are matched one-to-one by the
Hungarian algorithm (most matches, then most overlap; :func:`evaluation.metrics.moda.match_pairs`).
A ground-truth person matched to another track than the last one they were matched to is an
**identity switch**. An unmatched track on an ignore region is not a false positive (the rule
of :func:`evaluation.metrics.moda.clear_mod`). Over the frames::

    MOTA = 1 - (misses + false positives + identity switches) / ground-truth objects
    MOTP = mean IoU of all matches

MOTA is NaN without ground-truth objects, MOTP without matches. Without identity switches
MOTA equals CLEAR MOD's MODA on the same boxes.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from semcodec.codec.scaffold.detector import box_iou
from semcodec.evaluation.data.groundtruth import GroundTruth, xywh_to_xyxy
from semcodec.evaluation.metrics.moda import MATCH_IOU, as_boxes, ignore_hits, match_pairs


@dataclass(frozen=True)
class MotaResult:
    """CLEAR MOT counts and scores.

    Attributes:
        mota: 1 - (misses + false_positives + id_switches) / gt_objects (NaN without any).
        motp: mean IoU of the matches (NaN without any).
        matches, misses, false_positives, id_switches, gt_objects: pooled counts.
        frames: evaluated frames.
    """

    mota: float
    motp: float
    matches: int
    misses: int
    false_positives: int
    id_switches: int
    gt_objects: int
    frames: int


def _gt_by_frame(gt: GroundTruth) -> dict[int, tuple[np.ndarray, np.ndarray]]:
    """Frame -> ``(ids (K,) int64, boxes (K, 4) x1, y1, x2, y2)`` of the counted objects."""
    out = {}
    counted = np.flatnonzero(gt.counted)
    for frame in np.unique(gt.frame_numbers[counted]):
        rows = counted[gt.frame_numbers[counted] == frame]
        out[int(frame)] = (gt.ids[rows], xywh_to_xyxy(gt.boxes[rows]))
    return out


def clear_mot(tracks: Mapping[int, tuple[object, object]], gt: GroundTruth,
              frames: Sequence[int], iou_threshold: float = MATCH_IOU) -> MotaResult:  # fmt: skip
    """CLEAR MOT of tracked boxes against ``gt`` (module docstring).

    Args:
        tracks: frame number -> ``(boxes, ids)``: ``(N, 4)`` ``x1, y1, x2, y2`` pixels and
            ``(N,)`` integer track ids; frames missing here have no tracks.
        gt: ground truth in the same pixel coordinates.
        frames: the frame numbers to evaluate, in order (consecutive for identity switches
            to mean what they say).
        iou_threshold: minimum IoU of a match, in (0, 1].
    """
    if not 0.0 < iou_threshold <= 1.0:
        raise ValueError(f"iou_threshold must be in (0, 1], got {iou_threshold}")
    truth = _gt_by_frame(gt)
    empty = (np.zeros(0, np.int64), np.zeros((0, 4)))
    last: dict[int, int] = {}  # ground-truth id -> the track id it was last matched to
    previous: dict[int, int] = {}  # the matches of the frame before
    counts = dict.fromkeys(("matches", "misses", "false_positives", "id_switches"), 0)
    gt_objects, overlap = 0, 0.0
    for frame in frames:
        boxes, ids = tracks.get(frame, (np.zeros((0, 4)), np.zeros(0)))
        boxes, ids = as_boxes(boxes), np.asarray(ids, np.int64).reshape(-1)
        if len(ids) != len(boxes):
            raise ValueError(f"frame {frame}: {len(boxes)} boxes but {len(ids)} track ids")
        gt_ids, gt_boxes = truth.get(int(frame), empty)
        iou = box_iou(boxes, gt_boxes)
        pairs = _keep_previous(previous, ids, gt_ids, iou, iou_threshold)
        free_t = [i for i in range(len(ids)) if i not in {t for t, _ in pairs}]
        free_g = [j for j in range(len(gt_ids)) if j not in {g for _, g in pairs}]
        sub = iou[np.ix_(free_t, free_g)]
        rows, cols = match_pairs(sub, sub >= iou_threshold)
        pairs += [(free_t[r], free_g[c]) for r, c in zip(rows, cols, strict=True)]
        for t, g in pairs:
            gid, tid = int(gt_ids[g]), int(ids[t])
            counts["id_switches"] += int(gid in last and last[gid] != tid)
            last[gid] = tid
            overlap += float(iou[t, g])
        matched = np.zeros(len(ids), bool)
        matched[[t for t, _ in pairs]] = True
        unmatched = ~matched & ~ignore_hits(boxes, gt.ignore_xyxy(int(frame)), iou_threshold)
        counts["matches"] += len(pairs)
        counts["misses"] += len(gt_ids) - len(pairs)
        counts["false_positives"] += int(unmatched.sum())
        gt_objects += len(gt_ids)
        previous = {int(gt_ids[g]): int(ids[t]) for t, g in pairs}
    errors = counts["misses"] + counts["false_positives"] + counts["id_switches"]
    mota = 1.0 - errors / gt_objects if gt_objects else float("nan")
    motp = overlap / counts["matches"] if counts["matches"] else float("nan")
    return MotaResult(float(mota), float(motp), gt_objects=gt_objects, frames=len(frames),
                      **counts)  # fmt: skip


def _keep_previous(previous: Mapping[int, int], ids: np.ndarray, gt_ids: np.ndarray,
                   iou: np.ndarray, threshold: float) -> list[tuple[int, int]]:  # fmt: skip
    """The frame before's matches that still hold: ``(track index, gt index)`` pairs."""
    track_at = {int(t): i for i, t in enumerate(ids)}
    pairs = []
    for g, gid in enumerate(gt_ids.tolist()):
        t = track_at.get(previous.get(gid, -1))
        if t is not None and iou[t, g] >= threshold:
            pairs.append((t, g))
    return pairs


def transmitted_box_scores(boxes: Sequence[np.ndarray], ids: Sequence[np.ndarray],
                           gt: GroundTruth) -> dict:  # fmt: skip
    """CLEAR MOD and CLEAR MOT of the tracked boxes a stream carries, on every frame.

    Args:
        boxes: per frame (``boxes[0]`` is frame 1), ``(N, 4)`` ``x1, y1, x2, y2`` pixels.
        ids: per frame, the ``(N,)`` track ids of those boxes.
        gt: the ground truth, frame 1 first.

    Returns:
        ``track_moda``, ``track_modp`` (:func:`evaluation.metrics.moda.clear_mod` of the
        boxes), ``track_mota``, ``track_motp`` and ``track_id_switches`` (:func:`clear_mot`).
    """
    from semcodec.evaluation.metrics.moda import clear_mod

    numbers = list(range(1, len(boxes) + 1))
    mod = clear_mod(dict(zip(numbers, boxes, strict=True)), gt, numbers)
    mot = clear_mot(dict(zip(numbers, zip(boxes, ids, strict=True), strict=True)), gt, numbers)
    return {"track_moda": mod.moda, "track_modp": mod.modp, "track_mota": mot.mota,
            "track_motp": mot.motp, "track_id_switches": mot.id_switches}  # fmt: skip
