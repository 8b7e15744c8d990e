"""Units: :class:`Unit` (kind, frame index, typed :class:`SubStream` payloads), their framing
and the strict parser of one unit.

Format version 4 frames a unit in 3 bytes when it is a frame with one small sub-stream: a
lead byte (marker, kind, and the type of a lone sub-stream), a length, and a CRC-8 (CRC-16
from 128 bytes on). A frame unit's index is not written: it is the unit's position in the
stream, and the CRC covers it, so a unit out of place fails its check like a damaged one;
keyframe and END units still write theirs (places to start from). Version 3 (lead byte,
length, index, a type-and-length varint per sub-stream but the last, CRC-16: 6 bytes) and
version 2 (sync marker, length, kind, index, count, a type and a length per sub-stream,
CRC32: 12 bytes) are still read and written on request. A unit's first byte tells its
framing. The layouts are in :mod:`codec.bitstream`."""

from __future__ import annotations

import binascii
import io
import struct
import zlib
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from enum import IntEnum

from semcodec.codec.bitstream.primitives import (
    _CRC,
    _MIN_UNIT_LENGTH,
    _U64_LIMIT,
    DEFAULT_MAX_SUBSTREAMS,
    DEFAULT_MAX_UNIT_SIZE,
    FORMAT_VERSION,
    SYNC_MARKER,
    BitstreamError,
    CorruptError,
    OversizedError,
    TruncatedError,
    _check_int,
    _check_limit,
    _coerce_enum,
    _Cursor,
    _Input,
    _uvarint_len,
    encode_uvarint,
)


class UnitKind(IntEnum):
    """What a unit is. 0 and 4..255 are reserved."""

    KEYFRAME = 1  #: a frame that carries an intra-coded image (a random-access point)
    FRAME = 2  #: a frame described by scaffolds or features only
    END = 3  #: the clean end of the stream; its seq is the number of frames


class SubStreamType(IntEnum):
    """What a sub-stream's payload holds. 0 and 11..255 are reserved."""

    KEYFRAME_IMAGE = 1
    TRACKS = 2
    SEGMENTATION = 3
    POSE = 4
    FLOW = 5
    FEATURES = 6
    METADATA = 7
    APPEARANCE = 8
    PLATE_TILE = 9
    SPARSE_POSE = 10  #: level 1's body joints per person (codec.entropy.sparse_pose)


_UNIT_KINDS = frozenset(m.value for m in UnitKind)
_SUBSTREAM_TYPES = frozenset(m.value for m in SubStreamType)

#: Version 3: a unit's lead byte is ``0b11kk_nnnn``: ``11`` marks it (a version-2 unit starts
#: with 0xA5), ``kk`` is its kind, ``nnnn`` its number of sub-streams (15: 15 or more, the
#: rest as a uvarint after the frame index).
_LEAD_MARK, _LEAD_MASK = 0xC0, 0xC0
_COUNT_ESCAPE = 15
_TYPE_BITS = 4  # a sub-stream type in a version-3 unit is below 16
_CRC16 = struct.Struct(">H")
_MIN_COMPACT_LENGTH = 1 + _CRC16.size  # a 1-byte frame index and the CRC
#: Version 4: a unit's lead byte is ``0b01kk_tttt``: ``01`` marks it, ``kk`` is its kind,
#: ``tttt`` the type of its one sub-stream (1..15), or 0: a count of sub-streams follows.
_LEAD4_MARK = 0x40
SHORT_UNIT_BYTES = 128  # a version-4 unit shorter than this (its length one byte) has a CRC-8
_CRC8_TABLE = []
for _byte in range(256):
    _value = _byte
    for _ in range(8):
        _value = (_value << 1 ^ 0x07 if _value & 0x80 else _value << 1) & 0xFF
    _CRC8_TABLE.append(_value)
del _byte, _value


def crc8(data: bytes | memoryview, value: int = 0) -> int:
    """CRC-8/SMBUS (poly x^8+x^2+x+1 = 0x07, init 0, no reflection): a multiple of x+1, so it
    catches every error of an odd number of bits and every burst of up to 8; another
    corruption passes once in 256. A version-4 unit shorter than 128 bytes carries it."""
    for byte in bytes(data):
        value = _CRC8_TABLE[value ^ byte]
    return value


