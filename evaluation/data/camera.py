"""New cameras from the data there is: zoom into a region, or shrink the frame.

A codec tuned on one camera must keep working on others; ``--camera-transform`` lets a
developer make them from the sequences at hand:

- ``zoom=Z,x=X,y=Y``: crop a window of ``1/Z`` of the frame's width and height centred at
  ``(X, Y)`` (fractions of the frame, default the centre; the window is moved inside the
  frame when it would leave it) and resize it back to the frame's size, so people are ``Z``
  times taller;
- ``scale=S``: resize the whole frame by ``S`` (``S < 1``: people smaller, the frame too).

Both may be given (zoom first, then scale). The ground truth follows: boxes are mapped with
the frames; a counted person less than half inside the crop becomes an ignore region (a
detector is neither paid nor punished for it), and boxes wholly outside are dropped.
Frame sizes are rounded to even numbers (the video baselines need them).
"""

from __future__ import annotations

from dataclasses import dataclass

import cv2
import numpy as np

from semcodec.evaluation.data.groundtruth import GroundTruth

#: A counted box with less than this fraction of its area inside the crop is ignored.
MIN_VISIBLE = 0.5


class CameraTransformError(ValueError):
    """A ``--camera-transform`` text that cannot be parsed or applied."""


@dataclass(frozen=True)
class CameraTransform:
    """Crop-and-resize (``zoom`` about ``x, y``) then resize by ``scale``.

    Attributes:
        zoom: >= 1; the crop is ``1/zoom`` of the frame per axis.
        x: crop centre, fraction of the frame width in [0, 1].
        y: crop centre, fraction of the frame height in [0, 1].
        scale: (0, 4]; the output is ``scale`` times the input size.
    """

    zoom: float = 1.0
    x: float = 0.5
    y: float = 0.5
    scale: float = 1.0

    def __post_init__(self) -> None:
        if not (np.isfinite(self.zoom) and 1.0 <= self.zoom <= 16.0):
            raise CameraTransformError(f"zoom must be in [1, 16], got {self.zoom}")
        if not (0.0 <= self.x <= 1.0 and 0.0 <= self.y <= 1.0):
            raise CameraTransformError(f"x and y must be in [0, 1], got {self.x}, {self.y}")
        if not (np.isfinite(self.scale) and 0.0 < self.scale <= 4.0):
            raise CameraTransformError(f"scale must be in (0, 4], got {self.scale}")

    @property
    def is_identity(self) -> bool:
        return self.zoom == 1.0 and self.scale == 1.0

    def describe(self) -> str:
        """The canonical text form (what :func:`parse_camera_transform` reads back)."""
        if self.is_identity:
            return "none"
        parts = []
        if self.zoom != 1.0:
            parts += [f"zoom={self.zoom:g}", f"x={self.x:g}", f"y={self.y:g}"]
        if self.scale != 1.0:
            parts.append(f"scale={self.scale:g}")
        return ",".join(parts)

    def crop(self, width: int, height: int) -> tuple[int, int, int, int]:
        """The crop ``(x0, y0, x1, y1)`` in input pixels (end exclusive)."""
        cw, ch = max(2, round(width / self.zoom)), max(2, round(height / self.zoom))
        x0 = int(round(np.clip(self.x * width - cw / 2, 0, width - cw)))
        y0 = int(round(np.clip(self.y * height - ch / 2, 0, height - ch)))
        return x0, y0, x0 + cw, y0 + ch

    def output_size(self, width: int, height: int) -> tuple[int, int]:
        """``(width, height)`` of the transformed frames (even numbers, >= 16)."""

        def even(v: float) -> int:
            return max(16, int(round(v / 2)) * 2)

        return even(width * self.scale), even(height * self.scale)

    def frames(self, frames: np.ndarray) -> np.ndarray:
        """(T, H, W, 3) uint8 RGB -> (T, H', W', 3) uint8 RGB (``cv2.INTER_AREA`` to shrink,
        ``INTER_CUBIC`` to enlarge)."""
        frames = np.asarray(frames)
        if frames.ndim != 4 or frames.shape[-1] != 3 or frames.dtype != np.uint8:
            raise CameraTransformError(f"frames must be (T, H, W, 3) uint8, got {frames.dtype} "
                                       f"{frames.shape}")  # fmt: skip
        if self.is_identity:
            return frames
        height, width = frames.shape[1:3]
        x0, y0, x1, y1 = self.crop(width, height)
        size = self.output_size(width, height)
        grow = size[0] > x1 - x0
        method = cv2.INTER_CUBIC if grow else cv2.INTER_AREA
        out = np.empty((len(frames), size[1], size[0], 3), np.uint8)
        for i, frame in enumerate(frames):
            out[i] = cv2.resize(np.ascontiguousarray(frame[y0:y1, x0:x1]), size,
                                interpolation=method)  # fmt: skip
        return out

    def groundtruth(self, gt: GroundTruth, width: int, height: int) -> GroundTruth:
        """``gt`` of ``width`` x ``height`` frames mapped to the transformed frames."""
        if self.is_identity:
            return gt
        x0, y0, x1, y1 = self.crop(width, height)
        out_w, out_h = self.output_size(width, height)
        sx, sy = out_w / (x1 - x0), out_h / (y1 - y0)
        xyxy = gt.boxes.copy()
        xyxy[:, 2:] += xyxy[:, :2]
        clipped = xyxy.copy()
        clipped[:, [0, 2]] = np.clip(xyxy[:, [0, 2]], x0, x1)
        clipped[:, [1, 3]] = np.clip(xyxy[:, [1, 3]], y0, y1)
        area = np.prod(xyxy[:, 2:] - xyxy[:, :2], axis=1)
        inside = np.prod(clipped[:, 2:] - clipped[:, :2], axis=1)
        visible = np.divide(inside, area, out=np.zeros_like(area), where=area > 0)
        keep = np.flatnonzero(inside > 0)
        boxes = np.empty((len(keep), 4))
        boxes[:, 0] = (clipped[keep, 0] - x0) * sx
        boxes[:, 1] = (clipped[keep, 1] - y0) * sy
        boxes[:, 2] = (clipped[keep, 2] - clipped[keep, 0]) * sx
        boxes[:, 3] = (clipped[keep, 3] - clipped[keep, 1]) * sy
        return GroundTruth(frame_numbers=gt.frame_numbers[keep], ids=gt.ids[keep], boxes=boxes,
                           counted=gt.counted[keep] & (visible[keep] >= MIN_VISIBLE),
                           world_xy=gt.world_xy[keep], format=gt.format,
                           source=gt.source)  # fmt: skip


