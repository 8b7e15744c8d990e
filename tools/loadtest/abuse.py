"""Attacks on ``cloud-decoder serve``, tried as an attacker would (issue 25), and measured.

Each function runs one attack against a running server (real gRPC) and returns a row: what
was tried, what was measured, the limit, and whether it held. ``cloud-decoder loadtest
--abuse`` starts a server configured for them (two tenants with quotas, short timeouts) and
runs this script as a process (``python tools/loadtest/abuse.py``), which prints the
table; ``tests/test_service_abuse.py`` runs the same functions in short form.

The attacks:

* :func:`idle_calls`: many idle unauthenticated connections with open reflection and health
  ``Watch`` streams, plus many idle authenticated ``StreamUnits`` calls that never send a
  ``StreamStart`` (reopened as the server ends them): health p99 meanwhile, and how long a
  legitimate stream of another tenant takes against the same stream on the idle server.
* :func:`tenant_fairness`: one tenant takes its whole quota (sessions, each with an idle
  stream, more refused): another tenant's acknowledgement p99, before and during; then the
  abuser goes quiet and the time until its sessions are put to rest.
* :func:`slow_client`: a unit sent one byte a second: the status and when it came.
* :func:`partial_units`: streams that send most of a 64-MiB unit and stop: the server's RSS.
* :func:`markers`: thousands of "dropped" markers on a short stream: how many were taken,
  the status that ended them, the time.
* :func:`long_ids`: a 4,000,000-character session id: the longest error message, and the
  longest line of the server's log.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import hashlib
import json
import os
import sys
import tempfile
import threading
import time
import zlib
from dataclasses import dataclass
from pathlib import Path

import grpc
from grpc_health.v1 import health_pb2, health_pb2_grpc
from grpc_reflection.v1alpha import reflection_pb2, reflection_pb2_grpc
from loadgen import run_stream  # beside this file (tools/loadtest/: not in the package)

from semcodec.codec.bitstream import read_stream
from semcodec.edge.stream.client import ChannelSecurity, StreamClient, open_request
from semcodec.edge.stream.spool import Spool
from semcodec.protos import semcodec_v1_pb2 as pb
from semcodec.protos import semcodec_v1_pb2_grpc as pb_grpc


@dataclass(frozen=True)
class AbuseTarget:
    """A running server and what the attacks may use.

    Attributes:
        address: ``HOST:PORT``.
        semc: a short stream (``edge-agent encode``) the legitimate clients send.
        abuser, victim: bearer tokens of two tenants (None: no tokens).
        metrics: the server's ``HOST:PORT`` of ``/metrics`` (its memory, sessions; None:
            not measured).
        log: the server's log file (None: not read).
    """

    address: str
    semc: Path
    abuser: str | None = None
    victim: str | None = None
    metrics: str | None = None
    log: Path | None = None


def _metadata(token: str | None) -> tuple[tuple[str, str], ...]:
    return (("authorization", f"Bearer {token}"),) if token else ()


def metric(target: AbuseTarget, name: str) -> float | None:
    """One sample of the server's metrics (None: not there)."""
    import urllib.request

    if target.metrics is None:
        return None
    text = urllib.request.urlopen(f"http://{target.metrics}/metrics", timeout=5).read()
    for line in text.decode().splitlines():
        key, _, value = line.partition(" ")
        if key == name:
            return float(value)
    return None


def rss_mib(target: AbuseTarget) -> float | None:
    """The server's resident memory, MiB (its ``process_resident_memory_bytes``)."""
    value = metric(target, "process_resident_memory_bytes")
    return None if value is None else round(value / (1 << 20), 1)


def percentile(values: list[float], share: float) -> float:
    if not values:
        return 0.0
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, int(share * len(ordered) + 0.999999) - 1))]


def health_probe(address: str, seconds: float, every_s: float = 0.05) -> list[float]:
    """Health check latencies (ms) over ``seconds``; a failed check counts as 10 s."""
    latencies = []
    with grpc.insecure_channel(address) as channel:
        stub = health_pb2_grpc.HealthStub(channel)
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            start = time.monotonic()
            try:
                stub.Check(health_pb2.HealthCheckRequest(), timeout=10)
                latencies.append(1000 * (time.monotonic() - start))
            except grpc.RpcError:
                latencies.append(10_000.0)
            time.sleep(max(0.0, start + every_s - time.monotonic()))
    return latencies