def crc16(data: bytes | memoryview, value: int = 0xFFFF) -> int:
    """CRC-16/CCITT-FALSE (poly 0x1021, init 0xFFFF, no reflection, no xorout) of ``data``
    (``binascii.crc_hqx``): catches every error of up to 3 bits and every burst of up to 16
    in a unit; a stream's header keeps a CRC32."""
    return binascii.crc_hqx(data, value)


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
        version: int = FORMAT_VERSION,
    ) -> bytes:
        """The encoded unit (lead byte or sync marker through CRC), framed as format
        ``version`` frames it (3, or 2 for a version-2 stream).

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
        if version >= 4:
            return self._lead4_bytes(max_unit_size)
        if version >= 3:
            return self._compact_bytes(max_unit_size)
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

    def _compact_bytes(self, max_unit_size: int) -> bytes:
        count = len(self.substreams)
        lead = bytes([_LEAD_MARK | self.kind << 4 | min(count, _COUNT_ESCAPE)])
        parts = [encode_uvarint(self.seq)]
        if count >= _COUNT_ESCAPE:
            parts.append(encode_uvarint(count - _COUNT_ESCAPE))
        for i, sub in enumerate(self.substreams):
            if sub.type >= 1 << _TYPE_BITS:
                raise BitstreamError(f"sub-stream type {sub.type} does not fit a version-3 "
                                     "unit (types below 16)")  # fmt: skip
            last = i == count - 1
            head = bytes([sub.type]) if last else encode_uvarint(
                len(sub.payload) << _TYPE_BITS | sub.type)
            parts += [head, sub.payload]
        content = b"".join(parts)
        length = len(content) + _CRC16.size
        if length > max_unit_size:
            raise OversizedError(
                f"unit is {length} bytes (index through CRC), over the limit of {max_unit_size}"
            )
        covered = lead + encode_uvarint(length) + content
        return covered + _CRC16.pack(crc16(covered))

    def _lead4_bytes(self, max_unit_size: int) -> bytes:
        count = len(self.substreams)
        for sub in self.substreams:
            if sub.type >= 1 << _TYPE_BITS:
                raise BitstreamError(f"sub-stream type {sub.type} does not fit a version-4 "
                                     "unit (types below 16)")  # fmt: skip
        parts = [] if self.kind == UnitKind.FRAME else [encode_uvarint(self.seq)]
        if count == 1:
            lead = _LEAD4_MARK | self.kind << 4 | self.substreams[0].type
        else:
            lead = _LEAD4_MARK | self.kind << 4
            parts.append(encode_uvarint(count))
            for i, sub in enumerate(self.substreams):
                parts.append(bytes([sub.type]) if i == count - 1 else encode_uvarint(
                    len(sub.payload) << _TYPE_BITS | sub.type))
                if i < count - 1:
                    parts.append(sub.payload)
        content = b"".join(parts) + (self.substreams[-1].payload if count else b"")
        length = len(content) + 1
        if length >= SHORT_UNIT_BYTES:
            length = len(content) + _CRC16.size
        if length > max_unit_size:
            raise OversizedError(
                f"unit is {length} bytes (after its length through CRC), over the limit of "
                f"{max_unit_size}")
        covered = bytes([lead]) + encode_uvarint(length) + content
        implied = encode_uvarint(self.seq) if self.kind == UnitKind.FRAME else b""
        if length < SHORT_UNIT_BYTES:
            return covered + bytes([crc8(covered, crc8(implied))])
        return covered + _CRC16.pack(crc16(covered, crc16(implied)))

    @classmethod
    def from_bytes(
        cls,
        data: bytes | bytearray | memoryview,
        *,
        seq: int | None = None,
        max_unit_size: int = DEFAULT_MAX_UNIT_SIZE,
        max_substreams: int = DEFAULT_MAX_SUBSTREAMS,
    ) -> Unit:
        """Parse exactly one encoded unit (no trailing bytes), in any framing (its first
        byte tells which: :func:`unit_version`). ``seq``: the unit's index in its stream,
        which a version-4 FRAME unit does not carry (its CRC checks it); other units ignore
        it, or check it against the index they carry.

        Raises:
            BitstreamError: a version-4 FRAME unit without ``seq``.
        """
        limits = _limits(max_unit_size, max_substreams)
        if data and unit_version(data[0]) == 4 and data[0] >> 4 & 3 == UnitKind.FRAME \
                and seq is None:
            raise BitstreamError("a version-4 FRAME unit does not carry its index: pass "
                                 "seq= (the unit's position in its stream)", offset=0)
        inp = _Input(io.BytesIO(bytes(data)))
        unit = _read_unit(inp, 0 if seq is None else seq, limits)
        if unit is None:
            raise TruncatedError("expected a unit, found no data", offset=0, unit_index=0)
        if inp.pos != len(data):
            raise CorruptError(
                f"expected the end of the data after the unit, found {len(data) - inp.pos} "
                "more byte(s)",
                offset=inp.pos,
            )
        if seq is not None and unit.seq != seq:
            raise CorruptError(f"unit carries index {unit.seq}, expected {seq}", offset=0,
                               unit_index=seq)  # fmt: skip
        return unit


def unit_overhead_bytes(unit: Unit, version: int = FORMAT_VERSION) -> int:
    """Bytes of framing in the unit encoded in format ``version``: marker or lead byte,
    lengths, kind, seq, types, counts, CRC.

    ``len(unit.to_bytes(version=v)) == unit_overhead_bytes(unit, v) + unit.payload_bytes``.
    """
    if version >= 4:
        count = len(unit.substreams)
        head = 0 if unit.kind == UnitKind.FRAME else _uvarint_len(unit.seq)
        if count != 1:
            head += _uvarint_len(count) + sum(
                _uvarint_len(len(s.payload) << _TYPE_BITS | s.type) for s in unit.substreams[:-1]
            ) + (1 if count else 0)
        content = head + unit.payload_bytes
        length = content + 1 if content + 1 < SHORT_UNIT_BYTES else content + _CRC16.size
        return 1 + _uvarint_len(length) + length - unit.payload_bytes
    if version >= 3:
        count = len(unit.substreams)
        content = _uvarint_len(unit.seq) + (_uvarint_len(count - _COUNT_ESCAPE)
                                            if count >= _COUNT_ESCAPE else 0)  # fmt: skip
        content += sum(_uvarint_len(len(s.payload) << _TYPE_BITS | s.type)
                       for s in unit.substreams[:-1]) + (1 if count else 0)  # fmt: skip
        length = content + unit.payload_bytes + _CRC16.size
        return 1 + _uvarint_len(length) + length - unit.payload_bytes
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


def unit_version(first_byte: int) -> int | None:
    """The format version whose framing a unit starting with ``first_byte`` has (4 for a
    lead byte ``0b01kk_tttt``, 3 for ``0b11kk_nnnn``, 2 for a sync marker's 0xA5), or None
    for none of them."""
    if first_byte & _LEAD_MASK == _LEAD_MARK:
        return 3
    if first_byte & _LEAD_MASK == _LEAD4_MARK:
        return 4
    return 2 if first_byte == SYNC_MARKER[0] else None


#: What each version's units start with, for error messages.
_UNIT_STARTS = {2: f"the sync marker {SYNC_MARKER.hex()} of a version-2 unit",
                3: "the lead byte (c0..ff) of a version-3 unit",
                4: "the lead byte (40..7f) of a version-4 unit"}  # fmt: skip


def _read_unit(inp: _Input, index: int, limits: _Limits,
               version: int | None = None) -> Unit | None:  # fmt: skip
    """Read the next unit, or ``None`` at a clean end of the data (no byte left).
    ``index``: the unit's position in its stream (a version-4 FRAME unit's index);
    ``version``: the framing the stream's header declares (None: any)."""
    start = inp.pos
    first = inp.read_upto(1)
    if not first:
        return None
    found = unit_version(first[0])
    if found is None or (version is not None and found != version):
        expected = ("a unit: " + ", ".join(_UNIT_STARTS.values()) if version is None
                    else _UNIT_STARTS[version])  # fmt: skip
        raise CorruptError(f"expected {expected}, found {first.hex()}", offset=start,
                           unit_index=index)  # fmt: skip
    if found == 4:
        return _read_lead4_unit(inp, first[0], index, limits)
    if found == 3:
        return _read_compact_unit(inp, first[0], index, limits)
    marker = first + inp.read_upto(len(SYNC_MARKER) - 1)
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


