"""The bitstream's constants, errors and byte-level reading helpers (uvarints, a bounded
cursor over bytes, a bounded reader over a file): what the header, unit and stream modules
share. The layout is in :mod:`codec.bitstream`."""

from __future__ import annotations

import struct
from enum import Enum, IntEnum
from typing import Any, BinaryIO

MAGIC = b"SEMC"
FORMAT_VERSION = 4
#: Versions this reader reads (2: before the compact header and unit framing; 3: the compact
#: header and framing with an explicit frame index and CRC-16 in every unit).
SUPPORTED_VERSIONS = (2, 3, 4)
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
