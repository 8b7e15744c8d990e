"""``cloud-decoder loadtest``: many concurrent edge streams against one ``cloud-decoder serve``.

This is a client for testing the service, not part of it: it lives in ``tools/loadtest/``
of a checkout, with the edge's load generator (``loadgen.py``) and the attacks
(``abuse.py``) beside it, and no wheel contains them (``tests/test_packaging.py`` checks).
``cloud-decoder loadtest ARGS`` runs :func:`main` from the checkout the package is installed
from (``pip install -e``); ``python tools/loadtest/loadtest.py ARGS`` does the same.

It starts a server (a separate process, so its memory is its own; or uses ``--server``),
then ``--streams`` real streams over gRPC -- the edge's ``StreamClient``\\ s, as
``edge-agent stream`` runs them, split over a few processes of the load generator
(``loadgen.py``, so that the clients' CPU is not this process's) -- each sending the
embedded sample's stream (encoded once at level 1, or ``--semc FILE``) at ``--fps`` units
per second, session after session, for ``--seconds``. Meanwhile it asks the standard gRPC
health service every 0.1 s and samples the server's resident memory (``/proc/PID/status``)
and its metrics every second.

It writes, under ``--out DIR``:

* ``summary.json``: health and acknowledgement latencies (p50, p99, max), units acknowledged
  per stream (min, median, max), the longest wait for an acknowledgement, sessions, errors,
  resident memory (start, after the ramp, max, end), and the verdict of each check;
* ``rss.csv``: ``t_s, rss_mib, sessions_active, backlog_units, units_stored``, one row a
  second; ``rss.png``: its plot.

The checks (the issue's), over the ``--seconds`` the streams run: health p99 < 50 ms,
acknowledgement p99 < 200 ms (from the unit's last chunk handed to gRPC until its
acknowledgement: stored and fsynced; the rest of each last session, sent at once after the
deadline so that it completes, is counted but not timed), memory flat (the
second half's peak at most 10 % + 16 MiB above the first half's after the ramp), no stream
starved (every stream got at least half the median's units acknowledged and never waited
more than 5 s for an acknowledgement), no errors. Exit status
0 when all hold, 1 when one does not (the summary says which), 2 for a user error.
"""

from __future__ import annotations

import argparse
import csv
import json
import logging
import math
import signal
import socket
import statistics
import subprocess
import sys
import threading
import time
import urllib.request
from dataclasses import asdict, dataclass
from pathlib import Path

log = logging.getLogger("semcodec.cloud.service")

HEALTH_EVERY_S = 0.1
SAMPLE_EVERY_S = 1.0
HERE = Path(__file__).resolve().parent
#: The edge's load generator and the attacks, run as processes (scripts beside this one).
LOADGEN = HERE / "loadgen.py"
ABUSE = HERE / "abuse.py"
LIMITS = {"health_p99_ms": 50.0, "ack_p99_ms": 200.0, "rss_growth_share": 0.10,
          "rss_growth_mib": 16.0, "starved_share": 0.5, "ack_wait_s": 5.0}  # fmt: skip


class LoadTestError(RuntimeError):
    """The load test cannot run (the server does not start, a worker fails, ...)."""


