"""``animate``: people drawn from the remembered reference nearest their pose, moved limb by
limb to the pose they have now (issue 39 items 2-3; training-free).

Level 1 with a sparse pose (``pose_every``) tells the cloud each person's 13 body joints
(:class:`~codec.core.types.BodyPose`, relative to the person's box) on the frames that send
it, and with every appearance reference the pose it was taken in. This decoder:

* **remembers** every reference of every person with the pose it was taken in
  (:class:`PersonMemory`), within ``memory_mb`` megabytes per stream (a reference's RGBA
  pixels and its matte counted), forgetting the least recently drawn reference first (a
  person's newest reference is kept whatever the budget: the memory never has fewer than
  one per person on screen); a keyframe that starts over forgets everything;
* **chooses**, per person and frame, the remembered reference whose pose is nearest the
  person's pose now (:func:`pose_distance`: mean joint distance in box heights over the
  joints visible in both), the newest unless an older one is clearly nearer and not much
  smaller (:meth:`PersonMemory.nearest`); the pose now is the decoded one smoothed over
  time (``pose_s``);
* **animates** it to the pose now (:func:`animate_ref`): the torso and head stay (the box
  places the person), each limb bone (upper and lower legs; arms with ``arms=1``) turns
  about its root joint, as its parent bone left it, to the direction it has in the pose
  now (forward kinematics; a bone turned more than :data:`MAX_BONE_TURN` is taken for the
  pose model's mistake and keeps its parent's motion; a pose whose left and right are the
  other way round from the reference's is read with its sides exchanged,
  :func:`match_sides`); every output pixel samples the reference through a blend of the
  parts' inverse maps weighted by how near it is to each part now (a soft-min of the
  distances, so the joints bend smoothly); a pixel that would show a limb bone where that
  bone no longer is (the limb moved away: a self-occlusion uncovered) is left
  transparent, so the plate shows there;
* with ``refiner=NAME`` (:mod:`~codec.reconstruct.refiner`), redraws the animated person
  with a small learned network conditioned on the animation, the pose now and the
  reference (its width the compute knob; FLOPs counted per frame, :meth:`flops_per_frame`);
* draws it like ``warp`` (box smoothing, farther people first), cut out by the cloud's own
  matte with ``person_matte=MODEL`` (:mod:`~codec.reconstruct.matte`, computed once per
  reference and animated with it).

A stream without a sparse pose is drawn as ``warp`` draws it (the newest reference, no
animation, and no refinement: the refiner needs the pose). Everything is a fixed function of
the decoded scaffolds (OpenCV and numpy in float32/float64, the refiner in torch float32 on
one CPU thread), so two runs give the same frames.
"""

from __future__ import annotations

from dataclasses import dataclass

import cv2
import numpy as np

from semcodec.codec.core.types import BodyPose, DecodedFrame, ref_joints
from semcodec.codec.reconstruct import register_reconstructor
from semcodec.codec.reconstruct.warp import SMOOTH_S, BoxSmoother, WarpReconstructor

#: Limb bones as pairs of indexes into the 13 body joints (:data:`~codec.core.types.BODY_JOINTS`:
#: 0 nose, 1/2 shoulders, 3/4 elbows, 5/6 wrists, 7/8 hips, 9/10 knees, 11/12 ankles).
BONES = ((1, 3), (3, 5), (2, 4), (4, 6), (7, 9), (9, 11), (8, 10), (10, 12))
#: Half-width of the torso around its centre line, in box heights.
TORSO_HALF_WIDTH = 0.09
#: A pixel nearer a limb bone than this (box heights) belongs to the bone.
LIMB_RADIUS = 0.06
#: Soft-min temperature of the parts' weights, in box heights: within about this distance
#: of a joint two parts' maps blend.
BLEND = 0.025
#: A bone turned further than this (radians) from the reference's pose is taken for the
#: pose model's mistake (a limb's joints swapped or lost), and follows the torso instead.
MAX_BONE_TURN = np.deg2rad(60.0)
#: The 13 joints with left and right exchanged (the pose model may label a person seen
#: from behind the other way round from one frame to the next).
SWAPPED_SIDES = (0, 2, 1, 4, 3, 6, 5, 8, 7, 10, 9, 12, 11)
#: The leg bones (:data:`BONES` indexes): what ``arms=False`` animates (the pose model's
#: arms of small people seen from behind are its least reliable joints).
LEG_BONES = (4, 5, 6, 7)
#: An older reference is drawn instead of the newest only when its pose is nearer by at
#: least this much (mean joint distance, box heights: a third of the PCK threshold), so
#: that the pose model's jitter does not switch pictures.
CHOICE_MARGIN = 0.03
#: ... and only when it is at least this fraction of the newest's height in pixels (a
#: person's first reference is often a thumbnail, refined soon after).
CHOICE_MIN_HEIGHT = 0.8
#: Default memory per stream, megabytes.
DEFAULT_MEMORY_MB = 16.0


