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

Format versions
===============

Version 4 (written today), version 3 and version 2 (read; written on request with
``StreamHeader(..., version=3)`` or ``2``) differ in the unit framing (and 2 in the header
body too); a stream's units are framed as its header's version says, and a unit's first byte
tells its framing (:func:`unit_version`). A version-4 frame unit does not write its index:
it is the unit's position in the stream, which its CRC covers, so it parses alone only given
that index (``Unit.from_bytes(data, seq=...)``; the service has it from the transport).
Version 3 exists because on the embedded sample at 0.004 BPP (60 frames, 3,552 bytes)
version 2's header (615 bytes: every setting as text, 32-byte digests) and framing (12.4
bytes a frame) were 39 % of the stream; version 4 because version 3's (70 + 384 bytes of
3,631) were still 12.5 %: now 56 + 225 of 3,567 (7.9 %).

Byte layout (format version 4)
==============================

The stream header is version 3's below with the version byte 4. Unit::

    0     1     lead byte 0b01kk_tttt: kk unit kind (1 KEYFRAME, 2 FRAME, 3 END); tttt the
                type (1..15) of the unit's one sub-stream, or 0: a count follows
    1     1-10  L = unit length, uvarint: bytes after it through the CRC; L = 128 is refused
                (a content that short has the 1-byte CRC)
    .     v     KEYFRAME and END only: sequence number, uvarint (a FRAME unit's is its
                position in the stream: 0 for the first unit after the header)
    .     v     tttt = 0 only: S = number of sub-streams (0 or 2..max_substreams), then
                as version 3: a uvarint (P << 4 | type) for each but the last, whose type is
                a u8 and whose payload runs to the CRC
    .     P     tttt != 0: the one payload, to the CRC
    .     1|2   L < 128: CRC-8/SMBUS (poly 0x07, init 0); else CRC-16/CCITT-FALSE, big-endian;
                over (a FRAME unit: its sequence number as a uvarint, then) the lead byte,
                the length varint and the content

Known answer: ``Unit(FRAME, 3, (SubStream(TRACKS, b"ab"),))`` is ``62 03 61 62 ab`` (3 bytes
of framing; the CRC-8 covers the index 3, which is not written); ``Unit(END, 0)`` is
``70 03 00 00 8f``.

Byte layout (format version 3)
==============================

Conventions as in version 2 below. Stream header (version 4's too)::

    0       4     magic b"SEMC"
    4       1     format version, u8 = 3 (4)
    5       1-10  N = header body length, uvarint
    .       N     header body
    .       4     CRC32 over the version byte, the length varint and the body

Header body (uvarints unless said; leftover bytes are an error)::

    v     frame width (1..65535), frame height (1..65535)
    v     frame rate numerator, denominator (each 1..2**32-1)
    1     level, u8
    v     number of frames (0 = unknown; <= 2**32-1)
    v     defaults id: 0, or 1 + the index of a set in tables.SETTINGS_DEFAULTS
    v     M = number of model entries; then M times:
            name  (a name: uvarint id = 1 + index in tables.MODEL_NAMES, or 0 and a str)
            1     digest length D, u8: 4 (the first 4 bytes of the sha256) or 0
            D     digest prefix
    v     K = number of settings written; then K times (keys strictly increasing as text):
            name  key (as a model name, with tables.SETTING_KEYS)
            str   value (never equal to the defaults' value for the key: the reader fills
                  in every key of the defaults that is not written)

Unit::

    0     1     lead byte 0b11kk_nnnn: kk unit kind (1 KEYFRAME, 2 FRAME, 3 END), nnnn the
                number of sub-streams S (0..14; 15: S >= 15, see below)
    1     1-10  L = unit length, uvarint: bytes from the sequence number through the CRC
                (3 <= L <= max_unit_size)
    .     v     sequence number, uvarint
    .     v     only when nnnn = 15: S - 15, uvarint (S <= max_substreams)
                then S times:
    .     v       all but the last: uvarint (P << 4 | type), P = payload length, type 1..15
    .     1       the last: type, u8; its payload runs to the CRC
    .     P       payload
    .     2     CRC-16/CCITT-FALSE (binascii.crc_hqx, init 0xFFFF), u16 big-endian, over the
                lead byte, the length varint and everything through the last payload byte

Known answer: ``Unit(FRAME, 3, (SubStream(TRACKS, b"ab"),))`` is ``e1 06 03 02 61 62 8c 4e``
(6 bytes of framing for 2 of payload); ``Unit(END, 0)`` is ``f0 03 00 7a 9d``.

Byte layout (format version 2)
==============================

Stream header::

    offset  size  field
    0       4     magic b"SEMC" (53 45 4D 43)
    4       1     format version, u8 = 2 (a reader refuses any other value; checked before
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
                    4 POSE, 5 FLOW, 6 FEATURES, 7 METADATA, 8 APPEARANCE, 9 PLATE_TILE,
                    10 SPARSE_POSE (0 and 11..255 reserved)
    .       v       P = payload length, uvarint
    .       P       payload
    .       4     CRC32 over the unit length varint and everything from the kind byte
                  through the last payload byte

The unit's fields must fill exactly its ``L`` bytes. A stream ends at the end of the data
(a stream cut at a unit boundary reads as the units so far) or after an ``END`` unit; any
byte after an ``END`` unit is an error. Unknown enum values are errors: adding a unit kind or
a sub-stream type is a format change and bumps the version byte (version 2 added
APPEARANCE; a version-1 stream is refused with :class:`UnsupportedVersionError`).
Version 3 adds sub-stream types below 16 only (4 bits in its framing).

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
    SUPPORTED_VERSIONS,
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
    unit_version,
)

__all__ = [
    "DEFAULT_MAX_HEADER_SIZE",
    "DEFAULT_MAX_SUBSTREAMS",
    "DEFAULT_MAX_UNIT_SIZE",
    "FORMAT_VERSION",
    "MAGIC",
    "MAX_UVARINT_BYTES",
    "SUPPORTED_VERSIONS",
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
    "unit_version",
    "write_stream",
]
