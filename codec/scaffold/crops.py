"""What person segmentation and pose share: square person crops and the LiteRT interpreter.

:mod:`codec.scaffold.segmentation` and :mod:`codec.scaffold.pose` both run a 256x256 LiteRT
model on an upright square crop around each tracked box. The crop geometry, the input checks,
the :class:`CropMask` they exchange and the interpreter factory live here, so that neither of
the two modules has to import the other for them.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

import cv2
import numpy as np

from semcodec.codec.core.types import Tracks

__all__ = [
    "MODEL_INPUT",
    "CropMask",
    "check_frame",
    "check_tracks",
    "crop_square",
    "make_interpreter",
    "square_around",
]

#: Input side of the MediaPipe selfie model and of the BlazePose landmark models (pixels).
MODEL_INPUT = 256


@dataclass(frozen=True)
class CropMask:
    """A person-probability map on one square person crop.

    Attributes:
        track_id: whose crop it is.
        x0, y0, side: the crop square ``[x0, x0+side) x [y0, y0+side)`` in frame pixels.
        prob: ``(n, n)`` float32 person probability 0..1 over the crop.
    """

    track_id: int
    x0: float
    y0: float
    side: float
    prob: np.ndarray


def check_frame(frame: np.ndarray) -> None:
    """Raises ValueError unless ``frame`` is an ``(H, W, 3)`` uint8 array with H, W >= 1."""
    if not isinstance(frame, np.ndarray):
        raise ValueError(f"expected an (H, W, 3) uint8 RGB array, got {type(frame).__name__}")
    if frame.ndim != 3 or frame.shape[2] != 3 or frame.dtype != np.uint8 or 0 in frame.shape:
        raise ValueError(
            f"expected an (H, W, 3) uint8 RGB frame, got shape {frame.shape} {frame.dtype}"
        )


def check_tracks(tracks: Tracks) -> None:
    """Raises ValueError when boxes, scores and ids disagree in length or ids are not >= 1."""
    boxes, ids = np.asarray(tracks.boxes), np.asarray(tracks.ids)
    if boxes.ndim != 2 or boxes.shape[1] != 4 or ids.shape != (boxes.shape[0],):
        raise ValueError(
            f"tracks: expected (N, 4) boxes and (N,) ids, got {boxes.shape}, {ids.shape}"
        )
    if len(ids) and (ids.min() < 1 or ids.max() > np.iinfo(np.uint16).max):
        raise ValueError(f"track ids must be in 1..65535, got {ids.min()}..{ids.max()}")
    if not np.isfinite(boxes).all():
        raise ValueError("tracks: boxes must be finite")


def square_around(box: np.ndarray, margin: float) -> tuple[float, float, float]:
    """The square crop around ``box`` (x1, y1, x2, y2): ``(x0, y0, side)`` in frame pixels,
    centred on the box, side = ``margin`` x the box's long side."""
    x1, y1, x2, y2 = (float(v) for v in box)
    side = margin * max(x2 - x1, y2 - y1)
    return 0.5 * (x1 + x2) - 0.5 * side, 0.5 * (y1 + y2) - 0.5 * side, side


def crop_square(frame: np.ndarray, x0: float, y0: float, side: float, size: int) -> np.ndarray:
    """The square ``[x0, x0+side) x [y0, y0+side)`` of ``frame`` resized to ``size x size``.

    Coordinates are continuous frame pixels (pixel i covers [i, i+1)); parts outside the frame
    are zero. Bilinear when enlarging, area-like (pre-shrunk) when shrinking.

    Returns:
        ``(size, size, 3)`` float32 RGB in 0..1.
    """
    k = size / side  # crop pixels per frame pixel
    if k < 0.5:  # shrinking a lot: average first so that bilinear does not alias
        small = cv2.resize(
            frame, None, fx=max(k, 1e-3) * 2, fy=max(k, 1e-3) * 2, interpolation=cv2.INTER_AREA
        )
        sx = small.shape[1] / frame.shape[1]
        sy = small.shape[0] / frame.shape[0]
        m = np.array(
            [[k / sx, 0, (0.5 / sx - x0) * k - 0.5], [0, k / sy, (0.5 / sy - y0) * k - 0.5]],
            np.float64,
        )
        frame = small
    else:
        m = np.array([[k, 0, (0.5 - x0) * k - 0.5], [0, k, (0.5 - y0) * k - 0.5]], np.float64)
    out = cv2.warpAffine(
        frame,
        m,
        (size, size),
        flags=cv2.INTER_LINEAR,
        borderMode=cv2.BORDER_CONSTANT,
        borderValue=0,
    )
    return out.astype(np.float32) * np.float32(1 / 255)