def pose_distance(a_uv: np.ndarray, a_visible: np.ndarray, b_uv: np.ndarray,
                  b_visible: np.ndarray, min_joints: int = 4) -> float:  # fmt: skip
    """Mean distance (box heights) between the joints of two ``(13, 2)`` box-relative poses
    that both show (``(13,)`` bool each); ``inf`` with fewer than ``min_joints`` in common."""
    both = np.asarray(a_visible, bool) & np.asarray(b_visible, bool)
    if int(both.sum()) < min_joints:
        return float("inf")
    diff = np.asarray(a_uv, np.float64)[both] - np.asarray(b_uv, np.float64)[both]
    return float(np.mean(np.hypot(diff[:, 0], diff[:, 1])))


@dataclass
class Remembered:
    """One remembered reference of a person.

    Attributes:
        ref: ``(h, w, C)`` uint8 the reference as decoded (C = 3 or 4).
        matte: ``(h, w)`` float32 0..1, the cloud's person matte of it, or None.
        uv: ``(13, 2)`` float32 the pose it was taken in (box heights, relative to the box
            it was taken in), or None when the stream sent none with it.
        visible: ``(13,)`` bool, or None.
        added: the frame number it came with.
        used: the last frame number it was drawn on (its age for eviction).
    """

    ref: np.ndarray
    matte: np.ndarray | None
    uv: np.ndarray | None
    visible: np.ndarray | None
    added: int
    used: int

    @property
    def nbytes(self) -> int:
        return int(self.ref.nbytes + (0 if self.matte is None else self.matte.nbytes))


class PersonMemory:
    """Every reference of every person with the pose it was taken in, within a byte budget.

    Args:
        budget_bytes: most bytes of pixels (references and mattes) kept (>= 0); past it the
            least recently used reference is forgotten, never a person's newest.

    Raises:
        ValueError: a negative budget.
    """

    def __init__(self, budget_bytes: float) -> None:
        if not budget_bytes >= 0:
            raise ValueError(f"the memory budget must be >= 0 bytes, got {budget_bytes!r}")
        self.budget_bytes = float(budget_bytes)
        self.clear()

    def clear(self) -> None:
        #: track id -> its references, oldest first
        self.people: dict[int, list[Remembered]] = {}
        self.evicted = 0

    @property
    def nbytes(self) -> int:
        return sum(r.nbytes for refs in self.people.values() for r in refs)

    def add(self, track_id: int, ref: np.ndarray, matte: np.ndarray | None,
            pose: BodyPose | None, frame: int) -> None:  # fmt: skip
        """Remembers ``ref`` (with ``matte``) of ``track_id``, taken in ``pose`` (None or a
        pose not sent with this frame: unknown), on frame number ``frame``; then evicts."""
        uv = visible = None
        if pose is not None and pose.age == 0:
            uv, visible = np.asarray(pose.uv, np.float32), np.asarray(pose.visible, bool)
        self.people.setdefault(int(track_id), []).append(
            Remembered(ref, matte, uv, visible, frame, frame))  # fmt: skip
        self._evict()

    def _evict(self) -> None:
        total = self.nbytes
        while total > self.budget_bytes:
            candidates = [(r.used, r.added, tid, k) for tid, refs in self.people.items()
                          for k, r in enumerate(refs[:-1])]  # fmt: skip
            if not candidates:
                return
            _, _, tid, k = min(candidates)
            total -= self.people[tid].pop(k).nbytes
            self.evicted += 1

    def newest(self, track_id: int) -> Remembered | None:
        refs = self.people.get(int(track_id))
        return refs[-1] if refs else None

    def nearest(self, track_id: int, pose: BodyPose | None, frame: int) -> Remembered | None:
        """The reference of ``track_id`` taken in the pose nearest ``pose``, marked as used
        on ``frame``; None: none. The newest unless an older one at least
        :data:`CHOICE_MIN_HEIGHT` of its height has a pose nearer by :data:`CHOICE_MARGIN`
        (or the newest has no pose and an older one has); the newest when ``pose`` is
        None."""
        refs = self.people.get(int(track_id))
        if not refs:
            return None
        best = refs[-1]
        if pose is not None:
            dist = [pose_distance(r.uv, r.visible, pose.uv, pose.visible)
                    if r.uv is not None and r.ref.shape[0] >= CHOICE_MIN_HEIGHT
                    * best.ref.shape[0] else float("inf") for r in refs]  # fmt: skip
            k = min(range(len(refs)), key=lambda i: (dist[i], -i))
            if dist[k] + CHOICE_MARGIN < dist[-1] or (np.isfinite(dist[k])
                                                      and not np.isfinite(dist[-1])):  # fmt: skip
                best = refs[k]
        best.used = frame
        return best


