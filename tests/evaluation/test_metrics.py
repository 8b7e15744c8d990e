"""Known-answer tests of evaluation.metrics.image (PSNR, MS-SSIM, bits per pixel)."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from semcodec.evaluation.metrics.image import (
    MAX_PSNR_DB,
    bits_per_pixel,
    luma_bt601,
    ms_ssim,
    ms_ssim_per_frame,
    psnr,
    psnr_per_frame,
)


def _smooth_video(frames: int, height: int, width: int, seed: int = 0) -> np.ndarray:
    """Deterministic textured uint8 RGB video ``(T, H, W, 3)`` (gradients plus sinusoids)."""
    rng = np.random.default_rng(seed)
    yy, xx = np.mgrid[0:height, 0:width].astype(np.float64)
    out = np.empty((frames, height, width, 3), dtype=np.uint8)
    for t in range(frames):
        for c in range(3):
            fy, fx = rng.uniform(0.02, 0.2, size=2)
            wave = 60 * np.sin(fy * yy + t) * np.cos(fx * xx + c)
            out[t, :, :, c] = np.clip(128 + wave + 0.2 * (xx - yy), 0, 255).astype(np.uint8)
    return out


# --- bits per pixel ---------------------------------------------------------------------------


def test_bits_per_pixel_arithmetic() -> None:
    assert bits_per_pixel(1000, 100, 50, 2) == pytest.approx(8 * 1000 / (100 * 50 * 2))
    assert bits_per_pixel(0, 64, 64, 1) == 0.0


@pytest.mark.parametrize(
    ("num_bytes", "width", "height", "frames"),
    [(-1, 10, 10, 1), (1, 0, 10, 1), (1, 10, -3, 1), (1, 10, 10, 0)],
)
def test_bits_per_pixel_rejects_bad_sizes(num_bytes: int, width: int, height: int, frames: int):
    with pytest.raises(ValueError):
        bits_per_pixel(num_bytes, width, height, frames)


@given(st.integers(0, 10**9), st.integers(1, 4096), st.integers(1, 4096), st.integers(1, 1000))
def test_bits_per_pixel_times_pixels_is_bits(nbytes: int, w: int, h: int, t: int) -> None:
    assert bits_per_pixel(nbytes, w, h, t) * w * h * t == pytest.approx(8 * nbytes)


# --- PSNR -------------------------------------------------------------------------------------


@pytest.mark.parametrize("error", [1, 3, 10, 50])
def test_psnr_of_constant_error(error: int) -> None:
    ref = np.full((2, 8, 12, 3), 100, dtype=np.uint8)
    dist = ref + np.uint8(error)
    expected = 10 * math.log10(255**2 / error**2)
    assert psnr(ref, dist) == pytest.approx(expected, abs=1e-9)
    assert psnr(dist, ref) == pytest.approx(expected, abs=1e-9)


def test_psnr_identical_is_capped() -> None:
    video = _smooth_video(2, 16, 16)
    assert psnr(video, video) == MAX_PSNR_DB == 100.0
    assert psnr(video, video, space="y") == 100.0


def test_psnr_is_mean_of_frames_and_caps_each_frame() -> None:
    ref = np.full((2, 4, 4, 3), 50, dtype=np.uint8)
    dist = ref.copy()
    dist[1] += 5  # frame 0 identical (100 dB), frame 1 has a constant error of 5
    per_frame = psnr_per_frame(ref, dist)
    assert per_frame.shape == (2,) and per_frame.dtype == np.float64
    assert per_frame[0] == 100.0
    assert per_frame[1] == pytest.approx(20 * math.log10(255 / 5))
    assert psnr(ref, dist) == pytest.approx(per_frame.mean())


def test_psnr_single_frame_input() -> None:
    ref = np.zeros((6, 5, 3), dtype=np.uint8)
    assert psnr(ref, ref + np.uint8(2)) == pytest.approx(20 * math.log10(255 / 2))


def test_psnr_y_equal_error_in_all_channels() -> None:
    # The same error e in R, G and B moves Y by e * 219 / 255.
    ref = np.full((1, 8, 8, 3), 90, dtype=np.uint8)
    dist = ref + np.uint8(4)
    assert psnr(ref, dist, space="y") == pytest.approx(20 * math.log10(255 / (4 * 219 / 255)))
    assert psnr(ref, dist, space="y") - psnr(ref, dist) == pytest.approx(20 * math.log10(255 / 219))


def test_psnr_y_weights_blue_errors_less_than_rgb() -> None:
    ref = np.full((1, 8, 8, 3), 90, dtype=np.uint8)
    dist = ref.copy()
    dist[..., 2] += 30  # error only in blue
    rgb = psnr(ref, dist)
    luma = psnr(ref, dist, space="y")
    assert rgb == pytest.approx(10 * math.log10(255**2 / (30**2 / 3)))
    assert luma == pytest.approx(20 * math.log10(255 / (30 * 24.966 / 255)))
    assert luma > rgb


def test_luma_range_and_formula() -> None:
    pixels = np.array([[0, 0, 0], [255, 255, 255], [255, 0, 0]], dtype=np.uint8)
    luma = luma_bt601(pixels)
    assert luma == pytest.approx([16.0, 235.0, 16.0 + 65.481])


def test_psnr_shape_mismatch_names_both_shapes() -> None:
    a = np.zeros((2, 8, 8, 3), dtype=np.uint8)
    b = np.zeros((2, 8, 9, 3), dtype=np.uint8)
    with pytest.raises(ValueError, match=r"\(2, 8, 8, 3\).*\(2, 8, 9, 3\)"):
        psnr(a, b)


@pytest.mark.parametrize(
    "bad",
    [np.zeros((2, 8, 8), dtype=np.uint8), np.zeros((2, 8, 8, 3), dtype=np.float32)],
)
def test_psnr_rejects_non_uint8_rgb(bad: np.ndarray) -> None:
    with pytest.raises(ValueError):
        psnr(bad, bad)


def test_psnr_rejects_unknown_space() -> None:
    a = np.zeros((1, 4, 4, 3), dtype=np.uint8)
    with pytest.raises(ValueError, match="space"):
        psnr(a, a, space="yuv")  # type: ignore[arg-type]


# --- MS-SSIM ----------------------------------------------------------------------------------


def test_ms_ssim_identical_is_one() -> None:
    video = _smooth_video(2, 168, 176)
    assert ms_ssim(video, video) == pytest.approx(1.0, abs=1e-5)


def test_ms_ssim_decreases_with_noise() -> None:
    video = _smooth_video(1, 168, 176)
    rng = np.random.default_rng(1)
    scores = []
    for sigma in (2.0, 8.0, 32.0):
        noisy = np.clip(video + rng.normal(0, sigma, video.shape), 0, 255).astype(np.uint8)
        scores.append(ms_ssim(video, noisy))
    assert 1.0 > scores[0] > scores[1] > scores[2] > 0.0


def test_ms_ssim_batching_does_not_change_values() -> None:
    ref = _smooth_video(3, 168, 168, seed=2)
    dist = _smooth_video(3, 168, 168, seed=3)
    one = ms_ssim_per_frame(ref, dist, batch_size=1)
    many = ms_ssim_per_frame(ref, dist, batch_size=8)
    assert one.shape == (3,)
    np.testing.assert_allclose(one, many, atol=1e-6)
    assert ms_ssim(ref, dist, batch_size=2) == pytest.approx(one.mean(), abs=1e-6)


def test_ms_ssim_small_frames_raise() -> None:
    small = np.zeros((1, 160, 400, 3), dtype=np.uint8)
    with pytest.raises(ValueError, match=r"min\(H, W\) > 160"):
        ms_ssim(small, small)


def test_ms_ssim_shape_mismatch_raises() -> None:
    with pytest.raises(ValueError, match="differ in shape"):
        ms_ssim(np.zeros((1, 170, 170, 3), np.uint8), np.zeros((2, 170, 170, 3), np.uint8))
