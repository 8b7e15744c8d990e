"""The codec interface every benchmarked codec implements, and the registry of codecs by name.

A codec turns frames into real bytes and back::

    codec = create_codec("x264", preset="medium", gop=60)
    encoded = codec.encode(frames, Setting.parse("crf=28,scale=0.5"), fps=7)
    decoded = codec.decode(encoded)          # (T, H, W, 3) uint8 RGB, the input size

A :class:`Setting` is one operating point (``crf=28``, ``q=80,scale=0.5``); its quality knob
is the parameter swept to draw a rate–quality curve, every other parameter (``scale``) names
the curve. Third parties add codecs through the ``semcodec.codecs`` entry-point group or
:func:`register_codec`.
"""

from __future__ import annotations

import abc
from dataclasses import dataclass, field
from typing import ClassVar

import numpy as np

from semcodec.codec.core.registry import Registry

ENTRY_POINT_GROUP = "semcodec.codecs"


class CodecError(RuntimeError):
    """A codec failed to encode or decode."""


class UnknownCodecError(CodecError, KeyError):
    """No codec is registered under the name."""

    def __str__(self) -> str:
        return str(self.args[0])


class SettingError(ValueError):
    """A setting string could not be parsed or does not fit the codec."""


@dataclass(frozen=True)
class Setting:
    """One operating point of a codec: ordered ``key=value`` parameters.

    ``Setting.parse("crf=28,scale=0.5")`` gives ``params == (("crf", "28"), ("scale", "0.5"))``;
    ``str(setting)`` gives the canonical label used in result rows.
    """

    params: tuple[tuple[str, str], ...] = ()

    @classmethod
    def parse(cls, text: str) -> Setting:
        """Parses ``"k=v,k=v"``; an empty string is the default setting."""
        items: list[tuple[str, str]] = []
        for part in filter(None, (p.strip() for p in text.split(","))):
            key, sep, value = part.partition("=")
            if not sep or not key.strip() or not value.strip():
                raise SettingError(f"bad setting {text!r}: expected key=value[,key=value...]")
            items.append((key.strip(), value.strip()))
        keys = [k for k, _ in items]
        if len(set(keys)) != len(keys):
            raise SettingError(f"bad setting {text!r}: a key appears twice")
        return cls(tuple(items))

    @classmethod
    def of(cls, **params: object) -> Setting:
        """``Setting.of(crf=28, scale=0.5)``; floats print without a trailing ``.0``."""
        return cls(tuple((k, _fmt(v)) for k, v in params.items()))

    def get(self, key: str, default: str | None = None) -> str | None:
        return dict(self.params).get(key, default)

    def number(self, key: str, default: float | None = None) -> float | None:
        """The parameter as a float, ``default`` when absent; SettingError if not a number."""
        raw = self.get(key)
        if raw is None:
            return default
        try:
            return float(raw)
        except ValueError:
            raise SettingError(f"setting {self}: {key}={raw!r} is not a number") from None

    def without(self, *keys: str) -> Setting:
        return Setting(tuple((k, v) for k, v in self.params if k not in keys))

    def __str__(self) -> str:
        return ",".join(f"{k}={v}" for k, v in self.params)


def _fmt(value: object) -> str:
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value)


@dataclass
class Encoded:
    """What an encoder produced: real bytes and what is needed to decode them.

    Attributes:
        codec: registry name of the codec.
        setting: the operating point.
        frames, width, height: the input's frame count and size in pixels (the size that BPP
            is counted on, even when the codec coded a downscaled version).
        fps: frame rate of the input, frames per second.
        payload: the bytes that would be sent or stored, as written by the encoder.
        stream_bytes: payload bytes per sub-stream (``{"video": n}``, or ``{"keyframe": ...,
            "seg": ...}`` for semantic codecs); the values sum to ``len(payload)``.
        container_bytes: bytes a file container adds around the payload (MP4 boxes), reported
            apart from the payload and not counted in BPP.
        encode_seconds: wall time of ``encode`` on this machine.
        metadata: codec-specific facts needed to decode (sizes, scale) and to report.
        frame_bytes: the payload bytes each frame brought, per sub-stream, in frame order
            (stream-level headers, such as parameter sets or a stream header, belong to no
            frame); None when the codec cannot tell. The steady-state protocol charges a
            range of frames with these (:func:`bytes_of_frames`).
    """

    codec: str
    setting: Setting
    frames: int
    width: int
    height: int
    fps: float
    payload: bytes
    stream_bytes: dict[str, int]
    container_bytes: int = 0
    encode_seconds: float = 0.0
    metadata: dict = field(default_factory=dict)
    frame_bytes: list[dict[str, int]] | None = None

    @property
    def num_bytes(self) -> int:
        """Payload size in bytes (what BPP is computed from)."""
        return len(self.payload)


