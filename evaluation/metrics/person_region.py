"""Person-region quality: PSNR and ST-LPIPS on crops around the ground-truth people.

Full-frame metrics are dominated by the static background, which every codec gets right
from its keyframe; what a user of a surveillance camera needs is the people. Each counted
ground-truth box of an evaluated frame is enlarged by :data:`BOX_MARGIN` about its centre,
clipped to the frame, cut from the reference and from the decoded frame, and resized to
:data:`CROP_SIZE` (so small and large people weigh the same); the scores are means over all
crops of all evaluated frames.
"""

from __future__ import annotations

import os
from collections.abc import Sequence

import cv2
import numpy as np

from semcodec.evaluation.data.groundtruth import GroundTruth

#: Width and height of every person crop, pixels (people are about twice as tall as wide).
CROP_SIZE = (64, 128)
#: A crop is the ground-truth box enlarged by this factor about its centre.
BOX_MARGIN = 1.2
#: Boxes whose clipped crop is narrower or lower than this (pixels) are left out.
MIN_CROP_SIDE = 4


def crop_windows(gt: GroundTruth, number: int, width: int, height: int,
                 margin: float = BOX_MARGIN) -> list[tuple[int, int, int, int]]:  # fmt: skip
    """``(x0, y0, x1, y1)`` windows (pixels, end exclusive) around the counted people of
    frame ``number`` of a ``width`` x ``height`` video, clipped to the frame."""
    rows = (gt.frame_numbers == number) & gt.counted
    windows = []
    for x, y, w, h in gt.boxes[rows]:
        cx, cy, hw, hh = x + w / 2, y + h / 2, w * margin / 2, h * margin / 2
        x0, y0 = max(0, int(round(cx - hw))), max(0, int(round(cy - hh)))
        x1, y1 = min(width, int(round(cx + hw))), min(height, int(round(cy + hh)))
        if x1 - x0 >= MIN_CROP_SIDE and y1 - y0 >= MIN_CROP_SIDE:
            windows.append((x0, y0, x1, y1))
    return windows


def person_crops(reference: np.ndarray, decoded: np.ndarray, gt: GroundTruth,
                 numbers: Sequence[int]) -> tuple[np.ndarray, np.ndarray]:  # fmt: skip
    """The crops of the people of frames ``numbers`` (1-based: ``reference[0]`` is frame 1).

    Args:
        reference, decoded: ``(T, H, W, 3)`` uint8 RGB of the same shape.

    Returns:
        ``(reference_crops, decoded_crops)``, each ``(M, 128, 64, 3)`` uint8 RGB (M may be 0).
    """
    if reference.shape != decoded.shape:
        raise ValueError(f"reference {reference.shape} and decoded {decoded.shape} differ")
    height, width = reference.shape[1:3]
    pairs = [(_crop(reference[n - 1], win), _crop(decoded[n - 1], win))
             for n in numbers for win in crop_windows(gt, n, width, height)]  # fmt: skip
    if not pairs:
        empty = np.zeros((0, CROP_SIZE[1], CROP_SIZE[0], 3), np.uint8)
        return empty, empty.copy()
    ref, dec = zip(*pairs, strict=True)
    return np.stack(ref), np.stack(dec)


def _crop(frame: np.ndarray, window: tuple[int, int, int, int]) -> np.ndarray:
    x0, y0, x1, y1 = window
    patch = np.ascontiguousarray(frame[y0:y1, x0:x1])
    shrink = (x1 - x0) > CROP_SIZE[0] or (y1 - y0) > CROP_SIZE[1]
    return cv2.resize(patch, CROP_SIZE, interpolation=cv2.INTER_AREA if shrink
                      else cv2.INTER_LINEAR)  # fmt: skip


def person_region_scores(reference: np.ndarray, decoded: np.ndarray, gt: GroundTruth,
                         every: int = 1, models_dir: str | os.PathLike | None = None,
                         ) -> dict[str, float | int | None]:  # fmt: skip
    """``person_psnr`` (dB, mean over crops), ``person_st_lpips`` (mean over crops) and
    ``person_crops`` (how many) on frames 1, 1+every, ...; None values without people."""
    from semcodec.evaluation.metrics.image import psnr_per_frame
    from semcodec.evaluation.metrics.perceptual import st_lpips_per_frame

    numbers = range(1, len(reference) + 1, every)
    ref, dec = person_crops(reference, decoded, gt, numbers)
    if len(ref) == 0:
        return {"person_psnr": None, "person_st_lpips": None, "person_crops": 0}
    lpips = st_lpips_per_frame(ref, dec, models_dir, batch_size=16)
    return {"person_psnr": float(psnr_per_frame(ref, dec).mean()),
            "person_st_lpips": float(lpips.mean()), "person_crops": len(ref)}  # fmt: skip


#: The seam band around a ground-truth box: between the box scaled by these two factors
#: about its centre (where a pasted rectangle's edge shows, whatever its exact size).
SEAM_BAND = (0.8, 1.4)


