"""The HTTP port saturated under 1,024 open files (issue 53, item 1): a real ``cloud-decoder
serve`` whose open-files limit is 1,024 (soft and hard: nothing to raise, as under a
systemd service's default) takes 1,100 idle TCP connections to its HTTP port, without a
token, from one address and then from 35; meanwhile gRPC health, a new ``OpenSession`` and
an authenticated dashboard request each answer within 1 s, and the idle connections are
closed within the header timeout. Real sockets on 127.0.0.0/8 (the loopback answers from
any of its addresses), bounded in count and time."""

from __future__ import annotations

import http.client
import os
import resource
import socket
import subprocess
import sys
import time

import grpc
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc

from semcodec.codec.bitstream import read_stream
from semcodec.edge.stream.client import ChannelSecurity, open_request

from .conftest import TOKEN_A, TOKEN_B, free_port, stub_for, tokens_file, wait_serving

IDLE, OPEN_FILES, HEADER_S = 1100, 1024, 10.0


def _limit_open_files() -> None:  # in the server's process, before it runs
    resource.setrlimit(resource.RLIMIT_NOFILE, (OPEN_FILES, OPEN_FILES))


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard != resource.RLIM_INFINITY and hard < 3 * IDLE:
        pytest.skip(f"the test's own open-files limit ({hard}) cannot hold the connections")
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    tmp = tmp_path_factory.mktemp("fds")
    grpc_port, http_port = free_port(), free_port()
    argv = [sys.executable, "-m", "semcodec.cloud.cli", "serve", "--out", str(tmp / "out"),
            "--listen", f"127.0.0.1:{grpc_port}", "--http-listen", f"127.0.0.1:{http_port}",
            "--metrics-listen", "", "--tokens", str(tokens_file(tmp)), "--decoder", "warp",
            "--notice-s", "0"]  # fmt: skip
    log = open(tmp / "server.log", "w")  # noqa: SIM115 (closed below)
    proc = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT,
                            preexec_fn=_limit_open_files)  # fmt: skip
    try:
        wait_serving(grpc_port, proc)
        yield {"grpc": f"127.0.0.1:{grpc_port}", "http": http_port, "pid": proc.pid,
               "log": tmp / "server.log"}  # fmt: skip
    finally:
        proc.terminate()
        proc.wait(60)
        log.close()
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))


def _idle(port: int, sources: list[str]) -> list[socket.socket]:
    """``IDLE`` connections that send nothing, from ``sources`` in turn, each established
    before the next is made (a burst would overflow the listen backlog: its connections
    would wait in the kernel, never reaching the server)."""
    held = []
    for k in range(IDLE):
        sock = socket.socket()
        sock.bind((sources[k % len(sources)], 0))
        sock.settimeout(10)
        sock.connect(("127.0.0.1", port))
        sock.setblocking(False)
        held.append(sock)
    return held


def _probes(served, semc) -> dict[str, float]:
    """Seconds each legitimate request took: gRPC health, a new session, the dashboard
    (tenant beta, from 127.0.0.2)."""
    took = {}
    start = time.monotonic()
    with grpc.insecure_channel(served["grpc"]) as channel:
        reply = health_pb2_grpc.HealthStub(channel).Check(health_pb2.HealthCheckRequest(),
                                                          timeout=5)  # fmt: skip
        assert reply.status == health_pb2.HealthCheckResponse.SERVING
    took["health"] = time.monotonic() - start
    channel, stub = stub_for(served["grpc"], ChannelSecurity(token=TOKEN_A))
    with channel:
        start = time.monotonic()
        header = read_stream(semc)[0].to_bytes()
        assert stub.OpenSession(open_request(header), timeout=5).session_id
        took["open_session"] = time.monotonic() - start
    start = time.monotonic()
    conn = http.client.HTTPConnection("127.0.0.1", served["http"], timeout=5,
                                      source_address=("127.0.0.2", 0))  # fmt: skip
    try:
        conn.request("GET", "/", headers={"Authorization": f"Bearer {TOKEN_B}"})
        response = conn.getresponse()
        response.read()
        assert response.status == 200, response.status
    finally:
        conn.close()
    took["dashboard"] = time.monotonic() - start
    return took


def _closed(held: list[socket.socket], seconds: float) -> int:
    """How many of ``held`` the server closed within ``seconds`` (each read to its end)."""
    deadline, closed, left = time.monotonic() + seconds, 0, list(held)
    while left and time.monotonic() < deadline:
        still = []
        for sock in left:
            try:
                while chunk := sock.recv(65536):
                    del chunk
                closed += 1
            except BlockingIOError:
                still.append(sock)
            except OSError:  # reset
                closed += 1
        left = still
        time.sleep(0.1)
    return closed


@pytest.mark.parametrize("addresses", [1, 35])
def test_idle_connections_under_1024_open_files_leave_everyone_served(served, semc, addresses,
                                                                     capsys):  # fmt: skip
    sources = [f"127.0.0.{10 + k}" for k in range(addresses)] if addresses > 1 else ["127.0.0.1"]
    start = time.monotonic()
    held = _idle(served["http"], sources)
    made = time.monotonic()  # the last one: each must be closed within the header timeout
    try:
        time.sleep(1.0)  # the server has taken (or refused) them all
        took = _probes(served, semc)
        files = len(os.listdir(f"/proc/{served['pid']}/fd"))
        closed = _closed(held, HEADER_S + 2 - (time.monotonic() - made))
        after = time.monotonic() - made
    finally:
        for sock in held:
            sock.close()
    with capsys.disabled():
        print(f"\n{IDLE} idle HTTP connections from {addresses} address(es), the server at "
              f"{files} of {OPEN_FILES} open files: " + ", ".join(
                  f"{k} {1000 * v:.0f} ms" for k, v in took.items())
              + f"; made in {made - start:.1f} s, {closed} of them closed by the server "
              f"within {after:.1f} s of the last")  # fmt: skip
    assert max(took.values()) < 1.0, took
    assert files < OPEN_FILES
    assert closed == IDLE  # refused (503) at once, evicted, or timed out
