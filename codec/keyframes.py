"""Intra coders for keyframes: one picture in, the codec's real bitstream out.

Every coder implements :class:`IntraCoder` and is registered by name:

========  =================================================================================
name      quality (int 0..100, higher is better) -> codec parameter
========  =================================================================================
``hevc``  libx265, intra only (``keyint=1``), CRF ``= 51 * (100 - quality) / 100``
          (float: 0 -> CRF 51, 50 -> 25.5, 100 -> CRF 0). Raw Annex-B HEVC (VPS, SPS, PPS,
          one IDR slice), without x265's settings SEI (``info=0``).
``av1``   libsvtav1, one key frame, CRF ``= round(63 - 62 * quality / 100)``
          (0 -> 63, 50 -> 32, 100 -> 1). Raw low-overhead OBU stream (temporal delimiter,
          sequence header, frame), decoded with libdav1d.
``webp``  libwebp through OpenCV, lossy, WebP quality ``= max(1, quality)`` (libwebp's own
          0..100 scale; OpenCV clamps 0 to 1). A RIFF/WebP file.
========  =================================================================================

All coders take ``downscale`` (a fraction in ``(0, 1]``): the frame is area-downscaled to
:meth:`IntraCoder.coded_size` (even sides) before encoding and bicubically upscaled back to
the frame size on decode, for keyframes at very low rates. The decoder derives the coded
size from the frame size and ``downscale``, so neither is stored in the bytes; the caller
(the bitstream) carries the frame size.

The 4:2:0 coders pad odd or tiny frames by edge replication to even sides of at least 16
pixels and crop after decoding. Colour conversion is BT.601, limited range (FFmpeg's
default), both ways in integer arithmetic (:mod:`codec.core.yuv`), so that a picture codes
to the same bytes and decodes to the same pixels on every machine (swscale's SIMD did not:
issue 52).

Bytes the decoder rejects raise :class:`KeyframeError` (HEVC is decoded with
``err_detect=explode``, so it fails rather than conceals where FFmpeg notices the damage).
Damage a decoder cannot notice (a flipped bit inside residual data) decodes to a wrong
picture: that is what the checksum of the bitstream unit is for.
"""

from __future__ import annotations

import contextlib
import os
import struct
from abc import ABC, abstractmethod
from fractions import Fraction
from typing import Any, ClassVar

import av
import cv2
import numpy as np

from semcodec.codec.core.frames import even_size, resize_to
from semcodec.codec.core.registry import Registry
from semcodec.codec.core.yuv import i420_to_rgb, rgb_to_i420


class KeyframeError(ValueError):
    """Bad input to an intra coder (frame, quality, option, name) or undecodable bytes."""


class KeyframeSizeError(KeyframeError):
    """The picture's bytes are of another size than the coder expects (a plate coded at
    another of the stream's scales, or hostile bytes): refused before decoding where the
    coder can read the declared size."""


