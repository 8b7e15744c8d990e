"""The cloud's own person matte: which pixels of an appearance reference are the person.

A level-1 reference is the picture of the person's whole box, background included. Drawn as a
rectangle, the background it was cut from comes with it (stale, and a seam where it meets the
plate). The edge sends no matte (zero bits for it): the cloud computes one itself, once per
reference when it arrives, with a person segmentation model it already has
(:class:`~codec.scaffold.segmentation.PersonSegmenter`: the MediaPipe selfie model, or the
crop segmentation of a BlazePose landmark model, on the square crop around the box).

The model sees the reference as a camera would have shown it: pasted at the box it came with
over the decoded plate (so the crop's margin around the box shows the scene, not a black
border), the square crop around the box (``crop_margin`` x its height) resized to 256x256.
Its person probability is resampled onto the reference's pixels and is the matte. Where the
model finds no person in the reference (the selfie model's highest probability under
:data:`MIN_PEAK`; a BlazePose model's pose presence under it, since its mask marks most of an
empty crop: a blurred thumbnail, a person cut by the frame's edge), the matte is the whole
rectangle, as without a matte: a person is never drawn away.

Which model: the selfie model marks *every* person in the crop, so a reference taken while
someone passed keeps a piece of them (drawn again beside the person until the next refresh);
BlazePose's segmentation (``pose_landmark_full``) is of the one person centred in the crop.
With ``restore`` they draw people about equally well (person-region ST-LPIPS within 0.01 on
the tuning and the measured ranges, docs/journal.md, issue 39). Neither keeps the MODA of
the rectangles on PETS09-S2L1's small people: the evaluation's detector finds a pasted
rectangle more easily than the person cut out of it (a rectangle kept at 0.6 opacity around
the matte recovers most of it), and neighbours cut out side by side are found as one box.
"""

from __future__ import annotations

import os
import threading

import cv2
import numpy as np

from semcodec.codec.core.types import Tracks

#: Models whose person probability can cut out a reference (crop models of 256x256).
MATTE_MODELS = ("selfie_segmentation", "pose_landmark_lite", "pose_landmark_full")
#: A matte whose highest probability is below this finds no person: the rectangle is kept.
MIN_PEAK = 0.5
#: The crop models of the process, shared by every decoder (a service decodes many streams
#: at once; an interpreter of BlazePose full holds about 42 MB): ``(model, models_dir) ->
#: (runner, its lock)``. A model is stateless between crops, so sharing changes no output.
_RUNNERS: dict[tuple, tuple[object, threading.Lock]] = {}
_RUNNERS_LOCK = threading.Lock()


def _shared_runner(model: str, models_dir) -> tuple[object, threading.Lock]:
    """The process's pose estimator or segmenter for ``model`` and the lock to run it under."""
    key = (model, None if models_dir is None else str(models_dir))
    with _RUNNERS_LOCK:
        if key not in _RUNNERS:
            from semcodec.codec.scaffold.segmentation import PersonSegmenter, SegmenterConfig

            config = SegmenterConfig(model=model)
            if model.startswith("pose_landmark"):  # its presence says whether anyone is there
                from semcodec.codec.scaffold.pose import PoseConfig, PoseEstimator

                runner = PoseEstimator(PoseConfig(model=model, crop_margin=config.crop_margin,
                                                  min_presence=MIN_PEAK), models_dir)  # fmt: skip
            else:
                runner = PersonSegmenter(config, models_dir)
            _RUNNERS[key] = (runner, threading.Lock())
        return _RUNNERS[key]


