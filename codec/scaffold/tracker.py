"""Multi-person tracking: a person keeps one track id across frames.

:class:`PersonTracker` is a SORT-style tracker (Bewley et al., 2016) over person detections:

1. **Prediction.** Each track carries a linear Kalman filter on the box centre and size and
   their velocities, state ``cx, cy, w, h, vcx, vcy, vw, vh`` in frame pixels (per frame),
   with a constant-velocity motion model. Process and measurement noise scale with the box
   height (small, far people move fewer pixels), as in DeepSORT: standard deviations
   ``std_position * h`` for positions and sizes and ``std_velocity * h`` for velocities.
   A gap of ``dt`` frames between updates is ``dt`` prediction steps.
2. **Association.** Detections scoring below ``min_score`` are dropped; the others are matched
   one-to-one to the tracks by the Hungarian algorithm
   (:func:`scipy.optimize.linear_sum_assignment`) in three stages, each on what the earlier
   ones left: (a) confirmed tracks on the IoU of their predicted box with the detection,
   pairs below ``iou_match`` excluded; (b) confirmed tracks on the Mahalanobis distance of
   the detection's ``cx, cy, w, h`` under the track's filter, gated at ``gate_mahalanobis``
   (this bridges jumps IoU cannot: a track lost for a few frames, or detected only every
   k-th frame, before its velocity is known); (c) tentative tracks on IoU as in (a).
   Confirmed tracks choose first, so a duplicate detection (NMS leaves some) cannot start a
   tentative track that then takes a person's detections from the person's track.
3. **Bookkeeping.** A matched track is corrected with its detection. An unmatched detection
   starts a new *tentative* track. A tentative track becomes *confirmed* after ``min_hits``
   matched frames, or at once during the first ``min_hits`` updates (so the first frames are
   not empty); a tentative track that misses a frame is dropped, a confirmed one after more
   than ``max_missed`` frames without a match.

Ids: a track gets its id (>= 1) when it is confirmed, in order of confirmation (ties in order of
creation), so the ids that reach the bitstream are small and have no gaps; an id is never
reused, not even after its track is dropped. A person gone for more than ``max_missed`` frames
comes back with a new id.

Output: the confirmed tracks matched in this frame, with the matched *detection's* box and
score (not the filtered one: the detector's box is what the segmenter and the decoder see);
with ``output_predicted`` also the confirmed tracks that have coasted (been unmatched) for at
most ``max_coast`` frames, at their predicted box and last score. Everything is deterministic:
no randomness, no global state; the order of the output is ascending id.

:class:`ScaffoldDetector` puts a :class:`~codec.scaffold.detector.PersonDetector` in front of a
tracker and runs the detector only every ``detect_every``-th frame; on the frames between, the
tracks are the tracker's predictions (a speed knob for the edge).
"""

from __future__ import annotations

import operator
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from scipy.optimize import linear_sum_assignment

from semcodec.codec.core.types import Tracks
from semcodec.codec.scaffold.detector import Detections, PersonDetector, box_iou, check_frame

_DIM = 4  # measured: cx, cy, w, h
_MIN_SIZE = 1.0  # predicted widths and heights are kept >= this many pixels


