"""The HTTP front door's connections bounded (issue 53, items 1, 3, 5 and 8 in part), over
real sockets on 127.0.0.1, bounded in count and time: a connection that sends no request
head, or dribbles one, is closed within the header timeout, an idle keep-alive connection
within the keep-alive timeout, a body that does not come gets 408; past the per-address cap
a connection gets 503 and is closed while gRPC health still answers; malformed requests
write one log line, not a traceback each; a stopped server restarts at once on the same
ports over a TIME_WAIT, and a taken port fails a start in a moment with one line."""

from __future__ import annotations

import logging
import socket
import subprocess
import sys
import time

import grpc
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc

from semcodec.cloud.service import server as server_module
from semcodec.cloud.service.front import ConnectionGate, raise_open_files

from .conftest import free_port, start_server

HEAD = b"GET /api/sessions HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"


def _start(tmp_path, monkeypatch, **settings):
    """A server with its front door (no tokens: the loopback), the decoder's networks not
    loaded (no session is opened here)."""
    monkeypatch.setattr(server_module, "check_decoder", lambda text: None)
    values = {"http_listen": "127.0.0.1:0", **settings}
    return start_server(tmp_path, **values)


def _connect(port: int) -> socket.socket:
    sock = socket.create_connection(("127.0.0.1", port), timeout=10)
    return sock


def _closed_within(sock: socket.socket, seconds: float) -> float | None:
    """Seconds until the server closed ``sock`` (reading all it sent), None if it did not
    within ``seconds``."""
    start = time.monotonic()
    sock.settimeout(seconds)
    try:
        while sock.recv(65536):
            pass
    except TimeoutError:
        return None
    except ConnectionResetError:
        pass
    return time.monotonic() - start


def _answer(sock: socket.socket, request: bytes = HEAD) -> bytes:
    """The status line and headers of the answer to ``request`` on ``sock``."""
    sock.sendall(request)
    data = b""
    while b"\r\n\r\n" not in data:
        got = sock.recv(65536)
        assert got, f"closed after {data!r}"
        data += got
    return data


@pytest.fixture(scope="module")
def door(tmp_path_factory):
    """A server whose front door waits 1 s for a first head or a body, 2 s for the next
    request, and takes 3 connections per address."""
    with pytest.MonkeyPatch.context() as monkeypatch:
        server = _start(tmp_path_factory.mktemp("front"), monkeypatch, http_header_s=1.0,
                        http_keepalive_s=2.0, http_body_s=1.0,
                        http_max_connections_per_peer=3)  # fmt: skip
    yield server
    server.stop(0)


def test_silent_and_dribbling_connections_are_closed_within_the_header_timeout(door):
    port = door.http_port
    silent, dribbling = _connect(port), _connect(port)
    try:
        dribbling.sendall(b"GET / HTTP/1.1\r\n")
        start = time.monotonic()
        for _ in range(3):  # a header line every 0.3 s: never a complete head
            time.sleep(0.3)
            try:
                dribbling.sendall(b"X-A: b\r\n")
            except OSError:
                break
        assert _closed_within(silent, 5) is not None
        assert _closed_within(dribbling, 5) is not None
        assert time.monotonic() - start < 4
        assert door.front_door.gate.timed_out >= 2
    finally:
        silent.close()
        dribbling.close()
    with _connect(port) as sock:  # a request in time is answered
        assert _answer(sock).startswith(b"HTTP/1.1 200")


def test_an_idle_keepalive_connection_is_closed_and_a_slow_body_gets_408(door):
    port = door.http_port
    with _connect(port) as sock:
        assert _answer(sock).startswith(b"HTTP/1.1 200")
        took = _closed_within(sock, 5)  # idle after its answer: the keep-alive timeout
        assert took is not None and 1.0 < took < 5
    with _connect(port) as sock:
        head = _answer(sock, b"POST /login HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: "
                       b"application/x-www-form-urlencoded\r\nContent-Length: 100\r\n\r\n"
                       b"token=abc")  # fmt: skip
        assert head.startswith(b"HTTP/1.1 408")