class PersonMatte:
    """Person mattes of appearance references, computed on the cloud (module text).

    Args:
        model: one of :data:`MATTE_MODELS`.
        models_dir: where to look for the model first.

    Raises:
        ValueError: an unknown model name.
        codec.core.models.ModelNotFoundError: the model file is missing (the message says how
            to supply it).
    """

    def __init__(self, model: str = MATTE_MODELS[0],
                 models_dir: str | os.PathLike | None = None) -> None:  # fmt: skip
        if model not in MATTE_MODELS:
            raise ValueError(f"person matte model {model!r}: expected one of "
                             f"{', '.join(MATTE_MODELS)}")  # fmt: skip
        self.model = model
        self._runner, self._lock = _shared_runner(model, models_dir)
        self._pose = self._runner if model.startswith("pose_landmark") else None
        self._runs = 0

    @property
    def flops(self) -> int:
        """The model's FLOPs over the mattes this object computed since :meth:`reset_flops`
        (its runs x :meth:`~codec.scaffold.crops.CropModel.flops_per_crop`; an empty box
        runs nothing)."""
        return self._runs * self._runner.flops_per_crop() if self._runs else 0

    def reset_flops(self) -> None:
        """Counts :attr:`flops` from now (a new stream)."""
        self._runs = 0

    def matte(self, ref: np.ndarray, box: np.ndarray, plate: np.ndarray) -> np.ndarray:
        """The matte of ``ref`` ``(h, w, 3)`` uint8 RGB, the picture of the person in ``box``
        (``x1, y1, x2, y2`` frame pixels, the region it is drawn into) over ``plate``
        ``(H, W, 3)`` (uint8 or float32 0..255, the decoded background): ``(h, w)`` float32
        person probability 0..1, or all ones where the model finds no person."""
        from semcodec.codec.scaffold.appearance import draw_ref

        h, w = ref.shape[:2]
        context = np.asarray(plate, np.float32).copy()
        draw_ref(context, ref, np.asarray(box, np.float64), inner=np.asarray(box, np.float64))
        frame = np.clip(context + 0.5, 0, 255).astype(np.uint8)
        tracks = Tracks(boxes=np.asarray(box, np.float32).reshape(1, 4),
                        scores=np.ones(1, np.float32), ids=np.ones(1, np.int32))  # fmt: skip
        with self._lock:  # one crop at a time through the process's model
            before = self._runner.invocations
            if self._pose is not None:
                poses, masks = self._pose.estimate_with_masks(frame, tracks)
                masks = masks if poses else []
            else:
                masks = self._runner.crop_masks(frame, tracks)
            self._runs += self._runner.invocations - before
        if not masks:  # an empty box, or no pose found
            return np.ones((h, w), np.float32)
        prob = ref_probability(masks[0].prob, masks[0].x0, masks[0].y0, masks[0].side, box,
                               (w, h))  # fmt: skip
        if float(prob.max(initial=0.0)) < MIN_PEAK:
            return np.ones((h, w), np.float32)
        return prob


def ref_probability(prob: np.ndarray, x0: float, y0: float, side: float, box: np.ndarray,
                    size: tuple[int, int]) -> np.ndarray:  # fmt: skip
    """A crop's ``(n, n)`` float32 probability map over the square ``[x0, x0+side) x
    [y0, y0+side)`` (frame pixels) resampled onto the pixels of a ``size`` ``(w, h)`` picture
    covering ``box`` ``x1, y1, x2, y2``: ``(h, w)`` float32 0..1 (0 outside the square)."""
    n = prob.shape[0]
    w, h = size
    x1, y1, x2, y2 = (float(v) for v in box)
    sx, sy = (x2 - x1) / w, (y2 - y1) / h  # frame pixels per picture pixel
    k = n / side  # crop pixels per frame pixel
    # picture pixel i has its centre at frame x = x1 + (i + 0.5) sx, crop index (x - x0) k - 0.5
    m = np.array([[sx * k, 0, (x1 + 0.5 * sx - x0) * k - 0.5],
                  [0, sy * k, (y1 + 0.5 * sy - y0) * k - 0.5]], np.float64)  # fmt: skip
    out = cv2.warpAffine(np.ascontiguousarray(prob, np.float32), m, (w, h),
                         flags=cv2.INTER_LINEAR | cv2.WARP_INVERSE_MAP,
                         borderMode=cv2.BORDER_CONSTANT, borderValue=0)  # fmt: skip
    return np.clip(out, 0.0, 1.0)