def legit_stream_s(target: AbuseTarget, folder: Path) -> float:
    """Seconds one unpaced stream of ``target.semc`` takes (as the victim), close included.

    Raises:
        AssertionError: the session did not complete.
    """
    header, units = read_stream(target.semc)
    spool = Spool(folder, 64 << 20)
    spool.bind(header.to_bytes())
    for seq, unit in enumerate(units):
        spool.put(seq, int(unit.kind), unit.to_bytes())
    start = time.monotonic()
    results = StreamClient(target.address, spool, ChannelSecurity(token=target.victim),
                           max_outage_s=60).run()  # fmt: skip
    took = time.monotonic() - start
    assert results.complete, results
    return took


# ------------------------------------------------------------------------------ idle calls


class _IdleCalls:
    """Holds idle calls on an event loop in a thread of its own (``grpc.aio`` clients)."""

    def __init__(self, address: str, unauthenticated: int, authenticated: int,
                 token: str | None, per_connection: int = 10) -> None:  # fmt: skip
        self.address, self.token = address, token
        self.unauthenticated, self.authenticated = unauthenticated, authenticated
        self.per_connection = per_connection
        self.open_unauth = self.open_auth = 0
        self.refused: dict[str, int] = {}
        self.ended: dict[str, int] = {}
        self._loop = asyncio.new_event_loop()
        self._stop: asyncio.Event | None = None
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._channels: list = []

    def __enter__(self) -> _IdleCalls:
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        if self._stop is not None:
            self._loop.call_soon_threadsafe(self._stop.set)
        self._thread.join(60)

    def _run(self) -> None:
        asyncio.set_event_loop(self._loop)
        self._loop.run_until_complete(self._main())
        self._loop.close()

    def _count(self, table: dict[str, int], code) -> None:
        name = code.name if hasattr(code, "name") else str(code)
        table[name] = table.get(name, 0) + 1

    async def _main(self) -> None:
        self._stop = asyncio.Event()
        options = (("grpc.use_local_subchannel_pool", 1),)  # a connection of its own each
        tasks = []
        for k in range(self.unauthenticated):
            channel = grpc.aio.insecure_channel(self.address, options=options)
            self._channels.append(channel)
            tasks.append(asyncio.ensure_future(self._anonymous(channel, k % 2 == 0)))
        for k in range(0, self.authenticated, self.per_connection):
            channel = grpc.aio.insecure_channel(self.address, options=options)
            self._channels.append(channel)
            for _ in range(min(self.per_connection, self.authenticated - k)):
                tasks.append(asyncio.ensure_future(self._no_start(channel)))
        await self._stop.wait()
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        for channel in self._channels:
            await channel.close()

    async def _anonymous(self, channel, use_reflection: bool) -> None:
        """One idle reflection or health-watch stream (reopened when it ends)."""
        while not self._stop.is_set():
            try:
                if use_reflection:
                    queue: asyncio.Queue = asyncio.Queue()
                    await queue.put(reflection_pb2.ServerReflectionRequest(list_services=""))

                    async def requests(queue=queue):
                        while True:
                            yield await queue.get()

                    call = reflection_pb2_grpc.ServerReflectionStub(channel) \
                        .ServerReflectionInfo(requests())  # fmt: skip
                else:
                    call = health_pb2_grpc.HealthStub(channel).Watch(
                        health_pb2.HealthCheckRequest(service=""))
                await call.read()
                self.open_unauth += 1
                try:
                    await call.read()  # idles until the server ends it
                finally:
                    self.open_unauth -= 1
                self._count(self.ended, await call.code())
            except grpc.RpcError as exc:
                self._count(self.refused, exc.code())
                await asyncio.sleep(0.5)

    async def _no_start(self, channel) -> None:
        """One authenticated StreamUnits call that never sends its StreamStart."""
        stub = pb_grpc.SemanticStreamStub(channel)
        while not self._stop.is_set():
            call = stub.StreamUnits(metadata=_metadata(self.token))
            self.open_auth += 1
            try:
                await call.read()
            except grpc.RpcError as exc:
                self._count(self.ended, exc.code())
            finally:
                self.open_auth -= 1
            code = await call.code()
            if code != grpc.StatusCode.DEADLINE_EXCEEDED:
                self._count(self.refused, code)
                await asyncio.sleep(1.0)