def seam_score(reference: np.ndarray, decoded: np.ndarray, gt: GroundTruth,
               every: int = 1) -> dict[str, float | None]:  # fmt: skip
    """``seam``: the excess edge energy on a band around each counted ground-truth person,
    decoded against reference (0: no seam), on frames 1, 1+every, ...

    Per person, the mean Sobel gradient magnitude of the luma on the band (:data:`SEAM_BAND`)
    of the decoded frame and of the reference frame; the person's seam is the decoded one's
    excess, relative to the reference's, ``max(0, G_dec - G_ref) / G_ref``. A codec that blurs
    scores 0 (no excess), one that pastes a box of foreign background scores its edges. The
    score is the mean over people; None without people.

    Args:
        reference, decoded: ``(T, H, W, 3)`` uint8 RGB of the same shape; ``[0]`` is frame 1.
    """
    if reference.shape != decoded.shape:
        raise ValueError(f"reference {reference.shape} and decoded {decoded.shape} differ")
    height, width = reference.shape[1:3]
    excess = []
    for number in range(1, len(reference) + 1, every):
        inner = crop_windows(gt, number, width, height, SEAM_BAND[0])
        outer = crop_windows(gt, number, width, height, SEAM_BAND[1])
        if len(inner) != len(outer) or not outer:  # a box too small for its inner window
            continue
        grads = [_gradient(frame[number - 1]) for frame in (reference, decoded)]
        for (ix0, iy0, ix1, iy1), (x0, y0, x1, y1) in zip(inner, outer, strict=True):
            band = np.ones((y1 - y0, x1 - x0), bool)
            band[iy0 - y0 : iy1 - y0, ix0 - x0 : ix1 - x0] = False
            ref, dec = (float(g[y0:y1, x0:x1][band].mean()) for g in grads)
            excess.append(max(0.0, dec - ref) / max(ref, 1.0))
    return {"seam": float(np.mean(excess)) if excess else None}


def _gradient(frame: np.ndarray) -> np.ndarray:
    """``(H, W)`` float32 Sobel gradient magnitude of ``frame``'s luma (0..255 scale)."""
    luma = cv2.cvtColor(frame, cv2.COLOR_RGB2GRAY).astype(np.float32)
    return cv2.magnitude(cv2.Sobel(luma, cv2.CV_32F, 1, 0, ksize=3),
                         cv2.Sobel(luma, cv2.CV_32F, 0, 1, ksize=3))  # fmt: skip


#: Side of the blocks the frozen-person check looks at, pixels.
FROZEN_BLOCK = 10
#: A block frozen for longer than this (seconds) while its person moves is a frozen person.
FROZEN_LIMIT_S = 2.0
#: A person "moves" between two frames when its box centre shifts by at least this (pixels).
MOVING_PX = 0.5


def frozen_person_blocks(decoded: np.ndarray, gt: GroundTruth, fps: float,
                         block: int = FROZEN_BLOCK, limit_s: float = FROZEN_LIMIT_S,
                         ) -> dict[str, float | int]:  # fmt: skip
    """The frozen-person check: blocks of the decoded video that stay pixel-identical while
    the person over them moves.

    The frame is cut into a fixed grid of ``block`` x ``block`` pixel blocks. A block is
    *frozen* in frame t (1-based, t > 1) when its pixels equal frame t-1's and it lies inside
    the box of a counted ground-truth person who is in both frames and whose box centre moved
    by at least :data:`MOVING_PX`. Runs of consecutive frozen frames are measured per block.

    Args:
        decoded: ``(T, H, W, 3)`` uint8 RGB, ``decoded[0]`` is frame 1 of ``gt``.
        fps: frame rate, to turn frames into seconds.

    Returns:
        ``frozen_blocks``: blocks frozen for more than ``limit_s`` seconds in a row;
        ``frozen_max_s``: the longest run, seconds.
    """
    t, height, width = decoded.shape[:3]
    rows, cols = height // block, width // block
    if t < 2 or rows == 0 or cols == 0:
        return {"frozen_blocks": 0, "frozen_max_s": 0.0}
    run = np.zeros((rows, cols), np.int64)  # one frame pair at a time: memory of one frame
    longest = run.copy()
    def blocks(frame: np.ndarray) -> np.ndarray:  # (rows, block, cols, block, 3)
        return frame[: rows * block, : cols * block].reshape(rows, block, cols, block, 3)

    for number in range(2, t + 1):
        still = (blocks(decoded[number - 1]) == blocks(decoded[number - 2])).all(axis=(1, 3, 4))
        frozen = still & _moving_cover(gt, number, rows, cols, block)
        run = np.where(frozen, run + 1, 0)
        np.maximum(longest, run, out=longest)
    limit = limit_s * fps
    return {"frozen_blocks": int((longest > limit).sum()),
            "frozen_max_s": float(longest.max() / fps)}  # fmt: skip


def _moving_cover(gt: GroundTruth, number: int, rows: int, cols: int, block: int) -> np.ndarray:
    """``(rows, cols)`` bool: blocks wholly inside the box of a person who moved into frame
    ``number`` from the frame before."""
    cover = np.zeros((rows, cols), bool)
    now = (gt.frame_numbers == number) & gt.counted
    before = (gt.frame_numbers == number - 1) & gt.counted
    previous = {int(i): box for i, box in zip(gt.ids[before], gt.boxes[before], strict=True)}
    for track, (x, y, w, h) in zip(gt.ids[now], gt.boxes[now], strict=True):
        old = previous.get(int(track))
        if old is None:
            continue
        shift = np.hypot(x + w / 2 - old[0] - old[2] / 2, y + h / 2 - old[1] - old[3] / 2)
        if shift < MOVING_PX:
            continue
        c0, r0 = int(np.ceil(x / block)), int(np.ceil(y / block))
        c1, r1 = int(np.floor((x + w) / block)), int(np.floor((y + h) / block))
        cover[max(r0, 0) : min(r1, rows), max(c0, 0) : min(c1, cols)] = True
    return cover

