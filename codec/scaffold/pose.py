"""BlazePose keypoints, top-down on tracked boxes.

MediaPipe finds the landmark ROI with its own detector (a rotated square around the hips);
our people are upright pedestrians that a tracker already boxes, so the ROI is an upright
square centred on the box with side ``crop_margin`` x the box's long side (the height, for a
pedestrian) - close to MediaPipe's own ROI, whose side is 1.25 x twice the hip-to-head-top
distance. The crop (zero outside the frame) is resized to 256x256, RGB 0..1, and run through
``pose_landmark_lite`` or ``pose_landmark_full``.

Output layout relied on (both models, checked at load time by name and shape):

* ``Identity`` ``[1, 195]``: 39 landmarks x (x, y, z, visibility, presence); x, y in crop
  pixels 0..256; visibility and presence are logits. The first 33 are the standard BlazePose
  points (0 nose, 11/12 shoulders, 23/24 hips, 27/28 ankles, ...); 33-38 are auxiliary and
  dropped.
* ``Identity_1`` ``[1, 1]``: pose presence, already a probability 0..1.
* ``Identity_2`` ``[1, 256, 256, 1]``: segmentation logits of the crop (sigmoid -> person
  probability), only for :meth:`PoseEstimator.estimate_with_masks`.

The heatmaps and world landmarks are not used. The crop segmentation comes free with the
landmarks and covers the *one* person the crop is centred on, where the selfie model marks every
person in the crop: on PETS09-S2L1 frame 150 it kept the sign beside a pedestrian out of his
mask. But when two boxes overlap by half, the crop of the person behind segments (and poses)
the person in front, so the selfie model with ``overlap="probability"`` separated that pair
better. An edge that computes both scaffolds can feed :meth:`estimate_with_masks`' masks to
:meth:`codec.scaffold.segmentation.PersonSegmenter.segment` and skip the selfie model.

Thread safety: one :class:`PoseEstimator` holds one LiteRT interpreter; use one instance per
thread.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

import numpy as np

from semcodec.codec.core.types import BODY_JOINTS, NUM_KEYPOINTS, Pose, Tracks
from semcodec.codec.scaffold.crops import (
    MODEL_INPUT,
    CropMask,
    CropModel,
    check_frame,
    check_tracks,
    crop_square,
    make_interpreter,
    square_around,
)

__all__ = ["BODY_JOINTS", "PoseConfig", "PoseEstimator"]

_POSE_MODELS = ("pose_landmark_lite", "pose_landmark_full")
_LANDMARKS = 39
_LANDMARK_FIELDS = 5  # x, y, z, visibility logit, presence logit


@dataclass(frozen=True)
class PoseConfig:
    """Settings of :class:`PoseEstimator`.

    Attributes:
        model: ``"pose_landmark_lite"`` (the edge's default) or ``"pose_landmark_full"``.
        crop_margin: side of the square crop / the box's long side.
        min_presence: people whose pose presence is below this are dropped (0..1).
        threads: LiteRT CPU threads.
    """

    model: str = "pose_landmark_lite"
    crop_margin: float = 1.25
    min_presence: float = 0.5
    threads: int = 1

    def __post_init__(self) -> None:
        if self.model not in _POSE_MODELS:
            raise ValueError(f"model must be one of {_POSE_MODELS}, got {self.model!r}")
        if not self.crop_margin >= 1:
            raise ValueError(f"crop_margin must be >= 1, got {self.crop_margin}")
        if not 0 <= self.min_presence <= 1:
            raise ValueError(f"min_presence must be in [0, 1], got {self.min_presence}")
        if self.threads < 1:
            raise ValueError(f"threads must be >= 1, got {self.threads}")


class PoseEstimator(CropModel):
    """33 BlazePose keypoints per tracked person (module docstring).

    Args:
        config: the settings (default :class:`PoseConfig`).
        models_dir: where to look for the model first (see :func:`codec.core.models.resolve_model`).

    Raises:
        codec.core.models.ModelNotFoundError: the model file is missing.
        ValueError: the model's inputs or outputs are not the documented layout.
    """

    def __init__(
        self, config: PoseConfig | None = None, models_dir: os.PathLike | str | None = None
    ) -> None:
        from semcodec.codec.core.models import resolve_model

        self.config = config or PoseConfig()
        interp = make_interpreter(resolve_model(self.config.model, models_dir), self.config.threads)
        (inp,) = interp.get_input_details()
        outputs = {d["name"]: d for d in interp.get_output_details()}
        expected = {
            "Identity": [1, _LANDMARKS * _LANDMARK_FIELDS],
            "Identity_1": [1, 1],
            "Identity_2": [1, MODEL_INPUT, MODEL_INPUT, 1],
        }
        got = {name: list(d["shape"]) for name, d in outputs.items()}
        if any(got.get(name) != shape for name, shape in expected.items()):
            raise ValueError(f"{self.config.model}: expected outputs {expected}, got {got}")
        if list(inp["shape"]) != [1, MODEL_INPUT, MODEL_INPUT, 3]:
            raise ValueError(
                f"{self.config.model}: expected input [1, 256, 256, 3], got {list(inp['shape'])}"
            )
        self._use(interp)
        self._in_index = inp["index"]
        self._landmarks_index = outputs["Identity"]["index"]
        self._presence_index = outputs["Identity_1"]["index"]
        self._mask_index = outputs["Identity_2"]["index"]

    def estimate(self, frame: np.ndarray, tracks: Tracks) -> list[Pose]:
        """The poses of the people in ``tracks``, in track order, without those whose presence
        is below ``min_presence`` or whose box is empty.

        Args:
            frame: ``(H, W, 3)`` uint8 RGB.
            tracks: the tracked boxes (frame pixels) and ids.

        Returns:
            one :class:`Pose` per kept person: keypoints ``(33, 2)`` float32 in frame pixels
            (may lie outside the frame for cut-off limbs), visibility ``(33,)`` float32 0..1,
            score = the model's pose presence.

        Raises:
            ValueError: a malformed frame or tracks.
        """
        return self._run(frame, tracks, with_masks=False)[0]

    def estimate_with_masks(
        self, frame: np.ndarray, tracks: Tracks
    ) -> tuple[list[Pose], list[CropMask]]:
        """:meth:`estimate`, plus the pose model's person probability on every person's crop
        (one :class:`~codec.scaffold.crops.CropMask` per non-empty box, whatever its
        presence) for :meth:`codec.scaffold.segmentation.PersonSegmenter.segment`."""
        return self._run(frame, tracks, with_masks=True)

    def _run(
        self, frame: np.ndarray, tracks: Tracks, with_masks: bool
    ) -> tuple[list[Pose], list[CropMask]]:
        check_frame(frame)
        check_tracks(tracks)
        poses: list[Pose] = []
        masks: list[CropMask] = []
        boxes = np.asarray(tracks.boxes, np.float64)
        for box, track_id in zip(boxes, np.asarray(tracks.ids), strict=True):
            if not (box[2] > box[0] and box[3] > box[1]):
                continue
            x0, y0, side = square_around(box, self.config.crop_margin)
            crop = crop_square(frame, x0, y0, side, MODEL_INPUT)
            self.run(self._in_index, crop)
            if with_masks:
                logits = self._interpreter.get_tensor(self._mask_index)[0, :, :, 0]
                masks.append(CropMask(int(track_id), x0, y0, side, _sigmoid(logits)))
            presence = float(self._interpreter.get_tensor(self._presence_index).reshape(()))
            if presence < self.config.min_presence:
                continue
            raw = self._interpreter.get_tensor(self._landmarks_index)
            landmarks = raw.reshape(_LANDMARKS, _LANDMARK_FIELDS)[:NUM_KEYPOINTS]
            scale = side / MODEL_INPUT  # frame pixels per crop pixel
            keypoints = np.empty((NUM_KEYPOINTS, 2), np.float32)
            keypoints[:, 0] = x0 + landmarks[:, 0] * scale
            keypoints[:, 1] = y0 + landmarks[:, 1] * scale
            visibility = _sigmoid(landmarks[:, 3])
            poses.append(Pose(int(track_id), keypoints, visibility, presence))
        return poses, masks


def _sigmoid(logits: np.ndarray) -> np.ndarray:
    """float32 sigmoid, clipped so that large logits do not overflow."""
    return (1 / (1 + np.exp(-np.clip(logits, -60, 60)))).astype(np.float32)
