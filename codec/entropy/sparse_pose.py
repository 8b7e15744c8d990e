"""Sparse pose: 13 body joints per person, relative to the decoded box, a few bytes a frame.

Level 1 sends each person as a box and, now and then, a picture. What the cloud lacks to
draw them is the pose *now*: this coder sends it cheaply.

Quantisation (what :meth:`SparsePoseCoder.quantize` returns and the decoder reconstructs):

* the joints are the 13 of :data:`~codec.core.types.BODY_JOINTS` (nose, shoulders, elbows,
  wrists, hips, knees, ankles), in coordinates relative to the person's **decoded box**
  ``x1, y1, x2, y2`` (which the decoder has from the boxes' sub-stream): ``u = (x - cx) / h``,
  ``v = (y - y1) / h`` with ``cx`` the box's horizontal centre and ``h`` its height;
* ``q = rint(u * steps), rint(v * steps)`` with ``steps`` = ``steps_per_height`` (a step
  is ``1 / steps`` of the box height: at the default 16 the error is at most 1/32 of the
  height per axis, well inside PCK@0.1), clipped to ``±MAX_REACH`` box heights;
* a joint is *visible* (1 bit) when the pose model's visibility is >= 0.5.

State: ``previous`` maps a track id to the :class:`SparsePose` the decoder reconstructed for
it in the previous coded frame (``{}`` after a reset or at a keyframe); encoder and decoder
must be given the same.

Payload: one rANS stream of

1. per box of the frame (ascending track id) a flag: a pose follows;
2. two scale indexes into :data:`SCALES` (the per-frame Laplace scale, in steps) chosen by the
   encoder for: the residuals of tracked people, those of new people;
3. per person with a pose: the 26 residuals ``q - prediction``, the prediction being the
   person's previous decoded ``q`` (tracked) or :data:`TEMPLATE` (a standing person, new);
4. the 13 visibility bits per person, context the same joint's previous bit (2: none).

Measured (BlazePose lite on the ground-truth boxes of TUD-Stadtmitte 1-40, 236 poses; the
training range, not a measured one): 6.8 bytes per person per frame at 16 steps (largest
joint error 0.031 of the box height), 9.1 at 32 (0.016): the pose model's frame-to-frame
jitter dominates the residuals.

Hostile input: more than :data:`MAX_POSES` boxes, a flag that is not 0/1, a scale index out
of range, a joint decoded beyond ``±MAX_REACH`` box heights, a residual escaping more than
the reach allows, or trailing bytes raise :class:`~codec.entropy.rans.EntropyCodingError`;
the number of symbols read is bounded by the number of boxes before anything is decoded.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import lru_cache

import numpy as np

from semcodec.codec.core.types import BODY_JOINTS, NUM_KEYPOINTS
from semcodec.codec.entropy.pose import best_scale
from semcodec.codec.entropy.rans import (
    CdfTable,
    EntropyCodingError,
    RansReader,
    RansWriter,
    cdf_from_counts,
    laplace_table,
    uniform_table,
)

__all__ = ["MAX_POSES", "SCALES", "TEMPLATE", "SparsePose", "SparsePoseCoder"]

#: Joints sent per person.
NUM_JOINTS = len(BODY_JOINTS)
#: Laplace scales (in quantisation steps) the encoder picks from, per frame and group.
SCALES = tuple(float(s) for s in np.geomspace(0.2, 48.0, 16))
#: Joints are kept within this many box heights of the box (``u``, ``v``).
MAX_REACH = 2.0
#: Most boxes (people) a frame may carry a pose for.
MAX_POSES = 256
#: The prediction of a new person's joints, box-relative ``(u, v)`` (fractions of the box
#: height from its top centre): a person standing upright and facing the camera.
TEMPLATE = np.array([
    [0.00, 0.06],  # nose
    [0.10, 0.19], [-0.10, 0.19],  # shoulders (left, right: the person's)
    [0.13, 0.33], [-0.13, 0.33],  # elbows
    [0.14, 0.45], [-0.14, 0.45],  # wrists
    [0.06, 0.50], [-0.06, 0.50],  # hips
    [0.06, 0.72], [-0.06, 0.72],  # knees
    [0.06, 0.93], [-0.06, 0.93],  # ankles
])  # fmt: skip
_RES_MAX_ABS = 63
_STEPS_RANGE = (4, 256)


@lru_cache(maxsize=1)
def _tables() -> dict[str, CdfTable]:
    """The fixed tables (built once; integer, identical everywhere)."""
    return {
        "flag": CdfTable.from_cdfs([cdf_from_counts(np.array([1, 7]))], [0]),
        "scale": uniform_table(len(SCALES)),
        "res": laplace_table(SCALES, _RES_MAX_ABS),
        # visibility bit, context the previous bit (0, 1) or none (2): sticky
        "vis": CdfTable.from_cdfs([cdf_from_counts(np.array(c))
                                   for c in ([15, 1], [1, 15], [1, 3])], [0, 0, 0]),  # fmt: skip
    }


@dataclass(frozen=True)
class SparsePose:
    """One person's decoded sparse pose.

    Attributes:
        track_id: the person's track id (>= 1).
        q: ``(13, 2)`` int64 box-relative joint positions in steps (module text).
        visible: ``(13,)`` bool.
        steps: steps per box height the positions are in.
    """

    track_id: int
    q: np.ndarray
    visible: np.ndarray
    steps: int

    def joints(self, box: np.ndarray) -> np.ndarray:
        """``(13, 2)`` float32 joint positions in frame pixels for the decoded ``box``
        ``x1, y1, x2, y2``."""
        x1, y1, x2, y2 = (float(v) for v in box)
        h = y2 - y1
        uv = self.q.astype(np.float64) / self.steps
        return np.stack([0.5 * (x1 + x2) + uv[:, 0] * h, y1 + uv[:, 1] * h], 1).astype(np.float32)


def _check_box(box: np.ndarray, what: str) -> np.ndarray:
    b = np.asarray(box, np.float64).reshape(-1)
    if b.shape != (4,) or not np.isfinite(b).all() or not (b[3] - b[1] >= 1 and b[2] >= b[0]):
        raise EntropyCodingError(f"{what}: a box must be finite x1, y1, x2, y2 at least 1 px "
                                 f"high, got {b.tolist()}")  # fmt: skip
    return b


class SparsePoseCoder:
    """Codes the sparse poses of one frame against the previous frame's decoded ones.

    Args:
        steps_per_height: quantisation steps per box height, 4..256.

    Raises:
        EntropyCodingError: ``steps_per_height`` out of range.
    """

    def __init__(self, steps_per_height: int = 16) -> None:
        steps = int(steps_per_height)
        if steps != steps_per_height or not _STEPS_RANGE[0] <= steps <= _STEPS_RANGE[1]:
            raise EntropyCodingError(f"steps_per_height must be an integer in "
                                     f"{_STEPS_RANGE[0]}..{_STEPS_RANGE[1]}, "
                                     f"got {steps_per_height!r}")  # fmt: skip
        self.steps = steps
        self._reach = int(round(MAX_REACH * steps))
        self._template = np.rint(TEMPLATE * steps).astype(np.int64)

    def quantize(self, track_id: int, keypoints: np.ndarray, visibility: np.ndarray,
                 box: np.ndarray) -> SparsePose:  # fmt: skip
        """The :class:`SparsePose` of a person's pose in their decoded ``box``.

        Args:
            keypoints: ``(33, 2)`` BlazePose keypoints or ``(13, 2)`` body joints, frame pixels.
            visibility: ``(33,)`` or ``(13,)`` 0..1.
            box: ``x1, y1, x2, y2`` frame pixels (the box the decoder will have).

        Raises:
            EntropyCodingError: wrong shapes, non-finite values, a box under 1 px high.
        """
        kp = np.asarray(keypoints, np.float64)
        vis = np.asarray(visibility, np.float64)
        if kp.shape == (NUM_KEYPOINTS, 2) and vis.shape == (NUM_KEYPOINTS,):
            kp, vis = kp[list(BODY_JOINTS)], vis[list(BODY_JOINTS)]
        if kp.shape != (NUM_JOINTS, 2) or vis.shape != (NUM_JOINTS,):
            raise EntropyCodingError(f"pose {track_id}: expected (33, 2) or (13, 2) keypoints "
                                     f"and visibility to match, got {kp.shape}, "
                                     f"{vis.shape}")  # fmt: skip
        if not (np.isfinite(kp).all() and np.isfinite(vis).all()):
            raise EntropyCodingError(f"pose {track_id}: NaN or infinite values")
        x1, y1, x2, y2 = _check_box(box, f"pose {track_id}")
        h = y2 - y1
        uv = np.stack([(kp[:, 0] - 0.5 * (x1 + x2)) / h, (kp[:, 1] - y1) / h], 1)
        q = np.clip(np.rint(uv * self.steps), -self._reach, self._reach).astype(np.int64)
        return SparsePose(int(track_id), q, vis >= 0.5, self.steps)

    def _check_previous(self, previous: Mapping[int, SparsePose]) -> None:
        for tid, pose in previous.items():
            q = np.asarray(pose.q)
            if (pose.steps != self.steps or q.shape != (NUM_JOINTS, 2)
                    or np.asarray(pose.visible).shape != (NUM_JOINTS,)
                    or np.abs(q).max() > self._reach):  # fmt: skip
                raise EntropyCodingError(f"previous pose of track {tid} is not one of this "
                                         f"coder's ({self.steps} steps per height)")  # fmt: skip

    def _prediction(self, tid: int, previous: Mapping[int, SparsePose]):
        """``(q prediction (13, 2), visibility contexts (13,), tracked)``."""
        old = previous.get(tid)
        if old is None:
            return self._template, np.full(NUM_JOINTS, 2, np.int64), False
        return np.asarray(old.q, np.int64), np.asarray(old.visible, np.int64), True

    def encode(self, poses: Sequence[SparsePose], track_ids: Sequence[int],
               previous: Mapping[int, SparsePose]) -> bytes:  # fmt: skip
        """Codes ``poses`` (from :meth:`quantize`) of a frame whose boxes have ``track_ids``.

        Raises:
            EntropyCodingError: a pose of a track without a box, twice the same track, more
                than :data:`MAX_POSES` boxes, or poses or ``previous`` of another step.
        """
        tabs = _tables()
        ids = sorted(int(t) for t in track_ids)
        if len(ids) > MAX_POSES or len(set(ids)) != len(ids):
            raise EntropyCodingError(f"at most {MAX_POSES} boxes with distinct ids, got {ids}")
        self._check_previous(previous)
        by_id = {int(p.track_id): p for p in poses}
        if len(by_id) != len(poses) or not set(by_id) <= set(ids):
            raise EntropyCodingError("sparse poses must be of distinct tracks with a box in "
                                     f"the frame: {sorted(by_id)} for boxes {ids}")  # fmt: skip
        self._check_previous(by_id)
        sent = [t for t in ids if t in by_id]
        parts = [(self._prediction(t, previous), by_id[t]) for t in sent]
        residuals = [(p.q - pred).reshape(-1) for (pred, _, _), p in parts]
        groups = [[r for r, ((_, _, tr), _) in zip(residuals, parts, strict=True) if tr == want]
                  for want in (True, False)]  # fmt: skip
        scale_idx = [best_scale(np.concatenate(g) if g else np.zeros(0, np.int64), tabs["res"])
                     for g in groups]  # fmt: skip
        w = RansWriter()
        w.write([1 if t in by_id else 0 for t in ids], [0] * len(ids), tabs["flag"])
        w.write(scale_idx, [0, 0], tabs["scale"])
        for r, ((_, _, tracked), _) in zip(residuals, parts, strict=True):
            w.write(r, [scale_idx[0 if tracked else 1]] * r.size, tabs["res"])
        for (_, ctx, _), p in parts:
            w.write(np.asarray(p.visible, np.int64), ctx, tabs["vis"])
        return w.getvalue()

    def decode(self, data: bytes, track_ids: Sequence[int],
               previous: Mapping[int, SparsePose]) -> list[SparsePose]:  # fmt: skip
        """Inverse of :meth:`encode` given the same ``track_ids`` and ``previous``; poses in
        ascending track id.

        Raises:
            EntropyCodingError: a corrupt, truncated or hostile payload (module text).
        """
        tabs = _tables()
        ids = sorted(int(t) for t in track_ids)
        if len(ids) > MAX_POSES or len(set(ids)) != len(ids):
            raise EntropyCodingError(f"sparse pose: at most {MAX_POSES} boxes with distinct "
                                     f"ids, got {len(ids)}")  # fmt: skip
        self._check_previous(previous)
        per_person = 2 * NUM_JOINTS + NUM_JOINTS
        r = RansReader(bytes(data), len(ids) + 2 + len(ids) * per_person,
                       max_escapes=len(ids) * 2 * NUM_JOINTS)  # fmt: skip
        flags = r.read([0] * len(ids), tabs["flag"])
        if flags.size and (flags.min() < 0 or flags.max() > 1):
            raise EntropyCodingError("corrupt sparse pose payload (a flag is not 0 or 1)")
        scale_idx = r.read([0, 0], tabs["scale"]).tolist()
        if min(scale_idx) < 0 or max(scale_idx) >= len(SCALES):
            raise EntropyCodingError("corrupt sparse pose payload (scale index)")
        sent = [t for t, f in zip(ids, flags.tolist(), strict=True) if f == 1]
        decoded = []
        for t in sent:
            pred, ctx, tracked = self._prediction(t, previous)
            res = r.read([scale_idx[0 if tracked else 1]] * 2 * NUM_JOINTS, tabs["res"])
            q = pred + res.astype(np.int64).reshape(NUM_JOINTS, 2)
            if np.abs(q).max() > self._reach:
                raise EntropyCodingError(f"corrupt sparse pose payload (track {t}: a joint "
                                         f"beyond {MAX_REACH:g} box heights)")  # fmt: skip
            decoded.append((t, q, ctx))
        out = []
        for t, q, ctx in decoded:
            vis = r.read(ctx, tabs["vis"])
            if vis.min() < 0 or vis.max() > 1:
                raise EntropyCodingError("corrupt sparse pose payload (visibility)")
            out.append(SparsePose(t, q, vis.astype(bool), self.steps))
        r.finish()
        return out
