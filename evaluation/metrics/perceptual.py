"""ST-LPIPS: shift-tolerant learned perceptual image distance (AlexNet variant).

Ghildyal & Liu, "Shift-tolerant Perceptual Similarity Metric", ECCV 2022 (arXiv:2207.13686),
built on LPIPS (Zhang et al., CVPR 2018). This is an independent implementation of the
network that loads the published state dict (``stlpips_alex`` in :mod:`codec.core.models`,
BSD-2-Clause) with ``strict=True``.

Architecture (all stride-2 subsampling is done by a fixed 3x3 binomial blur after reflection
padding of 2 pixels on each side, so small shifts barely move the features):

* scaling: ``(x - shift) / scale`` per channel;
* stage 1: conv 11x11 (stride 1, pad 2) -> blur-down -> ReLU;
* stage 2: max-pool 3x3 (stride 1) -> blur-down -> conv 5x5 (pad 2) -> ReLU;
* stage 3: max-pool 3x3 (stride 1) -> blur-down -> conv 3x3 (pad 1) -> ReLU;
* stage 4: conv 3x3 (pad 1) -> ReLU;  stage 5: conv 3x3 (pad 1) -> ReLU.

Each stage's features are unit-normalised over channels, squared differences are weighted by
a non-negative 1x1 conv (``lin0..lin4``), averaged over space and summed over stages.
"""

from __future__ import annotations

import os
from collections import OrderedDict
from collections.abc import Callable
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F
from torch import Tensor, nn

from semcodec.codec.core.models import resolve_model

__all__ = [
    "STLPIPS",
    "STLPIPS_CHANNELS",
    "STLPIPS_MIN_SIDE",
    "STLPIPSReference",
    "load_stlpips",
    "st_lpips",
    "st_lpips_per_frame",
]

#: Channels of the five AlexNet stages whose features are compared.
STLPIPS_CHANNELS: tuple[int, ...] = (64, 192, 384, 256, 256)

#: Smallest image side (pixels) the trunk accepts (its reflection padding needs >= 3 px left).
STLPIPS_MIN_SIDE = 21

_NORM_EPS = 1e-10


class BlurDownsample(nn.Module):
    """Anti-aliased stride-2 subsampling: reflection pad, depthwise 3x3 binomial blur, stride 2.

    Input ``(N, C, H, W)`` float; output ``(N, C, H // 2 + 1, W // 2 + 1)`` for the default
    padding of ``kernel_size - 1`` = 2 pixels per side. The filter is stored as the buffer
    ``filt`` of shape ``(C, 1, 3, 3)`` (normalised ``[1, 2, 1]`` outer product, sum 1).
    """

    def __init__(self, channels: int, stride: int = 2) -> None:
        super().__init__()
        taps = torch.tensor([1.0, 2.0, 1.0])
        kernel = torch.outer(taps, taps)
        kernel = kernel / kernel.sum()
        self.register_buffer("filt", kernel.expand(channels, 1, 3, 3).clone())
        self.pad = 2  # kernel size - 1, on every side
        self.stride = stride

    def forward(self, x: Tensor) -> Tensor:
        padded = F.pad(x, (self.pad,) * 4, mode="reflect")
        return F.conv2d(padded, self.filt, stride=self.stride, groups=x.shape[1])


class _ChannelScaling(nn.Module):
    """Per-channel affine input normalisation ``(x - shift) / scale`` (buffers ``(1,3,1,1)``)."""

    def __init__(self) -> None:
        super().__init__()
        self.register_buffer("shift", torch.tensor([-0.030, -0.088, -0.188]).view(1, 3, 1, 1))
        self.register_buffer("scale", torch.tensor([0.458, 0.448, 0.450]).view(1, 3, 1, 1))

    def forward(self, x: Tensor) -> Tensor:
        return (x - self.shift) / self.scale