class IntraCoder(ABC):
    """Codes one ``(H, W, 3) uint8`` RGB picture to bytes and back.

    Subclasses implement :meth:`_encode` and :meth:`_decode` for a frame of the coded size
    (already downscaled and, where :attr:`min_side`/:attr:`alignment` ask, padded);
    :meth:`encode`/:meth:`decode` do the checks, scaling and padding.

    Args:
        downscale: code the picture at this fraction of the frame size, in ``(0, 1]``.
    """

    name: ClassVar[str] = ""
    #: Coded sides are padded up to a multiple of this (2 for 4:2:0 codecs).
    alignment: ClassVar[int] = 1
    #: And to at least this many pixels.
    min_side: ClassVar[int] = 1

    def __init__(self, *, downscale: float = 1.0) -> None:
        if isinstance(downscale, bool) or not isinstance(downscale, int | float):
            raise KeyframeError(f"downscale must be a number in (0, 1], got {downscale!r}")
        if not 0 < downscale <= 1:
            raise KeyframeError(f"downscale must be in (0, 1], got {downscale}")
        self.downscale = float(downscale)

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self._options()})"

    def _options(self) -> str:
        return f"downscale={self.downscale:g}"

    def coded_size(self, size: tuple[int, int]) -> tuple[int, int]:
        """``(w, h)`` the picture is coded at for a frame of ``size = (width, height)``:
        the size itself without downscaling, else :func:`codec.core.frames.even_size`."""
        width, height = _check_size(size)
        if self.downscale == 1.0:
            return width, height
        return even_size(width, height, self.downscale)

    def encode(self, frame: np.ndarray, quality: int) -> bytes:
        """Encodes ``frame``, ``(H, W, 3) uint8`` RGB, at ``quality`` 0..100 (higher is
        better; see the module docstring for each codec's mapping).

        Raises:
            KeyframeError: wrong dtype or shape, quality not an int in 0..100, or the
                encoder failed.
        """
        _check_frame(frame)
        quality = _check_quality(quality)
        height, width = frame.shape[:2]
        cw, ch = self.coded_size((width, height))
        picture = resize_to(frame[None], cw, ch)[0]
        picture = self._pad(picture)
        try:
            data = self._encode(np.ascontiguousarray(picture), quality)
        except (av.FFmpegError, cv2.error) as exc:
            raise KeyframeError(f"{self.name}: encoding failed: {exc}") from exc
        if not data:
            raise KeyframeError(f"{self.name}: the encoder returned no data")
        return data

    def decode(self, data: bytes, size: tuple[int, int], upscale=None) -> np.ndarray:
        """Decodes bytes from :meth:`encode` for a frame of ``size = (width, height)``.

        ``upscale(picture, size)``: brings the picture as coded (smaller when the coder
        downscales) to ``size``; default :func:`~codec.core.frames.resize_to`'s bicubic (the
        cloud's super-resolution passes its own).

        Returns:
            ``(height, width, 3) uint8`` RGB.

        Raises:
            KeyframeError: empty or undecodable bytes, or a picture of the wrong size.
        """
        width, height = _check_size(size)
        if not isinstance(data, bytes | bytearray | memoryview) or len(data) == 0:
            raise KeyframeError(f"{self.name}: no data to decode")
        cw, ch = self.coded_size((width, height))
        pw, ph = self._padded_size(cw, ch)
        try:
            picture = self._decode_checked(bytes(data), (pw, ph))
        except (av.FFmpegError, cv2.error, EOFError) as exc:
            raise KeyframeError(f"{self.name}: undecodable data: {exc}") from exc
        if picture is None or picture.shape != (ph, pw, 3):
            shape = None if picture is None else picture.shape
            raise KeyframeSizeError(
                f"{self.name}: decoded picture has shape {shape}, expected ({ph}, {pw}, 3) "
                f"for a {width}x{height} frame at downscale {self.downscale:g}"
            )
        picture = np.ascontiguousarray(picture[:ch, :cw])
        if upscale is not None and (cw, ch) != (width, height):
            return upscale(picture, (width, height))
        return resize_to(picture[None], width, height)[0]

    def _padded_size(self, width: int, height: int) -> tuple[int, int]:
        def pad(side: int) -> int:
            side = max(side, self.min_side)
            return -(-side // self.alignment) * self.alignment

        return pad(width), pad(height)

    def _pad(self, picture: np.ndarray) -> np.ndarray:
        height, width = picture.shape[:2]
        pw, ph = self._padded_size(width, height)
        if (pw, ph) == (width, height):
            return picture
        return np.pad(picture, ((0, ph - height), (0, pw - width), (0, 0)), mode="edge")

    def _decode_checked(self, data: bytes, size: tuple[int, int]) -> np.ndarray | None:
        """Decodes a picture that must be ``size = (w, h)`` (the padded coded size).

        Coders that can read the picture's declared size from its header (without decoding
        it) check it here first, so hostile bytes declaring a huge picture fail before any
        picture memory is allocated. The default just calls :meth:`_decode`.
        """
        del size
        return self._decode(data)

    @abstractmethod
    def _encode(self, picture: np.ndarray, quality: int) -> bytes:
        """Encodes an ``(h, w, 3) uint8`` RGB picture (coded and padded size)."""

    @abstractmethod
    def _decode(self, data: bytes) -> np.ndarray | None:
        """Decodes to ``(h, w, 3) uint8`` RGB (padded size), or ``None`` if no picture."""


def _require_codecs(*names: str) -> None:
    missing = [n for n in names if n not in av.codecs_available]
    if missing:
        raise KeyframeError(
            f"this PyAV/FFmpeg build lacks {', '.join(missing)}; install PyAV wheels that "
            "include them (the PyPI wheels do)"
        )


INTRA_CODERS: Registry[IntraCoder] = Registry(
    "intra coder", IntraCoder, KeyframeError, entry_point_group="semcodec.intra_coders"
)
#: Class decorator registering an :class:`IntraCoder` subclass under a name.
register_intra_coder = INTRA_CODERS.register


def available_intra_coders() -> list[str]:
    """Registered coder names, sorted."""
    return INTRA_CODERS.names()


def create_intra_coder(name: str, **options: Any) -> IntraCoder:
    """A new coder by registry name; ``options`` go to its constructor.

    Raises:
        KeyframeError: unknown name or bad option.
    """
    return INTRA_CODERS.create(name, **options)


def _check_quality(quality: int) -> int:
    if isinstance(quality, bool) or not isinstance(quality, int | np.integer):
        raise KeyframeError(f"quality must be an int 0..100, got {quality!r}")
    if not 0 <= quality <= 100:
        raise KeyframeError(f"quality must be in 0..100, got {quality}")
    return int(quality)


def _check_frame(frame: np.ndarray) -> None:
    if not isinstance(frame, np.ndarray) or frame.dtype != np.uint8:
        raise KeyframeError(
            f"frame must be a uint8 numpy array, got {getattr(frame, 'dtype', type(frame))}"
        )
    if frame.ndim != 3 or frame.shape[2] != 3 or frame.shape[0] < 1 or frame.shape[1] < 1:
        raise KeyframeError(f"frame must have shape (H, W, 3), got {frame.shape}")


def _check_size(size: tuple[int, int]) -> tuple[int, int]:
    try:
        width, height = (int(v) for v in size)
    except (TypeError, ValueError):
        raise KeyframeError(f"size must be (width, height), got {size!r}") from None
    if width < 1 or height < 1:
        raise KeyframeError(f"size must be positive, got {size!r}")
    return width, height


class _PyAVIntraCoder(IntraCoder):
    """One-frame encode through a PyAV codec context; decode through FFmpeg's parser and
    decoder, the declared picture size checked first (see :meth:`_decode_checked`)."""

    alignment = 2
    min_side = 16
    encoder: ClassVar[str]
    demuxer: ClassVar[str]
    decoder: ClassVar[str]
    decoder_options: ClassVar[dict[str, str]] = {}

    def _codec_options(self, quality: int) -> dict[str, str]:
        raise NotImplementedError

    def _encode(self, picture: np.ndarray, quality: int) -> bytes:
        ctx = av.CodecContext.create(self.encoder, "w")
        ctx.width, ctx.height = picture.shape[1], picture.shape[0]
        ctx.pix_fmt = "yuv420p"
        ctx.time_base = Fraction(1, 25)
        ctx.options = self._codec_options(quality)
        # converted here, not by swscale, whose SIMD gave other bytes on aarch64 (issue 52)
        frame = av.VideoFrame.from_ndarray(rgb_to_i420(picture), format="yuv420p")
        frame.pts = 0
        packets = list(ctx.encode(frame)) + list(ctx.encode(None))
        return b"".join(bytes(p) for p in packets)

    def _decode(self, data: bytes) -> np.ndarray | None:
        return self._decode_checked(data, None)

    def _decode_checked(self, data: bytes, size: tuple[int, int] | None) -> np.ndarray | None:
        """Splits the bytes into packets with FFmpeg's parser, which reads the picture size
        from the sequence header (HEVC SPS, AV1 sequence header); a size other than ``size``
        is refused before decoding, and the decoder is capped at about ``size``'s pixels
        (``max_pixels``, with room for block alignment) in case the parser missed a header."""
        ctx = av.CodecContext.create(self.decoder, "r")
        options = dict(self.decoder_options)
        if size is not None:
            # coded sizes are aligned up to the codec's block size (HEVC: 8 to 64)
            options["max_pixels"] = str((size[0] + 64) * (size[1] + 64))
        ctx.options = options
        packets = list(ctx.parse(data)) + list(ctx.parse(None))
        declared = (ctx.width, ctx.height)
        if size is not None and declared != (0, 0) and declared != tuple(size):
            raise KeyframeSizeError(
                f"{self.name}: the picture header declares {declared[0]}x{declared[1]}, "
                f"expected {size[0]}x{size[1]} (refused before decoding)"
            )
        for packet in packets:
            for frame in ctx.decode(packet):
                return self._picture(frame)
        for frame in ctx.decode(None):
            return self._picture(frame)
        return None

    def _picture(self, frame: av.VideoFrame) -> np.ndarray:
        if frame.is_corrupt:
            raise KeyframeError(f"{self.name}: the decoder reports a corrupt picture")
        if frame.format.name == "yuv420p" and frame.width % 2 == 0 and frame.height % 2 == 0:
            return i420_to_rgb(frame.to_ndarray(), frame.width, frame.height)
        return frame.to_ndarray(format="rgb24")  # not what these coders write: swscale


@register_intra_coder("hevc")
class HevcIntraCoder(_PyAVIntraCoder):
    """HEVC intra picture with libx265; raw Annex-B bytes.

    Args:
        preset: x265 speed preset (``"ultrafast"`` ... ``"placebo"``).
        downscale: see :class:`IntraCoder`.
    """

    encoder = "libx265"
    demuxer = "hevc"
    decoder = "hevc"
    decoder_options = {"err_detect": "explode"}  # fail on damage instead of concealing
    PRESETS = (
        "ultrafast",
        "superfast",
        "veryfast",
        "faster",
        "fast",
        "medium",
        "slow",
        "slower",
        "veryslow",
        "placebo",
    )

    def __init__(self, *, preset: str = "ultrafast", downscale: float = 1.0) -> None:
        super().__init__(downscale=downscale)
        if preset not in self.PRESETS:
            raise KeyframeError(f"hevc preset must be one of {self.PRESETS}, got {preset!r}")
        _require_codecs("libx265", "hevc")
        self.preset = preset

    def _options(self) -> str:
        return f"preset={self.preset!r}, {super()._options()}"

    @staticmethod
    def crf(quality: int) -> float:
        """x265 CRF for ``quality`` 0..100: 51 (worst) .. 0 (best), linear."""
        return 51.0 * (100 - _check_quality(quality)) / 100.0

    def _codec_options(self, quality: int) -> dict[str, str]:
        return {
            "preset": self.preset,
            "crf": f"{self.crf(quality):g}",
            "x265-params": "keyint=1:info=0:log-level=error",
        }


@register_intra_coder("av1")
class Av1IntraCoder(_PyAVIntraCoder):
    """AV1 key frame with libsvtav1; raw OBU bytes, decoded with libdav1d.

    Args:
        preset: SVT-AV1 preset 0 (slowest) .. 13 (fastest; above 9 SVT-AV1 warns of
            artefacts). 8 is about 50-70 ms for 768x576 on 2 shared cores.
        downscale: see :class:`IntraCoder`.
    """

    encoder = "libsvtav1"
    demuxer = "obu"
    decoder = "libdav1d"

    def __init__(self, *, preset: int = 8, downscale: float = 1.0) -> None:
        super().__init__(downscale=downscale)
        if isinstance(preset, bool) or not isinstance(preset, int) or not 0 <= preset <= 13:
            raise KeyframeError(f"av1 preset must be an int 0..13, got {preset!r}")
        _require_codecs("libsvtav1", "libdav1d")
        os.environ.setdefault("SVT_LOG", "1")  # errors only: SVT-AV1 prints its set-up per picture
        self.preset = preset

    def _options(self) -> str:
        return f"preset={self.preset}, {super()._options()}"

    @staticmethod
    def crf(quality: int) -> int:
        """SVT-AV1 CRF for ``quality`` 0..100: 63 (worst) .. 1 (best), linear, rounded."""
        return round(63 - 62 * _check_quality(quality) / 100)

    def _codec_options(self, quality: int) -> dict[str, str]:
        return {"preset": str(self.preset), "crf": str(self.crf(quality))}

    def _encode(self, picture: np.ndarray, quality: int) -> bytes:
        with kept_scheduling():
            return super()._encode(picture, quality)

    def _padded_size(self, width: int, height: int) -> tuple[int, int]:
        """The base padding, and a side under :data:`AV1_SAFE_SIDE` padded to it when the
        other is over 64: SVT-AV1 4.1 never returns from such pictures (probed: 16x96, 24x80,
        20x1080, 400x24, 96x20 hang; 26 and 28 code at every length probed, to 1080), so no
        stream can hold one and the padding changes no decodable stream."""
        width, height = super()._padded_size(width, height)
        if width < AV1_SAFE_SIDE and height > 64:
            width = AV1_SAFE_SIDE
        if height < AV1_SAFE_SIDE and width > 64:
            height = AV1_SAFE_SIDE
        return width, height


#: See :meth:`Av1IntraCoder._padded_size`.
AV1_SAFE_SIDE = 28


@contextlib.contextmanager
def kept_scheduling():
    """Gives the calling thread back its scheduling policy and priority on leaving.

    SVT-AV1 (4.1, through PyAV), run as root, switches the thread that opens an encoder to
    real-time ``SCHED_FIFO`` (probed: ``os.sched_getscheduler(0)`` 0 -> 1 after one key
    frame). Every thread and process that thread starts afterwards inherits it: in the test
    suite the servers and agents started after an AV1 test ran at real-time priority and
    starved the 2-core machine (load average 80, ``ps`` hanging); an edge agent run as root
    with AV1 key frames would do the same to its board. The encoder's own threads still run
    at that priority while it codes one picture.
    """
    if not hasattr(os, "sched_getscheduler"):  # not Linux
        yield
        return
    policy, param = os.sched_getscheduler(0), os.sched_getparam(0)
    try:
        yield
    finally:
        if (os.sched_getscheduler(0), os.sched_getparam(0)) != (policy, param):
            os.sched_setscheduler(0, policy, param)


@register_intra_coder("webp")
class WebpIntraCoder(IntraCoder):
    """Lossy WebP with OpenCV's libwebp; a RIFF/WebP file."""

    @staticmethod
    def webp_quality(quality: int) -> int:
        """libwebp quality for ``quality`` 0..100 (OpenCV's lowest is 1)."""
        return max(1, _check_quality(quality))

    def _encode(self, picture: np.ndarray, quality: int) -> bytes:
        bgr = cv2.cvtColor(picture, cv2.COLOR_RGB2BGR)
        ok, buf = cv2.imencode(".webp", bgr, [cv2.IMWRITE_WEBP_QUALITY, self.webp_quality(quality)])
        if not ok:
            raise KeyframeError("webp: OpenCV could not encode the picture")
        return buf.tobytes()

    def _decode_checked(self, data: bytes, size: tuple[int, int]) -> np.ndarray | None:
        declared = webp_size(data)
        if declared != tuple(size):
            raise KeyframeSizeError(
                f"webp: the picture header declares {declared[0]}x{declared[1]}, expected "
                f"{size[0]}x{size[1]} (refused before decoding)"
            )
        return self._decode(data)

    def _decode(self, data: bytes) -> np.ndarray | None:
        if data[:4] != b"RIFF" or data[8:12] != b"WEBP":
            raise KeyframeError("webp: the data is not a WebP file")
        bgr = cv2.imdecode(np.frombuffer(data, np.uint8), cv2.IMREAD_COLOR)
        return None if bgr is None else cv2.cvtColor(bgr, cv2.COLOR_BGR2RGB)


def webp_size(data: bytes) -> tuple[int, int]:
    """``(width, height)`` a RIFF/WebP file declares, read from its first chunk's header
    (``VP8 `` lossy, ``VP8L`` lossless or ``VP8X`` extended canvas), without decoding.

    Raises:
        KeyframeError: not a WebP file, or a header too short or malformed to read.
    """
    if len(data) < 30 or data[:4] != b"RIFF" or data[8:12] != b"WEBP":
        raise KeyframeError("webp: the data is not a WebP file")
    chunk, body = data[12:16], data[20:30]
    if chunk == b"VP8 " and body[3:6] == b"\x9d\x01\x2a":
        width, height = struct.unpack_from("<HH", body, 6)
        return width & 0x3FFF, height & 0x3FFF
    if chunk == b"VP8L" and body[0] == 0x2F:
        bits = int.from_bytes(body[1:5], "little")
        return (bits & 0x3FFF) + 1, ((bits >> 14) & 0x3FFF) + 1
    if chunk == b"VP8X":
        return int.from_bytes(body[4:7], "little") + 1, int.from_bytes(body[7:10], "little") + 1
    raise KeyframeError(f"webp: unreadable picture header (chunk {chunk!r})")
