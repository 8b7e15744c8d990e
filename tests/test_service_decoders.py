"""The service decodes with any decoder (issue 50, item 2): a session request names its
decoder, checked at OpenSession (refusals with INVALID_ARGUMENT, a resume naming another one
with FAILED_PRECONDITION), stored with the session and shown (views, dashboard, metrics);
a per-tenant compute limit refuses networked decoders while the tenant is over it
(RESOURCE_EXHAUSTED; warp is taken) and holds its sessions down their ladders; and a
session's frames equal `cloud-decoder decode --decoder` of the same stream."""

from __future__ import annotations

import dataclasses
import json

import grpc
import pytest

from semcodec.cloud.cli import main as cloud_main
from semcodec.cloud.service.compute import (
    ComputeBudget,
    ComputeQuotaError,
    DecoderMismatchError,
    FlopsMeter,
    choose_decoder,
)
from semcodec.cloud.service.config import ServeSettings
from semcodec.cloud.service.errors import InvalidRequestError
from semcodec.cloud.service.http import dashboard_html
from semcodec.cloud.service.limits import ServiceLimits
from semcodec.cloud.service.manager import SessionManager, SessionView
from semcodec.cloud.service.messages import OpenRequest
from semcodec.codec.bitstream import read_stream
from semcodec.codec.reconstruct.pipeline import DEFAULT_DECODER, DecoderSpec, PaceKeeper
from semcodec.edge.cli import main as edge_main
from semcodec.edge.stream.client import open_request

from .conftest import ENCODE_ARGS, assert_same_tree, code_of, session_paths, start_server, stub_for


def _manager(tmp_path, **limits) -> SessionManager:
    from semcodec.codec.reconstruct import available_reconstructors

    assert "warp" in available_reconstructors()  # the registry loaded before any thread
    defaults = ServiceLimits.of(ServeSettings(out=tmp_path / "out"))
    return SessionManager(tmp_path / "out", dataclasses.replace(defaults, **limits))


def _request(semc, decoder: str = "", session_id: str = "") -> OpenRequest:
    return OpenRequest(header=read_stream(semc)[0].to_bytes(), session_id=session_id,
                       decoder=decoder)  # fmt: skip


class _Clock:
    def __init__(self) -> None:
        self.t = 1000.0

    def __call__(self) -> float:
        return self.t


# ------------------------------------------------------------------------------ refusals


@pytest.mark.parametrize("text, words", [
    ("nosuch", "decoder 'nosuch': expected one of"),
    ("restore,bogus=1", "decoder option 'bogus'"),
    ("warp,memory_mb=4", "only for --decoder animate or restore, not warp"),
    ("restore,memory_mb=-1", "--memory-mb -1"),
    ("animate,refiner=w8", "this stream carries no pose"),
    ("restore,weights=/etc/passwd", "a session may name shipped weights only"),
    ("restore,redraw=/etc/passwd", "a session may name shipped redraw only"),
    ("restore,memory_mb=1000", "memory_mb=1000 is above this server's 16 MB"),
    ("restore,device=cuda:0,sr=bicubic", "device="),
])  # fmt: skip
def test_a_decoder_that_cannot_apply_is_refused_naming_what_to_change(tmp_path, semc, text,
                                                                      words):  # fmt: skip
    header = read_stream(semc)[0]
    if "cuda" in text:
        import torch

        if torch.cuda.is_available():
            pytest.skip("a CUDA device is here: device=cuda applies")
    with pytest.raises(InvalidRequestError) as info:
        choose_decoder(header, text, DEFAULT_DECODER)
    assert info.value.code == "INVALID_ARGUMENT" and words in str(info.value)


def test_a_decoder_named_for_a_detect_stream_is_refused():
    header = type("Header", (), {"settings": {"mode": "detect"}})()
    with pytest.raises(InvalidRequestError, match="task-mode .* takes no decoder"):
        choose_decoder(header, "warp", DEFAULT_DECODER)
    assert choose_decoder(header, "", DEFAULT_DECODER) is None  # the detections, as ever


