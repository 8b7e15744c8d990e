"""Logins and refusals on the HTTP front door (issue 53, items 5 and 6), over real sockets on
127.0.0.1 against the shipped defaults, bounded in count and time: 4,100 logins by one tenant
leave another tenant's cookie valid (cookies are kept per tenant; with the shipped defaults
most are refused first, 1 a second from one address); a cross-site login is refused; 200
wrong tokens show in a metric and in at most a line a second, without a byte of any token;
500 malformed requests write at most 10 log lines."""

from __future__ import annotations

import base64
import contextlib
import http.client
import logging
import secrets
import socket
import time
import urllib.parse
import urllib.request

import pytest

from semcodec.cloud.service import server as server_module
from semcodec.cloud.service.http import COOKIE, MAX_LOGINS_PER_TENANT

from .conftest import TOKEN_A, TOKEN_B, start_server, tokens_file

LOGINS = 4100
# the front door keeps what it stores on a request under typed keys: aiohttp's warning about
# plain string keys is an error here (it would answer 500)
pytestmark = pytest.mark.filterwarnings("error::aiohttp.web_exceptions.NotAppKeyWarning")


def _serve(tmp_path, monkeypatch, **settings):
    monkeypatch.setattr(server_module, "check_decoder", lambda text: None)
    tmp_path.mkdir(parents=True, exist_ok=True)
    return start_server(tmp_path, tokens=tokens_file(tmp_path), http_listen="127.0.0.1:0",
                        metrics_listen="127.0.0.1:0", **settings)  # fmt: skip


def _login(conn: http.client.HTTPConnection, token: str, headers: dict | None = None):
    """(status, the login cookie's value or None) of ``POST /login`` on ``conn``."""
    body = urllib.parse.urlencode({"token": token})
    conn.request("POST", "/login", body=body, headers={
        "Content-Type": "application/x-www-form-urlencoded", **(headers or {})})  # fmt: skip
    response = conn.getresponse()
    response.read()
    cookie = response.getheader("Set-Cookie") or ""
    value = cookie.split(";")[0].partition("=")[2] if cookie.startswith(COOKIE) else None
    return response.status, value


def _status(port: int, path: str, headers: dict) -> int:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    try:
        conn.request("GET", path, headers=headers)
        response = conn.getresponse()
        response.read()
        return response.status
    finally:
        conn.close()


def _metric(port: int, name: str, labels: str = "") -> float:
    text = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10).read()
    for line in text.decode().splitlines():
        if line.startswith(f"{name}{labels} "):
            return float(line.split()[-1])
    return 0.0


