"""The edge over constrained links: --auto following a slower pacer over real gRPC on
127.0.0.1, and real kernel-shaped links (tc tbf, nftables loss and cuts) inside a network
namespace the test makes (root only; skipped with the reason elsewhere)."""

from __future__ import annotations

import json
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from semcodec.cloud.cli import main as cloud_main
from semcodec.codec.bitstream import read_stream
from semcodec.edge.cli import main as edge_main
from semcodec.edge.stream.agent import AutoRate
from semcodec.edge.stream.pacer import TracePacer

from .conftest import NS_ENCODE, NS_PORT, NetNs, assert_same_tree, session_paths

PIXELS_PER_S = 384 * 288 * 7.0  # the embedded sample


def test_auto_target_follows_a_slower_pacer_down(server, detector_model, sample_dir,
                                                 tmp_path, capsys):  # fmt: skip
    spool = tmp_path / "spool"
    argv = ["stream", str(sample_dir), "--server", f"127.0.0.1:{server.port}", "--level", "1",
            "--frames", "21", "--auto", "--target-kbps", "24", "--min-kbps", "2",
            "--max-kbps", "24", "--bandwidth-kbps", "8", "--burst-bytes", "1024",
            "--chunk-kib", "1", "--spool", str(spool)]  # fmt: skip
    assert edge_main(argv) == 0
    err = capsys.readouterr().err
    assert "units sent 22, acknowledged 22, resent 0, dropped by policy 0" in err, err
    records = [json.loads(line) for line in (spool / "targets.jsonl").read_text().splitlines()]
    kbps = [(r["seq"], r["target_bps"] / 1000) for r in records]
    assert kbps[0] == (0, pytest.approx(24))
    # the target is under the pacer's 8 kbit/s within 2 seconds of the start (14 frames at
    # 7 fps); decisions are taken before frames, at most every 0.5 s, and a busy machine
    # encodes frames late: allow one more decision and a frame (the CI once took 16 frames)
    below = [r for r in records if r["target_bps"] / 1000 <= 8]
    assert below and below[0]["elapsed_s"] <= 2 + 0.5 + 1 / 7 + 0.2, records
    assert below[0]["seq"] <= 20, records
    assert all(2 - 1e-9 <= rate <= 24 + 1e-9 for _, rate in kbps)
    # the session holds every unit once and decodes like the same stream offline
    (session,) = (server.settings.out / ".sessions" / "default").iterdir()
    log, outputs = session_paths(server.settings.out, "default", session.name)
    offline = tmp_path / "offline"
    assert cloud_main(["-q", "decode", str(log), "-o", str(offline)]) == 0
    assert_same_tree(outputs, offline)
    assert json.loads((outputs / "stream.json").read_text())["complete"] is True


STEP_S = 0.5  # the trace's step down, seconds after the stream's first byte


def _step_trace(path: Path) -> tuple[Path, float]:
    """A 10-s Mahimahi trace: 480 kbit/s for ``STEP_S``, then 60 kbit/s; returns it with
    the scale (kbit/s) that makes these 48 and 6 kbit/s."""
    step_ms = round(STEP_S * 1000)
    stamps = list(range(25, step_ms + 1, 25)) + list(range(step_ms + 200, 10001, 200))
    path.write_text("".join(f"{t}\n" for t in stamps))
    mean_kbps = 8 * 1500 * len(stamps) / 10 / 1000
    return path, mean_kbps / 10


def test_auto_target_follows_a_trace_step_down_within_2_s(
        server, detector_model, sample_dir, tmp_path, capsys, monkeypatch):  # fmt: skip
    """The step comes while the first keyframe (several kB: over 1 s at 48 kbit/s) is still
    in the spool, so the link is congested after it whatever the machine's speed; the
    times are taken from the real pacer and rate wiring (the first byte starts the trace,
    the first target call the records' clock)."""
    spool = tmp_path / "spool"
    trace, scale_kbps = _step_trace(tmp_path / "step.up")
    clocks: dict[str, float] = {}
    consume, target_bps = TracePacer.consume, AutoRate.target_bps

    def timed_consume(self, nbytes):
        clocks.setdefault("first_byte", time.monotonic())
        return consume(self, nbytes)

    def timed_target_bps(self, seq):
        clocks.setdefault("first_target", time.monotonic())
        return target_bps(self, seq)

    monkeypatch.setattr(TracePacer, "consume", timed_consume)
    monkeypatch.setattr(AutoRate, "target_bps", timed_target_bps)
    argv = ["stream", str(sample_dir), "--server", f"127.0.0.1:{server.port}", "--level", "1",
            "--frames", "35", "--auto", "--target-kbps", "24", "--min-kbps", "2",
            "--max-kbps", "40", "--trace", str(trace), "--trace-scale-kbps", f"{scale_kbps}",
            "--chunk-kib", "1", "--spool", str(spool)]  # scaled: 48 kbit/s, then 6  # fmt: skip
    assert edge_main(argv) == 0
    err = capsys.readouterr().err
    assert "units sent 36, acknowledged 36, resent 0" in err, err
    records = [json.loads(line) for line in (spool / "targets.jsonl").read_text().splitlines()]
    step_s = clocks["first_byte"] - clocks["first_target"] + STEP_S  # on the records' clock
    # the target was above 6 kbit/s before the step, and within 10 % of it (or under it)
    # 2 s after it; decisions are taken before frames, at most every 0.5 s: allow one more
    # decision and a frame (as the pacer test does)
    assert records[0]["target_bps"] == pytest.approx(24000), records
    assert all(r["target_bps"] > 6600 for r in records if r["elapsed_s"] < step_s), records
    below = [r for r in records if r["target_bps"] <= 6600]
    assert below and below[0]["elapsed_s"] <= step_s + 2 + 0.5 + 1 / 7 + 0.2, (step_s, records)