def test_a_session_keeps_its_decoder_and_a_resume_naming_another_is_refused(tmp_path, semc):
    manager = _manager(tmp_path)
    try:
        opened = manager.open("a", _request(semc, "warp"))
        assert opened.decoder == "warp"
        default = manager.open("a", _request(semc))
        assert default.decoder == str(DEFAULT_DECODER)
        over = manager.open("a", _request(semc, "person_matte=none"))  # over the server's
        assert over.decoder == str(DecoderSpec.parse("person_matte=none"))
        sid = opened.session_id
        for same in ("", "warp", " warp "):
            assert manager.open("a", _request(semc, same, sid)).decoder == "warp"
        with pytest.raises(DecoderMismatchError) as info:
            manager.open("a", _request(semc, "restore,person_matte=none", sid))
        assert info.value.code == "FAILED_PRECONDITION"
        assert "decodes with 'warp', the request names 'restore'" in str(info.value)
        record = json.loads((tmp_path / "out/.sessions/a" / sid / "session.json").read_text())
        assert record["decoder"] == "warp"
    finally:
        manager.shutdown(5)
    restarted = _manager(tmp_path)  # a session at rest keeps it too
    try:
        assert restarted.open("a", _request(semc, "", sid)).decoder == "warp"
        with pytest.raises(DecoderMismatchError):
            restarted.open("a", _request(semc, "restore", sid))
    finally:
        restarted.shutdown(5)


# ------------------------------------------------------------------------------ compute


def test_a_tenant_over_its_compute_limit_is_refused_networks_and_given_warp(tmp_path, semc):
    manager = SessionManager(tmp_path / "out", _manager(tmp_path).limits,
                             tenant_quotas={"a": {"max_decoder_gflops": 2}})  # fmt: skip
    try:
        budget = manager.tenant("a").compute
        assert budget.limit == 2e9 and manager.tenant("b").compute.limit == 400e9  # the default
        meter = FlopsMeter(5.0, clock=_Clock())  # its time stands still: 3 GFLOP/s stays
        budget.add(meter, 2)
        manager.open("a", _request(semc))  # under: the default decoder is taken
        meter.add(3e9)  # 3 GFLOP in the window's first second: 3 GFLOP/s
        for text in ("", "restore,person_matte=none", "warp,person_matte=selfie_segmentation"):
            with pytest.raises(ComputeQuotaError) as info:
                manager.open("a", _request(semc, text))
            message = str(info.value)
            assert info.value.code == "RESOURCE_EXHAUSTED"
            assert "tenant a's decoders run 3.00 GFLOP/s" in message
            assert "limit of 2 GFLOP/s (tenant_max_decoder_gflops)" in message
            assert "ask for decoder=warp" in message and "close a session" in message
        assert manager.open("a", _request(semc, "warp")).decoder == "warp"  # no network
        manager.open("b", _request(semc))  # another tenant is not affected
    finally:
        manager.shutdown(5)


def test_which_decoders_run_networks():
    parse = DecoderSpec.parse
    assert not parse("warp").runs_networks() and not parse("animate").runs_networks()
    for text in ("restore", "restore,person_matte=none", "warp,person_matte=selfie_segmentation",
                 "animate,refiner=w8", "warp,sr=esrgan-slim", "diffusion"):
        assert parse(text).runs_networks(), text


def test_the_meter_counts_flops_per_wall_second_over_its_window():
    clock = _Clock()
    meter = FlopsMeter(5.0, clock)
    assert meter.rate() == 0.0
    meter.add(2e9)
    assert meter.rate() == 2e9  # at least a second of span
    clock.t += 4
    meter.add(2e9)
    assert meter.rate() == pytest.approx(1e9)  # 4 GFLOP over 4 s
    clock.t += 3  # the first frame left the 5 s window
    assert meter.rate() == pytest.approx(2e9 / 5)


def test_a_tenant_over_its_limit_is_held_down_its_ladder_and_let_back_up():
    clock = _Clock()
    budget = ComputeBudget("a", 1e9, window_s=5.0, clock=clock)
    meter = FlopsMeter(5.0, clock)
    budget.add(meter, 2)
    meter.add(10e9)
    assert budget.over() and budget.rung() == 0  # a change waits a window
    clock.t += 5
    assert budget.rung() == 1  # 2 GFLOP/s over the window: one rung down
    clock.t += 1
    assert budget.rung() == 1  # ... and not another before the meters show it
    clock.t += 4
    assert not budget.over() and budget.rung() == 1  # under, but up waits 2 windows
    clock.t += 5
    assert budget.rung() == 0
    meter.add(10e9)
    clock.t += 5
    assert budget.rung() == 1 and budget._retry == 20.0  # over again soon after: waits longer
    budget.remove(meter)
    clock.t += 20
    assert budget.usage() == 0 and budget.rung() == 0
    assert ComputeBudget("b", 0, 5.0, clock).rung() == 0  # no limit