def idle_calls(target: AbuseTarget, unauthenticated: int = 1000, authenticated: int = 1000,
               probe_s: float = 10.0, settle_s: float = 60.0) -> dict:  # fmt: skip
    """Idle calls (see the module docstring) against health and a legitimate stream."""
    with tempfile.TemporaryDirectory(prefix="semcodec-abuse-") as tmp:
        idle_s = legit_stream_s(target, Path(tmp) / "idle")
        rss_before = rss_mib(target)
        with _IdleCalls(target.address, unauthenticated, authenticated, target.abuser) as calls:
            deadline = time.monotonic() + settle_s
            while calls.open_unauth < unauthenticated and time.monotonic() < deadline:
                time.sleep(0.2)
            time.sleep(2.0)  # the authenticated calls beyond a quota are refused meanwhile
            held = (calls.open_unauth, calls.open_auth)
            result: dict = {}
            prober = threading.Thread(
                target=lambda: result.update(health=health_probe(target.address, probe_s)))
            prober.start()
            loaded_s = legit_stream_s(target, Path(tmp) / "loaded")
            prober.join()
            rss_held = rss_mib(target)
            refused, ended = dict(calls.refused), dict(calls.ended)
    health = result["health"]
    p99 = percentile(health, 0.99)
    ratio = loaded_s / idle_s
    return {"attack": f"{unauthenticated} idle unauthenticated connections (reflection and "
                      f"health-watch streams) + {authenticated} idle authenticated StreamUnits "
                      "calls without StreamStart",
            "held": {"unauthenticated": held[0], "authenticated": held[1]},
            "refused": refused, "ended": ended,
            "health_p99_ms": round(p99, 2), "health_max_ms": round(max(health), 2),
            "legit_idle_s": round(idle_s, 2), "legit_loaded_s": round(loaded_s, 2),
            "ratio": round(ratio, 2),
            "rss_mib": [rss_before, rss_held],
            "measured": f"held {held[0]} + {held[1]}; health p99 {p99:.1f} ms; legitimate "
                        f"stream {loaded_s:.2f} s vs {idle_s:.2f} s idle (x{ratio:.2f})",
            "limit": "health p99 < 100 ms, legitimate stream at the idle server's speed",
            "ok": p99 < 100 and ratio < 1.5}  # fmt: skip


# ------------------------------------------------------------------------------ tenants


def _victim_acks(target: AbuseTarget, seconds: float, fps: float, folder: Path) -> list[float]:
    start = time.monotonic()
    record = run_stream(0, target.address, target.semc, start, start + seconds, fps, folder,
                        target.victim)  # fmt: skip
    if record["errors"]:
        raise AssertionError(f"the victim's stream failed: {record['errors'][:3]}")
    return record["ack_ms"]