class _LinearHead(nn.Module):
    """1x1 conv ``C -> 1`` without bias; parameter key ``model.1.weight`` (slot 0: dropout)."""

    def __init__(self, channels: int) -> None:
        super().__init__()
        # Slot "0" is the (training-only) dropout of LPIPS; keeping it aligns the key names.
        self.model = nn.Sequential(
            OrderedDict([("0", nn.Identity()), ("1", nn.Conv2d(channels, 1, 1, bias=False))])
        )

    def forward(self, x: Tensor) -> Tensor:
        return self.model(x)


def _stage(layers: list[tuple[int, nn.Module]]) -> nn.Sequential:
    """A stage whose module names are the global layer indices (to match the state dict)."""
    return nn.Sequential(OrderedDict((str(index), layer) for index, layer in layers))


class _ShiftTolerantAlexNet(nn.Module):
    """The five-stage anti-aliased AlexNet trunk; returns the ReLU output of every stage."""

    def __init__(self) -> None:
        super().__init__()
        c1, c2, c3, c4, c5 = STLPIPS_CHANNELS
        self.slice1 = _stage(
            [
                (0, nn.Conv2d(3, c1, 11, stride=1, padding=2)),
                (1, BlurDownsample(c1)),
                (2, nn.ReLU()),
            ]
        )
        self.slice2 = _stage(
            [
                (3, nn.MaxPool2d(3, stride=1)),
                (4, BlurDownsample(c1)),
                (5, nn.Conv2d(c1, c2, 5, padding=2)),
                (6, nn.ReLU()),
            ]
        )
        self.slice3 = _stage(
            [
                (7, nn.MaxPool2d(3, stride=1)),
                (8, BlurDownsample(c2)),
                (9, nn.Conv2d(c2, c3, 3, padding=1)),
                (10, nn.ReLU()),
            ]
        )
        self.slice4 = _stage([(11, nn.Conv2d(c3, c4, 3, padding=1)), (12, nn.ReLU())])
        self.slice5 = _stage([(13, nn.Conv2d(c4, c5, 3, padding=1)), (14, nn.ReLU())])

    def forward(self, x: Tensor) -> list[Tensor]:
        features = []
        for stage in (self.slice1, self.slice2, self.slice3, self.slice4, self.slice5):
            x = stage(x)
            features.append(x)
        return features


def _unit_normalise(features: Tensor) -> Tensor:
    """Divides ``(N, C, H, W)`` features by their L2 norm over C (plus 1e-10)."""
    norm = features.pow(2).sum(dim=1, keepdim=True).sqrt()
    return features / (norm + _NORM_EPS)


class STLPIPS(nn.Module):
    """Shift-tolerant LPIPS distance, AlexNet trunk.

    ``forward(x, y)`` takes two float32 RGB batches ``(N, 3, H, W)`` with values in -1..1
    (H, W >= :data:`STLPIPS_MIN_SIDE` = 21) and returns the distances ``(N,)``,
    float32, >= 0, 0 for identical images. Build with :func:`load_stlpips` to get the
    published weights; a bare ``STLPIPS()`` has random conv weights.
    """

    def __init__(self) -> None:
        super().__init__()
        self.scaling_layer = _ChannelScaling()
        self.net = _ShiftTolerantAlexNet()
        for index, channels in enumerate(STLPIPS_CHANNELS):
            self.add_module(f"lin{index}", _LinearHead(channels))

    def heads(self) -> list[_LinearHead]:
        """The five linear heads ``lin0..lin4``, in stage order."""
        return [getattr(self, f"lin{index}") for index in range(len(STLPIPS_CHANNELS))]

    def forward(self, x: Tensor, y: Tensor) -> Tensor:
        _check_batch(x, y)
        return self.distance(self.features(x), self.features(y))

    def features(self, x: Tensor) -> list[Tensor]:
        """The five stages' unit-normalised features of ``(N, 3, H, W)`` RGB in -1..1.

        Returns ``(N, C_k, H_k, W_k)`` float32 tensors, C_k = :data:`STLPIPS_CHANNELS`;
        about 18 MB per 384x288 image in all (4.5 M values).
        """
        return [_unit_normalise(f) for f in self.net(self.scaling_layer(x))]

    def distance(self, feats_x: list[Tensor], feats_y: list[Tensor]) -> Tensor:
        """``(N,)`` distances between two images' :meth:`features`."""
        total = feats_x[0].new_zeros(feats_x[0].shape[0])
        for head, fx, fy in zip(self.heads(), feats_x, feats_y, strict=True):
            total = total + head((fx - fy).pow(2)).mean(dim=(1, 2, 3))
        return total


