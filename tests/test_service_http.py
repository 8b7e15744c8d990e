"""The HTTP front door of ``cloud-decoder serve --http-listen`` (issue 41, items 1-2): a real
server (two tenants with tokens) on 127.0.0.1, a real stream of the embedded sample over
gRPC, and real HTTP requests: the dashboard and JSON API list only the tenant's sessions,
the live view's MJPEG and events advance as frames are decoded, and unauthenticated
requests, other tenants, path tricks and oversized requests get 401/404/400/413 with nothing
served; a viewer that stops reading is dropped while the decoder never waits for it."""

from __future__ import annotations

import base64
import hashlib
import http.client
import json
import socket
import time
import urllib.parse
import zlib

import numpy as np
import pytest

from semcodec.codec.bitstream import read_stream
from semcodec.codec.reconstruct.pipeline import DEFAULT_DECODER
from semcodec.edge.stream.client import ChannelSecurity, open_request
from semcodec.protos import semcodec_v1_pb2 as pb

from .conftest import TOKEN_A, TOKEN_B, Requests, start_server, stub_for, tokens_file, wait_for

BEARER_A = {"Authorization": f"Bearer {TOKEN_A}"}
BEARER_B = {"Authorization": f"Bearer {TOKEN_B}"}


def _get(port: int, path: str, headers: dict | None = None, method: str = "GET",
         body: bytes | None = None) -> tuple[int, dict, bytes]:  # fmt: skip
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    try:
        conn.request(method, path, body=body, headers=headers or {})
        response = conn.getresponse()
        return response.status, dict(response.getheaders()), response.read()
    finally:
        conn.close()


def _unit_requests(unit_bytes: bytes, seq: int, kind: int):
    digest = hashlib.sha256(unit_bytes).digest()
    return pb.StreamRequest(chunk=pb.UnitChunk(
        seq=seq, kind=kind, unit_size=len(unit_bytes), offset=0, data=unit_bytes,
        crc32=zlib.crc32(unit_bytes), unit_sha256=digest, timestamp_us=seq))  # fmt: skip


@pytest.fixture(scope="module")
def live(tmp_path_factory, semc):
    """A server with its front door and one open session of tenant alpha whose frames
    (all but END: it stays open) are decoded."""
    tmp = tmp_path_factory.mktemp("http")
    server = start_server(tmp, tokens=tokens_file(tmp), http_listen="127.0.0.1:0",
                          viewer_stall_s=1.0, tenant_max_viewers=3)  # fmt: skip
    channel, stub = stub_for(f"127.0.0.1:{server.port}", ChannelSecurity(token=TOKEN_A))
    header, units = read_stream(semc)
    units = list(units)
    sid = stub.OpenSession(open_request(header.to_bytes())).session_id
    requests = Requests()
    requests.put(pb.StreamRequest(start=pb.StreamStart(session_id=sid)))
    replies = stub.StreamUnits(iter(requests), timeout=120)
    next(replies)
    for seq, unit in enumerate(units[:-1]):
        requests.put(_unit_requests(unit.to_bytes(), seq, int(unit.kind)))
        assert next(replies).ack.next_seq == seq + 1
    session = server.manager.held("alpha", sid)
    deadline = time.monotonic() + 60
    while session.decoded < len(units) - 1 and time.monotonic() < deadline:
        time.sleep(0.05)
    assert session.live.latest is not None
    yield {"server": server, "port": server.http_port, "sid": sid, "session": session}
    requests.put(None)
    channel.close()
    server.stop(0)


