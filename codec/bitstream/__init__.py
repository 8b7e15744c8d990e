"""The semcodec bitstream: one writer and one reader for ``.semc`` files and gRPC payloads.

A stream is a **stream header** followed by any number of **units**. Every unit is framed on
its own (sync marker, length, CRC), so it can be sent, lost, resent and parsed alone; over
gRPC the header and each unit travel as separate messages (``StreamHeader.to_bytes()``,
``Unit.to_bytes()``). The parser is strict: every byte sequence it accepts is the canonical
encoding of what it returns (``X.from_bytes(b).to_bytes() == b``), and everything else raises
a :class:`BitstreamError` subclass saying what was expected, what was found and where.

Modules: :mod:`.primitives` (constants, errors, uvarints, bounded readers), :mod:`.header`
(:class:`StreamHeader`), :mod:`.units` (:class:`Unit`, :class:`SubStream`, :func:`iter_units`)
and :mod:`.stream` (:func:`read_stream`, :class:`StreamWriter`); import from this package.

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

from semcodec.codec.bitstream.header import (
    ModelEntry,
    StreamHeader,
    header_bytes,
)
from semcodec.codec.bitstream.primitives import (
    DEFAULT_MAX_HEADER_SIZE,
    DEFAULT_MAX_SUBSTREAMS,
    DEFAULT_MAX_UNIT_SIZE,
    FORMAT_VERSION,
    MAGIC,
    MAX_UVARINT_BYTES,
    SYNC_MARKER,
    BitstreamError,
    CorruptError,
    OversizedError,
    TruncatedError,
    UnsupportedVersionError,
    decode_uvarint,
    encode_uvarint,
)
from semcodec.codec.bitstream.stream import (
    StreamWriter,
    read_stream,
    write_stream,
)
from semcodec.codec.bitstream.units import (
    SubStream,
    SubStreamType,
    Unit,
    UnitKind,
    iter_units,
    unit_overhead_bytes,
)

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
