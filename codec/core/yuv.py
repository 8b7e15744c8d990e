"""RGB <-> YUV 4:2:0 in integer arithmetic: the same bytes on every machine.

The video intra coders (:mod:`codec.keyframes`) hand libx265 and SVT-AV1 a YUV 4:2:0
picture and show the decoded one as RGB. FFmpeg's swscale did both conversions before, and
swscale takes other code paths on x86_64 (its SIMD) than on aarch64: the same RGB frame gave
other YUV bytes on each (and the same decoded YUV other RGB), so a keyframe coded on an arm64
board was not x86_64's (issue 52: the sample's first plate 324 against 323 bytes). libx265
and the HEVC decoder themselves gave the same bytes on both from the same YUV.

These functions compute BT.601 limited range ("TV" range, what decoders assume for a stream
that says nothing; FFmpeg's default) with 16-bit fixed-point coefficients in numpy integers,
which no instruction set rounds differently. Chroma is the mean of each 2x2 block's RGB
(centred siting) on the way in and repeated over its block on the way out.
"""

from __future__ import annotations

import numpy as np

#: Fixed-point bits of the coefficients.
SHIFT = 16
# BT.601, limited range, scaled by 2**SHIFT and rounded (each chroma row sums to 0, so grey
# maps to 128): Y = 16 + (219/255) (0.299 R + 0.587 G + 0.114 B), Cb, Cr with 224/255.
_Y = (16829, 33039, 6416)
_U = (-9714, -19070, 28784)
_V = (28784, -24103, -4681)
# the inverse: R, G, B from Y - 16, Cb - 128, Cr - 128 (255/219 and 255/224 folded in)
_YK = 76309  # 1.164384
_RV, _GU, _GV, _BU = 104597, -25675, -53279, 132201  # 1.596027 -0.391762 -0.812968 2.017232
_HALF = 1 << (SHIFT - 1)


def rgb_to_i420(rgb: np.ndarray) -> np.ndarray:
    """``(H, W, 3) uint8`` RGB (``H`` and ``W`` even) as PyAV's ``yuv420p`` array:
    ``(3 H / 2, W) uint8``, the Y plane's rows, then the Cb and the Cr plane's bytes."""
    height, width = rgb.shape[:2]
    if height % 2 or width % 2:
        raise ValueError(f"4:2:0 needs even sides, got {width}x{height}")
    wide = rgb.astype(np.int32)
    y = wide[..., 0] * _Y[0]
    y += wide[..., 1] * _Y[1]
    y += wide[..., 2] * _Y[2]
    y += _HALF
    y >>= SHIFT
    # the four pixels of each 2x2 block summed (0..1020): the chroma of their mean
    sums = rgb[0::2, 0::2].astype(np.int32)
    sums += rgb[1::2, 0::2]
    sums += rgb[0::2, 1::2]
    sums += rgb[1::2, 1::2]
    quad = 1 << (SHIFT + 1)  # half of the 4 * 2**SHIFT the sums are scaled by
    u, v = ((k[0] * sums[..., 0] + k[1] * sums[..., 1] + k[2] * sums[..., 2] + quad)
            >> (SHIFT + 2) for k in (_U, _V))  # fmt: skip
    planes = [(y + 16).ravel(), (u + 128).ravel(), (v + 128).ravel()]
    return np.concatenate(planes).astype(np.uint8).reshape(-1, width)


def i420_to_rgb(yuv: np.ndarray, width: int, height: int) -> np.ndarray:
    """A ``yuv420p`` array as :func:`rgb_to_i420` makes it (PyAV's ``to_ndarray()``) of a
    ``width`` x ``height`` picture (even sides) as ``(H, W, 3) uint8`` RGB."""
    if height % 2 or width % 2:
        raise ValueError(f"4:2:0 needs even sides, got {width}x{height}")
    flat = np.asarray(yuv, np.uint8).ravel()
    area, quarter = width * height, width * height // 4
    if flat.size != area + 2 * quarter:
        raise ValueError(f"a {width}x{height} yuv420p picture has {area + 2 * quarter} bytes, "
                         f"got {flat.size}")  # fmt: skip
    y = (flat[:area].reshape(height, width).astype(np.int32) - 16) * _YK + _HALF
    chroma = [flat[area + k * quarter:area + (k + 1) * quarter].reshape(height // 2, width // 2)
              for k in (0, 1)]  # fmt: skip
    u, v = (np.repeat(np.repeat(c.astype(np.int32) - 128, 2, 0), 2, 1) for c in chroma)
    rgb = np.empty((height, width, 3), np.uint8)
    rgb[..., 0] = np.clip((y + _RV * v) >> SHIFT, 0, 255)
    rgb[..., 1] = np.clip((y + _GU * u + _GV * v) >> SHIFT, 0, 255)
    rgb[..., 2] = np.clip((y + _BU * u) >> SHIFT, 0, 255)
    return rgb