def tenant_fairness(target: AbuseTarget, sessions: int, seconds: float = 30.0,
                    fps: float = 10.0, idle_s: float | None = None) -> dict:  # fmt: skip
    """The abuser takes ``sessions`` sessions (its quota) and one more (refused), each with
    an idle stream; the victim's ack p99 before and during. With ``idle_s`` (the server's
    ``--session-idle-s``) the abuser then goes quiet and the time until its sessions are put
    to rest is measured (from the metrics)."""
    header = read_stream(target.semc)[0].to_bytes()
    with tempfile.TemporaryDirectory(prefix="semcodec-abuse-") as tmp:
        before = _victim_acks(target, seconds, fps, Path(tmp) / "before")
        channel = grpc.insecure_channel(target.address)
        stub = pb_grpc.SemanticStreamStub(channel)
        md = _metadata(target.abuser)
        opened, refusal, streams = [], "", []
        for _ in range(sessions + 1):
            try:
                opened.append(stub.OpenSession(open_request(header), metadata=md,
                                               timeout=30).session_id)  # fmt: skip
            except grpc.RpcError as exc:
                refusal = f"{exc.code().name}: {exc.details()}"
        for sid in opened:
            start = pb.StreamRequest(start=pb.StreamStart(session_id=sid))
            hold = threading.Event()

            def requests(start=start, hold=hold):
                yield start
                hold.wait()

            call = stub.StreamUnits(requests(), metadata=md)
            next(call)  # attached
            streams.append((call, hold))
        during = _victim_acks(target, seconds, fps, Path(tmp) / "during")
        quiet_at = time.monotonic()
        for call, hold in streams:
            hold.set()
            call.cancel()
        rested_after = None
        if idle_s is not None and target.metrics is not None:
            while time.monotonic() - quiet_at < idle_s + 30:
                if (metric(target, "semcodec_sessions_active") or 0) == 0:
                    rested_after = time.monotonic() - quiet_at
                    break
                time.sleep(0.25)
        channel.close()
    p_before, p_during = percentile(before, 0.99), percentile(during, 0.99)
    change = (p_during - p_before) / p_before if p_before else 0.0
    row = {"attack": f"one tenant takes its quota ({sessions} sessions, each with an idle "
                     "stream) and asks for one more",
           "abuser_sessions": len(opened), "refusal": refusal,
           "victim_ack_p99_ms": [round(p_before, 2), round(p_during, 2)],
           "victim_ack_p50_ms": [round(percentile(before, 0.5), 2),
                                 round(percentile(during, 0.5), 2)],
           "victim_acks": [len(before), len(during)], "change": round(change, 3),
           "rested_after_s": None if rested_after is None else round(rested_after, 1),
           "measured": f"abuser holds {len(opened)} (next: {refusal[:60]}); victim ack p99 "
                       f"{p_before:.1f} -> {p_during:.1f} ms ({100 * change:+.0f} %; p50 "
                       f"{percentile(before, 0.5):.1f} -> {percentile(during, 0.5):.1f} ms, "
                       f"{len(before)} and {len(during)} acks)"
                       + ("" if rested_after is None
                          else f"; idle sessions put to rest {rested_after:.1f} s after the "
                               "abuser went quiet"),
           "limit": "ack p99 within 20 %; reaped within --session-idle-s + 10 s",
           "ok": len(opened) == sessions and "RESOURCE_EXHAUSTED" in refusal
                 and "tenant_max_sessions" in refusal and change <= 0.2
                 and (idle_s is None or (rested_after is not None
                                         and rested_after <= idle_s + 10))}  # fmt: skip
    return row


# ------------------------------------------------------------------------------ units


def _unit_chunk(seq: int, unit_size: int, offset: int, data: bytes,
                sha: bytes = b"") -> pb.StreamRequest:  # fmt: skip
    return pb.StreamRequest(chunk=pb.UnitChunk(
        seq=seq, kind=2, unit_size=unit_size, offset=offset, data=data,
        crc32=zlib.crc32(data), unit_sha256=sha if offset == 0 else b""))  # fmt: skip


def _session(stub, target: AbuseTarget, token: str | None) -> str:
    header = read_stream(target.semc)[0].to_bytes()
    return stub.OpenSession(open_request(header), metadata=_metadata(token),
                            timeout=30).session_id  # fmt: skip


def slow_client(target: AbuseTarget, seconds: float = 60.0, window_s: float = 30.0) -> dict:
    """A unit trickled in one byte a second (after a normal first unit would be: this is
    unit 0, declared 4096 bytes)."""
    with grpc.insecure_channel(target.address) as channel:
        stub = pb_grpc.SemanticStreamStub(channel)
        sid = _session(stub, target, target.abuser)
        start = time.monotonic()

        def requests():
            yield pb.StreamRequest(start=pb.StreamStart(session_id=sid))
            for offset in range(int(seconds)):
                yield _unit_chunk(0, 4096, offset, b"x", hashlib.sha256(b"").digest())
                time.sleep(1.0)

        code, details = "OK", ""
        try:
            for _ in stub.StreamUnits(requests(), metadata=_metadata(target.abuser),
                                      timeout=seconds + 30):  # fmt: skip
                pass
        except grpc.RpcError as exc:
            code, details = exc.code().name, exc.details()
        took = time.monotonic() - start
    return {"attack": "a unit sent 1 byte/s", "code": code, "details": details[:200],
            "cut_after_s": round(took, 1),
            "measured": f"{code} after {took:.1f} s",
            "limit": f"cut off (DEADLINE_EXCEEDED) within --progress-window-s ({window_s:.0f} s)"
                     " + a few s",
            "ok": code == "DEADLINE_EXCEEDED" and took <= window_s + 5}  # fmt: skip


