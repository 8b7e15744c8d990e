"""Tracked person boxes coded as quantised residuals of a constant-velocity prediction.

Quantisation (what :meth:`BoxCoder.quantize` returns and the decoder reconstructs): each
corner ``x1, y1, x2, y2`` (frame pixels) becomes ``k = rint(v / step_px)`` (float64, ties to
even) and comes back as ``k * step_px`` (float32); boxes are sorted by track id (unique,
``1 <= id < 2**24``; at most 256 boxes per frame). A box's ``x2 > x1`` and ``y2 > y1`` hold
after quantisation (a box thinner than a step is widened to one step).

State: ``previous`` maps a track id to its last two decoded boxes as ``(2, 4)`` int64 steps
(``[before, last]``; ``before == last`` for a box seen once); :meth:`BoxCoder.update_state`
builds the next state from the decoded boxes. Encoder and decoder must hold the same state;
``{}`` after a reset or at a keyframe.

Frames without boxes: a stream may leave a frame's boxes out (the header's ``box_rate``);
the decoder then draws every track of ``previous`` at its prediction (:meth:`BoxCoder.
predicted`) and the state stays. ``ahead = (age, gap)`` says how far the prediction goes:
``age`` frames after the last frame that sent boxes, which came ``gap`` frames after the one
before it; the velocity ``last - before`` is scaled by ``age / gap`` (rounded half up, in
integers: the same on every machine). ``(1, 1)``, boxes on every frame, is ``2 last -
before``.

Payload: one rANS stream of

1. track ids: for each id of ``previous`` (ascending) a present/absent flag; the number of new
   ids; the new ids as gaps (:mod:`codec.entropy.ids`);
2. one scale index into :data:`SCALES` (the encoder picks the cheapest);
3. per **tracked** box: the four residuals ``k - (2 last - before)`` (constant velocity);
4. per **new** box: ``x1, y1`` uniform around the frame centre (escaped beyond 2047 steps),
   then the width and height with a Laplacian around a typical person's size.

Measured (level 1 on PETS09-S2L1-full 501-795, 768x576, 2-px steps, 5.9 people a frame):
4,911 bytes for 295 frames, about 2.8 bytes per box per frame.
"""

from __future__ import annotations

from collections.abc import Mapping
from functools import lru_cache

import numpy as np

from semcodec.codec.core.types import Tracks
from semcodec.codec.entropy.ids import id_gaps, ids_from_gaps
from semcodec.codec.entropy.rans import (
    CdfTable,
    EntropyCodingError,
    RansReader,
    RansWriter,
    cdf_from_counts,
    laplace_table,
    uniform_table,
)

__all__ = ["SCALES", "BoxCoder"]

#: Laplace scales (in quantisation steps) of the tracked residuals, one chosen per frame.
SCALES = tuple(float(s) for s in np.geomspace(0.2, 32.0, 16))
_RES_MAX_ABS = 127
_POS_MAX_ABS = 2047
_SIZE_SCALE = 24.0
_SIZE_MAX_ABS = 255
_MAX_ID = 1 << 24
_MAX_BOXES = 256
#: The most steps :meth:`BoxCoder.snap` moves a corner: a zone of a few percent of a large
#: person's height (4 steps of a 300-px person) cost zoomed PETS 501-560 14.5 MODA points at
#: 0.004 BPP for 1 % of its stream; one step cost none there (docs/journal.md, issue 51).
MAX_ZONE_STEPS = 1


@lru_cache(maxsize=1)
def _tables() -> dict[str, CdfTable]:
    return {
        "res": laplace_table(SCALES, _RES_MAX_ABS),
        "pos": uniform_table(2 * _POS_MAX_ABS + 1, -_POS_MAX_ABS),
        "size": laplace_table([_SIZE_SCALE], _SIZE_MAX_ABS),
        "flag": CdfTable.from_cdfs([cdf_from_counts(np.array([1, 19]))], [0]),
        "count": CdfTable.from_cdfs([cdf_from_counts(np.array([64, 16, 8, 4, 2, 1, 1, 1]))], [0]),
        "gap": laplace_table([4.0], 31),
        "scale": uniform_table(len(SCALES)),
    }


