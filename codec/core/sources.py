"""Frame sources: the one place that turns files on disk and live streams into RGB frames.

Every source yields :class:`Frame` objects, ``(H, W, 3) uint8 RGB`` with a 1-based frame
number and a timestamp in seconds (``(number - 1) / fps``). Supported inputs:

- ``mot``: a MOTChallenge sequence folder with ``seqinfo.ini`` whose ``imDir`` (or
  ``file``) names either an image folder (``img1/``) or a video file inside the folder;
  ``gt/gt.txt`` becomes :attr:`SourceInfo.groundtruth`. A folder with ``img1/`` and no
  ``seqinfo.ini`` is read as a MOT sequence too.
- ``frames``: a folder of ``.jpg/.jpeg/.png/.bmp`` images in natural order.
- ``video``: any container/codec PyAV (FFmpeg) decodes, e.g. ``.mp4 .avi .mkv``.
- ``yuv``: raw 8-bit I420 (YUV 4:2:0 planar); width, height and fps must be given.
- ``y4m``: YUV4MPEG2 with a 4:2:0 8-bit colour space.
- ``live``: a network stream (``rtsp:// rtsps:// http:// https:// udp:// tcp:// srt://``)
  or a capture device (``v4l2:///dev/video0``, ``avfoundation://0``, ``dshow://video=NAME``,
  ``x11grab://:0.0``, ``lavfi://testsrc``) read forward only through PyAV, with a timeout:
  :class:`LiveSource`.

:func:`open_source` picks the implementation from the path. :func:`resolve_data_path`
turns a bare sequence name into a path under the data directory, and :func:`sample_path`
locates the sample embedded in the repository.
"""

from __future__ import annotations

import configparser
import contextlib
import logging
import os
import re
import signal
import threading
from abc import ABC, abstractmethod
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

import av
import cv2
import numpy as np

from semcodec.codec.core.frames import even_size, resize_to
from semcodec.codec.core.layout import package_data, shared_dir

log = logging.getLogger(__name__)

DATA_DIR_ENV = "SEMCODEC_DATA_DIR"
SAMPLE_NAME = "PETS09-S2L1-384x288"
DEFAULT_FPS = 25.0
IMAGE_SUFFIXES = (".jpg", ".jpeg", ".png", ".bmp")
VIDEO_SUFFIXES = (
    ".mp4", ".m4v", ".mov", ".avi", ".mkv", ".webm", ".mpg", ".mpeg", ".ts", ".m2ts",
    ".flv", ".wmv", ".ogv", ".ivf", ".h264", ".264", ".h265", ".265", ".hevc",
)  # fmt: skip
SUPPORTED = (
    "MOT sequence folder (seqinfo.ini with imDir/file, or img1/), "
    f"image folder ({', '.join(IMAGE_SUFFIXES)}), "
    f"video file ({', '.join(VIDEO_SUFFIXES)}), "
    "raw .yuv (I420, needs width, height, fps), .y4m (4:2:0 8-bit), "
    "live stream URL or capture device (rtsp://, http://, v4l2:///dev/video0, ...)"
)
_Y4M_COLOURSPACES_420 = ("420", "420jpeg", "420paldv", "420mpeg2")
#: network protocols opened as live streams (URL given to FFmpeg as it is)
LIVE_SCHEMES = ("rtsp", "rtsps", "http", "https", "udp", "tcp", "srt")
#: capture devices: ``FORMAT://TARGET`` opens TARGET with that FFmpeg input format
DEVICE_FORMATS = {
    "v4l2": "/dev/video0", "avfoundation": "0", "dshow": "video=NAME", "x11grab": ":0.0",
    "lavfi": "testsrc=size=64x48:rate=10",
}  # fmt: skip
LIVE_SUPPORTED = (
    ", ".join(f"{s}://" for s in LIVE_SCHEMES)
    + " streams; capture devices "
    + ", ".join(f"{k}://{v}" for k, v in DEVICE_FORMATS.items())
)
#: seconds a live source waits to connect, and for each read, before giving up
DEFAULT_TIMEOUT_S = 10.0
_URL_RE = re.compile(r"^[a-zA-Z][a-zA-Z0-9+.-]*://")


class SourceError(ValueError):
    """A frame source cannot be opened or read; the message says what to change."""


@dataclass(frozen=True)
class SourceInfo:
    """What a source holds.

    Attributes:
        name: sequence name (``seqinfo.ini`` ``name``, else the file or folder name).
        kind: ``"mot"``, ``"frames"``, ``"video"``, ``"yuv"``, ``"y4m"`` or ``"live"``.
        path: the folder or file opened; for ``"live"`` the URL (``str``, its password
            replaced by ``***``).
        width, height: frame size in pixels.
        fps: frames per second (timestamps are ``(number - 1) / fps`` seconds).
        num_frames: number of frames, or None when the container does not say.
        groundtruth: MOT ``gt/gt.txt`` when present, else None.
    """

    name: str
    kind: str
    path: Path | str
    width: int
    height: int
    fps: float
    num_frames: int | None
    groundtruth: Path | None = None


