"""Exactly-once delivery through faults, each repeated under 5 % packet loss on a real link:
the server killed (SIGKILL) mid-stream with a live viewer connected to its HTTP port and
restarted at once on the same ports (serving within ``RESTART_S``), the agent killed
mid-stream and restarted, the link cut for 10 s. Real ``cloud-decoder serve`` and
``edge-agent stream`` processes talk real gRPC over the loopback of network namespaces the
test makes (root, ``ip`` and ``nft`` only; skipped with the reason elsewhere).

Every repetition checks that each unit reached the cloud exactly once (the stored stream
is parsed: no sequence number twice, none missing, and it equals ``edge-agent encode``'s
file byte for byte) and that the cloud's outputs equal the offline decode of the same
bitstream. Repetitions run in parallel *lanes*, one namespace (its own link, loss rule and
server) per lane, so 20 repetitions of a 10-s cut take about five cuts of wall time.

``SEMCODEC_FAULT_REPS`` (20) and ``SEMCODEC_FAULT_LANES`` (4) change the counts; the
restart test runs at most :data:`RESTART_LANES` lanes. Each test prints its totals (``-s`` or
the CI log shows them).
"""

from __future__ import annotations

import json
import os
import secrets
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from semcodec.codec.bitstream import read_stream

from .conftest import NS_ENCODE, NS_PORT, NetNs, assert_same_tree, netns_unavailable, session_paths

pytestmark = pytest.mark.slow  # about 4.5 minutes on 2 cores (make test-fast skips them)

REPS = int(os.environ.get("SEMCODEC_FAULT_REPS", "20"))
LANES = max(1, min(int(os.environ.get("SEMCODEC_FAULT_LANES", "4")), REPS))
LOSS_PERCENT = 5
CUT_S = 10.0
# the agent paces to 16 kbit/s: the 11-kB stream's keyframe (7.7 kB) takes about 4 s, the
# other units come about 300 ms apart, so a fault lands mid-stream even when a loaded
# machine keeps the test from looking at the spool for a second
AGENT_PACE = ("--bandwidth-kbps", "16")
#: where in the stream a repetition strikes, in turn: during the keyframe (0.5 s after the
#: session opened), after the first acknowledgement, after the second
STRIKE_POINTS = (0, 1, 2)
#: Tries of one repetition whose kill may land after the stream ended (then nothing was tested).
MAX_STRIKES = 3
#: The HTTP front door's port in a lane's namespace, and how soon a server SIGKILLed with a
#: viewer connected to it must serve again, restarted at once on the same ports (seconds,
#: from the kill to health SERVING: issue 53's bound)
NS_HTTP_PORT, RESTART_S = 8080, 5.0
#: Lanes of the restart test: each lane's server builds the default decoder after every
#: restart (about 4.9 CPU seconds on this VM, 3.7 of them importing torch), so with 4 lanes
#: on 2 cores a restart's time measured the other lanes' decoder starts more than its own
#: (1.3-6.8 s in one full suite); with 2 the cores are still shared by 2 servers and agents.
RESTART_LANES = min(LANES, 2)
#: A live viewer in the namespace: the session's MJPEG over one kept connection, read until
#: the server goes ("viewing" in its log once the answer's head came).
VIEWER = r"""
import socket, sys
sock = socket.create_connection(("127.0.0.1", int(sys.argv[1])), timeout=120)
sock.sendall(("GET /sessions/%s/mjpeg HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n" % sys.argv[2]).encode())
head = sock.recv(65536)
print("viewing" if head.startswith(b"HTTP/1.1 200") else head[:80], file=sys.stderr, flush=True)
try:
    while sock.recv(65536):
        pass
except OSError:  # reset: the server went
    pass
"""


