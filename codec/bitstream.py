"""The semcodec bitstream: one writer and one reader for ``.semc`` files and gRPC payloads.

A stream is a **stream header** followed by any number of **units**. Every unit is framed on
its own (sync marker, length, CRC), so it can be sent, lost, resent and parsed alone; over
gRPC the header and each unit travel as separate messages (``StreamHeader.to_bytes()``,
``Unit.to_bytes()``). The parser is strict: every byte sequence it accepts is the canonical
encoding of what it returns (``X.from_bytes(b).to_bytes() == b``), and everything else raises
a :class:`BitstreamError` subclass saying what was expected, what was found and where.

Byte layout (format version 1)
==============================

Conventions: fixed-width integers are unsigned **big-endian**. ``uvarint`` is LEB128 (7 bits
per byte, least significant group first, high bit = "more bytes follow"), at most 10 bytes,
value < 2**64, and canonical (no overlong encoding: a multi-byte varint never ends in a
``0x00`` byte). ``str`` is ``uvarint byte length`` + UTF-8 bytes. CRC32 is
``zlib.crc32`` (ISO-HDLC / IEEE 802.3: poly 0x04C11DB7 reflected, init and xorout
0xFFFFFFFF), stored as u32 big-endian.

Stream header::

    offset  size  field
    0       4     magic b"SEMC" (53 45 4D 43)
    4       1     format version, u8 = 1 (a reader refuses any other value; checked before
                  the CRC, since another version may lay out what follows differently)
    5       1-10  N = header body length, uvarint (<= max_header_size, default 1 MiB)
    .       N     header body (below)
    .       4     CRC32 over the version byte, the length varint and the body

Header body (exactly N bytes; leftover bytes are an error)::

    size  field
    2     frame width, u16, >= 1
    2     frame height, u16, >= 1
    4     frame rate numerator, u32, >= 1
    4     frame rate denominator, u32, >= 1
    1     level, u8
    4     number of frames, u32 (0 = unknown)
    v     M = number of model entries, uvarint; then M times:
            str   model name (non-empty, unique in the header)
            1     digest length D, u8: 32, or 0 when the model has no reproducible sha256
            D     sha256 digest (raw bytes; the API shows it as 64 lowercase hex chars)
    v     K = number of settings, uvarint; then K times:
            str   key (non-empty; keys in strictly increasing order, so no duplicates)
            str   value

Unit::

    offset  size  field
    0       2     sync marker A5 5A
    2       1-10  L = unit length, uvarint: bytes from the kind byte through the CRC
                  (7 <= L <= max_unit_size, default 64 MiB); a reader skips a unit by it
    .       1     unit kind, u8: 1 KEYFRAME, 2 FRAME, 3 END (0 and 4..255 reserved)
    .       v     sequence number, uvarint: 0-based frame index (END: number of frames)
    .       v     S = number of sub-streams, uvarint (<= max_substreams, default 64)
                  then S times:
    .       1       sub-stream type, u8: 1 KEYFRAME_IMAGE, 2 TRACKS, 3 SEGMENTATION,
                    4 POSE, 5 FLOW, 6 FEATURES, 7 METADATA, 8 APPEARANCE, 9 PLATE_TILE
                    (0 and 10..255 reserved)
    .       v       P = payload length, uvarint
    .       P       payload
    .       4     CRC32 over the unit length varint and everything from the kind byte
                  through the last payload byte

The unit's fields must fill exactly its ``L`` bytes. A stream ends at the end of the data
(a stream cut at a unit boundary reads as the units so far) or after an ``END`` unit; any
byte after an ``END`` unit is an error. Unknown enum values are errors: adding a unit kind or
a sub-stream type is a format change and bumps the version byte (version 2 added
APPEARANCE; a version-1 stream is refused with :class:`UnsupportedVersionError`).

Known answer: ``Unit(FRAME, 3, (SubStream(TRACKS, b"ab"),))`` is
``a5 5a 0b 02 03 01 02 02 61 62`` followed by its CRC ``62 f4 cf 7f``.
"""

from __future__ import annotations