def _segment_distance(px: np.ndarray, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """``(N,)`` distance of points ``(N, 2)`` to the segment ``a``-``b``."""
    ab = b - a
    t = np.clip(((px - a) @ ab) / max(float(ab @ ab), 1e-12), 0.0, 1.0)
    return np.hypot(*(px - (a + t[:, None] * ab)).T)


def match_sides(ref_uv: np.ndarray, ref_visible: np.ndarray, uv: np.ndarray,
                visible: np.ndarray) -> tuple[np.ndarray, np.ndarray]:  # fmt: skip
    """``(uv, visible)`` with left and right exchanged (:data:`SWAPPED_SIDES`) when that
    brings them nearer the reference's pose (:func:`pose_distance`), else as given."""
    uv, visible = np.asarray(uv), np.asarray(visible, bool)
    swapped_uv, swapped_visible = uv[list(SWAPPED_SIDES)], visible[list(SWAPPED_SIDES)]
    if (pose_distance(ref_uv, ref_visible, swapped_uv, swapped_visible)
            < pose_distance(ref_uv, ref_visible, uv, visible)):  # fmt: skip
        return swapped_uv, swapped_visible
    return uv, visible


def _part_distances(px: np.ndarray, joints: np.ndarray, bones_on: np.ndarray,
                    height: float) -> np.ndarray:  # fmt: skip
    """``(N, 1 + len(BONES))`` distances of points to the torso (its centre line from the
    nose through the shoulders' middle to the hips' middle, less its half-width) and to each
    limb bone (``inf`` for a bone not in ``bones_on``)."""
    neck = 0.5 * (joints[1] + joints[2])
    pelvis = 0.5 * (joints[7] + joints[8])
    torso = np.minimum(_segment_distance(px, joints[0], neck), _segment_distance(px, neck, pelvis))
    out = [np.maximum(torso - TORSO_HALF_WIDTH * height, 0.0)]
    for on, (i, j) in zip(bones_on, BONES, strict=True):
        out.append(_segment_distance(px, joints[i], joints[j]) if on else np.full(len(px), np.inf))
    return np.stack(out, 1)


def _part_labels(distances: np.ndarray, height: float) -> np.ndarray:
    """``(N,)`` the limb bone (1..8, :data:`BONES` + 1) each point lies on (the nearest bone
    within :data:`LIMB_RADIUS`, even over the torso: limbs are in front), 0: none."""
    bones = distances[:, 1:]
    nearest = np.argmin(bones, 1)
    near = bones[np.arange(len(bones)), nearest] < LIMB_RADIUS * height
    return np.where(near, nearest + 1, 0)


#: The limbs as chains of joints (root, middle, end) and their two bones' :data:`BONES`
#: indexes: left and right arm, left and right leg.
CHAINS = (((1, 3, 5), (0, 1)), ((2, 4, 6), (2, 3)), ((7, 9, 11), (4, 5)), ((8, 10, 12), (6, 7)))


def _rotation(pivot: np.ndarray, angle: float) -> np.ndarray:
    """``(2, 3)`` rotation by ``angle`` radians about ``pivot``."""
    c, s = np.cos(angle), np.sin(angle)
    rot = np.array([[c, -s], [s, c]])
    return np.concatenate([rot, (pivot - rot @ pivot)[:, None]], 1)


def _then(first: np.ndarray, second: np.ndarray) -> np.ndarray:
    """``(2, 3)``: ``first`` then ``second``."""
    return np.concatenate([second[:, :2] @ first[:, :2],
                           (second[:, :2] @ first[:, 2] + second[:, 2])[:, None]], 1)  # fmt: skip


def _apply(m: np.ndarray, p: np.ndarray) -> np.ndarray:
    return m[:, :2] @ p + m[:, 2]


def _angle(v: np.ndarray) -> float:
    return float(np.arctan2(v[1], v[0]))


def _wrap(angle: float) -> float:
    return float((angle + np.pi) % (2 * np.pi) - np.pi)


def _pose_limbs(src: np.ndarray, dst: np.ndarray, on: np.ndarray, min_turn: float = 0.0):
    """Forward kinematics of the limbs: each bone in ``on`` turned about its root joint (as
    the parent bone left it) to the direction it has in ``dst``; a bone not in ``on``, or
    turned further than :data:`MAX_BONE_TURN` or less than ``min_turn`` radians, keeps its
    parent's motion. The torso stays
    (the box places the person). Returns ``(per-bone (2, 3) transforms (8), posed joints
    (13, 2): src moved by them)``."""
    eye = np.array([[1.0, 0, 0], [0, 1.0, 0]])
    transforms, posed = [eye] * len(BONES), src.astype(np.float64).copy()
    for (root, mid, end), (first, second) in CHAINS:
        upper = eye
        turn = _wrap(_angle(dst[mid] - dst[root]) - _angle(src[mid] - src[root]))
        if on[first] and min_turn <= abs(turn) <= MAX_BONE_TURN:
            upper = _rotation(src[root], turn)
        posed[mid] = _apply(upper, src[mid])
        lower = upper
        turn = _wrap(_angle(dst[end] - dst[mid]) - _angle(_apply(upper, src[end]) - posed[mid]))
        if on[second] and min_turn <= abs(turn) <= MAX_BONE_TURN:
            lower = _then(upper, _rotation(posed[mid], turn))
        posed[end] = _apply(lower, src[end])
        transforms[first], transforms[second] = upper, lower
    return transforms, posed


def _invert(m: np.ndarray) -> np.ndarray:
    return cv2.invertAffineTransform(m.astype(np.float64))


def animate_ref(ref: np.ndarray, src_uv: np.ndarray, src_visible: np.ndarray,
                dst_uv: np.ndarray, dst_visible: np.ndarray, matte: np.ndarray | None = None,
                bones: tuple[int, ...] | None = None,
                min_turn: float = 0.0) -> tuple[np.ndarray, np.ndarray]:  # fmt: skip
    """A reference moved limb by limb from the pose it was taken in to another.

    Args:
        ref: ``(h, w, C)`` uint8 reference (covering the person's box).
        src_uv, dst_uv: ``(13, 2)`` box-relative joints (box heights: ``u`` from the box's
            centre, ``v`` from its top) of the pose taken and the pose wanted.
        src_visible, dst_visible: ``(13,)`` bool.
        matte: ``(h, w)`` float32 0..1 person matte of ``ref`` (None: all ones).
        bones: the :data:`BONES` (indexes) to move (None: all); the others follow the torso.
        min_turn: radians; a bone turned less than this keeps its parent's motion (the pose
            model's jitter does not shake a still limb).

    Returns:
        ``(animated (h, w, C) uint8, alpha (h, w) float32 0..1)``: the reference in the
        wanted pose and where to draw it (the matte moved with it, 0 where an uncovered
        limb or the outside of the reference would show). Identical poses give ``ref`` and
        ``matte`` unchanged.
    """
    h, w = ref.shape[:2]
    alpha0 = np.ones((h, w), np.float32) if matte is None else np.asarray(matte, np.float32)
    src_uv, dst_uv = np.asarray(src_uv, np.float64), np.asarray(dst_uv, np.float64)
    src_vis, dst_vis = np.asarray(src_visible, bool), np.asarray(dst_visible, bool)
    if np.array_equal(src_uv, dst_uv) and np.array_equal(src_vis, dst_vis):
        return ref, alpha0
    src, dst = ref_joints(src_uv, (w, h)), ref_joints(dst_uv, (w, h))
    both = src_vis & dst_vis
    bones_on = np.array([both[i] and both[j] and (bones is None or k in bones)
                         for k, (i, j) in enumerate(BONES)])  # fmt: skip
    transforms, posed = _pose_limbs(src, dst, bones_on, min_turn)
    eye = np.array([[1.0, 0, 0], [0, 1.0, 0]])
    if all(np.array_equal(m, eye) for m in transforms):  # no limb turns: as it is
        return ref, alpha0
    maps = [eye] + [_invert(m) for m in transforms]  # output -> reference, per part
    every = np.ones(len(BONES), bool)
    ys, xs = np.mgrid[0:h, 0:w]
    px = np.stack([xs.ravel() + 0.5, ys.ravel() + 0.5], 1).astype(np.float64)
    dist = _part_distances(px, posed, every, h)
    weights = np.exp(-(dist - dist.min(1, keepdims=True)) / (BLEND * h))
    weights /= weights.sum(1, keepdims=True)
    homog = np.concatenate([px, np.ones((len(px), 1))], 1)
    sample = sum(weights[:, k, None] * (homog @ m.T) for k, m in enumerate(maps))
    # a pixel that would show a limb bone where that bone is not now: uncovered, transparent
    bone_now = _part_labels(dist, h)
    bone_then = _part_labels(_part_distances(sample, src, every, h), h)
    keep = (bone_then == 0) | (bone_then == bone_now)
    map_x = (sample[:, 0] - 0.5).reshape(h, w).astype(np.float32)
    map_y = (sample[:, 1] - 0.5).reshape(h, w).astype(np.float32)
    out = cv2.remap(ref, map_x, map_y, cv2.INTER_LINEAR, borderMode=cv2.BORDER_REPLICATE)
    alpha = cv2.remap(alpha0, map_x, map_y, cv2.INTER_LINEAR, borderMode=cv2.BORDER_CONSTANT,
                      borderValue=0.0)  # fmt: skip
    alpha = alpha * keep.reshape(h, w)
    return out.reshape(ref.shape), alpha.astype(np.float32)


@register_reconstructor("animate")
class AnimateReconstructor(WarpReconstructor):
    """``warp``'s drawing of level-1 people, each from the remembered reference nearest
    their pose, animated to it (module docstring).

    Args:
        memory_mb: the memory of references per stream, megabytes (>= 0; 0 keeps only each
            person's newest).
        limbs: move the chosen reference limb by limb to the pose now (False: draw it as it
            is: the memory's nearest-pose choice alone).
        arms: move the arms too (default: the legs only, :data:`LEG_BONES`).
        min_turn: degrees (0..60); a bone turned less than this from the reference's pose
            stays as it is there (the pose model's jitter does not shake a still limb).
        pose_s: time constant (seconds) of the poses drawn: each person's box-relative
            joints smoothed over time like their boxes (:class:`~codec.reconstruct.warp.
            BoxSmoother`'s gain; 0: the decoded poses as they are), so the pose model's
            jitter does not shake the limbs.
        refiner: a learned refiner (:mod:`~codec.reconstruct.refiner`) redrawing every
            person drawn with a pose: a shipped refiner's short name (``w8``, ``w32``: its
            width, the compute knob) or registry name, or a refiner file; "" (default): none.
        smooth_s, person_matte: as for ``warp``.

    Raises:
        ValueError: a negative ``memory_mb``, ``min_turn`` outside 0..60.
        UnknownReconstructorError: a ``refiner`` that is neither shipped nor a refiner file.
        codec.core.models.ModelChecksumError: a shipped refiner's file with the wrong sha256.
    """

    def __init__(self, memory_mb: float = DEFAULT_MEMORY_MB, limbs: bool = True,
                 arms: bool = False, pose_s: float = SMOOTH_S, smooth_s: float = SMOOTH_S,
                 person_matte: str = "", min_turn: float = 0.0,
                 refiner: str = "") -> None:  # fmt: skip
        if not float(memory_mb) >= 0:
            raise ValueError(f"memory_mb must be >= 0, got {memory_mb!r}")
        self.memory_mb = float(memory_mb)
        if not 0 <= float(min_turn) <= 60:
            raise ValueError(f"min_turn must be 0..60 degrees, got {min_turn!r}")
        self.limbs, self.arms, self.min_turn = bool(limbs), bool(arms), float(min_turn)
        self.pose_s = BoxSmoother(pose_s).time_constant
        self._poses: dict[int, np.ndarray] = {}  # track id -> smoothed uv
        self.memory = PersonMemory(self.memory_mb * 1e6)
        self._frame: DecodedFrame | None = None
        self.refiner, self._refiner = str(refiner), None
        if self.refiner:
            from semcodec.codec.core.packages import file_sha256
            from semcodec.codec.reconstruct.refiner import (
                flops_per_pixel,
                load_refiner,
                refiner_weights,
            )

            path = refiner_weights(self.refiner)
            self._refiner = load_refiner(path)
            self._refiner_sha256 = file_sha256(path)
            self._refiner_flops_per_pixel = flops_per_pixel(self._refiner)
        super().__init__(smooth_s=smooth_s, person_matte=person_matte)

    def reset(self) -> None:
        super().reset()
        self.memory.clear()
        self._poses = {}
        #: people refined so far (``refiner`` only)
        self.refined = 0

    def describe(self) -> dict:
        out = {**super().describe(), "memory_mb": self.memory_mb, "limbs": self.limbs,
               "arms": self.arms, "pose_s": self.pose_s, "min_turn": self.min_turn}  # fmt: skip
        if self.refiner:
            out.update(refiner=self.refiner, refiner_sha256=self._refiner_sha256)
        return out

    def _runs_network(self) -> bool:
        return self._refiner is not None  # ``flops`` counts its refinements

    def reconstruct(self, frame: DecodedFrame) -> np.ndarray:
        if frame.keyframe_image is not None and not frame.plate_refresh:
            self.memory.clear()
            self._poses = {}
        self._frame = frame
        self._smooth_poses(frame)
        return super().reconstruct(frame)

    def _start_fades(self, appearances, tracks) -> None:
        super()._start_fades(appearances, tracks)
        frame = self._frame
        for track_id in appearances:
            self.memory.add(track_id, self._refs[track_id], self._mattes.get(track_id),
                            frame.scaffold.body_poses.get(int(track_id)),
                            frame.scaffold.number)  # fmt: skip

    def _smooth_poses(self, frame: DecodedFrame) -> None:
        """Each person's drawn pose: their decoded joints filtered over time (``pose_s``);
        a joint that changes side of visibility, or a pose read with its sides exchanged,
        starts over."""
        gain = BoxSmoother(self.pose_s).gain(frame.fps)
        poses = {}
        for tid, pose in frame.scaffold.body_poses.items():
            old = self._poses.get(tid)
            uv = np.asarray(pose.uv, np.float64)
            if old is not None and gain < 1.0:
                old_uv, old_visible = old
                uv_sides, _ = match_sides(old_uv, old_visible, uv, pose.visible)
                if np.array_equal(uv_sides, uv) and np.array_equal(old_visible, pose.visible):
                    uv = old_uv + gain * (uv - old_uv)
            poses[tid] = (uv, np.asarray(pose.visible, bool))
        self._poses = poses

    def _person(self, track_id: int, frame: DecodedFrame):
        pose = frame.scaffold.body_poses.get(int(track_id))
        if pose is not None:
            uv, visible = self._poses[int(track_id)]
            pose = BodyPose(pose.track_id, uv, visible, pose.joints, pose.age)
        chosen = self.memory.nearest(track_id, pose, frame.scaffold.number)
        if chosen is None:
            return super()._person(track_id, frame)
        if not self.limbs or pose is None or chosen.uv is None:
            drawn = chosen.ref, chosen.matte
        else:
            uv, visible = match_sides(chosen.uv, chosen.visible, pose.uv, pose.visible)
            drawn = animate_ref(chosen.ref, chosen.uv, chosen.visible, uv, visible, chosen.matte,
                                None if self.arms else LEG_BONES,
                                np.deg2rad(self.min_turn))  # fmt: skip
        if self._refiner is None or pose is None:
            return drawn
        return self._refined(track_id, frame, chosen.ref, drawn, pose)

    def _refined(self, track_id: int, frame: DecodedFrame, ref: np.ndarray, drawn,
                 pose: BodyPose):  # fmt: skip
        """``drawn`` (the animated person and its alpha) redrawn by the refiner at the
        person's size in the frame, its FLOPs counted."""
        from semcodec.codec.reconstruct.refiner import refine_person, refined_size

        picture, alpha = drawn
        if alpha is None:
            alpha = np.ones(picture.shape[:2], np.float32)
        tracks = frame.scaffold.tracks
        rows = np.flatnonzero(tracks.ids == track_id)
        box_height = float(tracks.boxes[rows[0], 3] - tracks.boxes[rows[0], 1]) if len(rows) \
            else float(picture.shape[0])  # fmt: skip
        size = refined_size(picture.shape, box_height)
        self.refined += 1
        self.flops += self._refiner_flops_per_pixel * size[0] * size[1]
        return refine_person(self._refiner, picture, alpha, ref, pose.uv, pose.visible, size)