def test_stream_pacing_options_are_checked(tmp_path, sample_dir, capsys):
    base = ["stream", str(sample_dir), "--server", "127.0.0.1:9", "--frames", "1"]
    bad = tmp_path / "bad.up"
    bad.write_text("1\nten\n")
    for extra, words in ((["--trace-scale-kbps", "10"], "--trace-scale-kbps needs --trace"),
                         (["--trace", str(bad)], "is not a millisecond timestamp"),
                         (["--trace", str(tmp_path / "none.up")], "cannot read"),
                         (["--min-kbps", "5"], "go with --auto"),
                         (["--auto", "--min-kbps", "50", "--max-kbps", "10"], "above the"),
                         ):  # fmt: skip
        assert edge_main([*base, *extra]) == 2
        assert words in capsys.readouterr().err
    with pytest.raises(SystemExit):  # argparse: one pacer at a time
        edge_main([*base, "--trace", str(bad), "--bandwidth-kbps", "5"])


# ------------------------------------------------------------------------------ netns links

def _serve_in(ns: NetNs, out: Path) -> subprocess.Popen:
    """``cloud-decoder serve`` in the namespace, once it says it is serving."""
    proc = ns.popen([sys.executable, "-m", "semcodec.cloud.cli", "serve", "--listen",
                     f"127.0.0.1:{NS_PORT}", "--out", str(out), "--metrics-listen", "",
                     "--grace-s", "2", "--notice-s", "0.2"])  # fmt: skip
    lines = []
    while not lines or "serving on" not in lines[-1]:
        lines.append(proc.stderr.readline())
        assert lines[-1], "".join(lines) + proc.communicate()[1]  # it exited
    return proc


def _agent_in(ns: NetNs, sample_dir: Path, spool: Path, *extra: str) -> subprocess.Popen:
    return ns.popen([sys.executable, "-m", "semcodec.edge.cli", "stream", str(sample_dir),
                     "--server", f"127.0.0.1:{NS_PORT}", *NS_ENCODE, "--spool", str(spool),
                     "--chunk-kib", "1", "--keepalive-s", "1", "--max-outage-s", "60",
                     *extra])  # fmt: skip


def _finish(ns: NetNs, serving: subprocess.Popen, agent: subprocess.Popen, out: Path,
            semc: Path, offline: Path) -> str:  # fmt: skip
    """Waits for the agent, stops the server; checks every unit arrived exactly once and the
    outputs equal the offline decode; returns the agent's log."""
    _, agent_log = agent.communicate(timeout=60)
    assert agent.returncode == 0, agent_log
    serving.send_signal(signal.SIGTERM)
    _, server_log = serving.communicate(timeout=30)
    assert serving.returncode == 0, server_log
    (session,) = (out / ".sessions" / "default").iterdir()  # one session, resumed in place
    log, outputs = session_paths(out, "default", session.name)
    assert log.read_bytes() == semc.read_bytes()  # every unit once, in order: no loss, no dup
    assert_same_tree(outputs, offline)
    return agent_log


def _achieved_kbps(agent_log: str) -> float:
    match = re.search(r"units sent (\d+), acknowledged (\d+), resent \d+, dropped by policy 0, "
                      r"achieved ([\d.]+) kbit/s", agent_log)  # fmt: skip
    assert match and match[2] == "7", agent_log
    return float(match[3])