class _Pipeline:
    """What the pace keeper and :class:`~cloud.service.decode.Rungs` use of a pipeline."""

    def __init__(self) -> None:
        self.rung, self.count, self.steps = 0, 0, []

    def ladder(self):
        return ("full", "no person_matte", "no restorer")

    def step_to(self, rung: int) -> None:
        self.rung = rung
        self.steps.append(rung)


def test_the_deeper_of_the_pace_and_the_compute_rung_is_decoded():
    from semcodec.cloud.service.decode import Rungs

    pipeline, changes = _Pipeline(), []
    rungs = Rungs(pipeline, lambda *change: changes.append(change))
    keeper = PaceKeeper(rungs, fps=10, window_s=0.5, retry_s=1.0)
    rungs.hold_at(1)
    assert pipeline.rung == 1 and changes == [(1, 0, "compute")]
    for _ in range(5):  # behind the camera: the pace keeper steps its own rung
        pipeline.count += 1
        keeper.frame_done(0.5)
    assert rungs.rung == 1 and pipeline.rung == 1 and len(changes) == 1  # already there
    for _ in range(5):
        pipeline.count += 1
        keeper.frame_done(0.5)
    assert rungs.rung == 2 and pipeline.rung == 2 and changes[-1] == (2, 1, "pace")
    rungs.hold_at(0)
    assert pipeline.rung == 2  # the pace keeper still holds it down
    rungs.hold_at(9)  # past the ladder: its last rung
    assert rungs.floor == 2


def test_the_compute_rung_steps_the_decoder_and_stream_json_records_it(tmp_path, semc):
    from semcodec.cloud.service import decode

    told = []

    class Source:
        """Decodes the 3 frames and END; holds the compute rung at 1; notes every other call."""

        def next_work(self, decoded):
            return "unit" if decoded <= 3 else "finish"

        def compute_rung(self):
            return 1

        def __getattr__(self, name):
            return lambda *args: told.append((name, *args))

    settings = decode.DecodeSettings(decoder="restore,person_matte=none", overview=False)
    decode.DecodeWorker(semc, tmp_path / "out", settings, Source()).run()
    hooks = [t for t in told if t[0].startswith("decode")]
    assert hooks[0] == ("decoder_opened", ("full", "no restorer"))
    assert hooks[1] == ("decoder_stepped", "no restorer", 1, True, "compute")
    assert [t[0] for t in hooks].count("decoder_ran") == 4  # the 3 frames and END
    assert hooks[-2:] == [("decode_done", 3, True, None), ("decoder_closed",)]
    record = json.loads((tmp_path / "out" / "stream.json").read_text())["decoder"]
    assert record["spec"] == "restore" and record["steps"] == [{"frame": 1, "rung": "no restorer"}]


# ------------------------------------------------------------------------------ shown


def test_views_and_metrics_show_each_sessions_decoder_and_rung(tmp_path, semc):
    from prometheus_client import generate_latest

    from semcodec.cloud.service.metrics import PrometheusMetrics

    metrics = PrometheusMetrics()
    manager = SessionManager(tmp_path / "out", _manager(tmp_path).limits, metrics=metrics)
    metrics.bind(manager)
    try:
        warp = manager.open("a", _request(semc, "warp")).session_id
        default = manager.open("a", _request(semc)).session_id
        views = {v.session_id: v for v in manager.listing("a")}
        assert views[warp].rung == "" and not manager.decoder_census()  # no unit yet
        # a decoder opens its pipeline (and says so) when the first unit is stored
        manager.held("a", warp).decoder_opened(("full", "no person_matte"))
        manager.held("a", default).decoder_opened(("full", "no person_matte", "no restorer"))
        views = {v.session_id: v for v in manager.listing("a")}
        assert views[warp].decoder == "warp" and views[warp].rung == "full"
        assert {v.decoder for v in views.values()} == {"warp", str(DEFAULT_DECODER)}
        manager.held("a", warp).decoder_stepped("no person_matte", 7, True, "compute")
        views = {v.session_id: v for v in manager.listing("a")}
        assert views[warp].rung == "no person_matte" and views[warp].steps == (
            {"frame": 7, "rung": "no person_matte", "cause": "compute"},)
        text = generate_latest(metrics.registry).decode()
        assert 'semcodec_decoder_sessions{decoder="warp",rung="full"} 0.0' not in text
        assert 'semcodec_decoder_sessions{decoder="restore",rung="full"} 1.0' in text
        assert 'semcodec_decoder_sessions{decoder="warp",rung="no person_matte"} 1.0' in text
        assert 'semcodec_decoder_steps_total{cause="compute",direction="down"} 1.0' in text
        assert "semcodec_decoder_gflops " in text
        assert warp not in text  # no session ids in labels
    finally:
        manager.shutdown(5)
    stored = {v.session_id: v for v in _manager(tmp_path).listing("a")}  # at rest, from disk
    assert stored[warp].decoder == "warp" and stored[warp].rung == ""


