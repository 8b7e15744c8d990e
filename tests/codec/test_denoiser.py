"""The diffusion decoder's parts: person windows, the flow sampler, weights files."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from semcodec.codec.reconstruct import UnknownReconstructorError
from semcodec.codec.reconstruct.denoiser import (
    ConditionalDenoiser,
    DenoiserConfig,
    sample_residual,
    training_pair,
)
from semcodec.codec.reconstruct.diffusion import load_denoiser, save_denoiser
from semcodec.codec.reconstruct.windows import (
    box_masks,
    conditioning,
    crop_windows,
    person_windows,
)

TINY = DenoiserConfig(canvas=(16, 8), channels=(8, 8), norm_groups=4)


def test_a_window_is_centred_on_its_box_with_the_canvas_aspect():
    window = person_windows(np.array([[10, 20, 30, 60]]), (96, 48))[0]
    # 1.3 x 40 px tall = 52, half as wide = 26, centred on (20, 40)
    np.testing.assert_allclose(window, [7, 14, 33, 66])
    tiny = person_windows(np.array([[0, 0, 4, 4]]), (96, 48))[0]
    assert tiny[3] - tiny[1] == pytest.approx(24.0)  # never shorter than MIN_WINDOW_HEIGHT


def test_box_mask_covers_the_box_inside_its_window():
    boxes = np.array([[10.0, 20.0, 30.0, 60.0]])
    windows = np.array([[0.0, 0.0, 40.0, 80.0]])  # 2 frame px per canvas px... (canvas 40x20)
    mask = box_masks(boxes, windows, (40, 20))[0]
    rows, cols = np.nonzero(mask)
    assert (rows.min(), rows.max(), cols.min(), cols.max()) == (10, 29, 5, 14)


def test_crops_resample_the_window_and_repeat_edges_outside_the_frame():
    image = np.zeros((40, 40, 3), np.uint8)
    image[:, 20:] = 200
    crops = crop_windows(image, np.array([[10.0, 0.0, 30.0, 40.0], [-20.0, 0.0, 0.0, 40.0]]),
                         (8, 4))  # fmt: skip
    assert crops.shape == (2, 8, 4, 3) and crops.dtype == np.uint8
    assert crops[0, :, 0].max() == 0 and crops[0, :, 3].min() == 200
    assert crops[1].max() == 0  # left of the frame: the edge column repeated


def test_conditioning_channels_and_previous_flag():
    warp = np.full((2, 16, 8, 3), 255, np.uint8)
    masks = np.ones((2, 16, 8), np.float32)
    previous = np.zeros((2, 16, 8, 3), np.uint8)
    cond = conditioning(warp, masks, previous, np.array([True, False]))
    assert cond.shape == (2, 16, 8, 8)
    np.testing.assert_allclose(cond[..., :3], 1.0)
    assert (cond[0, ..., 4:7] == -1).all() and (cond[0, ..., 7] == 1).all()
    assert (cond[1, ..., 4:8] == 0).all()
    assert (conditioning(warp, masks, None)[..., 4:] == 0).all()


class _Oracle(torch.nn.Module):
    """Knows the answer: the velocity that carries any noisy sample straight to ``x0``."""

    def __init__(self, x0: torch.Tensor):
        super().__init__()
        self.x0, self.config = x0, DenoiserConfig(residual_scale=1.0)

    def forward(self, noisy, sigma, cond):
        return (noisy - self.x0) / sigma.view(-1, 1, 1, 1)


@pytest.mark.parametrize("steps", [1, 2, 4, 16])
def test_the_sampler_follows_the_flow_to_the_answer_in_any_number_of_steps(steps):
    gen = torch.Generator().manual_seed(0)
    x0 = torch.randn(2, 3, 8, 4, generator=gen)
    noise = torch.randn(2, 3, 8, 4, generator=gen)
    out = sample_residual(_Oracle(x0), torch.zeros(2, 8, 8, 4), steps, noise)
    torch.testing.assert_close(out, x0, atol=1e-5, rtol=0)


def test_training_pairs_lie_on_the_straight_path_from_residual_to_noise():
    residual = torch.randn(4, 3, 8, 4, generator=torch.Generator().manual_seed(1))
    noisy, sigma, velocity = training_pair(residual, torch.Generator().manual_seed(2))
    assert ((sigma > 0) & (sigma < 1)).all()
    # one Euler step of the true velocity from sigma back to 0 lands on the residual
    back = noisy - sigma.view(-1, 1, 1, 1) * velocity
    torch.testing.assert_close(back, residual, atol=1e-5, rtol=0)


def test_weights_round_trip_and_damaged_files_are_refused(tmp_path):
    torch.manual_seed(0)
    model = ConditionalDenoiser(TINY).eval()
    path = save_denoiser(model, tmp_path / "d.pt", {"steps": 3})
    loaded = load_denoiser(path)
    assert loaded.config == TINY and loaded.metadata == {"steps": 3}
    x, cond = torch.randn(1, 3, 16, 8), torch.randn(1, 8, 16, 8)
    with torch.no_grad():
        torch.testing.assert_close(loaded(x, torch.ones(1) * 0.5, cond),
                                   model(x, torch.ones(1) * 0.5, cond))  # fmt: skip
    damaged = tmp_path / "bad.pt"
    damaged.write_bytes(path.read_bytes()[:100])
    with pytest.raises(UnknownReconstructorError, match="cannot load denoiser weights"):
        load_denoiser(damaged)
    with pytest.raises(UnknownReconstructorError, match="cannot load"):
        load_denoiser(tmp_path / "missing.pt")


def test_config_checks_its_shape():
    with pytest.raises(ValueError, match="unknown denoiser config keys: width"):
        DenoiserConfig.from_dict({"width": 3})
    with pytest.raises(ValueError, match="multiples of 4"):
        DenoiserConfig.from_dict({"canvas": [10, 8]})
    assert DenoiserConfig.from_dict(TINY.to_dict()) == TINY


class _Recorder(torch.nn.Module):
    """Predicts no velocity and records the sigmas it is asked at."""

    def __init__(self):
        super().__init__()
        self.config, self.sigmas = DenoiserConfig(residual_scale=1.0), []

    def forward(self, noisy, sigma, cond):
        self.sigmas.append(round(float(sigma[0]), 6))
        return torch.zeros_like(noisy)


@pytest.mark.parametrize("steps, sigmas", [(1, [1.0]), (2, [1.0, 0.5]),
                                           (4, [1.0, 0.75, 0.5, 0.25])])  # fmt: skip
def test_steps_are_equal_slices_of_the_flow(steps, sigmas):
    # diffusers' own spacing for 2 steps is 1.0 then 0.001: the second step would do nothing
    model = _Recorder()
    sample_residual(model, torch.zeros(1, 8, 8, 4), steps, torch.zeros(1, 3, 8, 4))
    assert model.sigmas == sigmas


def test_a_share_of_training_pairs_starts_from_pure_noise():
    residual = torch.randn(64, 3, 8, 4, generator=torch.Generator().manual_seed(1))
    _, sigma, _ = training_pair(residual, torch.Generator().manual_seed(2), p_sigma_one=1.0)
    assert (sigma == 1).all()
    _, sigma, _ = training_pair(residual, torch.Generator().manual_seed(2), p_sigma_one=0.5)
    assert 10 < int((sigma == 1).sum()) < 54 and (sigma > 0).all()
