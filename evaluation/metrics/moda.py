"""CLEAR MOD detection metrics (Kasturi et al., "Framework for performance evaluation of face,
text, and vehicle detection and tracking in video", IEEE PAMI 31(2), 2009).

Per frame, detections are matched one-to-one to the counted ground-truth objects with the
Hungarian algorithm (:func:`scipy.optimize.linear_sum_assignment`): first the number of
matches is maximised, then their total overlap. A pair can match only when its IoU is at least
``iou_threshold`` (image plane) or its ground distance at most ``distance_m`` (ground plane).

Ignore regions (MOT15 ``conf = 0``, MOT16 flag 0 or distractor classes): a detection left
unmatched is dropped, neither a true nor a false positive, when it overlaps an ignore box with
IoU >= ``iou_threshold`` **or** when at least half of its own area lies inside one ignore box
(intersection / detection area >= :data:`IGNORE_COVERAGE`). On the ground plane the rule is a
ground distance <= ``distance_m`` to an ignore object.

Over the evaluated frames::

    MODA = 1 - (sum misses + sum false positives) / sum ground-truth objects

MODP is Kasturi's N-MODP restricted to frames that have matches: the mean IoU of the matched
pairs of a frame, averaged over the frames with at least one match (on the ground plane the
overlap of a pair is ``1 - d / distance_m``). MODA is NaN without ground-truth objects, MODP
is NaN without matches.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass

import cv2
import numpy as np
from scipy.optimize import linear_sum_assignment

from semcodec.codec.scaffold.detector import box_area, box_iou, intersection_area
from semcodec.evaluation.data.groundtruth import GroundTruth, xywh_to_xyxy

#: Share of a detection's area on an ignore region that keeps it from being a false positive.
IGNORE_COVERAGE = 0.5
#: IoU a detection needs to match a ground-truth box (image plane).
MATCH_IOU = 0.5
#: Ground distance (metres) within which a detection matches a person (ground plane).
GROUND_MATCH_M = 1.0
_FOOT_MIN_ROWS = 4


class GroundPlaneError(ValueError):
    """The ground-plane homography cannot be fitted or applied."""


@dataclass(frozen=True)
class ModaResult:
    """CLEAR MOD counts and scores of a set of frames.

    Attributes:
        moda: 1 - (misses + false_positives) / gt_objects; NaN when gt_objects == 0.
        modp: mean per-frame overlap over frames with matches (N-MODP); NaN without matches.
        true_positives: matched detections.
        misses: counted ground-truth objects without a match.
        false_positives: unmatched detections not dropped by an ignore region.
        gt_objects: counted ground-truth objects.
        frames: evaluated frames.
        overlap_sum: sum over frames with matches of the frame's mean overlap (for pooling).
        matched_frames: frames with at least one match (for pooling).
        ignored_detections: unmatched detections dropped because they hit an ignore region.
    """

    moda: float
    modp: float
    true_positives: int
    misses: int
    false_positives: int
    gt_objects: int
    frames: int
    overlap_sum: float = 0.0
    matched_frames: int = 0
    ignored_detections: int = 0

    @classmethod
    def from_counts(
        cls,
        true_positives: int,
        misses: int,
        false_positives: int,
        frames: int,
        overlap_sum: float = 0.0,
        matched_frames: int = 0,
        ignored_detections: int = 0,
    ) -> ModaResult:
        """Builds a result, deriving ``gt_objects``, ``moda`` and ``modp`` from the counts."""
        gt_objects = true_positives + misses
        moda = 1.0 - (misses + false_positives) / gt_objects if gt_objects else float("nan")
        modp = overlap_sum / matched_frames if matched_frames else float("nan")
        return cls(
            moda=float(moda),
            modp=float(modp),
            true_positives=int(true_positives),
            misses=int(misses),
            false_positives=int(false_positives),
            gt_objects=int(gt_objects),
            frames=int(frames),
            overlap_sum=float(overlap_sum),
            matched_frames=int(matched_frames),
            ignored_detections=int(ignored_detections),
        )

    @staticmethod
    def combine(results: Iterable[ModaResult]) -> ModaResult:
        """Pools results (e.g. of several sequences) as if evaluated in one run."""
        fields = ("true_positives", "misses", "false_positives", "frames", "overlap_sum")
        fields += ("matched_frames", "ignored_detections")
        totals = dict.fromkeys(fields, 0)
        for result in results:
            for name in fields:
                totals[name] += getattr(result, name)
        return ModaResult.from_counts(**totals)

    def __add__(self, other: ModaResult) -> ModaResult:
        if not isinstance(other, ModaResult):
            return NotImplemented
        return ModaResult.combine((self, other))

    def as_dict(self) -> dict[str, float | int]:
        """The fields as a plain dict (for tables and JSON)."""
        return {name: getattr(self, name) for name in self.__dataclass_fields__}


def as_boxes(detections: object) -> np.ndarray:
    """(N, 4) float64 ``x1, y1, x2, y2`` from an array or an object with a ``boxes`` array."""
    boxes = np.asarray(getattr(detections, "boxes", detections), dtype=np.float64)
    if boxes.size == 0:
        return np.zeros((0, 4))
    if boxes.ndim != 2 or boxes.shape[1] != 4:
        raise ValueError(f"detections must be (N, 4) x1, y1, x2, y2 boxes, got {boxes.shape}")
    if not np.isfinite(boxes).all():
        raise ValueError("detection boxes contain NaN or inf")
    return boxes


def match_pairs(score: np.ndarray, valid: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Maximum-cardinality, then maximum-score one-to-one matching.

    Args:
        score: (N, M) pair scores in [0, 1] (higher is better).
        valid: (N, M) bool, pairs allowed to match.

    Returns:
        Row and column indices of the matched valid pairs.
    """
    if score.size == 0 or not valid.any():
        return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64)
    # An invalid pair costs more than any set of valid ones, so the count of valid matches is
    # maximised first, then their total score.
    big = float(min(score.shape)) + 1.0
    cost = np.where(valid, 1.0 - np.clip(score, 0.0, 1.0), big)
    rows, cols = linear_sum_assignment(cost)
    keep = valid[rows, cols]
    return rows[keep], cols[keep]


