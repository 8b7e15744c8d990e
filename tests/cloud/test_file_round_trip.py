"""edge-agent encode -> .semc -> cloud-decoder decode, through main([...])."""

from __future__ import annotations

import json

import numpy as np
import pytest

from semcodec.cloud.cli import main as cloud_main
from semcodec.edge.cli import main as edge_main


@pytest.fixture(scope="module")
def semc_file(tmp_path_factory, sample_dir):
    from semcodec.codec.core.models import ModelNotFoundError, resolve_model

    try:
        resolve_model("selfie_segmentation")
    except ModelNotFoundError as exc:
        pytest.skip(f"models are not beside the repository: {exc}")
    path = tmp_path_factory.mktemp("semc") / "sample.semc"
    # 5 frames at the default 0.004 BPP hold about 280 bytes: room for neither a plate nor
    # references, so this clip gets a larger target
    assert edge_main(["encode", str(sample_dir), "-o", str(path), "--level", "1",
                      "--frames", "5", "--target-bpp", "0.2"]) == 0  # fmt: skip
    return path


@pytest.mark.shared
def test_encode_then_decode_writes_frames_scaffolds_and_overview(semc_file, tmp_path, capsys):
    assert semc_file.stat().st_size > 0
    out = tmp_path / "decoded"
    assert cloud_main(["decode", str(semc_file), "-o", str(out)]) == 0
    frames = sorted((out / "frames").glob("*.png"))
    assert [f.name for f in frames] == [f"{i:06d}.png" for i in range(1, 6)]
    assert (out / "overview.mp4").stat().st_size > 0
    info = json.loads((out / "stream.json").read_text())
    assert (info["width"], info["height"], info["level"]) == (384, 288, 1)
    assert info["settings"]["target_bpp"] == "0.2"
    assert 8 * semc_file.stat().st_size / (384 * 288 * 5) < 0.2 * 1.5
    assert info["frames"][0]["keyframe"] and not info["frames"][1]["keyframe"]
    scaffolds = np.load(out / "scaffolds.npz")
    boxes, ids = scaffolds["boxes_000001"], scaffolds["box_ids_000001"]
    assert boxes.shape == (len(ids), 4) and len(ids) > 0  # the sample has people
    assert info["frames"][0]["people"] == ids.tolist()
    refs = [k for k in scaffolds.files if k.startswith("appearance_000001_")]
    assert sorted(int(k.rsplit("_", 1)[1]) for k in refs) == sorted(ids.tolist())
    assert all(scaffolds[k].ndim == 3 and scaffolds[k].shape[2] == 3 for k in refs)