def _read_compact_unit(inp: _Input, lead: int, index: int, limits: _Limits) -> Unit:
    """A version-3 unit whose lead byte was read."""
    start = inp.pos - 1
    length_offset = inp.pos
    length, raw_length = _read_length(inp, index, limits)
    if length < _MIN_COMPACT_LENGTH:
        raise CorruptError(f"unit length: expected >= {_MIN_COMPACT_LENGTH}, found {length}",
                           offset=length_offset, unit_index=index)  # fmt: skip
    body_offset = inp.pos
    body = inp.read_upto(length)
    if len(body) < length:
        raise TruncatedError(f"the data ends inside the unit: expected {length} bytes from "
                             f"its index (at offset {body_offset}) through its CRC, found "
                             f"{len(body)}", offset=inp.pos, unit_index=index)  # fmt: skip
    content = memoryview(body)[: -_CRC16.size]
    stored = _CRC16.unpack_from(body, len(content))[0]
    computed = crc16(content, crc16(bytes([lead]) + raw_length))
    if stored != computed:
        raise CorruptError(f"CRC mismatch in the unit starting at byte offset {start}: stored "
                           f"{stored:04x}, computed {computed:04x} (the unit is damaged)",
                           offset=body_offset + len(content), unit_index=index)  # fmt: skip
    return _parse_compact_content(lead, content, body_offset, index, limits)