def test_the_dashboard_lists_the_tenants_sessions_only(live):
    port, sid = live["port"], live["sid"]
    status, headers, body = _get(port, "/", BEARER_A)
    page = body.decode()
    assert status == 200 and headers["Content-Type"].startswith("text/html")
    assert f'href="/sessions/{sid}"' in page and "level 1" in page
    assert str(DEFAULT_DECODER) in page  # the decoder sessions are decoded with
    assert "<script" not in page  # a plain table: no JavaScript needed
    status, _, body = _get(port, "/", BEARER_B)
    assert status == 200 and sid not in body.decode()
    status, _, body = _get(port, "/api/sessions", BEARER_A)
    rows = json.loads(body)["sessions"]
    assert status == 200 and [r["session_id"] for r in rows] == [sid]
    assert rows[0]["state"] == "streaming" and rows[0]["frames_decoded"] >= 2
    assert rows[0]["live"] and rows[0]["last_ack"] > time.time() - 600
    assert json.loads(_get(port, "/api/sessions", BEARER_B)[2])["sessions"] == []
    assert _get(port, f"/api/sessions/{sid}", BEARER_B)[0] == 404


def test_unauthenticated_wrong_tenant_path_tricks_and_oversized_requests_are_refused(live):
    port, sid = live["port"], live["sid"]
    for path in ("/", "/api/sessions", f"/sessions/{sid}", f"/sessions/{sid}/frame.jpg",
                 f"/sessions/{sid}/mjpeg", "/nothing-here"):  # fmt: skip
        for headers in ({}, {"Authorization": "Bearer wrong-token-0123456789"},
                        {"Authorization": "Basic !!!"}):  # fmt: skip
            status, got, body = _get(port, path, headers)
            assert status == 401 and sid.encode() not in body, (path, headers)
            assert "Bearer" in got["WWW-Authenticate"]
    for path in (f"/sessions/{sid}", f"/sessions/{sid}/frame.jpg", f"/sessions/{sid}/events"):
        status, _, body = _get(port, path, BEARER_B)  # another tenant's: not found
        assert status == 404 and sid.encode() not in body
    tricks = ["/sessions/..%2F..%2F.sessions/frame.jpg", f"/sessions/{sid.upper()}/mjpeg",
              f"/sessions/{sid}%2F..%2F/frame.jpg", "/sessions/%00/frame.jpg",
              f"/sessions/{sid}0/events", "/sessions/" + "a" * 4000 + "/mjpeg",
              "/api/sessions/..%2Fetc%2Fpasswd"]  # fmt: skip
    for path in tricks:
        status, _, body = _get(port, path, BEARER_A)
        assert status in (400, 404) and b"root:" not in body and sid.encode() not in body, path
    assert _get(port, f"/sessions/{sid[:31]}g/frame.jpg", BEARER_A)[0] == 400
    # oversized: a header line, a URL, a body
    assert _get(port, "/", {**BEARER_A, "X-Big": "x" * 100_000})[0] in (400, 431)
    assert _get(port, "/" + "a" * 100_000, BEARER_A)[0] in (400, 414)
    status, _, _ = _get(port, "/login", {"Content-Type": "application/x-www-form-urlencoded"},
                        "POST", b"token=" + b"x" * 1_000_000)  # fmt: skip
    assert status == 413


def test_basic_auth_and_the_login_cookie(live):
    port, sid = live["port"], live["sid"]
    basic = base64.b64encode(f":{TOKEN_A}".encode()).decode()
    assert _get(port, f"/sessions/{sid}/frame.jpg", {"Authorization": f"Basic {basic}"})[0] == 200
    form = urllib.parse.urlencode({"token": TOKEN_B}).encode()
    status, _, _ = _get(port, "/login", {"Content-Type": "application/x-www-form-urlencoded"},
                        "POST", urllib.parse.urlencode({"token": "nope"}).encode())  # fmt: skip
    assert status == 401
    status, headers, _ = _get(port, "/login",
                              {"Content-Type": "application/x-www-form-urlencoded"}, "POST", form)
    cookie = headers["Set-Cookie"]
    assert status == 303 and "HttpOnly" in cookie and "SameSite=Strict" in cookie
    value = cookie.split(";", 1)[0]
    status, _, body = _get(port, "/", {"Cookie": value})
    assert status == 200 and b"Sessions of beta" in body and sid.encode() not in body
    assert _get(port, f"/sessions/{sid}/frame.jpg", {"Cookie": value})[0] == 404


