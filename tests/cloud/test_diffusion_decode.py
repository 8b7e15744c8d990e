"""The ``diffusion`` reconstructor on a level-1 stream: windows regenerated around people,
everything else ``warp``'s, deterministic given the seed; and its command-line options."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch

from semcodec.cloud.cli import main as cloud_main
from semcodec.codec.reconstruct import create_reconstructor
from semcodec.codec.reconstruct.denoiser import ConditionalDenoiser, DenoiserConfig
from semcodec.codec.reconstruct.diffusion import save_denoiser
from semcodec.codec.reconstruct.windows import person_windows

SIZE = (96, 64)


@pytest.fixture(scope="module")
def weights(tmp_path_factory):
    torch.manual_seed(0)
    model = ConditionalDenoiser(DenoiserConfig(canvas=(16, 8), channels=(8, 8), norm_groups=4))
    return save_denoiser(model, tmp_path_factory.mktemp("w") / "tiny.pt", {"test": True})


@pytest.fixture(scope="module")
def stream(level1_stream):
    return level1_stream


def test_people_windows_are_regenerated_and_the_rest_is_warps(decode_with, stream, weights):
    _, decoded, warp = decode_with(stream, "warp")
    rec, _, frames = decode_with(stream, "diffusion", weights=weights, steps=2, seed=3)
    assert frames.shape == warp.shape and frames.dtype == np.uint8
    for k, unit in enumerate(decoded):
        outside = np.ones(SIZE[::-1], bool)
        for x1, y1, x2, y2 in person_windows(unit.scaffold.tracks.boxes, (16, 8)):
            outside[max(0, int(y1)) : int(np.ceil(y2)), max(0, int(x1)) : int(np.ceil(x2))] = False
        np.testing.assert_array_equal(frames[k][outside], warp[k][outside])
        assert not np.array_equal(frames[k][~outside], warp[k][~outside])
    windows = sum(len(d.scaffold.tracks.boxes) for d in decoded)
    assert rec.flops_per_frame() == round(windows * 2 * rec.flops_per_window_step() / len(decoded))
    assert rec.flops_per_window_step() > 0
    info = rec.describe()
    assert (info["name"], info["steps"], info["seed"], info["weights"]) == (
        "diffusion", 2, 3, "tiny.pt")


def test_same_seed_same_frames_other_seed_other_frames(decode_with, stream, weights):
    one = decode_with(stream, "diffusion", weights=weights, seed=3)[2]
    again = decode_with(stream, "diffusion", weights=weights, seed=3)[2]
    other = decode_with(stream, "diffusion", weights=weights, seed=4)[2]
    np.testing.assert_array_equal(one, again)
    assert not np.array_equal(one, other)


def test_bad_steps_or_weights_are_refused(weights, tmp_path):
    from semcodec.codec.reconstruct import UnknownReconstructorError

    with pytest.raises(UnknownReconstructorError, match="steps must be 1..64"):
        create_reconstructor("diffusion", weights=weights, steps=0)
    with pytest.raises(UnknownReconstructorError, match="cannot load denoiser weights"):
        create_reconstructor("diffusion", weights=tmp_path / "none.pt")


def test_cli_records_the_decoder_in_stream_json(stream, weights, tmp_path, capsys):
    semc = tmp_path / "s.semc"
    semc.write_bytes(stream)
    out = tmp_path / "out"
    assert cloud_main(["decode", str(semc), "-o", str(out), "--no-overview", "--decoder",
                       "diffusion", "--steps", "4", "--seed", "7", "--weights",
                       str(weights)]) == 0  # fmt: skip
    decoder = json.loads((out / "stream.json").read_text())["decoder"]
    assert decoder["name"] == "diffusion" and (decoder["steps"], decoder["seed"]) == (4, 7)
    assert len(decoder["weights_sha256"]) == 64
    assert cloud_main(["decode", str(semc), "-o", str(tmp_path / "w"), "--no-overview",
                       "--decoder", "warp"]) == 0  # fmt: skip
    assert json.loads((tmp_path / "w" / "stream.json").read_text())["decoder"] == \
        {"name": "warp", "spec": "warp"}
    assert cloud_main(["decode", str(semc), "-o", str(tmp_path / "x"), "--steps", "4"]) == 2
    assert "only for --decoder diffusion" in capsys.readouterr().err
    assert not (tmp_path / "x").exists()