import contextlib
import io
import os
import secrets
import struct
import zlib
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from enum import Enum, IntEnum
from fractions import Fraction
from pathlib import Path
from types import MappingProxyType
from typing import Any, BinaryIO

__all__ = [
    "DEFAULT_MAX_HEADER_SIZE",
    "DEFAULT_MAX_SUBSTREAMS",
    "DEFAULT_MAX_UNIT_SIZE",
    "FORMAT_VERSION",
    "MAGIC",
    "MAX_UVARINT_BYTES",
    "SYNC_MARKER",
    "BitstreamError",
    "CorruptError",
    "ModelEntry",
    "OversizedError",
    "StreamHeader",
    "StreamWriter",
    "SubStream",
    "SubStreamType",
    "TruncatedError",
    "Unit",
    "UnitKind",
    "UnsupportedVersionError",
    "decode_uvarint",
    "encode_uvarint",
    "header_bytes",
    "iter_units",
    "read_stream",
    "unit_overhead_bytes",
    "write_stream",
]

MAGIC = b"SEMC"
FORMAT_VERSION = 2
SYNC_MARKER = b"\xa5\x5a"
MAX_UVARINT_BYTES = 10
DEFAULT_MAX_UNIT_SIZE = 64 * 1024 * 1024
DEFAULT_MAX_SUBSTREAMS = 64
DEFAULT_MAX_HEADER_SIZE = 1024 * 1024

_U64_LIMIT = 1 << 64
_U32_MAX = (1 << 32) - 1
_U16_MAX = (1 << 16) - 1
_CRC = struct.Struct(">I")
_HEADER_FIXED = struct.Struct(">HHIIBI")
_MIN_UNIT_LENGTH = 7  # kind + 1-byte seq + 1-byte count + CRC
_SHA256_BYTES = 32
_READ_CHUNK = 1 << 20  # never read (allocate) more than this ahead of the data really there


# --------------------------------------------------------------------------------------------
# Errors


class BitstreamError(ValueError):
    """Any problem with a semcodec bitstream, on reading or writing.

    Attributes:
        offset: byte offset in the stream (or the parsed buffer) where the problem is, if known.
        unit_index: 0-based index of the unit being read, if the problem is inside a unit.
    """

    def __init__(
        self, message: str, *, offset: int | None = None, unit_index: int | None = None
    ) -> None:
        self.offset = offset
        self.unit_index = unit_index
        text = message
        if unit_index is not None:
            text = f"unit #{unit_index}: {text}"
        if offset is not None:
            text = f"{text} (at byte offset {offset})"
        super().__init__(text)


class TruncatedError(BitstreamError):
    """The data ends before the structure it declares does."""


class CorruptError(BitstreamError):
    """Bytes that are not a valid stream: CRC mismatch, bad marker, bad enum value or varint."""


class UnsupportedVersionError(BitstreamError):
    """The stream's format version is not one this reader understands."""


class OversizedError(BitstreamError):
    """A declared length or count exceeds a configured limit (checked before any allocation)."""


# --------------------------------------------------------------------------------------------
# Enums


class UnitKind(IntEnum):
    """What a unit is. 0 and 4..255 are reserved."""

    KEYFRAME = 1  #: a frame that carries an intra-coded image (a random-access point)
    FRAME = 2  #: a frame described by scaffolds or features only
    END = 3  #: the clean end of the stream; its seq is the number of frames


class SubStreamType(IntEnum):
    """What a sub-stream's payload holds. 0 and 10..255 are reserved."""

    KEYFRAME_IMAGE = 1
    TRACKS = 2
    SEGMENTATION = 3
    POSE = 4
    FLOW = 5
    FEATURES = 6
    METADATA = 7
    APPEARANCE = 8
    PLATE_TILE = 9


_UNIT_KINDS = frozenset(m.value for m in UnitKind)
_SUBSTREAM_TYPES = frozenset(m.value for m in SubStreamType)


