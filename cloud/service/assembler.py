"""Reassembles units from the chunks of one stream, checking every byte on the way.

A unit travels as chunks with offsets 0, len0, len0+len1, ...; each chunk carries the CRC32
of its data and the first carries the sha256 of the whole unit. The assembler holds at most
one unit (``<= max_unit_bytes``) and refuses, with a typed error, anything out of place.

With a ``spill`` file the chunks of the unit go to that file as they arrive (memory holds
the chunk in hand only, whatever the unit's size); the complete unit is read back once to be
verified and stored.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import zlib
from dataclasses import dataclass
from pathlib import Path

from semcodec.cloud.service.errors import ChecksumError, InvalidRequestError
from semcodec.codec.bitstream import MAX_UVARINT_BYTES, SYNC_MARKER, BitstreamError, Unit, UnitKind

_SHA256_BYTES = 32
#: Bytes of a unit before its length-counted part (sync marker, length varint).
_FRAMING_BYTES = len(SYNC_MARKER) + MAX_UVARINT_BYTES


@dataclass(frozen=True)
class Chunk:
    """One chunk of one unit, as it came off the wire (transport-free).

    Attributes:
        seq: the unit's index in the stream.
        timestamp_us: capture time of the unit's frame, microseconds.
        kind: the unit kind number (``UnitKind``).
        unit_size: bytes of the whole unit.
        offset: where ``data`` starts in the unit, bytes.
        data: the chunk's bytes.
        crc32: ``zlib.crc32(data)``.
        unit_sha256: sha256 of the whole unit (first chunk; 32 bytes).
        dropped: the edge dropped this unit (no data).
    """

    seq: int
    kind: int
    unit_size: int = 0
    offset: int = 0
    data: bytes = b""
    crc32: int = 0
    unit_sha256: bytes = b""
    timestamp_us: int = 0
    dropped: bool = False


@dataclass(frozen=True)
class AssembledUnit:
    """A complete, verified unit: its exact bytes and the parsed unit."""

    seq: int
    data: bytes
    unit: Unit
    timestamp_us: int


class ChunkAssembler:
    """Collects the chunks of one unit at a time.

    Args:
        max_chunk_bytes: the largest ``data`` of one chunk.
        max_unit_bytes: the largest unit, as the bitstream counts it (kind byte through CRC;
            the sync marker and length varint come on top).
        spill: a file that holds the unit's bytes while it is received (None: memory).
    """

    def __init__(self, max_chunk_bytes: int, max_unit_bytes: int,
                 spill: Path | None = None) -> None:  # fmt: skip
        self.max_chunk_bytes = max_chunk_bytes
        self.max_unit_bytes = max_unit_bytes
        self.spill = spill
        self._first: Chunk | None = None
        self._buf = bytearray()
        self._fd: int | None = None
        self._size = 0
        self._sha = hashlib.sha256()

    @property
    def pending_bytes(self) -> int:
        """Bytes received of the unit being assembled."""
        return self._size

    @property
    def pending_seq(self) -> int | None:
        """The seq of the unit being assembled, or None between units."""
        return None if self._first is None else self._first.seq

    def add(self, chunk: Chunk) -> AssembledUnit | None:
        """Adds the next chunk of the current unit (``pending_seq``) or the first chunk of a
        new one; returns the unit once its last chunk came, else None.

        Raises:
            InvalidRequestError: a chunk out of place (offset, size, kind, seq) or a unit the
                bitstream parser refuses.
            ChecksumError: a chunk's CRC32 or the unit's sha256 does not match its bytes.
        """
        if self._first is None:
            self._start(chunk)
        else:
            self._check_continuation(chunk)
        self._check_data(chunk)
        if self._fd is not None:
            view = memoryview(chunk.data)
            while view:
                view = view[os.write(self._fd, view) :]
        else:
            self._buf += chunk.data
        self._size += len(chunk.data)
        self._sha.update(chunk.data)
        if self._size < self._first.unit_size:
            return None
        return self._finish()

    def _start(self, chunk: Chunk) -> None:
        where = f"unit seq {chunk.seq}"
        if chunk.offset != 0:
            raise InvalidRequestError(f"{where}: its first chunk has offset {chunk.offset}, "
                                      "expected 0")  # fmt: skip
        if not 0 < chunk.unit_size <= self.max_unit_bytes + _FRAMING_BYTES:
            raise InvalidRequestError(f"{where}: unit_size {chunk.unit_size} is not in "
                                      f"[1, {self.max_unit_bytes + _FRAMING_BYTES}]")  # fmt: skip
        if len(chunk.unit_sha256) != _SHA256_BYTES:
            raise InvalidRequestError(f"{where}: its first chunk must carry the unit's sha256 "
                                      f"(32 bytes), got {len(chunk.unit_sha256)}")  # fmt: skip
        if chunk.kind not in {k.value for k in UnitKind}:
            raise InvalidRequestError(f"{where}: unknown unit kind {chunk.kind}")
        self.reset()
        self._first = chunk
        if self.spill is not None:
            flags = os.O_RDWR | os.O_CREAT | os.O_TRUNC | getattr(os, "O_CLOEXEC", 0)
            self._fd = os.open(self.spill, flags, 0o600)

    def _check_continuation(self, chunk: Chunk) -> None:
        first = self._first
        if chunk.seq != first.seq:
            raise InvalidRequestError(f"a chunk of unit seq {chunk.seq} came while unit seq "
                                      f"{first.seq} is incomplete")  # fmt: skip
        if chunk.unit_size != first.unit_size or chunk.kind != first.kind:
            raise InvalidRequestError(f"unit seq {chunk.seq}: unit_size or kind changed "
                                      "between its chunks")  # fmt: skip
        if chunk.offset != self._size:
            raise InvalidRequestError(f"unit seq {chunk.seq}: chunk at offset {chunk.offset}, "
                                      f"expected {self._size}")  # fmt: skip

    def _check_data(self, chunk: Chunk) -> None:
        size = len(chunk.data)
        where = f"unit seq {chunk.seq}, chunk at offset {chunk.offset}"
        if not 0 < size <= self.max_chunk_bytes:
            raise InvalidRequestError(f"{where}: {size} data bytes, expected 1 to "
                                      f"{self.max_chunk_bytes}")  # fmt: skip
        if chunk.offset + size > self._first.unit_size:
            raise InvalidRequestError(f"{where}: runs past the unit's {self._first.unit_size} "
                                      "bytes")  # fmt: skip
        crc = zlib.crc32(chunk.data)
        if crc != chunk.crc32:
            self.reset()
            raise ChecksumError(f"{where}: CRC32 mismatch (sent {chunk.crc32:08x}, data has "
                                f"{crc:08x}): the chunk was damaged")  # fmt: skip

    def _finish(self) -> AssembledUnit:
        first, digest = self._first, self._sha.digest()
        data = os.pread(self._fd, self._size, 0) if self._fd is not None else bytes(self._buf)
        self.reset()
        if digest != first.unit_sha256:
            raise ChecksumError(f"unit seq {first.seq}: sha256 mismatch over its "
                                f"{len(data)} bytes: the unit was damaged")  # fmt: skip
        try:
            unit = Unit.from_bytes(data, seq=first.seq, max_unit_size=self.max_unit_bytes)
        except BitstreamError as exc:
            raise InvalidRequestError(f"unit seq {first.seq} is not a valid unit: {exc}") from exc
        if unit.kind != first.kind:
            raise InvalidRequestError(f"unit seq {first.seq}: sent as kind {first.kind}, the "
                                      f"unit is {unit.kind.name}")  # fmt: skip
        return AssembledUnit(first.seq, data, unit, first.timestamp_us)

    def reset(self) -> None:
        """Forgets the unit being assembled (its spill file is removed)."""
        self._first = None
        self._buf = bytearray()
        self._size = 0
        self._sha = hashlib.sha256()
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None
            with contextlib.suppress(FileNotFoundError):
                os.unlink(self.spill)