@dataclass(frozen=True)
class Frame:
    """One decoded frame.

    Attributes:
        number: 1-based frame number (matches MOT ``gt.txt``).
        timestamp: seconds from the first frame, ``(number - 1) / fps``.
        rgb: ``(H, W, 3) uint8`` RGB pixels.
    """

    number: int
    timestamp: float
    rgb: np.ndarray


class FrameSource(ABC):
    """A sequence of RGB frames; subclasses implement :meth:`_decode`."""

    def __init__(self, info: SourceInfo) -> None:
        self._info = info

    @property
    def info(self) -> SourceInfo:
        """Size, rate, length and provenance of the source."""
        return self._info

    def __repr__(self) -> str:
        i = self._info
        return f"{type(self).__name__}({i.kind} {i.path}, {i.width}x{i.height}@{i.fps:g})"

    @abstractmethod
    def _decode(self, start: int, count: int | None) -> Iterator[np.ndarray]:
        """Yield ``(H, W, 3) uint8`` RGB frames ``start, start+1, ...`` (at most ``count``)."""

    def frames(self, start: int = 1, count: int | None = None) -> Iterator[Frame]:
        """Iterate over frames ``start .. start+count-1`` (1-based), fewer at the end.

        Raises:
            SourceError: ``start < 1``, ``count < 0``, or ``start`` past the last frame.
        """
        self._check_range(start, count)  # here, not on the first next()
        return self._numbered(start, count)

    def _numbered(self, start: int, count: int | None) -> Iterator[Frame]:
        number = start
        for rgb in self._decode(start, count):
            self._check_shape(rgb, number)
            yield Frame(number=number, timestamp=(number - 1) / self._info.fps, rgb=rgb)
            number += 1

    def read(self, start: int = 1, count: int | None = None) -> np.ndarray:
        """Read frames into one array, ``(T, H, W, 3) uint8`` RGB.

        Raises:
            SourceError: bad range, or no frame in the range.
        """
        stack = [f.rgb for f in self.frames(start, count)]
        if not stack:
            if count == 0:
                return np.empty((0, self._info.height, self._info.width, 3), np.uint8)
            raise SourceError(f"{self._info.path}: no frame at or after frame {start}")
        return np.stack(stack)

    def _check_range(self, start: int, count: int | None) -> None:
        if start < 1:
            raise SourceError(f"start must be >= 1 (frames are 1-based), got {start}")
        if count is not None and count < 0:
            raise SourceError(f"count must be >= 0 or None, got {count}")
        total = self._info.num_frames
        if total is not None and start > total:
            raise SourceError(f"{self._info.path}: start {start} is past the last frame {total}")

    def _check_shape(self, rgb: np.ndarray, number: int) -> None:
        want = (self._info.height, self._info.width, 3)
        if rgb.shape != want:
            raise SourceError(
                f"{self._info.path}: frame {number} is {rgb.shape[1]}x{rgb.shape[0]}, "
                f"expected {want[1]}x{want[0]}: all frames of a source must have one size "
                "(and match imWidth/imHeight of a seqinfo.ini)"
            )


# --------------------------------------------------------------------------- image folders


def _natural_key(path: Path) -> list[int | str]:
    """Sort key that orders ``f2.png`` before ``f10.png``."""
    return [int(t) if t.isdigit() else t.lower() for t in re.split(r"(\d+)", path.name)]


def list_images(folder: Path, suffixes: tuple[str, ...] = IMAGE_SUFFIXES) -> list[Path]:
    """Image files directly in ``folder`` with one of ``suffixes``, in natural order."""
    wanted = {s.lower() for s in suffixes}
    files = [p for p in folder.iterdir() if p.is_file() and p.suffix.lower() in wanted]
    return sorted(files, key=_natural_key)


def _read_image(path: Path) -> np.ndarray:
    """Decode one image file to ``(H, W, 3) uint8`` RGB."""
    bgr = cv2.imread(str(path), cv2.IMREAD_COLOR)
    if bgr is None:
        raise SourceError(f"{path}: cannot decode this image (corrupt or not an image)")
    return cv2.cvtColor(bgr, cv2.COLOR_BGR2RGB)