@dataclass(frozen=True)
class LoadSettings:
    """What ``cloud-decoder loadtest`` runs.

    Attributes:
        streams: concurrent streams.
        seconds: how long they stream (each finishes its session after it).
        out: folder for the summary, the memory curve and (own server) the server's outputs.
        fps: units per second each stream sends.
        server: ``HOST:PORT`` of a running server (None: start one, plaintext, on 127.0.0.1).
        server_pid: that server's process id, for its memory (None: not sampled).
        metrics: that server's ``HOST:PORT`` of ``/metrics`` (None: not scraped).
        semc: the stream to send (None: the embedded sample encoded at level 1).
        workers: client processes the streams are spread over.
        ramp_s: the streams start evenly over this many seconds (cameras do not all connect
            in the same millisecond; None: a tenth of ``seconds``, at most 5).
        serve_args: more ``cloud-decoder serve`` flags for the server it starts.
        viewers: live viewers reading the sessions' MJPEG from the server's HTTP front door
            while the streams run (own server only: it starts with ``--http-listen``); they
            spread over the live sessions and follow them as sessions end and start.
    """

    streams: int
    seconds: float
    out: Path
    fps: float = 1.0
    server: str | None = None
    server_pid: int | None = None
    metrics: str | None = None
    semc: Path | None = None
    workers: int = 4
    ramp_s: float | None = None
    serve_args: tuple[str, ...] = ()
    viewers: int = 0

    @property
    def ramp(self) -> float:
        return min(5.0, self.seconds / 10) if self.ramp_s is None else self.ramp_s


def percentile(values: list[float], share: float) -> float:
    """The ``share`` (0..1) percentile, nearest rank (0 for no values)."""
    if not values:
        return 0.0
    ordered = sorted(values)
    return ordered[min(len(ordered), max(1, math.ceil(share * len(ordered)))) - 1]


def rss_mib(pid: int) -> float | None:
    """Resident memory of process ``pid``, MiB (None: gone or unreadable)."""
    try:
        with open(f"/proc/{pid}/status", encoding="ascii") as fh:
            for line in fh:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) / 1024
    except OSError:
        return None
    return None


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


# ------------------------------------------------------------------------------ the driver


class _Probe(threading.Thread):
    """Health checks every ``HEALTH_EVERY_S``; memory and metrics every ``SAMPLE_EVERY_S``."""

    def __init__(self, target: str, pid: int | None, metrics: str | None, t0: float) -> None:
        super().__init__(name="probe", daemon=True)
        self.target, self.pid, self.metrics, self.t0 = target, pid, metrics, t0
        self.health_ms: list[float] = []
        self.health_at: list[float] = []  # seconds from t0
        self.health_failures: list[str] = []
        self.samples: list[dict] = []
        self.halt = threading.Event()

    def run(self) -> None:
        import grpc
        from grpc_health.v1 import health_pb2, health_pb2_grpc

        channel = grpc.insecure_channel(self.target)
        stub = health_pb2_grpc.HealthStub(channel)
        request = health_pb2.HealthCheckRequest(service="semcodec.v1.SemanticStream")
        next_sample = 0.0
        while not self.halt.is_set():
            now = time.monotonic()
            if now >= next_sample:
                self.samples.append(self._sample(now))
                next_sample = now + SAMPLE_EVERY_S
            start = time.monotonic()
            try:
                status = stub.Check(request, timeout=5).status
                if status != health_pb2.HealthCheckResponse.SERVING:
                    self.health_failures.append(f"status {status}")
            except grpc.RpcError as exc:
                self.health_failures.append(f"{exc.code().name}: {exc.details()}")
            self.health_ms.append(1000 * (time.monotonic() - start))
            self.health_at.append(start - self.t0)
            self.halt.wait(max(0.0, start + HEALTH_EVERY_S - time.monotonic()))
        channel.close()

    def _sample(self, now: float) -> dict:
        row = {"t_s": round(now - self.t0, 2),
               "rss_mib": rss_mib(self.pid) if self.pid else None,
               "sessions_active": None, "backlog_units": None, "units_stored": None}  # fmt: skip
        if self.metrics:
            try:
                text = urllib.request.urlopen(f"http://{self.metrics}/metrics", timeout=2).read()
            except OSError:
                return row
            names = {"semcodec_sessions_active": "sessions_active",
                     "semcodec_backlog_units": "backlog_units",
                     "semcodec_units_stored_total": "units_stored"}  # fmt: skip
            for line in text.decode().splitlines():
                name, _, value = line.partition(" ")
                if name in names:
                    row[names[name]] = float(value)
        return row