def _coerce_enum(cls: type[IntEnum], value: Any, what: str) -> Any:
    if isinstance(value, cls):
        return value
    if isinstance(value, (Enum, bool)) or not isinstance(value, int):
        raise BitstreamError(f"{what} must be a {cls.__name__}, got {value!r}")
    try:
        return cls(value)
    except ValueError:
        known = ", ".join(f"{m.value} {m.name}" for m in cls)
        raise BitstreamError(f"{what} {value} is not a {cls.__name__} (known: {known})") from None


# --------------------------------------------------------------------------------------------
# uvarint


def encode_uvarint(value: int) -> bytes:
    """The canonical LEB128 encoding of ``0 <= value < 2**64`` (1 to 10 bytes)."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise BitstreamError(f"uvarint value must be an int, got {value!r}")
    if not 0 <= value < _U64_LIMIT:
        raise BitstreamError(f"uvarint value must be in [0, 2**64), got {value}")
    out = bytearray()
    while value >= 0x80:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def _uvarint_len(value: int) -> int:
    return max(1, (value.bit_length() + 6) // 7)


def _decode_uvarint(
    data: bytes | bytearray | memoryview,
    pos: int,
    *,
    base: int = 0,
    unit_index: int | None = None,
    what: str = "uvarint",
) -> tuple[int, int]:
    """Decode at ``data[pos:]``; error offsets are ``base + index into data``."""
    start = pos
    end = len(data)
    value = 0
    for i in range(MAX_UVARINT_BYTES):
        if pos >= end:
            raise TruncatedError(
                f"{what}: data ends after {i} byte(s) of a varint (expected a byte < 0x80 "
                "to end it)",
                offset=base + pos,
                unit_index=unit_index,
            )
        byte = data[pos]
        pos += 1
        value |= (byte & 0x7F) << (7 * i)
        if byte < 0x80:
            if i > 0 and byte == 0:
                raise CorruptError(
                    f"{what}: non-canonical varint (overlong {i + 1}-byte encoding of {value})",
                    offset=base + start,
                    unit_index=unit_index,
                )
            if value >= _U64_LIMIT:
                raise CorruptError(
                    f"{what}: varint value {value} does not fit in 64 bits",
                    offset=base + start,
                    unit_index=unit_index,
                )
            return value, pos
    raise CorruptError(
        f"{what}: varint longer than {MAX_UVARINT_BYTES} bytes",
        offset=base + start,
        unit_index=unit_index,
    )


def decode_uvarint(data: bytes | bytearray | memoryview, offset: int = 0) -> tuple[int, int]:
    """Decode one uvarint at ``data[offset:]``; return ``(value, offset just past it)``.

    Raises:
        TruncatedError: the data ends inside the varint.
        CorruptError: more than 10 bytes, a value >= 2**64, or an overlong encoding.
    """
    if not 0 <= offset <= len(data):
        raise BitstreamError(f"offset {offset} is outside the data (length {len(data)})")
    return _decode_uvarint(data, offset)


# --------------------------------------------------------------------------------------------
# Reading helpers


class _Cursor:
    """Reads fields from a complete, length-delimited block (a header body or a unit).

    The block's length was declared and its CRC verified, so running past its end is
    corruption, never truncation.
    """

    def __init__(
        self, buf: bytes | memoryview, base: int, unit_index: int | None, block: str
    ) -> None:
        self.buf = buf
        self.pos = 0
        self.base = base
        self.unit_index = unit_index
        self.block = block

    @property
    def offset(self) -> int:
        return self.base + self.pos

    @property
    def remaining(self) -> int:
        return len(self.buf) - self.pos

    def corrupt(self, message: str, offset: int | None = None) -> CorruptError:
        return CorruptError(
            message, offset=self.offset if offset is None else offset, unit_index=self.unit_index
        )

    def take(self, n: int, what: str) -> bytes:
        if n > self.remaining:
            raise self.corrupt(
                f"{what}: expected {n} bytes, found only {self.remaining} left in the {self.block}"
            )
        out = bytes(self.buf[self.pos : self.pos + n])
        self.pos += n
        return out

    def u8(self, what: str) -> int:
        return self.take(1, what)[0]

    def uvarint(self, what: str) -> int:
        try:
            value, self.pos = _decode_uvarint(
                self.buf, self.pos, base=self.base, unit_index=self.unit_index, what=what
            )
        except TruncatedError as exc:
            raise self.corrupt(f"{what}: varint runs past the end of the {self.block}") from exc
        return value

    def text(self, what: str) -> str:
        start = self.offset
        n = self.uvarint(f"{what} length")
        raw = self.take(n, what)
        try:
            return raw.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise self.corrupt(f"{what}: not valid UTF-8 ({exc.reason})", offset=start) from None


class _Input:
    """A binary file handle with a byte position, read in bounded chunks."""

    def __init__(self, fh: BinaryIO, pos: int = 0) -> None:
        self.fh = fh
        self.pos = pos

    def read_upto(self, n: int) -> bytes:
        """Up to ``n`` bytes (fewer only at the end of the data), read in bounded chunks so
        that memory follows the bytes really there, not a declared length; short reads of raw
        files and pipes are retried."""
        parts: list[bytes] = []
        got = 0
        while got < n:
            chunk = self.fh.read(min(_READ_CHUNK, n - got))
            if not chunk:
                break
            parts.append(chunk)
            got += len(chunk)
        self.pos += got
        return parts[0] if len(parts) == 1 else b"".join(parts)

    def read_uvarint(self, what: str, unit_index: int | None) -> tuple[int, bytes]:
        """One uvarint and its raw bytes; the data ending inside it is truncation."""
        start = self.pos
        raw = bytearray()
        while len(raw) < MAX_UVARINT_BYTES:
            b = self.read_upto(1)
            if not b:
                break
            raw += b
            if b[0] < 0x80:
                break
        value, _ = _decode_uvarint(raw, 0, base=start, unit_index=unit_index, what=what)
        return value, bytes(raw)


def _check_limit(name: str, value: Any, minimum: int = 1) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise BitstreamError(f"{name} must be an int >= {minimum}, got {value!r}")
    return value


# --------------------------------------------------------------------------------------------
# Stream header


def _check_int(name: str, value: Any, lo: int, hi: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise BitstreamError(f"{name} must be an int, got {value!r}")
    if not lo <= value <= hi:
        raise BitstreamError(f"{name} must be in [{lo}, {hi}], got {value}")
    return value


def _utf8(name: str, value: Any, *, allow_empty: bool) -> bytes:
    if not isinstance(value, str):
        raise BitstreamError(f"{name} must be a str, got {value!r}")
    if not value and not allow_empty:
        raise BitstreamError(f"{name} must not be empty")
    try:
        return value.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise BitstreamError(f"{name} {value!r} cannot be encoded as UTF-8: {exc.reason}") from None


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


# --------------------------------------------------------------------------------------------
# Units


@dataclass(frozen=True)
class SubStream:
    """One typed payload inside a unit (payload bytes are opaque to the bitstream)."""

    type: SubStreamType
    payload: bytes = b""

    def __post_init__(self) -> None:
        object.__setattr__(self, "type", _coerce_enum(SubStreamType, self.type, "sub-stream type"))
        payload = self.payload
        if isinstance(payload, (bytearray, memoryview)):
            payload = bytes(payload)
        if not isinstance(payload, bytes):
            raise BitstreamError(f"sub-stream payload must be bytes, got {type(payload).__name__}")
        object.__setattr__(self, "payload", payload)


@dataclass(frozen=True)
class Unit:
    """One independently framed unit of a stream.

    Attributes:
        kind: what the unit is.
        seq: 0-based frame index (for ``END``: the number of frames), 0..2**64-1.
        substreams: the payloads, in order (a type may repeat).
    """

    kind: UnitKind
    seq: int
    substreams: tuple[SubStream, ...] = ()

    def __post_init__(self) -> None:
        object.__setattr__(self, "kind", _coerce_enum(UnitKind, self.kind, "unit kind"))
        _check_int("unit seq", self.seq, 0, _U64_LIMIT - 1)
        subs = self.substreams
        if isinstance(subs, (str, bytes, SubStream)) or not isinstance(subs, Iterable):
            raise BitstreamError(f"substreams must be a sequence of SubStream, got {subs!r}")
        subs = tuple(subs)
        for sub in subs:
            if not isinstance(sub, SubStream):
                raise BitstreamError(f"substreams must hold SubStream objects, got {sub!r}")
        object.__setattr__(self, "substreams", subs)

    @property
    def payload_bytes(self) -> int:
        """Total payload bytes of all sub-streams (the unit's size less its framing)."""
        return sum(len(s.payload) for s in self.substreams)

    def payload_sizes(self) -> dict[SubStreamType, int]:
        """Payload bytes per sub-stream type (types that repeat are summed)."""
        sizes: dict[SubStreamType, int] = {}
        for sub in self.substreams:
            sizes[sub.type] = sizes.get(sub.type, 0) + len(sub.payload)
        return sizes

    def to_bytes(
        self,
        *,
        max_unit_size: int = DEFAULT_MAX_UNIT_SIZE,
        max_substreams: int = DEFAULT_MAX_SUBSTREAMS,
    ) -> bytes:
        """The encoded unit (sync marker through CRC).

        Raises:
            OversizedError: more sub-streams than ``max_substreams`` or a unit longer than
                ``max_unit_size`` (what a reader with the same limits would refuse).
        """
        _check_limit("max_unit_size", max_unit_size)
        _check_limit("max_substreams", max_substreams, 0)
        if len(self.substreams) > max_substreams:
            raise OversizedError(
                f"unit has {len(self.substreams)} sub-streams, over the limit of {max_substreams}"
            )
        parts = [bytes([self.kind]), encode_uvarint(self.seq), encode_uvarint(len(self.substreams))]
        for sub in self.substreams:
            parts += [bytes([sub.type]), encode_uvarint(len(sub.payload)), sub.payload]
        content = b"".join(parts)
        length = len(content) + _CRC.size
        if length > max_unit_size:
            raise OversizedError(
                f"unit is {length} bytes (kind through CRC), over the limit of {max_unit_size}"
            )
        raw_length = encode_uvarint(length)
        crc = zlib.crc32(content, zlib.crc32(raw_length))
        return b"".join((SYNC_MARKER, raw_length, content, _CRC.pack(crc)))

    @classmethod
    def from_bytes(
        cls,
        data: bytes | bytearray | memoryview,
        *,
        max_unit_size: int = DEFAULT_MAX_UNIT_SIZE,
        max_substreams: int = DEFAULT_MAX_SUBSTREAMS,
    ) -> Unit:
        """Parse exactly one encoded unit (no trailing bytes)."""
        limits = _limits(max_unit_size, max_substreams)
        inp = _Input(io.BytesIO(bytes(data)))
        unit = _read_unit(inp, 0, limits)
        if unit is None:
            raise TruncatedError("expected a unit, found no data", offset=0, unit_index=0)
        if inp.pos != len(data):
            raise CorruptError(
                f"expected the end of the data after the unit, found {len(data) - inp.pos} "
                "more byte(s)",
                offset=inp.pos,
            )
        return unit


def unit_overhead_bytes(unit: Unit) -> int:
    """Bytes of framing in the encoded unit: marker, lengths, kind, seq, types, counts, CRC.

    ``len(unit.to_bytes()) == unit_overhead_bytes(unit) + unit.payload_bytes``.
    """
    content = 1 + _uvarint_len(unit.seq) + _uvarint_len(len(unit.substreams))
    for sub in unit.substreams:
        content += 1 + _uvarint_len(len(sub.payload)) + len(sub.payload)
    length = content + _CRC.size
    return len(SYNC_MARKER) + _uvarint_len(length) + length - unit.payload_bytes


@dataclass(frozen=True)
class _Limits:
    max_unit_size: int
    max_substreams: int


def _limits(max_unit_size: int, max_substreams: int) -> _Limits:
    return _Limits(
        _check_limit("max_unit_size", max_unit_size),
        _check_limit("max_substreams", max_substreams, 0),
    )


def _read_unit(inp: _Input, index: int, limits: _Limits) -> Unit | None:
    """Read the next unit, or ``None`` at a clean end of the data (no byte left)."""
    start = inp.pos
    marker = inp.read_upto(len(SYNC_MARKER))
    if not marker:
        return None
    if marker != SYNC_MARKER[: len(marker)]:
        raise CorruptError(
            f"expected the sync marker {SYNC_MARKER.hex()}, found {marker.hex()}",
            offset=start,
            unit_index=index,
        )
    if len(marker) < len(SYNC_MARKER):
        raise TruncatedError(
            "the data ends inside the sync marker", offset=inp.pos, unit_index=index
        )
    length_offset = inp.pos
    length, raw_length = inp.read_uvarint("unit length", index)
    if length > limits.max_unit_size:
        raise OversizedError(
            f"unit declares {length} bytes, over the limit of {limits.max_unit_size} "
            "(max_unit_size)",
            offset=length_offset,
            unit_index=index,
        )
    if length < _MIN_UNIT_LENGTH:
        raise CorruptError(
            f"unit length: expected >= {_MIN_UNIT_LENGTH}, found {length}",
            offset=length_offset,
            unit_index=index,
        )
    body_offset = inp.pos
    body = inp.read_upto(length)
    if len(body) < length:
        raise TruncatedError(
            f"the data ends inside the unit: expected {length} bytes from its kind byte "
            f"(at offset {body_offset}) through its CRC, found {len(body)}",
            offset=inp.pos,
            unit_index=index,
        )
    return _parse_unit_body(raw_length, body, body_offset, index, limits)


def _parse_unit_body(
    raw_length: bytes, body: bytes, base: int, index: int, limits: _Limits
) -> Unit:
    view = memoryview(body)
    content = view[: -_CRC.size]
    stored = _CRC.unpack_from(body, len(content))[0]
    computed = zlib.crc32(content, zlib.crc32(raw_length))
    if stored != computed:
        start = base - len(raw_length) - len(SYNC_MARKER)
        raise CorruptError(
            f"CRC mismatch in the unit starting at byte offset {start}: stored {stored:08x}, "
            f"computed {computed:08x} (the unit is damaged)",
            offset=base + len(content),
            unit_index=index,
        )
    cur = _Cursor(content, base, index, "unit")
    kind_value = cur.u8("unit kind")
    if kind_value not in _UNIT_KINDS:
        known = ", ".join(f"{m.value} {m.name}" for m in UnitKind)
        raise cur.corrupt(
            f"unit kind: expected one of {known}, found {kind_value}", offset=cur.offset - 1
        )
    seq = cur.uvarint("sequence number")
    count_offset = cur.offset
    count = cur.uvarint("sub-stream count")
    if count > limits.max_substreams:
        raise OversizedError(
            f"unit declares {count} sub-streams, over the limit of {limits.max_substreams} "
            "(max_substreams)",
            offset=count_offset,
            unit_index=index,
        )
    subs: list[SubStream] = []
    for i in range(count):
        type_value = cur.u8(f"sub-stream #{i} type")
        if type_value not in _SUBSTREAM_TYPES:
            known = ", ".join(f"{m.value} {m.name}" for m in SubStreamType)
            raise cur.corrupt(
                f"sub-stream #{i} type: expected one of {known}, found {type_value}",
                offset=cur.offset - 1,
            )
        size = cur.uvarint(f"sub-stream #{i} length")
        payload = cur.take(size, f"sub-stream #{i} payload")
        subs.append(SubStream(SubStreamType(type_value), payload))
    if cur.remaining:
        raise cur.corrupt(
            f"expected the unit's CRC after its last sub-stream, found {cur.remaining} more byte(s)"
        )
    return Unit(UnitKind(kind_value), seq, tuple(subs))


def iter_units(
    data: bytes | bytearray | memoryview,
    offset: int = 0,
    *,
    max_unit_size: int = DEFAULT_MAX_UNIT_SIZE,
    max_substreams: int = DEFAULT_MAX_SUBSTREAMS,
) -> Iterator[tuple[Unit, int]]:
    """Parse consecutive units in ``data[offset:]``; yield ``(unit, offset just past it)``.

    Stops at the end of the data. Error offsets are indices into ``data``; ``unit_index``
    counts from 0 at ``offset``. A partial unit at the end raises :class:`TruncatedError`
    (after the complete units before it were yielded): a caller buffering a network stream
    can keep the bytes from the last yielded offset on and retry when more arrive.
    """
    if not 0 <= offset <= len(data):
        raise BitstreamError(f"offset {offset} is outside the data (length {len(data)})")
    limits = _limits(max_unit_size, max_substreams)
    fh = io.BytesIO(bytes(data))
    fh.seek(offset)
    inp = _Input(fh, offset)
    index = 0
    while (unit := _read_unit(inp, index, limits)) is not None:
        yield unit, inp.pos
        index += 1


# --------------------------------------------------------------------------------------------
# Streams


def _stream_units(inp: _Input, limits: _Limits) -> Iterator[Unit]:
    index = 0
    while True:
        unit = _read_unit(inp, index, limits)
        if unit is None:
            return
        yield unit
        index += 1
        if unit.kind == UnitKind.END:
            extra_offset = inp.pos
            if inp.read_upto(1):
                raise CorruptError(
                    "expected the end of the stream after the END unit, found more bytes",
                    offset=extra_offset,
                    unit_index=index,
                )
            return


def _units_from_path(path: Path, offset: int, limits: _Limits) -> Iterator[Unit]:
    with open(path, "rb") as fh:
        fh.seek(offset)
        yield from _stream_units(_Input(fh, offset), limits)


def read_stream(
    source: str | os.PathLike[str] | bytes | bytearray | memoryview | BinaryIO,
    *,
    max_unit_size: int = DEFAULT_MAX_UNIT_SIZE,
    max_substreams: int = DEFAULT_MAX_SUBSTREAMS,
    max_header_size: int = DEFAULT_MAX_HEADER_SIZE,
) -> tuple[StreamHeader, Iterator[Unit]]:
    """Read a stream: the header now, the units lazily.

    Args:
        source: a path, the stream's bytes, or a binary file handle positioned at the
            stream's first byte (read sequentially, never seeked; not closed).

    Returns:
        The header and an iterator over the units. For a path, the iterator opens the file
        itself (on its first ``next``) and closes it when exhausted, so nothing stays open.
        Error offsets count from the stream's first byte.

    Raises:
        BitstreamError subclasses; the header's errors now, a unit's when the iterator
        reaches it (after yielding every good unit before it). A stream that ends inside a
        unit raises :class:`TruncatedError` naming that unit's index.
    """
    limits = _limits(max_unit_size, max_substreams)
    _check_limit("max_header_size", max_header_size)
    if isinstance(source, (str, os.PathLike)):
        path = Path(source)
        with open(path, "rb") as fh:
            inp = _Input(fh)
            header = _read_header(inp, max_header_size)
        return header, _units_from_path(path, inp.pos, limits)
    if isinstance(source, (bytes, bytearray, memoryview)):
        fh = io.BytesIO(bytes(source))
    elif hasattr(source, "read"):
        fh = source
    else:
        raise TypeError(f"source must be a path, bytes or a binary file, got {type(source)}")
    inp = _Input(fh)
    header = _read_header(inp, max_header_size)
    return header, _stream_units(inp, limits)


class StreamWriter:
    """Write a stream unit by unit; atomic for paths.

    For a path, the bytes go to a hidden temporary file in the same directory that replaces
    ``dest`` only when :meth:`close` succeeds; :meth:`abort` (or leaving the ``with`` block by
    an exception) deletes it, so a failed write never leaves a partial file (an existing file
    at ``dest`` stays as it was). For a file handle, bytes are written to it as they come
    and it is flushed, not closed, by :meth:`close`.

    Every unit is validated before any of its bytes are written, so a rejected unit leaves the
    stream consistent. No unit may follow an ``END`` unit.

    Example::

        with StreamWriter("out.semc", header) as writer:
            for unit in units:
                writer.write(unit)
    """

    def __init__(
        self,
        dest: str | os.PathLike[str] | BinaryIO,
        header: StreamHeader,
        *,
        fsync: bool = True,
        max_unit_size: int = DEFAULT_MAX_UNIT_SIZE,
        max_substreams: int = DEFAULT_MAX_SUBSTREAMS,
        max_header_size: int = DEFAULT_MAX_HEADER_SIZE,
    ) -> None:
        if not isinstance(header, StreamHeader):
            raise BitstreamError(f"header must be a StreamHeader, got {header!r}")
        self._limits = _limits(max_unit_size, max_substreams)
        data = header.to_bytes(max_header_size=max_header_size)  # validate before any file
        self._fsync = fsync
        self._path: Path | None = None
        self._tmp: Path | None = None
        if isinstance(dest, (str, os.PathLike)):
            self._path = Path(dest)
            self._tmp = self._path.with_name(f".{self._path.name}.{secrets.token_hex(6)}.tmp")
            flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_BINARY", 0)
            self._fh: BinaryIO = os.fdopen(os.open(self._tmp, flags, 0o666), "wb")
        elif hasattr(dest, "write"):
            self._fh = dest
        else:
            raise TypeError(f"dest must be a path or a binary file, got {type(dest)}")
        self.bytes_written = 0
        self.units_written = 0
        self._ended = False
        self._closed = False
        try:
            self._emit(data)
        except BaseException:
            self.abort()
            raise

    def _emit(self, data: bytes) -> None:
        self._fh.write(data)
        self.bytes_written += len(data)

    def write(self, unit: Unit) -> int:
        """Append one unit; return its size in bytes."""
        if self._closed:
            raise BitstreamError("the stream writer is closed")
        if not isinstance(unit, Unit):
            raise BitstreamError(f"expected a Unit, got {type(unit).__name__}")
        if self._ended:
            raise BitstreamError(
                f"unit #{self.units_written} ({unit.kind.name}, seq {unit.seq}) follows the "
                "END unit: nothing may follow END"
            )
        data = unit.to_bytes(
            max_unit_size=self._limits.max_unit_size, max_substreams=self._limits.max_substreams
        )
        self._emit(data)
        self.units_written += 1
        self._ended = unit.kind == UnitKind.END
        return len(data)

    def close(self) -> None:
        """Finish: flush, and for a path, fsync and move the file into place."""
        if self._closed:
            return
        try:
            self._fh.flush()
            if self._tmp is not None:
                if self._fsync:
                    os.fsync(self._fh.fileno())
                self._fh.close()
                os.replace(self._tmp, self._path)  # type: ignore[arg-type]
                self._tmp = None
        except BaseException:
            self.abort()
            raise
        self._closed = True

    def abort(self) -> None:
        """Give up: for a path, delete the temporary file (``dest`` is left untouched)."""
        self._closed = True
        if self._tmp is not None:
            try:
                self._fh.close()
            finally:
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(self._tmp)
                self._tmp = None

    def __enter__(self) -> StreamWriter:
        return self

    def __exit__(self, exc_type: Any, exc: Any, tb: Any) -> None:
        if exc_type is None:
            self.close()
        else:
            self.abort()


def write_stream(
    dest: str | os.PathLike[str] | BinaryIO,
    header: StreamHeader,
    units: Iterable[Unit],
    *,
    fsync: bool = True,
    max_unit_size: int = DEFAULT_MAX_UNIT_SIZE,
    max_substreams: int = DEFAULT_MAX_SUBSTREAMS,
    max_header_size: int = DEFAULT_MAX_HEADER_SIZE,
) -> int:
    """Write a header and units to ``dest``; return the bytes written.

    Atomic for paths (see :class:`StreamWriter`): if ``units`` raises, or a unit is invalid,
    no file (and no temporary file) is left at ``dest``. The units are written as given: end
    a complete stream with ``Unit(UnitKind.END, number_of_frames)``.
    """
    with StreamWriter(
        dest,
        header,
        fsync=fsync,
        max_unit_size=max_unit_size,
        max_substreams=max_substreams,
        max_header_size=max_header_size,
    ) as writer:
        for unit in units:
            writer.write(unit)
    return writer.bytes_written