class ImageFolderSource(FrameSource):
    """A folder of image files, one frame each, in natural sort order."""

    def __init__(
        self,
        folder: Path,
        *,
        fps: float | None = None,
        files: list[Path] | None = None,
        name: str | None = None,
    ) -> None:
        """Open ``folder``; ``files`` overrides the listing, ``fps`` defaults to 25."""
        folder = Path(folder)
        self._files = list_images(folder) if files is None else files
        if not self._files:
            raise SourceError(f"{folder}: no images ({', '.join(IMAGE_SUFFIXES)}) in this folder")
        height, width = _read_image(self._files[0]).shape[:2]
        super().__init__(
            SourceInfo(
                name=name or folder.name,
                kind="frames",
                path=folder,
                width=width,
                height=height,
                fps=_check_fps(DEFAULT_FPS if fps is None else fps, folder),
                num_frames=len(self._files),
            )
        )

    def _decode(self, start: int, count: int | None) -> Iterator[np.ndarray]:
        stop = len(self._files) if count is None else start - 1 + count
        for path in self._files[start - 1 : stop]:
            yield _read_image(path)


# --------------------------------------------------------------------------- video files


class VideoSource(FrameSource):
    """A video file decoded with PyAV (first video stream, converted to rgb24)."""

    def __init__(self, path: Path, *, fps: float | None = None, name: str | None = None) -> None:
        """Open ``path``; ``fps`` overrides the stream's average rate."""
        path = Path(path)
        try:
            with av.open(str(path)) as container:
                if not container.streams.video:
                    raise SourceError(f"{path}: the file has no video stream")
                stream = container.streams.video[0]
                rate = stream.average_rate or stream.guessed_rate
                width, height = stream.codec_context.width, stream.codec_context.height
                num_frames = stream.frames or None
        except av.error.FFmpegError as exc:
            raise SourceError(f"{path}: FFmpeg cannot open it as a video ({exc})") from exc
        if fps is None:
            fps = float(rate) if rate else DEFAULT_FPS
        super().__init__(
            SourceInfo(
                name=name or path.stem,
                kind="video",
                path=path,
                width=width,
                height=height,
                fps=_check_fps(fps, path),
                num_frames=num_frames,
            )
        )

    def _decode(self, start: int, count: int | None) -> Iterator[np.ndarray]:
        if count == 0:
            return
        number, emitted = 0, 0
        try:
            with av.open(str(self._info.path)) as container:
                stream = container.streams.video[0]
                stream.thread_type = "AUTO"
                for frame in container.decode(stream):
                    number += 1
                    if number < start:
                        continue
                    yield frame.to_ndarray(format="rgb24")
                    emitted += 1
                    if count is not None and emitted >= count:
                        return
        except av.error.FFmpegError as exc:
            raise SourceError(f"{self._info.path}: decoding failed at frame {number + 1}") from exc


# --------------------------------------------------------------------------- raw YUV / Y4M