def test_the_live_view_mjpeg_and_events_advance_with_the_decoder(live):
    port, sid, session = live["port"], live["sid"], live["session"]
    status, headers, jpeg = _get(port, f"/sessions/{sid}/frame.jpg", BEARER_A)
    assert status == 200 and jpeg[:2] == b"\xff\xd8" and int(headers["X-Frame"]) >= 1
    status, _, page = _get(port, f"/sessions/{sid}", BEARER_A)
    assert status == 200 and f'src="/sessions/{sid}/mjpeg"'.encode() in page
    assert b'id="boxes"' in page and b'id="rate"' in page
    picture = session.live.latest.picture
    mjpeg = _Stream(port, f"/sessions/{sid}/mjpeg")
    events = _Stream(port, f"/sessions/{sid}/events")
    try:
        head = mjpeg.read_until(b"\r\n\r\n")
        assert b"multipart/x-mixed-replace; boundary=frame" in head
        part = mjpeg.read_until(b"Content-Type: image/jpeg\r\n")
        assert b"--frame" in part
        events.read_until(b"retry: 2000\n\n")
        event = events.read_until(b"\n\n")
        assert b"event: frame" in event
        data = json.loads(event.split(b"data: ", 1)[1])
        assert {"frame", "ids", "boxes", "kbps", "frames_decoded"} <= set(data)
        boxes = {"frame": 99, "ids": [7], "boxes": [[10.0, 20.0, 50.0, 120.0]]}
        session.live.publish(99, picture, boxes)  # what the decoder does for each frame
        assert b"X-Frame: 99" in mjpeg.read_until(b"X-Frame: 99\r\n")
        events.read_until(b'"frame": 99')
        assert b'"ids": [7]' in events.read_until(b"\n\n")
    finally:
        mjpeg.close()
        events.close()


def test_viewer_quota_and_a_viewer_that_stops_reading_is_dropped(live):
    """A viewer whose socket takes nothing is dropped after viewer_stall_s (1 s here); the
    decoder's hand-over never waits for it, and the viewer's place is given back."""
    port, sid, session = live["port"], live["sid"], live["session"]
    door = live["server"].front_door
    streams = [_Stream(port, f"/sessions/{sid}/events") for _ in range(3)]
    try:
        for stream in streams:
            stream.read_until(b"retry")
        assert _get(port, f"/sessions/{sid}/mjpeg", BEARER_A)[0] == 429  # tenant_max_viewers
        assert _get(port, f"/sessions/{sid}/frame.jpg", BEARER_A)[0] == 200  # not a viewer
    finally:
        for stream in streams:
            stream.close()
    assert wait_for(lambda: door.viewers.held["alpha"] == 0)
    stalled = _Stream(port, f"/sessions/{sid}/mjpeg", rcvbuf=4096)  # never read from
    try:
        rng = np.random.default_rng(0)
        noise = rng.integers(0, 256, (288, 384, 3), dtype=np.uint8)  # ~250 KB as JPEG
        dropped, slowest = door.viewers.dropped, 0.0
        for number in range(100, 160):
            start = time.perf_counter()
            session.live.publish(number, noise, {"frame": number, "ids": [], "boxes": []})
            slowest = max(slowest, time.perf_counter() - start)
            time.sleep(0.05)
            if door.viewers.dropped > dropped:
                break
        assert wait_for(lambda: door.viewers.dropped > dropped, 10)
        assert slowest < 0.05  # the decoder's hand-over never waited for the viewer
        assert wait_for(lambda: door.viewers.held["alpha"] == 0)
        registry = live["server"].metrics.registry
        assert registry.get_sample_value("semcodec_viewers_dropped_total") >= 1
        assert registry.get_sample_value("semcodec_viewers_active") == 0
    finally:
        stalled.close()


