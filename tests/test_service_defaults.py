"""The service's shipped defaults under attack (issue 41, item 0): every test here runs a
server with ``ServeSettings``' defaults (only the address, the output folder and, where
tenants are needed, a tokens file are given) and attacks it over real gRPC on 127.0.0.1, or
moves the clock of the session core built from those defaults.

Each would fail on the defaults before issue 41: a server on 0.0.0.0 served anyone; one
tenant could take all 64 sessions; 1,024 idle reflection streams locked health Watch; empty
sessions stayed on disk for good; a superseded stream kept writing its partial unit beyond
the stored quota; a killed server's partial units and hidden output folders stayed.
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
import os
import signal
import subprocess
import sys
import time
import zlib
from pathlib import Path

import grpc
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc
from grpc_reflection.v1alpha import reflection_pb2_grpc

from semcodec.cloud.cli import main as cloud_main
from semcodec.cloud.service.config import ConfigError, ServeSettings, load_settings
from semcodec.cloud.service.limits import ServiceLimits
from semcodec.cloud.service.manager import SessionManager
from semcodec.cloud.service.server import DecoderServer, who_can_connect
from semcodec.codec.bitstream import read_stream
from semcodec.edge.stream.client import ChannelSecurity, StreamClient, open_request, unit_chunks
from semcodec.edge.stream.spool import SpooledUnit
from semcodec.protos import semcodec_v1_pb2 as pb

from .conftest import (
    TOKEN_A,
    TOKEN_B,
    Requests,
    free_port,
    spool_of,
    stub_for,
    tokens_file,
    wait_for,
)

SERVING = health_pb2.HealthCheckResponse.SERVING


def _serve(tmp_path: Path, **settings) -> DecoderServer:
    """A server with the shipped defaults, but for its address and folder."""
    values = {"out": tmp_path / "out", "listen": "127.0.0.1:0", "metrics_listen": "",
              **settings}  # fmt: skip
    return DecoderServer(ServeSettings(**values)).start()


# ------------------------------------------------------------------------------ who connects


@pytest.mark.parametrize("listen", ["0.0.0.0:50051", "[::]:50051", "camera-hub.example:50051",
                                    "192.168.1.5:50051", "[2001:db8::1]:50051"])
def test_serve_beyond_the_loopback_without_tokens_refuses_to_start(tmp_path, listen, capsys):
    with pytest.raises(ConfigError, match="--allow-anonymous-remote"):
        load_settings({"out": tmp_path, "listen": listen}, environ={})
    # the command line: exit status 2, one line naming the flag, nothing bound or written
    assert cloud_main(["serve", "--listen", listen, "--out", str(tmp_path / "o")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "--allow-anonymous-remote" in err
    assert not (tmp_path / "o").exists()
    # asked for by name, or with tokens: accepted (not bound here)
    load_settings({"out": tmp_path, "listen": listen, "allow_anonymous_remote": True}, environ={})
    load_settings({"out": tmp_path, "listen": listen, "tokens": tokens_file(tmp_path)}, environ={})


@pytest.mark.parametrize("listen", ["127.0.0.1:0", "127.0.0.2:0", "[::1]:0", "localhost:0"])
def test_loopback_needs_no_flag(tmp_path, listen):
    load_settings({"out": tmp_path, "listen": listen}, environ={})


def test_the_log_says_who_can_connect_to_each_port(tmp_path, caplog):
    caplog.set_level(logging.INFO, logger="semcodec.cloud.service")
    server = _serve(tmp_path, http_listen="127.0.0.1:0", metrics_listen="127.0.0.1:0")
    server.stop(0)
    lines = [r.getMessage() for r in caplog.records if "who can connect" in r.getMessage()]
    assert lines == [
        f"who can connect to 127.0.0.1:{server.port} (gRPC: sessions and streams; health and "
        "reflection without a token): anyone, without a token (tenant 'default'), from this "
        "machine only (loopback), over plaintext",
        f"who can connect to 127.0.0.1:{server.http_port} (HTTP: dashboard, live video, JSON "
        "API, login): anyone, without a token (tenant 'default'), from this machine only "
        "(loopback), over plaintext",
        f"who can connect to 127.0.0.1:{server.metrics_port} (Prometheus /metrics: counts, no "
        "session ids, no token asked): anyone, without a token, from this machine only "
        "(loopback), over plaintext"]  # fmt: skip
    # the audit's case: the gRPC port on the loopback, the HTTP port everywhere with tokens
    settings = ServeSettings(out=tmp_path, tokens=tokens_file(tmp_path),
                             http_listen="0.0.0.0:8080", metrics_listen="")  # fmt: skip
    grpc_line, http_line = who_can_connect(settings, ["alpha", "beta", "beta"])
    assert "holders of the 3 token(s) of --tokens (tenants: alpha, beta)" in http_line
    assert "127.0.0.1:50051" in grpc_line and "loopback" in grpc_line
    assert "0.0.0.0:8080 (HTTP" in http_line and "any machine that reaches 0.0.0.0" in http_line
    assert "use --tls-cert" in http_line and "use --tls-cert" not in grpc_line
    anyone = ServeSettings(out=tmp_path, listen="0.0.0.0:1", allow_anonymous_remote=True,
                           metrics_listen="0.0.0.0:9464")  # fmt: skip
    grpc_line, metrics_line = who_can_connect(anyone, None)
    assert "as asked by --allow-anonymous-remote" in grpc_line
    assert metrics_line.startswith("who can connect to 0.0.0.0:9464 (Prometheus")
    assert "any machine that reaches 0.0.0.0" in metrics_line


# ------------------------------------------------------------------------------ tenants


def test_a_tenant_opening_sessions_until_refused_leaves_another_able_to_stream(tmp_path, semc):
    server = _serve(tmp_path, tokens=tokens_file(tmp_path))
    target = f"127.0.0.1:{server.port}"
    try:
        channel, alpha = stub_for(target, ChannelSecurity(token=TOKEN_A))
        request = open_request(read_stream(semc)[0].to_bytes())
        opened = 0
        with pytest.raises(grpc.RpcError) as refused:
            while opened <= server.settings.max_sessions:
                alpha.OpenSession(request, timeout=30)
                opened += 1
        assert refused.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
        assert "tenant_max_sessions" in refused.value.details()
        assert opened == server.settings.tenant_max_sessions < server.settings.max_sessions
        channel.close()
        results = StreamClient(target, spool_of(semc, tmp_path / "beta"),
                               ChannelSecurity(token=TOKEN_B)).run()  # fmt: skip
        assert results.complete and results.output_dir.startswith("beta/")
    finally:
        server.stop(0)


def test_idle_unauthenticated_calls_leave_health_and_streams_working(tmp_path, semc):
    """1,100 idle reflection streams and 200 idle health watches (1,300 calls over 50
    connections): health Check and a new Watch answer, and an authenticated stream runs.
    The pools are measured apart from the cap per address (every call here comes from
    127.0.0.1; tests/test_service_watch.py attacks that cap)."""
    server = _serve(tmp_path, tokens=tokens_file(tmp_path), max_watch_streams_per_peer=0)
    target = f"127.0.0.1:{server.port}"
    try:
        held, watch, stream = asyncio.run(_idle_attack(target, semc, tmp_path, 1100, 200))
    finally:
        server.stop(0)
    assert held["reflection"] == server.settings.max_open_streams  # the rest refused
    assert held["watch"] == 200  # all held: their own pool
    assert watch == SERVING and stream.complete


async def _idle_attack(target: str, semc: Path, tmp_path: Path, reflections: int,
                       watches: int):  # fmt: skip
    # a connection each (channels to one target share one otherwise): 32 calls at most each
    own = [("grpc.use_local_subchannel_pool", 1)]
    channels = [grpc.aio.insecure_channel(target, options=own) for _ in range(50)]
    calls = {"reflection": [], "watch": []}
    try:
        for i in range(reflections):
            stub = reflection_pb2_grpc.ServerReflectionStub(channels[i % 35])
            calls["reflection"].append(stub.ServerReflectionInfo())  # sends nothing
        for i in range(watches):
            stub = health_pb2_grpc.HealthStub(channels[35 + i % 15])
            calls["watch"].append(stub.Watch(health_pb2.HealthCheckRequest(service="")))
        for call in calls["watch"]:  # each watch answers once, then stays open
            assert (await call.read()).status == SERVING
        await asyncio.sleep(2.0)  # refusals come back; the held calls stay open
        held = {kind: sum(not c.done() for c in group) for kind, group in calls.items()}
        async with grpc.aio.insecure_channel(target) as probe:
            health = health_pb2_grpc.HealthStub(probe)
            check = await health.Check(health_pb2.HealthCheckRequest(), timeout=5)
            assert check.status == SERVING
            new_watch = health.Watch(health_pb2.HealthCheckRequest(service=""), timeout=5)
            watch = (await new_watch.read()).status
            new_watch.cancel()
        client = StreamClient(target, spool_of(semc, tmp_path / "legit"),
                              ChannelSecurity(token=TOKEN_A))  # fmt: skip
        stream = await asyncio.wait_for(asyncio.to_thread(client.run), 120)
        return held, watch, stream
    finally:
        for group in calls.values():
            for call in group:
                call.cancel()
        for channel in channels:
            await channel.close()


# ------------------------------------------------------------------------------ retention


def test_empty_sessions_are_gone_from_disk_after_the_retention(tmp_path, semc):
    """40 sessions opened empty (20 closed, 20 left open until put to rest) under the
    shipped limits: all of their files are gone once the retention has passed."""
    from semcodec.cloud.service.messages import OpenRequest
    from semcodec.codec.reconstruct import available_reconstructors

    assert "warp" in available_reconstructors()  # loaded before the decoder threads race
    limits = ServiceLimits.of(ServeSettings(out=tmp_path / "out"))
    assert limits.retain_s > 0 and limits.session_idle_s > 0  # on by default
    manager = SessionManager(tmp_path / "out", limits)
    header = read_stream(semc)[0].to_bytes()
    try:
        rested = 0
        for _ in range(4):  # within the tenant's session quota each time
            ids = [manager.open("t", OpenRequest(header=header)).session_id for _ in range(10)]
            for sid in ids[:5]:
                manager.close("t", sid, 30)
            rested += len(manager.reap(time.monotonic() + limits.session_idle_s + 1))
        assert rested == 20
        assert len(list((tmp_path / "out" / ".sessions" / "t").iterdir())) == 40
        assert manager.sweep(time.time() + limits.retain_s - 60) == []  # not yet
        assert len(manager.sweep(time.time() + limits.retain_s + 1)) == 40
    finally:
        manager.shutdown(5)
    left = [p for p in (tmp_path / "out").rglob("*")]
    assert left == [tmp_path / "out" / ".sessions"], left


# ------------------------------------------------------------------------------ partial units


def _first_chunk(seq: int, unit_size: int, nbytes: int) -> pb.StreamRequest:
    """The first chunk of a unit of ``unit_size`` bytes (``nbytes`` of it; its sha256 is of
    no real unit: the unit never completes)."""
    data = os.urandom(nbytes)
    return pb.StreamRequest(chunk=pb.UnitChunk(
        seq=seq, kind=1, unit_size=unit_size, offset=0, data=data, crc32=zlib.crc32(data),
        unit_sha256=hashlib.sha256(b"never completed").digest()))  # fmt: skip


def _start(stub, session_id: str):
    requests = Requests()
    requests.put(pb.StreamRequest(start=pb.StreamStart(session_id=session_id)))
    replies = stub.StreamUnits(iter(requests), timeout=60)
    first = next(replies)  # the server's answer to the start: no unit of it is stored yet
    assert first.HasField("ack") and first.ack.next_seq == 0, first
    return requests, replies


def _partials(state_dir: Path) -> list[Path]:
    return sorted(state_dir.glob("unit.partial*"))





def test_a_superseded_stream_ends_at_once_and_partial_units_count_in_the_stored_quota(tmp_path, semc):  # noqa: E501
    """A tenant with a 1-MiB stored quota: a unit in progress holds its declared size (so a
    second one that would pass the quota is refused); a newer stream on the session ends the
    older one at once and removes its partial unit; the disk never holds more than the
    quota."""
    server = _serve(tmp_path, tokens=tokens_file(tmp_path, " max_stored_mib=1"))
    target, out = f"127.0.0.1:{server.port}", tmp_path / "out"
    quota, size = 1 << 20, 700 << 10
    try:
        channel, alpha = stub_for(target, ChannelSecurity(token=TOKEN_A))
        header = read_stream(semc)[0].to_bytes()
        one, two = (alpha.OpenSession(open_request(header)).session_id for _ in range(2))
        state = out / ".sessions" / "alpha"
        first, first_replies = _start(alpha, one)
        first.put(_first_chunk(0, size, 400 << 10))
        assert wait_for(lambda: sum(p.stat().st_size for p in _partials(state / one)) > 0)
        second, second_replies = _start(alpha, two)
        second.put(_first_chunk(0, size, 1024))  # 700 + 700 KiB > 1 MiB (nothing on disk yet)
        with pytest.raises(grpc.RpcError) as refused:
            next(second_replies)
        assert refused.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
        assert "tenant_max_stored_bytes" in refused.value.details()
        # a newer stream takes session one: the older ends now, not when it next sends
        took = time.monotonic()
        newer, newer_replies = _start(alpha, one)
        with pytest.raises(grpc.RpcError) as ended:
            next(first_replies)
        assert ended.value.code() == grpc.StatusCode.ABORTED and time.monotonic() - took < 5
        assert wait_for(lambda: not _partials(state / one))  # its partial unit is gone
        newer.put(_first_chunk(0, size, 600 << 10))  # its place in the quota was given back
        assert wait_for(lambda: sum(p.stat().st_size for p in _partials(state / one)) > 0)
        on_disk = sum(p.stat().st_size for p in state.rglob("*") if p.is_file())
        assert on_disk <= quota, on_disk
        for requests in (first, second, newer):
            requests.put(None)
        channel.close()
    finally:
        server.stop(0)
    assert not list(out.rglob("unit.partial*"))


# ------------------------------------------------------------------------------ kill -9


def _spawn(out: Path, port: int, log: Path) -> subprocess.Popen:
    argv = [sys.executable, "-m", "semcodec.cloud.cli", "serve", "--listen",
            f"127.0.0.1:{port}", "--out", str(out), "--metrics-listen", ""]  # fmt: skip
    with open(log, "w") as fh:
        proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=fh)
    deadline = time.monotonic() + 120
    while "who can connect" not in log.read_text():
        assert proc.poll() is None and time.monotonic() < deadline, log.read_text()
        time.sleep(0.05)
    return proc


def _leftovers(out: Path) -> list[Path]:
    return [p for p in out.rglob("*") if p.name.startswith("unit.partial")
            or p.name.endswith(".partial") or p.name.endswith(".tmp")]  # fmt: skip


def test_nothing_of_a_killed_server_is_left_after_a_restart_and_resume(tmp_path, semc):
    out, port = tmp_path / "out", free_port()
    target = f"127.0.0.1:{port}"
    proc = _spawn(out, port, tmp_path / "first.log")
    try:
        channel, stub = stub_for(target)
        header, units = read_stream(semc)
        units = list(units)
        sid = stub.OpenSession(open_request(header.to_bytes())).session_id
        requests, replies = _start(stub, sid)
        # unit 0 whole (the decoder opens its outputs for it), unit 1 left half-sent
        first = SpooledUnit(0, int(units[0].kind), 0, units[0].to_bytes())
        for chunk in unit_chunks(first, 1 << 20):
            requests.put(chunk)
        assert next(replies).ack.next_seq == 1
        requests.put(_first_chunk(1, 4096, 2048))
        state = out / ".sessions" / "default" / sid
        assert wait_for(lambda: _partials(state))
        assert wait_for(lambda: list((out / "default").glob(f".{sid}.*.partial")))
        os.kill(proc.pid, signal.SIGKILL)  # not reaped yet: the restart comes at once
        requests.put(None)
        channel.close()
        second = _spawn(out, port, tmp_path / "second.log")
    finally:
        proc.kill()
        proc.wait()
    try:
        assert _leftovers(out) == []  # cleaned at start-up, before any resume
        spool = spool_of(semc, tmp_path / "spool")
        spool.set_session(sid)
        results = StreamClient(target, spool).run()
        assert results.complete and results.session_id == sid
        assert (state / "stream.semc").read_bytes() == semc.read_bytes()
    finally:
        second.send_signal(signal.SIGTERM)
        assert second.wait(60) == 0
    assert _leftovers(out) == []


def test_start_up_leaves_another_machines_partials_on_shared_storage(tmp_path):
    """A dead process id means something only on its own machine: at start-up a server
    removes its own machine's leftovers, not those another replica (another host on the same
    --out) may still be writing; taking a session over removes them all."""
    from semcodec.cloud.outputs import HOST_TAG
    from semcodec.cloud.service.store import leftovers

    dead = _dead_pid()
    state, out = tmp_path / ".sessions" / "t" / ("a" * 32), tmp_path / "t" / ("a" * 32)
    state.mkdir(parents=True)
    out.parent.mkdir(parents=True)
    ours = [state / f"unit.partial.{dead}-{HOST_TAG}.1", out.parent / f".{out.name}.{dead}-"
            f"{HOST_TAG}-0123abcd.partial"]  # fmt: skip
    theirs = [state / f"unit.partial.{dead}-feedf00d.2", out.parent / f".{out.name}.{dead}-"
              "feedf00d-0123abcd.partial"]  # fmt: skip
    alive = [state / f"unit.partial.{os.getpid()}-{HOST_TAG}.3"]
    for path in ours + theirs + alive:
        path.mkdir() if path.name.endswith(".partial") else path.write_bytes(b"x")
    assert sorted(leftovers(state, out, everyone=False)) == sorted(ours)
    assert sorted(leftovers(state, out, everyone=True)) == sorted(ours + theirs)


def _dead_pid() -> int:
    """The id of a process that has ended (and been reaped)."""
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    return proc.pid