def _spawn_server(argv: list[str], log_path: Path) -> subprocess.Popen:
    """``cloud-decoder serve`` with ``argv``, its log in ``log_path``; returns once it
    serves.

    Raises:
        LoadTestError: it exited or did not serve within 120 s.
    """
    argv = [sys.executable, "-m", "semcodec.cloud.cli", "serve", *argv]
    with open(log_path, "w") as fh:
        proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=fh)
    deadline = time.monotonic() + 120
    while "serving on" not in log_path.read_text():
        if proc.poll() is not None or time.monotonic() > deadline:
            proc.kill()
            raise LoadTestError(f"the server did not start: {log_path.read_text().strip()}")
        time.sleep(0.05)
    return proc


def _start_server(settings: LoadSettings) -> tuple[subprocess.Popen, str, str, Path, str]:
    """A ``cloud-decoder serve`` of the load test's own: (process, target, metrics, log,
    the HTTP front door's ``HOST:PORT`` or "")."""
    port, metrics_port = _free_port(), _free_port()
    http = f"127.0.0.1:{_free_port()}" if settings.viewers else ""
    viewer_quota = ["--tenant-max-viewers", "0", "--max-viewers", str(settings.viewers)]
    server_log = settings.out / "server.log"
    proc = _spawn_server(["--listen", f"127.0.0.1:{port}", "--out",
                          str(settings.out / "server-out"), "--metrics-listen",
                          f"127.0.0.1:{metrics_port}", "--max-sessions",
                          str(max(64, 2 * settings.streams)), "--notice-s", "0", "--grace-s",
                          "10", # one tenant, many cameras: no per-tenant bound
                          "--tenant-max-sessions", "0", "--tenant-max-streams", "0",
                          *(["--http-listen", http, *viewer_quota] if http else []),
                          *settings.serve_args], server_log)  # fmt: skip
    return proc, f"127.0.0.1:{port}", f"127.0.0.1:{metrics_port}", server_log, http


def _sample_stream(out: Path) -> Path:
    """The embedded sample encoded at level 1 (``edge-agent encode``, run by the edge's
    load generator in a process of its own)."""
    semc = out / "sample-level1.semc"
    if not semc.is_file():
        done = subprocess.run([sys.executable, str(LOADGEN), "sample", "--out", str(semc)],
                              capture_output=True, text=True, timeout=600)  # fmt: skip
        if done.returncode != 0:
            raise LoadTestError(f"cannot encode the sample: {done.stderr.strip()}")
    return semc


