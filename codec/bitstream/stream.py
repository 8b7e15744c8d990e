"""Whole streams: :func:`read_stream` / :func:`iter_units` (a header, then units, from bytes
or a file, with memory bounded by the limits whatever the stream claims) and
:class:`StreamWriter` / :func:`write_stream` (atomic: a partial file never has the final
name). The layout is in :mod:`codec.bitstream`."""

from __future__ import annotations

import contextlib
import io
import os
import secrets
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any, BinaryIO

from semcodec.codec.bitstream.header import StreamHeader, _read_header
from semcodec.codec.bitstream.primitives import (
    DEFAULT_MAX_HEADER_SIZE,
    DEFAULT_MAX_SUBSTREAMS,
    DEFAULT_MAX_UNIT_SIZE,
    BitstreamError,
    CorruptError,
    _check_limit,
    _Input,
)
from semcodec.codec.bitstream.units import (
    Unit,
    UnitKind,
    _Limits,
    _limits,
    _read_unit,
)


def _stream_units(inp: _Input, limits: _Limits, version: int) -> Iterator[Unit]:
    index = 0
    while True:
        unit = _read_unit(inp, index, limits, version)
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


def _units_from_path(path: Path, offset: int, limits: _Limits,
                     version: int) -> Iterator[Unit]:  # fmt: skip
    with open(path, "rb") as fh:
        fh.seek(offset)
        yield from _stream_units(_Input(fh, offset), limits, version)


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
        return header, _units_from_path(path, inp.pos, limits, header.version)
    if isinstance(source, (bytes, bytearray, memoryview)):
        fh = io.BytesIO(bytes(source))
    elif hasattr(source, "read"):
        fh = source
    else:
        raise TypeError(f"source must be a path, bytes or a binary file, got {type(source)}")
    inp = _Input(fh)
    header = _read_header(inp, max_header_size)
    return header, _stream_units(inp, limits, header.version)


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
        self._version = header.version  # the units are framed as the header's version
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
        if self._version >= 4 and unit.seq != self.units_written:
            raise BitstreamError(
                f"unit #{self.units_written} ({unit.kind.name}) has seq {unit.seq}: in a "
                "version-4 stream a unit's seq is its position (frame units do not write it)"
            )
        data = unit.to_bytes(
            max_unit_size=self._limits.max_unit_size, max_substreams=self._limits.max_substreams,
            version=self._version,
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