@dataclass(frozen=True)
class _FrameCounts:
    matches: int
    misses: int
    false_positives: int
    ignored: int
    overlap: float  # mean overlap of the matches, 0 without matches


def _count_frame(
    score: np.ndarray, valid: np.ndarray, ignored_if_unmatched: np.ndarray
) -> _FrameCounts:
    """Counts of one frame from (N det, K gt) pair scores and (N,) ignore flags."""
    det_idx, gt_idx = match_pairs(score, valid)
    unmatched = np.ones(score.shape[0], dtype=bool)
    unmatched[det_idx] = False
    ignored = int((unmatched & ignored_if_unmatched).sum())
    return _FrameCounts(
        matches=len(det_idx),
        misses=score.shape[1] - len(det_idx),
        false_positives=int(unmatched.sum()) - ignored,
        ignored=ignored,
        overlap=float(score[det_idx, gt_idx].mean()) if len(det_idx) else 0.0,
    )


def _accumulate(counts: Iterable[_FrameCounts]) -> ModaResult:
    counts = list(counts)
    return ModaResult.from_counts(
        true_positives=sum(c.matches for c in counts),
        misses=sum(c.misses for c in counts),
        false_positives=sum(c.false_positives for c in counts),
        frames=len(counts),
        overlap_sum=sum(c.overlap for c in counts if c.matches),
        matched_frames=sum(1 for c in counts if c.matches),
        ignored_detections=sum(c.ignored for c in counts),
    )


def _frames_to_evaluate(
    detections: Mapping[int, object], gt: GroundTruth, frames: Sequence[int] | None
) -> list[int]:
    if frames is not None:
        return [int(f) for f in frames]
    return sorted(set(gt.frames()) | {int(f) for f in detections})


def _evaluate(
    detections: Mapping[int, object],
    gt: GroundTruth,
    frames: Sequence[int] | None,
    frame_counts: Callable[[np.ndarray, int], _FrameCounts],
) -> ModaResult:
    empty = np.zeros((0, 4))
    chosen = _frames_to_evaluate(detections, gt, frames)
    return _accumulate(frame_counts(as_boxes(detections.get(f, empty)), f) for f in chosen)


