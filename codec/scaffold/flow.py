"""Dense optical flow scaffold: DIS flow on a coarse grid, and the warp that uses it.

:class:`FlowEstimator` runs OpenCV's DIS optical flow on downscaled grayscale frames and
returns a :class:`~codec.core.types.Flow` in the *backward* convention: for a pixel
``p`` of the current frame, ``p + field(p)`` is where its content was in the previous frame.
So DIS is run from the current frame to the previous one, and :func:`warp` predicts the
current frame by sampling the previous one at ``p + field(p)``.

Three sizes are involved:

* the frame, ``W x H`` (e.g. 768x576);
* the compute size, ``compute_scale`` times the frame (DIS runs there; 0.25 -> 192x144);
* the grid, ``scale`` times the frame (what is sent; 0.125 -> 96x72). The field computed at
  the compute size is area-averaged (or bilinearly enlarged) to the grid and its
  displacements are converted to frame pixels.

Grid values are sampled at cell centres, the same alignment ``cv2.resize`` uses, so
:func:`warp` upsamples the grid to full resolution with ``cv2.resize(INTER_LINEAR)``.

Measured on PETS09-S2L1 768x576 (frames 1-40, 96x72 grid, 2 shared cores): copying frame
t-1 predicts frame t at 25.97 dB PSNR; warping it with the estimated flow gives

=========  ==============  ========  =================
preset     compute_scale   estimate  warped prediction
=========  ==============  ========  =================
medium     0.25 (default)  4.2 ms    29.47 dB (+3.5)
medium     0.5             13.8 ms   30.79 dB (+4.8)
fast       0.5             3.4 ms    29.39 dB (+3.4)
ultrafast  0.5             1.9 ms    29.59 dB (+3.6)
ultrafast  0.25            1.2 ms    27.93 dB (+2.0)
=========  ==============  ========  =================

and :func:`warp` takes about 3 ms.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path

import cv2
import numpy as np

from semcodec.codec.core.types import Flow
from semcodec.codec.entropy.flow import FlowPrior, fit_flow_prior
from semcodec.codec.entropy.rans import EntropyCodingError

#: DIS presets by name.
PRESETS: dict[str, int] = {
    "ultrafast": cv2.DISOPTICAL_FLOW_PRESET_ULTRAFAST,
    "fast": cv2.DISOPTICAL_FLOW_PRESET_FAST,
    "medium": cv2.DISOPTICAL_FLOW_PRESET_MEDIUM,
}

#: Smallest side DIS is run at (its patches are 8 pixels; smaller images give no flow).
_MIN_COMPUTE_SIDE = 16


@dataclass(frozen=True)
class FlowConfig:
    """Settings of :class:`FlowEstimator`.

    Attributes:
        scale: size of the transmitted flow grid as a fraction of the frame, in ``(0, 1]``
            (0.125: 768x576 -> 96x72 cells).
        preset: DIS preset, ``"medium"``, ``"fast"`` or ``"ultrafast"``.
        compute_scale: resolution at which DIS runs, as a fraction of the frame, in
            ``(0, 1]``; the result is resampled to the grid.
    """

    scale: float = 0.125
    preset: str = "medium"
    compute_scale: float = 0.25

    def __post_init__(self) -> None:
        for name in ("scale", "compute_scale"):
            value = getattr(self, name)
            if not 0 < value <= 1:
                raise ValueError(f"FlowConfig.{name} must be in (0, 1], got {value}")
        if self.preset not in PRESETS:
            raise ValueError(
                f"FlowConfig.preset must be one of {sorted(PRESETS)}, got {self.preset!r}"
            )

    def grid_size(self, frame_size: tuple[int, int]) -> tuple[int, int]:
        """``(w, h)`` of the flow grid for a frame of ``frame_size = (width, height)``."""
        return _scaled(frame_size, self.scale, 1)

    def compute_size(self, frame_size: tuple[int, int]) -> tuple[int, int]:
        """``(w, h)`` at which DIS runs for a frame of ``frame_size = (width, height)``."""
        width, height = frame_size
        cw, ch = _scaled(frame_size, self.compute_scale, _MIN_COMPUTE_SIDE)
        return min(cw, width), min(ch, height)


def _scaled(size: tuple[int, int], scale: float, minimum: int) -> tuple[int, int]:
    return tuple(max(minimum, round(side * scale)) for side in size)  # type: ignore[return-value]


def _check_frame(frame: np.ndarray, name: str) -> None:
    if not isinstance(frame, np.ndarray) or frame.dtype != np.uint8:
        raise ValueError(
            f"{name} must be a uint8 numpy array, got {getattr(frame, 'dtype', frame)}"
        )
    if frame.ndim != 3 or frame.shape[2] != 3 or frame.shape[0] < 2 or frame.shape[1] < 2:
        raise ValueError(f"{name} must have shape (H, W, 3) with H, W >= 2, got {frame.shape}")


class FlowEstimator:
    """DIS optical flow between consecutive frames, returned on a coarse grid.

    One instance holds one OpenCV DIS object: use one estimator per thread.
    """

    def __init__(self, config: FlowConfig | None = None) -> None:
        self.config = config or FlowConfig()
        self._dis = cv2.DISOpticalFlow_create(PRESETS[self.config.preset])

    def __repr__(self) -> str:
        return f"FlowEstimator({self.config})"

    def _gray(self, frame: np.ndarray, size: tuple[int, int]) -> np.ndarray:
        gray = cv2.cvtColor(frame, cv2.COLOR_RGB2GRAY)
        if (gray.shape[1], gray.shape[0]) != size:
            gray = cv2.resize(gray, size, interpolation=cv2.INTER_AREA)
        return gray

    def estimate(self, previous: np.ndarray, current: np.ndarray) -> Flow:
        """Flow of ``current`` relative to ``previous``, backward convention.

        Args:
            previous: frame t-1, ``(H, W, 3) uint8`` RGB.
            current: frame t, same shape.

        Returns:
            :class:`Flow` with ``field`` of shape ``(h, w, 2)`` float32 (``config.grid_size``),
            displacements ``dx, dy`` in frame pixels such that sampling ``previous`` at
            ``p + field(p)`` predicts ``current``.

        Raises:
            ValueError: wrong dtype or shape, or the two frames differ in shape.
        """
        _check_frame(previous, "previous")
        _check_frame(current, "current")
        if previous.shape != current.shape:
            raise ValueError(f"frame shapes differ: {previous.shape} vs {current.shape}")
        height, width = current.shape[:2]
        frame_size = (width, height)
        cw, ch = self.config.compute_size(frame_size)
        gw, gh = self.config.grid_size(frame_size)

        # DIS(I0, I1) gives f with I0(p) ~ I1(p + f(p)): current -> previous is backward flow.
        field = self._dis.calc(self._gray(current, (cw, ch)), self._gray(previous, (cw, ch)), None)
        if (gw, gh) != (cw, ch):
            shrink = gw * gh < cw * ch
            interp = cv2.INTER_AREA if shrink else cv2.INTER_LINEAR
            field = cv2.resize(field, (gw, gh), interpolation=interp)
        field = np.ascontiguousarray(field, dtype=np.float32)
        field[..., 0] *= width / cw
        field[..., 1] *= height / ch
        return Flow(field=field, frame_size=frame_size)


def dense_field(flow: Flow) -> np.ndarray:
    """The flow upsampled to every frame pixel: ``(H, W, 2)`` float32 in frame pixels."""
    width, height = flow.frame_size
    field = np.asarray(flow.field, dtype=np.float32)
    if field.ndim != 3 or field.shape[2] != 2:
        raise ValueError(f"flow.field must have shape (h, w, 2), got {field.shape}")
    if (field.shape[1], field.shape[0]) == (width, height):
        return field
    return cv2.resize(field, (width, height), interpolation=cv2.INTER_LINEAR)


def warp(image: np.ndarray, flow: Flow) -> np.ndarray:
    """Predicts frame t by sampling ``image`` (frame t-1) at ``p + flow(p)``.

    Args:
        image: ``(H, W, 3) uint8`` with ``(W, H) == flow.frame_size``.
        flow: backward flow from :meth:`FlowEstimator.estimate` (or decoded from a stream).

    Returns:
        ``(H, W, 3) uint8``: bilinear sampling, borders replicated.

    Raises:
        ValueError: wrong dtype or shape, or the image size differs from ``flow.frame_size``.
    """
    _check_frame(image, "image")
    height, width = image.shape[:2]
    if (width, height) != tuple(flow.frame_size):
        raise ValueError(f"image is {width}x{height} but the flow is for {flow.frame_size}")
    field = dense_field(flow)
    xs = np.arange(width, dtype=np.float32)[None, :] + field[..., 0]
    ys = np.arange(height, dtype=np.float32)[:, None] + field[..., 1]
    return cv2.remap(image, xs, ys, cv2.INTER_LINEAR, borderMode=cv2.BORDER_REPLICATE)


def fit_flow_prior_from_video(
    path: str | Path,
    frames: range | Iterable[int] = range(1, 501),
    scale: float = 0.125,
    step: float = 0.5,
    *,
    preset: str = "medium",
    progress: Callable[[int, int], None] | None = None,
) -> FlowPrior:
    """Fit a prior on DIS flow (the scaffold's :class:`FlowEstimator`) of a video file.

    Args:
        path: a video OpenCV can read.
        frames: 1-based frame numbers; the flow of frame ``k`` (from ``k - 1``) is used for
            every ``k`` in ``frames`` with ``k - 1`` also in ``frames`` (so the default,
            PETS09-S2L1's training split, gives 499 fields).
        scale: flow grid size as a fraction of the frame (``FlowConfig.scale``).
        step: quantisation step in frame pixels.
        preset: DIS preset (``FlowConfig.preset``).
        progress: called with ``(frames read, frames to read)`` after every frame.
    """
    wanted = sorted({int(k) for k in frames})
    if not wanted or wanted[0] < 1:
        raise EntropyCodingError("frames must be 1-based frame numbers")
    wanted_set = set(wanted)
    estimator = FlowEstimator(FlowConfig(scale=scale, preset=preset))
    last = wanted[-1]

    def fields():
        cap = cv2.VideoCapture(str(path))
        if not cap.isOpened():
            raise EntropyCodingError(f"cannot open video {path}")
        previous = None
        try:
            for number in range(1, last + 1):
                if number not in wanted_set:
                    ok = cap.grab()
                    previous = None
                else:
                    ok, bgr = cap.read()
                if not ok:
                    raise EntropyCodingError(f"{path} ends before frame {number}")
                if number in wanted_set:
                    frame = cv2.cvtColor(bgr, cv2.COLOR_BGR2RGB)
                    if previous is not None:
                        yield estimator.estimate(previous, frame).field
                    previous = frame
                if progress is not None:
                    progress(number, last)
        finally:
            cap.release()

    name = Path(path).name
    description = (
        f"DIS {preset} flow of {name} frames {wanted[0]}-{last} ({len(wanted)} frames), "
        f"grid scale {scale}, step {step} px"
    )
    return fit_flow_prior(fields(), step, description)