def test_past_the_per_address_cap_a_connection_gets_503_and_grpc_still_answers(door):
    port = door.http_port
    held = [_connect(port) for _ in range(3)]
    try:
        for sock in held:  # answered, then kept alive for 2 s
            assert _answer(sock).startswith(b"HTTP/1.1 200")
        with grpc.insecure_channel(f"127.0.0.1:{door.port}") as channel:
            reply = health_pb2_grpc.HealthStub(channel).Check(
                health_pb2.HealthCheckRequest(), timeout=2)  # fmt: skip
            assert reply.status == health_pb2.HealthCheckResponse.SERVING
        refused = []
        for _ in range(5):
            with _connect(port) as sock:
                sock.settimeout(5)
                data = b""
                while chunk := sock.recv(4096):
                    data += chunk
                refused.append(data)
        assert all(d.startswith(b"HTTP/1.1 503") for d in refused), refused
        assert b"http_max_connections_per_peer" in refused[0]
    finally:
        for sock in held:
            sock.close()
    gate = door.front_door.gate
    assert gate.refused.total >= 5
    deadline = time.monotonic() + 5
    while gate.open and time.monotonic() < deadline:
        time.sleep(0.05)
    with _connect(port) as sock:  # the places are given back
        assert _answer(sock).startswith(b"HTTP/1.1 200")


def test_the_cap_in_all_refuses_past_it_and_gives_places_back():
    gate = ConnectionGate(max_connections=2, per_peer=0, header_s=1.0)
    assert gate.admit("a") is None and gate.admit("b") is None
    assert "http_max_connections" in gate.admit("c")
    gate.release("a")
    assert gate.admit("c") is None and gate.open == 2 and dict(gate.peers) == {"b": 1, "c": 1}


MALFORMED = [b"GET / HTTP/1.1\r\nHost: x\r\nBad Header\r\n\r\n",
             b"GET / HTTP/1.1\r\nHost: x\r\nContent-Length: abc\r\n\r\n",
             b"GET /\x00 HTTP/1.1\r\nHost: x\r\n\r\n",
             b"GET / HTTP/9.9\r\nHost: x\r\n\r\n",
             b"GET / HTTP/1.1\r\nHost: x\r\nX-Big: " + b"x" * 20000 + b"\r\n\r\n",
             b"POST /login HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n"]


def test_malformed_requests_are_refused_with_one_log_line_not_tracebacks(door, caplog):
    caplog.set_level(logging.DEBUG, logger="aiohttp")
    caplog.set_level(logging.INFO, logger="semcodec.cloud.service")
    statuses = []
    for request in MALFORMED * 10:
        with _connect(door.http_port) as sock:
            sock.settimeout(5)
            sock.sendall(request)
            data = b""
            try:
                while chunk := sock.recv(4096):
                    data += chunk
            except ConnectionResetError:
                pass
            statuses.append(data[:12])
    assert all(s.startswith((b"HTTP/1.1 400", b"HTTP/1.0 400", b"HTTP/1.1 431"))
               for s in statuses), set(statuses)  # fmt: skip
    shown = [r for r in caplog.records if r.levelno >= logging.INFO]
    assert len(shown) <= 2, [r.getMessage() for r in shown]
    assert not any(r.exc_info for r in shown) and "Traceback" not in caplog.text
    assert door.front_door.server_log.malformed.total >= 50


def test_session_ids_are_matched_whole(door):
    sid = "0" * 32  # "$" took a trailing newline
    with _connect(door.http_port) as sock:
        assert _answer(sock, f"GET /api/sessions/{sid}%0A HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"
                       .encode()).startswith(b"HTTP/1.1 400")  # fmt: skip


def test_without_tokens_only_the_loopback_names_are_answered(door):
    """DNS rebinding: a page of evil.example whose name resolves to 127.0.0.1 sends its own
    name as Host, and gets nothing."""
    port = door.http_port
    for host, status in [("127.0.0.1", 200), (f"127.0.0.1:{port}", 200), ("localhost", 200),
                         (f"localhost.:{port}", 200), (f"[::1]:{port}", 200),
                         ("evil.example", 421), (f"evil.example:{port}", 421),
                         ("localhost.evil.example", 421), ("127.0.0.1:x", 421),
                         ("0.0.0.0", 421)]:  # fmt: skip
        with _connect(port) as sock:
            head = _answer(sock, f"GET / HTTP/1.1\r\nHost: {host}\r\n\r\n".encode())
            assert head.startswith(f"HTTP/1.1 {status}".encode()), (host, head[:40])


def test_a_refused_authorization_line_leaves_no_token_bytes_in_the_log(door, caplog):
    from aiohttp.http_exceptions import LineTooLong

    from semcodec.cloud.service.front import QuietServerLog

    caplog.set_level(logging.DEBUG)
    secret = "SECRETTOKENBYTES"
    quiet = QuietServerLog()
    quiet.exception("Error handling request from %s", "127.0.0.1",
                    exc_info=LineTooLong(f"Authorization: Bearer {secret}" * 4, 8190))
    assert "LineTooLong" in caplog.text and "127.0.0.1" in caplog.text
    with _connect(door.http_port) as sock:  # over real sockets, whatever the throttle says
        head = _answer(sock, (f"GET / HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer "
                              f"{secret}{'x' * 9000}\r\n\r\n").encode())  # fmt: skip
        assert head.startswith((b"HTTP/1.1 400", b"HTTP/1.0 400", b"HTTP/1.1 431"))
    assert secret not in caplog.text and secret[:6] not in caplog.text