def test_shaped_lossy_link_delivers_every_unit_once_within_its_rate(
        netns, ns_stream, sample_dir, tmp_path):  # fmt: skip
    semc, offline = ns_stream
    rate_kbit, burst = 32, 2048
    netns.shape(rate_kbit, burst, latency_ms=400)
    netns.drop("semc_loss", NS_PORT, percent=5)
    out = tmp_path / "out"
    serving = _serve_in(netns, out)
    agent = _agent_in(netns, sample_dir, tmp_path / "spool")
    agent_log = _finish(netns, serving, agent, out, semc, offline)
    achieved = _achieved_kbps(agent_log)
    print(f"tbf {rate_kbit} kbit/s, 5 % loss: achieved {achieved} kbit/s")  # -s shows it
    size = semc.stat().st_size
    # the unit bytes' rate cannot beat the shaped link (beyond its first burst): framing,
    # HTTP/2 and TCP/IP headers and resent packets share it
    assert 0.2 * rate_kbit < achieved < 1.1 * rate_kbit * size / (size - burst), agent_log


def test_link_cut_then_restored_resumes_with_no_loss_and_no_duplicates(
        netns, ns_stream, sample_dir, tmp_path):  # fmt: skip
    semc, offline = ns_stream
    netns.shape(32, 2048, latency_ms=400)
    out, spool = tmp_path / "out", tmp_path / "spool"
    serving = _serve_in(netns, out)
    agent = _agent_in(netns, sample_dir, spool)
    state, deadline = spool / "state.json", time.monotonic() + 60
    while time.monotonic() < deadline and agent.poll() is None:
        if state.is_file() and json.loads(state.read_text() or "{}").get("session_id"):
            break
        time.sleep(0.02)
    time.sleep(0.5)  # the 7.7-kB keyframe takes about 2 s at 32 kbit/s: cut inside it
    assert agent.poll() is None, agent.communicate()
    netns.drop("semc_cut", NS_PORT, percent=100)  # the link is cut mid-stream ...
    assert json.loads(state.read_text())["acked"] < 7
    time.sleep(4)
    assert agent.poll() is None  # ... the agent waits it out with its spool
    netns.undrop("semc_cut")  # ... and is restored
    agent_log = _finish(netns, serving, agent, out, semc, offline)
    assert "reconnecting" in agent_log  # keepalive noticed the dead connection
    _achieved_kbps(agent_log)


@pytest.mark.slow
def test_twenty_second_paced_run_holds_the_configured_rate_within_5_percent(
        netns, detector_model, sample_dir, tmp_path):  # fmt: skip
    """The issue's shaping check: a 20-second stream paced to 18 kbit/s over a kernel link
    (tbf 64 kbit/s: the pacer, not the link, sets the rate) achieves 18 kbit/s +- 5 %.
    (30 kbit/s until the camera profile made the 60-frame stream 69 kB: 18.4 s at 30; 25 until
    references stopped being refreshed in a crowd, 62 kB: 19.9 s at 25; 22 until refreshes
    were inter-coded, 49 kB: 17.6 s at 22.5.)"""
    rate_kbps = 18
    netns.shape(64, 4096, latency_ms=400)
    out = tmp_path / "out"
    serving = _serve_in(netns, out)
    agent = netns.popen([sys.executable, "-m", "semcodec.edge.cli", "stream", str(sample_dir),
                         "--server", f"127.0.0.1:{NS_PORT}", "--level", "1", "--frames", "60",
                         "--target-bpp", "0.5", "--bandwidth-kbps", str(rate_kbps),
                         "--chunk-kib", "1", "--spool", str(tmp_path / "spool")])  # fmt: skip
    _, agent_log = agent.communicate(timeout=120)
    assert agent.returncode == 0, agent_log
    serving.send_signal(signal.SIGTERM)
    serving.communicate(timeout=30)
    match = re.search(r"units sent 61, acknowledged 61, resent 0, dropped by policy 0, "
                      r"achieved ([\d.]+) kbit/s", agent_log)  # fmt: skip
    assert match, agent_log
    achieved = float(match[1])
    (session,) = (out / ".sessions" / "default").iterdir()
    size = (session / "stream.semc").stat().st_size - len(read_stream(session / "stream.semc")[0]
                                                          .to_bytes())  # fmt: skip
    seconds = 8 * size / 1000 / achieved
    print(f"paced to {rate_kbps} kbit/s over tbf 64 kbit/s: achieved {achieved} kbit/s "
          f"({100 * (achieved / rate_kbps - 1):+.1f} %) over {seconds:.1f} s")  # -s shows it
    assert seconds >= 20, agent_log
    assert abs(achieved - rate_kbps) <= 0.05 * rate_kbps, agent_log
