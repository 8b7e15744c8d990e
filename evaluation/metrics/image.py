"""Pixel-domain quality and rate metrics: bits per pixel, PSNR (RGB or BT.601 luma), MS-SSIM.

All image inputs are uint8 RGB arrays, either a video ``(T, H, W, 3)`` or one frame
``(H, W, 3)``; video metrics are the mean over frames of the per-frame value.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Literal

import numpy as np
import torch
from pytorch_msssim import ms_ssim as _pt_ms_ssim

__all__ = [
    "MAX_PSNR_DB",
    "MS_SSIM_MIN_SIDE",
    "bits_per_pixel",
    "luma_bt601",
    "ms_ssim",
    "ms_ssim_per_frame",
    "psnr",
    "psnr_per_frame",
]

#: PSNR reported for an identical frame (instead of infinity), in dB.
MAX_PSNR_DB = 100.0
#: MS-SSIM with 5 scales and an 11-px window needs min(H, W) > 160 (= (11 - 1) * 2**4).
MS_SSIM_MIN_SIDE = 161

Space = Literal["rgb", "y"]


def bits_per_pixel(num_bytes: int, width: int, height: int, frames: int) -> float:
    """Bits per pixel of a coded stream: ``8 * num_bytes / (width * height * frames)``.

    Raises:
        ValueError: ``num_bytes`` is negative, or a size or the frame count is not positive.
    """
    if num_bytes < 0:
        raise ValueError(f"num_bytes must be >= 0, got {num_bytes}")
    for name, value in (("width", width), ("height", height), ("frames", frames)):
        if value <= 0:
            raise ValueError(f"{name} must be > 0, got {value}")
    return 8.0 * num_bytes / (width * height * frames)


def _as_video(array: np.ndarray, name: str) -> np.ndarray:
    """``(T, H, W, 3)`` uint8 view of a video or single frame; ValueError on anything else."""
    video = np.asarray(array)
    if video.ndim == 3:
        video = video[None]
    if video.ndim != 4 or video.shape[-1] != 3 or video.shape[0] == 0:
        raise ValueError(
            f"{name} must be RGB of shape (T, H, W, 3) or (H, W, 3) with T >= 1, "
            f"got {np.shape(array)}"
        )
    if video.dtype != np.uint8:
        raise ValueError(f"{name} must be uint8 (0..255), got dtype {video.dtype}")
    return video


def _pair(reference: np.ndarray, distorted: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Validates two uint8 RGB inputs of the same shape; returns them as ``(T, H, W, 3)``."""
    ref_shape, dist_shape = np.shape(reference), np.shape(distorted)
    if ref_shape != dist_shape:
        raise ValueError(
            f"reference and distorted differ in shape: {ref_shape} vs {dist_shape}; "
            "crop or scale them to the same size first"
        )
    return _as_video(reference, "reference"), _as_video(distorted, "distorted")


def luma_bt601(video: np.ndarray) -> np.ndarray:
    """BT.601 studio-range luma of uint8 RGB ``(..., 3)``: float64 ``(...)``, range 16..235.

    ``Y = 16 + (65.481 R + 128.553 G + 24.966 B) / 255``, unrounded.
    """
    weights = np.array([65.481, 128.553, 24.966]) / 255.0
    return 16.0 + np.asarray(video, dtype=np.float64) @ weights