def test_the_open_files_limit_is_raised_to_the_hard_limit(door):
    resource = pytest.importorskip("resource")
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    assert soft == hard or hard == resource.RLIM_INFINITY
    assert raise_open_files() == (soft, soft)  # nothing more to raise
    most, per_peer = door.http_caps
    assert per_peer == 3 and 0 < most <= door.open_files // 2


def test_a_stopped_server_restarts_at_once_on_the_same_ports(tmp_path, monkeypatch):
    """The server closes a keep-alive connection when it stops: that connection's TIME_WAIT
    is on the server's port, and a new server binds over it at once."""
    grpc_port, http_port = free_port(), free_port()
    ports = {"listen": f"127.0.0.1:{grpc_port}", "http_listen": f"127.0.0.1:{http_port}"}
    first = _start(tmp_path / "first", monkeypatch, **ports)
    viewer = _connect(http_port)
    try:
        assert _answer(viewer).startswith(b"HTTP/1.1 200")  # kept alive
        first.stop(0)
        assert _closed_within(viewer, 5) is not None  # closed by the server: its TIME_WAIT
    finally:
        viewer.close()
    start = time.monotonic()
    second = _start(tmp_path / "second", monkeypatch, **ports)
    try:
        took = time.monotonic() - start
        with _connect(http_port) as sock:
            assert _answer(sock).startswith(b"HTTP/1.1 200")
        with grpc.insecure_channel(f"127.0.0.1:{grpc_port}") as channel:
            reply = health_pb2_grpc.HealthStub(channel).Check(
                health_pb2.HealthCheckRequest(), timeout=5)  # fmt: skip
            assert reply.status == health_pb2.HealthCheckResponse.SERVING
        assert took < 10, took
    finally:
        second.stop(0)


def test_a_restart_skips_the_decoder_check_it_passed_lately(tmp_path, monkeypatch):
    """The networks are built once (seconds): a server restarted at once on the same output
    folder reads the decoder's options only; another decoder, or an old check, is checked
    again; options that do not exist are refused without building anything."""
    import os

    from semcodec.cloud.service.config import ConfigError, ServeSettings

    built = []
    monkeypatch.setattr(server_module, "check_decoder", built.append)
    settings = ServeSettings(out=tmp_path / "out", decoder="warp")
    server_module.check_decoder_once(settings)
    server_module.check_decoder_once(settings)
    assert built == ["warp"]
    server_module.check_decoder_once(ServeSettings(out=tmp_path / "out", decoder="restore"))
    assert built == ["warp", "restore"]
    mark = tmp_path / "out" / server_module.CHECKED_NAME
    old = time.time() - server_module.CHECK_REUSE_S - 60
    os.utime(mark, (old, old))
    server_module.check_decoder_once(ServeSettings(out=tmp_path / "out", decoder="restore"))
    assert built == ["warp", "restore", "restore"]
    with pytest.raises(ConfigError, match="nosuch"):
        server_module.check_decoder_once(ServeSettings(out=tmp_path / "out",
                                                       decoder="warp,nosuch=1"))  # fmt: skip
    assert len(built) == 3


def test_a_taken_port_fails_the_start_before_the_slow_work(tmp_path, monkeypatch):
    from semcodec.cloud.service.config import ServeSettings

    def never(text):
        raise AssertionError("the decoder was checked before the ports")

    monkeypatch.setattr(server_module, "check_decoder", never)
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        for name in ("listen", "http_listen", "metrics_listen"):
            values = {"out": tmp_path / "out", "listen": "127.0.0.1:0", "metrics_listen": "",
                      name: f"127.0.0.1:{port}"}  # fmt: skip
            start = time.monotonic()
            with pytest.raises(server_module.ServerStartError, match=f"{port} .{name}.: "):
                server_module.DecoderServer(ServeSettings(**values))
            assert time.monotonic() - start < 1


def test_serve_on_a_taken_port_exits_2_with_one_line(tmp_path):
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        done = subprocess.run([sys.executable, "-m", "semcodec.cloud.cli", "serve", "--out",
                               str(tmp_path / "out"), "--listen", "127.0.0.1:0",
                               "--metrics-listen", "", "--http-listen", f"127.0.0.1:{port}"],
                              capture_output=True, text=True, timeout=120)  # fmt: skip
    assert done.returncode == 2, done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and f"cannot listen on 127.0.0.1:{port}" in lines[0], lines
