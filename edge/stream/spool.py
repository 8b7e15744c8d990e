"""The edge's on-disk spool of units not yet acknowledged by the cloud.

A folder: ``state.json`` (the stream header, session id, how far the cloud acknowledged,
whether the stream ended) and ``units/SEQ-KIND-TIMESTAMP.unit`` files, each written
through a fsynced temporary file and a rename, deleted once acknowledged; with closed-loop
rate control, ``targets.jsonl`` records the target each run of units was encoded at. A
restarted agent reopens the folder and goes on where it stopped (units already produced are
not put again).

The spool holds at most ``max_bytes`` of units. When full, ``policy`` decides:

* ``block``: the encoder waits for acknowledgements (nothing is lost);
* ``drop-oldest``: the oldest units that were never handed to the link and are not
  keyframes are dropped, each recorded in ``dropped.jsonl`` and sent to the cloud as a
  "dropped" marker (never silent); when nothing can be dropped the encoder waits.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import secrets
import threading
import time
from dataclasses import dataclass
from pathlib import Path

POLICIES = ("block", "drop-oldest")
_UNIT_FILE = re.compile(r"^(\d{12})-(\d)-(-?\d+)\.(unit|dropped)$")
KEYFRAME_KIND = 1
TARGETS_NAME = "targets.jsonl"
END_KIND = 3


class SpoolError(RuntimeError):
    """The spool folder cannot be used (another stream's spool, unreadable state, ...)."""


@dataclass(frozen=True)
class SpooledUnit:
    """A unit waiting for its acknowledgement (``dropped``: only the marker is left)."""

    seq: int
    kind: int
    timestamp_us: int
    data: bytes
    dropped: bool = False


def _write_atomic(path: Path, data: bytes) -> None:
    tmp = path.with_name(f".{path.name}.{secrets.token_hex(4)}.tmp")
    try:
        with open(tmp, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    finally:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)


class Spool:
    """A bounded, persistent queue of units, by sequence number.

    Args:
        folder: the spool folder (created; reopened when it exists).
        max_bytes: bound on the bytes of spooled units.
        policy: ``"block"`` or ``"drop-oldest"``.
    """

    def __init__(self, folder: Path, max_bytes: int, policy: str = "block") -> None:
        if policy not in POLICIES:
            raise SpoolError(f"spool policy {policy!r}: expected one of {', '.join(POLICIES)}")
        if max_bytes < 1:
            raise SpoolError(f"spool size {max_bytes} B: must be positive")
        self.folder = Path(folder)
        self.units_dir = self.folder / "units"
        self.max_bytes, self.policy = max_bytes, policy
        self._cond = threading.Condition()
        self.units_dir.mkdir(parents=True, exist_ok=True)
        self.state = self._load_state()
        self._index: dict[int, tuple[int, int, bool, int]] = {}  # seq: kind, ts, dropped, size
        self._scan()
        self.dropped_count = sum(1 for v in self._index.values() if v[2])
        self.sending_upto = self.acked
        self.acked_bytes = 0  # bytes of units acknowledged while this object was open
        self.error: BaseException | None = None

    # -- persistence

    def _load_state(self) -> dict:
        path = self.folder / "state.json"
        if not path.exists():
            return {"header": "", "session_id": "", "acked": 0, "done": False}
        try:
            return json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError) as exc:
            raise SpoolError(f"{path}: unreadable spool state: {exc}") from exc

    def _save_state(self) -> None:
        _write_atomic(self.folder / "state.json", json.dumps(self.state).encode("utf-8"))

    def _scan(self) -> None:
        ended = False
        for path in self.units_dir.iterdir():
            m = _UNIT_FILE.match(path.name)
            if m is None:
                continue  # temporary files of a killed agent
            seq, kind = int(m.group(1)), int(m.group(2))
            ended = ended or kind == END_KIND
            if seq < self.acked:
                path.unlink(missing_ok=True)
                continue
            dropped = m.group(4) == "dropped"
            size = 0 if dropped else path.stat().st_size
            self._index[seq] = (kind, int(m.group(3)), dropped, size)
        if ended and not self.done:
            # an agent killed between spooling the END unit and recording "done": the unit
            # file is the record (the producer of a restart skips it, as already produced)
            self.state["done"] = True
            self._save_state()

    def _path(self, seq: int, kind: int, ts: int, dropped: bool) -> Path:
        return self.units_dir / f"{seq:012d}-{kind}-{ts}.{'dropped' if dropped else 'unit'}"

    # -- the stream

    @property
    def acked(self) -> int:
        """Units ``0 .. acked-1`` are acknowledged by the cloud."""
        return int(self.state["acked"])

    @property
    def produced(self) -> int:
        """Units put so far (this run and earlier runs)."""
        return max([self.acked] + [s + 1 for s in self._index])

    @property
    def done(self) -> bool:
        """Whether the END unit was put."""
        return bool(self.state["done"])

    @property
    def session_id(self) -> str:
        return str(self.state["session_id"])

    @property
    def stream_key(self) -> str:
        """A random key of this spool's stream, made once by :meth:`bind` and kept across
        restarts: load balancers route every call of the stream by it (session affinity)."""
        return str(self.state.get("stream_key", ""))

    @property
    def spooled_bytes(self) -> int:
        return sum(v[3] for v in self._index.values())

    def bind(self, header: bytes) -> None:
        """Ties the spool to a stream header; a spool of another stream is refused."""
        with self._cond:
            if self.state["header"] and self.state["header"] != header.hex():
                raise SpoolError(f"{self.folder} holds the spool of another stream: use "
                                 "another --spool folder or empty this one")  # fmt: skip
            if not self.state["header"] or not self.state.get("stream_key"):
                self.state["header"] = header.hex()
                self.state["stream_key"] = self.state.get("stream_key") or secrets.token_hex(16)
                self._save_state()

    def set_session(self, session_id: str) -> None:
        with self._cond:
            if self.state["session_id"] != session_id:
                self.state["session_id"] = session_id
                self._save_state()

    def put(self, seq: int, kind: int, data: bytes, timestamp_us: int | None = None) -> bool:
        """Spools unit ``seq`` (waiting for room, or dropping per the policy); False when it
        was already produced by an earlier run (then nothing is done)."""
        ts = int(time.time() * 1e6) if timestamp_us is None else timestamp_us
        with self._cond:
            if seq < self.produced:
                if kind == END_KIND and not self.done:  # see _scan
                    self.state["done"] = True
                    self._save_state()
                    self._cond.notify_all()
                return False
            if seq != self.produced:
                raise SpoolError(f"unit {seq} put after unit {self.produced - 1}")
            self._make_room(len(data))
            _write_atomic(self._path(seq, kind, ts, False), data)
            self._index[seq] = (kind, ts, False, len(data))
            if kind == END_KIND:
                self.state["done"] = True
                self._save_state()
            self._cond.notify_all()
        return True

    def _make_room(self, size: int) -> None:
        while self.spooled_bytes and self.spooled_bytes + size > self.max_bytes:
            if self.policy == "drop-oldest" and self._drop_one():
                continue
            if self.error is not None:
                raise SpoolError("the stream was abandoned") from self.error
            self._cond.wait(0.5)

    def _drop_one(self) -> bool:
        """Drops the oldest unsent non-keyframe unit; False when there is none."""
        for seq in sorted(self._index):
            kind, ts, dropped, _ = self._index[seq]
            if seq < self.sending_upto or dropped or kind in (KEYFRAME_KIND, END_KIND):
                continue
            self._path(seq, kind, ts, True).touch()
            self._path(seq, kind, ts, False).unlink(missing_ok=True)
            self._index[seq] = (kind, ts, True, 0)
            self.dropped_count += 1
            line = {"seq": seq, "kind": kind, "timestamp_us": ts, "dropped_at": time.time()}
            with open(self.folder / "dropped.jsonl", "a", encoding="utf-8") as fh:
                fh.write(json.dumps(line) + "\n")
            return True
        return False

    def get(self, seq: int, timeout_s: float = 0.5) -> SpooledUnit | None:
        """Unit ``seq`` for sending (waits up to ``timeout_s`` for it to be put); marks every
        unit up to it as handed to the link (never dropped from then on)."""
        with self._cond:
            if seq not in self._index and seq >= self.produced and not self.done:
                self._cond.wait(timeout_s)
            if seq not in self._index:
                return None
            kind, ts, dropped, _ = self._index[seq]
            self.sending_upto = max(self.sending_upto, seq + 1)
            data = b"" if dropped else self._path(seq, kind, ts, False).read_bytes()
            return SpooledUnit(seq, kind, ts, data, dropped)

    def ack(self, next_seq: int) -> None:
        """The cloud stored units ``0 .. next_seq-1``: forget them."""
        with self._cond:
            if next_seq <= self.acked:
                return
            for seq in [s for s in self._index if s < next_seq]:
                kind, ts, dropped, size = self._index.pop(seq)
                self._path(seq, kind, ts, dropped).unlink(missing_ok=True)
                self.acked_bytes += size
            self.state["acked"] = next_seq
            self._save_state()
            self._cond.notify_all()

    # -- the rate targets the encoder used (closed-loop control), so a restart replays them

    def record_target(self, seq: int, target_bps: float, elapsed_s: float | None = None) -> None:
        """Records (fsynced) that units from ``seq`` on were encoded at ``target_bps`` bits per
        second; ``elapsed_s``: seconds since this run's first frame (kept for the reader,
        None: left out)."""
        record = {"seq": seq, "target_bps": target_bps}
        if elapsed_s is not None:
            record["elapsed_s"] = round(elapsed_s, 3)
        line = json.dumps(record) + "\n"
        with self._cond, open(self.folder / TARGETS_NAME, "a", encoding="utf-8") as fh:
            fh.write(line)
            fh.flush()
            os.fsync(fh.fileno())

    def recorded_target(self, seq: int, pixels_per_s: float) -> float | None:
        """The target unit ``seq`` was encoded at by an earlier run, bits per second (None: not
        recorded). ``pixels_per_s`` converts the bits-per-pixel records of spools written
        before targets were kept in bit/s."""
        path = self.folder / TARGETS_NAME
        if not path.is_file():
            return None
        found = None
        for line in path.read_text(encoding="utf-8").splitlines():
            try:
                record = json.loads(line)
                if int(record["seq"]) <= seq:
                    found = (float(record["target_bps"]) if "target_bps" in record
                             else float(record["target_bpp"]) * pixels_per_s)  # fmt: skip
            except (ValueError, KeyError, TypeError):
                continue  # a line cut by a crash
        return found

    def finished(self) -> bool:
        """The END unit was put and every unit is acknowledged."""
        return self.done and self.acked >= self.produced

    def fail(self, error: BaseException) -> None:
        """The producer failed: wake everyone waiting."""
        with self._cond:
            self.error = error
            self._cond.notify_all()
