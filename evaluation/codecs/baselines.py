"""Classic codecs behind the :class:`~evaluation.codecs.base.Codec` interface.

- ``x264`` (libx264) and ``x265`` (libx265) through PyAV, in memory: low delay (no B-frames),
  CRF or QP, preset (default ``medium``), GOP length, and an optional ``scale`` for the
  ultra-low-rate regime (encode small, upscale after decode). The payload is the coded
  bitstream (packets plus the parameter sets in the MP4's codec configuration); the other
  MP4 boxes are reported as container overhead.
- ``jpeg`` and ``webp``: each frame coded alone with OpenCV's libjpeg / libwebp.
- ``raw``: the uncompressed 24-bit RGB frames, the reference row of a benchmark.
"""

from __future__ import annotations

import io
import time
from fractions import Fraction

import av
import cv2
import numpy as np

from semcodec.codec.core.frames import even_size, resize_to
from semcodec.evaluation.codecs.base import (
    Codec,
    CodecError,
    Encoded,
    Setting,
    SettingError,
    register_codec,
)

DEFAULT_CRFS = (23, 28, 33, 38)
DEFAULT_IMAGE_QUALITIES = (30, 50, 70, 90)


def check_frames(frames: np.ndarray) -> np.ndarray:
    """Validates ``(T, H, W, 3) uint8`` frames and returns them C-contiguous."""
    if not isinstance(frames, np.ndarray) or frames.dtype != np.uint8:
        raise CodecError(
            f"frames must be a uint8 numpy array, got {type(frames).__name__}"
            f"{'' if not isinstance(frames, np.ndarray) else ' ' + str(frames.dtype)}"
        )
    if frames.ndim != 4 or frames.shape[-1] != 3 or min(frames.shape[:3]) < 1:
        raise CodecError(
            f"frames must have shape (T, H, W, 3) with T, H, W >= 1, got {frames.shape}"
        )
    return np.ascontiguousarray(frames)


def scaled_size(width: int, height: int, scale: float) -> tuple[int, int]:
    """Coded size for ``scale`` in (0, 1]: even numbers, at least 16 px."""
    if not 0 < scale <= 1:
        raise SettingError(f"scale must be in (0, 1], got {scale}")
    return even_size(width, height, scale, minimum=16)