def clear_mod(
    detections: Mapping[int, object],
    gt: GroundTruth,
    frames: Sequence[int] | None = None,
    iou_threshold: float = MATCH_IOU,
) -> ModaResult:
    """CLEAR MOD (MODA, N-MODP) of image-plane detections against ``gt``.

    Args:
        detections: frame number → (N, 4) ``x1, y1, x2, y2`` pixel boxes (or objects with a
            ``boxes`` attribute, e.g. :class:`evaluation.metrics.detector.Detections`). Frames
            missing here have no detections.
        gt: ground truth in the same pixel coordinates as the detections.
        frames: frame numbers to evaluate; ``None`` evaluates every frame that has ground
            truth rows or detections.
        iou_threshold: minimum IoU of a match (and of an ignore-region hit), in (0, 1].

    Returns:
        The pooled :class:`ModaResult` (see the module docstring for the rules).
    """
    if not 0.0 < iou_threshold <= 1.0:
        raise ValueError(f"iou_threshold must be in (0, 1], got {iou_threshold}")

    def frame_counts(boxes: np.ndarray, frame: int) -> _FrameCounts:
        iou = box_iou(boxes, gt.boxes_xyxy(frame))
        hit = ignore_hits(boxes, gt.ignore_xyxy(frame), iou_threshold)
        return _count_frame(iou, iou >= iou_threshold, hit)

    return _evaluate(detections, gt, frames, frame_counts)


def ignore_hits(boxes: np.ndarray, ignore: np.ndarray, iou_threshold: float = MATCH_IOU,
                ) -> np.ndarray:  # fmt: skip
    """``(N,)`` bool: which of ``(N, 4)`` boxes an ignore region of ``(M, 4)`` (both
    ``x1, y1, x2, y2``) drops when unmatched: IoU >= ``iou_threshold`` with one, or at least
    :data:`IGNORE_COVERAGE` of the box's area inside one."""
    hit = np.zeros(len(boxes), dtype=bool)
    if len(ignore) and len(boxes):
        area = box_area(boxes)[:, None]
        inside = intersection_area(boxes, ignore)
        covered = np.divide(inside, area, out=np.zeros_like(inside), where=area > 0)
        hit = ((box_iou(boxes, ignore) >= iou_threshold) | (covered >= IGNORE_COVERAGE)).any(1)
    return hit


def foot_points(boxes_xyxy: np.ndarray) -> np.ndarray:
    """(N, 2) float64 bottom-centre ``u, v`` pixels of (N, 4) ``x1, y1, x2, y2`` boxes."""
    boxes = np.asarray(boxes_xyxy, dtype=np.float64).reshape(-1, 4)
    return np.stack([(boxes[:, 0] + boxes[:, 2]) / 2.0, boxes[:, 3]], axis=1)


def apply_homography(points: np.ndarray, h: np.ndarray) -> np.ndarray:
    """(N, 2) points mapped by a (3, 3) homography; NaN where the point maps to infinity."""
    pts = np.asarray(points, dtype=np.float64).reshape(-1, 2)
    hom = np.concatenate([pts, np.ones((len(pts), 1))], axis=1) @ np.asarray(h, np.float64).T
    w = hom[:, 2:3]
    with np.errstate(divide="ignore", invalid="ignore"):
        out = hom[:, :2] / w
    out[(np.abs(w[:, 0]) < 1e-12) | ~np.isfinite(out).all(axis=1)] = np.nan
    return out


