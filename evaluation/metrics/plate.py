"""Is the plate clean? The decoder's background plate against the clip's person-free median.

The reference is built from the ground truth: per pixel, the median of the clip's frames
where no ground-truth person (box grown by :data:`GT_GROWTH`) covers it
(:func:`person_free_median`); pixels no frame shows free are not judged. A **blob** is a
connected region of at least :data:`BLOB_MIN_AREA` of the judged pixels where the plate's luma
differs from the reference's by more than :data:`BLOB_LEVELS` (a person, or their ghost, kept
in the plate: dark or light against the ground); coding noise is spread thin and stays under
that threshold. :func:`plate_check` gives the mean luma difference and the blobs' share.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass

import cv2
import numpy as np

#: A ground-truth box is grown by this factor about its centre (shadows, loose boxes).
GT_GROWTH = 1.2
#: Luma difference (8-bit levels) from which a pixel counts towards a blob.
BLOB_LEVELS = 40
#: Smallest blob, a fraction of the judged pixels (a person of 0.1 of the frame's height
#: covers about 0.4 % of it).
BLOB_MIN_AREA = 0.001


@dataclass(frozen=True)
class PlateCheck:
    """How far a plate is from the person-free reference.

    Attributes:
        luma_error: mean absolute luma difference over the judged pixels (8-bit levels).
        blob_share: share of the judged pixels inside blobs (0: clean).
        blobs: how many blobs.
        judged: share of the frame's pixels judged (some frame shows them free).
    """

    luma_error: float
    blob_share: float
    blobs: int
    judged: float


def _luma(picture: np.ndarray) -> np.ndarray:
    return cv2.cvtColor(picture, cv2.COLOR_RGB2GRAY).astype(np.float32)


def person_free_median(frames: np.ndarray, boxes: list[np.ndarray],
                       growth: float = GT_GROWTH) -> tuple[np.ndarray, np.ndarray]:  # fmt: skip
    """The clip's background from its person-free pixels.

    Args:
        frames: ``(T, H, W, 3)`` uint8 RGB.
        boxes: per frame, ``(N, 4)`` ``x1, y1, x2, y2`` boxes (pixels) of its people.
        growth: boxes are grown by this factor about their centre.

    Returns:
        ``((H, W, 3) uint8 median, (H, W) bool shown)``: per pixel, the median over the
        frames where no box covers it; ``shown`` False where every frame is covered (the
        median there is of all frames and is not judged).
    """
    from semcodec.codec.scaffold.plate.background import people_mask

    shape = frames.shape[1:3]
    covered = np.stack([people_mask(b, shape, (shape[1], shape[0]), growth) for b in boxes])
    values = frames.astype(np.float32)
    values[covered] = np.nan
    shown = ~covered.all(axis=0)
    with warnings.catch_warnings():  # all-NaN pixels: replaced below
        warnings.simplefilter("ignore", RuntimeWarning)
        median = np.nanmedian(values, axis=0)
    median = np.where(shown[..., None], median, np.median(frames, axis=0))
    return np.clip(np.rint(median), 0, 255).astype(np.uint8), shown


def plate_check(plate: np.ndarray, reference: np.ndarray, shown: np.ndarray) -> PlateCheck:
    """``plate`` (``(H, W, 3)`` uint8, the decoder's) against the person-free ``reference``
    on the ``shown`` pixels (:func:`person_free_median`)."""
    if plate.shape != reference.shape or shown.shape != plate.shape[:2]:
        raise ValueError(f"plate {plate.shape}, reference {reference.shape} and shown "
                         f"{shown.shape} differ in size")  # fmt: skip
    judged = int(shown.sum())
    if judged == 0:
        return PlateCheck(float("nan"), float("nan"), 0, 0.0)
    difference = np.abs(_luma(plate) - _luma(reference))
    far = ((difference > BLOB_LEVELS) & shown).astype(np.uint8)
    count, labels, stats, _ = cv2.connectedComponentsWithStats(far, connectivity=8)
    big = [k for k in range(1, count) if stats[k, cv2.CC_STAT_AREA] >= BLOB_MIN_AREA * judged]
    area = int(sum(stats[k, cv2.CC_STAT_AREA] for k in big))
    return PlateCheck(float(difference[shown].mean()), area / judged, len(big),
                      judged / shown.size)  # fmt: skip


def blob_picture(plate: np.ndarray, reference: np.ndarray, shown: np.ndarray) -> np.ndarray:
    """``(H, 3W, 3)`` uint8: the plate, the reference, and the plate with its blobs'
    pixels (luma off by more than :data:`BLOB_LEVELS`) in red and the pixels not judged
    darkened."""
    difference = np.abs(_luma(plate) - _luma(reference))
    marked = plate.copy()
    marked[~shown] //= 3
    marked[(difference > BLOB_LEVELS) & shown] = (255, 0, 0)
    return np.concatenate([plate, reference, marked], axis=1)
