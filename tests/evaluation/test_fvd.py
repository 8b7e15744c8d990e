"""Tests of evaluation.metrics.fvd: closed-form Fréchet distances and the I3D-missing path."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch

from semcodec.codec.core.models import ModelNotFoundError, file_sha256, resolve_model
from semcodec.evaluation.metrics import fvd as fvd_module
from semcodec.evaluation.metrics.fvd import (
    FVDUnavailableError,
    frechet_distance,
    fvd,
    gaussian_stats,
    load_i3d,
    video_to_clips,
)

# --- Fréchet distance on known Gaussians ------------------------------------------------------


def test_identical_gaussians_give_zero() -> None:
    rng = np.random.default_rng(0)
    a = rng.normal(size=(5, 5))
    sigma = a @ a.T + np.eye(5)
    mu = rng.normal(size=5)
    assert frechet_distance(mu, sigma, mu, sigma) == pytest.approx(0.0, abs=1e-8)


def test_mean_shift_with_same_covariance_is_squared_norm() -> None:
    rng = np.random.default_rng(1)
    a = rng.normal(size=(4, 4))
    sigma = a @ a.T + 0.5 * np.eye(4)
    mu = rng.normal(size=4)
    shift = np.array([1.0, -2.0, 0.5, 3.0])
    assert frechet_distance(mu, sigma, mu + shift, sigma) == pytest.approx(shift @ shift)


@pytest.mark.parametrize(("a", "b"), [(1.0, 2.0), (0.3, 3.0), (2.5, 2.5)])
def test_one_dimensional_variances(a: float, b: float) -> None:
    # N(0, a^2) vs N(0, b^2): (a - b)^2
    assert frechet_distance(0.0, a**2, 0.0, b**2) == pytest.approx((a - b) ** 2)
    got = frechet_distance(np.zeros(1), np.array([[a**2]]), np.zeros(1), np.array([[b**2]]))
    assert got == pytest.approx((a - b) ** 2)


def test_diagonal_covariances() -> None:
    var1 = np.array([1.0, 4.0, 9.0, 0.25])
    var2 = np.array([4.0, 1.0, 9.0, 2.0])
    mu1 = np.array([0.0, 1.0, 2.0, 3.0])
    mu2 = np.array([1.0, 1.0, 0.0, 3.0])
    expected = np.sum((mu1 - mu2) ** 2) + np.sum((np.sqrt(var1) - np.sqrt(var2)) ** 2)
    got = frechet_distance(mu1, np.diag(var1), mu2, np.diag(var2))
    assert got == pytest.approx(expected)


def test_symmetry() -> None:
    rng = np.random.default_rng(2)
    a, b = rng.normal(size=(2, 6, 6))
    s1, s2 = a @ a.T + 0.1 * np.eye(6), b @ b.T + 0.1 * np.eye(6)
    m1, m2 = rng.normal(size=(2, 6))
    assert frechet_distance(m1, s1, m2, s2) == pytest.approx(frechet_distance(m2, s2, m1, s1))
    assert frechet_distance(m1, s1, m2, s2) > 0


def test_singular_covariances_stay_finite() -> None:
    # Rank-1 covariances in 3-D (fewer samples than dimensions): the eps * I fallback.
    v = np.array([[1.0], [2.0], [0.0]])
    w = np.array([[0.0], [1.0], [1.0]])
    got = frechet_distance(np.zeros(3), v @ v.T, np.ones(3), w @ w.T)
    # |mu1 - mu2|^2 = 3, tr = |v|^2 + |w|^2 = 7, tr sqrtm(v v'w w') = |v . w| = 2.
    assert got == pytest.approx(3.0 + 7.0 - 2 * 2.0, abs=1e-3)


def test_non_finite_square_root_falls_back_to_eps(monkeypatch: pytest.MonkeyPatch) -> None:
    real_sqrtm = fvd_module._sqrtm
    calls = []

    def flaky_sqrtm(matrix: np.ndarray) -> np.ndarray:
        calls.append(matrix)
        return np.full_like(matrix, np.nan) if len(calls) == 1 else real_sqrtm(matrix)

    monkeypatch.setattr(fvd_module, "_sqrtm", flaky_sqrtm)
    got = frechet_distance(np.zeros(2), np.diag([1.0, 4.0]), np.zeros(2), np.diag([4.0, 1.0]))
    assert len(calls) == 2
    eps = 1e-6 * np.eye(2)
    expected = (np.diag([1.0, 4.0]) + eps) @ (np.diag([4.0, 1.0]) + eps)
    np.testing.assert_allclose(calls[1], expected)
    assert got == pytest.approx(2.0, abs=1e-4)  # (1 - 2)^2 + (2 - 1)^2


def test_indefinite_covariance_raises() -> None:
    with pytest.raises(ValueError, match="positive semi-definite"):
        frechet_distance(np.zeros(2), np.diag([-1.0, 1.0]), np.zeros(2), np.eye(2))


@pytest.mark.parametrize(
    ("mu1", "sigma1", "mu2", "sigma2"),
    [
        (np.zeros(3), np.eye(2), np.zeros(3), np.eye(3)),
        (np.zeros(3), np.eye(3), np.zeros(2), np.eye(2)),
        (np.zeros((3, 1)), np.eye(3), np.zeros(3), np.eye(3)),
        (np.zeros(3), np.ones((3, 2)), np.zeros(3), np.eye(3)),
    ],
)
def test_shape_errors(mu1, sigma1, mu2, sigma2) -> None:
    with pytest.raises(ValueError):
        frechet_distance(mu1, sigma1, mu2, sigma2)


def test_gaussian_stats_and_fd_of_samples() -> None:
    rng = np.random.default_rng(3)
    feats = rng.normal(loc=[1.0, -1.0], scale=[1.0, 2.0], size=(20000, 2))
    mu, sigma = gaussian_stats(feats)
    assert mu.shape == (2,) and sigma.shape == (2, 2)
    np.testing.assert_allclose(mu, [1.0, -1.0], atol=0.05)
    np.testing.assert_allclose(sigma, np.diag([1.0, 4.0]), atol=0.1)
    with pytest.raises(ValueError, match="N >= 2"):
        gaussian_stats(np.zeros((1, 4)))
    with pytest.raises(ValueError):
        gaussian_stats(np.zeros(4))


def test_video_to_clips() -> None:
    video = np.zeros((37, 4, 6, 3), dtype=np.uint8)
    assert video_to_clips(video, 16).shape == (2, 16, 4, 6, 3)
    with pytest.raises(ValueError, match="fewer than clip_len"):
        video_to_clips(video[:15], 16)
    with pytest.raises(ValueError):
        video_to_clips(video.astype(np.float32), 16)


# --- the I3D network --------------------------------------------------------------------------


def test_missing_explicit_path_is_explained(tmp_path: Path) -> None:
    missing = tmp_path / "nope" / "i3d_torchscript.pt"
    with pytest.raises(FVDUnavailableError) as info:
        load_i3d(missing)
    message = str(info.value)
    assert str(missing) in message
    assert "--fvd-weights" in message and "fvd/i3d_torchscript.pt" in message
    video = np.zeros((32, 8, 8, 3), dtype=np.uint8)
    with pytest.raises(FVDUnavailableError):
        fvd(video, video, weights_path=missing)


def test_missing_from_models_dirs_is_explained(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SEMCODEC_MODELS_DIR", str(tmp_path / "env_models"))
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    try:
        resolve_model("i3d_kinetics400", tmp_path / "models")
        pytest.skip("an I3D network is installed beside the repository")
    except ModelNotFoundError:
        pass
    with pytest.raises(FVDUnavailableError) as info:
        load_i3d(models_dir=tmp_path / "models")
    message = str(info.value)
    assert str(tmp_path / "models") in message and str(tmp_path / "env_models") in message
    assert "--fvd-weights" in message and "fvd/i3d_torchscript.pt" in message


def test_unloadable_file_raises(tmp_path: Path) -> None:
    bad = tmp_path / "i3d_torchscript.pt"
    bad.write_bytes(b"not a torchscript archive")
    with pytest.raises(FVDUnavailableError, match="not a loadable"):
        load_i3d(bad)


class _FakeI3D(torch.nn.Module):
    """Stands in for I3D: per-channel mean and std of the clip as 6 features."""

    def forward(
        self,
        x: torch.Tensor,
        rescale: bool = True,
        resize: bool = True,
        return_features: bool = False,
    ) -> torch.Tensor:
        assert not rescale and not resize and return_features
        assert x.shape[1] == 3 and x.shape[3] == 224 and x.shape[4] == 224
        assert float(x.min()) >= -1.0 and float(x.max()) <= 1.0
        return torch.cat([x.mean(dim=(2, 3, 4)), x.std(dim=(2, 3, 4))], dim=1)


@pytest.mark.filterwarnings("ignore:`torch.jit.script` is deprecated:FutureWarning")
def test_fvd_pipeline_with_a_stand_in_network(tmp_path: Path, monkeypatch) -> None:
    path = tmp_path / "fvd" / "i3d_torchscript.pt"
    path.parent.mkdir()
    torch.jit.script(_FakeI3D()).save(str(path))
    with pytest.raises(FVDUnavailableError, match="SEMCODEC_SHA256_I3D_KINETICS400"):
        fvd(np.zeros((4, 8, 8, 3), np.uint8), np.zeros((4, 8, 8, 3), np.uint8),
            models_dir=tmp_path, clip_len=4)  # fmt: skip
    monkeypatch.setenv("SEMCODEC_SHA256_I3D_KINETICS400", file_sha256(path))
    rng = np.random.default_rng(4)
    reference = rng.integers(0, 256, size=(16, 20, 24, 3), dtype=np.uint8)
    distorted = np.clip(reference.astype(np.int16) // 2 + 40, 0, 255).astype(np.uint8)
    assert fvd(reference, reference, weights_path=path, clip_len=4) == pytest.approx(0, abs=1e-6)
    assert fvd(reference, distorted, models_dir=tmp_path, clip_len=4) > 0.01
    with pytest.raises(ValueError, match="need|needs"):
        fvd(reference[:7], reference[:7], weights_path=path, clip_len=4)