def _read_lead4_unit(inp: _Input, lead: int, index: int, limits: _Limits) -> Unit:
    """A version-4 unit whose lead byte was read; ``index``: its position in the stream."""
    start = inp.pos - 1
    length_offset = inp.pos
    length, raw_length = _read_length(inp, index, limits)
    crc_size = 1 if length < SHORT_UNIT_BYTES else _CRC16.size
    if length < crc_size or length == SHORT_UNIT_BYTES:  # 128: a 126-byte content has a CRC-8
        raise CorruptError(f"unit length: expected 1..127 or more than 128, found {length}",
                           offset=length_offset, unit_index=index)  # fmt: skip
    body_offset = inp.pos
    body = inp.read_upto(length)
    if len(body) < length:
        raise TruncatedError(f"the data ends inside the unit: expected {length} bytes from "
                             f"offset {body_offset} through its CRC, found {len(body)}",
                             offset=inp.pos, unit_index=index)  # fmt: skip
    content = memoryview(body)[: -crc_size]
    kind_value = lead >> 4 & 3
    covered = bytes([lead]) + raw_length + bytes(content)
    implied = encode_uvarint(index) if kind_value == UnitKind.FRAME else b""
    if crc_size == 1:
        stored, computed = body[-1], crc8(covered, crc8(implied))
    else:
        stored = _CRC16.unpack_from(body, len(content))[0]
        computed = crc16(covered, crc16(implied))
    if stored != computed:
        where = (f" at index {index} (a frame unit's index is its position in the stream, "
                 "which its CRC covers: a unit before it may be missing)"
                 if implied else "")  # fmt: skip
        raise CorruptError(f"CRC mismatch in the unit starting at byte offset {start}{where}: "
                           f"stored {stored:0{2 * crc_size}x}, computed "
                           f"{computed:0{2 * crc_size}x} (the unit is damaged)",
                           offset=body_offset + len(content), unit_index=index)  # fmt: skip
    if kind_value not in _UNIT_KINDS:
        raise CorruptError(f"unit kind (lead byte {lead:02x}): expected 1 KEYFRAME, 2 FRAME "
                           "or 3 END, found 0", offset=start, unit_index=index)  # fmt: skip
    cur = _Cursor(content, body_offset, index, "unit")
    seq = index if implied else cur.uvarint("sequence number")
    lone = lead & (1 << _TYPE_BITS) - 1
    if lone:
        _check_type(cur, lone, 0, start)
        subs = [SubStream(SubStreamType(lone), cur.take(cur.remaining, "sub-stream payload"))]
        return Unit(UnitKind(kind_value), seq, tuple(subs))
    offset = cur.offset
    count = cur.uvarint("sub-stream count")
    if count > limits.max_substreams:
        raise OversizedError(f"unit declares {count} sub-streams, over the limit of "
                             f"{limits.max_substreams} (max_substreams)", offset=offset,
                             unit_index=index)  # fmt: skip
    if count == 1:
        raise cur.corrupt("sub-stream count 1 (a lone sub-stream's type is in the lead byte)",
                          offset=offset)
    return Unit(UnitKind(kind_value), seq, _read_packed_substreams(cur, count))


