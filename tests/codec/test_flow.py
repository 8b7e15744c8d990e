"""Flow scaffold: backward-convention known answers, warping, shapes, bad input."""

from __future__ import annotations

import cv2
import numpy as np
import pytest

from semcodec.codec.core.types import Flow
from semcodec.codec.scaffold.flow import FlowConfig, FlowEstimator, dense_field, warp


def psnr(a: np.ndarray, b: np.ndarray) -> float:
    mse = np.mean((a.astype(np.float64) - b.astype(np.float64)) ** 2)
    return float(10 * np.log10(255.0**2 / max(mse, 1e-10)))


def texture(height: int, width: int, seed: int = 0) -> np.ndarray:
    """Smooth random RGB texture with structure at a few pixels' scale."""
    rng = np.random.default_rng(seed)
    noise = rng.uniform(0, 255, (height, width, 3)).astype(np.float32)
    smooth = cv2.GaussianBlur(noise, (0, 0), 5.0)
    smooth = (smooth - smooth.mean()) / smooth.std() * 50 + 128
    return np.clip(smooth, 0, 255).astype(np.uint8)


def shifted_pair(dx: int, dy: int, width: int = 320, height: int = 240):
    """``(previous, current)`` where the content moved by ``(dx, dy)``:
    ``current(x, y) == previous(x - dx, y - dy)``."""
    big = texture(height + 40, width + 40)
    y0 = x0 = 20
    previous = big[y0 : y0 + height, x0 : x0 + width]
    current = big[y0 - dy : y0 - dy + height, x0 - dx : x0 - dx + width]
    return np.ascontiguousarray(previous), np.ascontiguousarray(current)


@pytest.mark.parametrize(
    ("dx", "dy", "config"),
    [
        (6, -4, FlowConfig()),
        (-3, 5, FlowConfig(compute_scale=0.5, preset="fast")),
        (4, 4, FlowConfig(scale=0.25, compute_scale=0.25, preset="ultrafast")),
    ],
)
def test_known_shift_gives_backward_flow(dx, dy, config):
    previous, current = shifted_pair(dx, dy)
    flow = FlowEstimator(config).estimate(previous, current)
    h, w = flow.field.shape[:2]
    interior = flow.field[h // 4 : 3 * h // 4, w // 4 : 3 * w // 4].reshape(-1, 2)
    # backward: p + field(p) is where the content was in the previous frame, i.e. p - (dx, dy)
    # within 0.4 frame px: a tenth of a pixel where DIS runs (compute_scale 0.25)
    np.testing.assert_allclose(np.median(interior, axis=0), [-dx, -dy], atol=0.4)

    predicted = warp(previous, flow)
    m = 24
    inner = (slice(m, -m), slice(m, -m))
    assert psnr(predicted[inner], current[inner]) > 35
    assert psnr(predicted[inner], current[inner]) > psnr(previous[inner], current[inner]) + 10


def test_shapes_and_frame_size():
    previous, current = shifted_pair(0, 0, width=768, height=576)
    flow = FlowEstimator().estimate(previous, current)
    assert isinstance(flow, Flow)
    assert flow.field.shape == (72, 96, 2)
    assert flow.field.dtype == np.float32
    assert flow.frame_size == (768, 576)
    assert np.abs(flow.field).max() < 0.5  # identical frames: no motion
    assert FlowConfig().grid_size((768, 576)) == (96, 72)
    assert FlowConfig().compute_size((768, 576)) == (192, 144)
    assert dense_field(flow).shape == (576, 768, 2)


def test_warp_known_answer_and_identity():
    image = texture(60, 80)
    assert np.array_equal(warp(image, Flow(np.zeros((6, 8, 2), np.float32), (80, 60))), image)
    field = np.zeros((6, 8, 2), np.float32)
    field[..., 0], field[..., 1] = 2.0, -1.0  # sample the image 2 px right, 1 px up
    out = warp(image, Flow(field, (80, 60)))
    np.testing.assert_array_equal(out[1:, :-2], image[:-1, 2:])
    # borders are replicated, never black
    np.testing.assert_array_equal(out[0, :-2], image[0, 2:])
    np.testing.assert_array_equal(out[1:, -1], image[:-1, -1])


def test_flow_predicts_real_video_better_than_copying(sample_frames):
    estimator = FlowEstimator()
    gains = []
    for previous, current in zip(sample_frames[:-1], sample_frames[1:], strict=True):
        flow = estimator.estimate(previous, current)
        gains.append(psnr(warp(previous, flow), current) - psnr(previous, current))
    assert np.mean(gains) > 1.0


def test_bad_input():
    good = texture(48, 64)
    estimator = FlowEstimator()
    with pytest.raises(ValueError, match="uint8"):
        estimator.estimate(good.astype(np.float32), good)
    with pytest.raises(ValueError, match="shape"):
        estimator.estimate(good[..., 0], good[..., 0])
    with pytest.raises(ValueError, match="differ"):
        estimator.estimate(good, good[:32])
    with pytest.raises(ValueError, match="flow is for"):
        warp(good, Flow(np.zeros((6, 8, 2), np.float32), (80, 60)))
    with pytest.raises(ValueError, match=r"\(h, w, 2\)"):
        warp(good, Flow(np.zeros((6, 8), np.float32), (64, 48)))
    with pytest.raises(ValueError, match="preset"):
        FlowConfig(preset="slow")
    with pytest.raises(ValueError, match="scale"):
        FlowConfig(scale=0)
    with pytest.raises(ValueError, match="compute_scale"):
        FlowConfig(compute_scale=1.5)


def test_tiny_frames_still_work():
    previous, current = shifted_pair(1, 0, width=24, height=18)
    flow = FlowEstimator().estimate(previous, current)
    assert flow.field.shape == (2, 3, 2)
    assert warp(previous, flow).shape == previous.shape
