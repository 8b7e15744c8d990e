"""Person segmentation, top-down on tracked boxes: a label map per frame.

The people of a surveillance view are small (40-90 px tall at 768x576), far below what
MediaPipe Selfie Segmentation was made for, so the model never sees the whole frame. For every
tracked box a square crop around it (``crop_margin`` x the box's long side, centred on the box,
zero outside the frame) is resized to the model input (256x256, RGB 0..1); the model's person
probability is mapped back into the frame, restricted to the box enlarged by ``box_margin`` (so
that bleed onto neighbouring signs, poles and people stays small), and written into a label
map at ``scale`` x the frame size: a pixel gets the id of the person who owns it, else 0.

Overlaps (``overlap``):

* ``"probability"`` (default): the highest probability above ``threshold`` wins, pixel by
  pixel. Each crop is centred on its own person, whose probability tends to be the higher one
  there; on PETS09-S2L1 frame 150 (a man walking in front of a woman, boxes overlapping by
  half) this gave each of the two their own body.
* ``"depth"``: the person nearest to the camera wins, i.e. the one whose box reaches lowest in
  the image (largest bottom y; a camera looking down on a ground plane). Geometrically sound,
  but the selfie model marks *every* person in a crop, so the nearer person also takes the
  parts of the farther one that fall inside its box (seen on the same frame).

``model`` may also name a BlazePose landmark model, whose crop segmentation output is used
instead. That output comes free when pose runs anyway: pass the masks of
:meth:`codec.scaffold.pose.PoseEstimator.estimate_with_masks` to :meth:`PersonSegmenter.segment`.

``method="ellipse"`` needs no model: each box becomes the filled ellipse inscribed in it (the
speed floor and a fallback when the model file is missing).

Thread safety: one :class:`PersonSegmenter` holds one LiteRT interpreter; use one instance per
thread.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass

import cv2
import numpy as np

from semcodec.codec.core.types import Segmentation, Tracks
from semcodec.codec.scaffold.crops import (  # re-exported: the names were defined here before
    MODEL_INPUT,
    CropMask,
    CropModel,
    check_frame,
    check_tracks,
    crop_square,
    make_interpreter,
    square_around,
)

__all__ = [
    "MODEL_INPUT",
    "CropMask",
    "PersonSegmenter",
    "SegmenterConfig",
    "check_frame",
    "check_tracks",
    "crop_square",
    "label_size",
    "make_interpreter",
    "square_around",
]

_METHODS = ("model", "ellipse")
_POSE_MASK_MODELS = ("pose_landmark_lite", "pose_landmark_full")
_OVERLAPS = ("depth", "probability")


@dataclass(frozen=True)
class SegmenterConfig:
    """Settings of :class:`PersonSegmenter`.

    Attributes:
        scale: label-map size as a fraction of the frame (768x576 at 0.125 -> 96x72); each side
            is rounded and at least 1.
        crop_margin: side of the square model crop / the box's long side.
        threshold: probability from which a pixel counts as the person (0..1, exclusive).
        model: registry name of the network whose person probability is used:
            ``"selfie_segmentation"`` (its output), or ``"pose_landmark_lite"`` /
            ``"pose_landmark_full"`` (their crop segmentation output; one person per crop, see
            :mod:`codec.scaffold.pose`). The landscape selfie model (144x256) does not fit
            square crops and is not accepted.
        threads: LiteRT CPU threads.
        method: ``"model"`` (the network on crops) or ``"ellipse"`` (filled box ellipses,
            no model).
        box_margin: the mask is kept inside the box enlarged by this fraction of its width and
            height on every side; anything the model marks further out is dropped (at 0.5 the
            model's bleed onto a sign and a bag beside the people of frame 150 came through;
            at 0.1 it did not, and limbs at the box edge were kept).
        overlap: who owns a pixel claimed by several people, ``"probability"`` or
            ``"depth"`` (module docstring).
    """

    scale: float = 0.125
    crop_margin: float = 1.3
    threshold: float = 0.5
    model: str = "selfie_segmentation"
    threads: int = 1
    method: str = "model"
    box_margin: float = 0.1
    overlap: str = "probability"

    def __post_init__(self) -> None:
        if not 0 < self.scale <= 1:
            raise ValueError(f"scale must be in (0, 1], got {self.scale}")
        if not self.crop_margin >= 1:
            raise ValueError(f"crop_margin must be >= 1, got {self.crop_margin}")
        if not 0 < self.threshold < 1:
            raise ValueError(f"threshold must be in (0, 1), got {self.threshold}")
        if self.method not in _METHODS:
            raise ValueError(f"method must be one of {_METHODS}, got {self.method!r}")
        models = ("selfie_segmentation", *_POSE_MASK_MODELS)
        if self.method == "model" and self.model not in models:
            raise ValueError(
                f"model {self.model!r} is not supported on person crops; use one of {models}"
            )
        if self.threads < 1:
            raise ValueError(f"threads must be >= 1, got {self.threads}")
        if not self.box_margin >= 0:
            raise ValueError(f"box_margin must be >= 0, got {self.box_margin}")
        if self.overlap not in _OVERLAPS:
            raise ValueError(f"overlap must be one of {_OVERLAPS}, got {self.overlap!r}")


# --------------------------------------------------------------------------- geometry


def label_size(frame_size: tuple[int, int], scale: float) -> tuple[int, int]:
    """``(width, height)`` of the label map for a frame of ``(width, height)`` at ``scale``."""
    return max(1, round(frame_size[0] * scale)), max(1, round(frame_size[1] * scale))


# --------------------------------------------------------------------------- the segmenter


class PersonSegmenter(CropModel):
    """Top-down person segmentation of tracked people into a label map (module docstring).

    Args:
        config: the settings (default :class:`SegmenterConfig`).
        models_dir: where to look for the model first (see :func:`codec.core.models.resolve_model`).

    Raises:
        codec.core.models.ModelNotFoundError: ``method="model"`` and the model file is missing.
        ValueError: the model's input or output is not the documented layout.
    """

    def __init__(
        self, config: SegmenterConfig | None = None, models_dir: os.PathLike | str | None = None
    ) -> None:
        self.config = config = config or SegmenterConfig()
        self._interpreter = None
        self._pose = None
        if config.method != "model":
            return
        if config.model in _POSE_MASK_MODELS:
            from semcodec.codec.scaffold.pose import PoseConfig, PoseEstimator

            self._pose = PoseEstimator(
                PoseConfig(
                    model=config.model,
                    crop_margin=config.crop_margin,
                    min_presence=0.0,
                    threads=config.threads,
                ),
                models_dir,
            )
            return
        from semcodec.codec.core.models import resolve_model

        interp = make_interpreter(resolve_model(config.model, models_dir), config.threads)
        (inp,) = interp.get_input_details()
        (out,) = interp.get_output_details()
        layout = (list(inp["shape"]), list(out["shape"]))
        if layout != ([1, MODEL_INPUT, MODEL_INPUT, 3], [1, MODEL_INPUT, MODEL_INPUT, 1]):
            raise ValueError(
                f"{config.model}: unexpected layout {layout[0]} -> {layout[1]}, expected "
                "[1, 256, 256, 3] -> [1, 256, 256, 1]"
            )
        self._use(interp)
        self._in_index = inp["index"]
        self._out_index = out["index"]

    def crop_masks(self, frame: np.ndarray, tracks: Tracks) -> list[CropMask]:
        """The model's person probability on each person's crop (``method="model"`` only).

        Raises:
            ValueError: a malformed frame or tracks, or ``method`` is not ``"model"``.
        """
        check_frame(frame)
        check_tracks(tracks)
        if self.config.method != "model":
            raise ValueError(f"crop_masks needs method='model', not {self.config.method!r}")
        if self._pose is not None:
            return self._pose.estimate_with_masks(frame, tracks)[1]
        masks = []
        for box, track_id in zip(np.asarray(tracks.boxes, np.float64), tracks.ids, strict=True):
            if not (box[2] > box[0] and box[3] > box[1]):
                continue
            x0, y0, side = square_around(box, self.config.crop_margin)
            crop = crop_square(frame, x0, y0, side, MODEL_INPUT)
            self.run(self._in_index, crop)
            prob = self._interpreter.get_tensor(self._out_index)[0, :, :, 0].copy()
            masks.append(CropMask(int(track_id), x0, y0, side, prob))
        return masks

    def segment(
        self, frame: np.ndarray, tracks: Tracks, masks: Sequence[CropMask] | None = None
    ) -> Segmentation:
        """The label map of ``frame`` for the people in ``tracks``.

        Args:
            frame: ``(H, W, 3)`` uint8 RGB.
            tracks: the tracked boxes (frame pixels) and ids (>= 1, <= 65535).
            masks: crop probabilities computed already (e.g. by
                :meth:`codec.scaffold.pose.PoseEstimator.estimate_with_masks`, which gets them
                from the pose model's own segmentation output at no extra cost); then no model
                runs here, and a track without a mask gets no pixels. ``None``: computed by
                ``method``.

        Returns:
            :class:`Segmentation` with ``labels`` ``(round(H*scale), round(W*scale))`` uint16:
            0 background, else the owning track id.

        Raises:
            ValueError: a malformed frame or tracks.
        """
        check_frame(frame)
        check_tracks(tracks)
        cfg = self.config
        height, width = frame.shape[:2]
        lw, lh = label_size((width, height), cfg.scale)
        labels = np.zeros((lh, lw), np.uint16)
        best = np.zeros((lh, lw), np.float32)  # the winning probability so far
        rx, ry = lw / width, lh / height  # label cells per frame pixel
        if masks is None and cfg.method == "model":
            masks = self.crop_masks(frame, tracks)
        by_id = None if masks is None else {m.track_id: m for m in masks}

        boxes = np.asarray(tracks.boxes, np.float64)
        ids = np.asarray(tracks.ids)
        order = np.argsort(boxes[:, 3], kind="stable") if len(ids) else np.zeros(0, int)
        for i in order:  # far to near: with "depth" the nearer person paints last and wins
            box = boxes[i]
            region = self._region(box, lw, lh, rx, ry)
            if region is None:
                continue
            c0, r0, c1, r1 = region
            if by_id is None:
                prob = _ellipse(box, region, rx, ry)
            elif int(ids[i]) in by_id:
                prob = _place(by_id[int(ids[i])], region, rx, ry)
            else:
                continue
            claim = prob >= cfg.threshold
            if cfg.overlap == "probability":
                claim &= prob > best[r0:r1, c0:c1]
            labels[r0:r1, c0:c1][claim] = ids[i]
            best[r0:r1, c0:c1][claim] = prob[claim]
        return Segmentation(labels=labels, frame_size=(width, height))

    def _region(self, box, lw, lh, rx, ry) -> tuple[int, int, int, int] | None:
        """Label-map cells ``(c0, r0, c1, r1)`` (end exclusive) whose centres lie in the box
        enlarged by ``box_margin``; ``None`` if empty."""
        x1, y1, x2, y2 = box
        if not (x2 > x1 and y2 > y1):
            return None
        mx = self.config.box_margin * (x2 - x1)
        my = self.config.box_margin * (y2 - y1)
        # cell j has its centre at frame x = (j + 0.5) / rx
        c0 = max(0, int(np.ceil((x1 - mx) * rx - 0.5)))
        c1 = min(lw, int(np.floor((x2 + mx) * rx - 0.5)) + 1)
        r0 = max(0, int(np.ceil((y1 - my) * ry - 0.5)))
        r1 = min(lh, int(np.floor((y2 + my) * ry - 0.5)) + 1)
        if c1 <= c0 or r1 <= r0:
            return None
        return c0, r0, c1, r1


def _place(mask: CropMask, region, rx: float, ry: float) -> np.ndarray:
    """``mask``'s probability sampled on the label cells of ``region``: the crop map is first
    area-averaged to about the label resolution (no aliasing), then placed exactly."""
    n = mask.prob.shape[0]
    nx = max(1, min(n, round(mask.side * rx)))
    ny = max(1, min(n, round(mask.side * ry)))
    small = cv2.resize(mask.prob, (nx, ny), interpolation=cv2.INTER_AREA)
    kx, ky = nx / mask.side, ny / mask.side  # small-map pixels per frame pixel
    c0, r0, c1, r1 = region
    # small pixel i has its centre at frame x = x0 + (i + 0.5) / kx, which is label index
    # x * rx - 0.5, i.e. region index x * rx - 0.5 - c0 (cv2 maps pixel centres)
    m = np.array(
        [
            [rx / kx, 0, (mask.x0 + 0.5 / kx) * rx - 0.5 - c0],
            [0, ry / ky, (mask.y0 + 0.5 / ky) * ry - 0.5 - r0],
        ],
        np.float64,
    )
    return cv2.warpAffine(
        small,
        m,
        (c1 - c0, r1 - r0),
        flags=cv2.INTER_LINEAR,
        borderMode=cv2.BORDER_CONSTANT,
        borderValue=0,
    )


def _ellipse(box, region, rx, ry) -> np.ndarray:
    """1 on the label cells of ``region`` whose centres lie in the ellipse inscribed in the box,
    else 0."""
    x1, y1, x2, y2 = box
    c0, r0, c1, r1 = region
    xs = (np.arange(c0, c1) + 0.5) / rx
    ys = (np.arange(r0, r1) + 0.5) / ry
    ax, ay = max(0.5 * (x2 - x1), 0.5 / rx), max(0.5 * (y2 - y1), 0.5 / ry)
    u = ((xs - 0.5 * (x1 + x2)) / ax) ** 2
    v = ((ys - 0.5 * (y1 + y2)) / ay) ** 2
    return (v[:, None] + u[None, :] <= 1).astype(np.float32)
