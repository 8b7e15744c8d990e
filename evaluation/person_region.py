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

from semcodec.evaluation.groundtruth import GroundTruth

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
    from semcodec.evaluation.metrics import psnr_per_frame
    from semcodec.evaluation.perceptual import st_lpips_per_frame

    numbers = range(1, len(reference) + 1, every)
    ref, dec = person_crops(reference, decoded, gt, numbers)
    if len(ref) == 0:
        return {"person_psnr": None, "person_st_lpips": None, "person_crops": 0}
    lpips = st_lpips_per_frame(ref, dec, models_dir, batch_size=16)
    return {"person_psnr": float(psnr_per_frame(ref, dec).mean()),
            "person_st_lpips": float(lpips.mean()), "person_crops": len(ref)}  # fmt: skip