def run_load(settings: LoadSettings) -> dict:
    """Runs the load test; writes and returns the summary.

    Raises:
        LoadTestError: the server or a worker process fails.
    """
    from semcodec.codec.bitstream import read_stream

    if settings.streams < 1 or settings.seconds <= 0 or settings.fps <= 0:
        raise LoadTestError("--streams, --seconds and --fps must be positive")
    if settings.viewers < 0:
        raise LoadTestError("--viewers must be 0 or more")
    settings.out.mkdir(parents=True, exist_ok=True)
    semc = settings.semc or _sample_stream(settings.out)
    units = len(list(read_stream(semc)[1]))
    server, server_log, http = None, None, ""
    target, pid, metrics = settings.server, settings.server_pid, settings.metrics
    if settings.viewers and target is not None:
        raise LoadTestError("--viewers needs the load test's own server (no --server)")
    if target is None:
        server, target, metrics, server_log, http = _start_server(settings)
        pid = server.pid
    viewers = [_Viewer(http, k) for k in range(settings.viewers)]
    workers: list[tuple[subprocess.Popen, Path]] = []
    t0 = time.monotonic()
    probe = _Probe(target, pid, metrics, t0)
    probe.start()
    try:
        time.sleep(2 * SAMPLE_EVERY_S)  # the idle server's memory first
        count = max(1, min(settings.workers, settings.streams))
        start = time.monotonic() + 3.0  # every worker imported and ready
        for k in range(count):
            first = k * settings.streams // count
            last = (k + 1) * settings.streams // count
            out = settings.out / f"worker{k}.json"
            out.unlink(missing_ok=True)
            argv = [sys.executable, str(LOADGEN), "streams", "--target",
                    target, "--semc", str(semc), "--first", str(first), "--count",
                    str(last - first), "--start", repr(start), "--seconds",
                    repr(settings.seconds), "--fps", repr(settings.fps), "--out",
                    str(out), "--ramp", repr(settings.ramp), "--streams",
                    str(settings.streams)]  # fmt: skip
            workers.append((subprocess.Popen(argv, stderr=subprocess.PIPE, text=True), out))
        for viewer in viewers:
            viewer.start()
        records = []
        for proc, out in workers:
            _, err = proc.communicate(timeout=settings.seconds + 900)
            if proc.returncode != 0 or not out.is_file():
                raise LoadTestError(f"a load worker failed (exit {proc.returncode}): "
                                    f"{err.strip()[-2000:]}")  # fmt: skip
            records += json.loads(out.read_text())
            out.unlink()
        ended = time.monotonic()
    finally:
        probe.halt.set()
        probe.join(10)
        for viewer in viewers:
            viewer.halt.set()
        for viewer in viewers:
            viewer.join(10)
        for proc, _ in workers:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
        if server is not None:
            server.send_signal(signal.SIGTERM)
            try:
                server.wait(60)
            except subprocess.TimeoutExpired:
                server.kill()
                server.wait()
    summary = summarize(settings, records, probe, start - t0, start + settings.seconds - t0,
                        ended - t0, units)  # fmt: skip
    summary["server"] = {"target": target, "pid": pid,
                         "log": str(server_log) if server_log else None,
                         "exit_status": server.returncode if server else None}  # fmt: skip
    if viewers:
        frames = sorted(v.frames for v in viewers)
        summary["viewers"] = {"count": len(viewers), "frames_min": frames[0],
                              "frames_median": statistics.median(frames),
                              "frames_total": sum(frames),
                              "errors": [e for v in viewers for e in v.errors][:20]}  # fmt: skip
    write_outputs(settings.out, summary, probe.samples)
    return summary


class _Viewer(threading.Thread):
    """One live viewer of the load test: reads the MJPEG of live session ``k % n`` (of the
    ``n`` the front door lists) until it ends, then looks again; counts the frames."""

    def __init__(self, http: str, k: int) -> None:
        super().__init__(name=f"viewer{k}", daemon=True)
        self.http, self.k = http, k
        self.frames = 0
        self.errors: list[str] = []
        self.halt = threading.Event()

    def run(self) -> None:
        import http.client

        host, port = self.http.rsplit(":", 1)
        while not self.halt.is_set():
            try:
                conn = http.client.HTTPConnection(host, int(port), timeout=10)
                conn.request("GET", "/api/sessions")
                live = [s["session_id"] for s in json.loads(conn.getresponse().read())["sessions"]
                        if s["live"]]  # fmt: skip
                conn.close()
                if not live:
                    self.halt.wait(0.5)
                    continue
                self._watch(host, int(port), live[self.k % len(live)])
            except (OSError, ValueError, http.client.HTTPException) as exc:
                if len(self.errors) < 100:
                    self.errors.append(f"{type(exc).__name__}: {exc}")
                self.halt.wait(0.5)

    def _watch(self, host: str, port: int, sid: str) -> None:
        import http.client

        conn = http.client.HTTPConnection(host, port, timeout=10)
        try:
            conn.request("GET", f"/sessions/{sid}/mjpeg")
            response = conn.getresponse()
            if response.status != 200:
                self.halt.wait(0.5)
                return
            while not self.halt.is_set():
                line = response.readline()
                if not line:
                    return  # the session ended
                if line.startswith(b"Content-Length:"):
                    response.readline()  # X-Frame
                    response.readline()  # the blank line
                    response.read(int(line.split(b":")[1]))
                    self.frames += 1
        finally:
            conn.close()