@dataclass(frozen=True)
class TrackerConfig:
    """How detections are linked into tracks.

    Attributes:
        iou_match: least IoU between a predicted track box and a detection to match them,
            in (0, 1].
        max_missed: a confirmed track is dropped after more than this many frames without a
            matching detection (>= 0).
        min_hits: matched frames before a track is confirmed and output (>= 1).
        min_score: detections scoring below this are ignored, in [0, 1].
        output_predicted: also output confirmed tracks that are coasting (unmatched for at
            most ``max_coast`` frames) at their predicted box.
        max_coast: frames a coasting track is still output with ``output_predicted`` (>= 0,
            at most ``max_missed``).
        std_position: process and measurement noise of centre and size, as a fraction of the
            box height per frame (> 0).
        std_velocity: process noise of the velocities, as a fraction of the box height per
            frame (> 0).
        gate_mahalanobis: after IoU matching, confirmed tracks left unmatched may still take
            a detection left unmatched whose ``cx, cy, w, h`` lies within this squared
            Mahalanobis distance of the track's prediction (the default is the 95 % point of
            chi-square with 4 degrees of freedom); ``None`` turns that stage off.
        low_score: detections scoring in ``[low_score, min_score)`` may still be matched, by
            IoU, to the confirmed tracks every other detection left unmatched (a last stage),
            but never start a track (two-threshold association, as in ByteTrack); ``None``:
            every detection below ``min_score`` is dropped.
    """

    iou_match: float = 0.3
    max_missed: int = 5
    min_hits: int = 2
    min_score: float = 0.5
    output_predicted: bool = False
    max_coast: int = 2
    std_position: float = 1.0 / 20.0
    std_velocity: float = 1.0 / 80.0
    gate_mahalanobis: float | None = 9.4877
    low_score: float | None = None

    def __post_init__(self) -> None:
        def is_int(value: object) -> bool:
            return isinstance(value, int | np.integer) and not isinstance(value, bool)

        checks = (
            (0.0 < self.iou_match <= 1.0, "iou_match must be in (0, 1]"),
            (is_int(self.max_missed) and self.max_missed >= 0, "max_missed must be an int >= 0"),
            (is_int(self.min_hits) and self.min_hits >= 1, "min_hits must be an int >= 1"),
            (0.0 <= self.min_score <= 1.0, "min_score must be in [0, 1]"),
            (
                is_int(self.max_coast) and 0 <= self.max_coast <= self.max_missed,
                "max_coast must be an int in [0, max_missed]",
            ),
            (self.low_score is None or 0.0 <= self.low_score <= self.min_score,
             "low_score must be None or in [0, min_score]"),
            (self.std_position > 0, "std_position must be > 0"),
            (self.std_velocity > 0, "std_velocity must be > 0"),
            (
                self.gate_mahalanobis is None or self.gate_mahalanobis > 0,
                "gate_mahalanobis must be > 0 or None",
            ),
        )
        for ok, message in checks:
            if not ok:
                raise ValueError(f"TrackerConfig: {message}; got {self}")


class _Track:
    """One track: Kalman state, counters and the last matched detection."""

    def __init__(self, serial: int, box: np.ndarray, score: float, config: TrackerConfig):
        self.serial = serial  # creation order, internal
        self.id = 0  # public id, set on confirmation
        self.hits = 1
        self.missed = 0  # frames since the last match
        self.box = box.astype(np.float32)  # last matched detection box
        self.score = float(score)
        z = _box_to_z(box)
        h = z[3]
        self.mean = np.concatenate([z, np.zeros(_DIM)])
        std = np.concatenate(
            [
                np.full(_DIM, 2.0 * config.std_position * h),
                np.full(_DIM, 10.0 * config.std_velocity * h),
            ]
        )
        self.cov = np.diag(std**2)

    @property
    def confirmed(self) -> bool:
        return self.id > 0


def _box_to_z(box: np.ndarray) -> np.ndarray:
    """``x1, y1, x2, y2`` → ``cx, cy, w, h`` (float64; w, h >= _MIN_SIZE)."""
    x1, y1, x2, y2 = (float(v) for v in box)
    return np.array(
        [(x1 + x2) / 2, (y1 + y2) / 2, max(x2 - x1, _MIN_SIZE), max(y2 - y1, _MIN_SIZE)]
    )


def _z_to_box(z: np.ndarray) -> np.ndarray:
    cx, cy, w, h = z[:_DIM]
    w, h = max(w, _MIN_SIZE), max(h, _MIN_SIZE)
    return np.array([cx - w / 2, cy - h / 2, cx + w / 2, cy + h / 2], dtype=np.float32)


_F = np.eye(2 * _DIM)
_F[:_DIM, _DIM:] = np.eye(_DIM)
_H = np.eye(_DIM, 2 * _DIM)


def _predict(
    mean: np.ndarray, cov: np.ndarray, steps: int, config: TrackerConfig
) -> tuple[np.ndarray, np.ndarray]:
    """``steps`` constant-velocity prediction steps of one frame each (new arrays)."""
    for _ in range(steps):
        h = max(mean[3], _MIN_SIZE)
        q = np.concatenate(
            [np.full(_DIM, config.std_position * h), np.full(_DIM, config.std_velocity * h)]
        )
        mean = _F @ mean
        cov = _F @ cov @ _F.T + np.diag(q**2)
        mean[2:4] = np.maximum(mean[2:4], _MIN_SIZE)
    return mean, cov


