"""Detect mode end to end: ``edge-agent encode --mode detect`` -> ``.semc`` ->
``cloud-decoder decode`` -> detections.txt/json, equal to decoding in process; bad input."""

from __future__ import annotations

import dataclasses
import json

import numpy as np
import pytest
import torch

from semcodec.codec.bitstream import read_stream
from semcodec.codec.entropy.features import count_symbols, tables_from_counts
from semcodec.codec.task.bottleneck import BottleneckConfig, FeatureBottleneck, TaskBottleneck
from semcodec.codec.task.split import SplitConfig


@pytest.fixture(scope="module")
def bottleneck_file(tmp_path_factory):
    """An untrained bottleneck whose tables were counted on real latents of the sample."""
    from semcodec.codec.core.models import ModelError
    from semcodec.codec.core.sources import open_source, sample_path
    from semcodec.codec.task.split import SplitDetector, load_split_model

    torch.manual_seed(0)
    model = FeatureBottleneck(BottleneckConfig(latent=4, hidden=8)).eval()
    try:
        detector = SplitDetector(load_split_model())
    except ModelError as exc:
        pytest.skip(f"detector model not available: {exc}")
    frames = open_source(sample_path()).read(start=1, count=3)
    q = [model.quantize(detector.edge_features(f)) for f in frames]
    counts = count_symbols([[x[w] for x in q] for w in range(4)], groups=4)
    bottleneck = TaskBottleneck(model, tables_from_counts(counts), SplitConfig(), counts,
                                {"beta": 7.0})  # fmt: skip
    return bottleneck.save(tmp_path_factory.mktemp("bottleneck") / "b.pt")


def test_detect_mode_file_round_trip(bottleneck_file, sample_dir, tmp_path) -> None:
    from semcodec.cloud.cli import main as cloud_main
    from semcodec.codec.task.stream import decode_detect, open_detect_decoder
    from semcodec.edge.cli import main as edge_main

    semc, out = tmp_path / "d.semc", tmp_path / "out"
    assert edge_main(["encode", str(sample_dir), "-o", str(semc), "--mode", "detect",
                      "--bottleneck", str(bottleneck_file), "--frames", "4", "-q",
                      "--intra-period", "3"]) == 0  # fmt: skip
    header, units = read_stream(semc)
    units = list(units)
    assert header.settings["mode"] == "detect" and header.settings["windows"] == "4"
    assert [u.kind.name for u in units] == ["KEYFRAME", "FRAME", "FRAME", "KEYFRAME", "END"]
    assert cloud_main(["decode", str(semc), "-o", str(out), "--bottleneck",
                       str(bottleneck_file), "-q"]) == 0  # fmt: skip
    expected = list(decode_detect(units, open_detect_decoder(header, bottleneck_file)))
    lines = (out / "detections.txt").read_text().splitlines()
    assert len(lines) == sum(len(d) for _, d in expected)
    for line in lines:
        fields = line.split(",")
        assert len(fields) == 10 and 1 <= int(fields[0]) <= 4 and fields[1] == "-1"
    data = json.loads((out / "detections.json").read_text())
    assert [f["frame"] for f in data["frames"]] == [1, 2, 3, 4]
    for got, (_, want) in zip(data["frames"], expected, strict=True):
        np.testing.assert_allclose(np.array(got["boxes"]).reshape(-1, 4), want.boxes, atol=0.01)
    # the outputs are not overwritten without --force
    assert cloud_main(["decode", str(semc), "-o", str(out), "--bottleneck",
                       str(bottleneck_file), "-q"]) == 2  # fmt: skip


def test_detect_mode_bad_input_exits_2(bottleneck_file, sample_dir, tmp_path) -> None:
    from semcodec.cloud.cli import main as cloud_main
    from semcodec.edge.cli import main as edge_main

    semc = tmp_path / "d.semc"
    bad = tmp_path / "bad.pt"
    bad.write_bytes(b"not a bottleneck")
    assert edge_main(["encode", str(sample_dir), "-o", str(semc), "--mode", "detect",
                      "--bottleneck", str(bad), "--frames", "2", "-q"]) == 2  # fmt: skip
    assert not semc.exists()
    assert edge_main(["encode", str(sample_dir), "-o", str(semc), "--beta", "1",
                      "--frames", "2", "-q"]) == 2  # --beta without --mode detect
    assert edge_main(["encode", str(sample_dir), "-o", str(semc), "--mode", "detect",
                      "--bottleneck", str(bottleneck_file), "--frames", "2", "-q"]) == 0
    # the cloud lacks the edge's bottleneck: a clear error naming what is missing
    assert cloud_main(["decode", str(semc), "-o", str(tmp_path / "o1"), "--bottleneck",
                       str(bad), "-q"]) == 2  # fmt: skip
    other = TaskBottleneck(FeatureBottleneck(BottleneckConfig(latent=4, hidden=8)),
                           *_tables(), SplitConfig(), *_counts())  # fmt: skip
    other_file = other.save(tmp_path / "other.pt")
    assert cloud_main(["decode", str(semc), "-o", str(tmp_path / "o2"), "--bottleneck",
                       str(other_file), "-q"]) == 2  # fmt: skip
    assert not (tmp_path / "o2" / "detections.txt").exists()
    # a corrupt payload (CRC fixed up by rewriting the unit) fails with exit 2, no outputs
    from semcodec.codec.bitstream import SubStream, SubStreamType, Unit, write_stream

    header, units = read_stream(semc)
    units = list(units)
    units[1] = Unit(units[1].kind, 1, (SubStream(SubStreamType.FEATURES, b"\x01\xff\xff"),))
    broken = tmp_path / "broken.semc"
    write_stream(broken, header, units)
    assert cloud_main(["decode", str(broken), "-o", str(tmp_path / "o3"), "--bottleneck",
                       str(bottleneck_file), "-q"]) == 2  # fmt: skip
    assert not (tmp_path / "o3" / "detections.txt").exists()


