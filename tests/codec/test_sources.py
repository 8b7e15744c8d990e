"""Tests of codec.core.sources (frame readers): the embedded sample, tmp_path files, ../shared."""

from __future__ import annotations

import functools
import http.server
import os
import shutil
import signal
import socket
import threading
import time
from collections.abc import Iterator
from fractions import Fraction
from pathlib import Path

import av
import numpy as np
import pytest

from semcodec.codec.core.layout import NO_SHARED_ENV
from semcodec.codec.core.sources import (
    DATA_DIR_ENV,
    SAMPLE_NAME,
    SourceError,
    interrupt_ends,
    is_live_url,
    open_source,
    redact_url,
    resize_frames,
    resolve_data_path,
    sample_path,
)

SHARED_DATA = Path(__file__).resolve().parents[2].parent / "shared" / "data"
needs_shared = pytest.mark.skipif(
    not SHARED_DATA.is_dir(), reason=f"{SHARED_DATA} not found (../shared/data beside the repo)"
)


@pytest.fixture(scope="module")
def all_frames() -> np.ndarray:
    """All 60 sample frames, (60, 288, 384, 3) uint8 RGB."""
    return open_source(sample_path()).read()


def blocky(frames: np.ndarray, block: int = 8) -> np.ndarray:
    """Frames made of constant ``block`` x ``block`` squares: 4:2:0 subsampling loses nothing."""
    small = frames[:, ::block, ::block]
    return small.repeat(block, axis=1).repeat(block, axis=2)


