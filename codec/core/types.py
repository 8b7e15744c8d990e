"""Typed scaffolds: what the edge extracts from a frame and the cloud decodes exactly.

Coordinates are frame pixels (x to the right, y down, origin at the top-left corner of the
top-left pixel) of the *input* frame size unless a docstring says otherwise.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

#: Number of BlazePose keypoints sent per person (the standard 33).
NUM_KEYPOINTS = 33
#: The body joints of the 33 BlazePose points, without the face and the hands' and feet's
#: extra points (13): nose, shoulders, elbows, wrists, hips, knees, ankles (left, right).
BODY_JOINTS = (0, 11, 12, 13, 14, 15, 16, 23, 24, 25, 26, 27, 28)


@dataclass(frozen=True)
class Tracks:
    """Tracked people in one frame.

    Attributes:
        boxes: ``(N, 4)`` float32 ``x1, y1, x2, y2`` in frame pixels.
        scores: ``(N,)`` float32 detector confidence 0..1.
        ids: ``(N,)`` int32 track ids, >= 1, stable across frames for the same person.
    """

    boxes: np.ndarray
    scores: np.ndarray
    ids: np.ndarray

    @staticmethod
    def empty() -> Tracks:
        return Tracks(np.zeros((0, 4), np.float32), np.zeros(0, np.float32), np.zeros(0, np.int32))

    def __len__(self) -> int:
        return len(self.ids)


@dataclass(frozen=True)
class Segmentation:
    """A per-frame label map: 0 background, ``k > 0`` the person with track id ``k``.

    Attributes:
        labels: ``(h, w)`` uint16 at the segmentation resolution (a fraction of the frame).
        frame_size: ``(width, height)`` of the frame the map covers.
    """

    labels: np.ndarray
    frame_size: tuple[int, int]


@dataclass(frozen=True)
class Pose:
    """BlazePose keypoints of one tracked person.

    Attributes:
        track_id: the person's track id.
        keypoints: ``(33, 2)`` float32 ``x, y`` in frame pixels.
        visibility: ``(33,)`` float32 0..1 (sigmoid of the model's visibility logit).
        score: pose presence 0..1.
    """

    track_id: int
    keypoints: np.ndarray
    visibility: np.ndarray
    score: float = 1.0


@dataclass(frozen=True)
class BodyPose:
    """One person's sparse body pose as the cloud decodes it (level 1's sparse pose).

    Attributes:
        track_id: the person's track id.
        uv: ``(13, 2)`` float32 joint positions of :data:`BODY_JOINTS` relative to the
            person's box, in box heights: ``u`` from the box's horizontal centre (right
            positive), ``v`` from its top (down positive).
        visible: ``(13,)`` bool: the joint is visible (not occluded or out of the crop).
        joints: ``(13, 2)`` float32 ``x, y`` frame pixels: ``uv`` placed on the person's
            decoded box of this frame.
        age: frames since the pose was sent (0: sent with this frame; a pose held from an
            earlier frame is drawn on this frame's box).
    """

    track_id: int
    uv: np.ndarray
    visible: np.ndarray
    joints: np.ndarray
    age: int = 0


def ref_joints(uv: np.ndarray, size: tuple[int, int]) -> np.ndarray:
    """``(13, 2)`` float64 pixel positions in a reference of ``size = (width, height)`` of
    box-relative joints ``uv`` (the reference covers the box: its height is one box height,
    ``u`` is from its horizontal centre)."""
    width, height = size
    uv = np.asarray(uv, np.float64)
    return np.stack([0.5 * width + uv[:, 0] * height, uv[:, 1] * height], 1)


@dataclass(frozen=True)
class Flow:
    """Dense optical flow between the previous frame and this one, backward convention.

    For a pixel ``p`` of frame t, ``p + field(p)`` is where its content was in frame t-1, so
    frame t is predicted by sampling frame t-1 at ``p + field(p)`` (``cv2.remap``).

    Attributes:
        field: ``(h, w, 2)`` float32 displacement ``dx, dy`` in *frame* pixels, sampled on a
            grid of ``h x w`` equal cells covering the frame (cell centres).
        frame_size: ``(width, height)`` of the frame.
    """

    field: np.ndarray
    frame_size: tuple[int, int]


@dataclass
class FrameScaffold:
    """Everything extracted for one frame (1-based ``number``); absent parts are ``None``."""

    number: int
    tracks: Tracks = field(default_factory=Tracks.empty)
    segmentation: Segmentation | None = None
    poses: list[Pose] = field(default_factory=list)
    flow: Flow | None = None
    keyframe: bytes | None = None  # the intra-coded picture, when this frame is a keyframe
    appearances: dict[int, bytes] = field(default_factory=dict)  # track id -> WebP reference
    #: track id -> the person's sparse body pose (level 1 with ``pose_every``): sent with
    #: this frame or held from the last frame that sent it
    body_poses: dict[int, BodyPose] = field(default_factory=dict)


@dataclass
class DecodedFrame:
    """One decoded unit: the exact scaffolds plus the decoded keyframe picture, if any.

    Attributes:
        scaffold: what the edge sent, bit-exact after quantization.
        frame_size: ``(width, height)`` of the frames to rebuild.
        keyframe_image: ``(H, W, 3)`` uint8 RGB when this frame is a keyframe or carries a
            plate refresh, else None.
        appearances: track id -> ``(h, w, 4)`` uint8 RGBA appearance reference sent with
            this frame (the person inside their box, alpha the mask).
        plate: the keyframe picture is a person-free background plate (people are drawn
            from their boxes and appearance references), not the frame itself.
        plate_refresh: ``keyframe_image`` came in a frame unit: a better plate replacing
            the one held, everything else (references, tracks) kept.
        fps: the stream's frame rate (frames per second; 0: unknown).
    """

    scaffold: FrameScaffold
    frame_size: tuple[int, int]
    keyframe_image: np.ndarray | None = None
    appearances: dict[int, np.ndarray] = field(default_factory=dict)
    plate: bool = False
    plate_refresh: bool = False
    fps: float = 0.0