def _read_length(inp: _Input, index: int, limits: _Limits) -> tuple[int, bytes]:
    """A compact unit's length varint (and its bytes), refused over ``max_unit_size``."""
    offset = inp.pos
    length, raw_length = inp.read_uvarint("unit length", index)
    if length > limits.max_unit_size:
        raise OversizedError(f"unit declares {length} bytes, over the limit of "
                             f"{limits.max_unit_size} (max_unit_size)", offset=offset,
                             unit_index=index)  # fmt: skip
    return length, raw_length


def _read_packed_substreams(cur: _Cursor, count: int) -> tuple[SubStream, ...]:
    """``count`` sub-streams as versions 3 and 4 pack them (a type-and-length varint each
    but the last, whose type is a byte and whose payload runs to the CRC), filling ``cur``."""
    subs = []
    for i in range(count):
        offset = cur.offset
        if i < count - 1:
            head = cur.uvarint(f"sub-stream #{i} type and length")
            type_value, size = head & (1 << _TYPE_BITS) - 1, head >> _TYPE_BITS
        else:
            type_value, size = cur.u8(f"sub-stream #{i} type"), None
        _check_type(cur, type_value, i, offset)
        payload = cur.take(cur.remaining if size is None else size, f"sub-stream #{i} payload")
        subs.append(SubStream(SubStreamType(type_value), payload))
    if cur.remaining:
        raise cur.corrupt(
            f"expected the unit's CRC after its last sub-stream, found {cur.remaining} more byte(s)"
        )
    return tuple(subs)


def _check_type(cur: _Cursor, type_value: int, i: int, offset: int) -> None:
    if type_value not in _SUBSTREAM_TYPES:
        known = ", ".join(f"{m.value} {m.name}" for m in SubStreamType)
        raise cur.corrupt(f"sub-stream #{i} type: expected one of {known}, found {type_value}",
                          offset=offset)  # fmt: skip


def _parse_compact_content(lead: int, content: memoryview, base: int, index: int,
                           limits: _Limits) -> Unit:  # fmt: skip
    cur = _Cursor(content, base, index, "unit")
    kind_value = lead >> 4 & 3
    if kind_value not in _UNIT_KINDS:
        raise CorruptError(f"unit kind (lead byte {lead:02x}): expected 1 KEYFRAME, 2 FRAME "
                           "or 3 END, found 0", offset=base - 1, unit_index=index)  # fmt: skip
    seq = cur.uvarint("sequence number")
    count = lead & _COUNT_ESCAPE
    if count == _COUNT_ESCAPE:
        offset = cur.offset
        extra = cur.uvarint("sub-stream count")
        if extra > limits.max_substreams:  # (before the sum, which could be huge)
            extra = limits.max_substreams
        count += extra
        if count > limits.max_substreams:
            raise OversizedError(f"unit declares {count} or more sub-streams, over the limit "
                                 f"of {limits.max_substreams} (max_substreams)", offset=offset,
                                 unit_index=index)  # fmt: skip
    elif count > limits.max_substreams:
        raise OversizedError(f"unit declares {count} sub-streams, over the limit of "
                             f"{limits.max_substreams} (max_substreams)", offset=base - 1,
                             unit_index=index)  # fmt: skip
    return Unit(UnitKind(kind_value), seq, _read_packed_substreams(cur, count))


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
    first_seq: int = 0,
    max_unit_size: int = DEFAULT_MAX_UNIT_SIZE,
    max_substreams: int = DEFAULT_MAX_SUBSTREAMS,
) -> Iterator[tuple[Unit, int]]:
    """Parse consecutive units in ``data[offset:]``; yield ``(unit, offset just past it)``.

    Stops at the end of the data. Error offsets are indices into ``data``; ``unit_index``
    counts from ``first_seq`` (the first unit's position in its stream, which version-4 frame
    units need) at ``offset``. A partial unit at the end raises :class:`TruncatedError`
    (after the complete units before it were yielded): a caller buffering a network stream
    can keep the bytes from the last yielded offset on and retry when more arrive.
    """
    if not 0 <= offset <= len(data):
        raise BitstreamError(f"offset {offset} is outside the data (length {len(data)})")
    limits = _limits(max_unit_size, max_substreams)
    fh = io.BytesIO(bytes(data))
    fh.seek(offset)
    inp = _Input(fh, offset)
    index = first_seq
    while (unit := _read_unit(inp, index, limits)) is not None:
        yield unit, inp.pos
        index += 1