def rgb_to_i420(rgb: np.ndarray) -> bytes:
    """BT.601 limited-range RGB -> I420 written out by hand (independent of OpenCV)."""
    x = rgb.astype(np.float64) / 255.0
    r, g, b = x[..., 0], x[..., 1], x[..., 2]
    y = 16 + 65.481 * r + 128.553 * g + 24.966 * b
    cb = 128 - 37.797 * r - 74.203 * g + 112.0 * b
    cr = 128 + 112.0 * r - 93.786 * g - 18.214 * b

    def sub(plane: np.ndarray) -> np.ndarray:
        h, w = plane.shape
        return plane.reshape(h // 2, 2, w // 2, 2).mean(axis=(1, 3))

    planes = [y, sub(cb), sub(cr)]
    return b"".join(np.clip(np.rint(p), 0, 255).astype(np.uint8).tobytes() for p in planes)


def write_video(path: Path, frames: np.ndarray, rate: int) -> None:
    """Encode (T, H, W, 3) uint8 RGB frames losslessly-ish with FFV1 in Matroska."""
    with av.open(str(path), "w") as container:
        stream = container.add_stream("ffv1", rate=rate)
        stream.width, stream.height = frames.shape[2], frames.shape[1]
        stream.pix_fmt = "yuv444p"
        stream.time_base = Fraction(1, rate)
        for i, rgb in enumerate(frames):
            frame = av.VideoFrame.from_ndarray(rgb, format="rgb24")
            frame.pts = i
            container.mux(stream.encode(frame))
        container.mux(stream.encode(None))


# --------------------------------------------------------------------------- MOT sample


def test_sample_opens_as_mot_sequence() -> None:
    src = open_source(sample_path())
    info = src.info
    assert (info.kind, info.name) == ("mot", SAMPLE_NAME)
    assert (info.width, info.height, info.fps, info.num_frames) == (384, 288, 7.0, 60)
    assert info.groundtruth == sample_path() / "gt" / "gt.txt"
    assert info.groundtruth.is_file()


def test_read_window_equals_full_read(all_frames: np.ndarray) -> None:
    window = open_source(sample_path()).read(start=5, count=3)
    assert window.shape == (3, 288, 384, 3) and window.dtype == np.uint8
    assert all_frames.shape == (60, 288, 384, 3)
    np.testing.assert_array_equal(window, all_frames[4:7])


def test_frames_carry_numbers_and_timestamps() -> None:
    frames = list(open_source(sample_path()).frames(start=58))
    assert [f.number for f in frames] == [58, 59, 60]
    assert frames[0].timestamp == pytest.approx(57 / 7)
    assert frames[0].rgb.shape == (288, 384, 3)


def test_sample_groundtruth_matches_frames() -> None:
    gt = np.loadtxt(sample_path() / "gt" / "gt.txt", delimiter=",")
    assert gt.shape[1] == 10
    assert gt[:, 0].min() == 1 and gt[:, 0].max() == 60
    assert (gt[:, 2] + gt[:, 4]).max() <= 384 + 1 and (gt[:, 3] + gt[:, 5]).max() <= 288 + 1


@pytest.mark.parametrize(("start", "count"), [(0, 1), (61, 1), (1, -1)])
def test_bad_range_raises(start: int, count: int) -> None:
    with pytest.raises(SourceError):
        open_source(sample_path()).read(start=start, count=count)


def test_frames_checks_range_before_iteration() -> None:
    with pytest.raises(SourceError, match="1-based"):
        open_source(sample_path()).frames(start=0)


def test_count_past_the_end_is_truncated() -> None:
    assert open_source(sample_path()).read(start=59, count=10).shape[0] == 2


# --------------------------------------------------------------------------- frame folders


def test_frame_folder_without_seqinfo(tmp_path: Path, all_frames: np.ndarray) -> None:
    src_dir = sample_path() / "img1"
    for k, name in zip([1, 2, 3], ["f1.jpg", "f2.jpg", "f10.jpg"], strict=True):
        shutil.copy(src_dir / f"{k:06d}.jpg", tmp_path / name)
    src = open_source(tmp_path)
    assert (src.info.kind, src.info.fps, src.info.num_frames) == ("frames", 25.0, 3)
    assert src.info.groundtruth is None
    np.testing.assert_array_equal(src.read(), all_frames[:3])  # natural order f1 f2 f10
    np.testing.assert_array_equal(src.read(start=2, count=1)[0], all_frames[1])
    assert open_source(tmp_path, fps=12.5).info.fps == 12.5


# --------------------------------------------------------------------------- video files


def test_video_file_reads_back(tmp_path: Path, all_frames: np.ndarray) -> None:
    path = tmp_path / "clip.mkv"
    write_video(path, all_frames[:5], rate=10)
    src = open_source(path)
    assert (src.info.kind, src.info.width, src.info.height) == ("video", 384, 288)
    assert src.info.fps == pytest.approx(10.0)
    frames = src.read()
    assert frames.shape == (5, 288, 384, 3)
    err = np.abs(frames.astype(int) - all_frames[:5].astype(int))
    assert err.mean() < 2.0
    np.testing.assert_array_equal(src.read(start=4, count=2), frames[3:5])
    assert open_source(path, fps=7).info.fps == 7.0


def test_mot_folder_with_video_imdir_uses_seqinfo_rate(
    tmp_path: Path, all_frames: np.ndarray
) -> None:
    write_video(tmp_path / "seq.mkv", all_frames[:4], rate=10)
    (tmp_path / "seqinfo.ini").write_text(
        "[Sequence]\nname=tiny\nfile=seq.mkv\nframeRate=7\nseqLength=4\nimWidth=384\nimHeight=288\n"
    )
    src = open_source(tmp_path)
    assert (src.info.kind, src.info.name, src.info.fps, src.info.num_frames) == (
        "mot",
        "tiny",
        7.0,
        4,
    )
    assert src.read(start=3).shape == (2, 288, 384, 3)


def test_mot_seqinfo_size_mismatch_raises(tmp_path: Path, all_frames: np.ndarray) -> None:
    write_video(tmp_path / "seq.mkv", all_frames[:2], rate=10)
    (tmp_path / "seqinfo.ini").write_text(
        "[Sequence]\nimDir=seq.mkv\nframeRate=7\nimWidth=640\nimHeight=480\n"
    )
    with pytest.raises(SourceError, match="640x480"):
        open_source(tmp_path)


# --------------------------------------------------------------------------- yuv and y4m


def test_raw_yuv_reads_back(tmp_path: Path, all_frames: np.ndarray) -> None:
    rgb = blocky(all_frames[:4])
    path = tmp_path / "clip.yuv"
    path.write_bytes(b"".join(rgb_to_i420(f) for f in rgb))
    src = open_source(path, width=384, height=288, fps=30)
    assert (src.info.kind, src.info.num_frames, src.info.fps) == ("yuv", 4, 30.0)
    frames = src.read()
    assert frames.shape == (4, 288, 384, 3) and frames.dtype == np.uint8
    assert np.abs(frames.astype(int) - rgb.astype(int)).max() <= 2
    np.testing.assert_array_equal(src.read(start=3, count=2), frames[2:4])


def test_y4m_reads_back(tmp_path: Path, all_frames: np.ndarray) -> None:
    rgb = blocky(all_frames[:3])
    path = tmp_path / "clip.y4m"
    header = b"YUV4MPEG2 W384 H288 F30000:1001 Ip A1:1 C420jpeg XYSCSS=420JPEG\n"
    markers = [b"FRAME\n", b"FRAME Ixyz\n", b"FRAME\n"]  # frame parameters are skipped
    path.write_bytes(
        header + b"".join(m + rgb_to_i420(f) for m, f in zip(markers, rgb, strict=True))
    )
    src = open_source(path)
    assert (src.info.kind, src.info.width, src.info.height) == ("y4m", 384, 288)
    assert src.info.num_frames == 3
    assert src.info.fps == pytest.approx(30000 / 1001)
    frames = src.read()
    assert np.abs(frames.astype(int) - rgb.astype(int)).max() <= 2
    np.testing.assert_array_equal(src.read(start=2, count=1), frames[1:2])


def test_y4m_other_colourspace_raises(tmp_path: Path) -> None:
    path = tmp_path / "c444.y4m"
    path.write_bytes(b"YUV4MPEG2 W4 H2 F25:1 C444\nFRAME\n" + bytes(24))
    with pytest.raises(SourceError, match="C444"):
        open_source(path)


# --------------------------------------------------------------------------- bad input


def test_missing_path_raises(tmp_path: Path) -> None:
    with pytest.raises(SourceError, match="no such file"):
        open_source(tmp_path / "nope.mp4")


def test_empty_folder_raises(tmp_path: Path) -> None:
    with pytest.raises(SourceError, match="supported"):
        open_source(tmp_path)


def test_yuv_without_size_raises(tmp_path: Path) -> None:
    path = tmp_path / "clip.yuv"
    path.write_bytes(bytes(384 * 288 * 3 // 2))
    with pytest.raises(SourceError, match="width, height"):
        open_source(path)
    with pytest.raises(SourceError, match="width, height"):
        open_source(path, width=384, height=288)  # fps missing


def test_yuv_truncated_raises(tmp_path: Path) -> None:
    path = tmp_path / "clip.yuv"
    path.write_bytes(bytes(384 * 288 * 3 // 2 * 2 - 100))
    with pytest.raises(SourceError, match="not a whole number"):
        open_source(path, width=384, height=288, fps=25)


def test_unsupported_extension_raises(tmp_path: Path) -> None:
    path = tmp_path / "notes.txt"
    path.write_text("hello")
    with pytest.raises(SourceError, match="supported: MOT sequence"):
        open_source(path)


def test_corrupt_video_raises(tmp_path: Path) -> None:
    path = tmp_path / "broken.mp4"
    path.write_bytes(b"not a video at all" * 10)
    with pytest.raises(SourceError, match="FFmpeg"):
        open_source(path)


# --------------------------------------------------------------------------- locations


def test_resolve_data_path_order(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    env_root, flag_root = tmp_path / "env", tmp_path / "flag"
    (env_root / "SEQ").mkdir(parents=True)
    monkeypatch.setenv(DATA_DIR_ENV, str(env_root))
    assert resolve_data_path("SEQ") == env_root / "SEQ"
    (flag_root / "SEQ").mkdir(parents=True)
    assert resolve_data_path("SEQ", data_dir=flag_root) == flag_root / "SEQ"
    existing = tmp_path / "here"
    existing.mkdir()
    assert resolve_data_path(existing) == existing


def test_resolve_data_path_lists_places(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(DATA_DIR_ENV, str(tmp_path / "env"))
    with pytest.raises(SourceError) as info:
        resolve_data_path("NO-SUCH-SEQUENCE", data_dir=tmp_path / "flag")
    message = str(info.value)
    assert str(tmp_path / "flag" / "NO-SUCH-SEQUENCE") in message
    assert str(tmp_path / "env" / "NO-SUCH-SEQUENCE") in message
    assert "shared" in message
    assert SAMPLE_NAME in message  # a user without data learns the sample's name


def test_the_sample_name_finds_the_embedded_sample(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(NO_SHARED_ENV, "1")
    monkeypatch.delenv(DATA_DIR_ENV, raising=False)
    assert resolve_data_path(SAMPLE_NAME) == sample_path()


def test_resize_frames_even_dimensions(all_frames: np.ndarray) -> None:
    out = resize_frames(all_frames[:2], 0.3)
    assert out.shape == (2, 86, 116, 3) and out.dtype == np.uint8
    assert resize_frames(all_frames[:1], 1.0).shape == (1, 288, 384, 3)


# --------------------------------------------------------------------------- ../shared


@pytest.mark.shared
@needs_shared
@pytest.mark.parametrize(
    ("name", "size", "fps", "length", "has_gt"),
    [
        ("PETS09-S2L1-full", (768, 576), 7.0, 795, True),
        ("TUD-Stadtmitte", (640, 480), 25.0, 179, True),
        ("CiscoVT2people_320x192", (320, 192), 12.0, 9, False),
        ("PETS09-S2L1", (768, 576), 7.0, 300, True),
    ],
)
def test_shared_sequences(
    name: str, size: tuple[int, int], fps: float, length: int, has_gt: bool
) -> None:
    src = open_source(resolve_data_path(name, data_dir=SHARED_DATA))
    info = src.info
    assert (info.width, info.height) == size
    assert (info.fps, info.num_frames) == (fps, length)
    assert (info.groundtruth is not None) == has_gt
    frames = src.read(start=2, count=2)
    assert frames.shape == (2, size[1], size[0], 3) and frames.dtype == np.uint8


# --------------------------------------------------------------------------- live streams


def write_h264(path: Path, frames: np.ndarray, rate: int, fmt: str | None = None) -> None:
    """Encode (T, H, W, 3) uint8 RGB frames with libx264 (yuv420p); MP4 with the index first
    (``faststart``) so it streams from the start."""
    options = {"movflags": "faststart"} if path.suffix == ".mp4" else {}
    with av.open(str(path), "w", format=fmt, options=options) as container:
        stream = container.add_stream("libx264", rate=rate)
        stream.width, stream.height = frames.shape[2], frames.shape[1]
        stream.pix_fmt = "yuv420p"
        for i, rgb in enumerate(frames):
            frame = av.VideoFrame.from_ndarray(rgb, format="rgb24")
            frame.pts = i
            container.mux(stream.encode(frame))
        container.mux(stream.encode(None))


class _QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture(scope="module")
def http_root(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, Path]]:
    """``(base URL, folder)``: a local HTTP server (127.0.0.1, a thread) serving a folder with
    ``clip.mp4`` (20 frames 64x48 at 10 fps, libx264) and ``sizes.ts`` (3 frames 64x48 then
    3 frames 48x32, MPEG-TS)."""
    root = tmp_path_factory.mktemp("www")
    rng = np.random.default_rng(0)
    write_h264(root / "clip.mp4", rng.integers(0, 256, (20, 48, 64, 3), np.uint8), rate=10)
    write_h264(root / "a.ts", rng.integers(0, 256, (3, 48, 64, 3), np.uint8), 10, "mpegts")
    write_h264(root / "b.ts", rng.integers(0, 256, (3, 32, 48, 3), np.uint8), 10, "mpegts")
    (root / "sizes.ts").write_bytes((root / "a.ts").read_bytes() + (root / "b.ts").read_bytes())
    handler = functools.partial(_QuietHandler, directory=str(root))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}", root
    server.shutdown()
    server.server_close()


def test_http_stream_reads_like_the_file(http_root: tuple[str, Path]) -> None:
    base, root = http_root
    src = open_source(f"{base}/clip.mp4")
    info = src.info
    assert (info.kind, info.name, info.path) == ("live", "clip", f"{base}/clip.mp4")
    assert (info.width, info.height, info.fps) == (64, 48, 10.0)
    assert info.num_frames == 20  # an MP4 says; a camera would not (None)
    frames = list(src.frames())
    assert [f.number for f in frames] == list(range(1, 21))
    assert frames[3].timestamp == pytest.approx(0.3)
    assert frames[0].rgb.shape == (48, 64, 3) and frames[0].rgb.dtype == np.uint8
    local = open_source(root / "clip.mp4").read()
    np.testing.assert_array_equal(np.stack([f.rgb for f in frames]), local)
    # every later read connects again: --start K skips K-1 frames, --frames N stops after N
    np.testing.assert_array_equal(src.read(start=5, count=3), local[4:7])
    assert [f.number for f in src.frames(start=18)] == [18, 19, 20]
    assert src.read(start=19, count=10).shape[0] == 2
    assert src.read(count=0).shape == (0, 48, 64, 3)
    with pytest.raises(SourceError, match="past the last frame 20"):
        src.frames(start=21)
    assert open_source(f"{base}/clip.mp4", fps=7.5).info.fps == 7.5


def test_live_source_without_length_reads_until_count_or_stop() -> None:
    src = open_source("lavfi://testsrc=size=64x48:rate=10")  # endless, like a camera
    assert (src.info.kind, src.info.num_frames, src.info.fps) == ("live", None, 10.0)
    assert src.read(start=3, count=4).shape == (4, 48, 64, 3)
    numbers = []
    for frame in src.frames():
        numbers.append(frame.number)
        if frame.number == 6:
            src.stop()  # e.g. from another thread
    assert numbers == [1, 2, 3, 4, 5, 6]


def test_first_ctrl_c_ends_a_live_source_cleanly() -> None:
    src = open_source("lavfi://testsrc=size=64x48:rate=10")
    before = signal.getsignal(signal.SIGINT)
    numbers = []
    with interrupt_ends(src):
        for frame in src.frames():
            numbers.append(frame.number)
            if frame.number == 3:
                os.kill(os.getpid(), signal.SIGINT)  # a real Ctrl-C
            assert frame.number < 100, "SIGINT did not end the stream"
        assert signal.getsignal(signal.SIGINT) is signal.default_int_handler  # 2nd one aborts
    assert numbers[:3] == [1, 2, 3] and len(numbers) <= 5
    assert signal.getsignal(signal.SIGINT) is before


def test_live_size_change_is_an_error(http_root: tuple[str, Path]) -> None:
    src = open_source(f"{http_root[0]}/sizes.ts")
    assert (src.info.width, src.info.height, src.info.num_frames) == (64, 48, None)
    with pytest.raises(SourceError, match="frame 4 is 48x32 but the stream began at 64x48"):
        src.read()


def test_closed_port_fails_fast(http_root: tuple[str, Path]) -> None:
    with socket.socket() as sock:  # a port nobody listens on
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    started = time.monotonic()
    with pytest.raises(SourceError, match=f"127.0.0.1:{port}"):
        open_source(f"http://127.0.0.1:{port}/clip.mp4", timeout=2)
    with pytest.raises(SourceError, match="FFmpeg cannot open"):
        open_source(f"rtsp://127.0.0.1:{port}/stream", timeout=2)
    with pytest.raises(SourceError, match="cannot open"):
        open_source(f"{http_root[0]}/missing.mp4", timeout=2)  # 404
    assert time.monotonic() - started < 5


def test_silent_server_times_out() -> None:
    with socket.socket() as sock:  # accepts connections (backlog) and never answers
        sock.bind(("127.0.0.1", 0))
        sock.listen(4)
        url = f"http://127.0.0.1:{sock.getsockname()[1]}/cam"
        started = time.monotonic()
        with pytest.raises(SourceError, match="no answer within 0.5 s"):
            open_source(url, timeout=0.5)
        assert time.monotonic() - started < 3


def test_stream_that_stalls_is_an_error(tmp_path: Path) -> None:
    path = tmp_path / "cam.ts"
    write_h264(path, np.random.default_rng(1).integers(0, 256, (20, 48, 64, 3), np.uint8), 10)
    data = path.read_bytes()
    with socket.socket() as sock:  # sends half the stream, then goes quiet (a dead camera)
        sock.bind(("127.0.0.1", 0))
        sock.listen(1)

        def serve() -> None:
            conn, _ = sock.accept()
            with conn:
                conn.recv(4096)
                conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: video/mp2t\r\n\r\n")
                conn.sendall(data[: len(data) // 2])
                time.sleep(5)

        threading.Thread(target=serve, daemon=True).start()
        src = open_source(f"http://127.0.0.1:{sock.getsockname()[1]}/cam.ts", timeout=1)
        assert src.info.num_frames is None
        numbers: list[int] = []
        started = time.monotonic()
        with pytest.raises(SourceError, match="no data for 1 s at frame"):
            numbers.extend(f.number for f in src.frames())
        assert 0 < len(numbers) < 20 and time.monotonic() - started < 4


def test_unsupported_url_scheme(tmp_path: Path) -> None:
    with pytest.raises(SourceError, match=r"unsupported URL scheme ftp://.*rtsp://") as info:
        open_source("ftp://user:secret@host/clip.mp4")
    assert "secret" not in str(info.value) and "user:***@host" in str(info.value)
    with pytest.raises(SourceError, match="without file://"):
        open_source(f"file://{tmp_path}/clip.mp4")
    with pytest.raises(SourceError, match="name the device"):
        open_source("v4l2://")
    with pytest.raises(SourceError, match="timeout must be > 0"):
        open_source("rtsp://127.0.0.1/x", timeout=0)


def test_urls_pass_through_resolve_data_path() -> None:
    url = "rtsp://user:pw@cam.local:554/live/ch1?x=1"
    assert resolve_data_path(url) == url and isinstance(resolve_data_path(url), str)
    assert is_live_url(url) and not is_live_url("clip.mp4") and not is_live_url(Path("a://b"))
    assert redact_url(url) == "rtsp://user:***@cam.local:554/live/ch1?x=1"


def test_edge_agent_encode_from_http_and_dead_url(
    http_root: tuple[str, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from semcodec.edge.cli import main

    dead = tmp_path / "dead.semc"
    assert main(["encode", "http://127.0.0.1:9/cam.mp4", "-o", str(dead),
                 "--input-timeout", "2"]) == 2  # fmt: skip
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("edge-agent: error: http://127.0.0.1:9/cam.mp4")
    assert not dead.exists()
    with pytest.raises(SystemExit) as exit_info:  # argparse: usage error, exit 2
        main(["encode", f"{http_root[0]}/clip.mp4", "-o", str(dead), "--input-option", "x"])
    assert exit_info.value.code == 2 and "KEY=VALUE" in capsys.readouterr().err


@pytest.mark.shared
def test_edge_agent_encodes_an_http_stream(http_root: tuple[str, Path], tmp_path: Path) -> None:
    from semcodec.codec.core.models import ModelNotFoundError, resolve_model
    from semcodec.codec.scaffold.codec import decode_stream
    from semcodec.edge.cli import main

    try:
        resolve_model("selfie_segmentation")
    except ModelNotFoundError as exc:
        pytest.skip(f"models are not beside the repository: {exc}")
    out = tmp_path / "live.semc"
    url = f"{http_root[0]}/clip.mp4"
    assert main(["-q", "encode", url, "-o", str(out), "--level", "0", "--start", "2",
                 "--frames", "5", "--input-option", "reconnect=1"]) == 0  # fmt: skip
    assert len(list(decode_stream(out))) == 5


def test_input_options_for_a_file_or_folder_are_refused_not_ignored(sample_dir, tmp_path, capsys):
    """``--input-option`` is FFmpeg's, for live streams; on a folder it used to do nothing."""
    from semcodec.edge.cli import main

    out = tmp_path / "zoomed.semc"
    assert main(["encode", str(sample_dir), "-o", str(out), "--frames", "2",
                 "--input-option", "camera_transform=zoom=2"]) == 2  # fmt: skip
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "input options (camera_transform)" in err[0]
    assert not out.exists()
    with pytest.raises(SourceError, match="take"):
        open_source(sample_dir, options={"rtsp_transport": "tcp"})
