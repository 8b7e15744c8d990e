"""The stream header: :class:`StreamHeader` (frame size and rate, level, frame count, model
names with their sha256, settings), its canonical bytes and its strict parser. The layout is
in :mod:`codec.bitstream`."""

from __future__ import annotations

import io
import zlib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from fractions import Fraction
from types import MappingProxyType
from typing import Any

from semcodec.codec.bitstream.primitives import (
    _CRC,
    _HEADER_FIXED,
    _SHA256_BYTES,
    _U16_MAX,
    _U32_MAX,
    DEFAULT_MAX_HEADER_SIZE,
    FORMAT_VERSION,
    MAGIC,
    BitstreamError,
    CorruptError,
    OversizedError,
    TruncatedError,
    UnsupportedVersionError,
    _check_int,
    _check_limit,
    _Cursor,
    _Input,
    _utf8,
    encode_uvarint,
)


@dataclass(frozen=True)
class ModelEntry:
    """A model the stream was made with: its registry name and the sha256 of its file.

    Attributes:
        name: registry name (non-empty).
        sha256: 64 hex characters (stored lowercase), or ``None`` for a model whose file is
            not byte-reproducible.
    """

    name: str
    sha256: str | None = None

    def __post_init__(self) -> None:
        _utf8("model name", self.name, allow_empty=False)
        if self.sha256 is None:
            return
        digest = self.sha256
        if not isinstance(digest, str) or len(digest) != 2 * _SHA256_BYTES:
            raise BitstreamError(
                f"model {self.name!r}: sha256 must be 64 hex characters or None, got {digest!r}"
            )
        try:
            bytes.fromhex(digest)
        except ValueError:
            raise BitstreamError(
                f"model {self.name!r}: sha256 {digest!r} is not hexadecimal"
            ) from None
        object.__setattr__(self, "sha256", digest.lower())