class _PyAVVideoCodec(Codec):
    """An FFmpeg video encoder run through PyAV into an in-memory MP4."""

    quality_key = "crf"
    lower_is_better_quality = True
    encoder_name = ""

    def __init__(self, preset: str = "medium", gop: int = 0, threads: int = 0):
        """``gop``: frames between intra frames; 0 puts one intra frame at the start only.
        ``threads``: encoder threads, 0 lets the encoder choose."""
        if gop < 0:
            raise ValueError(f"gop must be >= 0, got {gop}")
        self.preset = preset
        self.gop = gop
        self.threads = threads

    def default_settings(self) -> list[Setting]:
        return [Setting.of(crf=c) for c in DEFAULT_CRFS]

    def describe(self) -> dict[str, str]:
        return {
            "encoder": f"{self.encoder_name} ({self.preset}, gop {self.gop or 'inf'}, no B)",
            "encoder_version": f"PyAV {av.__version__}, libavcodec "
            + ".".join(map(str, av.library_versions["libavcodec"])),
        }

    def check_setting(self, setting: Setting) -> None:
        self._rate_control(setting)
        scaled_size(64, 64, setting.number("scale", 1.0))

    def curve_of(self, setting: Setting) -> str:
        """``x265``, ``x265@scale=0.5`` or, for the static-camera family, ``x265@ipratio=8``:
        the rate knob (``crf`` or ``qp``) moves along a curve, the other keys name it."""
        return super().curve_of(setting.without("qp"))

    def _rate_control(self, setting: Setting) -> tuple[str, int]:
        allowed = {"crf", "qp", "scale", "ipratio"}
        unknown = {k for k, _ in setting.params} - allowed
        if unknown:
            raise SettingError(
                f"{self.name}: unknown setting key(s) {sorted(unknown)}; "
                f"use crf=N or qp=N, and optionally scale=F and ipratio=R"
            )
        ipratio = setting.number("ipratio", 1.4)
        if ipratio is None or not 1.0 <= ipratio <= 64.0:
            raise SettingError(f"{self.name}: ipratio must be in 1..64, got {ipratio}")
        if (setting.get("crf") is None) == (setting.get("qp") is None):
            raise SettingError(f"{self.name}: give exactly one of crf=N or qp=N, got '{setting}'")
        mode = "crf" if setting.get("crf") is not None else "qp"
        value = setting.number(mode)
        if value is None or not 0 <= value <= 51 or not float(value).is_integer():
            raise SettingError(f"{self.name}: {mode} must be an integer in 0..51, got {value}")
        return mode, int(value)

    def _options(self, mode: str, value: int, frames: int, setting: Setting) -> dict[str, str]:
        """The encoder's options for one stream of ``frames`` frames."""
        raise NotImplementedError

    def _rate_params(self, mode: str, value: int, frames: int, setting: Setting) -> list[str]:
        """Parameters both encoders share: low delay, one intra frame per GOP, and the
        I/P quantizer ratio where the setting gives one (a static camera's boosted first
        frame: ``qp=51,ipratio=8`` codes the intra frame 18 QP finer than the P frames)."""
        gop = self.gop or max(frames, 1) + 1
        params = ["bframes=0", f"keyint={gop}", f"min-keyint={gop}", "scenecut=0"]
        if setting.get("ipratio") is not None:
            params.append(f"ipratio={setting.number('ipratio'):g}")
        return params

    def encode(self, frames: np.ndarray, setting: Setting, fps: float) -> Encoded:
        frames = check_frames(frames)
        mode, value = self._rate_control(setting)
        t, h, w, _ = frames.shape
        cw, ch = scaled_size(w, h, setting.number("scale", 1.0))
        start = time.perf_counter()
        small = resize_to(frames, cw, ch)
        payload, mp4_bytes, packet_bytes = self._encode(small, mode, value, fps, setting)
        seconds = time.perf_counter() - start
        return Encoded(
            codec=self.name,
            setting=setting,
            frames=t,
            width=w,
            height=h,
            fps=fps,
            payload=payload,
            stream_bytes={"video": len(payload)},
            container_bytes=mp4_bytes - len(payload),
            encode_seconds=seconds,
            metadata={"coded_width": cw, "coded_height": ch},
            frame_bytes=[{"video": n} for n in packet_bytes],
        )

    #: NAL unit types dropped from the payload (FFmpeg's ``filter_units`` bitstream filter):
    #: bytes that describe no picture, such as the encoder's settings SEI.
    drop_nal_types: str = ""

    def _encode(self, frames: np.ndarray, mode: str, value: int, fps: float, setting: Setting):
        """Returns (payload, size of the same stream in an MP4 file, bytes of each frame's
        packet in frame order).

        The payload is the parameter sets followed by every packet the encoder wrote: an
        Annex-B elementary stream, which is what a link carries. The packets are also
        muxed into an in-memory MP4 so that the container's overhead can be reported.
        With no B-frames each frame is one packet; a packet is booked to its frame by its
        timestamp.
        """
        t, h, w, _ = frames.shape
        buf = io.BytesIO()
        packets = bytearray()
        per_frame = [0] * t
        rate = Fraction(fps).limit_denominator(1001)
        with av.open(buf, mode="w", format="mp4") as container:
            stream = container.add_stream(self.encoder_name, rate=rate)
            stream.width, stream.height, stream.pix_fmt = w, h, "yuv420p"
            stream.codec_context.time_base = 1 / rate
            stream.options = self._options(mode, value, t, setting)
            if self.threads:
                stream.codec_context.thread_count = self.threads
            keep = self._packet_filter(stream)
            for i in range(t + 1):
                frame = None
                if i < t:
                    frame = av.VideoFrame.from_ndarray(frames[i], format="rgb24")
                    frame.pts = i
                for packet in keep(stream.encode(frame), flush=i == t):
                    data = bytes(packet)
                    packets += data
                    per_frame[min(max(int(packet.pts or 0), 0), t - 1)] += len(data)
                    container.mux(packet)
            # The MP4 muxer asks for global headers, so the parameter sets are in extradata.
            headers = bytes(stream.codec_context.extradata or b"")
        if headers and not headers.startswith((b"\x00\x00\x00\x01", b"\x00\x00\x01")):
            raise CodecError(f"{self.name}: expected Annex-B parameter sets from the encoder")
        return headers + bytes(packets), len(buf.getvalue()), per_frame

    def _packet_filter(self, stream):
        """``keep(packets, flush) -> packets`` without the NAL types of ``drop_nal_types``."""
        if not self.drop_nal_types:
            return lambda packets, flush: packets
        bsf = av.bitstream.BitStreamFilterContext(
            f"filter_units=remove_types={self.drop_nal_types}", stream
        )

        def keep(packets, flush: bool):
            out = [q for p in packets for q in bsf.filter(p)]
            return out + (list(bsf.filter(None)) if flush else [])

        return keep

    def decode(self, encoded: Encoded) -> np.ndarray:
        """Decodes the Annex-B payload and upscales to the input size."""
        fmt = {"libx264": "h264", "libx265": "hevc"}[self.encoder_name]
        decoded = []
        with av.open(io.BytesIO(encoded.payload), mode="r", format=fmt) as container:
            for frame in container.decode(video=0):
                decoded.append(frame.to_ndarray(format="rgb24"))
        if len(decoded) != encoded.frames:
            raise CodecError(
                f"{self.name}: decoded {len(decoded)} frames, expected {encoded.frames}"
            )
        return resize_to(np.stack(decoded), encoded.width, encoded.height)