def _check_batch(x: Tensor, y: Tensor) -> None:
    if x.shape != y.shape:
        raise ValueError(f"ST-LPIPS inputs differ in shape: {tuple(x.shape)} vs {tuple(y.shape)}")
    if x.ndim != 4 or x.shape[1] != 3:
        raise ValueError(f"ST-LPIPS expects (N, 3, H, W) RGB batches, got {tuple(x.shape)}")
    if min(x.shape[2:]) < STLPIPS_MIN_SIDE:
        raise ValueError(
            f"ST-LPIPS needs images of at least {STLPIPS_MIN_SIDE}x{STLPIPS_MIN_SIDE} pixels, "
            f"got {x.shape[2]}x{x.shape[3]}"
        )


_CACHE: dict[tuple[str, str], STLPIPS] = {}


def load_stlpips(
    models_dir: str | os.PathLike | None = None, device: str | torch.device = "cpu"
) -> STLPIPS:
    """The ST-LPIPS network with the published weights, in eval mode, on ``device``.

    The weights are resolved as model ``stlpips_alex`` (see :func:`codec.core.models.resolve_model`)
    and loaded with ``strict=True``. Instances are cached per (weights path, device), so
    repeated calls return the same module without reloading.

    Raises:
        codec.core.models.ModelNotFoundError: the weights file is not in any models directory.
    """
    path = Path(resolve_model("stlpips_alex", models_dir)).resolve()
    key = (str(path), str(torch.device(device)))
    if key not in _CACHE:
        model = STLPIPS()
        state = torch.load(path, map_location="cpu", weights_only=True)
        model.load_state_dict(state, strict=True)
        model.requires_grad_(False)
        # channels-last convolutions are about 1.4x faster on CPU (oneDNN) for this trunk
        _CACHE[key] = model.to(device, memory_format=torch.channels_last).eval()
    return _CACHE[key]


def _frames_to_tensor(frames: np.ndarray, device: torch.device) -> Tensor:
    """``(T, H, W, 3)`` uint8 RGB -> ``(T, 3, H, W)`` float32 in -1..1 on ``device``."""
    tensor = torch.from_numpy(np.ascontiguousarray(frames)).to(device)
    tensor = tensor.permute(0, 3, 1, 2).float().div(127.5).sub(1.0)
    return tensor.contiguous(memory_format=torch.channels_last)


def _as_video(frames: np.ndarray, name: str) -> np.ndarray:
    array = np.asarray(frames)
    if array.ndim == 3:
        array = array[None]
    if array.ndim != 4 or array.shape[-1] != 3 or array.dtype != np.uint8:
        raise ValueError(
            f"{name} must be uint8 RGB of shape (T, H, W, 3) or (H, W, 3), "
            f"got {array.dtype} {array.shape}"
        )
    return array


def st_lpips_per_frame(
    reference: np.ndarray,
    distorted: np.ndarray,
    models_dir: str | os.PathLike | None = None,
    batch_size: int = 4,
    device: str | torch.device = "cpu",
) -> np.ndarray:
    """ST-LPIPS of every frame pair: ``(T,)`` float64 distances (>= 0, 0 = identical).

    ``reference`` and ``distorted`` are uint8 RGB ``(T, H, W, 3)`` (or one ``(H, W, 3)`` frame)
    of the same shape; frames are evaluated ``batch_size`` at a time.
    """
    ref = _as_video(reference, "reference")
    dist = _as_video(distorted, "distorted")
    if ref.shape != dist.shape:
        raise ValueError(f"reference {ref.shape} and distorted {dist.shape} differ in shape")
    if batch_size < 1:
        raise ValueError(f"batch_size must be >= 1, got {batch_size}")
    model = load_stlpips(models_dir, device)
    target = next(model.parameters()).device
    out = np.empty(ref.shape[0], dtype=np.float64)
    with torch.inference_mode():
        for start in range(0, ref.shape[0], batch_size):
            stop = start + batch_size
            x = _frames_to_tensor(ref[start:stop], target)
            y = _frames_to_tensor(dist[start:stop], target)
            out[start:stop] = model(x, y).double().cpu().numpy()
    return out