def summarize(settings: LoadSettings, records: list[dict], probe: _Probe, start_s: float,
              deadline_s: float, ended_s: float, units_per_session: int) -> dict:  # fmt: skip
    """The summary: latencies, per-stream units, memory, and the verdict of each check
    (times are seconds from the probe's start)."""
    acks = [ms for r in records for ms in r["ack_ms"]]
    during = [ms for at, ms in zip(probe.health_at, probe.health_ms, strict=True)
              if start_s <= at <= deadline_s]  # fmt: skip
    after = [ms for at, ms in zip(probe.health_at, probe.health_ms, strict=True)
             if at > deadline_s]  # fmt: skip
    acked = sorted(r["units_acked"] for r in records)
    slowest = sorted(((ms, r["stream"], *at) for r in records
                      for ms, at in zip(r["ack_ms"], r.get("ack_at", []), strict=False)),
                     reverse=True)[:20]  # fmt: skip
    median = statistics.median(acked) if acked else 0
    errors = [e for r in records for e in r["errors"]]
    for r in records:
        r["max_ack_wait_s"] = max(r["ack_ms"], default=0.0) / 1000
    rss = [(s["t_s"], s["rss_mib"]) for s in probe.samples if s["rss_mib"] is not None]
    # after the first quarter (sessions opening, decoders loading), in two halves
    ramp = start_s + 0.25 * (deadline_s - start_s)
    middle = (ramp + deadline_s) / 2
    first_half = [m for t, m in rss if ramp <= t < middle] or [m for _, m in rss]
    second_half = [m for t, m in rss if middle <= t <= deadline_s] or [m for _, m in rss]
    rss_block = None
    if rss:
        before = [m for t, m in rss if t < start_s] or [rss[0][1]]
        at_end = [m for t, m in rss if t <= deadline_s]
        rss_block = {"start": round(before[-1], 1), "after_ramp": round(first_half[0], 1),
                     "max": round(max(m for _, m in rss), 1),
                     "end": round((at_end or [rss[-1][1]])[-1], 1),
                     "first_half_max": round(max(first_half), 1),
                     "second_half_max": round(max(second_half), 1)}  # fmt: skip
    checks = {
        "health_p99": percentile(during, 0.99) < LIMITS["health_p99_ms"],
        "ack_p99": percentile(acks, 0.99) < LIMITS["ack_p99_ms"],
        "rss_flat": rss_block is None or rss_block["second_half_max"] <= (
            rss_block["first_half_max"] * (1 + LIMITS["rss_growth_share"])
            + LIMITS["rss_growth_mib"]),
        "no_stream_starved": bool(records) and len(records) == settings.streams and all(
            r["units_acked"] >= LIMITS["starved_share"] * median
            and r["max_ack_wait_s"] <= LIMITS["ack_wait_s"] for r in records),
        "no_errors": not errors and not probe.health_failures,
    }  # fmt: skip
    return {
        "settings": {k: (str(v) if isinstance(v, Path) else v)
                     for k, v in asdict(settings).items()},
        "units_per_session": units_per_session,
        "duration_s": round(ended_s - start_s, 1),
        "health_ms": {"count": len(during), "p50": round(percentile(during, 0.5), 2),
                      "p99": round(percentile(during, 0.99), 2),
                      "max": round(max(during, default=0.0), 2),
                      "after_p99": round(percentile(after, 0.99), 2),
                      "after_max": round(max(after, default=0.0), 2),
                      "failures": probe.health_failures[:20]},
        "ack_ms": {"count": len(acks), "p50": round(percentile(acks, 0.5), 2),
                   "p99": round(percentile(acks, 0.99), 2),
                   "max": round(max(acks, default=0.0), 2),
                   "slowest": [{"ms": round(ms, 1), "stream": stream, "session": session,
                                "seq": seq, "sent_s": at}
                               for ms, stream, session, seq, at in slowest]},
        "streams": {"count": len(records), "units_acked_min": acked[0] if acked else 0,
                    "units_acked_median": median, "units_acked_max": acked[-1] if acked else 0,
                    "units_acked_total": sum(acked),
                    "max_ack_wait_s": round(max((r["max_ack_wait_s"] for r in records),
                                                default=0.0), 2),
                    "sessions": sum(r["sessions"] for r in records),
                    "sessions_complete": sum(r["complete"] for r in records),
                    "errors": errors[:20], "error_count": len(errors)},
        "rss_mib": rss_block,
        "limits": LIMITS,
        "checks": checks,
        "ok": all(checks.values()),
    }  # fmt: skip