@register_codec("x264")
class X264(_PyAVVideoCodec):
    """H.264 / AVC with libx264, low delay (``bframes=0``)."""

    encoder_name = "libx264"
    #: libx264 cannot leave out its settings SEI (about 650 bytes); SEI units are dropped.
    drop_nal_types = "6"

    def _options(self, mode: str, value: int, frames: int, setting: Setting) -> dict[str, str]:
        params = self._rate_params(mode, value, frames, setting)
        return {"preset": self.preset, mode: str(value), "x264-params": ":".join(params)}


@register_codec("x265")
class X265(_PyAVVideoCodec):
    """HEVC with libx265, low delay (``bframes=0``)."""

    encoder_name = "libx265"

    def _options(self, mode: str, value: int, frames: int, setting: Setting) -> dict[str, str]:
        # info=0: no encoder-settings SEI (2.3 KB a stream), so every byte describes pictures
        params = [*self._rate_params(mode, value, frames, setting), "info=0",
                  "log-level=error", f"{mode}={value}"]  # fmt: skip
        return {"preset": self.preset, "x265-params": ":".join(params)}


class _ImageCodec(Codec):
    """Each frame coded alone by OpenCV; the payload is the concatenated images."""

    quality_key = "q"
    extension = ""
    quality_flag = 0

    def default_settings(self) -> list[Setting]:
        return [Setting.of(q=q) for q in DEFAULT_IMAGE_QUALITIES]

    def describe(self) -> dict[str, str]:
        return {"encoder": f"{self.name} (OpenCV)", "encoder_version": f"OpenCV {cv2.__version__}"}

    def check_setting(self, setting: Setting) -> None:
        self._quality(setting)
        scaled_size(64, 64, setting.number("scale", 1.0))

    def _quality(self, setting: Setting) -> int:
        unknown = {k for k, _ in setting.params} - {"q", "scale"}
        if unknown or setting.get("q") is None:
            raise SettingError(
                f"{self.name}: expected q=N (1..100) and optionally scale=F, got '{setting}'"
            )
        q = setting.number("q")
        if not 1 <= q <= 100 or not float(q).is_integer():
            raise SettingError(f"{self.name}: q must be an integer in 1..100, got {q}")
        return int(q)

    def encode(self, frames: np.ndarray, setting: Setting, fps: float) -> Encoded:
        frames = check_frames(frames)
        q = self._quality(setting)
        t, h, w, _ = frames.shape
        cw, ch = scaled_size(w, h, setting.number("scale", 1.0)) if setting.get("scale") else (w, h)
        start = time.perf_counter()
        sizes, chunks = [], []
        for frame in resize_to(frames, cw, ch):
            ok, data = cv2.imencode(self.extension, frame[..., ::-1], [self.quality_flag, q])
            if not ok:
                raise CodecError(f"{self.name}: OpenCV failed to encode a frame")
            chunks.append(data.tobytes())
            sizes.append(len(chunks[-1]))
        payload = b"".join(chunks)
        return Encoded(
            codec=self.name,
            setting=setting,
            frames=t,
            width=w,
            height=h,
            fps=fps,
            payload=payload,
            stream_bytes={"images": len(payload)},
            encode_seconds=time.perf_counter() - start,
            metadata={"frame_bytes": sizes, "coded_width": cw, "coded_height": ch},
            frame_bytes=[{"images": n} for n in sizes],
        )

    def decode(self, encoded: Encoded) -> np.ndarray:
        out, pos = [], 0
        for size in encoded.metadata["frame_bytes"]:
            chunk = np.frombuffer(encoded.payload, np.uint8, size, pos)
            pos += size
            image = cv2.imdecode(chunk, cv2.IMREAD_COLOR)
            if image is None:
                raise CodecError(f"{self.name}: OpenCV failed to decode a frame")
            out.append(image[..., ::-1])
        return resize_to(np.ascontiguousarray(np.stack(out)), encoded.width, encoded.height)


