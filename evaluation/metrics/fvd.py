"""Fréchet Video Distance (Unterthiner et al., 2018) with the TorchScript I3D of StyleGAN-V.

FVD is the Fréchet distance between Gaussians fitted to I3D (Kinetics-400) features of
reference and distorted clips. The I3D network is not shipped: supply ``i3d_torchscript.pt``
(as published with StyleGAN-V) with ``--fvd-weights PATH`` or as ``fvd/i3d_torchscript.pt``
in a models directory (see :mod:`codec.core.models`). Without it, :class:`FVDUnavailableError`.
"""

from __future__ import annotations

import os
import warnings
from pathlib import Path

import numpy as np
import scipy.linalg
import torch
import torch.nn.functional as F

from semcodec.codec.core.models import (
    MODELS_DIR_ENV,
    ModelChecksumError,
    ModelNotFoundError,
    model_spec,
    resolve_model,
)

__all__ = [
    "FVDUnavailableError",
    "I3D_INPUT_SIZE",
    "fvd",
    "frechet_distance",
    "gaussian_stats",
    "i3d_features",
    "load_i3d",
    "video_to_clips",
]

#: Spatial size (H = W, pixels) the I3D network is fed.
I3D_INPUT_SIZE = 224
_I3D_MODEL = "i3d_kinetics400"


class FVDUnavailableError(RuntimeError):
    """FVD cannot be computed because the I3D network file is missing or unreadable."""


