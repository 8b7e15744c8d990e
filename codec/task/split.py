"""The person detector split between the edge and the cloud.

The edge cuts a frame into overlapping windows, resizes each to 300x300 (``cv2.INTER_AREA``,
as :class:`codec.scaffold.detector.PersonDetector` does) and runs the PyTorch
:class:`~codec.detection.ssdlite.SSDLiteMobileNetV2` up to ``expanded_conv_K``; the cloud runs
the rest of the network and the post-processing on those features, maps every window's boxes
back to frame pixels and merges them by NMS. Run without a bottleneck in between, the two
halves give the unsplit detector's detections (a test checks it against the ONNX detector).

Why ``expanded_conv_6`` and 2x2 tiles (measured, ``semcodec-bench split-points`` and
``.exp``-free commands in the README): among the cuts with the smallest feature
(``expanded_conv_6..9``: ``(64, 19, 19)``, 23,104 values per window) it is the one with the
least edge compute (437 MFLOP per window of the detector's 1,234); on PETS09-S2L1-full frames
1-500 (the training range) 2x2 tiles without the whole frame give the best uncompressed MODA
(0.564 at score 0.3, against 0.543 with the whole frame added and 0.443 for the whole frame
alone).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

import cv2
import numpy as np
import torch
from torch import Tensor

from semcodec.codec.detection.ssdlite import INPUT_SIZE, SSDLiteMobileNetV2
from semcodec.codec.scaffold.detector import (
    Detections,
    check_frame,
    nms,
    suppress_contained,
    tile_windows,
)

#: Registry name of the detector's PyTorch weights (see :mod:`codec.core.models`).
WEIGHTS_NAME = "ssdlite_person_weights"


@dataclass(frozen=True)
class SplitConfig:
    """Where the detector is cut and how a frame is windowed.

    Attributes:
        after: the edge runs the stem and ``expanded_conv_0..after`` (0..12).
        tiles: windows per axis (2: a 2x2 grid).
        tile_overlap: overlap of neighbouring windows, fraction of a window.
        include_full_frame: also run the whole frame as a window.
        score_threshold: the cloud keeps detections scoring at least this, in [0, 1].
        nms_iou: IoU above which the cloud's merge suppresses the lower-scored box.
        contained_cover: after NMS the cloud drops parts of people (see
            :func:`codec.scaffold.detector.suppress_contained`; 0: off).
    """

    after: int = 6
    tiles: int = 2
    tile_overlap: float = 0.25
    include_full_frame: bool = False
    score_threshold: float = 0.3
    nms_iou: float = 0.5
    contained_cover: float = 0.8

    def windows(self, height: int, width: int) -> list[tuple[int, int, int, int]]:
        """The ``(x0, y0, x1, y1)`` pixel windows of a ``height`` x ``width`` frame."""
        return tile_windows(height, width, self.tiles, self.tile_overlap,
                            self.include_full_frame)  # fmt: skip


def load_split_model(models_dir: str | os.PathLike | None = None,
                     weights: str | os.PathLike | None = None) -> SSDLiteMobileNetV2:  # fmt: skip
    """The detector in eval mode with BatchNorm folded (CPU inference), weights from
    ``weights`` or the registry's :data:`WEIGHTS_NAME`; its parameters are frozen."""
    from semcodec.codec.core.models import resolve_model
    from semcodec.codec.detection.convert import load_detector

    path = Path(weights) if weights is not None else resolve_model(WEIGHTS_NAME, models_dir)
    model = load_detector(path, fuse=True)
    for p in model.parameters():
        p.requires_grad_(False)
    return model


class SplitDetector:
    """Edge and cloud halves of the person detector.

    Args:
        model: the detector (see :func:`load_split_model`).
        config: the cut and the windows.
    """

    def __init__(self, model: SSDLiteMobileNetV2, config: SplitConfig | None = None) -> None:
        self.model = model
        self.config = config or SplitConfig()

    def window_inputs(self, frame: np.ndarray) -> np.ndarray:
        """``(H, W, 3)`` uint8 RGB -> ``(N, 300, 300, 3)`` uint8, one per window."""
        frame = check_frame(frame)
        crops = []
        for x0, y0, x1, y1 in self.config.windows(*frame.shape[:2]):
            crop = np.ascontiguousarray(frame[y0:y1, x0:x1])
            crops.append(cv2.resize(crop, (INPUT_SIZE, INPUT_SIZE), interpolation=cv2.INTER_AREA))
        return np.stack(crops)

    @torch.inference_mode()
    def edge_features(self, frame: np.ndarray) -> Tensor:
        """The edge part: ``(H, W, 3)`` uint8 RGB -> float32 ``(N, C, S, S)`` features of the
        N windows, e.g. ``(4, 64, 19, 19)`` for the default config."""
        x = self.model.preprocess(torch.from_numpy(self.window_inputs(frame)))
        return self.model.features(x, upto=self.config.after)

    def raw_outputs(self, features: Tensor) -> tuple[Tensor, Tensor]:
        """The cloud network on ``(N, C, S, S)`` features -> box encodings ``(N, 1917, 4)`` and
        class logits ``(N, 1917, 2)`` (differentiable: used in training)."""
        return self.model.raw_outputs_from(features, after=self.config.after)

    @torch.inference_mode()
    def cloud_detect(self, features: Tensor, height: int, width: int) -> Detections:
        """The cloud part: features of one frame's windows -> its person detections in frame
        pixels (``x1, y1, x2, y2``), merged over the windows by NMS."""
        windows = self.config.windows(height, width)
        if features.shape[0] != len(windows):
            raise ValueError(f"{features.shape[0]} windows of features, but a {width}x{height} "
                             f"frame has {len(windows)}")  # fmt: skip
        _, boxes, scores, _ = self.model.postprocess(*self.raw_outputs(features))
        frame_boxes, frame_scores = [], []
        for (x0, y0, x1, y1), b, s in zip(windows, boxes.numpy(), scores.numpy(), strict=True):
            keep = s >= max(self.config.score_threshold, 1e-12)
            b = np.clip(b[keep], 0.0, 1.0)
            frame_boxes.append(np.stack([x0 + b[:, 1] * (x1 - x0), y0 + b[:, 0] * (y1 - y0),
                                         x0 + b[:, 3] * (x1 - x0), y0 + b[:, 2] * (y1 - y0)],
                                        axis=1))  # fmt: skip
            frame_scores.append(s[keep])
        all_boxes = np.concatenate(frame_boxes).astype(np.float32)
        all_scores = np.concatenate(frame_scores).astype(np.float32)
        kept = nms(all_boxes, all_scores, self.config.nms_iou)
        all_boxes, all_scores = all_boxes[kept], all_scores[kept]
        whole = suppress_contained(all_boxes, all_scores, self.config.contained_cover)
        return Detections(all_boxes[whole], all_scores[whole])

    def detect(self, frame: np.ndarray) -> Detections:
        """Both halves without a bottleneck: the unsplit detector's detections."""
        height, width = frame.shape[:2]
        return self.cloud_detect(self.edge_features(frame), height, width)
