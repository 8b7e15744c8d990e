"""The person-free background plate the edge sends as its keyframe picture.

A static camera sees the same background behind people who come and go. The edge has every
frame, so it builds the plate from many of them: the per-pixel temporal **median** over a
window of recent frames, where a pixel covered by a person in some frames still shows the
background in most. No person missed by the detector is frozen into the plate and the cloud
needs no inpainting.

:class:`BackgroundModel` keeps up to ``window`` frames, one every ``stride``, at the plate's
size (the keyframe coder's size: a fraction of the frame), as uint8, so memory is bounded:
``window * w * h * 3`` bytes (64 frames of 384x288: 21 MB). With few frames seen, the plate
is the median of what there is (one frame: the frame itself).
:meth:`BackgroundModel.prime` feeds look-ahead frames before the stream starts, so the first
keyframe is already person-free (the edge reads ahead once, at the start, and holds those
frames until they are coded).

A person standing still for most of the window stays in the plate (the decoder draws people
over the plate anyway); people who walk through are gone (see the README's side-by-side
pictures of PETS09-S2L1-full and TUD-Stadtmitte, whose plates show no walker).
"""

from __future__ import annotations

from collections import deque

import cv2
import numpy as np


class BackgroundModel:
    """Temporal median of recent frames at a fixed plate size.

    Args:
        plate_size: ``(width, height)`` of the plate in pixels.
        window: most frames kept (>= 1).
        stride: keep one frame out of ``stride`` fed to :meth:`update` (>= 1).
    """

    def __init__(self, plate_size: tuple[int, int], window: int = 64, stride: int = 2) -> None:
        if window < 1 or stride < 1:
            raise ValueError(f"window and stride must be >= 1, got {window}, {stride}")
        width, height = (int(v) for v in plate_size)
        if width < 1 or height < 1:
            raise ValueError(f"plate size must be positive, got {plate_size}")
        self.plate_size = (width, height)
        self.window, self.stride = int(window), int(stride)
        self._frames: deque[np.ndarray] = deque(maxlen=self.window)
        self._seen = 0

    def __len__(self) -> int:
        """Frames held now."""
        return len(self._frames)

    def reset(self) -> None:
        """Forgets every frame (a scene change: the old background is no longer valid)."""
        self._frames.clear()
        self._seen = 0

    def update(self, frame: np.ndarray) -> None:
        """Feeds the next ``(H, W, 3)`` uint8 frame (kept when it falls on the stride)."""
        if self._seen % self.stride == 0:
            self._frames.append(self._shrink(frame))
        self._seen += 1

    def prime(self, frames) -> None:
        """Feeds look-ahead frames (a sequence of ``(H, W, 3)`` uint8) before the stream
        starts, spread over the window: at most ``window`` of them are kept, evenly spaced."""
        frames = list(frames)
        step = max(1, -(-len(frames) // self.window))  # ceil
        for frame in frames[::step]:
            self._frames.append(self._shrink(frame))

    def plate(self) -> np.ndarray:
        """``(h, w, 3)`` uint8 per-pixel median of the frames held (at ``plate_size``).

        Raises:
            ValueError: no frame was fed yet.
        """
        if not self._frames:
            raise ValueError("the background model has seen no frame yet")
        stack = np.stack(self._frames)
        # median of uint8 values: the middle along time (the lower one for even counts),
        # which stays an exact uint8 and is deterministic
        middle = (len(stack) - 1) // 2
        return np.ascontiguousarray(np.partition(stack, middle, axis=0)[middle])

    def _shrink(self, frame: np.ndarray) -> np.ndarray:
        if frame.ndim != 3 or frame.shape[2] != 3 or frame.dtype != np.uint8:
            raise ValueError(f"frame must be (H, W, 3) uint8, got {frame.dtype} {frame.shape}")
        if (frame.shape[1], frame.shape[0]) == self.plate_size:
            return frame.copy()
        return cv2.resize(frame, self.plate_size, interpolation=cv2.INTER_AREA)