def _correct(
    mean: np.ndarray, cov: np.ndarray, z: np.ndarray, config: TrackerConfig
) -> tuple[np.ndarray, np.ndarray]:
    """Kalman correction with the measurement ``z = cx, cy, w, h``."""
    r = np.full(_DIM, config.std_position * max(mean[3], _MIN_SIZE)) ** 2
    s = _H @ cov @ _H.T + np.diag(r)
    gain = np.linalg.solve(s, _H @ cov).T  # cov H^T S^-1 (S symmetric)
    mean = mean + gain @ (z - _H @ mean)
    cov = (np.eye(2 * _DIM) - gain @ _H) @ cov
    cov = (cov + cov.T) / 2
    mean[2:4] = np.maximum(mean[2:4], _MIN_SIZE)
    return mean, cov


def _assign(
    score: np.ndarray, gate: float, track_mask: np.ndarray, box_mask: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """Hungarian one-to-one matching of masked tracks (rows) and boxes (columns) maximising
    the total ``score`` (in [0, 1]) over pairs with ``score >= gate``; (rows, cols) of the pairs.
    """
    empty = np.zeros(0, dtype=np.int64)
    valid = (score >= gate) & (score > 0) & track_mask[:, None] & box_mask[None, :]
    if not valid.any():
        return empty, empty
    # A forbidden pair costs more than any set of allowed ones: the number of matches is
    # maximised first, then their total score.
    cost = np.where(valid, 1.0 - score, float(min(score.shape)) + 1.0)
    rows, cols = linear_sum_assignment(cost)
    keep = valid[rows, cols]
    return rows[keep].astype(np.int64), cols[keep].astype(np.int64)


def _frame_index(frame_number: object) -> int:
    try:
        if isinstance(frame_number, bool):
            raise TypeError
        return operator.index(frame_number)  # type: ignore[arg-type]
    except TypeError:
        raise TypeError(f"frame_number must be an int, got {frame_number!r}") from None


def _tracks(boxes: list, scores: list, ids: list) -> Tracks:
    if not ids:
        return Tracks.empty()
    return Tracks(
        np.stack(boxes).astype(np.float32),
        np.asarray(scores, dtype=np.float32),
        np.asarray(ids, dtype=np.int32),
    )


class PersonTracker:
    """SORT-style multi-person tracker (see the module docstring).

    Args:
        config: matching, confirmation and noise settings.
    """

    def __init__(self, config: TrackerConfig | None = None) -> None:
        self.config = config or TrackerConfig()
        self.reset()

    def reset(self) -> None:
        """Forgets every track; ids start again at 1."""
        self._tracks: list[_Track] = []
        self._next_serial = 0
        self._next_id = 1
        self._updates = 0
        self._last_frame: int | None = None
        self._shown: list[_Track] = []  # tracks of the last output

    @property
    def last_frame(self) -> int | None:
        """The frame number of the last :meth:`update`, ``None`` before the first."""
        return self._last_frame

    def _steps_to(self, frame_number: object, allow_equal: bool) -> int:
        number = _frame_index(frame_number)
        if self._last_frame is None:
            return 0
        steps = number - self._last_frame
        if steps < 0 or (steps == 0 and not allow_equal):
            raise ValueError(f"frame numbers must increase: got {number} after {self._last_frame}")
        return steps

    def update(self, detections: Detections, frame_number: int) -> Tracks:
        """Links one frame's detections to the tracks.

        Args:
            detections: the frame's person detections (boxes in frame pixels).
            frame_number: the frame's number; must increase from call to call (gaps are
                predicted over, and count as frames without a match).

        Returns:
            The confirmed tracks of this frame, ascending ids.

        Raises:
            TypeError: ``detections`` is not :class:`Detections`, or ``frame_number`` not an int.
            ValueError: frame numbers do not increase, or a box is not finite or is inverted.
        """
        if not isinstance(detections, Detections):
            raise TypeError(f"detections must be Detections, got {type(detections).__name__}")
        cfg = self.config
        steps = self._steps_to(frame_number, allow_equal=False)
        boxes, scores = detections.boxes, detections.scores
        if not (np.isfinite(boxes).all() and np.isfinite(scores).all()):
            raise ValueError("detections must have finite boxes and scores")
        if (boxes[:, 2] < boxes[:, 0]).any() or (boxes[:, 3] < boxes[:, 1]).any():
            raise ValueError("detection boxes must be x1, y1, x2, y2 with x2 >= x1, y2 >= y1")
        low = cfg.min_score if cfg.low_score is None else cfg.low_score
        weak = (scores >= low) & (scores < cfg.min_score)
        keep = scores >= cfg.min_score
        weak_boxes, weak_scores = boxes[weak], scores[weak]
        boxes, scores = boxes[keep], scores[keep]

        for track in self._tracks:
            track.mean, track.cov = _predict(track.mean, track.cov, steps, cfg)
        predicted = np.array([_z_to_box(t.mean) for t in self._tracks]).reshape(-1, 4)
        rows, cols = self._match(predicted, boxes)
        if len(weak_boxes):  # weak detections continue confirmed tracks left unmatched
            rows, cols, boxes, scores = self._match_weak(predicted, rows, cols, boxes, scores,
                                                         weak_boxes, weak_scores)  # fmt: skip
        matched = set(rows.tolist())
        for r, c in zip(rows.tolist(), cols.tolist(), strict=True):
            track = self._tracks[r]
            track.mean, track.cov = _correct(track.mean, track.cov, _box_to_z(boxes[c]), cfg)
            track.box, track.score = boxes[c].copy(), float(scores[c])
            track.hits += 1
            track.missed = 0
        survivors = []
        for i, track in enumerate(self._tracks):
            if i not in matched:
                track.missed += max(steps, 1)
                if not track.confirmed or track.missed > cfg.max_missed:
                    continue
            survivors.append(track)
        taken = set(cols.tolist())
        for c in range(len(boxes)):
            if c not in taken:
                survivors.append(_Track(self._next_serial, boxes[c], float(scores[c]), cfg))
                self._next_serial += 1
        self._tracks = survivors
        self._updates += 1
        self._last_frame = _frame_index(frame_number)

        warmup = self._updates <= cfg.min_hits
        for track in self._tracks:  # in creation order
            if not track.confirmed and track.missed == 0 and (track.hits >= cfg.min_hits or warmup):
                track.id = self._next_id
                self._next_id += 1
        self._shown = sorted(
            (t for t in self._tracks if t.confirmed and self._visible(t)), key=lambda t: t.id
        )
        return _tracks(
            [t.box if t.missed == 0 else _z_to_box(t.mean) for t in self._shown],
            [t.score for t in self._shown],
            [t.id for t in self._shown],
        )

    def _match_weak(self, predicted: np.ndarray, rows: np.ndarray, cols: np.ndarray,
                    boxes: np.ndarray, scores: np.ndarray, weak_boxes: np.ndarray,
                    weak_scores: np.ndarray) -> tuple[np.ndarray, ...]:  # fmt: skip
        """The matches with a last stage added: the confirmed tracks left unmatched, by IoU
        (at least ``iou_match``) with the weak detections; the weak boxes matched are
        appended to ``boxes``/``scores`` (so they cannot start tracks: the unmatched weak
        ones are not). Returns ``(rows, cols, boxes, scores)``."""
        left = np.array([t.confirmed for t in self._tracks], dtype=bool)
        left[rows] = False
        track_index = np.flatnonzero(left)
        if not len(track_index):
            return rows, cols, boxes, scores
        iou = box_iou(predicted[track_index], weak_boxes)
        r, c = linear_sum_assignment(-iou)
        ok = iou[r, c] >= self.config.iou_match
        r, c = track_index[r[ok]], c[ok]
        rows = np.concatenate([rows, r]).astype(int)
        cols = np.concatenate([cols, len(boxes) + np.arange(len(c))]).astype(int)
        boxes = np.concatenate([boxes, weak_boxes[c]]).reshape(-1, 4)
        scores = np.concatenate([scores, weak_scores[c]])
        return rows, cols, boxes, scores

    def _visible(self, track: _Track) -> bool:
        if track.missed == 0:
            return True
        return self.config.output_predicted and track.missed <= self.config.max_coast

    def _match(self, predicted: np.ndarray, boxes: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Matched (track index, box index) pairs, in three stages.

        1. Confirmed tracks by IoU with their predicted boxes.
        2. Confirmed tracks left by Mahalanobis distance under their Kalman filter, to the
           boxes left (catches a track that was lost for a few frames, or detected every
           k-th frame, and moved more than IoU can bridge before its velocity is known).
        3. Tentative tracks by IoU, to the boxes left.

        Confirmed tracks choose first: a duplicate detection (NMS leaves some) or a person's
        own detection after a gap cannot start a tentative track that then takes the person's
        detections from the confirmed one.
        """
        confirmed = np.array([t.confirmed for t in self._tracks], dtype=bool)
        free_tracks, free_boxes = confirmed.copy(), np.ones(len(boxes), bool)
        pairs: list[tuple[np.ndarray, np.ndarray]] = []
        iou = box_iou(predicted, boxes)
        match = self.config.iou_match
        stages = [(iou, match, True), (None, 0.0, True), (iou, match, False)]
        for score, gate, on_confirmed in stages:
            if score is None:
                if self.config.gate_mahalanobis is None:
                    continue
                score = self._closeness(boxes, free_tracks, free_boxes)
                gate = 1.0 / (1.0 + self.config.gate_mahalanobis)
            if not on_confirmed:
                free_tracks = ~confirmed
            rows, cols = _assign(score, gate, free_tracks, free_boxes)
            free_tracks[rows], free_boxes[cols] = False, False
            pairs.append((rows, cols))
        return np.concatenate([r for r, _ in pairs]), np.concatenate([c for _, c in pairs])

    def _closeness(
        self, boxes: np.ndarray, track_mask: np.ndarray, box_mask: np.ndarray
    ) -> np.ndarray:
        """(T, B) ``1 / (1 + d2)`` for squared Mahalanobis distances ``d2`` of the boxes'
        ``cx, cy, w, h`` from each masked track's predicted measurement (0 elsewhere)."""
        out = np.zeros((len(self._tracks), len(boxes)))
        if not track_mask.any() or not box_mask.any():
            return out
        z = np.array([_box_to_z(b) for b in boxes])
        for i in np.flatnonzero(track_mask):
            track = self._tracks[i]
            r = np.full(_DIM, self.config.std_position * max(track.mean[3], _MIN_SIZE)) ** 2
            s = _H @ track.cov @ _H.T + np.diag(r)
            y = z - _H @ track.mean
            d2 = np.einsum("bi,bi->b", y, np.linalg.solve(s, y.T).T)
            out[i] = np.where(box_mask, 1.0 / (1.0 + d2), 0.0)
        return out

    def predict(self, frame_number: int) -> Tracks:
        """The tracks of the last :meth:`update`, moved to ``frame_number`` by their motion.

        Does not change the tracker (use it for frames that are not detected). The boxes are
        predictions, the scores the last matched ones.

        Args:
            frame_number: >= the frame number of the last update (equal gives the last output,
                with predicted boxes for the coasting tracks only).

        Raises:
            TypeError: ``frame_number`` not an int.
            ValueError: ``frame_number`` is before the last update.
        """
        steps = self._steps_to(frame_number, allow_equal=True)
        boxes = []
        for track in self._shown:
            if steps == 0 and track.missed == 0:
                boxes.append(track.box)
            else:
                mean, _ = _predict(track.mean, track.cov, steps, self.config)
                boxes.append(_z_to_box(mean))
        return _tracks(boxes, [t.score for t in self._shown], [t.id for t in self._shown])


def clip_tracks(tracks: Tracks, width: int, height: int) -> Tracks:
    """``tracks`` with boxes clipped to a ``width x height`` frame; boxes left with no area
    are removed."""
    if len(tracks) == 0:
        return tracks
    boxes = tracks.boxes.copy()
    boxes[:, [0, 2]] = np.clip(boxes[:, [0, 2]], 0, width)
    boxes[:, [1, 3]] = np.clip(boxes[:, [1, 3]], 0, height)
    keep = (boxes[:, 2] > boxes[:, 0]) & (boxes[:, 3] > boxes[:, 1])
    return Tracks(boxes[keep], tracks.scores[keep], tracks.ids[keep])


class ScaffoldDetector:
    """Detection and tracking of people for the scaffold: detect every k-th frame, track
    in between.

    On a detected frame the detector's boxes go through :meth:`PersonTracker.update`; on the
    ``detect_every - 1`` frames after it the output is :meth:`PersonTracker.predict`. Boxes
    are clipped to the frame. The first frame given is always detected, and so is any frame
    ``detect_every`` or more frames after the last detected one.

    Args:
        detector: the person detector (its score threshold should be <= the tracker's
            ``min_score``).
        config: the tracker's settings.
        detect_every: run the detector on every this-many-th frame (>= 1).
    """

    def __init__(
        self,
        detector: PersonDetector,
        config: TrackerConfig | None = None,
        detect_every: int = 1,
    ) -> None:
        if isinstance(detect_every, bool) or not isinstance(detect_every, int) or detect_every < 1:
            raise ValueError(f"detect_every must be an int >= 1, got {detect_every!r}")
        self.detector = detector
        self.tracker = PersonTracker(config)
        self.detect_every = detect_every
        self._last_number: int | None = None
        #: frame number -> (the detector that ran, its detections), see :meth:`prefetch`
        self._prefetched: dict[int, tuple[PersonDetector, Detections]] = {}

    def reset(self) -> None:
        """Forgets the tracks (a new sequence or a scene cut)."""
        self.tracker.reset()
        self._last_number = None

    def prefetch(self, frame_number: int, detections: Detections) -> None:
        """Holds ``detections``, which :attr:`detector` found on the frame that will be
        given as ``frame_number``, so that frame is not detected twice (the edge detects
        its look-ahead frames before coding them). Used only while the detector is the
        same object; dropped once that frame has passed."""
        self._prefetched[_frame_index(frame_number)] = (self.detector, detections)

    def _detect(self, frame: np.ndarray, number: int) -> Detections:
        held = self._prefetched.pop(number, None)
        for passed in [n for n in self._prefetched if n < number]:
            del self._prefetched[passed]
        if held is not None and held[0] is self.detector:
            return held[1]
        return self.detector.detect(frame)

    def __call__(self, frame: np.ndarray, frame_number: int) -> Tracks:
        """The tracked people of one frame.

        Args:
            frame: (H, W, 3) uint8 RGB.
            frame_number: increasing from call to call.

        Returns:
            Tracks in frame pixels, ascending ids.
        """
        frame = check_frame(frame)
        number = _frame_index(frame_number)
        if self._last_number is not None and number <= self._last_number:
            raise ValueError(f"frame numbers must increase: got {number} after {self._last_number}")
        last_detected = self.tracker.last_frame
        if last_detected is None or number - last_detected >= self.detect_every:
            tracks = self.tracker.update(self._detect(frame, number), number)
        else:
            tracks = self.tracker.predict(number)
        self._last_number = number
        height, width = frame.shape[:2]
        return clip_tracks(tracks, width, height)


class TrackSmoother:
    """Per-track alpha-beta filter on a few numbers of each track (e.g. a box's centre and
    height, frame pixels): each frame the state moves by its velocity, then ``gain`` of the
    way to the new value (the velocity by ``gain**2 / (2 - gain)`` of the error, the
    critically damped choice). Scale-free: the gains are fractions, not pixels; a constant
    velocity is followed without lag once learnt. A track absent from a frame starts afresh
    when it comes back.

    Args:
        gain: 0 < gain <= 1; 1 returns the values unchanged.

    Raises:
        ValueError: a gain outside (0, 1].
    """

    def __init__(self, gain: float = 1.0) -> None:
        if not 0.0 < float(gain) <= 1.0:
            raise ValueError(f"smoothing gain must be in (0, 1] (1: off), got {gain!r}")
        self.gain = float(gain)
        self.reset()

    def reset(self) -> None:
        #: track id -> (value (D,) float64, velocity (D,) float64 per frame)
        self._state: dict[int, tuple[np.ndarray, np.ndarray]] = {}

    def update(self, ids: Sequence[int] | np.ndarray, values: np.ndarray) -> np.ndarray:
        """``(N, D)`` float64 smoothed values of tracks ``ids`` ``(N,)`` given this frame's
        ``values`` ``(N, D)``."""
        values = np.asarray(values, np.float64)
        if self.gain >= 1.0:
            return values.copy()
        beta = self.gain**2 / (2.0 - self.gain)
        state, out = {}, values.copy()
        for k, track_id in enumerate(int(i) for i in ids):
            if track_id in self._state:
                value, velocity = self._state[track_id]
                error = values[k] - (value + velocity)
                value, velocity = value + velocity + self.gain * error, velocity + beta * error
            else:
                value, velocity = values[k].copy(), np.zeros_like(values[k])
            state[track_id] = (value, velocity)
            out[k] = value
        self._state = state
        return out