def write_outputs(out: Path, summary: dict, samples: list[dict]) -> None:
    """``summary.json``, ``rss.csv`` and (when matplotlib is there) ``rss.png``."""
    (out / "summary.json").write_text(json.dumps(summary, indent=2) + "\n")
    fields = ["t_s", "rss_mib", "sessions_active", "backlog_units", "units_stored"]
    with open(out / "rss.csv", "w", newline="") as fh:
        writer = csv.DictWriter(fh, fields)
        writer.writeheader()
        writer.writerows(samples)
    rows = [s for s in samples if s["rss_mib"] is not None]
    if not rows:
        return
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return
    fig, ax = plt.subplots(figsize=(7, 3.5))
    ax.plot([s["t_s"] for s in rows], [s["rss_mib"] for s in rows], color="tab:blue")
    ax.set_xlabel("seconds")
    ax.set_ylabel("server RSS, MiB", color="tab:blue")
    ax.set_ylim(bottom=0)
    active = [s for s in rows if s["sessions_active"] is not None]
    if active:
        twin = ax.twinx()
        twin.plot([s["t_s"] for s in active], [s["sessions_active"] for s in active],
                  color="tab:orange", linewidth=0.8)  # fmt: skip
        twin.set_ylabel("sessions open", color="tab:orange")
        twin.set_ylim(bottom=0)
    streams = summary["settings"]["streams"]
    ax.set_title(f"cloud-decoder serve under {streams} streams")
    fig.tight_layout()
    fig.savefig(out / "rss.png", dpi=100)
    plt.close(fig)


def describe(summary: dict) -> str:
    """One line of the numbers that matter."""
    h, a, s, r = summary["health_ms"], summary["ack_ms"], summary["streams"], summary["rss_mib"]
    memory = (f"RSS start {r['start']} / max {r['max']} / end {r['end']} MiB" if r
              else "RSS not sampled")  # fmt: skip
    failed = [k for k, v in summary["checks"].items() if not v]
    v = summary.get("viewers")
    watched = (f"{v['count']} viewers got {v['frames_total']} frames (min {v['frames_min']} "
               f"each), {len(v['errors'])} errors; " if v else "")  # fmt: skip
    return (f"{s['count']} streams: health p99 {h['p99']} ms (max {h['max']}), ack p99 "
            f"{a['p99']} ms over {a['count']} units, units acked per stream min "
            f"{s['units_acked_min']} / median {s['units_acked_median']} / max "
            f"{s['units_acked_max']}, longest ack wait {s['max_ack_wait_s']} s, sessions "
            f"{s['sessions_complete']}/{s['sessions']} complete, errors {s['error_count']}; "
            f"{memory}; {watched}"
            + ("all checks pass" if not failed else f"FAILED: {', '.join(failed)}"))


# ------------------------------------------------------------------------------ --abuse

#: The server ``--abuse`` starts: two tenants with quotas, short timeouts (seconds). The
#: StreamStart deadline (60 s) outlasts the idle-call measurement, so that its 1,000
#: authenticated calls stay idle throughout (the short form checks that the deadline ends
#: them; ended all at once, they come back all at once).
ABUSE_SERVE = {"tenant_max_sessions": 8, "tenant_max_streams": 1024, "session_idle_s": 20,
               "stream_start_s": 60, "progress_window_s": 30, "min_progress_bytes": 1024,
               "max_sessions": 64, "max_open_streams": 1024, "workers": 16}  # fmt: skip
