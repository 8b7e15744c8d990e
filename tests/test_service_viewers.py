"""Live viewers bounded in frames (issue 53, item 7), over real sockets on 127.0.0.1 with the
shipped viewer defaults: a viewer whose machine takes nothing (a 1-KiB receive buffer, never
read) is dropped within ``viewer_stall_s`` (5 s) of falling ``viewer_max_behind`` (8) frames
behind, however much the kernel's buffers could still hold, and its socket is gone (reset,
its buffers released) at once; a viewer that reads goes on, and each frame's latency to a
viewer's machine is a metric. The session's frames are published into its live feed at
4 frames/s by the test (the decoder is not what is measured here)."""

from __future__ import annotations

import socket
import threading
import time

import numpy as np
from prometheus_client import generate_latest

from semcodec.cloud.service import server as server_module
from semcodec.cloud.service.messages import OpenRequest
from semcodec.codec.bitstream import read_stream

from .conftest import start_server, wait_for

FPS = 4.0


def _server_sockets(port: int, peer_port: int) -> list[str]:
    """The TCP states (hex, /proc/net/tcp's) of the server's sockets of 127.0.0.1:``port``
    to the peer's ``peer_port``: empty once the kernel has let go of them."""
    found = []
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            lines = open(table).read().splitlines()[1:]  # noqa: SIM115
        except OSError:
            continue
        for line in lines:
            fields = line.split()
            local, remote, state = fields[1], fields[2], fields[3]
            if (int(local.rsplit(":", 1)[1], 16) == port
                    and int(remote.rsplit(":", 1)[1], 16) == peer_port):  # fmt: skip
                found.append(state)
    return found


def _publisher(session, stop: threading.Event) -> None:
    """Publishes a picture into the session's live feed ``FPS`` times a second (its JPEG
    about 20 KB)."""
    rng = np.random.default_rng(0)
    base = np.linspace(0, 255, 288 * 384 * 3).reshape(288, 384, 3).astype(np.uint8)
    number = 0
    while not stop.wait(1 / FPS):
        number += 1
        noise = rng.integers(0, 24, base.shape, dtype=np.uint8)
        session.live.publish(number, base + noise, {"frame": number, "ids": [], "boxes": []})


def _viewer(port: int, path: str, rcvbuf: int | None = None) -> socket.socket:
    sock = socket.socket()
    if rcvbuf is not None:  # before connecting: the window it offers
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, rcvbuf)
    sock.connect(("127.0.0.1", port))
    sock.sendall(f"GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n".encode())
    return sock


def test_a_viewer_that_takes_nothing_is_dropped_by_frames_and_its_socket_released(
        tmp_path, monkeypatch, semc, capsys):  # fmt: skip
    monkeypatch.setattr(server_module, "check_decoder", lambda text: None)
    server = start_server(tmp_path, http_listen="127.0.0.1:0")
    header = read_stream(semc)[0].to_bytes()
    sid = server.manager.open("default", OpenRequest(header, decoder="warp")).session_id
    session = server.manager.held("default", sid)
    stop = threading.Event()
    publisher = threading.Thread(target=_publisher, args=(session, stop), daemon=True)
    publisher.start()
    viewers = server.front_door.viewers
    settings = server.front_door.settings
    port = server.http_port
    try:
        reader = _viewer(port, f"/sessions/{sid}/mjpeg")
        stuck = _viewer(port, f"/sessions/{sid}/mjpeg", rcvbuf=1024)
        stuck_port = stuck.getsockname()[1]
        start = time.monotonic()
        got = bytearray()
        reader.settimeout(1.0)
        while viewers.dropped == 0 and time.monotonic() - start < 30:
            got += reader.recv(1 << 20)  # the reader reads all along
        dropped_after = time.monotonic() - start
        gone = wait_for(lambda: not _server_sockets(port, stuck_port), 10)
        gone_after = time.monotonic() - start - dropped_after
        for _ in range(8):  # the reader still gets frames
            got += reader.recv(1 << 20)
        text = generate_latest(server.metrics.registry).decode()
        reader.close()
        stuck.close()
    finally:
        stop.set()
        publisher.join(5)
        server.stop(0)
    frames = got.count(b"--frame\r\n")
    latency = [line for line in text.splitlines()
               if line.startswith("semcodec_viewer_latency_seconds_count")]  # fmt: skip
    with capsys.disabled():
        print(f"\na viewer with a 1-KiB receive buffer: dropped {dropped_after:.1f} s after it "
              f"came (at {FPS:g} frames/s, {settings.viewer_max_behind} frames behind at "
              f"most, --viewer-stall-s {settings.viewer_stall_s:g}); its socket gone "
              f"{gone_after:.2f} s later; the reader got {frames} frames; {latency}")
    assert viewers.dropped == 1 and gone
    # the bound is reached within viewer_max_behind frames (plus the first, taken whole by
    # the kernel); then viewer_stall_s, checked at each frame
    assert dropped_after <= (settings.viewer_max_behind + 2) / FPS + settings.viewer_stall_s + 1
    assert gone_after < 10
    assert frames >= 20 and float(latency[0].split()[-1]) >= 10