def st_lpips(
    reference: np.ndarray,
    distorted: np.ndarray,
    models_dir: str | os.PathLike | None = None,
    batch_size: int = 4,
) -> float:
    """Mean over frames of ST-LPIPS between two uint8 RGB videos ``(T, H, W, 3)`` (on CPU).

    Returns a float >= 0 (0 = identical; about 0.004 for a 1-px shift, 0.7 for unrelated
    images). See :func:`st_lpips_per_frame`.
    """
    return float(st_lpips_per_frame(reference, distorted, models_dir, batch_size).mean())


#: Reference features an :class:`STLPIPSReference` keeps, at most (bytes).
REFERENCE_CACHE_BYTES = 1 << 30


class STLPIPSReference:
    """ST-LPIPS of many distorted versions against one reference video.

    A benchmark compares every codec's output with the same frames, so the reference half of
    the network runs once: its features are kept (up to ``cache_bytes``; batches beyond that
    are recomputed each time). Frames identical to their reference score exactly 0 without
    running the network.

    Args:
        reference: ``(T, H, W, 3)`` uint8 RGB (H, W >= 21).
        models_dir: where the weights are looked up first (see :func:`load_stlpips`).
        batch_size: frames per forward pass.
        cache_bytes: most bytes of reference features kept in memory.
    """

    def __init__(
        self,
        reference: np.ndarray,
        models_dir: str | os.PathLike | None = None,
        batch_size: int = 4,
        cache_bytes: int = REFERENCE_CACHE_BYTES,
    ) -> None:
        if batch_size < 1:
            raise ValueError(f"batch_size must be >= 1, got {batch_size}")
        self.reference = _as_video(reference, "reference")
        self.batch_size = batch_size
        self.model = load_stlpips(models_dir)
        self.cache_bytes = cache_bytes
        self._device = next(self.model.parameters()).device
        self._features: dict[int, list[Tensor]] = {}
        self._cached_bytes = 0

    def distances(
        self, distorted: np.ndarray, progress: Callable[[int], None] | None = None
    ) -> np.ndarray:
        """``(T,)`` float64 ST-LPIPS of each frame of ``distorted`` (same shape as the
        reference); ``progress(n)`` after each batch with the frames done."""
        dist = _as_video(distorted, "distorted")
        if dist.shape != self.reference.shape:
            raise ValueError(
                f"reference {self.reference.shape} and distorted {dist.shape} differ in shape"
            )
        out = np.zeros(dist.shape[0], dtype=np.float64)
        with torch.inference_mode():
            for start in range(0, dist.shape[0], self.batch_size):
                stop = min(start + self.batch_size, dist.shape[0])
                if not np.array_equal(self.reference[start:stop], dist[start:stop]):
                    y = self.model.features(_frames_to_tensor(dist[start:stop], self._device))
                    scores = self.model.distance(self._reference(start, stop), y)
                    out[start:stop] = scores.double().cpu().numpy()
                if progress is not None:
                    progress(stop)
        return out

    def _reference(self, start: int, stop: int) -> list[Tensor]:
        if start in self._features:
            return self._features[start]
        x = _frames_to_tensor(self.reference[start:stop], self._device)
        _check_batch(x, x)
        feats = self.model.features(x)
        size = sum(f.numel() * f.element_size() for f in feats)
        if self._cached_bytes + size <= self.cache_bytes:
            self._features[start] = feats
            self._cached_bytes += size
        return feats