ABUSE_TENANTS = ("mallory", "alice")  # the abuser, the victim


def start_abuse_server(out: Path, serve: dict | None = None,
                       extra: tuple[str, ...] = ()) -> dict:  # fmt: skip
    """A ``cloud-decoder serve`` process for the attacks (``ABUSE_SERVE``, updated by
    ``serve``), with a tokens file of ``ABUSE_TENANTS``; returns ``{"proc", "target",
    "metrics", "log", "tokens": {tenant: token}, "out", "settings"}``."""
    import secrets

    out.mkdir(parents=True, exist_ok=True)
    settings = {**ABUSE_SERVE, **(serve or {})}
    tokens = {tenant: secrets.token_hex(16) for tenant in ABUSE_TENANTS}
    tokens_file = out / "tokens"
    tokens_file.write_text("".join(f"{t} {n}\n" for n, t in tokens.items()))
    tokens_file.chmod(0o600)
    port, metrics_port = _free_port(), _free_port()
    log_path = out / "server.log"
    argv = ["--listen", f"127.0.0.1:{port}", "--out", str(out / "server-out"),
            "--metrics-listen", f"127.0.0.1:{metrics_port}", "--tokens", str(tokens_file),
            "--notice-s", "0", "--grace-s", "5", *extra]  # fmt: skip
    for name, value in settings.items():
        argv += [f"--{name.replace('_', '-')}", str(value)]
    proc = _spawn_server(argv, log_path)
    return {"proc": proc, "target": f"127.0.0.1:{port}", "metrics": f"127.0.0.1:{metrics_port}",
            "log": log_path, "tokens": tokens, "out": out / "server-out", "settings": settings}


def stop_server(proc: subprocess.Popen) -> int:
    """SIGTERM, then SIGKILL after 60 s; returns the exit status."""
    proc.send_signal(signal.SIGTERM)
    try:
        return proc.wait(60)
    except subprocess.TimeoutExpired:
        proc.kill()
        return proc.wait()


def run_abuse(out: Path, semc: Path | None = None, idle: int = 1000,
              serve: dict | None = None) -> int:  # fmt: skip
    """``cloud-decoder loadtest --abuse``: starts a server for the attacks and runs the
    attack process (``python tools/loadtest/abuse.py``) against it; it prints
    the table (also in ``out/abuse.md``, rows in ``out/abuse.json``). Returns its exit
    status (0: every attack held)."""
    out.mkdir(parents=True, exist_ok=True)
    semc = semc or _sample_stream(out)
    server = start_abuse_server(out, serve)
    settings = server["settings"]
    try:
        argv = [sys.executable, str(ABUSE), "--target",
                server["target"], "--semc", str(semc), "--abuser-token",
                server["tokens"][ABUSE_TENANTS[0]], "--victim-token",
                server["tokens"][ABUSE_TENANTS[1]], "--metrics", server["metrics"],
                "--log", str(server["log"]), "--idle", str(idle), "--quota-sessions",
                str(settings["tenant_max_sessions"]),
                "--session-idle-s", str(settings["session_idle_s"]),
                "--progress-window-s", str(settings["progress_window_s"]),
                "--out", str(out / "abuse.json")]  # fmt: skip
        done = subprocess.run(argv, stdout=subprocess.PIPE, text=True)
    finally:
        stop_server(server["proc"])
    (out / "abuse.md").write_text(done.stdout)
    print(done.stdout, end="")
    return done.returncode


# ------------------------------------------------------------------------------ the command


