"""Frame-array helpers shared by every package: the one way to resize video frames."""

from __future__ import annotations

import cv2
import numpy as np


def even_size(width: int, height: int, scale: float, minimum: int = 2) -> tuple[int, int]:
    """``(width, height)`` times ``scale``, rounded to even numbers (4:2:0 chroma needs them)
    and at least ``minimum`` pixels. ``scale`` must be > 0."""
    if not scale > 0:
        raise ValueError(f"scale must be > 0, got {scale}")

    def even(value: int) -> int:
        return max(minimum, 2 * round(value * scale / 2))

    return even(width), even(height)


def resize_to(frames: np.ndarray, width: int, height: int) -> np.ndarray:
    """Resizes ``(T, H, W, 3)`` uint8 frames to ``(T, height, width, 3)`` uint8.

    Area averaging when shrinking (no aliasing), bicubic when enlarging. Returns the input
    itself when the size already matches.
    """
    t, h, w, _ = frames.shape
    if (w, h) == (width, height):
        return frames
    interp = cv2.INTER_AREA if width * height < w * h else cv2.INTER_CUBIC
    out = np.empty((t, height, width, 3), np.uint8)
    for i in range(t):
        out[i] = cv2.resize(frames[i], (width, height), interpolation=interp)
    return out
