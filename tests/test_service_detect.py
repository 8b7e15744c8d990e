"""Detect mode over the service (issue 14): `edge-agent stream --mode detect` to a real
`cloud-decoder serve` on 127.0.0.1; the session's detections equal `cloud-decoder decode` of
the same units, and so does what the agent gets back in the feedback; a stream whose
bottleneck the server lacks is refused before anything is written.

The bottleneck is made here (no trained one ships yet): 64 latent channels that carry the
split features times 2 (so rounding keeps them and the detector finds people), with entropy
tables counted on two frames of the embedded sample. Each frame costs about 0.3 s of CPU.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import grpc
import numpy as np
import pytest

from semcodec.cloud.cli import main as cloud_main
from semcodec.codec.bitstream import StreamHeader, read_stream
from semcodec.edge.cli import main as edge_main
from semcodec.edge.stream.client import open_request
from semcodec.protos import semcodec_v1_pb2 as pb

from .conftest import assert_same_tree, code_of, session_paths, start_server, stub_for

FRAMES = 4
DETECT_ARGS = ["--mode", "detect", "--frames", str(FRAMES), "--intra-period", "3"]


def _identity_bottleneck(scale: float = 2.0):
    """A :class:`FeatureBottleneck` whose latents are ``scale`` times the split features
    (through ReLU pairs) and whose synthesis undoes it."""
    import torch

    from semcodec.codec.task.bottleneck import BottleneckConfig, FeatureBottleneck

    model = FeatureBottleneck(BottleneckConfig(latent=64, hidden=128)).eval()
    a1, _, a2 = model.analysis
    s1, _, s2, _, s3 = model.synthesis
    with torch.no_grad():
        for conv in (a1, a2, s1, s2, s3):
            conv.weight.zero_()
            conv.bias.zero_()
        for c in range(64):
            a1.weight[c, c, 1, 1], a1.weight[64 + c, c, 1, 1] = 1.0, -1.0
            a2.weight[c, c, 1, 1], a2.weight[c, 64 + c, 1, 1] = scale, -scale
            s1.weight[c, c, 1, 1], s1.weight[64 + c, c, 1, 1] = 1 / scale, -1 / scale
            s3.weight[c, c, 0, 0], s3.weight[c, 64 + c, 0, 0] = 1.0, -1.0
        for c in range(128):
            s2.weight[c, c, 1, 1] = 1.0
    return model


@pytest.fixture(scope="module")
def bottleneck_file(tmp_path_factory) -> Path:
    """The bottleneck, alone in a folder (the server's --bottleneck-dir)."""
    from semcodec.codec.core.models import ModelError
    from semcodec.codec.core.sources import open_source, sample_path
    from semcodec.codec.entropy.features import count_symbols, tables_from_counts
    from semcodec.codec.task.bottleneck import TaskBottleneck
    from semcodec.codec.task.split import SplitConfig, SplitDetector, load_split_model

    try:
        detector = SplitDetector(load_split_model())
    except ModelError as exc:
        pytest.skip(f"detector model not available: {exc}")
    model = _identity_bottleneck()
    frames = open_source(sample_path()).read(start=1, count=2)
    q = [model.quantize(detector.edge_features(f)) for f in frames]
    counts = count_symbols([[x[w] for x in q] for w in range(4)], groups=4)
    bottleneck = TaskBottleneck(model, tables_from_counts(counts), SplitConfig(), counts,
                                {"beta": 0.0})  # fmt: skip
    return bottleneck.save(tmp_path_factory.mktemp("bottlenecks") / "identity.pt")


@pytest.fixture(scope="module")
def detect_semc(bottleneck_file, sample_dir, tmp_path_factory) -> Path:
    """The detect-mode stream as `edge-agent encode --mode detect` writes it."""
    path = tmp_path_factory.mktemp("detect") / "detect.semc"
    assert edge_main(["-q", "encode", str(sample_dir), "-o", str(path), *DETECT_ARGS,
                      "--bottleneck", str(bottleneck_file)]) == 0  # fmt: skip
    return path


@pytest.fixture(scope="module")
def detect_offline(detect_semc, bottleneck_file, tmp_path_factory) -> Path:
    """`cloud-decoder decode` of it: detections.txt and detections.json."""
    out = tmp_path_factory.mktemp("detect-offline") / "decoded"
    assert cloud_main(["-q", "decode", str(detect_semc), "-o", str(out), "--bottleneck",
                       str(bottleneck_file)]) == 0  # fmt: skip
    lines = (out / "detections.txt").read_text().splitlines()
    assert len(lines) >= FRAMES, "the test bottleneck should let the detector find people"
    return out


def test_agent_streams_detect_mode_and_gets_the_detections_back(
        bottleneck_file, detect_semc, detect_offline, sample_dir, tmp_path, capsys):  # fmt: skip
    srv = start_server(tmp_path, bottleneck_dir=bottleneck_file.parent)
    try:
        got = tmp_path / "agent" / "detections.txt"
        got.parent.mkdir()
        argv = ["stream", str(sample_dir), "--server", f"127.0.0.1:{srv.port}", *DETECT_ARGS,
                "--bottleneck", str(bottleneck_file), "--detections-out", str(got),
                "--bandwidth-kbps", "4000", "--chunk-kib", "16",
                "--spool", str(tmp_path / "spool")]  # fmt: skip
        start = time.monotonic()
        assert edge_main(argv) == 0
        elapsed = time.monotonic() - start
    finally:
        srv.stop(0)
    assert elapsed >= 8 * detect_semc.stat().st_size / 4_000_000 * 0.5  # paced
    summary = [line for line in capsys.readouterr().err.splitlines() if "units sent" in line]
    assert summary and f"units sent {FRAMES + 1}, acknowledged {FRAMES + 1}" in summary[0]
    boxes = len((detect_offline / "detections.txt").read_text().splitlines())
    assert f"detections of {FRAMES} frames received ({boxes} boxes)" in summary[0], summary
    assert "missing" not in summary[0]
    (session,) = (srv.settings.out / ".sessions" / "default").iterdir()
    log, outputs = session_paths(srv.settings.out, "default", session.name)
    assert log.read_bytes() == detect_semc.read_bytes()  # the units of `encode --mode detect`
    assert_same_tree(outputs, detect_offline)  # detections.txt and detections.json, no more
    assert got.read_bytes() == (detect_offline / "detections.txt").read_bytes()
    assert sorted(p.name for p in got.parent.iterdir()) == ["detections.txt"]  # no partial


def test_agent_streams_detect_mode_at_a_target(bottleneck_file, sample_dir, tmp_path):
    """``stream --mode detect --target-kbps``: the rate control runs at the edge as for
    ``encode`` (the same units, byte for byte), the cloud decodes them (issue 40)."""
    args = ["--mode", "detect", "--frames", str(FRAMES), "--bottleneck", str(bottleneck_file),
            "--target-kbps", "20", "--min-agreement", "0"]  # fmt: skip
    semc = tmp_path / "target.semc"
    assert edge_main(["-q", "encode", str(sample_dir), "-o", str(semc), *args]) == 0
    srv = start_server(tmp_path, bottleneck_dir=bottleneck_file.parent)
    try:
        assert edge_main(["-q", "stream", str(sample_dir), "--server", f"127.0.0.1:{srv.port}",
                          *args, "--spool", str(tmp_path / "spool")]) == 0  # fmt: skip
    finally:
        srv.stop(0)
    (session,) = (srv.settings.out / ".sessions" / "default").iterdir()
    log, outputs = session_paths(srv.settings.out, "default", session.name)
    assert log.read_bytes() == semc.read_bytes()
    assert read_stream(semc)[0].settings["rate_target_bps"] == "20000"
    lines = (outputs / "detections.txt").read_text().splitlines()
    assert {int(line.split(",")[0]) for line in lines} <= set(range(1, FRAMES + 1))


def test_a_budget_that_cannot_reach_the_floor_shows_in_the_service_metrics(
        bottleneck_file, sample_dir, tmp_path, capsys):  # fmt: skip
    """At 0.1 kbit/s no setting reaching the floor fits (issue 40): the edge says so in its
    log and in every unit's status bits, and the server counts those frames
    (``semcodec_detect_frames_total{status="over_budget"}``), logs the session's status, and
    counts the session among the unheld while it streams (0 again once it is decoded). A
    stream within its budget counts its frames as ok."""
    from semcodec.codec.task.coder import RATE_STATUSES, STATUS_MASK, STATUS_SHIFT

    srv = start_server(tmp_path, bottleneck_dir=bottleneck_file.parent)
    registry = srv.metrics.registry
    base = ["--mode", "detect", "--frames", str(FRAMES), "--bottleneck", str(bottleneck_file),
            "--min-agreement", "0", "--server", f"127.0.0.1:{srv.port}"]  # fmt: skip
    try:
        assert edge_main(["stream", str(sample_dir), *base, "--target-kbps", "0.1",
                          "--spool", str(tmp_path / "spool-low")]) == 0  # fmt: skip
        deadline = time.monotonic() + 30
        sample = 'semcodec_detect_frames_total'
        while (registry.get_sample_value(sample, {"status": "over_budget"}) or 0) < FRAMES:
            assert time.monotonic() < deadline, "the server never counted the frames"
            time.sleep(0.1)
        err = capsys.readouterr().err  # the edge's warning, then the server's log line
        assert "warning: beta 0, skip 24" in err and "cannot reach the agreement floor" in err
        assert "frame 1: the edge's rate status is over_budget" in err
        while registry.get_sample_value("semcodec_detect_streams_unheld") != 0:
            assert time.monotonic() < deadline, "the session stayed counted as unheld"
            time.sleep(0.1)
        # this bottleneck keeps the features as they are: 1.2 Mbit/s at its cheapest
        assert edge_main(["-q", "stream", str(sample_dir), *base, "--target-kbps", "5000",
                          "--spool", str(tmp_path / "spool-ok")]) == 0  # fmt: skip
        deadline = time.monotonic() + 30
        while (registry.get_sample_value(sample, {"status": "ok"}) or 0) < FRAMES:
            assert time.monotonic() < deadline, "the server never counted the ok frames"
            time.sleep(0.1)
    finally:
        srv.stop(0)
    assert registry.get_sample_value(sample, {"status": "over_budget"}) == FRAMES
    assert registry.get_sample_value("semcodec_detect_streams_unheld") == 0
    sessions = sorted((srv.settings.out / ".sessions" / "default").iterdir(),
                      key=lambda p: read_stream(session_paths(srv.settings.out, "default",
                                                              p.name)[0])[0].settings[
                          "rate_target_bps"])  # fmt: skip
    header, units = read_stream(session_paths(srv.settings.out, "default",
                                              sessions[0].name)[0])  # fmt: skip
    assert header.settings["rate_status"] == "over_budget"  # "100" sorts before "5e+06"
    flags = [u.substreams[0].payload[0] for u in units if u.substreams]
    assert [RATE_STATUSES[(f & STATUS_MASK) >> STATUS_SHIFT] for f in flags] == \
        ["over_budget"] * FRAMES


def test_agent_streams_detect_mode_with_auto(bottleneck_file, sample_dir, tmp_path, capsys):
    """``stream --mode detect --auto``: the target starts at --max-kbps (the header says
    so) and follows the link; the stream completes (issue 40)."""
    srv = start_server(tmp_path, bottleneck_dir=bottleneck_file.parent)
    try:
        assert edge_main(["stream", str(sample_dir), "--server", f"127.0.0.1:{srv.port}",
                          "--mode", "detect", "--frames", str(FRAMES), "--bottleneck",
                          str(bottleneck_file), "--auto", "--max-kbps", "30",
                          "--bandwidth-kbps", "30", "--min-agreement", "0",
                          "--spool", str(tmp_path / "spool")]) == 0  # fmt: skip
    finally:
        srv.stop(0)
    err = capsys.readouterr().err
    assert "rate: --auto from 30.0 kbit/s" in err and "rate: 30.0 kbit/s: beta 0" in err
    (session,) = (srv.settings.out / ".sessions" / "default").iterdir()
    log, outputs = session_paths(srv.settings.out, "default", session.name)
    assert read_stream(log)[0].settings["rate_target_bps"] == "30000"
    assert (outputs / "detections.json").is_file()


def test_feedback_resumes_detections_from_the_frame_the_edge_asks_for(
        bottleneck_file, detect_semc, detect_offline, tmp_path):  # fmt: skip
    """A reconnecting edge says from which frame it still needs detections (StreamStart),
    and CloseSession returns those from its detections_from on."""
    from semcodec.cloud.service.assembler import AssembledUnit
    from semcodec.cloud.service.decode import DecodeSettings
    from semcodec.cloud.service.manager import SessionManager
    from semcodec.cloud.service.messages import OpenRequest

    manager = SessionManager(tmp_path, decode=DecodeSettings(
        bottleneck_dir=bottleneck_file.parent))  # fmt: skip
    header, units = read_stream(detect_semc)
    opened = manager.open("default", OpenRequest(header=header.to_bytes(), codec="features",
                                                 mode="task"))  # fmt: skip
    receiver = manager.attach("default", opened.session_id)
    for seq, unit in enumerate(units):
        receiver.session.store(AssembledUnit(seq, unit.to_bytes(), unit, 0), receiver.generation)
    deadline = time.monotonic() + 60
    while receiver.session.decoded < FRAMES + 1 and time.monotonic() < deadline:
        time.sleep(0.05)
    first = receiver.feedback()
    assert [d.frame for d in first.detections] == list(range(1, FRAMES + 1))
    assert receiver.feedback().detections == ()  # each frame once per stream
    again = manager.attach("default", opened.session_id, detections_from=3)
    assert [d.frame for d in again.feedback().detections] == list(range(3, FRAMES + 1))
    results = manager.close("default", opened.session_id, detections_from=FRAMES)
    assert (results.state, results.complete, results.frames_decoded) == ("closed", True, FRAMES)
    assert [d.frame for d in results.detections] == [FRAMES]
    expected = json.loads((detect_offline / "detections.json").read_text())["frames"]
    for frame in first.detections:  # as detections.json rounds them (float32 values)
        got = np.array(frame.boxes, np.float32).reshape(-1, 5)
        assert np.round(got[:, :4], 2).tolist() == expected[frame.frame - 1]["boxes"]
        assert np.round(got[:, 4], 4).tolist() == expected[frame.frame - 1]["scores"]
    assert_same_tree(tmp_path / "default" / opened.session_id, detect_offline)
    record = json.loads((tmp_path / ".sessions" / "default" / opened.session_id /
                         "session.json").read_text())  # fmt: skip
    assert "detections" not in record["results"]  # never recorded
    assert manager.results("default", opened.session_id).complete


def test_a_restarted_server_finds_the_committed_detections(bottleneck_file, detect_semc,
                                                           detect_offline, tmp_path):  # fmt: skip
    """The decode committed its outputs, then the server stopped before CloseSession: the
    next server reports the session from its files (and does not decode it again)."""
    from semcodec.cloud.service.assembler import AssembledUnit
    from semcodec.cloud.service.decode import DecodeSettings
    from semcodec.cloud.service.manager import SessionManager
    from semcodec.cloud.service.messages import OpenRequest

    decode = DecodeSettings(bottleneck_dir=bottleneck_file.parent)
    manager = SessionManager(tmp_path, decode=decode)
    header, units = read_stream(detect_semc)
    sid = manager.open("default", OpenRequest(header=header.to_bytes(), codec="features",
                                              mode="task")).session_id  # fmt: skip
    receiver = manager.attach("default", sid)
    for seq, unit in enumerate(units):
        receiver.session.store(AssembledUnit(seq, unit.to_bytes(), unit, 0), receiver.generation)
    deadline = time.monotonic() + 60
    while receiver.session.decode_state is None and time.monotonic() < deadline:
        time.sleep(0.05)
    manager.shutdown()
    again = SessionManager(tmp_path, decode=decode)
    results = again.close("default", sid)
    assert (results.state, results.complete, results.frames_decoded) == ("closed", True, FRAMES)
    assert_same_tree(tmp_path / "default" / sid, detect_offline)


def test_unknown_bottleneck_is_refused_and_nothing_is_written(bottleneck_file, sample_dir,
                                                              tmp_path, capsys):  # fmt: skip
    from semcodec.codec.task.bottleneck import load_bottleneck
    from semcodec.codec.task.coder import UnitShape
    from semcodec.codec.task.stream import detect_header

    bottleneck = load_bottleneck(bottleneck_file)
    header = detect_header(bottleneck, UnitShape(4, 64, 19), 384, 288, 25.0, FRAMES, 3)
    srv = start_server(tmp_path)  # no --bottleneck-dir: the shipped bottlenecks only
    try:
        channel, stub = stub_for(f"127.0.0.1:{srv.port}")
        code, details = code_of(lambda: stub.OpenSession(open_request(header.to_bytes())))
        assert code == grpc.StatusCode.FAILED_PRECONDITION
        # a version-3 header holds the digest's first 4 bytes: the message names those
        assert "task_bottleneck" in details and bottleneck.sha256()[:8] in details
        # the mode must say what the header is
        wrong = open_request(header.to_bytes())
        wrong.codec, wrong.mode = "scaffold", pb.MODE_GENERATIVE
        code, details = code_of(lambda: stub.OpenSession(wrong))
        assert code == grpc.StatusCode.INVALID_ARGUMENT and "task stream" in details
        settings = {k: v for k, v in header.settings.items() if k != "mode"}
        plain = StreamHeader(**{**{f: getattr(header, f) for f in (
            "width", "height", "fps_num", "fps_den", "level", "num_frames", "models")},
            "settings": settings})  # fmt: skip
        wrong = open_request(plain.to_bytes())
        wrong.codec, wrong.mode = "features", pb.MODE_TASK
        code, details = code_of(lambda: stub.OpenSession(wrong))
        assert code == grpc.StatusCode.INVALID_ARGUMENT and "generative stream" in details
        channel.close()
        # the agent: exit 2, the status on stderr, no detections file
        got = tmp_path / "detections.txt"
        argv = ["stream", str(sample_dir), "--server", f"127.0.0.1:{srv.port}", *DETECT_ARGS,
                "--bottleneck", str(bottleneck_file), "--detections-out", str(got),
                "--spool", str(tmp_path / "spool")]  # fmt: skip
        assert edge_main(argv) == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert err[-1].startswith("edge-agent: error: FAILED_PRECONDITION"), err
        assert not got.exists() and not list(tmp_path.glob(".detections.txt*"))
    finally:
        srv.stop(0)
    out = srv.settings.out
    assert not (out / ".sessions").exists() or not any((out / ".sessions").rglob("*"))
    assert not (out / "default").exists()


@pytest.mark.parametrize("extra, words", [
    (["--mode", "detect", "--auto", "--beta", "1"], "--beta: with --target-kbps/--target-bpp/--a"),
    (["--mode", "detect", "--flow-prior", "p.json"], "--flow-prior: scaffold-mode options"),
    (["--mode", "detect", "--level", "2"], "--level: scaffold-mode options"),
    (["--mode", "detect", "--target-kbps", "20", "--beta", "1"], "--beta: with --target-kbps"),
    (["--mode", "detect", "--min-agreement", "0.9"], "--min-agreement goes with --target"),
    (["--mode", "detect", "--intra-period", "-1"], "--intra-period must be >= 0"),
    (["--mode", "detect", "--skip-threshold", "-1"], "--skip-threshold must be >= 0"),
    (["--skip-threshold", "2"], "--skip-threshold is for --mode detect"),
    (["--detections-out", "d.txt"], "--detections-out is for --mode detect"),
    (["--bottleneck", "b.pt"], "--bottleneck is for --mode detect"),
])  # fmt: skip
def test_stream_mode_usage_errors_exit_2(extra, words, sample_dir, capsys):
    assert edge_main(["stream", str(sample_dir), "--server", "127.0.0.1:9", *extra]) == 2
    assert words in capsys.readouterr().err


def test_detect_constants_agree_with_the_codec():
    from semcodec.cloud.service import detect
    from semcodec.codec.task import stream

    assert detect.BOTTLENECK_MODEL == stream.BOTTLENECK_MODEL