def _counts():
    rng = np.random.default_rng(5)
    counts = count_symbols([[rng.integers(-2, 3, (4, 19, 19)) for _ in range(2)]], groups=4)
    return (counts, {})


def _tables():
    return (tables_from_counts(_counts()[0]),)


def test_unknown_beta_names_the_shipped_ones() -> None:
    from semcodec.codec.task.stream import TaskStreamError, bottleneck_path

    with pytest.raises(TaskStreamError, match="no shipped bottleneck for beta 12345"):
        bottleneck_path(12345.0)


def test_shipped_bottlenecks_match_their_checksums_and_load() -> None:
    from semcodec.codec.core.packages import file_sha256
    from semcodec.codec.task.bottleneck import load_bottleneck
    from semcodec.codec.task.stream import (
        DEFAULT_BETA,
        SHIPPED_DIR,
        bottleneck_path,
        shipped_bottlenecks,
    )

    shipped = shipped_bottlenecks()
    assert DEFAULT_BETA in shipped and len(shipped) >= 4
    sums = dict(reversed(line.split()) for line in
                (SHIPPED_DIR / "SHA256SUMS").read_text().splitlines())  # fmt: skip
    for beta, path in shipped.items():
        assert file_sha256(path) == sums[path.name]
        loaded = load_bottleneck(path)
        assert loaded.metadata["beta"] == beta and loaded.split == SplitConfig()
        assert path.stat().st_size < 10_000_000
    assert bottleneck_path() == shipped[DEFAULT_BETA]


def test_a_tampered_shipped_bottleneck_is_refused(tmp_path, monkeypatch) -> None:
    import shutil

    from semcodec.codec.task import stream

    folder = tmp_path / "task"
    shutil.copytree(stream.SHIPPED_DIR, folder)
    name = stream.shipped_bottlenecks()[stream.DEFAULT_BETA].name
    with open(folder / name, "r+b") as fh:
        fh.seek(-1, 2)
        last = fh.read(1)
        fh.seek(-1, 2)
        fh.write(bytes([last[0] ^ 1]))
    monkeypatch.setattr(stream, "SHIPPED_DIR", folder)
    with pytest.raises(stream.TaskStreamError, match="wrong sha256"):
        stream.bottleneck_path()


def test_detect_mode_with_the_shipped_bottleneck_finds_people(sample_dir, tmp_path) -> None:
    """The default bottleneck, no files named: the cloud finds it by the header's sha256 and
    detects the sample's pedestrians."""
    from semcodec.cloud.cli import main as cloud_main
    from semcodec.codec.core.models import ModelError
    from semcodec.codec.task.split import load_split_model
    from semcodec.edge.cli import main as edge_main

    try:
        load_split_model()
    except ModelError as exc:
        pytest.skip(f"detector model not available: {exc}")
    semc, out = tmp_path / "d.semc", tmp_path / "out"
    assert edge_main(["encode", str(sample_dir), "-o", str(semc), "--mode", "detect",
                      "--frames", "3", "-q"]) == 0  # fmt: skip
    assert cloud_main(["decode", str(semc), "-o", str(out), "-q"]) == 0
    frames = json.loads((out / "detections.json").read_text())["frames"]
    assert [f["frame"] for f in frames] == [1, 2, 3]
    assert all(len(f["boxes"]) >= 2 for f in frames)  # the sample has 4-6 people per frame
    # a higher cloud-side threshold keeps a subset; an impossible one is refused
    assert cloud_main(["decode", str(semc), "-o", str(out), "--force", "-q",
                       "--score-threshold", "0.9"]) == 0  # fmt: skip
    strict = json.loads((out / "detections.json").read_text())["frames"]
    assert all(min(f["scores"], default=1) >= 0.9 for f in strict)
    assert sum(len(f["boxes"]) for f in strict) <= sum(len(f["boxes"]) for f in frames)
    assert cloud_main(["decode", str(semc), "-o", str(tmp_path / "o2"), "-q",
                       "--score-threshold", "2"]) == 2  # fmt: skip


