"""``cloud-decoder decode --person-matte`` and ``--refiner``: the cloud's matte and the learned
refiner reach a user of the command line, and are refused where they cannot apply."""

from __future__ import annotations

import json

import pytest

from semcodec.cloud.cli import main as cloud_main


def _skip_without(model: str) -> None:
    from semcodec.codec.core.models import ModelNotFoundError, resolve_model

    try:
        resolve_model(model)
    except ModelNotFoundError as exc:
        pytest.skip(f"models are not beside the repository: {exc}")


def test_the_refiner_is_refused_off_animate_and_without_pose(level1_stream, tmp_path, capsys):
    semc = tmp_path / "s.semc"
    semc.write_bytes(level1_stream)
    assert cloud_main(["decode", str(semc), "-o", str(tmp_path / "a"), "--refiner", "w8"]) == 2
    assert "--refiner: only for --decoder animate" in capsys.readouterr().err
    assert cloud_main(["decode", str(semc), "-o", str(tmp_path / "b"), "--decoder", "animate",
                       "--refiner", "w8"]) == 2  # fmt: skip
    assert "carries no pose" in capsys.readouterr().err
    assert cloud_main(["decode", str(semc), "-o", str(tmp_path / "c"), "--decoder",
                       "diffusion", "--person-matte", "selfie_segmentation"]) == 2  # fmt: skip
    assert "--person-matte: only for --decoder" in capsys.readouterr().err
    assert not any((tmp_path / name).exists() for name in "abc")  # nothing written


def test_the_person_matte_is_used_and_recorded(level1_stream, tmp_path):
    _skip_without("selfie_segmentation")
    semc, out = tmp_path / "s.semc", tmp_path / "out"
    semc.write_bytes(level1_stream)
    assert cloud_main(["decode", str(semc), "-o", str(out), "--no-overview", "--decoder",
                       "warp", "--person-matte", "selfie_segmentation"]) == 0  # fmt: skip
    decoder = json.loads((out / "stream.json").read_text())["decoder"]
    assert (decoder["name"], decoder["person_matte"]) == ("warp", "selfie_segmentation")
    assert decoder["spec"] == "warp,person_matte=selfie_segmentation"


@pytest.mark.parametrize("extra, words", [
    (["--mode", "detect", "--pose-every", "2"], "--pose-every: scaffold-mode options"),
    (["--level", "0", "--pose-every", "2"], "level 0 sends no tracked boxes"),
    (["--pose-every", "65"], "at most 64 frames between poses"),
])  # fmt: skip
def test_the_edge_refuses_a_pose_that_cannot_apply(extra, words, sample_dir, tmp_path, capsys):
    from semcodec.edge.cli import main as edge_main

    out = tmp_path / "x.semc"
    assert edge_main(["encode", str(sample_dir), "-o", str(out), *extra]) == 2
    assert words in capsys.readouterr().err
    assert not out.exists()


def test_a_pose_stream_from_the_edge_decodes_with_the_refiner(sample_dir, tmp_path):
    _skip_without("pose_landmark_lite")
    from semcodec.codec.bitstream import read_stream
    from semcodec.edge.cli import main as edge_main

    semc, out = tmp_path / "pose.semc", tmp_path / "out"
    assert edge_main(["encode", str(sample_dir), "-o", str(semc), "--frames", "4", "-q",
                      "--pose-every", "2"]) == 0  # fmt: skip
    header, _ = read_stream(semc)
    assert header.settings["pose_every"] == "2"
    assert cloud_main(["decode", str(semc), "-o", str(out), "--no-overview", "--decoder",
                       "animate", "--refiner", "w8",
                       "--person-matte", "selfie_segmentation"]) == 0  # fmt: skip
    decoder = json.loads((out / "stream.json").read_text())["decoder"]
    assert (decoder["name"], decoder["refiner"], decoder["person_matte"]) == (
        "animate", "w8", "selfie_segmentation")
    assert decoder["refiner_sha256"]
    assert len(list((out / "frames").glob("*.png"))) == 4
