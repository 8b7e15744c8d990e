"""A session's durable state: its ``.semc`` log and a small JSON record.

``stream.semc`` is the stream exactly as the edge made it: the header, then each unit
appended and fsynced before it is acknowledged, so an acknowledged unit survives a crash.
After a crash the log may end inside a unit that was never acknowledged; :meth:`SessionLog.
recover` cuts it off. ``session.json`` (replaced atomically) holds the tenant, the state,
the units the edge dropped and, once closed, the results. ``dropped.txt`` lists the units
the edge dropped, one line each, appended and fsynced (one small write per marker, never a
rewrite of the record); ``unit.partial`` holds the chunks of the unit being received.

Everything is private to the server's user: folders 0700, files 0600.
"""

from __future__ import annotations

import contextlib
import json
import os
import secrets
from pathlib import Path
from typing import Any

from semcodec.codec.bitstream import BitstreamError, read_stream, unit_overhead_bytes

LOG_NAME = "stream.semc"
RECORD_NAME = "session.json"
DROPPED_NAME = "dropped.txt"
PARTIAL_NAME = "unit.partial"
#: Modes of what the service writes: private to the server's user.
DIR_MODE, FILE_MODE = 0o700, 0o600


def make_private_dir(path: Path) -> None:
    """Creates ``path`` and any missing parents with mode 0700 (exists: fine)."""
    missing = []
    while not path.exists():
        missing.append(path)
        path = path.parent
    for folder in reversed(missing):
        try:
            folder.mkdir(mode=DIR_MODE)
        except FileExistsError:
            continue
        os.chmod(folder, DIR_MODE)  # the umask may have taken bits away, never added


def fsync_dir(path: Path) -> None:
    """fsyncs a folder, so a file created or renamed in it survives a crash."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def write_json_atomic(path: Path, data: dict[str, Any]) -> None:
    """Writes ``data`` to ``path`` through a fsynced temporary file and a rename."""
    tmp = path.with_name(f".{path.name}.{secrets.token_hex(4)}.tmp")
    try:
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, FILE_MODE)
        with open(fd, "w", encoding="utf-8") as fh:
            json.dump(data, fh, indent=1, sort_keys=True)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    finally:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
    fsync_dir(path.parent)


def read_json(path: Path) -> dict[str, Any]:
    with open(path, encoding="utf-8") as fh:
        return json.load(fh)


def append_line_durably(path: Path, line: str) -> None:
    """Appends one line to ``path`` (created 0600) and fsyncs it."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, FILE_MODE)
    try:
        os.write(fd, (line + "\n").encode("utf-8"))
        os.fsync(fd)
    finally:
        os.close(fd)


def read_dropped(state_dir: Path, record: dict[str, Any]) -> list[int]:
    """The units a session's edge dropped: the record's list (sessions of earlier versions)
    and ``dropped.txt`` (a line cut by a crash was never acknowledged: skipped)."""
    seqs = list(record.get("dropped", []))
    try:
        text = (state_dir / DROPPED_NAME).read_text(encoding="ascii")
    except FileNotFoundError:
        return seqs
    for line in text.split("\n")[:-1]:  # the last piece has no newline: cut or empty
        if line.isdigit() and int(line) not in seqs:
            seqs.append(int(line))
    return sorted(seqs)