@dataclass
class Tally:
    """What the repetitions of one test found."""

    reps: int = 0
    expected: int = 0
    stored: int = 0
    lost: int = 0
    duplicates: int = 0
    reconnects: int = 0
    missed: int = 0  # strikes that landed after the stream had ended (struck again)
    restarts: list[float] = field(default_factory=list)  # kill to SERVING, seconds
    lock: threading.Lock = field(default_factory=threading.Lock)

    def line(self, what: str, seconds: float) -> str:
        return (f"faults: {what} x{self.reps} under {LOSS_PERCENT} % loss: units expected "
                f"{self.expected}, stored {self.stored}, lost {self.lost}, duplicates "
                f"{self.duplicates}, agent reconnects {self.reconnects}"
                + (f", strikes after the end (struck again) {self.missed}" if self.missed else "")
                + (f", restarts (kill to serving, viewer connected) {min(self.restarts):.2f}-"
                   f"{max(self.restarts):.2f} s" if self.restarts else "")
                + f" ({seconds:.0f} s)")  # fmt: skip


class Lane:
    """One namespace (its loopback losing ``LOSS_PERCENT`` % of the service's packets), one
    server at a time in it, and its repetitions' files under ``folder``."""

    def __init__(self, index: int, folder: Path) -> None:
        reason = netns_unavailable()
        if reason:
            pytest.skip(reason)
        self.index, self.folder = index, folder
        self.ns = NetNs(f"semc-flt-{os.getpid()}-{secrets.token_hex(3)}")
        made = subprocess.run(["ip", "netns", "add", self.ns.name], capture_output=True,
                              text=True)  # fmt: skip
        if made.returncode != 0:
            pytest.skip(f"cannot make a network namespace here: {made.stderr.strip()}")
        self.ns.sh("ip", "link", "set", "lo", "mtu", "1500", "up")
        self.ns.drop("semc_loss", NS_PORT, LOSS_PERCENT)
        self.out = folder / "out"
        self.server: subprocess.Popen | None = None
        self._logs = 0

    def spawn(self, argv: list[str], name: str) -> tuple[subprocess.Popen, Path]:
        """Starts ``argv`` in the namespace, its stderr into a file (never a full pipe)."""
        self._logs += 1
        log = self.folder / f"{self._logs:03d}-{name}.log"
        with open(log, "w") as fh:
            proc = subprocess.Popen(["ip", "netns", "exec", self.ns.name, *argv],
                                    stdout=subprocess.DEVNULL, stderr=fh, text=True)  # fmt: skip
        self.ns.procs.append(proc)
        return proc, log

    def start_server(self) -> None:
        self.server, log = self.spawn(
            [sys.executable, "-m", "semcodec.cloud.cli", "serve", "--listen",
             f"127.0.0.1:{NS_PORT}", "--out", str(self.out), "--metrics-listen", "",
             "--http-listen", f"127.0.0.1:{NS_HTTP_PORT}",
             "--grace-s", "2", "--notice-s", "0"], "serve")  # fmt: skip
        deadline = time.monotonic() + 60
        while "serving on" not in log.read_text():
            assert self.server.poll() is None, log.read_text()
            assert time.monotonic() < deadline, f"the server did not start: {log.read_text()}"
            time.sleep(0.05)

    def kill_server(self) -> None:
        self.server.send_signal(signal.SIGKILL)
        reap_killed(self.server)

    def start_viewer(self, session_id: str) -> subprocess.Popen:
        """A live viewer of the session, connected to the HTTP port when this returns."""
        viewer, log = self.spawn([sys.executable, "-c", VIEWER, str(NS_HTTP_PORT), session_id],
                                 "viewer")  # fmt: skip
        deadline = time.monotonic() + 30
        while "viewing" not in log.read_text():
            assert viewer.poll() is None, log.read_text()
            assert time.monotonic() < deadline, f"the viewer did not connect: {log.read_text()}"
            time.sleep(0.02)
        return viewer

    def stop_server(self) -> None:
        self.server.send_signal(signal.SIGTERM)
        assert self.server.wait(timeout=30) == 0
        self.server = None

    def start_agent(self, sample_dir: Path, spool: Path) -> tuple[subprocess.Popen, Path]:
        return self.spawn([sys.executable, "-m", "semcodec.edge.cli", "stream",
                           str(sample_dir), "--server", f"127.0.0.1:{NS_PORT}", *NS_ENCODE,
                           "--spool", str(spool), "--chunk-kib", "1", "--keepalive-s", "1",
                           "--max-outage-s", "60", *AGENT_PACE], "agent")  # fmt: skip

    def close(self) -> None:
        self.ns.close()


def _spool_state(spool: Path) -> dict:
    try:
        return json.loads((spool / "state.json").read_text() or "{}")
    except (OSError, ValueError):  # not written yet (or being replaced)
        return {}