def _i420_to_rgb(buf: bytes, width: int, height: int) -> np.ndarray:
    """I420 bytes (Y, then U, then V planes) -> ``(H, W, 3) uint8`` RGB, BT.601 limited."""
    yuv = np.frombuffer(buf, np.uint8).reshape(height * 3 // 2, width)
    return cv2.cvtColor(yuv, cv2.COLOR_YUV2RGB_I420)


def _check_even(width: int, height: int, path: Path) -> None:
    if width <= 0 or height <= 0 or width % 2 or height % 2:
        raise SourceError(f"{path}: 4:2:0 frames need a positive even size, got {width}x{height}")


def _check_fps(fps: float, path: Path | str) -> float:
    if not fps > 0:
        raise SourceError(f"{path}: fps must be > 0, got {fps}")
    return float(fps)


class YuvSource(FrameSource):
    """Raw 8-bit I420 (YUV 4:2:0 planar) file; size and rate come from the caller."""

    def __init__(
        self,
        path: Path,
        *,
        width: int | None,
        height: int | None,
        fps: float | None,
        name: str | None = None,
    ) -> None:
        """Open ``path``; the frame count is the file size over ``width*height*3/2``."""
        path = Path(path)
        if width is None or height is None or fps is None:
            raise SourceError(
                f"{path}: a raw .yuv file does not store its size or rate; give width, height "
                "and fps (e.g. --width 352 --height 288 --fps 30)"
            )
        _check_even(width, height, path)
        self._frame_bytes = width * height * 3 // 2
        size = path.stat().st_size
        if size == 0:
            raise SourceError(f"{path}: the file is empty")
        if size % self._frame_bytes:
            raise SourceError(
                f"{path}: {size} bytes is not a whole number of {width}x{height} I420 frames "
                f"({self._frame_bytes} bytes each); check width and height, or the file is "
                "truncated"
            )
        super().__init__(
            SourceInfo(
                name=name or path.stem,
                kind="yuv",
                path=path,
                width=width,
                height=height,
                fps=_check_fps(fps, path),
                num_frames=size // self._frame_bytes,
            )
        )

    def _decode(self, start: int, count: int | None) -> Iterator[np.ndarray]:
        total = self._info.num_frames or 0
        stop = total if count is None else min(total, start - 1 + count)
        with self._info.path.open("rb") as fh:
            fh.seek((start - 1) * self._frame_bytes)
            for _ in range(start - 1, stop):
                buf = fh.read(self._frame_bytes)
                yield _i420_to_rgb(buf, self._info.width, self._info.height)


@dataclass(frozen=True)
class Y4mHeader:
    """Parsed YUV4MPEG2 stream header: size in pixels, rate as ``num/den``, colour space."""

    width: int
    height: int
    fps_num: int
    fps_den: int
    colourspace: str
    length: int


def parse_y4m_header(line: bytes, path: Path) -> Y4mHeader:
    """Parse the first line of a .y4m file (``YUV4MPEG2 W.. H.. F..:.. [C..] ...``)."""
    tokens = line.rstrip(b"\n").decode("ascii", "replace").split(" ")
    if tokens[0] != "YUV4MPEG2":
        raise SourceError(f"{path}: not a YUV4MPEG2 file (the header must start 'YUV4MPEG2 ')")
    fields = {t[0]: t[1:] for t in tokens[1:] if t}
    try:
        width, height = int(fields["W"]), int(fields["H"])
        num, den = (int(v) for v in fields.get("F", "").split(":"))
    except (KeyError, ValueError) as exc:
        raise SourceError(f"{path}: the y4m header needs W, H and F num:den: {line!r}") from exc
    colourspace = fields.get("C", "420jpeg")
    if colourspace not in _Y4M_COLOURSPACES_420:
        raise SourceError(
            f"{path}: y4m colour space C{colourspace} is not supported; only 8-bit 4:2:0 "
            f"({', '.join('C' + c for c in _Y4M_COLOURSPACES_420)}). Convert it, e.g. "
            "ffmpeg -i in.y4m -pix_fmt yuv420p out.y4m"
        )
    if den <= 0 or num <= 0:
        raise SourceError(f"{path}: invalid y4m frame rate F{num}:{den}")
    return Y4mHeader(width, height, num, den, colourspace, len(line))


class Y4mSource(FrameSource):
    """YUV4MPEG2 file with 8-bit 4:2:0 frames; frame offsets are indexed at open."""

    def __init__(self, path: Path, *, fps: float | None = None, name: str | None = None) -> None:
        """Open ``path`` and index its FRAME markers; ``fps`` overrides the header's F."""
        path = Path(path)
        with path.open("rb") as fh:
            header = parse_y4m_header(fh.readline(), path)
            _check_even(header.width, header.height, path)
            self._frame_bytes = header.width * header.height * 3 // 2
            self._offsets = self._index(fh, path)
        if not self._offsets:
            raise SourceError(f"{path}: the y4m file has no frames")
        super().__init__(
            SourceInfo(
                name=name or path.stem,
                kind="y4m",
                path=path,
                width=header.width,
                height=header.height,
                fps=_check_fps(header.fps_num / header.fps_den if fps is None else fps, path),
                num_frames=len(self._offsets),
            )
        )

    def _index(self, fh: BinaryIO, path: Path) -> list[int]:
        """Byte offsets of each frame's pixel data, reading only the FRAME lines."""
        size = os.fstat(fh.fileno()).st_size
        offsets: list[int] = []
        while fh.tell() < size:
            marker = fh.readline(1024)
            if not marker.startswith(b"FRAME"):
                raise SourceError(f"{path}: expected FRAME at byte {fh.tell() - len(marker)}")
            data_at = fh.tell()
            if data_at + self._frame_bytes > size:
                raise SourceError(
                    f"{path}: frame {len(offsets) + 1} is truncated (file ends early)"
                )
            offsets.append(data_at)
            fh.seek(data_at + self._frame_bytes)
        return offsets

    def _decode(self, start: int, count: int | None) -> Iterator[np.ndarray]:
        stop = len(self._offsets) if count is None else start - 1 + count
        with self._info.path.open("rb") as fh:
            for offset in self._offsets[start - 1 : stop]:
                fh.seek(offset)
                yield _i420_to_rgb(fh.read(self._frame_bytes), self._info.width, self._info.height)


# --------------------------------------------------------------------------- MOT sequences


@dataclass(frozen=True)
class SeqInfo:
    """The fields of a MOTChallenge ``seqinfo.ini`` that matter here (None when absent)."""

    name: str | None
    im_dir: str | None
    frame_rate: float | None
    seq_length: int | None
    width: int | None
    height: int | None
    im_ext: str | None


def read_seqinfo(path: Path) -> SeqInfo:
    """Parse ``seqinfo.ini`` (section ``[Sequence]``; ``imDir`` or ``file`` names the frames)."""
    parser = configparser.ConfigParser(interpolation=None)
    parser.optionxform = str  # keep camelCase keys
    try:
        parser.read(path, encoding="utf-8")
    except configparser.Error as exc:
        raise SourceError(f"{path}: not a valid ini file ({exc})") from exc
    if not parser.has_section("Sequence"):
        raise SourceError(f"{path}: no [Sequence] section (MOTChallenge seqinfo.ini expected)")
    sec = parser["Sequence"]

    def number(key: str, kind: type) -> float | int | None:
        raw = sec.get(key)
        if raw is None or not raw.strip():
            return None
        try:
            return kind(float(raw)) if kind is int else kind(raw)
        except ValueError as exc:
            raise SourceError(f"{path}: {key}={raw!r} is not a number") from exc

    return SeqInfo(
        name=sec.get("name"),
        im_dir=sec.get("imDir") or sec.get("file"),
        frame_rate=number("frameRate", float),
        seq_length=number("seqLength", int),
        width=number("imWidth", int),
        height=number("imHeight", int),
        im_ext=sec.get("imExt"),
    )


_DEFAULT_SEQINFO = SeqInfo(
    name=None, im_dir="img1", frame_rate=None, seq_length=None, width=None, height=None,
    im_ext=None,
)  # fmt: skip


def _check_declared_size(seq: SeqInfo, inner: SourceInfo, ini: Path) -> None:
    """Fail early when ``imWidth``/``imHeight`` disagree with the actual frames."""
    if (seq.width or inner.width, seq.height or inner.height) != (inner.width, inner.height):
        raise SourceError(
            f"{ini}: imWidth x imHeight = {seq.width}x{seq.height} but the frames in "
            f"{inner.path} are {inner.width}x{inner.height}; fix seqinfo.ini"
        )


class MotSequenceSource(FrameSource):
    """A MOTChallenge sequence folder: frames from an image folder or a video file.

    ``seqinfo.ini`` wins over the container for the rate (PETS09-S2L1's .avi says 10 fps,
    the sequence is 7 fps); an explicit ``fps`` argument wins over both.
    """

    def __init__(self, folder: Path, *, fps: float | None = None) -> None:
        """Open ``folder`` (with ``seqinfo.ini``, or at least ``img1/``)."""
        folder = Path(folder)
        ini = folder / "seqinfo.ini"
        seq = read_seqinfo(ini) if ini.is_file() else _DEFAULT_SEQINFO
        rate = fps if fps is not None else seq.frame_rate
        self._inner = self._open_frames(folder, seq, rate)
        inner = self._inner.info
        _check_declared_size(seq, inner, ini)
        num_frames = inner.num_frames if inner.num_frames is not None else seq.seq_length
        if seq.seq_length is not None and inner.num_frames is not None:
            num_frames = min(seq.seq_length, inner.num_frames)
        gt = folder / "gt" / "gt.txt"
        super().__init__(
            SourceInfo(
                name=seq.name or folder.name,
                kind="mot",
                path=folder,
                width=seq.width or inner.width,
                height=seq.height or inner.height,
                fps=inner.fps,
                num_frames=num_frames,
                groundtruth=gt if gt.is_file() else None,
            )
        )

    @staticmethod
    def _open_frames(folder: Path, seq: SeqInfo, fps: float | None) -> FrameSource:
        if not seq.im_dir:
            raise SourceError(f"{folder}/seqinfo.ini: neither imDir nor file names the frames")
        target = folder / seq.im_dir
        if target.is_dir():
            ext = seq.im_ext or ""
            suffixes = (ext,) if ext.lower() in IMAGE_SUFFIXES else IMAGE_SUFFIXES
            files = list_images(target, suffixes)
            if not files:
                raise SourceError(f"{target}: no {' / '.join(suffixes)} images in imDir")
            return ImageFolderSource(target, fps=fps, files=files)
        if target.is_file():
            return VideoSource(target, fps=fps)
        raise SourceError(f"{folder}/seqinfo.ini: imDir/file {seq.im_dir!r} does not exist")

    def _decode(self, start: int, count: int | None) -> Iterator[np.ndarray]:
        total = self._info.num_frames
        if total is not None:
            count = total - start + 1 if count is None else min(count, total - start + 1)
        return self._inner._decode(start, count)


# --------------------------------------------------------------------------- live streams


def is_live_url(text: str | os.PathLike[str]) -> bool:
    """True for ``scheme://...`` text (a network stream or a capture device, not a path)."""
    return isinstance(text, str) and _URL_RE.match(text) is not None


def redact_url(url: str) -> str:
    """``url`` with the password of ``user:password@`` replaced by ``***`` (for messages)."""
    return re.sub(r"^([a-z][a-z0-9+.-]*://[^/@:]*):[^/@]*@", r"\1:***@", url, flags=re.I)


def _split_live_url(url: str) -> tuple[str, str | None]:
    """``(what av.open opens, FFmpeg input format or None)`` of a live URL.

    Raises:
        SourceError: the scheme is neither a network protocol nor a capture device.
    """
    scheme = url.split("://", 1)[0].lower()
    if scheme in LIVE_SCHEMES:
        return url, None
    if scheme in DEVICE_FORMATS:
        target = url.split("://", 1)[1]
        if not target:
            raise SourceError(f"{url}: name the device after {scheme}://, e.g. {scheme}://"
                              f"{DEVICE_FORMATS[scheme]}")  # fmt: skip
        return target, scheme
    hint = " (give the path without file://)" if scheme == "file" else ""
    raise SourceError(f"{redact_url(url)}: unsupported URL scheme {scheme}://{hint}; "
                      f"supported: {LIVE_SUPPORTED}")  # fmt: skip


class LiveSource(FrameSource):
    """A network stream or capture device read forward only through PyAV (FFmpeg).

    ``rtsp:// rtsps:// http:// https:// udp:// tcp:// srt://`` URLs are opened as they are
    (RTSP over TCP unless ``options`` says ``rtsp_transport=udp``); ``v4l2:///dev/video0``,
    ``avfoundation://0``, ``dshow://video=NAME``, ``x11grab://:0.0`` and
    ``lavfi://testsrc=size=64x48:rate=10`` open the part after ``://`` with that FFmpeg
    input device. The first video stream is decoded and converted to rgb24.

    - Size: that of the first frame, decoded at open. A later frame of another size raises
      :class:`SourceError` (frames are never resized).
    - Rate: ``fps`` if given, else the stream's average rate, else its guessed rate; when
      neither is in ``(0, 240]`` fps, :data:`DEFAULT_FPS` with a warning in the log.
      Timestamps are nominal, ``(number - 1) / fps`` seconds, not the stream's clock.
    - Length: what the container says (an HTTP file may say), else None: frames are read
      until the stream ends, ``count`` is reached, or :meth:`stop` is called.
    - Timeout: opening, and every read after it, gives up after ``timeout`` seconds without
      data (:class:`SourceError`), so a dead camera never hangs the caller.
    - Memory: one decoded frame at a time plus FFmpeg's own bounded buffers.

    The connection made at open serves the first :meth:`frames` call; every later call
    connects again and numbers the frames from 1 at that moment (a camera gives the
    current picture, not the earlier ones).
    """

    def __init__(
        self,
        url: str,
        *,
        fps: float | None = None,
        timeout: float = DEFAULT_TIMEOUT_S,
        options: Mapping[str, str] | None = None,
        name: str | None = None,
    ) -> None:
        """Connect to ``url`` and decode its first frame.

        Args:
            url: ``scheme://...`` (see the class docstring).
            fps: frames per second; overrides the stream's rate.
            timeout: seconds to wait for the connection and for each read (> 0).
            options: FFmpeg options of the input (protocol, demuxer or device), e.g.
                ``{"rtsp_transport": "udp"}`` or ``{"video_size": "640x480"}``.
            name: sequence name (default: the URL's last path part, else the host).
        """
        if not timeout > 0:
            raise SourceError(f"{redact_url(url)}: the timeout must be > 0 s, got {timeout}")
        self._url, self._timeout = url, float(timeout)
        self._target, self._format = _split_live_url(url)
        self._options = dict(options or {})
        scheme = url.split("://", 1)[0].lower()
        if scheme in ("rtsp", "rtsps"):
            self._options.setdefault("rtsp_transport", "tcp")
        self._stop = threading.Event()
        shown = redact_url(url)
        self._pending: tuple | None = self._connect(shown)
        container, _, first = self._pending
        stream = container.streams.video[0]
        rate = stream.average_rate or stream.guessed_rate
        if fps is None:
            if rate and 0 < float(rate) <= 240:
                fps = float(rate)
            else:
                log.warning("%s: the stream states no usable frame rate (%s); assuming %g fps "
                            "(pass --fps to set it)", shown, rate, DEFAULT_FPS)  # fmt: skip
                fps = DEFAULT_FPS
        super().__init__(
            SourceInfo(
                name=name or _url_name(url),
                kind="live",
                path=shown,
                width=first.width,
                height=first.height,
                fps=_check_fps(fps, shown),
                num_frames=stream.frames or None,
            )
        )

    def stop(self) -> None:
        """End the iteration in progress after the frame being decoded (thread-safe)."""
        self._stop.set()

    def _connect(self, shown: str) -> tuple:
        """Open the input; ``(container, frame iterator, first av.VideoFrame)``."""
        try:
            container = av.open(self._target, format=self._format, options=self._options,
                                timeout=(self._timeout, self._timeout))  # fmt: skip
        except av.error.ExitError as exc:
            raise SourceError(f"{shown}: no answer within {self._timeout:g} s (camera or server "
                              "down, wrong address, or a firewall?)") from exc  # fmt: skip
        except av.error.FFmpegError as exc:
            raise SourceError(f"{shown}: FFmpeg cannot open it ({exc})") from exc
        try:
            if not container.streams.video:
                raise SourceError(f"{shown}: the stream has no video")
            decoded = container.decode(container.streams.video[0])
            first = next(decoded, None)
            if first is None:
                raise SourceError(f"{shown}: the stream ended before its first frame")
        except av.error.FFmpegError as exc:
            container.close()
            raise self._read_error(shown, 1, exc) from exc
        except BaseException:
            container.close()
            raise
        return container, decoded, first

    def _read_error(self, shown: str, number: int, exc: Exception) -> SourceError:
        if isinstance(exc, av.error.ExitError):
            return SourceError(f"{shown}: no data for {self._timeout:g} s at frame {number} "
                               "(the stream stalled or the camera went away)")  # fmt: skip
        return SourceError(f"{shown}: reading failed at frame {number} ({exc})")

    def _decode(self, start: int, count: int | None) -> Iterator[np.ndarray]:
        if count == 0:
            return
        self._stop.clear()
        pending, self._pending = self._pending, None
        container, decoded, first = pending or self._connect(str(self._info.path))
        number, emitted = 1, 0
        frame = first
        try:
            while True:
                if number >= start:
                    yield frame.to_ndarray(format="rgb24")
                    emitted += 1
                    if (count is not None and emitted >= count) or self._stop.is_set():
                        return
                try:
                    frame = next(decoded, None)
                except av.error.FFmpegError as exc:
                    raise self._read_error(str(self._info.path), number + 1, exc) from exc
                if frame is None or self._stop.is_set():
                    return
                number += 1
        finally:
            container.close()

    def _check_shape(self, rgb: np.ndarray, number: int) -> None:
        if rgb.shape[:2] != (self._info.height, self._info.width):
            raise SourceError(
                f"{self._info.path}: frame {number} is {rgb.shape[1]}x{rgb.shape[0]} but the "
                f"stream began at {self._info.width}x{self._info.height}; a stream must keep "
                "one size (fix the camera's resolution, then start again)"
            )


def _url_name(url: str) -> str:
    """A sequence name for ``url``: its last path part without suffix, else its host."""
    rest = url.split("://", 1)[1].split("?", 1)[0].rstrip("/")
    host, _, path = rest.partition("/")
    last = path.rsplit("/", 1)[-1] if path else host.rsplit("@", 1)[-1]
    return Path(last).stem or last or "live"


@contextlib.contextmanager
def interrupt_ends(source: FrameSource) -> Iterator[None]:
    """While inside, the first Ctrl-C (SIGINT) ends a :class:`LiveSource` cleanly.

    The iteration stops after the current frame, so what was read is kept (an encoder can
    finish its file); a second Ctrl-C raises :exc:`KeyboardInterrupt` as usual. Does nothing
    for other sources or outside the main thread. The previous handler is restored on exit.
    """
    main = threading.current_thread() is threading.main_thread()
    if not isinstance(source, LiveSource) or not main:
        yield
        return
    previous = signal.getsignal(signal.SIGINT)

    def handler(signum: int, frame: object) -> None:
        log.warning("%s: interrupted; ending the stream after this frame (Ctrl-C again to "
                    "abort)", source.info.path)  # fmt: skip
        source.stop()
        signal.signal(signal.SIGINT, signal.default_int_handler)

    signal.signal(signal.SIGINT, handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)


# --------------------------------------------------------------------------- opening


def open_source(
    path: str | os.PathLike[str],
    *,
    fps: float | None = None,
    width: int | None = None,
    height: int | None = None,
    timeout: float = DEFAULT_TIMEOUT_S,
    options: Mapping[str, str] | None = None,
) -> FrameSource:
    """Open ``path`` as a frame source, choosing the reader from what the path is.

    Args:
        path: MOT folder (or its ``seqinfo.ini``), image folder, video, .yuv or .y4m file,
            or a ``str`` URL of a live stream or capture device (:class:`LiveSource`).
        fps: overrides the rate the source declares; required for .yuv.
        width, height: frame size in pixels; required for .yuv, ignored elsewhere.
        timeout: live sources only: seconds to wait to connect and for each read.
        options: live sources only: FFmpeg input options (``{"rtsp_transport": "udp"}``).

    Raises:
        SourceError: the path is missing, empty or of an unsupported kind; a live source
            cannot be reached within ``timeout`` or has an unsupported scheme; ``options``
            for a file or folder (they would be ignored).
    """
    if is_live_url(path):
        return LiveSource(str(path), fps=fps, timeout=timeout, options=options)
    if options:
        raise SourceError(f"{path}: input options ({', '.join(sorted(options))}) are FFmpeg "
                          "options of live streams; a file or folder takes none")  # fmt: skip
    path = Path(path)
    if not path.exists():
        raise SourceError(f"{path}: no such file or folder")
    if path.is_file() and path.name == "seqinfo.ini":
        path = path.parent
    if path.is_dir():
        return _open_folder(path, fps)
    suffix = path.suffix.lower()
    if path.stat().st_size == 0:
        raise SourceError(f"{path}: the file is empty")
    if suffix == ".yuv":
        return YuvSource(path, width=width, height=height, fps=fps)
    if suffix == ".y4m":
        return Y4mSource(path, fps=fps)
    if suffix in VIDEO_SUFFIXES:
        return VideoSource(path, fps=fps)
    raise SourceError(
        f"{path}: unsupported input {suffix or '(no suffix)'}; supported: {SUPPORTED}"
    )


def _open_folder(folder: Path, fps: float | None) -> FrameSource:
    if (folder / "seqinfo.ini").is_file() or (folder / "img1").is_dir():
        return MotSequenceSource(folder, fps=fps)
    if list_images(folder):
        return ImageFolderSource(folder, fps=fps)
    raise SourceError(f"{folder}: no frames found in this folder; supported: {SUPPORTED}")


# --------------------------------------------------------------------------- data locations


def default_data_root() -> Path | None:
    """``../shared/data`` beside a checkout (where CI and developers keep the data), or
    ``None`` for an installed package or with ``SEMCODEC_NO_SHARED=1``."""
    shared = shared_dir()
    return None if shared is None else shared / "data"


def data_roots(data_dir: str | os.PathLike[str] | None = None) -> list[Path]:
    """Where bare sequence names are looked up, in order: ``data_dir`` (``--data-dir``),
    ``$SEMCODEC_DATA_DIR`` and ``../shared/data`` beside a checkout (see
    :func:`default_data_root`)."""
    roots: list[Path] = []
    if data_dir:
        roots.append(Path(data_dir))
    if os.environ.get(DATA_DIR_ENV):
        roots.append(Path(os.environ[DATA_DIR_ENV]))
    if default_data_root() is not None:
        roots.append(default_data_root())
    return roots


def resolve_data_path(
    path_or_name: str | os.PathLike[str], data_dir: str | os.PathLike[str] | None = None
) -> Path | str:
    """Turn a path or a bare sequence name (``PETS09-S2L1``) into an existing path.

    A live URL (``scheme://...``, see :func:`is_live_url`) is returned unchanged as a
    ``str`` (a ``Path`` would fold its ``//``). An existing path is returned as is.
    Otherwise the name is looked up under each of :func:`data_roots`; the embedded sample's
    name (``PETS09-S2L1-384x288``) finds the sample shipped with the package.

    Raises:
        SourceError: not found; the message lists every place searched and names the sample.
    """
    if is_live_url(path_or_name):
        return str(path_or_name)
    given = Path(path_or_name)
    if given.exists():
        return given
    tried = [] if given.is_absolute() else [root / given for root in data_roots(data_dir)]
    for candidate in tried:
        if candidate.exists():
            return candidate
    if str(path_or_name) == SAMPLE_NAME:
        return sample_path()
    where = "; ".join(str(c) for c in [given, *tried])
    raise SourceError(
        f"{path_or_name}: not found (looked at: {where}). Pass an existing path, or put the "
        f"data under --data-dir DIR or ${DATA_DIR_ENV} (or ../shared/data beside a checkout); "
        f"the sample shipped with semcodec is named {SAMPLE_NAME}"
    )


def sample_path() -> Path:
    """The embedded sample ``datasets/sample/PETS09-S2L1-384x288`` (60 frames, 7 fps)."""
    path = package_data(f"datasets/sample/{SAMPLE_NAME}")
    if not (path / "seqinfo.ini").is_file():
        raise SourceError(
            f"{path}: the embedded sample is missing from the installed package; reinstall "
            "semcodec, or rebuild it in a checkout with: python datasets/make_sample.py "
            "--shared ../shared/data"
        )
    return path


def resize_frames(frames: np.ndarray, scale: float) -> np.ndarray:
    """Resize ``(T, H, W, 3) uint8`` frames by ``scale`` to even dimensions (at least 2).

    Area averaging when shrinking, bicubic when enlarging (:func:`codec.core.frames.resize_to`);
    always returns a new array.
    """
    if frames.ndim != 4 or frames.shape[-1] != 3 or frames.dtype != np.uint8:
        raise SourceError(f"expected (T, H, W, 3) uint8 frames, got {frames.shape} {frames.dtype}")
    if not scale > 0:
        raise SourceError(f"scale must be > 0, got {scale}")
    height, width = frames.shape[1:3]
    out = resize_to(frames, *even_size(width, height, scale))
    return out.copy() if out is frames else out