class SessionLog:
    """The append-only ``.semc`` log of one session.

    Attributes:
        path: the log file.
        header_size: bytes of the stream header at its start.
        units: units stored.
        unit_bytes: bytes of the stored units (framing included).
        ended: whether the last stored unit is an END unit.
    """

    def __init__(self, path: Path, header_size: int, units: int = 0, unit_bytes: int = 0,
                 ended: bool = False) -> None:  # fmt: skip
        self.path = path
        self.header_size = header_size
        self.units = units
        self.unit_bytes = unit_bytes
        self.ended = ended

    @classmethod
    def create(cls, path: Path, header: bytes) -> SessionLog:
        """A new log holding only the stream header (fsynced)."""
        flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_CLOEXEC", 0)
        fd = os.open(path, flags, FILE_MODE)
        with os.fdopen(fd, "wb") as fh:
            fh.write(header)
            fh.flush()
            os.fsync(fh.fileno())
        fsync_dir(path.parent)
        return cls(path, len(header))

    @classmethod
    def recover(cls, path: Path) -> SessionLog:
        """Opens an existing log; a damaged or cut tail (a unit never acknowledged) is cut off.

        Raises:
            BitstreamError: the header itself is unreadable.
        """
        header, units = read_stream(path)
        size = len(header.to_bytes())
        count = total = 0
        ended = False
        try:
            for unit in units:
                count += 1
                total += unit_overhead_bytes(unit, header.version) + unit.payload_bytes
                ended = unit.kind.name == "END"
        except BitstreamError:
            pass
        if os.path.getsize(path) != size + total:
            os.truncate(path, size + total)
        return cls(path, size, count, total, ended)

    def append(self, data: bytes, is_end: bool) -> None:
        """Appends one unit's bytes and fsyncs them."""
        with open(self.path, "ab") as fh:
            if fh.tell() != self.header_size + self.unit_bytes:
                fh.truncate(self.header_size + self.unit_bytes)
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        self.units += 1
        self.unit_bytes += len(data)
        self.ended = is_end

    def header_bytes(self) -> bytes:
        """The stream's header (read once: it never changes; viewers ask for it often)."""
        header = getattr(self, "_header", None)
        if header is None:
            with open(self.path, "rb") as fh:
                header = self._header = fh.read(self.header_size)
        return header


def tree_bytes(path: Path) -> int:
    """Bytes of the files under ``path`` (0 when there is none; links not followed)."""
    total = 0
    for folder, _, names in os.walk(path):
        for name in names:
            with contextlib.suppress(OSError):
                total += os.lstat(os.path.join(folder, name)).st_size
    return total


# ------------------------------------------------------------------------------ leftovers


#: A record's temporary file older than this is a killed writer's, seconds.
STALE_TMP_S = 60.0


def partial_path(state_dir: Path, generation: int) -> Path:
    """Where a stream of this process receives its unit in progress:
    ``unit.partial.<pid>-<host>.<generation>`` (whose it is, after a crash)."""
    from semcodec.cloud.outputs import HOST_TAG

    return state_dir / f"{PARTIAL_NAME}.{os.getpid()}-{HOST_TAG}.{generation}"


def _owner(name: str) -> tuple[int, str | None] | None:
    """``(pid, host tag)`` in a leftover's name (``unit.partial.PID-HOST.GEN``,
    ``.DIR.PID-HOST-XXXX.partial``), None when there is none."""
    from semcodec.cloud.outputs import owner_of

    if name.startswith(PARTIAL_NAME + "."):
        return owner_of(name[len(PARTIAL_NAME) + 1 :].split(".")[0] + "-x")
    if name.endswith(".partial") and name.startswith("."):
        return owner_of(name[: -len(".partial")].rsplit(".", 1)[-1])
    return None


def leftovers(state_dir: Path, out_dir: Path, everyone: bool) -> list[Path]:
    """What a killed server left of one session: partial units and unfinished record writes
    in ``state_dir``, hidden partial output folders beside ``out_dir``. Those of this
    machine's processes that no longer run (another machine's are its own to judge, on
    shared storage); with ``everyone``, those of every process but this one (the session is
    this server's now: nobody else writes to it)."""
    import time

    from semcodec.cloud.outputs import HOST_TAG, is_stale

    def stale(path: Path) -> bool:
        owner = _owner(path.name)
        if owner is not None and owner == (os.getpid(), HOST_TAG):
            return False
        return everyone or owner is None or is_stale(*owner)

    found = [p for p in state_dir.glob(f"{PARTIAL_NAME}*") if stale(p)]
    for tmp in state_dir.glob(f".{RECORD_NAME}.*.tmp"):  # a record being replaced
        with contextlib.suppress(OSError):
            if everyone or time.time() - tmp.lstat().st_mtime > STALE_TMP_S:
                found.append(tmp)
    found += [p for p in out_dir.parent.glob(f".{out_dir.name}.*.partial") if stale(p)]
    return [p for p in found if not p.is_symlink()]


def remove_paths(paths: list[Path]) -> int:
    """Removes files and folders (never following links); returns the bytes they held."""
    import shutil

    freed = 0
    for path in paths:
        with contextlib.suppress(OSError):
            if path.is_dir():
                freed += sum(f.lstat().st_size for f in path.rglob("*") if f.is_file())
                shutil.rmtree(path, ignore_errors=True)
            else:
                freed += path.lstat().st_size
                path.unlink()
    return freed