def _zoomed_sample(count: int, zoom: float = 3.0) -> np.ndarray:
    """A closer camera made from the sample: people about half the frame tall."""
    from semcodec.codec.core.sources import open_source, sample_path
    from semcodec.evaluation.data.camera import CameraTransform

    frames = open_source(sample_path()).read(start=1, count=count)
    return CameraTransform(zoom=zoom, y=0.55).frames(frames)


@pytest.mark.parametrize("zoom, tiles, windows", [(1.0, 2, 4), (3.0, 1, 1)])
def test_detect_layout_follows_the_camera_and_round_trips(bottleneck_file, zoom, tiles,
                                                          windows) -> None:  # fmt: skip
    """Small people -> 2x2 windows, large -> one; the header names the layout and the cloud's
    threshold, and the cloud decodes with them."""
    from semcodec.codec.bitstream import StreamHeader
    from semcodec.codec.scaffold.detector import PersonDetector
    from semcodec.codec.task.bottleneck import load_bottleneck
    from semcodec.codec.task.split import SplitDetector, load_split_model
    from semcodec.codec.task.stream import decode_detect, encode_detect, open_detect_decoder

    bottleneck = load_bottleneck(bottleneck_file)
    frames = _zoomed_sample(4, zoom)
    h, w = frames.shape[1:3]
    header, units, stats = encode_detect(iter(frames), bottleneck,
                                         SplitDetector(load_split_model(), bottleneck.split),
                                         7.0, (w, h), 4, person_detector=PersonDetector())
    units = list(units)
    header = StreamHeader.from_bytes(header.to_bytes())
    s = header.settings
    assert (s["tiles"], s["windows"], s["full_frame"]) == (str(tiles), str(windows), "False")
    assert 0.05 <= float(s["score_threshold"]) <= 0.9
    assert s["profile_frames"] == "0-3/4" and stats.profile
    decoder = open_detect_decoder(header, bottleneck_file)
    assert decoder.detector.config.tiles == tiles
    assert decoder.detector.config.score_threshold == float(s["score_threshold"])
    assert len(list(decode_detect(units, decoder))) == 4


@pytest.mark.parametrize("entry", [("tiles", "9"), ("tiles", "x"), ("score_threshold", "2")])
def test_detect_header_with_a_bad_layout_is_refused(bottleneck_file, entry) -> None:
    from semcodec.codec.task.bottleneck import load_bottleneck
    from semcodec.codec.task.coder import UnitShape
    from semcodec.codec.task.stream import TaskStreamError, detect_header, unit_shape

    bottleneck = load_bottleneck(bottleneck_file)
    header = detect_header(bottleneck, UnitShape(4, 4, 19), 384, 288, 7.0, 4, 64)
    header = dataclasses.replace(header, settings={**header.settings, entry[0]: entry[1]})
    with pytest.raises(TaskStreamError, match="layout"):
        unit_shape(header, bottleneck)


def test_detect_mode_at_a_target_records_its_choice(bottleneck_file, sample_dir, tmp_path,
                                                    capsys) -> None:  # fmt: skip
    """``--target-kbps`` chooses the skip threshold and intra period on the start-up frames
    (here among one given bottleneck), the header says what and for which target, the
    cloud decodes it, and the file lands near the target."""
    from semcodec.cloud.cli import main as cloud_main
    from semcodec.edge.cli import main as edge_main

    semc, out = tmp_path / "r.semc", tmp_path / "out"
    assert edge_main(["encode", str(sample_dir), "-o", str(semc), "--mode", "detect",
                      "--bottleneck", str(bottleneck_file), "--frames", "14",
                      "--target-kbps", "12", "--min-agreement", "0"]) == 0  # fmt: skip
    header, _ = read_stream(semc)
    settings = header.settings
    assert settings["rate_target_bps"] == "12000" and settings["rate_status"] == "ok"
    assert settings["min_agreement"] == "0" and 0 <= float(settings["profile_agreement"]) <= 1
    assert int(settings["rate_table_frames"]) == 14
    assert "rate: 12.0 kbit/s: beta 7" in capsys.readouterr().err
    kbps = 8 * semc.stat().st_size * 7 / 14 / 1000  # the sample is 7 frames/s
    assert 0.7 * 12 <= kbps <= 1.3 * 12, kbps  # 2 s: the account is still settling
    assert cloud_main(["decode", str(semc), "-o", str(out), "--bottleneck",
                       str(bottleneck_file), "-q"]) == 0  # fmt: skip
    assert json.loads((out / "detections.json").read_text())["frames"][-1]["frame"] == 14
