"""Person detector: SSDLite-MobileNetV2 (ONNX, CPU) with optional tiling.

Used by the edge (the detect step of the scaffold encoder) and by the evaluation harness (MODA
on decoded frames), so it lives in ``codec`` and depends on nothing above it.

The model (registry name ``ssdlite_person``, see :mod:`codec.core.models`) takes uint8
``[N, H, W, 3]`` RGB and resizes to 300x300 inside the graph (bilinear); here every window is
resized to 300x300 with ``cv2.INTER_AREA`` before feeding, which gives nearly the same boxes
(checked on PETS09-S2L1 frame 1: corners within 0.005 of the frame size) and lets the windows
of one frame run as one batch. The small differences do move MODA by a few hundredths on
PETS09-S2L1 (either way, depending on resolution and tiling), so ``input_resize="graph"``
(feed the window as it is) is kept as an option.

With ``tiles = n > 1`` the frame is also cut into an n x n grid of overlapping windows, so
small pedestrians are seen at a higher resolution; the boxes of all windows are mapped back to
frame pixels and merged by class-agnostic non-maximum suppression (NMS), then by containment:
a window that sees only part of a large person (a head, a torso) reports that part as a
person, inside the box the whole-frame window (or a neighbouring tile) found for the whole
body, and NMS keeps both (their IoU is small). :func:`suppress_contained` drops a box that lies
mostly inside a clearly taller box that scores at least as much (on TUD-Stadtmitte 91-179 with 2x2
tiles at score 0.3 this took MODA from 0.44 to 0.76; on PETS09-S2L1 501-795 from 0.61 to
0.65; 24 frames each).

Speed (one onnxruntime session per :class:`PersonDetector`, created in ``__init__`` and shared
by :meth:`PersonDetector.with_config`): the cost is about linear in the number of windows,
1 for the whole frame, 5 for ``tiles=2`` with the whole frame; ``threads`` sets onnxruntime's
intra-op thread count.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

import cv2
import numpy as np

from semcodec.codec.core.models import resolve_model

MODEL_NAME = "ssdlite_person"
INPUT_SIZE = 300
PERSON_CLASS = 1


class InvalidFrameError(ValueError):
    """A frame is not a non-empty (H, W, 3) uint8 RGB array."""


@dataclass(frozen=True)
class DetectorConfig:
    """How frames are detected.

    Attributes:
        score_threshold: keep detections with score >= this, in [0, 1].
        tiles: windows per axis; 1 is the whole frame, 2 a 2x2 grid of overlapping tiles.
        tile_overlap: overlap of neighbouring tiles as a fraction of the tile size, in [0, 1).
        include_full_frame: with tiles > 1, also detect on the whole frame.
        nms_iou: IoU above which a lower-scored box is suppressed when merging, in (0, 1].
        contained_cover: after NMS, drop a box of which at least this fraction lies inside
            a box 1.3x as tall scoring at least as much (a part of a person seen by a
            tile), in [0, 1]; 0 turns it off. Like NMS it commutes with a score cut.
        min_box_px: drop boxes narrower or lower than this many frame pixels (>= 0).
        input_resize: ``"area"`` resizes every window to 300x300 with ``cv2.INTER_AREA`` (all
            windows of a frame run as one batch); ``"graph"`` feeds windows at their own size
            and lets the graph resize (bilinear, no antialiasing; windows of equal size are
            batched).
    """

    score_threshold: float = 0.5
    tiles: int = 1
    tile_overlap: float = 0.25
    include_full_frame: bool = True
    nms_iou: float = 0.5
    contained_cover: float = 0.8
    min_box_px: float = 0
    input_resize: Literal["area", "graph"] = "area"

    def __post_init__(self) -> None:
        checks = (
            (0.0 <= self.score_threshold <= 1.0, "score_threshold must be in [0, 1]"),
            (isinstance(self.tiles, int) and self.tiles >= 1, "tiles must be an int >= 1"),
            (0.0 <= self.tile_overlap < 1.0, "tile_overlap must be in [0, 1)"),
            (0.0 < self.nms_iou <= 1.0, "nms_iou must be in (0, 1]"),
            (0.0 <= self.contained_cover <= 1.0, "contained_cover must be in [0, 1]"),
            (self.min_box_px >= 0, "min_box_px must be >= 0"),
            (self.input_resize in ("area", "graph"), "input_resize must be 'area' or 'graph'"),
        )
        for ok, message in checks:
            if not ok:
                raise ValueError(f"DetectorConfig: {message}; got {self}")


@dataclass(frozen=True)
class Detections:
    """Person detections of one frame.

    Attributes:
        boxes: (N, 4) float32 ``x1, y1, x2, y2`` in frame pixels.
        scores: (N,) float32 in [0, 1], in descending order.
    """

    boxes: np.ndarray
    scores: np.ndarray

    def __post_init__(self) -> None:
        boxes = np.asarray(self.boxes, dtype=np.float32).reshape(-1, 4)
        scores = np.asarray(self.scores, dtype=np.float32).reshape(-1)
        if len(boxes) != len(scores):
            raise ValueError(f"Detections: {len(boxes)} boxes but {len(scores)} scores")
        object.__setattr__(self, "boxes", boxes)
        object.__setattr__(self, "scores", scores)

    def __len__(self) -> int:
        return len(self.scores)

    @staticmethod
    def empty() -> Detections:
        """No detections."""
        return Detections(np.zeros((0, 4), np.float32), np.zeros(0, np.float32))

    def above(self, threshold: float) -> Detections:
        """The detections with score >= ``threshold``."""
        keep = self.scores >= threshold
        return Detections(self.boxes[keep], self.scores[keep])


def tile_windows(
    height: int, width: int, tiles: int, overlap: float, include_full_frame: bool = True
) -> list[tuple[int, int, int, int]]:
    """Windows ``(x0, y0, x1, y1)`` (pixels, end exclusive) covering a frame.

    With ``tiles = n``, n windows per axis of size ``L / (n - (n - 1) * overlap)`` cover the
    length ``L`` with neighbours overlapping by ``overlap`` of a window; the whole frame comes
    first when ``include_full_frame`` (always for ``n = 1``).
    """
    windows: list[tuple[int, int, int, int]] = []
    if tiles == 1 or include_full_frame:
        windows.append((0, 0, width, height))
    if tiles == 1:
        return windows
    xs, ys = _spans(width, tiles, overlap), _spans(height, tiles, overlap)
    windows += [(x0, y0, x1, y1) for y0, y1 in ys for x0, x1 in xs]
    return windows


def _spans(length: int, tiles: int, overlap: float) -> list[tuple[int, int]]:
    size = length / (tiles - (tiles - 1) * overlap)
    stride = size * (1.0 - overlap)
    spans = []
    for i in range(tiles):
        start = min(int(round(i * stride)), length - 1)
        end = length if i == tiles - 1 else max(start + 1, int(round(i * stride + size)))
        spans.append((start, min(end, length)))
    return spans


def box_area(boxes: np.ndarray) -> np.ndarray:
    """(N,) areas of (N, 4) ``x1, y1, x2, y2`` boxes (0 for inverted boxes)."""
    return np.clip(boxes[:, 2] - boxes[:, 0], 0, None) * np.clip(boxes[:, 3] - boxes[:, 1], 0, None)


def intersection_area(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """(N, M) intersection areas of (N, 4) and (M, 4) ``x1, y1, x2, y2`` boxes."""
    lo = np.maximum(a[:, None, :2], b[None, :, :2])
    hi = np.minimum(a[:, None, 2:], b[None, :, 2:])
    wh = np.clip(hi - lo, 0.0, None)
    return wh[..., 0] * wh[..., 1]


def box_iou(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """IoU of every pair of boxes.

    Args:
        a: (N, 4) ``x1, y1, x2, y2``.
        b: (M, 4) ``x1, y1, x2, y2``.

    Returns:
        (N, M) float64 IoU in [0, 1]; 0 where the union is empty (inverted boxes count as 0
        area).
    """
    a = np.asarray(a, dtype=np.float64).reshape(-1, 4)
    b = np.asarray(b, dtype=np.float64).reshape(-1, 4)
    inter = intersection_area(a, b)
    union = box_area(a)[:, None] + box_area(b)[None, :] - inter
    return np.divide(inter, union, out=np.zeros_like(inter), where=union > 0)


def nms(boxes: np.ndarray, scores: np.ndarray, iou_threshold: float) -> np.ndarray:
    """Greedy class-agnostic NMS.

    Args:
        boxes: (N, 4) ``x1, y1, x2, y2``.
        scores: (N,) scores.
        iou_threshold: a box is dropped when its IoU with a kept higher-scored box exceeds this.

    Returns:
        (K,) int64 indices of the kept boxes, by descending score.
    """
    order = np.argsort(-np.asarray(scores), kind="stable")
    boxes = np.asarray(boxes, dtype=np.float64)
    keep: list[int] = []
    while len(order):
        best, order = order[0], order[1:]
        keep.append(int(best))
        if len(order):
            order = order[box_iou(boxes[best : best + 1], boxes[order])[0] <= iou_threshold]
    return np.array(keep, dtype=np.int64)


#: A box counts as a part of another only when the other is at least this much taller.
PART_HEIGHT_RATIO = 1.3

def suppress_contained(boxes: np.ndarray, scores: np.ndarray, cover: float) -> np.ndarray:
    """Indices of the boxes that are not a part of another box.

    A box is a part when at least ``cover`` of its area lies inside another box that is
    :data:`PART_HEIGHT_RATIO` times as tall and scores at least as much (a tile's view of a
    head or torso inside the whole person). Since the container must score at least as much,
    cutting the result at a score threshold equals suppressing after the cut.

    Args:
        boxes: (N, 4) ``x1, y1, x2, y2``.
        scores: (N,) scores.
        cover: fraction in (0, 1]; 0 keeps every box.

    Returns:
        (K,) int64 indices of the kept boxes, in their input order.
    """
    boxes = np.asarray(boxes, dtype=np.float64).reshape(-1, 4)
    scores = np.asarray(scores, dtype=np.float64).reshape(-1)
    if cover <= 0 or len(boxes) < 2:
        return np.arange(len(boxes), dtype=np.int64)
    area = box_area(boxes)
    inside = intersection_area(boxes, boxes) / np.maximum(area[:, None], 1e-9)
    height = boxes[:, 3] - boxes[:, 1]
    container = (height[None, :] >= PART_HEIGHT_RATIO * height[:, None]) & (
        scores[None, :] >= scores[:, None])
    part = ((inside >= cover) & container).any(axis=1)
    return np.flatnonzero(~part).astype(np.int64)


def check_frame(frame: object) -> np.ndarray:
    """Returns ``frame`` if it is a non-empty (H, W, 3) uint8 array, else raises."""
    if not isinstance(frame, np.ndarray):
        raise InvalidFrameError(f"frame must be a numpy array, got {type(frame).__name__}")
    if frame.dtype != np.uint8:
        raise InvalidFrameError(f"frame must be uint8 RGB, got dtype {frame.dtype}")
    if frame.ndim != 3 or frame.shape[2] != 3 or frame.shape[0] == 0 or frame.shape[1] == 0:
        raise InvalidFrameError(f"frame must be a non-empty (H, W, 3) array, got {frame.shape}")
    return frame


class PersonDetector:
    """SSDLite-MobileNetV2 person detector on CPU (onnxruntime).

    One onnxruntime session is created per instance, in ``__init__``; :meth:`with_config`
    returns a detector that shares it.

    Args:
        config: thresholds and tiling.
        models_dir: where to look for the model first (see :func:`codec.core.models.resolve_model`).
        threads: onnxruntime intra-op threads (>= 1); ``None`` lets onnxruntime choose (all
            cores). Inter-op parallelism is always 1.
        model_path: an ONNX file with the same interface to use instead of the registry's
            ``ssdlite_person`` (e.g. the one written by
            :func:`codec.detection.convert.build_detector_files`, or the tf2onnx conversion);
            ``models_dir`` is then not used.

    Raises:
        ValueError: ``threads`` < 1.
        codec.core.models.ModelNotFoundError: the model file cannot be found.
    """

    def __init__(
        self,
        config: DetectorConfig | None = None,
        models_dir: str | os.PathLike | None = None,
        threads: int | None = None,
        model_path: str | os.PathLike | None = None,
    ) -> None:
        import onnxruntime as ort

        if threads is not None and (isinstance(threads, bool) or int(threads) != threads):
            raise ValueError(f"threads must be an int >= 1 or None, got {threads!r}")
        if threads is not None and threads < 1:
            raise ValueError(f"threads must be >= 1 or None, got {threads}")
        self.config = config or DetectorConfig()
        self.threads = None if threads is None else int(threads)
        options = ort.SessionOptions()
        options.log_severity_level = 3
        options.inter_op_num_threads = 1
        # no busy-waiting between runs: the edge shares its cores with segmentation and flow
        options.add_session_config_entry("session.intra_op.allow_spinning", "0")
        if self.threads is not None:
            options.intra_op_num_threads = self.threads
        if model_path is not None:
            self.model_path = Path(model_path)
        else:
            self.model_path = resolve_model(MODEL_NAME, models_dir)
        self._session = ort.InferenceSession(
            str(self.model_path), options, providers=["CPUExecutionProvider"]
        )
        self._input = self._session.get_inputs()[0].name

    def with_config(self, config: DetectorConfig) -> PersonDetector:
        """A detector sharing this one's session, with another config."""
        other = object.__new__(PersonDetector)
        other.__dict__.update(self.__dict__)
        other.config = config
        return other

    def _infer(self, batch: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(B, h, w, 3) uint8 → boxes (B, 100, 4) ymin, xmin, ymax, xmax normalised,
        scores (B, 100) (0 past num_detections), classes (B, 100) float."""
        num, boxes, scores, classes = self._session.run(None, {self._input: batch})
        valid = np.arange(scores.shape[1])[None, :] < num[:, None]
        return boxes, np.where(valid, scores, 0.0), classes

    def _infer_windows(
        self, frame: np.ndarray, windows: list[tuple[int, int, int, int]]
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Runs the windows of one frame, batching those whose inputs share a size.

        Returns boxes (W, 100, 4), scores (W, 100), classes (W, 100) in window order.
        """
        inputs = [_window_input(frame, w, self.config.input_resize) for w in windows]
        groups: dict[tuple[int, ...], list[int]] = {}
        for i, x in enumerate(inputs):
            groups.setdefault(x.shape, []).append(i)
        results: list[tuple[np.ndarray, ...]] = [()] * len(inputs)
        for members in groups.values():
            out = self._infer(np.stack([inputs[i] for i in members]))
            for j, i in enumerate(members):
                results[i] = tuple(o[j] for o in out)
        boxes, scores, classes = (np.stack(parts) for parts in zip(*results, strict=True))
        return boxes, scores, classes

    def candidates(self, frame: np.ndarray, min_score: float | None = None) -> Detections:
        """All window detections of one frame in frame pixels, merged by NMS.

        Args:
            frame: (H, W, 3) uint8 RGB.
            min_score: keep scores >= this (default: the config's threshold).
        """
        cfg = self.config
        frame = check_frame(frame)
        threshold = cfg.score_threshold if min_score is None else min_score
        height, width = frame.shape[:2]
        windows = tile_windows(height, width, cfg.tiles, cfg.tile_overlap, cfg.include_full_frame)
        norm, scores, classes = self._infer_windows(frame, windows)
        boxes = [_to_frame(norm[i], w) for i, w in enumerate(windows)]
        boxes_all, scores_all = np.concatenate(boxes), scores.reshape(-1)
        keep = (classes.reshape(-1) == PERSON_CLASS) & (scores_all >= threshold)
        keep &= scores_all > 0
        if cfg.min_box_px > 0:
            size = np.minimum(boxes_all[:, 2] - boxes_all[:, 0], boxes_all[:, 3] - boxes_all[:, 1])
            keep &= size >= cfg.min_box_px
        boxes_all, scores_all = boxes_all[keep], scores_all[keep]
        kept = nms(boxes_all, scores_all, cfg.nms_iou)
        boxes_all, scores_all = boxes_all[kept], scores_all[kept]
        whole = suppress_contained(boxes_all, scores_all, cfg.contained_cover)
        return Detections(boxes_all[whole], scores_all[whole])

    def detect(self, frame: np.ndarray) -> Detections:
        """Persons in one (H, W, 3) uint8 RGB frame (boxes in frame pixels)."""
        return self.candidates(frame)

    def detect_many(
        self, frames: np.ndarray | Sequence[np.ndarray], frame_numbers: Sequence[int] | None = None
    ) -> dict[int, Detections]:
        """Detections of each frame, keyed by ``frame_numbers`` (default 1, 2, ... like MOT).

        Args:
            frames: (T, H, W, 3) uint8 RGB array or a sequence of (H, W, 3) frames.
            frame_numbers: T frame numbers for the keys.
        """
        numbers = list(range(1, len(frames) + 1)) if frame_numbers is None else frame_numbers
        if len(numbers) != len(frames):
            raise ValueError(f"{len(frames)} frames but {len(numbers)} frame numbers")
        return {int(n): self.detect(f) for n, f in zip(numbers, frames, strict=True)}


def _window_input(
    frame: np.ndarray, window: tuple[int, int, int, int], resize: str = "area"
) -> np.ndarray:
    """(300, 300, 3) uint8 model input of one window (INTER_AREA resize), or the (h, w, 3)
    window itself for ``resize="graph"``."""
    x0, y0, x1, y1 = window
    crop = np.ascontiguousarray(frame[y0:y1, x0:x1])
    if resize == "graph":
        return crop
    return cv2.resize(crop, (INPUT_SIZE, INPUT_SIZE), interpolation=cv2.INTER_AREA)


def _to_frame(norm: np.ndarray, window: tuple[int, int, int, int]) -> np.ndarray:
    """(K, 4) normalised ymin, xmin, ymax, xmax in a window → (K, 4) frame x1, y1, x2, y2."""
    x0, y0, x1, y1 = window
    norm = np.clip(norm, 0.0, 1.0)
    xs = x0 + norm[:, [1, 3]] * (x1 - x0)
    ys = y0 + norm[:, [0, 2]] * (y1 - y0)
    return np.stack([xs[:, 0], ys[:, 0], xs[:, 1], ys[:, 1]], axis=1).astype(np.float32)
