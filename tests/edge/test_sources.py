"""Tests of edge.sources on the embedded sample, on files made in tmp_path, and on ../shared."""

from __future__ import annotations

import shutil
from fractions import Fraction
from pathlib import Path

import av
import numpy as np
import pytest

from semcodec.edge.sources import (
    DATA_DIR_ENV,
    SAMPLE_NAME,
    SourceError,
    open_source,
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