def wait_for_strike_point(agent: subprocess.Popen, log: Path, spool: Path, point: int,
                          units: int) -> None:  # fmt: skip
    """Returns once the stream is at ``point`` (see ``STRIKE_POINTS``), still mid-stream."""
    deadline = time.monotonic() + 60
    while True:
        assert agent.poll() is None, f"the agent ended before the fault: {log.read_text()}"
        assert time.monotonic() < deadline, f"the stream did not start: {log.read_text()}"
        state = _spool_state(spool)
        if point == 0 and state.get("session_id"):
            time.sleep(0.5)  # the keyframe is on its way
            break
        if point > 0 and state.get("acked", 0) >= point:
            break
        time.sleep(0.01)
    acked = _spool_state(spool).get("acked", 0)
    assert agent.poll() is None and acked < units, "the fault came after the stream ended"


def finish_agent(agent: subprocess.Popen, log: Path) -> str:
    """Waits for the agent to exit 0 (every unit acknowledged); returns its log."""
    try:
        agent.wait(timeout=90)
    except subprocess.TimeoutExpired:
        agent.kill()
        agent.wait()
        pytest.fail(f"the agent did not finish: {log.read_text()}")
    text = log.read_text()
    assert agent.returncode == 0, text
    return text


def reap_killed(proc: subprocess.Popen, timeout_s: float = 60.0) -> None:
    """Waits for (and reaps) a SIGKILLed process. It can only outlive the signal while a
    thread sleeps uninterruptibly in the kernel (an fsync on a loaded disk): the failure
    says the process state and where it sleeps."""
    try:
        proc.wait(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        where = []
        for task in sorted(Path(f"/proc/{proc.pid}/task").glob("*")):
            try:  # the state letter (D: uninterruptible) and the kernel function it sleeps in
                state = (task / "stat").read_text().rsplit(")", 1)[1].split()[0]
                where.append(f"{task.name}:{state}:{(task / 'wchan').read_text().strip()}")
            except (OSError, IndexError):
                continue
        pytest.fail(f"pid {proc.pid} still runs {timeout_s:.0f} s after SIGKILL; its threads "
                    f"(tid:state:wchan): {', '.join(where) or 'none left'}")  # fmt: skip


def check_session(lane: Lane, spool: Path, semc: Path, offline: Path, tally: Tally,
                  agent_logs: list[str]) -> None:  # fmt: skip
    """Every unit stored once (counted), the outputs equal the offline decode."""
    session_id = _spool_state(spool)["session_id"]
    log, outputs = session_paths(lane.out, "default", session_id)
    _, expected_units = read_stream(semc)
    expected = [u.seq for u in expected_units]
    _, units = read_stream(log)
    stored = [u.seq for u in units]
    with tally.lock:
        tally.reps += 1
        tally.expected += len(expected)
        tally.stored += len(stored)
        tally.duplicates += len(stored) - len(set(stored))
        tally.lost += len(set(expected) - set(stored))
        tally.reconnects += sum(text.count("reconnecting") for text in agent_logs)
    assert sorted(stored) == sorted(expected), (stored, expected)
    assert log.read_bytes() == semc.read_bytes()  # in order, byte for byte
    assert_same_tree(outputs, offline)


def run_lanes(tmp_path: Path, repetition: Callable[[Lane, int], None],
              lanes_count: int = LANES) -> None:  # fmt: skip
    """Runs ``REPS`` repetitions over ``lanes_count`` lanes in parallel (each lane's in
    turn); the first failure fails the test once every lane stopped."""
    failures: list[BaseException] = []
    lanes: list[Lane] = []
    try:
        for i in range(lanes_count):
            lanes.append(Lane(i, tmp_path / f"lane{i}"))
            lanes[-1].folder.mkdir()

        def work(lane: Lane) -> None:
            try:
                lane.start_server()
                for rep in range(lane.index, REPS, lanes_count):
                    if failures:
                        return
                    repetition(lane, rep)
                lane.stop_server()
            except BaseException as exc:  # reported by the main thread
                failures.append(exc)

        threads = [threading.Thread(target=work, args=(lane,)) for lane in lanes]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
    finally:
        for lane in lanes:
            lane.close()
    if failures:
        raise failures[0]


def report(capsys, tally: Tally, what: str, start: float) -> None:
    line = tally.line(what, time.monotonic() - start)
    with capsys.disabled():
        print(f"\n{line}")
    assert tally.reps == REPS, line
    assert tally.lost == 0 and tally.duplicates == 0, line


# ------------------------------------------------------------------------------ the faults


def test_server_killed_mid_stream_with_a_viewer_and_restarted(ns_stream, sample_dir, tmp_path,
                                                              capsys):  # fmt: skip
    semc, offline = ns_stream
    units = len(list(read_stream(semc)[1]))
    tally, start = Tally(), time.monotonic()

    def repetition(lane: Lane, rep: int) -> None:
        for attempt in range(MAX_STRIKES):
            spool = lane.folder / f"spool{rep}-{attempt}"
            agent, log = lane.start_agent(sample_dir, spool)
            wait_for_strike_point(agent, log, spool, STRIKE_POINTS[rep % 3], units)
            viewer = lane.start_viewer(_spool_state(spool)["session_id"])
            killed = time.monotonic()
            lane.kill_server()  # SIGKILL: no drain, no goodbye; then a new server, same --out
            lane.start_server()  # at once, on the same ports (the viewer's left behind)
            restart = time.monotonic() - killed
            assert restart <= RESTART_S, f"serving {restart:.1f} s after the kill"
            assert viewer.wait(timeout=30) == 0  # its connection ended with the server
            with tally.lock:
                tally.restarts.append(restart)
            text = finish_agent(agent, log)
            if "reconnecting" in text:
                check_session(lane, spool, semc, offline, tally, [text])
                return
            # the last acknowledgements came in between the strike point and the kill (a
            # loaded machine): no fault was made, so strike again with a new stream
            with tally.lock:
                tally.missed += 1
        pytest.fail(f"{MAX_STRIKES} kills in a row came after the stream had ended: {text}")

    run_lanes(tmp_path, repetition, RESTART_LANES)
    report(capsys, tally, "server SIGKILLed mid-stream and restarted", start)


def test_agent_killed_mid_stream_and_restarted(ns_stream, sample_dir, tmp_path, capsys):
    semc, offline = ns_stream
    units = len(list(read_stream(semc)[1]))
    tally, start = Tally(), time.monotonic()

    def repetition(lane: Lane, rep: int) -> None:
        spool = lane.folder / f"spool{rep}"
        agent, log = lane.start_agent(sample_dir, spool)
        wait_for_strike_point(agent, log, spool, STRIKE_POINTS[rep % 3], units)
        agent.send_signal(signal.SIGKILL)  # no cleanup at all: the spool is all that is left
        reap_killed(agent)
        first = log.read_text()
        again, log = lane.start_agent(sample_dir, spool)  # the same command, the same spool
        text = finish_agent(again, log)
        check_session(lane, spool, semc, offline, tally, [first, text])

    run_lanes(tmp_path, repetition)
    report(capsys, tally, "agent SIGKILLed mid-stream and restarted", start)


def test_link_cut_for_10_s(ns_stream, sample_dir, tmp_path, capsys):
    semc, offline = ns_stream
    units = len(list(read_stream(semc)[1]))
    tally, start = Tally(), time.monotonic()

    def repetition(lane: Lane, rep: int) -> None:
        spool = lane.folder / f"spool{rep}"
        agent, log = lane.start_agent(sample_dir, spool)
        wait_for_strike_point(agent, log, spool, STRIKE_POINTS[rep % 3], units)
        lane.ns.drop("semc_cut", NS_PORT, percent=100)  # every packet of the service, both ways
        cut_at = time.monotonic()
        while time.monotonic() - cut_at < CUT_S:
            assert agent.poll() is None, log.read_text()  # it waits the cut out ...
            time.sleep(0.1)
        lane.ns.undrop("semc_cut")  # ... and the link comes back
        text = finish_agent(agent, log)
        assert "reconnecting" in text, text  # keepalive noticed the dead connection
        check_session(lane, spool, semc, offline, tally, [text])

    run_lanes(tmp_path, repetition)
    report(capsys, tally, f"link cut for {CUT_S:.0f} s", start)