def test_the_dashboard_shows_and_escapes_the_decoder_and_its_steps():
    view = SessionView("ab" * 16, "streaming", "generative", 1, 640, 480, 25.0, 10, 11, 3.5,
                       None, decoder="<script>alert(1)</script>", rung="no <b>restorer</b>",
                       steps=({"frame": 40, "rung": "<i>x</i>", "cause": "compute"},),
                       gflops=1.5, live=True)  # fmt: skip
    page = dashboard_html("t", [view])
    assert "<script>" not in page and "&lt;script&gt;alert(1)&lt;/script&gt;" in page
    assert "no &lt;b&gt;restorer&lt;/b&gt; (compute: &lt;i&gt;x&lt;/i&gt; from frame 40)" in page
    detect = dataclasses.replace(view, decoder="", rung="", steps=())
    assert "<td>detections</td><td>-</td>" in dashboard_html("t", [detect])


# ------------------------------------------------------------------------------ over gRPC


def test_refusals_reach_the_edge_as_status_codes_and_the_json_api_shows_it(tmp_path, semc):
    import urllib.request

    server = start_server(tmp_path, tenant_max_decoder_gflops=1.0, http_listen="127.0.0.1:0")
    channel, stub = stub_for(f"127.0.0.1:{server.port}")
    try:
        header = read_stream(semc)[0].to_bytes()
        code, details = code_of(lambda: stub.OpenSession(open_request(header, decoder="nosuch")))
        assert code == grpc.StatusCode.INVALID_ARGUMENT and "decoder 'nosuch'" in details
        opened = stub.OpenSession(open_request(header, decoder="warp"))
        assert opened.decoder == "warp"
        api = f"http://127.0.0.1:{server.http_port}/api/sessions/{opened.session_id}"
        view = json.loads(urllib.request.urlopen(api, timeout=10).read())
        assert view["decoder"] == "warp" and view["rung"] in ("", "full")
        assert view["steps"] == [] and view["gflops"] == 0
        page = urllib.request.urlopen(f"http://127.0.0.1:{server.http_port}/",
                                      timeout=10).read().decode()  # fmt: skip
        assert "<td>warp</td>" in page
        code, details = code_of(lambda: stub.OpenSession(
            open_request(header, opened.session_id, "restore")))
        assert code == grpc.StatusCode.FAILED_PRECONDITION and "keeps its decoder" in details
        meter = FlopsMeter(60.0, clock=_Clock())
        server.manager.tenant("default").compute.add(meter, 0)
        meter.add(5e9)
        code, details = code_of(lambda: stub.OpenSession(open_request(header)))
        assert code == grpc.StatusCode.RESOURCE_EXHAUSTED and "decoder=warp" in details
        assert stub.OpenSession(open_request(header, decoder="warp")).decoder == "warp"
    finally:
        channel.close()
        server.stop(0)


def test_a_session_named_decoder_equals_the_offline_decode_with_it(tmp_path, sample_dir):
    # the ladder is off: on a busy machine the pace keeper could step the session's decoder
    # down (no restorer) and its frames would then differ from the offline decode's
    decoder = "restore,person_matte=none"
    server = start_server(tmp_path, decoder_ladder=False)
    try:
        argv = ["-q", "stream", str(sample_dir), "--server", f"127.0.0.1:{server.port}",
                *ENCODE_ARGS, "--decoder", decoder]  # fmt: skip
        assert edge_main(argv) == 0
        (state,) = (server.settings.out / ".sessions" / "default").iterdir()
        log, outputs = session_paths(server.settings.out, "default", state.name)
    finally:
        server.stop(0)
    offline = tmp_path / "offline"
    assert cloud_main(["-q", "decode", str(log), "-o", str(offline), "--decoder", decoder]) == 0
    assert_same_tree(outputs, offline)
    record = json.loads((outputs / "stream.json").read_text())["decoder"]
    assert record["spec"] == "restore" and "steps" not in record
    assert json.loads((state / "session.json").read_text())["decoder"] == "restore"
