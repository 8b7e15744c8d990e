"""The conditional denoiser of the ``diffusion`` reconstructor: a small pixel-space UNet
(diffusers' :class:`~diffusers.UNet2DModel`) that generates one person's window.

What it generates is the *residual* between the original window and the ``warp`` v2
prediction of it, as a rectified flow from noise (sigma 1) to the residual (sigma 0);
diffusers' :class:`~diffusers.FlowMatchEulerDiscreteScheduler` samples it in ``steps``
Euler steps. One step gives the conditional mean (smooth); more steps add detail.

Tensors are ``float32`` NCHW, pixels scaled to -1..1. Conditioning channels, in order
(:data:`COND_CHANNELS`): the ``warp`` v2 window (3), the decoded box as a 0/1 mask (1), the
previous output frame's pixels in the same window (3) and a 0/1 flag saying whether a
previous output exists (1).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import numpy as np
import torch

#: Conditioning channels: warp window (3), box mask (1), previous output (3), its flag (1).
COND_CHANNELS = 8
#: The flow's time runs 0..1; the UNet's timestep embedding sees ``sigma * TIME_SCALE``.
TIME_SCALE = 1000.0


@dataclass(frozen=True)
class DenoiserConfig:
    """Shape of the denoiser.

    Attributes:
        canvas: ``(height, width)`` pixels of a person window (each a multiple of 4).
        channels: UNet block widths, one down/up block each.
        layers_per_block: ResNet layers per block.
        norm_groups: GroupNorm groups (divides every width).
        residual_scale: the residual (original - warp, in -2..2) is multiplied by this
            before the flow, so that its spread is near the noise's.
    """

    canvas: tuple[int, int] = (96, 48)
    channels: tuple[int, ...] = (32, 64, 64)
    layers_per_block: int = 1
    norm_groups: int = 16
    residual_scale: float = 2.0

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, data: dict) -> DenoiserConfig:
        known = {f.name for f in dataclasses.fields(cls)}
        unknown = sorted(set(data) - known)
        if unknown:
            raise ValueError(f"unknown denoiser config keys: {', '.join(unknown)}")
        values = dict(data)
        for key in ("canvas", "channels"):
            if key in values:
                values[key] = tuple(int(v) for v in values[key])
        config = cls(**values)
        groups = config.norm_groups
        if any(v % 4 for v in config.canvas) or any(c % groups for c in config.channels):
            raise ValueError(f"canvas must be multiples of 4 and widths of norm_groups: {config}")
        return config


class ConditionalDenoiser(torch.nn.Module):
    """``velocity = model(noisy, sigma, cond)``: ``noisy`` ``(N, 3, H, W)``, ``sigma`` ``(N,)``
    in 0..1, ``cond`` ``(N, COND_CHANNELS, H, W)``; returns ``(N, 3, H, W)``."""

    def __init__(self, config: DenoiserConfig = DenoiserConfig()):  # noqa: B008  (frozen)
        super().__init__()
        from diffusers import UNet2DModel

        self.config = config
        blocks = len(config.channels)
        self.unet = UNet2DModel(
            sample_size=config.canvas, in_channels=3 + COND_CHANNELS, out_channels=3,
            block_out_channels=config.channels, layers_per_block=config.layers_per_block,
            down_block_types=("DownBlock2D",) * blocks, up_block_types=("UpBlock2D",) * blocks,
            norm_num_groups=config.norm_groups,
        )  # fmt: skip

    def forward(self, noisy: torch.Tensor, sigma: torch.Tensor, cond: torch.Tensor):
        x = torch.cat([noisy, cond], dim=1)
        return self.unet(x, sigma * TIME_SCALE).sample


def sample_residual(model: ConditionalDenoiser, cond: torch.Tensor, steps: int,
                    noise: torch.Tensor) -> torch.Tensor:  # fmt: skip
    """Integrates the flow from ``noise`` (``(N, 3, H, W)``, sigma 1) to a residual in
    ``steps`` equal Euler steps of diffusers' flow-matching scheduler; returns the residual in
    pixel units of -2..2 (original - warp, both -1..1)."""
    from diffusers import FlowMatchEulerDiscreteScheduler

    scheduler = FlowMatchEulerDiscreteScheduler(num_train_timesteps=int(TIME_SCALE))
    # evenly spaced sigmas 1, 1 - 1/steps, ..., 1/steps (then 0): the scheduler's own
    # spacing for ``steps`` ends with a step from sigma 0.001 to 0, which does nothing
    sigmas = np.linspace(1.0, 0.0, steps + 1)[:-1].tolist()
    scheduler.set_timesteps(sigmas=sigmas, device=noise.device)
    x = noise
    for t in scheduler.timesteps:
        sigma = torch.full((x.shape[0],), float(t) / TIME_SCALE, device=x.device)
        velocity = model(x, sigma, cond)
        x = scheduler.step(velocity, t, x).prev_sample
    return x / model.config.residual_scale


def training_pair(residual: torch.Tensor, generator: torch.Generator, p_sigma_one: float = 0.0,
                  ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:  # fmt: skip
    """A rectified-flow training example for ``residual`` ``(N, 3, H, W)`` (already scaled):
    ``(noisy, sigma, target_velocity)`` with sigma drawn logit-normally (mid times are the
    hard ones), or exactly 1 (where a one-step sampler starts) for a share ``p_sigma_one``,
    and ``noisy = (1 - sigma) residual + sigma noise``."""
    n = residual.shape[0]
    sigma = torch.sigmoid(torch.randn(n, generator=generator))
    if p_sigma_one > 0:
        sigma = torch.where(torch.rand(n, generator=generator) < p_sigma_one, 1.0, sigma)
    noise = torch.randn(residual.shape, generator=generator)
    s = sigma.view(n, 1, 1, 1)
    return (1 - s) * residual + s * noise, sigma, noise - residual


def to_tensor(images: np.ndarray) -> torch.Tensor:
    """``(N, H, W, C)`` uint8 or float 0..255 -> ``(N, C, H, W)`` float32 in -1..1."""
    pixels = torch.from_numpy(np.ascontiguousarray(images, np.float32))
    return pixels.permute(0, 3, 1, 2) / 127.5 - 1


def to_pixels(tensor: torch.Tensor) -> np.ndarray:
    """``(N, 3, H, W)`` -1..1 -> ``(N, H, W, 3)`` float32 0..255 (not rounded)."""
    return ((tensor.clamp(-1, 1) + 1) * 127.5).permute(0, 2, 3, 1).contiguous().numpy()