class _Stream:
    """A raw HTTP GET whose body is read as it comes (tenant alpha's token)."""

    def __init__(self, port: int, path: str, rcvbuf: int | None = None) -> None:
        self.sock = socket.socket()
        if rcvbuf:
            self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, rcvbuf)
        self.sock.settimeout(10)
        self.sock.connect(("127.0.0.1", port))
        self.sock.sendall(f"GET {path} HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {TOKEN_A}"
                          "\r\n\r\n".encode())  # fmt: skip
        self.buffer = b""

    def read_until(self, marker: bytes) -> bytes:
        """The bytes up to and including ``marker``."""
        while (index := self.buffer.find(marker)) < 0:
            data = self.sock.recv(65536)
            assert data, "the server closed the stream"
            self.buffer += data
        end = index + len(marker)
        got, self.buffer = self.buffer[:end], self.buffer[end:]
        return got

    def close(self) -> None:
        self.sock.close()


def test_ffmpeg_opens_the_mjpeg_stream_as_a_player_does(live):
    """FFmpeg (through PyAV; ffplay and VLC read MJPEG over HTTP the same way) opens the
    stream with the token in a header and decodes frames of the stream's size."""
    av = pytest.importorskip("av")
    url = f"http://127.0.0.1:{live['port']}/sessions/{live['sid']}/mjpeg"
    container = av.open(url, format="mpjpeg", timeout=10,
                        options={"headers": f"Authorization: Bearer {TOKEN_A}\r\n"})
    try:
        frame = next(container.decode(video=0))
        assert (frame.width, frame.height) == (384, 288)
    finally:
        container.close()


def test_the_front_door_speaks_tls_like_the_grpc_port(tmp_path):
    """With --tls-cert the front door is HTTPS with the same certificate (plain HTTP gets
    no page); with --client-ca a client must show a certificate signed by it; the login
    cookie is Secure."""
    import ssl

    from .test_service_grpc import _certificates

    certs = _certificates(tmp_path)
    tokens = tokens_file(tmp_path)
    for mutual in (False, True):
        extra = {"client_ca": certs["ca"]} if mutual else {}
        server = start_server(tmp_path / f"tls{mutual}", tls_cert=certs["server"],
                              tls_key=certs["server_key"], tokens=tokens,
                              http_listen="127.0.0.1:0", **extra)  # fmt: skip
        try:
            context = ssl.create_default_context(cafile=str(certs["ca"]))
            conn = http.client.HTTPSConnection("127.0.0.1", server.http_port, timeout=10,
                                               context=context)  # fmt: skip
            if mutual:  # no client certificate: the handshake (or the request) fails
                with pytest.raises((ssl.SSLError, ConnectionError, http.client.HTTPException)):
                    conn.request("GET", "/", headers=BEARER_A)
                    conn.getresponse().read()
                conn.close()
                context.load_cert_chain(certs["client"], certs["client_key"])
                conn = http.client.HTTPSConnection("127.0.0.1", server.http_port, timeout=10,
                                                   context=context)  # fmt: skip
            conn.request("GET", "/", headers=BEARER_A)
            response = conn.getresponse()
            assert response.status == 200 and b"Sessions of alpha" in response.read()
            conn.request("POST", "/login", body=f"token={TOKEN_A}",
                         headers={"Content-Type": "application/x-www-form-urlencoded"})
            response = conn.getresponse()
            response.read()
            assert response.status == 303 and "Secure" in response.getheader("Set-Cookie")
            conn.close()
            with pytest.raises((ConnectionError, http.client.HTTPException, OSError)):
                status, _, body = _get(server.http_port, "/", BEARER_A)  # plain HTTP
                assert b"Sessions" not in body
                raise ConnectionError(f"answered {status} without a page")
        finally:
            server.stop(0)