def partial_units(target: AbuseTarget, streams: int = 3, send_mib: int = 60,
                  declared_mib: int = 64, chunk_kib: int = 1024) -> dict:  # fmt: skip
    """``streams`` streams each send ``send_mib`` MiB of a declared ``declared_mib``-MiB unit
    and stop there; the server's RSS before and while they hold."""
    before = rss_mib(target)
    holds, calls, sent = [], [], [0] * streams
    channel = grpc.insecure_channel(target.address)
    stub = pb_grpc.SemanticStreamStub(channel)
    data = os.urandom(chunk_kib * 1024)
    for k in range(streams):
        sid = _session(stub, target, target.victim)
        hold = threading.Event()

        def requests(sid=sid, hold=hold, k=k):
            yield pb.StreamRequest(start=pb.StreamStart(session_id=sid))
            for i in range(send_mib * 1024 // chunk_kib):
                yield _unit_chunk(0, declared_mib << 20, i * len(data), data, b"\0" * 32)
                sent[k] += len(data)
            hold.wait()

        call = stub.StreamUnits(requests(), metadata=_metadata(target.victim))
        holds.append(hold)
        calls.append(call)
    readers = [threading.Thread(target=_drain, args=(c,), daemon=True) for c in calls]
    for reader in readers:
        reader.start()
    deadline = time.monotonic() + 300
    peak = before or 0.0
    while sum(sent) < streams * (send_mib << 20) and time.monotonic() < deadline:
        peak = max(peak, rss_mib(target) or 0.0)
        time.sleep(0.2)
    time.sleep(1.0)  # the last chunks read by the server
    peak = max(peak, rss_mib(target) or 0.0)
    for hold, call in zip(holds, calls, strict=True):
        hold.set()
        call.cancel()
    channel.close()
    growth = None if before is None else peak - before
    return {"attack": f"{streams} streams send {send_mib} MiB of a declared {declared_mib}-MiB "
                      "unit and stop",
            "sent_mib": round(sum(sent) / (1 << 20), 1), "rss_mib": [before, round(peak, 1)],
            "rss_growth_mib": None if growth is None else round(growth, 1),
            "measured": f"sent {sum(sent) / (1 << 20):.0f} MiB; server RSS "
                        f"{before} -> {peak:.0f} MiB",
            "limit": "RSS grows < 50 MiB",
            "ok": growth is not None and growth < 50}  # fmt: skip


def _drain(call) -> None:
    """Reads a streaming call's replies until it ends (a cancelled call ends quietly)."""
    with contextlib.suppress(grpc.RpcError):
        for _ in call:
            pass


def markers(target: AbuseTarget, count: int = 10_000) -> dict:
    """``count`` dropped markers, seq 0, 1, 2, ... on a session of ``target.semc``."""
    frames = read_stream(target.semc)[0].num_frames
    with grpc.insecure_channel(target.address) as channel:
        stub = pb_grpc.SemanticStreamStub(channel)
        sid = _session(stub, target, target.victim)

        def requests():
            yield pb.StreamRequest(start=pb.StreamStart(session_id=sid))
            for seq in range(count):
                yield pb.StreamRequest(chunk=pb.UnitChunk(seq=seq, kind=2, dropped=True))

        start = time.monotonic()
        acked, code, details = 0, "OK", ""
        try:
            for reply in stub.StreamUnits(requests(), metadata=_metadata(target.victim),
                                          timeout=120):  # fmt: skip
                acked = reply.ack.next_seq
        except grpc.RpcError as exc:
            code, details = exc.code().name, exc.details()
        took = time.monotonic() - start
        results = stub.GetResults(pb.GetResultsRequest(session_id=sid),
                                  metadata=_metadata(target.victim), timeout=30)  # fmt: skip
    return {"attack": f"{count} dropped markers on a {frames}-frame stream",
            "acked": acked, "recorded": len(results.dropped_seqs), "code": code,
            "details": details[:200], "seconds": round(took, 2),
            "measured": f"{acked} taken, then {code}; {took:.2f} s",
            "limit": f"at most {frames + 1} taken (the frame count), < 5 s",
            "ok": acked <= frames + 1 and took < 5}  # fmt: skip


def long_ids(target: AbuseTarget, chars: int = 4_000_000) -> dict:
    """A session id of ``chars`` characters in each call that takes one; the longest error
    message, and the longest line of the server's log (when its path is known)."""
    sid = "a" * chars
    longest, codes = 0, set()
    options = (("grpc.max_send_message_length", 8 << 20),)
    with grpc.insecure_channel(target.address, options=options) as channel:
        stub = pb_grpc.SemanticStreamStub(channel)
        header = read_stream(target.semc)[0].to_bytes()
        md = _metadata(target.victim)
        start = pb.StreamRequest(start=pb.StreamStart(session_id=sid))
        calls = [lambda: stub.OpenSession(open_request(header, sid), metadata=md, timeout=30),
                 lambda: stub.GetResults(pb.GetResultsRequest(session_id=sid), metadata=md,
                                         timeout=30),
                 lambda: stub.CloseSession(pb.CloseSessionRequest(session_id=sid),
                                           metadata=md, timeout=30),
                 lambda: list(stub.StreamUnits(iter([start]), metadata=md, timeout=30))]
        for call in calls:
            try:
                call()
            except grpc.RpcError as exc:
                codes.add(exc.code().name)
                longest = max(longest, len(exc.details() or ""))
    log_line = None
    if target.log is not None and target.log.is_file():
        with open(target.log, "rb") as fh:
            log_line = max((len(line) for line in fh), default=0)
    return {"attack": f"a {chars:,}-character session id in every call",
            "codes": sorted(codes), "longest_error": longest, "longest_log_line": log_line,
            "measured": f"{'/'.join(sorted(codes))}; longest error {longest} chars, longest "
                        f"log line {log_line} bytes",
            "limit": "no error or log line over 2 KB",
            "ok": longest <= 2048 and (log_line is None or log_line <= 2048)}  # fmt: skip


# ------------------------------------------------------------------------------ the table


def table(rows: list[dict]) -> str:
    """The rows as a Markdown table."""
    lines = ["| attack | measured | limit | held |", "|---|---|---|---|"]
    lines += [f"| {r['attack']} | {r['measured']} | {r['limit']} | "
              f"{'yes' if r['ok'] else 'NO'} |" for r in rows]  # fmt: skip
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python tools/loadtest/abuse.py",
                                     description=__doc__.split("\n\n")[0])  # fmt: skip
    parser.add_argument("--target", required=True)
    parser.add_argument("--semc", type=Path, required=True)
    parser.add_argument("--abuser-token")
    parser.add_argument("--victim-token")
    parser.add_argument("--metrics")
    parser.add_argument("--log", type=Path)
    parser.add_argument("--idle", type=int, default=1000, help="idle calls of each kind")
    parser.add_argument("--quota-sessions", type=int, default=8)
    parser.add_argument("--session-idle-s", type=float)
    parser.add_argument("--progress-window-s", type=float, default=30.0)
    parser.add_argument("--slow-s", type=float, default=60.0)
    parser.add_argument("--partial-mib", type=int, default=60)
    parser.add_argument("--markers", type=int, default=10_000)
    parser.add_argument("--out", type=Path, help="rows as JSON")
    args = parser.parse_args(argv)
    target = AbuseTarget(args.target, args.semc, args.abuser_token, args.victim_token,
                         args.metrics, args.log)
    attacks = [lambda: idle_calls(target, args.idle, args.idle),
               lambda: tenant_fairness(target, args.quota_sessions,
                                       idle_s=args.session_idle_s),
               lambda: slow_client(target, args.slow_s, args.progress_window_s),
               lambda: partial_units(target, send_mib=args.partial_mib),
               lambda: markers(target, args.markers),
               lambda: long_ids(target)]  # fmt: skip
    rows = []
    for attack in attacks:
        try:
            rows.append(attack())
        except Exception as exc:  # one attack failing does not hide the others
            rows.append({"attack": getattr(attack, "__name__", "attack"),
                         "measured": f"failed: {type(exc).__name__}: {str(exc)[:300]}",
                         "limit": "", "ok": False})  # fmt: skip
        print(f"{rows[-1]['attack']}: {rows[-1]['measured']}", file=sys.stderr, flush=True)
    if args.out is not None:
        args.out.write_text(json.dumps(rows, indent=1) + "\n")
    print(table(rows))
    return 0 if all(r["ok"] for r in rows) else 1


if __name__ == "__main__":
    with contextlib.suppress(KeyboardInterrupt):
        sys.exit(main())