class BoxCoder:
    """Codes one frame's tracked boxes against the previous frames' decoded boxes.

    Args:
        step_px: corner quantisation step in frame pixels (> 0).
        frame_size: ``(width, height)``; new boxes are coded around its centre.
    """

    def __init__(self, step_px: float, frame_size: tuple[int, int]) -> None:
        step = float(step_px)
        if not (np.isfinite(step) and step > 0):
            raise EntropyCodingError(f"step_px must be finite and > 0, got {step_px}")
        self.step_px = step
        self._centre = np.array([frame_size[0] / 2, frame_size[1] / 2], np.float64) / step
        self._centre = np.rint(self._centre).astype(np.int64)
        self._typical = np.rint(np.array([40.0, 100.0]) / step).astype(np.int64)

    # ------------------------------------------------------------------ quantisation

    def _quantize(self, tracks: Tracks) -> tuple[np.ndarray, np.ndarray]:
        """``(ids (n,) int64 ascending, steps (n, 4) int64)``."""
        ids = np.asarray(tracks.ids, np.int64)
        boxes = np.asarray(tracks.boxes, np.float64).reshape(-1, 4)
        if ids.shape != (boxes.shape[0],):
            raise EntropyCodingError(f"{ids.size} ids for {boxes.shape[0]} boxes")
        if ids.size > _MAX_BOXES:
            raise EntropyCodingError(f"at most {_MAX_BOXES} boxes per frame, got {ids.size}")
        if ids.size and (ids.min() < 1 or ids.max() >= _MAX_ID):
            raise EntropyCodingError(f"track ids must be 1..{_MAX_ID - 1}")
        if np.unique(ids).size != ids.size:
            raise EntropyCodingError("track ids must be unique within a frame")
        if not np.isfinite(boxes).all():
            raise EntropyCodingError("boxes must be finite")
        order = np.argsort(ids, kind="stable")
        k = np.rint(boxes[order] / self.step_px).astype(np.int64)
        k[:, 2] = np.maximum(k[:, 2], k[:, 0] + 1)
        k[:, 3] = np.maximum(k[:, 3], k[:, 1] + 1)
        return ids[order], k

    def _tracks(self, ids: np.ndarray, steps: np.ndarray) -> Tracks:
        boxes = (steps.astype(np.float64) * self.step_px).astype(np.float32).reshape(-1, 4)
        return Tracks(boxes, np.ones(ids.size, np.float32), ids.astype(np.int32))

    def quantize(self, tracks: Tracks) -> Tracks:
        """Exactly what :meth:`decode` returns for ``tracks`` (sorted by id)."""
        return self._tracks(*self._quantize(tracks))

    def snap(self, tracks: Tracks, previous: Mapping[int, np.ndarray], tolerance: float,
             ahead: tuple[int, int] = (1, 1)) -> Tracks:  # fmt: skip
        """``tracks`` quantized, each **tracked** box's corners moved toward the decoder's
        constant-velocity prediction by up to ``tolerance`` of the box's height and at most
        :data:`MAX_ZONE_STEPS` steps (a dead zone on the residuals: a box that moves as
        predicted, give or take the detector's jitter, costs zero residuals, and its decoded
        corners stay within that much of the detected ones). Exactly what :meth:`decode`
        returns when they are encoded; a box the snapping would leave empty keeps its own
        corners. ``tolerance`` 0: :meth:`quantize`. ``ahead``: see the module docstring.
        """
        ids, steps = self._quantize(tracks)
        if tolerance <= 0:
            return self._tracks(ids, steps)
        tracked = np.array([int(i) in previous for i in ids], bool)
        if tracked.any():
            predicted = self._predict(ids[tracked], previous, ahead)
            residuals = steps[tracked] - predicted
            heights = (steps[tracked, 3] - steps[tracked, 1]).astype(np.float64)
            zone = np.minimum(np.floor(tolerance * heights), MAX_ZONE_STEPS)
            zone = zone.astype(np.int64)[:, None]
            snapped = predicted + np.sign(residuals) * np.maximum(np.abs(residuals) - zone, 0)
            whole = (snapped[:, 2] > snapped[:, 0]) & (snapped[:, 3] > snapped[:, 1])
            rows = np.flatnonzero(tracked)[whole]
            steps[rows] = snapped[whole]
        return self._tracks(ids, steps)

    def update_state(self, previous: Mapping[int, np.ndarray], tracks: Tracks) -> dict:
        """The state for the next frame after ``tracks`` (decoded boxes) were coded.

        Ids absent from ``tracks`` are dropped (a track that comes back is coded as new).
        """
        ids, steps = self._quantize(tracks)
        state = {}
        for tid, box in zip(ids.tolist(), steps, strict=True):
            last = previous.get(tid)
            state[tid] = np.stack([last[1] if last is not None else box, box])
        return state

    # ------------------------------------------------------------------ coding

    def encode(self, tracks: Tracks, previous: Mapping[int, np.ndarray],
               ahead: tuple[int, int] = (1, 1)) -> bytes:  # fmt: skip
        """Codes ``tracks`` given the state of the previous frame (see the module docstring)."""
        tabs = _tables()
        ids, steps = self._quantize(tracks)
        prev_ids = sorted(previous)
        present = set(ids.tolist())
        new_ids = [int(i) for i in ids if int(i) not in previous]
        w = RansWriter()
        w.write([int(i in present) for i in prev_ids], [0] * len(prev_ids), tabs["flag"])
        w.write([len(new_ids)], [0], tabs["count"])
        w.write(id_gaps(new_ids, prev_ids), [0] * len(new_ids), tabs["gap"])
        tracked = np.array([int(i) in previous for i in ids], bool)
        residuals = (steps[tracked] - self._predict(ids[tracked], previous, ahead)).reshape(-1)
        scale = self._best_scale(residuals)
        w.write([scale], [0], tabs["scale"])
        w.write(residuals, [scale] * residuals.size, tabs["res"])
        self._write_new(w, steps[~tracked])
        return w.getvalue()

    def decode(self, data: bytes, previous: Mapping[int, np.ndarray],
               ahead: tuple[int, int] = (1, 1)) -> Tracks:  # fmt: skip
        """Inverse of :meth:`encode` given the same ``previous`` and ``ahead``; boxes sorted
        by id.

        Raises:
            EntropyCodingError: a corrupt or truncated payload.
        """
        tabs = _tables()
        prev_ids = sorted(previous)
        bound = len(prev_ids) + 3 + (_MAX_BOXES + len(prev_ids)) * 5
        r = RansReader(data, bound, max_escapes=4 * (_MAX_BOXES + len(prev_ids)))
        flags = r.read([0] * len(prev_ids), tabs["flag"])
        if flags.size and (flags.min() < 0 or flags.max() > 1):
            raise EntropyCodingError("corrupt box payload (flags)")
        (n_new,) = r.read([0], tabs["count"])
        kept = [i for i, f in zip(prev_ids, flags.tolist(), strict=True) if f]
        if not 0 <= n_new <= _MAX_BOXES - len(kept):
            raise EntropyCodingError(f"corrupt box payload ({n_new} new boxes)")
        new_ids = ids_from_gaps(r.read([0] * int(n_new), tabs["gap"]), prev_ids, _MAX_ID, "box")
        (scale,) = r.read([0], tabs["scale"])
        kept_arr = np.array(kept, np.int64)
        tracked = r.read([int(scale)] * (4 * len(kept)), tabs["res"]).astype(np.int64)
        tracked = tracked.reshape(-1, 4) + self._predict(kept_arr, previous, ahead)
        new = self._read_new(r, len(new_ids))
        r.finish()
        ids = np.array(kept + new_ids, np.int64)
        steps = np.concatenate([tracked.reshape(-1, 4), new]).astype(np.int64)
        if (steps[:, 2:] <= steps[:, :2]).any():
            raise EntropyCodingError("corrupt box payload (empty box)")
        order = np.argsort(ids, kind="stable")
        return self._tracks(ids[order], steps[order])

    # ------------------------------------------------------------------ helpers

    def predicted(self, previous: Mapping[int, np.ndarray],
                  ahead: tuple[int, int] = (1, 1)) -> Tracks:  # fmt: skip
        """Every track of ``previous`` at its prediction ``ahead`` (sorted by id): the boxes
        of a frame that sent none. A box predicted thinner than a step is one step wide."""
        ids = np.array(sorted(previous), np.int64)
        return self._tracks(ids, self._predicted_steps(ids, previous, ahead))

    def stand_in(self, tracks: Tracks, previous: Mapping[int, np.ndarray],
                 ahead: tuple[int, int], tolerance: float) -> Tracks | None:  # fmt: skip
        """:meth:`predicted` where it may stand for ``tracks`` (the frame's boxes then go
        unsent): the same people as ``previous``, each corner within ``tolerance`` of the
        box's height (and at least one step) of its prediction ``ahead``; else None."""
        ids, steps = self._quantize(tracks)
        if ids.tolist() != sorted(previous):
            return None
        predicted = self._predicted_steps(ids, previous, ahead)
        allowed = np.maximum(1.0, tolerance * (steps[:, 3] - steps[:, 1]))
        if (np.abs(steps - predicted) > allowed[:, None]).any():
            return None
        return self._tracks(ids, predicted)

    @classmethod
    def _predicted_steps(cls, ids: np.ndarray, previous: Mapping[int, np.ndarray],
                         ahead: tuple[int, int]) -> np.ndarray:  # fmt: skip
        steps = cls._predict(ids, previous, ahead)
        steps[:, 2] = np.maximum(steps[:, 2], steps[:, 0] + 1)
        steps[:, 3] = np.maximum(steps[:, 3], steps[:, 1] + 1)
        return steps

    @staticmethod
    def _predict(ids: np.ndarray, previous: Mapping[int, np.ndarray],
                 ahead: tuple[int, int] = (1, 1)) -> np.ndarray:  # fmt: skip
        if ids.size == 0:
            return np.zeros((0, 4), np.int64)
        age, gap = (int(v) for v in ahead)
        if age < 1 or gap < 1:
            raise EntropyCodingError(f"ahead must be two frame counts >= 1, got {ahead}")
        hist = np.stack([np.asarray(previous[int(i)], np.int64) for i in ids])
        last, velocity = hist[:, 1], hist[:, 1] - hist[:, 0]
        return last + np.floor_divide(2 * velocity * age + gap, 2 * gap)

    @staticmethod
    def _best_scale(residuals: np.ndarray) -> int:
        """The scale nearest (in log) to the residuals' mean absolute value, the maximum
        likelihood Laplace scale (an encoder choice: the decoder reads the index)."""
        if residuals.size == 0:
            return 0
        mean = max(float(np.abs(residuals).mean()), SCALES[0])
        return int(np.argmin(np.abs(np.log(np.asarray(SCALES)) - np.log(mean))))

    def _write_new(self, w: RansWriter, steps: np.ndarray) -> None:
        tabs = _tables()
        n = steps.shape[0]
        pos = (steps[:, :2] - self._centre).reshape(-1)
        size = (steps[:, 2:] - steps[:, :2] - self._typical).reshape(-1)
        w.write(pos, [0] * (2 * n), tabs["pos"])
        w.write(size, [0] * (2 * n), tabs["size"])

    def _read_new(self, r: RansReader, n: int) -> np.ndarray:
        tabs = _tables()
        pos = r.read([0] * (2 * n), tabs["pos"]).astype(np.int64).reshape(-1, 2) + self._centre
        size = r.read([0] * (2 * n), tabs["size"]).astype(np.int64).reshape(-1, 2)
        size = size + self._typical
        return np.concatenate([pos, pos + size], 1)
