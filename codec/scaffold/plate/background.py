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

**Person-free pixels.** A person who stands for half the window stays in a plain median (a
dark blob where they stood). With the boxes of the people the edge tracked on a frame
(:meth:`BackgroundModel.update` / :meth:`BackgroundModel.prime` given boxes), the pixels
inside them (grown by :data:`BOX_GROWTH`) are left out of that frame's vote: the plate is the
median of each pixel's samples that no known person covers. The edge knows the people of
every frame it keeps: it runs its detector on the look-ahead frames :meth:`prime` keeps
(:meth:`BackgroundModel.prime_indices`) and the tracker's boxes come with every later one. A
frame whose people are not known votes with all its pixels. A pixel every frame's people
cover (someone who stood there for the whole window) keeps the plain median: no frame shows
what is behind them, and the person the clip shows there is closer to the truth than a
smear filled in from around them (on TUD-Stadtmitte 91-179, a man at a shop window and a
woman by a sign: inpainting left two blobs, 0.36 % of the judged pixels, where the plain
median leaves none; ``semcodec-bench plate``). Without any frame of known people the plate is
the plain median.
"""

from __future__ import annotations

from collections import deque

import cv2
import numpy as np

#: A person's box is grown by this factor about its centre before its pixels are left out
#: of the plate's vote (boxes are tight: arms, shadows and the detector's jitter).
BOX_GROWTH = 1.2


def people_mask(boxes: np.ndarray, frame_shape: tuple[int, int], size: tuple[int, int],
                growth: float = BOX_GROWTH) -> np.ndarray:  # fmt: skip
    """``(h, w)`` bool: the pixels of a ``size = (w, h)`` picture inside ``boxes`` (``(N, 4)``
    ``x1, y1, x2, y2`` pixels of a frame of ``frame_shape = (H, W)``) grown by ``growth``
    about their centres."""
    width, height = size
    sx, sy = width / frame_shape[1], height / frame_shape[0]
    mask = np.zeros((height, width), bool)
    for x1, y1, x2, y2 in np.asarray(boxes, np.float64).reshape(-1, 4):
        cx, cy = (x1 + x2) / 2, (y1 + y2) / 2
        hw, hh = (x2 - x1) * growth / 2, (y2 - y1) * growth / 2
        c0, c1 = max(0, int((cx - hw) * sx)), min(width, int(np.ceil((cx + hw) * sx)))
        r0, r1 = max(0, int((cy - hh) * sy)), min(height, int(np.ceil((cy + hh) * sy)))
        mask[r0:r1, c0:c1] = True
    return mask


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
        #: per frame held: the ``(h, w)`` bool pixels of its people (None: not known)
        self._people: deque[np.ndarray | None] = deque(maxlen=self.window)
        self._seen = 0
        self._plate: np.ndarray | None = None  # cached until a frame comes or goes

    def __len__(self) -> int:
        """Frames held now."""
        return len(self._frames)

    def reset(self) -> None:
        """Forgets every frame (a scene change: the old background is no longer valid)."""
        self._frames.clear()
        self._people.clear()
        self._seen = 0
        self._plate = None

    def update(self, frame: np.ndarray, boxes: np.ndarray | None = None) -> None:
        """Feeds the next ``(H, W, 3)`` uint8 frame (kept when it falls on the stride), with
        the ``(N, 4)`` boxes (frame pixels) of its people when they are known."""
        if self._seen % self.stride == 0:
            self._keep(frame, boxes)
        self._seen += 1

    def prime_indices(self, count: int) -> list[int]:
        """The indices among ``count`` look-ahead frames that :meth:`prime` keeps: at most
        ``window`` of them, evenly spaced from the first."""
        step = max(1, -(-count // self.window))  # ceil
        return list(range(0, count, step))[: self.window]

    def prime(self, frames, people: dict | None = None) -> None:
        """Feeds look-ahead frames (a sequence of ``(H, W, 3)`` uint8) before the stream
        starts, spread over the window: at most ``window`` of them are kept, evenly spaced
        (:meth:`prime_indices`; those of ``people``, ``{index: (N, 4) boxes}``, first: their
        people are known)."""
        frames, people = list(frames), people or {}
        chosen = sorted(set(self.prime_indices(len(frames))) | set(people))
        for index in chosen[-self.window:]:
            self._keep(frames[index], people.get(index))

    def _keep(self, frame: np.ndarray, boxes: np.ndarray | None) -> None:
        shrunk = self._shrink(frame)
        self._frames.append(shrunk)
        self._people.append(None if boxes is None else self._mask(boxes, frame.shape))
        self._plate = None

    def _mask(self, boxes: np.ndarray, shape: tuple) -> np.ndarray:
        return people_mask(boxes, shape[:2], self.plate_size)

    def plate(self) -> np.ndarray:
        """``(h, w, 3)`` uint8 per-pixel median of the frames held (at ``plate_size``).

        Raises:
            ValueError: no frame was fed yet.
        """
        if not self._frames:
            raise ValueError("the background model has seen no frame yet")
        if self._plate is None:
            known = any(mask is not None for mask in self._people)
            self._plate = self._free_median() if known else self._median()
        return self._plate

    def _median(self) -> np.ndarray:
        stack = np.stack(self._frames)
        # median of uint8 values: the middle along time (the lower one for even counts),
        # which stays an exact uint8 and is deterministic
        middle = (len(stack) - 1) // 2
        return np.ascontiguousarray(np.partition(stack, middle, axis=0)[middle])

    def _free_median(self) -> np.ndarray:
        """Per pixel, the (lower) median of its samples that no known person covers (every
        frame votes; a frame whose people are known, with the pixels outside them); a pixel
        without one keeps the plain median."""
        stack = np.stack(self._frames)
        nobody = np.zeros(stack.shape[1:3], bool)
        taken = np.stack([nobody if mask is None else mask for mask in self._people])
        middle = (len(stack) - 1) // 2
        plate = np.partition(stack, middle, axis=0)[middle]  # where nobody was, or always
        touched = taken.any(axis=0)
        # the pixels a person covered at least once: of a pixel's taken samples, ``low``
        # become 0 and the rest 255 (no sample is below or above those), so that the
        # middle is the free samples' lower median -- one partition, as the plain
        # median's, instead of a sort-and-gather per pixel (1.9 s against 0.8 s for 64
        # frames of 768x576, paid again at every tile's target, every 8 frames; only the
        # pixels a free sample shows: the others keep the plain median)
        free = (~taken[:, touched]).sum(axis=0)
        shown = np.zeros_like(touched)
        shown[touched] = free > 0
        samples, taken, free = stack[:, shown], taken[:, shown], free[free > 0]
        low = middle - (free - 1) // 2
        rank = np.cumsum(taken, axis=0, dtype=np.int16)  # 1, 2, ... along its taken samples
        samples[taken & (rank <= low)] = 0
        samples[taken & (rank > low)] = 255
        plate[shown] = np.partition(samples, middle, axis=0)[middle]
        return np.ascontiguousarray(plate)

    def _shrink(self, frame: np.ndarray) -> np.ndarray:
        if frame.ndim != 3 or frame.shape[2] != 3 or frame.dtype != np.uint8:
            raise ValueError(f"frame must be (H, W, 3) uint8, got {frame.dtype} {frame.shape}")
        if (frame.shape[1], frame.shape[0]) == self.plate_size:
            return frame.copy()
        return cv2.resize(frame, self.plate_size, interpolation=cv2.INTER_AREA)
