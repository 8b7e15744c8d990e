"""Person windows: the fixed-size regions around decoded boxes where the ``diffusion``
reconstructor generates, and the conditioning it reads from them.

The decoder's compute grows with the number of people, not with the frame size: each
decoded box gets one window (:data:`WINDOW_MARGIN` x the box height, the canvas's aspect),
resampled to the denoiser's canvas, generated, and drawn back with feathered edges.
"""

from __future__ import annotations

import numpy as np

from semcodec.codec.scaffold.appearance import crop_box

#: Window height / box height: the person plus some of the ground around them.
WINDOW_MARGIN = 1.3
#: Windows are never shorter than this (frame pixels): tiny boxes get context.
MIN_WINDOW_HEIGHT = 24.0


def person_windows(boxes: np.ndarray, canvas: tuple[int, int]) -> np.ndarray:
    """``(N, 4)`` float64 ``x1, y1, x2, y2`` windows (frame pixels) for ``(N, 4)`` boxes:
    centred on each box, :data:`WINDOW_MARGIN` x its height tall, ``canvas`` ``(height,
    width)``'s aspect. Windows may reach outside the frame (crops repeat the edge)."""
    boxes = np.asarray(boxes, np.float64).reshape(-1, 4)
    cx, cy = (boxes[:, 0] + boxes[:, 2]) / 2, (boxes[:, 1] + boxes[:, 3]) / 2
    half_h = np.maximum((boxes[:, 3] - boxes[:, 1]) * WINDOW_MARGIN, MIN_WINDOW_HEIGHT) / 2
    half_w = half_h * canvas[1] / canvas[0]
    return np.stack([cx - half_w, cy - half_h, cx + half_w, cy + half_h], axis=1)


def crop_windows(image: np.ndarray, windows: np.ndarray, canvas: tuple[int, int]) -> np.ndarray:
    """``(N, height, width, 3)`` uint8 crops of ``(H, W, 3)`` uint8 ``image`` at ``windows``."""
    size = (canvas[1], canvas[0])
    out = np.empty((len(windows), canvas[0], canvas[1], 3), np.uint8)
    for k, window in enumerate(windows):
        out[k] = crop_box(image, window, size)
    return out


def box_masks(boxes: np.ndarray, windows: np.ndarray, canvas: tuple[int, int]) -> np.ndarray:
    """``(N, height, width)`` float32: 1 where each box lies in its window's canvas, else 0."""
    height, width = canvas
    boxes = np.asarray(boxes, np.float64).reshape(-1, 4)
    sx = width / (windows[:, 2] - windows[:, 0])
    sy = height / (windows[:, 3] - windows[:, 1])
    x1, x2 = (boxes[:, 0] - windows[:, 0]) * sx, (boxes[:, 2] - windows[:, 0]) * sx
    y1, y2 = (boxes[:, 1] - windows[:, 1]) * sy, (boxes[:, 3] - windows[:, 1]) * sy
    cols, rows = np.arange(width) + 0.5, np.arange(height) + 0.5
    inside_x = (cols[None] >= x1[:, None]) & (cols[None] < x2[:, None])
    inside_y = (rows[None] >= y1[:, None]) & (rows[None] < y2[:, None])
    return (inside_y[:, :, None] & inside_x[:, None, :]).astype(np.float32)


def conditioning(warp_crops: np.ndarray, masks: np.ndarray, previous_crops: np.ndarray | None,
                 has_previous: np.ndarray | None = None) -> np.ndarray:  # fmt: skip
    """``(N, height, width, 8)`` float32 conditioning in -1..1 (masks and flag 0/1): warp
    crops, box masks, previous-output crops and their flag. ``previous_crops=None`` means no
    previous output; ``has_previous`` ``(N,)`` bool (default all true) clears some."""
    n, height, width, _ = warp_crops.shape
    cond = np.zeros((n, height, width, 8), np.float32)
    cond[..., :3] = warp_crops / 127.5 - 1
    cond[..., 3] = masks
    if previous_crops is not None:
        flag = np.ones(n, bool) if has_previous is None else np.asarray(has_previous, bool)
        cond[flag, :, :, 4:7] = previous_crops[flag] / 127.5 - 1
        cond[flag, :, :, 7] = 1.0
    return cond