@dataclass(frozen=True)
class StreamHeader:
    """What a decoder needs to know before the first unit.

    Attributes:
        width, height: frame size in pixels, 1..65535.
        fps_num, fps_den: frame rate as the rational ``fps_num / fps_den``, each 1..2**32-1.
        level: operating level of the codec (what is sent), 0..255.
        num_frames: number of frames if known, else 0; 0..2**32-1.
        models: the models the edge used, in order.
        settings: free-form string key/value settings (codec settings, keyframe coder...);
            read-only, kept sorted by key. Keys are non-empty.
    """

    width: int
    height: int
    fps_num: int
    fps_den: int = 1
    level: int = 0
    num_frames: int = 0
    models: tuple[ModelEntry, ...] = ()
    settings: Mapping[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        _check_int("width", self.width, 1, _U16_MAX)
        _check_int("height", self.height, 1, _U16_MAX)
        _check_int("fps_num", self.fps_num, 1, _U32_MAX)
        _check_int("fps_den", self.fps_den, 1, _U32_MAX)
        _check_int("level", self.level, 0, 255)
        _check_int("num_frames", self.num_frames, 0, _U32_MAX)
        if isinstance(self.models, (str, bytes)) or not isinstance(self.models, Iterable):
            raise BitstreamError(f"models must be a sequence of ModelEntry, got {self.models!r}")
        models = tuple(self.models)
        seen: set[str] = set()
        for entry in models:
            if not isinstance(entry, ModelEntry):
                raise BitstreamError(f"models must hold ModelEntry objects, got {entry!r}")
            if entry.name in seen:
                raise BitstreamError(f"model {entry.name!r} is listed twice")
            seen.add(entry.name)
        if not isinstance(self.settings, Mapping):
            raise BitstreamError(f"settings must be a mapping of str to str, got {self.settings!r}")
        for key, value in self.settings.items():
            _utf8("settings key", key, allow_empty=False)
            _utf8(f"settings[{key!r}]", value, allow_empty=True)
        settings = MappingProxyType(dict(sorted(self.settings.items())))
        object.__setattr__(self, "models", models)
        object.__setattr__(self, "settings", settings)

    def _fields(self) -> tuple[Any, ...]:
        """Every field in order, settings as a plain dict."""
        return (self.width, self.height, self.fps_num, self.fps_den, self.level,
                self.num_frames, self.models, dict(self.settings))  # fmt: skip

    def __hash__(self) -> int:
        *head, settings = self._fields()
        return hash((*head, tuple(settings.items())))

    def __reduce__(self) -> tuple[Any, ...]:  # a mappingproxy does not pickle; a dict does
        return (type(self), self._fields())

    @property
    def frame_rate(self) -> Fraction:
        """Frames per second as an exact fraction."""
        return Fraction(self.fps_num, self.fps_den)

    def _body(self) -> bytes:
        parts = [
            _HEADER_FIXED.pack(
                self.width, self.height, self.fps_num, self.fps_den, self.level, self.num_frames
            ),
            encode_uvarint(len(self.models)),
        ]
        for entry in self.models:
            name = entry.name.encode("utf-8")
            digest = b"" if entry.sha256 is None else bytes.fromhex(entry.sha256)
            parts += [encode_uvarint(len(name)), name, bytes([len(digest)]), digest]
        parts.append(encode_uvarint(len(self.settings)))
        for key, value in self.settings.items():
            k, v = key.encode("utf-8"), value.encode("utf-8")
            parts += [encode_uvarint(len(k)), k, encode_uvarint(len(v)), v]
        return b"".join(parts)

    def to_bytes(self, *, max_header_size: int = DEFAULT_MAX_HEADER_SIZE) -> bytes:
        """The encoded header (magic through CRC).

        Raises:
            OversizedError: the body is longer than ``max_header_size``.
        """
        _check_limit("max_header_size", max_header_size)
        body = self._body()
        if len(body) > max_header_size:
            raise OversizedError(
                f"header body is {len(body)} bytes, over the limit of {max_header_size}"
            )
        covered = bytes([FORMAT_VERSION]) + encode_uvarint(len(body)) + body
        return MAGIC + covered + _CRC.pack(zlib.crc32(covered))

    @classmethod
    def from_bytes(
        cls,
        data: bytes | bytearray | memoryview,
        *,
        max_header_size: int = DEFAULT_MAX_HEADER_SIZE,
    ) -> StreamHeader:
        """Parse exactly one encoded header (no trailing bytes)."""
        inp = _Input(io.BytesIO(bytes(data)))
        header = _read_header(inp, _check_limit("max_header_size", max_header_size))
        if inp.pos != len(data):
            raise CorruptError(
                f"expected the end of the data after the stream header, found "
                f"{len(data) - inp.pos} more byte(s)",
                offset=inp.pos,
            )
        return header


def _read_header(inp: _Input, max_header_size: int) -> StreamHeader:
    start = inp.pos
    magic = inp.read_upto(len(MAGIC))
    if magic != MAGIC[: len(magic)]:
        raise CorruptError(
            f"not a semcodec stream: expected magic {MAGIC!r} ({MAGIC.hex()}), found {magic.hex()}",
            offset=start,
        )
    if len(magic) < len(MAGIC):
        raise TruncatedError(
            f"stream header: expected the {len(MAGIC)}-byte magic {MAGIC!r}, the data ends "
            f"after {len(magic)} byte(s)",
            offset=inp.pos,
        )
    raw_version = inp.read_upto(1)
    if not raw_version:
        raise TruncatedError(
            "stream header: expected the format version byte, the data ends", offset=inp.pos
        )
    version = raw_version[0]
    if version != FORMAT_VERSION:
        hint = (
            "; the stream was written by a newer semcodec: upgrade to read it"
            if version > FORMAT_VERSION
            else ""
        )
        raise UnsupportedVersionError(
            f"stream format version {version} is not supported: this reader reads version "
            f"{FORMAT_VERSION}{hint}",
            offset=inp.pos - 1,
        )
    length_offset = inp.pos
    length, raw_length = inp.read_uvarint("stream header length", None)
    if length > max_header_size:
        raise OversizedError(
            f"stream header declares a {length}-byte body, over the limit of "
            f"{max_header_size} (max_header_size)",
            offset=length_offset,
        )
    body_offset = inp.pos
    body = inp.read_upto(length)
    if len(body) < length:
        raise TruncatedError(
            f"stream header: expected a {length}-byte body, the data ends after {len(body)}",
            offset=inp.pos,
        )
    raw_crc = inp.read_upto(4)
    if len(raw_crc) < 4:
        raise TruncatedError(
            f"stream header: expected a 4-byte CRC, the data ends after {len(raw_crc)}",
            offset=inp.pos,
        )
    stored = _CRC.unpack(raw_crc)[0]
    computed = zlib.crc32(body, zlib.crc32(raw_version + raw_length))
    if stored != computed:
        raise CorruptError(
            f"stream header CRC mismatch: stored {stored:08x}, computed {computed:08x}",
            offset=inp.pos - 4,
        )
    return _parse_header_body(body, body_offset)


def _parse_header_body(body: bytes, base: int) -> StreamHeader:
    cur = _Cursor(body, base, None, "stream header body")
    fixed_offset = cur.offset
    width, height, fps_num, fps_den, level, num_frames = _HEADER_FIXED.unpack(
        cur.take(_HEADER_FIXED.size, "fixed header fields")
    )
    for name, value in (("width", width), ("height", height)):
        if value == 0:
            raise cur.corrupt(f"frame {name}: expected >= 1, found 0", offset=fixed_offset)
    for name, value in (("frame rate numerator", fps_num), ("frame rate denominator", fps_den)):
        if value == 0:
            raise cur.corrupt(f"{name}: expected >= 1, found 0", offset=fixed_offset)
    models: list[ModelEntry] = []
    seen: set[str] = set()
    count = cur.uvarint("model count")
    for i in range(count):
        entry_offset = cur.offset
        name = cur.text(f"model #{i} name")
        if not name:
            raise cur.corrupt(f"model #{i}: expected a non-empty name", offset=entry_offset)
        if name in seen:
            raise cur.corrupt(f"model {name!r} is listed twice", offset=entry_offset)
        seen.add(name)
        digest_offset = cur.offset
        digest_len = cur.u8(f"model {name!r} digest length")
        if digest_len not in (0, _SHA256_BYTES):
            raise cur.corrupt(
                f"model {name!r} digest length: expected 0 or {_SHA256_BYTES}, found {digest_len}",
                offset=digest_offset,
            )
        digest = cur.take(digest_len, f"model {name!r} sha256")
        models.append(ModelEntry(name, digest.hex() if digest else None))
    settings: dict[str, str] = {}
    previous: str | None = None
    count = cur.uvarint("settings count")
    for i in range(count):
        key_offset = cur.offset
        key = cur.text(f"settings key #{i}")
        if not key:
            raise cur.corrupt(f"settings key #{i}: expected a non-empty key", offset=key_offset)
        if previous is not None and key <= previous:
            raise cur.corrupt(
                f"settings key {key!r}: expected keys in strictly increasing order, "
                f"found it after {previous!r}",
                offset=key_offset,
            )
        settings[key] = cur.text(f"settings[{key!r}]")
        previous = key
    if cur.remaining:
        raise cur.corrupt(
            f"expected the end of the stream header body, found {cur.remaining} more byte(s)"
        )
    return StreamHeader(width, height, fps_num, fps_den, level, num_frames, tuple(models), settings)


def header_bytes(header: StreamHeader) -> int:
    """Size of the encoded stream header in bytes (all of it is framing, not payload)."""
    return len(header.to_bytes())
