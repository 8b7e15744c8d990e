"""``semcodec-bench train-decoder``: config checks, a short run, and resume."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
import torch

from semcodec.codec.reconstruct.denoiser import DenoiserConfig
from semcodec.codec.reconstruct.diffusion import load_denoiser
from semcodec.evaluation.cli import main as bench_main
from semcodec.evaluation.training.decoder import (
    EXAMPLE_KEYS,
    TrainConfig,
    TrainConfigError,
    learning_rate,
    make_batch,
    train,
)

TINY = DenoiserConfig(canvas=(16, 8), channels=(8, 8), norm_groups=4)
CONFIG = TrainConfig(denoiser=TINY, steps=6, batch_size=4, checkpoint_every=2)


def _examples(n: int = 10) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(0)
    crops = lambda: rng.integers(0, 256, (n, 16, 8, 3), dtype=np.uint8)  # noqa: E731
    out = {"target": crops(), "warp": crops(), "prev_target": crops(), "prev_warp": crops(),
           "mask": (rng.random((n, 16, 8)) < 0.5).astype(np.uint8),
           "has_prev": np.arange(n) > 0, "frame": np.arange(1, n + 1, dtype=np.int32)}  # fmt: skip
    assert set(out) == set(EXAMPLE_KEYS)
    return out


def test_batches_hold_the_scaled_residual_and_the_conditioning():
    examples = _examples()
    residual, cond = make_batch(examples, np.array([1, 2]), CONFIG, np.random.default_rng(0))
    assert residual.shape == (2, 3, 16, 8) and cond.shape == (2, 8, 16, 8)
    expect = (examples["target"][[1, 2]].astype(np.float32) - examples["warp"][[1, 2]]) / 127.5 * 2
    flipped = expect[:, :, ::-1]
    for k in range(2):  # each example is mirrored or not, as a whole
        got = residual[k].permute(1, 2, 0).numpy()
        assert np.allclose(got, expect[k], atol=1e-5) or np.allclose(got, flipped[k], atol=1e-5)


def test_learning_rate_warms_up_then_decays_to_a_tenth():
    config = dataclasses.replace(CONFIG, steps=100, learning_rate=1.0)
    assert learning_rate(0, config) == pytest.approx(0.2)
    assert learning_rate(5, config) == pytest.approx(1.0)
    assert learning_rate(100, config) == pytest.approx(0.1)


def test_a_resumed_run_ends_where_an_uninterrupted_one_does(tmp_path):
    torch.set_num_threads(1)
    straight = train(CONFIG, tmp_path / "a", examples=_examples(), show_progress=False)
    stopped = train(CONFIG, tmp_path / "b", examples=_examples(), show_progress=False,
                    stop_at=3)  # fmt: skip
    assert stopped.name == "checkpoint.pt" and not (tmp_path / "b" / "denoiser.pt").exists()
    resumed = train(CONFIG, tmp_path / "b", resume=True, examples=_examples(),
                    show_progress=False)  # fmt: skip
    a, b = load_denoiser(straight), load_denoiser(resumed)
    for (name, x), (_, y) in zip(a.state_dict().items(), b.state_dict().items(), strict=True):
        torch.testing.assert_close(x, y, msg=name)
    lines = (tmp_path / "b" / "loss.csv").read_text().splitlines()
    assert lines[0] == "step,loss,seconds" and len(lines) == 7
    assert (tmp_path / "b" / "loss.png").stat().st_size > 0
    assert load_denoiser(resumed).metadata["steps"] == 6


def test_resume_refuses_a_checkpoint_of_another_config(tmp_path):
    train(CONFIG, tmp_path, examples=_examples(), show_progress=False)
    other = dataclasses.replace(CONFIG, learning_rate=0.5)
    with pytest.raises(TrainConfigError, match="another config"):
        train(other, tmp_path, resume=True, examples=_examples(), show_progress=False)


def test_bad_configs_exit_2_with_the_reason(tmp_path, capsys):
    bad = tmp_path / "bad.toml"
    bad.write_text("stepz = 3\n")
    assert bench_main(["train-decoder", "--config", str(bad), "--out", str(tmp_path / "o")]) == 2
    assert "unknown training config keys: stepz" in capsys.readouterr().err
    bad.write_text("steps = [\n")
    assert bench_main(["train-decoder", "--config", str(bad), "--out", str(tmp_path / "o")]) == 2
    assert "bad.toml" in capsys.readouterr().err
    with pytest.raises(TrainConfigError, match="needs data"):
        TrainConfig.from_dict({"data": []})
    parsed = TrainConfig.from_dict({"data": [{"path": "X", "start": 2, "frames": 3}],
                                    "denoiser": {"canvas": [16, 8]}})  # fmt: skip
    assert parsed.data[0].start == 2 and parsed.denoiser.canvas == (16, 8)


def test_the_documented_config_is_the_default_one():
    from pathlib import Path

    docs = Path(__file__).resolve().parents[2] / "docs" / "train-decoder.toml"
    assert TrainConfig.from_toml(docs) == TrainConfig()


@pytest.fixture(scope="module")
def stlpips_weights():
    from semcodec.codec.core.models import ModelError, resolve_model

    try:
        return resolve_model("stlpips_alex")
    except ModelError as exc:
        pytest.skip(f"ST-LPIPS weights not available: {exc}")


def _window_examples(n: int = 6) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(3)
    crops = lambda: rng.integers(0, 256, (n, 32, 24, 3), dtype=np.uint8)  # noqa: E731
    mask = np.zeros((n, 32, 24), np.uint8)
    mask[:, 4:28, 6:18] = 1
    return {"target": crops(), "warp": crops(), "prev_target": crops(), "prev_warp": crops(),
            "mask": mask, "has_prev": np.ones(n, bool),
            "frame": np.arange(1, n + 1, dtype=np.int32)}  # fmt: skip


def test_the_perceptual_term_adds_the_st_lpips_of_the_one_jump_estimate(stlpips_weights):
    from semcodec.evaluation.metrics.perceptual import load_stlpips
    from semcodec.evaluation.training.decoder import DenoiserLoss

    config = dataclasses.replace(CONFIG, perceptual_weight=2.0)
    residual, cond = make_batch(_window_examples(), np.arange(4), config,
                                np.random.default_rng(0))  # fmt: skip
    noise = torch.randn(residual.shape, generator=torch.Generator().manual_seed(0))
    sigma = torch.full((4,), 0.5)
    noisy, velocity = 0.5 * residual + 0.5 * noise, noise - residual
    exact = DenoiserLoss(config)(velocity, noisy, sigma, velocity, cond)
    assert float(exact) == pytest.approx(0.0, abs=1e-6)  # the right velocity costs nothing
    wrong = torch.zeros_like(velocity)  # estimate: warp + noisy / 2
    got = float(DenoiserLoss(config)(wrong, noisy, sigma, velocity, cond))
    mse = float(torch.nn.functional.mse_loss(wrong, velocity))
    estimate = (cond[:, :3] + noisy / 2).clamp(-1, 1)
    target = (cond[:, :3] + residual / 2).clamp(-1, 1)
    lpips = float(load_stlpips()(estimate, target).mean())
    assert lpips > 0.01 and got == pytest.approx(mse + 2.0 * lpips, rel=1e-4)


class _ToZero(torch.nn.Module):
    """A denoiser whose flow ends at a zero residual: its windows are ``warp``'s."""

    def __init__(self):
        super().__init__()
        self.config = DenoiserConfig(canvas=(32, 24), residual_scale=1.0)

    def forward(self, noisy, sigma, cond):
        return noisy / sigma.view(-1, 1, 1, 1)


def test_window_scores_of_a_denoiser_that_changes_nothing_equal_warps(stlpips_weights):
    from semcodec.evaluation.training.decoder import score_windows

    examples = _window_examples()
    scores = score_windows(_ToZero(), examples, (1, 2), windows=4)
    assert scores["windows"]["count"] == 4
    assert scores["S1"] == scores["warp"] == scores["S2"]
    # the box error is the mean over box pixels of the chosen windows (0..255 levels)
    all_scores = score_windows(_ToZero(), examples, (1,))
    diff = examples["warp"].astype(np.float64) - examples["target"]
    expect = (diff[:, 4:28, 6:18] ** 2).mean()
    assert all_scores["warp"]["box_mse"] == pytest.approx(expect, abs=0.1)


def test_score_decoder_refuses_missing_weights_with_status_2(tmp_path, capsys):
    status = bench_main(["score-decoder", "--weights", str(tmp_path / "none.pt"), "--data",
                         "PETS09-S2L1", "--out", str(tmp_path / "s.json")])  # fmt: skip
    assert status == 2 and "cannot load denoiser weights" in capsys.readouterr().err
    assert not (tmp_path / "s.json").exists()