def _many_logins(port: int, token: str, count: int) -> dict:
    """``count`` logins on one keep-alive connection: {status: how many}, and the first and
    last cookies given."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    statuses: dict[int, int] = {}
    cookies = []
    try:
        for _ in range(count):
            status, cookie = _login(conn, token)
            statuses[status] = statuses.get(status, 0) + 1
            if cookie:
                cookies.append(cookie)
    finally:
        conn.close()
    return {"statuses": statuses, "cookies": cookies}


def test_one_tenants_logins_leave_anothers_cookie_valid(tmp_path, monkeypatch, capsys):
    # the shipped defaults: logins from one address are paced, the rest refused at once
    server = _serve(tmp_path / "defaults", monkeypatch)
    try:
        port = server.http_port
        with contextlib.closing(http.client.HTTPConnection("127.0.0.1", port, timeout=10)) as conn:
            status, beta = _login(conn, TOKEN_B)
        assert status == 303 and beta
        start = time.monotonic()
        alpha = _many_logins(port, TOKEN_A, LOGINS)
        took = time.monotonic() - start
        assert _status(port, "/", {"Cookie": f"{COOKIE}={beta}"}) == 200
        refused = _metric(server.metrics_port, "semcodec_http_refused_total",
                          '{reason="login_rate"}')  # fmt: skip
    finally:
        server.stop(0)
    with capsys.disabled():
        print(f"\n{LOGINS} logins of alpha from one address (defaults): {alpha['statuses']} in "
              f"{took:.1f} s; beta's cookie still valid")  # fmt: skip
    assert alpha["statuses"].get(303, 0) <= 5 + took + 1  # 5 at once, then 1 a second
    assert alpha["statuses"].get(429, 0) >= LOGINS - 5 - took - 1 and refused >= 4000
    # without the pace (many addresses could do it): cookies are bounded per tenant
    server = _serve(tmp_path / "unpaced", monkeypatch, http_login_rps=0)
    try:
        port = server.http_port
        with contextlib.closing(http.client.HTTPConnection("127.0.0.1", port, timeout=10)) as conn:
            beta = _login(conn, TOKEN_B)[1]
        alpha = _many_logins(port, TOKEN_A, LOGINS)
        assert alpha["statuses"] == {303: LOGINS}
        assert _status(port, "/", {"Cookie": f"{COOKIE}={beta}"}) == 200
        assert _status(port, "/", {"Cookie": f"{COOKIE}={alpha['cookies'][-1]}"}) == 200
        assert _status(port, "/", {"Cookie": f"{COOKIE}={alpha['cookies'][0]}"}) == 401
        logins = server.front_door.logins
        assert logins.held("alpha") == MAX_LOGINS_PER_TENANT and logins.held("beta") == 1
    finally:
        server.stop(0)


def test_a_cross_site_login_is_refused(tmp_path, monkeypatch):
    server = _serve(tmp_path, monkeypatch, http_login_rps=0)
    try:
        port = server.http_port
        own = f"http://127.0.0.1:{port}"
        with contextlib.closing(http.client.HTTPConnection("127.0.0.1", port, timeout=10)) as conn:
            for headers, status in [({"Origin": "http://evil.example"}, 403),
                                    ({"Origin": "null"}, 403),
                                    ({"Origin": f"https://127.0.0.1:{port}"}, 403),
                                    ({"Sec-Fetch-Site": "cross-site"}, 403),
                                    ({"Sec-Fetch-Site": "same-site", "Origin": own}, 403),
                                    # Chromium's same-origin form under no-referrer
                                    ({"Origin": "null", "Sec-Fetch-Site": "same-origin"}, 303),
                                    ({"Origin": own, "Sec-Fetch-Site": "same-origin"}, 303),
                                    ({"Sec-Fetch-Site": "none"}, 303),
                                    ({}, 303)]:  # fmt: skip
                got, cookie = _login(conn, TOKEN_A, headers)
                assert got == status and (cookie is not None) == (status == 303), headers
        assert server.front_door.refusals.counts["cross_site"] == 5
    finally:
        server.stop(0)


def test_wrong_tokens_are_counted_and_logged_without_their_bytes(tmp_path, monkeypatch,
                                                                 caplog):  # fmt: skip
    caplog.set_level(logging.DEBUG)
    server = _serve(tmp_path, monkeypatch)
    guesses = [f"GUESS{secrets.token_hex(12)}" for _ in range(200)]
    try:
        port = server.http_port
        start = time.monotonic()
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
        for k, guess in enumerate(guesses):
            headers = ({"Authorization": f"Bearer {guess}"} if k % 2 else
                       {"Authorization": "Basic " + base64.b64encode(
                           f"user:{guess}".encode()).decode()})  # fmt: skip
            conn.request("GET", "/api/sessions", headers=headers)
            response = conn.getresponse()
            response.read()
            assert response.status == 401
        for guess in guesses[:20]:
            assert _login(conn, guess)[0] in (401, 429)
        conn.close()
        took = time.monotonic() - start
        unauthenticated = _metric(server.metrics_port, "semcodec_http_refused_total",
                                  '{reason="unauthenticated"}')  # fmt: skip
        failed = _metric(server.metrics_port, "semcodec_http_refused_total",
                         '{reason="login_failed"}')  # fmt: skip
    finally:
        server.stop(0)
    assert unauthenticated == 200 and failed == 5  # 5 logins at once, then 429
    lines = [r for r in caplog.records if "refused" in r.getMessage() and "HTTP request"
             in r.getMessage()]  # fmt: skip
    assert 1 <= len(lines) <= took + 2, [r.getMessage() for r in lines]
    assert "GUESS" not in caplog.text and "user:" not in caplog.text


def test_500_malformed_requests_write_at_most_10_log_lines(tmp_path, monkeypatch, caplog):
    caplog.set_level(logging.DEBUG)
    server = _serve(tmp_path, monkeypatch)
    bad = [b"GET / HTTP/1.1\r\nHost: x\r\nBad Header\r\n\r\n",
           b"GET / HTTP/1.1\r\nHost: x\r\nContent-Length: abc\r\n\r\n",
           b"GET / HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer GUESS" + b"x" * 9000 + b"\r\n\r\n",
           b"GET /\x00 HTTP/1.1\r\nHost: x\r\n\r\n"]  # fmt: skip
    try:
        for k in range(500):
            with socket.create_connection(("127.0.0.1", server.http_port), timeout=10) as sock:
                sock.sendall(bad[k % len(bad)])
                with contextlib.suppress(ConnectionResetError):
                    while sock.recv(65536):
                        pass
        malformed = _metric(server.metrics_port, "semcodec_http_refused_total",
                            '{reason="malformed"}')  # fmt: skip
    finally:
        server.stop(0)
    assert malformed == 500
    shown = [r for r in caplog.records if r.levelno >= logging.INFO and not
             r.getMessage().startswith(("serving on", "who can connect", "HTTP front door",
                                        "stopped", "open files"))]  # fmt: skip
    assert len(shown) <= 10, [r.getMessage() for r in shown]
    assert "GUESS" not in caplog.text



def test_behind_a_trusted_proxy_logins_are_paced_per_client(tmp_path, monkeypatch):
    for trusted, second in (("127.0.0.1", 303), ("", 429)):  # untrusted: the header is ignored
        server = _serve(tmp_path / (trusted or "none"), monkeypatch, trusted_proxies=trusted)
        try:
            port = server.http_port
            with contextlib.closing(http.client.HTTPConnection("127.0.0.1", port,
                                                               timeout=10)) as conn:  # fmt: skip
                first = [_login(conn, TOKEN_A, {"X-Forwarded-For": "198.51.100.7"})[0]
                         for _ in range(7)]  # fmt: skip
                other = _login(conn, TOKEN_A, {"X-Forwarded-For": "198.51.100.8"})[0]
        finally:
            server.stop(0)
        assert first == [303] * 5 + [429] * 2 and other == second, (trusted, first, other)