def parse_camera_transform(text: str | None) -> CameraTransform:
    """``"zoom=2,x=0.5,y=0.6"``, ``"scale=0.5"``, both, or ``"none"``/empty.

    Raises:
        CameraTransformError: an unknown key, a repeated key, a value that is not a number,
            or a value out of range.
    """
    if text is None or text.strip().lower() in ("", "none"):
        return CameraTransform()
    values: dict[str, float] = {}
    for part in text.split(","):
        key, sep, value = part.partition("=")
        key = key.strip().lower()
        if not sep or key not in ("zoom", "x", "y", "scale"):
            raise CameraTransformError(f"camera transform {text!r}: expected key=value pairs "
                                       "with keys zoom, x, y, scale (e.g. zoom=2,x=0.5,y=0.6 "
                                       "or scale=0.5)")  # fmt: skip
        if key in values:
            raise CameraTransformError(f"camera transform {text!r}: {key} given twice")
        try:
            values[key] = float(value)
        except ValueError:
            raise CameraTransformError(f"camera transform {text!r}: {key}={value!r} is not a "
                                       "number") from None  # fmt: skip
    if ("x" in values or "y" in values) and "zoom" not in values:
        raise CameraTransformError(f"camera transform {text!r}: x and y place a zoom's crop; "
                                   "give zoom=Z too")  # fmt: skip
    return CameraTransform(**values)