def psnr_per_frame(
    reference: np.ndarray, distorted: np.ndarray, space: Space = "rgb"
) -> np.ndarray:
    """Per-frame PSNR in dB (peak 255): float64 ``(T,)``, capped at :data:`MAX_PSNR_DB`.

    Args:
        reference, distorted: uint8 RGB ``(T, H, W, 3)`` or ``(H, W, 3)``, same shape.
        space: ``"rgb"``: MSE over all three channels jointly; ``"y"``: MSE of BT.601
            studio-range luma (see :func:`luma_bt601`).

    Raises:
        ValueError: shapes differ, inputs are not uint8 RGB, or ``space`` is unknown.
    """
    ref, dist = _pair(reference, distorted)
    if space == "rgb":
        diff = ref.astype(np.float64) - dist.astype(np.float64)
        axes: tuple[int, ...] = (1, 2, 3)
    elif space == "y":
        diff = luma_bt601(ref) - luma_bt601(dist)
        axes = (1, 2)
    else:
        raise ValueError(f"space must be 'rgb' or 'y', got {space!r}")
    mse = np.mean(diff * diff, axis=axes)
    with np.errstate(divide="ignore"):
        values = 10.0 * np.log10(255.0**2 / mse)
    return np.minimum(values, MAX_PSNR_DB)


def psnr(reference: np.ndarray, distorted: np.ndarray, space: Space = "rgb") -> float:
    """Mean over frames of the per-frame PSNR in dB; see :func:`psnr_per_frame`."""
    return float(np.mean(psnr_per_frame(reference, distorted, space)))


#: Torch threads for MS-SSIM: its small depthwise Gaussian convolutions run slower on two
#: threads than on one (9.3 s against 1.1-1.5 s CPU for 60 frames of 384x288 on the 2-core
#: VM), so they run on one, whatever the process uses elsewhere.
MS_SSIM_THREADS = 1


@contextlib.contextmanager
def _torch_threads(n: int) -> Iterator[None]:
    """Runs the block with ``n`` torch intra-op threads, then restores the previous count."""
    before = torch.get_num_threads()
    torch.set_num_threads(n)
    try:
        yield
    finally:
        torch.set_num_threads(before)


def _to_nchw(frames: np.ndarray) -> torch.Tensor:
    """``(B, H, W, 3)`` uint8 -> ``(B, 3, H, W)`` float32, values 0..255."""
    return torch.from_numpy(np.ascontiguousarray(frames)).permute(0, 3, 1, 2).float()


def ms_ssim_per_frame(
    reference: np.ndarray, distorted: np.ndarray, batch_size: int = 8
) -> np.ndarray:
    """Per-frame MS-SSIM on RGB (data range 255): float64 ``(T,)``, at most 1 (1 = identical).

    Uses :func:`pytorch_msssim.ms_ssim` with its defaults (5 scales, 11-px Gaussian window,
    sigma 1.5), ``batch_size`` frames at a time on CPU with :data:`MS_SSIM_THREADS` torch
    thread(s).

    Raises:
        ValueError: shapes differ, inputs are not uint8 RGB, ``batch_size < 1``, or
            ``min(H, W) <= 160`` (too small for 5 scales; use PSNR or crop less).
    """
    ref, dist = _pair(reference, distorted)
    height, width = ref.shape[1:3]
    if min(height, width) < MS_SSIM_MIN_SIDE:
        raise ValueError(
            f"MS-SSIM (5 scales, 11-px window) needs frames with min(H, W) > 160, got "
            f"{height}x{width}; use larger frames or report PSNR / ST-LPIPS instead"
        )
    if batch_size < 1:
        raise ValueError(f"batch_size must be >= 1, got {batch_size}")
    out = np.empty(ref.shape[0], dtype=np.float64)
    with torch.no_grad(), _torch_threads(MS_SSIM_THREADS):
        for start in range(0, ref.shape[0], batch_size):
            stop = start + batch_size
            values = _pt_ms_ssim(
                _to_nchw(ref[start:stop]),
                _to_nchw(dist[start:stop]),
                data_range=255.0,
                size_average=False,
            )
            out[start:stop] = values.double().numpy()
    return out


def ms_ssim(reference: np.ndarray, distorted: np.ndarray, batch_size: int = 8) -> float:
    """Mean over frames of MS-SSIM on RGB; see :func:`ms_ssim_per_frame`."""
    return float(np.mean(ms_ssim_per_frame(reference, distorted, batch_size)))