@pytest.mark.shared
def test_truncated_or_corrupt_files_fail_cleanly(semc_file, tmp_path, capsys):
    data = semc_file.read_bytes()
    cut = tmp_path / "cut.semc"
    cut.write_bytes(data[: len(data) // 2])
    assert cloud_main(["decode", str(cut), "-o", str(tmp_path / "a")]) == 2
    assert "error" in capsys.readouterr().err
    flipped = bytearray(data)
    flipped[len(data) // 3] ^= 0x10
    bad = tmp_path / "bad.semc"
    bad.write_bytes(bytes(flipped))
    assert cloud_main(["decode", str(bad), "-o", str(tmp_path / "b")]) == 2
    assert "error" in capsys.readouterr().err


def test_missing_input_and_rejected_output(tmp_path, capsys, sample_dir):
    assert cloud_main(["decode", str(tmp_path / "nope.semc"), "-o", str(tmp_path)]) == 2
    assert "nope.semc" in capsys.readouterr().err
    assert edge_main(["encode", str(tmp_path / "nothing"), "-o", str(tmp_path / "x.semc")]) == 2
    assert not (tmp_path / "x.semc").exists()


@pytest.mark.shared
def test_trained_flow_prior_is_needed_to_decode(tmp_path, sample_frames, sample_dir, capsys):
    import av

    from semcodec.codec.core.models import ModelNotFoundError, resolve_model
    from semcodec.evaluation.cli import main as bench_main

    try:
        resolve_model("selfie_segmentation")
    except ModelNotFoundError as exc:
        pytest.skip(f"models are not beside the repository: {exc}")
    video = tmp_path / "train.mkv"
    with av.open(str(video), "w") as container:
        stream = container.add_stream("ffv1", rate=7)
        stream.width, stream.height, stream.pix_fmt = 384, 288, "yuv420p"
        for frame in sample_frames[:8]:
            for packet in stream.encode(av.VideoFrame.from_ndarray(frame, format="rgb24")):
                container.mux(packet)
        for packet in stream.encode(None):
            container.mux(packet)
    prior = tmp_path / "prior.json"
    assert bench_main(["train-flow-prior", "--data", str(video), "--last", "8", "--step", "0.5",
                       "--scale", "0.125", "-o", str(prior)]) == 0  # fmt: skip
    semc = tmp_path / "x.semc"
    assert edge_main(["encode", str(sample_dir), "-o", str(semc), "--level", "2", "--frames",
                      "3", "--flow-prior", str(prior)]) == 0  # fmt: skip
    capsys.readouterr()
    assert cloud_main(["decode", str(semc), "-o", str(tmp_path / "a")]) == 2
    assert "flow prior" in capsys.readouterr().err
    assert cloud_main(["decode", str(semc), "-o", str(tmp_path / "b"),
                       "--flow-prior", str(prior), "--no-overview"]) == 0  # fmt: skip
    assert len(list((tmp_path / "b" / "frames").glob("*.png"))) == 3


@pytest.fixture(scope="module")
def slim_plates():
    """The files of ``esrgan-slim-plates`` (fetched on first use; the network's topology and
    weights come from an npm package): the only reason its tests skip is that they cannot be
    had. A failing ``--sr`` decode then fails its test."""
    from semcodec.codec.core.models import ModelNotFoundError, resolve_model
    from semcodec.codec.reconstruct.superres import NETWORKS

    spec = NETWORKS["esrgan-slim-plates"]
    try:
        for name in (spec.model, spec.weights, spec.tuned):
            resolve_model(name)
    except ModelNotFoundError as exc:  # e.g. no npm: a wrong checksum fails
        pytest.skip(f"esrgan-slim-plates cannot be had here: {exc}")


def test_the_plate_super_resolution_is_chosen_by_name(semc_file, tmp_path, capsys,
                                                      sample_frames, slim_plates):  # fmt: skip
    """--sr brings a plate sent small to the frame size with a network (named in
    stream.json); an unknown name is refused before anything is written."""
    import cv2

    from semcodec.codec.bitstream import write_stream
    from semcodec.codec.scaffold.codec import encode_frames
    from semcodec.codec.scaffold.levels import level_config

    config = level_config(1, plate_scales="0.5", target_bpp=0.2)  # the plate at half size
    header, units, _ = encode_frames(iter(sample_frames[:4]), config, 7.0, (384, 288), 4)
    semc_file = tmp_path / "half.semc"
    write_stream(semc_file, header, units)
    assert cloud_main(["decode", str(semc_file), "-o", str(tmp_path / "bad"), "--sr",
                       "magic"]) == 2  # fmt: skip
    assert "--sr magic" in capsys.readouterr().err and not (tmp_path / "bad").exists()
    code = cloud_main(["decode", str(semc_file), "-o", str(tmp_path / "sr"), "--sr",
                       "esrgan-slim-plates", "--no-overview"])  # fmt: skip
    assert code == 0, capsys.readouterr().err
    meta = json.loads((tmp_path / "sr" / "stream.json").read_text())
    assert meta["decoder"]["sr"] == "esrgan-slim-plates"
    assert cloud_main(["decode", str(semc_file), "-o", str(tmp_path / "bi"),
                       "--no-overview"]) == 0  # fmt: skip
    sr, bi = (cv2.imread(str(tmp_path / d / "frames" / "000001.png")) for d in ("sr", "bi"))
    assert sr.shape == bi.shape
    assert np.abs(sr.astype(int) - bi).mean() > 0.5  # the plate was restored, not resized


def test_sr_says_so_when_no_plate_was_sent_small(semc_file, tmp_path, capsys, slim_plates):
    """The module's stream sends its plate at full size: --sr has nothing to act on."""
    code = cloud_main(["decode", str(semc_file), "-o", str(tmp_path / "sr"), "--sr",
                       "esrgan-slim-plates", "--no-overview"])  # fmt: skip
    assert code == 0, capsys.readouterr().err
    assert "nothing was upscaled" in capsys.readouterr().err