def make_interpreter(path: os.PathLike | str, threads: int):
    """A LiteRT interpreter for ``path`` with ``threads`` CPU threads, tensors allocated.

    LiteRT prints "INFO: Created TensorFlow Lite XNNPACK delegate for CPU." on the C stderr
    when the tensors are first allocated; that line is silenced here (a load error still
    raises, with its message in the Python exception).
    """
    from ai_edge_litert.interpreter import Interpreter

    from semcodec.codec.core.console import native_stderr_silenced

    with native_stderr_silenced():
        interpreter = Interpreter(model_path=str(path), num_threads=threads)
        interpreter.allocate_tensors()
    return interpreter


class CropModel:
    """What a person-crop model (pose, segmentation) keeps of its LiteRT interpreter: the
    interpreter, how many crops it ran (:meth:`run`) and its FLOPs a crop."""

    def _use(self, interpreter) -> None:
        self._interpreter = interpreter
        #: runs of the model so far (one per person crop)
        self.invocations = 0
        self._flops_per_crop: int | None = None

    def run(self, in_index: int, crop: np.ndarray) -> None:
        """Runs the model on one ``(256, 256, 3)`` float32 crop at input ``in_index``."""
        self._interpreter.set_tensor(in_index, crop[None])
        self._interpreter.invoke()
        self.invocations += 1

    def flops_per_crop(self) -> int:
        """The model's FLOPs for one crop (:func:`interpreter_flops`, counted once)."""
        if self._flops_per_crop is None:
            self._flops_per_crop = interpreter_flops(self._interpreter)
        return self._flops_per_crop


def interpreter_flops(interpreter) -> int:
    """Floating-point operations of one run of a LiteRT ``interpreter``'s graph: 2 x the
    multiply-adds of its convolutions (``CONV_2D``, ``DEPTHWISE_CONV_2D``,
    ``TRANSPOSE_CONV``) and ``FULLY_CONNECTED`` layers, read from its tensors' shapes (the
    rest, activations and additions, is not counted, as PyTorch's ``FlopCounterMode`` counts
    only the matrix products). E.g. 116 MFLOP for the selfie model at 256x256, 772 for
    BlazePose full's landmark model."""
    shapes = {t["index"]: tuple(int(n) for n in t["shape"])
              for t in interpreter.get_tensor_details()}  # fmt: skip
    total = 0
    for op in interpreter._get_ops_details():  # LiteRT's graph, as its visualiser reads it
        name, ins, outs = op["op_name"], op["inputs"], op["outputs"]
        out = int(np.prod(shapes[outs[0]])) if len(outs) else 0
        if name == "CONV_2D":  # weights (out channels, kh, kw, in channels)
            total += 2 * out * int(np.prod(shapes[ins[1]][1:]))
        elif name == "DEPTHWISE_CONV_2D":  # weights (1, kh, kw, channels)
            total += 2 * out * shapes[ins[1]][1] * shapes[ins[1]][2]
        elif name == "FULLY_CONNECTED":  # weights (out, in)
            total += 2 * out * shapes[ins[1]][-1]
        elif name == "TRANSPOSE_CONV":  # inputs (output shape, weights, input)
            total += 2 * int(np.prod(shapes[ins[2]])) * int(np.prod(shapes[ins[1]][:3]))
    return total