def bytes_of_frames(encoded: Encoded, first: int) -> dict[str, int]:
    """Payload bytes per sub-stream of frames ``first`` (0-based) to the last: what a
    viewer who joins a running stream at that frame is charged (the steady-state protocol).

    Raises:
        CodecError: the codec does not say which bytes belong to which frame, or ``first`` is
            not a frame of the stream.
    """
    if encoded.frame_bytes is None:
        raise CodecError(f"{encoded.codec}: its encoder does not report bytes per frame, so a "
                         "range of a continuous encode cannot be charged")  # fmt: skip
    if not 0 <= first < len(encoded.frame_bytes):
        raise CodecError(f"{encoded.codec}: frame {first} is outside the "
                         f"{len(encoded.frame_bytes)} frames encoded")  # fmt: skip
    total: dict[str, int] = {}
    for sizes in encoded.frame_bytes[first:]:
        for stream, n in sizes.items():
            total[stream] = total.get(stream, 0) + int(n)
    return total


class Codec(abc.ABC):
    """A codec that maps ``(T, H, W, 3) uint8 RGB`` frames to bytes and back.

    Subclasses set ``name`` and ``quality_key`` (the parameter swept for a rate–quality curve,
    e.g. ``"crf"``) and implement :meth:`encode`, :meth:`decode` and :meth:`default_settings`
    (and, preferably, :meth:`check_setting`). ``encode`` and ``decode`` may take an optional
    keyword ``progress``: a callable given the number of frames done so far; the benchmark
    passes it to codecs whose methods accept it, to draw a progress bar inside long cells.
    """

    name: ClassVar[str] = ""
    quality_key: ClassVar[str] = ""
    #: Whether settings take ``scale=F`` (code at a fraction of the size); ``--scales`` is
    #: applied only to codecs that do.
    supports_scale: ClassVar[bool] = True
    #: True when a *lower* value of ``quality_key`` gives higher quality (CRF, QP).
    lower_is_better_quality: ClassVar[bool] = False
    #: False when encode/decode wall times mean nothing (``raw`` copies memory): the
    #: benchmark then leaves ``enc_fps`` and ``dec_fps`` empty.
    has_speed: ClassVar[bool] = True

    @abc.abstractmethod
    def encode(self, frames: np.ndarray, setting: Setting, fps: float) -> Encoded:
        """Encodes ``(T, H, W, 3) uint8 RGB`` frames at ``fps`` frames per second."""

    @abc.abstractmethod
    def decode(self, encoded: Encoded) -> np.ndarray:
        """Decodes to ``(T, H, W, 3) uint8 RGB`` at the input's size."""

    @abc.abstractmethod
    def default_settings(self) -> list[Setting]:
        """The sweep run when the user names no settings."""

    def check_setting(self, setting: Setting) -> None:
        """Raises :class:`SettingError` when ``setting`` does not fit this codec.

        Cheap and free of models and input frames, so a grid can be checked before any
        expensive work starts. The default accepts everything (a codec that does not override
        it reports a bad setting only when it encodes).
        """
        return None

    def describe(self) -> dict[str, str]:
        """Encoder name and version, recorded in every result row."""
        return {"encoder": self.name, "encoder_version": ""}

    def stream_setting(self, setting: Setting) -> Setting:
        """The part of ``setting`` that decides the encoded bytes: settings with the same
        stream setting share one encoding (here all of it; a codec whose settings also
        choose a decoder drops those keys)."""
        return setting

    def curve_of(self, setting: Setting) -> str:
        """Name of the rate–quality curve a setting belongs to (``x264`` or ``x264@scale=0.5``)."""
        rest = setting.without(self.quality_key)
        rest = Setting(tuple((k, v) for k, v in rest.params if not (k == "scale" and v == "1")))
        return f"{self.name}@{rest}" if rest.params else self.name


#: Built-in codec name -> the module that registers it.
BUILTIN_CODECS = {
    **dict.fromkeys(("x264", "x265", "jpeg", "webp", "raw"),
                    "semcodec.evaluation.codecs.baselines"),
    "scaffold": "semcodec.evaluation.codecs.scaffold",
}
CODECS: Registry[Codec] = Registry(
    "codec", Codec, UnknownCodecError, ENTRY_POINT_GROUP, builtins=BUILTIN_CODECS
)
#: Class decorator registering a codec under a name (a duplicate name is an error).
register_codec = CODECS.register


def available_codecs() -> list[str]:
    """Registered codec names, sorted (built-ins and entry points)."""
    return CODECS.names()


def create_codec(name: str, **options: object) -> Codec:
    """Instantiates codec ``name`` with its options (e.g. ``preset``, ``gop``)."""
    return CODECS.create(name, **options)