def gaussian_stats(features: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Mean ``(D,)`` and unbiased covariance ``(D, D)`` (float64) of features ``(N, D)``.

    Raises:
        ValueError: ``features`` is not 2-D or has fewer than 2 rows.
    """
    feats = np.asarray(features, dtype=np.float64)
    if feats.ndim != 2 or feats.shape[0] < 2:
        raise ValueError(f"features must be (N, D) with N >= 2, got shape {feats.shape}")
    return feats.mean(axis=0), np.cov(feats, rowvar=False).reshape(feats.shape[1], -1)


def _check_stats(mu: np.ndarray, sigma: np.ndarray, name: str) -> tuple[np.ndarray, np.ndarray]:
    mu = np.atleast_1d(np.asarray(mu, dtype=np.float64))
    sigma = np.atleast_2d(np.asarray(sigma, dtype=np.float64))
    if mu.ndim != 1 or sigma.shape != (mu.shape[0], mu.shape[0]):
        raise ValueError(
            f"{name}: mean must be (D,) and covariance (D, D), got {mu.shape} and {sigma.shape}"
        )
    return mu, sigma


def frechet_distance(
    mu1: np.ndarray, sigma1: np.ndarray, mu2: np.ndarray, sigma2: np.ndarray, eps: float = 1e-6
) -> float:
    """Fréchet distance between N(mu1, sigma1) and N(mu2, sigma2).

    ``|mu1 - mu2|^2 + tr(sigma1 + sigma2 - 2 sqrtm(sigma1 sigma2))``, float >= 0 (up to
    rounding). Means are ``(D,)``, covariances ``(D, D)``. When the product is singular
    (``sqrtm`` not finite), ``eps * I`` is added to both covariances; a small imaginary part
    of the square root (numerical noise) is dropped.

    Raises:
        ValueError: shapes are inconsistent, or the square root has a large imaginary part.
    """
    mu1, sigma1 = _check_stats(mu1, sigma1, "first distribution")
    mu2, sigma2 = _check_stats(mu2, sigma2, "second distribution")
    if mu1.shape != mu2.shape:
        raise ValueError(f"the distributions differ in dimension: {mu1.shape} vs {mu2.shape}")
    diff = mu1 - mu2
    covmean = _sqrtm(sigma1 @ sigma2)
    if not np.isfinite(covmean).all():
        offset = eps * np.eye(sigma1.shape[0])
        covmean = _sqrtm((sigma1 + offset) @ (sigma2 + offset))
    if np.iscomplexobj(covmean):
        imag = np.abs(covmean.imag).max()
        if not np.allclose(np.diagonal(covmean).imag, 0, atol=1e-3):
            raise ValueError(
                f"sqrtm(sigma1 @ sigma2) has a large imaginary part ({imag:.3g}); "
                "are both covariances symmetric positive semi-definite?"
            )
        covmean = covmean.real
    return float(diff @ diff + np.trace(sigma1) + np.trace(sigma2) - 2.0 * np.trace(covmean))


def _sqrtm(matrix: np.ndarray) -> np.ndarray:
    """Principal square root of a ``(D, D)`` matrix (may be complex or contain inf/nan).

    scipy's warning about singular input is silenced: the caller checks the result.
    """
    with np.errstate(all="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore", scipy.linalg.LinAlgWarning)
        result = scipy.linalg.sqrtm(matrix)
    return result[0] if isinstance(result, tuple) else result


def _missing_message(detail: str, models_dir: str | os.PathLike | None) -> str:
    relpath = model_spec(_I3D_MODEL).relpath
    return (
        f"FVD needs the TorchScript I3D network {Path(relpath).name} (Kinetics-400, as "
        f"published with StyleGAN-V), which is not shipped with semcodec. {detail}\n"
        f"Supply it with --fvd-weights PATH (weights_path=...), or put it as {relpath} in a "
        f"models directory (--models-dir DIR, {MODELS_DIR_ENV}=DIR, ../shared/models, or the "
        f"user cache); models_dir given: {models_dir!r}."
    )


def load_i3d(
    weights_path: str | os.PathLike | None = None,
    models_dir: str | os.PathLike | None = None,
    device: str | torch.device = "cpu",
) -> torch.jit.ScriptModule:
    """The TorchScript I3D network in eval mode, from ``weights_path`` or the model registry.

    The network is called as ``model(videos, rescale=False, resize=False,
    return_features=True)`` on float32 videos ``(N, 3, T, 224, 224)`` in -1..1 and returns
    features ``(N, 400)``.

    Raises:
        FVDUnavailableError: the file is missing (the message says where it was looked up
            and how to supply it) or cannot be loaded by ``torch.jit.load``.
    """
    if weights_path is not None:
        path = Path(weights_path)
        if not path.is_file():
            raise FVDUnavailableError(_missing_message(f"No file at {path}.", models_dir))
    else:
        try:
            path = resolve_model(_I3D_MODEL, models_dir)
        except ModelNotFoundError as exc:
            raise FVDUnavailableError(_missing_message(str(exc), models_dir)) from exc
        except ModelChecksumError as exc:  # no published digest: the user pins theirs
            raise FVDUnavailableError(str(exc)) from exc
    try:
        with warnings.catch_warnings():
            # TorchScript is how the network is published; its deprecation is not actionable.
            warnings.filterwarnings("ignore", message=".*torch.jit.load", category=FutureWarning)
            model = torch.jit.load(str(path), map_location=device)
    except (RuntimeError, ValueError) as exc:
        raise FVDUnavailableError(
            f"{path} is not a loadable TorchScript I3D network ({exc}); "
            + _missing_message("", models_dir)
        ) from exc
    return model.eval()


def video_to_clips(video: np.ndarray, clip_len: int = 16) -> np.ndarray:
    """Splits a uint8 RGB video ``(T, H, W, 3)`` into ``(T // clip_len, clip_len, H, W, 3)``.

    Trailing frames that do not fill a clip are dropped.

    Raises:
        ValueError: wrong shape/dtype, ``clip_len < 1``, or fewer than ``clip_len`` frames.
    """
    frames = np.asarray(video)
    if frames.ndim != 4 or frames.shape[-1] != 3 or frames.dtype != np.uint8:
        raise ValueError(f"video must be uint8 (T, H, W, 3), got {frames.dtype} {frames.shape}")
    if clip_len < 1:
        raise ValueError(f"clip_len must be >= 1, got {clip_len}")
    count = frames.shape[0] // clip_len
    if count == 0:
        raise ValueError(f"video has {frames.shape[0]} frames, fewer than clip_len={clip_len}")
    return frames[: count * clip_len].reshape(count, clip_len, *frames.shape[1:])


def _clip_to_i3d_input(clip: np.ndarray, device: torch.device) -> torch.Tensor:
    """``(T, H, W, 3)`` uint8 -> ``(1, 3, T, 224, 224)`` float32 in -1..1 (bilinear resize)."""
    frames = torch.from_numpy(np.ascontiguousarray(clip)).to(device)
    frames = frames.permute(0, 3, 1, 2).float()
    size = (I3D_INPUT_SIZE, I3D_INPUT_SIZE)
    frames = F.interpolate(frames, size=size, mode="bilinear", align_corners=False, antialias=True)
    frames = frames.clamp(0.0, 255.0).div(127.5).sub(1.0)
    return frames.permute(1, 0, 2, 3).unsqueeze(0)


def i3d_features(model: torch.nn.Module, clips: np.ndarray, batch_size: int = 4) -> np.ndarray:
    """I3D features ``(N, 400)`` float64 of uint8 clips ``(N, T, H, W, 3)``."""
    device = next(iter(model.parameters()), torch.empty(0)).device
    out = []
    with torch.inference_mode():
        for start in range(0, clips.shape[0], batch_size):
            chunk = clips[start : start + batch_size]
            batch = torch.cat([_clip_to_i3d_input(clip, device) for clip in chunk])
            feats = model(batch, rescale=False, resize=False, return_features=True)
            out.append(feats.double().cpu().numpy())
    return np.concatenate(out)


def fvd(
    reference_clips: np.ndarray | list[np.ndarray],
    distorted_clips: np.ndarray | list[np.ndarray],
    weights_path: str | os.PathLike | None = None,
    models_dir: str | os.PathLike | None = None,
    clip_len: int = 16,
) -> float:
    """FVD between two uint8 RGB videos ``(T, H, W, 3)`` (or lists of such videos).

    Each video is split into ``clip_len``-frame clips (the tail is dropped), frames are resized
    to 224x224 and scaled to -1..1, and the Fréchet distance of the I3D feature Gaussians is
    returned (>= 0; 0 for identical inputs). At least 2 clips per side are needed for a
    covariance; FVD is only meaningful with many clips.

    Raises:
        FVDUnavailableError: the I3D network is not available (see :func:`load_i3d`).
        ValueError: invalid videos or fewer than 2 clips on a side.
    """
    model = load_i3d(weights_path, models_dir)
    stats = []
    for name, videos in (("reference", reference_clips), ("distorted", distorted_clips)):
        feats = _video_features(model, videos, clip_len)
        if feats.shape[0] < 2:
            raise ValueError(
                f"{name} gives {feats.shape[0]} clip(s) of {clip_len} frames; FVD needs >= 2"
            )
        stats.append(gaussian_stats(feats))
    (mu1, sigma1), (mu2, sigma2) = stats
    return frechet_distance(mu1, sigma1, mu2, sigma2)


def _video_features(
    model: torch.nn.Module, videos: np.ndarray | list[np.ndarray], clip_len: int
) -> np.ndarray:
    """I3D features ``(N, 400)`` of all clips of one video ``(T, H, W, 3)`` or a list of them."""
    if isinstance(videos, np.ndarray):
        videos = [videos]
    return np.concatenate([i3d_features(model, video_to_clips(v, clip_len)) for v in videos])