def fit_ground_homography(
    gt: GroundTruth, ransac_threshold_m: float | None = 0.5, min_rows: int = 8
) -> np.ndarray:
    """Fits the image → ground-plane homography from ground truth with world coordinates.

    Every row with known ``wx, wy`` (counted or ignored) gives one correspondence: the foot
    point (bottom centre of the box, pixels) → ``wx, wy`` (metres).

    Args:
        gt: ground truth with world coordinates (MOT15 PETS09-S2L1, for example).
        ransac_threshold_m: RANSAC reprojection threshold in metres; ``None`` fits all rows by
            least squares (``cv2.findHomography`` method 0).
        min_rows: fewest rows with world coordinates to accept (at least 4).

    Returns:
        (3, 3) float64 homography ``H`` with ``H[2, 2] == 1``: ``[wx, wy, 1] ~ H @ [u, v, 1]``.

    Raises:
        GroundPlaneError: no world coordinates, fewer than ``min_rows`` rows, or a degenerate
            fit.
    """
    known = np.isfinite(gt.world_xy).all(axis=1)
    if not known.any():
        raise GroundPlaneError(
            f"ground truth {gt.source or '(in memory)'} has no world coordinates (wx, wy); "
            "the ground-plane metric needs MOT15 rows with wx, wy (e.g. PETS09-S2L1)"
        )
    need = max(_FOOT_MIN_ROWS, min_rows)
    if known.sum() < need:
        raise GroundPlaneError(
            f"only {int(known.sum())} ground-truth rows have world coordinates; "
            f"fitting a homography needs at least {need}"
        )
    src = foot_points(xywh_to_xyxy(gt.boxes[known])).astype(np.float32)
    dst = gt.world_xy[known].astype(np.float32)
    if ransac_threshold_m is None:
        h, _ = cv2.findHomography(src, dst, 0)
    else:
        h, _ = cv2.findHomography(src, dst, cv2.RANSAC, float(ransac_threshold_m))
    if h is None or not np.isfinite(h).all() or abs(h[2, 2]) < 1e-12:
        raise GroundPlaneError("homography fit failed: the foot points are degenerate")
    return np.asarray(h / h[2, 2], dtype=np.float64)


def image_to_ground(boxes_xyxy: np.ndarray, h: np.ndarray) -> np.ndarray:
    """(N, 2) float64 ground ``wx, wy`` metres of the foot points of (N, 4) pixel boxes."""
    h = np.asarray(h, dtype=np.float64)
    if h.shape != (3, 3):
        raise GroundPlaneError(f"homography must be (3, 3), got {h.shape}")
    return apply_homography(foot_points(boxes_xyxy), h)


def _ground_positions(world: np.ndarray, boxes: np.ndarray, h: np.ndarray) -> np.ndarray:
    """Known world positions, falling back to the projected foot point where unknown."""
    out = world.copy()
    unknown = ~np.isfinite(out).all(axis=1)
    if unknown.any():
        out[unknown] = image_to_ground(boxes[unknown], h)
    return out


def _distances(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """(N, M) Euclidean distances, inf where a position is unknown."""
    d = np.linalg.norm(a[:, None, :] - b[None, :, :], axis=2)
    return np.where(np.isfinite(d), d, np.inf)


def clear_mod_ground(
    detections: Mapping[int, object],
    gt: GroundTruth,
    h: np.ndarray,
    frames: Sequence[int] | None = None,
    distance_m: float = GROUND_MATCH_M,
) -> ModaResult:
    """CLEAR MOD on the ground plane: matches by distance between foot points in metres.

    Detections (pixel boxes, as in :func:`clear_mod`) are projected by their foot point with
    ``h`` (from :func:`fit_ground_homography`); ground-truth objects use their world
    coordinates, or their projected foot point where those are unknown. A pair matches when
    the distance is <= ``distance_m``; its overlap, averaged into MODP, is ``1 - d /
    distance_m`` (1 at the same spot, 0 at the threshold). Unmatched detections within
    ``distance_m`` of an ignore object are dropped.
    """
    if not distance_m > 0:
        raise ValueError(f"distance_m must be > 0, got {distance_m}")

    def frame_counts(boxes: np.ndarray, frame: int) -> _FrameCounts:
        det = image_to_ground(boxes, h)
        dist = _distances(det, _ground_positions(gt.world(frame), gt.boxes_xyxy(frame), h))
        ignore = _ground_positions(gt.ignore_world(frame), gt.ignore_xyxy(frame), h)
        hit = (_distances(det, ignore) <= distance_m).any(axis=1)
        score = np.where(np.isfinite(dist), 1.0 - dist / distance_m, 0.0)
        return _count_frame(score, dist <= distance_m, hit)

    return _evaluate(detections, gt, frames, frame_counts)