def build_parser(prog: str = "cloud-decoder loadtest") -> argparse.ArgumentParser:
    """``cloud-decoder loadtest``'s arguments."""
    from semcodec.codec.core.console import add_verbosity, positive_int

    load = argparse.ArgumentParser(
        prog=prog,
        description="Starts a `serve` (or uses --server), runs --streams concurrent edge "
        "streams of the embedded sample for --seconds, probes gRPC health every 0.1 s and "
        "the server's memory every second; writes DIR/summary.json, DIR/rss.csv and "
        "DIR/rss.png. Exit 0 when health p99 < 50 ms, ack p99 < 200 ms, memory flat, no "
        "stream starved and no errors; 1 when a check fails.",
    )
    add_verbosity(load)
    load.add_argument("--abuse", action="store_true",
                      help="instead: start a server with two tenants and quotas and run the "
                      "attacks of issue 25 against it (idle calls, a tenant at its quota, a "
                      "slow client, partial units, markers, long ids); prints the table, exit "
                      "0 when every attack held")  # fmt: skip
    load.add_argument("--abuse-idle", type=positive_int, default=1000, metavar="N",
                      help="--abuse: idle calls of each kind (1000)")  # fmt: skip
    load.add_argument("--streams", type=positive_int, default=64, help="concurrent streams")
    load.add_argument("--seconds", type=float, default=60.0, help="how long they stream")
    load.add_argument("--out", type=Path, required=True, metavar="DIR", help="results folder")
    load.add_argument("--fps", type=float, default=1.0,
                      help="units per second each stream sends (default 1)")  # fmt: skip
    load.add_argument("--semc", type=Path, metavar="FILE",
                      help="the stream to send (default: the sample at level 1)")  # fmt: skip
    load.add_argument("--ramp-s", type=float, metavar="S",
                      help="the streams start evenly over S seconds (default: a tenth of "
                      "--seconds, at most 5)")  # fmt: skip
    load.add_argument("--workers", type=positive_int, default=4,
                      help="client processes the streams are spread over (default 4)")  # fmt: skip
    load.add_argument("--viewers", type=int, default=0, metavar="N",
                      help="live viewers reading the sessions' MJPEG from the server's HTTP "
                      "front door while the streams run (own server only; 0: none)")
    load.add_argument("--server", metavar="HOST:PORT",
                      help="a running plaintext server (default: start one on "
                      "127.0.0.1)")  # fmt: skip
    load.add_argument("--server-pid", type=positive_int, metavar="PID",
                      help="--server's process, for its memory")  # fmt: skip
    load.add_argument("--metrics", metavar="HOST:PORT", help="--server's /metrics address")
    load.add_argument("--serve-arg", action="append", default=[], metavar="ARG",
                      help="one more flag for the server it starts (repeat it; "
                      "--serve-arg=--no-overview)")  # fmt: skip
    return load


def main(argv: list[str] | None = None, prog: str = "cloud-decoder loadtest") -> int:
    """Runs the load test (or ``--abuse``); returns the exit status: 0 when every check
    held, 1 when one did not, 2 when it could not run, 130 when interrupted."""
    from semcodec.codec.core.console import (
        EXIT_ERROR,
        EXIT_INTERRUPTED,
        configure_logging,
        one_line,
    )

    args = build_parser(prog).parse_args(sys.argv[1:] if argv is None else argv)
    configure_logging(getattr(args, "verbose", 0), getattr(args, "quiet", 0), prog=prog.split()[0])
    try:
        if args.abuse:
            return run_abuse(args.out, args.semc, args.abuse_idle)
        summary = run_load(LoadSettings(args.streams, args.seconds, args.out, args.fps,
                                        args.server, args.server_pid, args.metrics, args.semc,
                                        args.workers, args.ramp_s,
                                        tuple(args.serve_arg), args.viewers))  # fmt: skip
    except KeyboardInterrupt:
        log.error("interrupted")
        return EXIT_INTERRUPTED
    except (LoadTestError, OSError) as exc:
        log.error("error: %s", one_line(exc))
        return EXIT_ERROR
    log.warning("loadtest: %s (%s)", describe(summary), args.out / "summary.json")
    return 0 if summary["ok"] else 1


if __name__ == "__main__":
    sys.exit(main(prog="loadtest.py"))