@register_codec("jpeg")
class JPEG(_ImageCodec):
    """Per-frame baseline JPEG (libjpeg via OpenCV, 4:2:0)."""

    extension = ".jpg"
    quality_flag = cv2.IMWRITE_JPEG_QUALITY


@register_codec("webp")
class WebP(_ImageCodec):
    """Per-frame lossy WebP (libwebp via OpenCV)."""

    extension = ".webp"
    quality_flag = cv2.IMWRITE_WEBP_QUALITY


@register_codec("raw")
class Raw(Codec):
    """The uncompressed frames (24-bit RGB): the reference point of every benchmark."""

    quality_key = "format"
    has_speed = False  # a memory copy: no encoder or decoder speed to report

    def default_settings(self) -> list[Setting]:
        return [Setting.of(format="rgb24")]

    def describe(self) -> dict[str, str]:
        return {"encoder": "raw rgb24", "encoder_version": ""}

    def check_setting(self, setting: Setting) -> None:
        if str(setting) not in ("", "format=rgb24"):
            raise SettingError(f"raw: the only setting is format=rgb24, got '{setting}'")

    def encode(self, frames: np.ndarray, setting: Setting, fps: float) -> Encoded:
        frames = check_frames(frames)
        self.check_setting(setting)
        t, h, w, _ = frames.shape
        start = time.perf_counter()
        payload = frames.tobytes()
        return Encoded(
            codec=self.name,
            setting=Setting.of(format="rgb24"),
            frames=t,
            width=w,
            height=h,
            fps=fps,
            payload=payload,
            stream_bytes={"rgb": len(payload)},
            encode_seconds=time.perf_counter() - start,
            frame_bytes=[{"rgb": h * w * 3}] * t,
        )

    def decode(self, encoded: Encoded) -> np.ndarray:
        shape = (encoded.frames, encoded.height, encoded.width, 3)
        return np.frombuffer(encoded.payload, np.uint8).reshape(shape).copy()
