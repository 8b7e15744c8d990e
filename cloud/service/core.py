"""The transport-free session core of ``cloud-decoder serve``.

:class:`SessionManager` opens, resumes, closes and reports sessions per tenant;
:class:`StreamReceiver` takes one stream's chunks, reassembles and verifies units and stores
each in the session's log (written and fsynced: that is what an acknowledgement means);
a :class:`~cloud.service.decode.DecodeWorker` per session decodes the log behind it, at most
``max_backlog_units`` behind: a stream whose decoder lags waits (back-pressure), nothing grows.

Layout under the server's ``out`` folder::

    OUT/<tenant>/<session-id>/            the outputs, as `cloud-decoder decode` writes them
                                          (appear when the session's decode is complete)
    OUT/.sessions/<tenant>/<session-id>/  stream.semc (the stored stream), session.json

Tenants are isolated by construction: a session is looked up under its tenant only, so
another tenant's session id is simply not found.

A detect-mode stream (mode ``task``, codec ``features``; :mod:`cloud.service.detect`) is
decoded to detections; each frame's detections go to the edge in the feedback of its stream
(from the frame the edge asks for when it attaches) and the rest with CloseSession. A session
keeps the last ``DETECTIONS_KEPT`` frames' detections for that (bounded memory).
"""

from __future__ import annotations

import collections
import contextlib
import dataclasses
import logging
import math
import re
import secrets
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

from semcodec.cloud.service.assembler import AssembledUnit, Chunk, ChunkAssembler
from semcodec.cloud.service.decode import (
    DecodeSettings,
    DecodeWorker,
    FairSlots,
    committed_decode,
    load_flow_prior,
)
from semcodec.cloud.service.detect import (
    BOTTLENECK_MODEL,
    FrameDetections,
    check_unit_shape,
    committed_frames,
    find_bottleneck,
    is_bottleneck_entry,
    is_detect,
)
from semcodec.cloud.service.errors import (
    CapacityError,
    InvalidRequestError,
    MissingModelsError,
    QuotaError,
    ReplayError,
    SequenceGapError,
    SessionNotFoundError,
    SessionStateError,
    ShuttingDownError,
    SupersededError,
    UnsupportedError,
    brief_id,
)
from semcodec.cloud.service.live import LiveFeed, boxes_of
from semcodec.cloud.service.store import (
    DROPPED_NAME,
    LOG_NAME,
    RECORD_NAME,
    SessionLog,
    append_line_durably,
    leftovers,
    make_private_dir,
    partial_path,
    read_dropped,
    read_json,
    remove_paths,
    write_json_atomic,
)
from semcodec.codec.bitstream import BitstreamError, StreamHeader, UnitKind

_logger = logging.getLogger("semcodec.cloud.service")

PROTOCOL_VERSION = 1
SESSIONS_DIR = ".sessions"
_SESSION_ID = re.compile(r"^[0-9a-f]{32}$")
_TENANT = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")
#: Seconds of stored bytes (and decoded units) the goodput (and decode rate) is measured over.
GOODPUT_WINDOW_S = 5.0
#: How far below what the cloud takes its recommended rate stays (a share).
RECOMMEND_MARGIN = 0.1
#: The decode backlog (a share of its bound) above which the cloud recommends a rate.
RECOMMEND_FROM_FILL = 0.25
#: The longest one CloseSession waits for the decoder, whatever it asks, seconds.
MAX_CLOSE_WAIT_S = 600.0
#: Frames whose detections a detect-mode session keeps for the edge (the last ones decoded):
#: what a reconnecting edge, or its CloseSession, can still get.
DETECTIONS_KEPT = 256
#: The served (codec, mode) pairs: scaffold streams are generative, detect streams task.
SERVED = {"scaffold": "generative", "features": "task"}


def recommend_rate(goodput_bps: float, decode_bps: float, backlog: int, max_backlog: int,
                   margin: float = RECOMMEND_MARGIN) -> float:  # fmt: skip
    """The rate the cloud recommends to the edge, bits per second (0: no recommendation).

    While the decoder keeps up (backlog at most ``RECOMMEND_FROM_FILL`` of its bound) the
    cloud recommends nothing: the link's capacity is the edge's to measure, and the cloud
    only sees what arrives. Past that the decoder is the bottleneck, and the stream should
    cost no more than the decoder takes: ``min(goodput, decode) * (1 - margin) * (1 -
    fill / 2)``, ``fill = backlog / max_backlog`` -- below the decoder's throughput by the
    margin, and lower the fuller the backlog, so that it drains. A decoder that decoded
    nothing over the window counts as taking half the goodput.

    Args:
        goodput_bps: stored unit bits per second (the window's).
        decode_bps: decoded unit bits per second (the window's; 0: none decoded).
        backlog: units stored but not decoded; max_backlog: its bound (> 0).
    """
    if max_backlog <= 0 or backlog <= RECOMMEND_FROM_FILL * max_backlog:
        return 0.0
    fill = min(1.0, backlog / max_backlog)
    takes = decode_bps if decode_bps > 0 else 0.5 * goodput_bps
    if goodput_bps > 0:
        takes = min(takes, goodput_bps)
    return max(1.0, takes * (1 - margin) * (1 - fill / 2))


@dataclass(frozen=True)
class ServiceLimits:
    """Limits of one server.

    Attributes:
        max_sessions: open sessions at once (more: RESOURCE_EXHAUSTED).
        max_backlog_units: units stored but not yet decoded, per session (more: the stream
            waits; back-pressure reaches the edge through gRPC flow control).
        max_chunk_bytes: the largest chunk (keep below gRPC's 4 MiB message limit).
        max_unit_bytes: the largest unit (the bitstream's limit is 64 MiB).
        backlog_wait_s: how long a stream waits for the decoder before giving up, seconds.
        close_timeout_s: how long CloseSession waits for the decoder by default, seconds.
        max_session_bytes_per_s: per-session rate of unit bytes taken (0: unlimited); a
            faster stream is slowed down, never refused: its next chunk is read only once
            the session's token bucket allows (back-pressure through gRPC flow control).
        session_burst_bytes: that bucket's depth (0: one second at the rate, at least 4 KiB).
        tenant_max_sessions: open sessions per tenant (0: only ``max_sessions`` bounds them).
        tenant_max_streams: concurrent ``StreamUnits`` calls per tenant (0: no bound).
        tenant_bytes_per_s: unit bytes per second over all of a tenant's sessions, as
            ``max_session_bytes_per_s`` (back-pressure; 0: no bound).
        tenant_max_stored_bytes: bytes of stored streams per tenant, on disk (0: no bound):
            a unit that would pass it is refused (RESOURCE_EXHAUSTED) before it is read.
        session_idle_s: a session without a stream and without any request for this long
            is put to rest: its decoder stops and it leaves memory (and the session counts);
            its log stays on disk and the edge can resume it (0: never).
        retain_s: an open session at rest this long (by its files' age) is removed from disk
            (0: never). Closed sessions keep their results.
        max_markers: the most "dropped" markers one session takes (beyond the stream's
            declared frame count, every unit is refused anyway).
        decode_threads: frames decoded at once over all sessions (0: no bound).
    """

    max_sessions: int = 64
    max_backlog_units: int = 32
    max_chunk_bytes: int = 1 << 20
    max_unit_bytes: int = 64 << 20
    backlog_wait_s: float = 120.0
    close_timeout_s: float = 120.0
    max_session_bytes_per_s: float = 0.0
    session_burst_bytes: int = 0
    tenant_max_sessions: int = 0
    tenant_max_streams: int = 0
    tenant_bytes_per_s: float = 0.0
    tenant_max_stored_bytes: int = 0
    session_idle_s: float = 300.0
    retain_s: float = 7 * 86400.0
    max_markers: int = 10000
    decode_threads: int = 0

    def tenant_quota(self, name: str) -> float:
        """A per-tenant quota (0: none beyond the server's own limits)."""
        return getattr(self, f"tenant_{name}")


@dataclass(frozen=True)
class OpenRequest:
    """What an edge declares when it opens (or resumes) a session.

    ``header`` is the ``.semc`` stream header, exactly; the other fields must agree with it.
    ``models`` are ``(name, sha256 hex or "")`` pairs.
    """

    header: bytes
    session_id: str = ""
    protocol_version: int = PROTOCOL_VERSION
    codec: str = "scaffold"
    mode: str = "generative"
    level: int | None = None
    width: int | None = None
    height: int | None = None
    fps_num: int | None = None
    fps_den: int | None = None
    num_frames: int | None = None
    models: tuple[tuple[str, str], ...] | None = None


@dataclass(frozen=True)
class Opened:
    """The answer to an open: where the edge continues."""

    session_id: str
    next_seq: int
    resumed: bool


@dataclass(frozen=True)
class Feedback:
    """What the cloud tells the edge with each acknowledgement.

    Attributes:
        next_seq: units ``0 .. next_seq-1`` are durably stored (cumulative ack).
        goodput_bps: stored unit bits per second over the last ``GOODPUT_WINDOW_S``.
        backlog_units: stored but not yet decoded.
        max_backlog_units: the session's bound on that backlog.
        recommended_rate_bps: a rate to send at, bits per second (0: no recommendation;
            see :func:`recommend_rate`).
        frames_decoded: frames (units) decoded so far.
        decode_error: why decoding failed, if it did.
        detections: detect mode: the frames decoded since the stream's previous feedback.
    """

    next_seq: int
    goodput_bps: float = 0.0
    backlog_units: int = 0
    max_backlog_units: int = 0
    recommended_rate_bps: float = 0.0
    frames_decoded: int = 0
    decode_error: str = ""
    detections: tuple[FrameDetections, ...] = ()


@dataclass
class Results:
    """A session's results (see the ``SessionResults`` message); ``detections`` only in
    the answer to a CloseSession (never recorded)."""

    session_id: str
    state: str  # "open", "closed" or "failed"
    units_stored: int
    bytes_stored: int
    frames_decoded: int
    complete: bool
    error: str
    output_dir: str
    dropped: list[int] = field(default_factory=list)
    detections: list[FrameDetections] = field(default_factory=list)

    def record(self) -> dict:
        """What the session record keeps (no detections)."""
        return {k: v for k, v in vars(self).items() if k != "detections"}


class Metrics:
    """Hooks the core calls; the default does nothing (see :mod:`cloud.service.metrics`)."""

    def session_opened(self, resumed: bool) -> None: ...

    def session_closed(self, state: str) -> None: ...

    def unit_stored(self, nbytes: int) -> None: ...

    def frame_decoded(self, seconds: float) -> None: ...

    def error(self, code: str) -> None: ...

    def throttled(self, seconds: float) -> None: ...

    def detect_frame(self, status: str) -> None: ...

    def detect_unheld(self, delta: int) -> None: ...


class RateLimiter:
    """A token bucket of bytes per second that lets a chunk of any size through and makes
    the *next* one wait for the debt (so a chunk larger than the bucket never blocks for
    good). Thread-safe; ``clock`` is monotonic seconds.

    Args:
        rate: bytes per second (> 0).
        burst: the bucket's depth, bytes (> 0): what an idle session may send at once.
    """

    def __init__(self, rate: float, burst: float, clock=time.monotonic) -> None:
        if rate <= 0 or burst <= 0:
            raise ValueError(f"rate {rate} B/s and burst {burst} B must be positive")
        self.rate, self.burst, self._clock = float(rate), float(burst), clock
        self._tokens, self._at = float(burst), clock()
        self._lock = threading.Lock()

    def take(self, nbytes: int) -> float:
        """Takes ``nbytes``; returns how long to wait before reading more, seconds."""
        with self._lock:
            now = self._clock()
            self._tokens = min(self.burst, self._tokens + (now - self._at) * self.rate)
            self._at = now
            self._tokens -= nbytes
            return max(0.0, -self._tokens / self.rate)


def close_wait_s(requested: float, default: float) -> float:
    """How long a CloseSession waits for the decoder, seconds: ``requested`` (0, negative or
    not a number: ``default``), at most ``MAX_CLOSE_WAIT_S``, so that a close never holds
    its thread for good (the client closes again to wait longer)."""
    wait = requested if math.isfinite(requested) and requested > 0 else default
    return min(wait, MAX_CLOSE_WAIT_S)


def check_tenant(tenant: str) -> str:
    """``tenant`` if it is a safe folder name (letters, digits, ``_.-``; 1-64 characters)."""
    if not _TENANT.match(tenant):
        raise ValueError(f"tenant name {tenant!r}: use 1-64 letters, digits, '_', '.', '-' "
                         "(starting with a letter or digit)")  # fmt: skip
    return tenant


# ------------------------------------------------------------------------------ checks


def parse_open(request: OpenRequest) -> StreamHeader:
    """Checks an open request; returns its stream header.

    Raises:
        UnsupportedError: another protocol version, codec or mode.
        InvalidRequestError: an unreadable header, or fields that disagree with it.
    """
    if request.protocol_version != PROTOCOL_VERSION:
        raise UnsupportedError(f"protocol version {request.protocol_version} is not supported "
                               f"(this server speaks {PROTOCOL_VERSION})")  # fmt: skip
    if request.codec not in SERVED:
        raise UnsupportedError(f"codec {request.codec!r} is not served (served: "
                               f"{', '.join(SERVED)})")  # fmt: skip
    if request.mode not in SERVED.values():
        raise UnsupportedError(f"mode {request.mode!r} is not served (served: "
                               f"{', '.join(SERVED.values())})")  # fmt: skip
    if SERVED[request.codec] != request.mode:
        raise InvalidRequestError(f"codec {request.codec!r} goes with mode "
                                  f"{SERVED[request.codec]!r}, not {request.mode!r}")  # fmt: skip
    try:
        header = StreamHeader.from_bytes(request.header)
    except BitstreamError as exc:
        raise InvalidRequestError(f"the stream header is not valid: {exc}") from exc
    kind = "task" if is_detect(header) else "generative"
    if request.mode != kind:
        raise InvalidRequestError(f"mode {request.mode!r}, but the stream header is a {kind} "
                                  "stream (mode=detect: task)")  # fmt: skip
    _check_fields(request, header)
    return header


def _check_fields(request: OpenRequest, header: StreamHeader) -> None:
    declared = {"level": header.level, "width": header.width, "height": header.height,
                "fps_num": header.fps_num, "fps_den": header.fps_den,
                "num_frames": header.num_frames,
                "models": tuple((m.name, m.sha256 or "") for m in header.models)}  # fmt: skip
    for name, value in declared.items():
        sent = getattr(request, name)
        if sent is not None and sent != value:
            raise InvalidRequestError(f"{name} is {sent!r} but the stream header says {value!r}")


def missing_models(header: StreamHeader, decode: DecodeSettings) -> list[str]:
    """The header's models this server does not have at the stream's sha256, described.

    The flow prior is compared with the decoder's; a detect-mode stream's bottleneck must be
    among the shipped ones or the files of ``decode.bottleneck_dir``; every other model must
    be known to the model registry, at the same sha256 where both pin one (the edge's models
    are named so a stream says what made it).
    """
    from semcodec.codec.core.models import ModelError, model_spec, pinned_sha256
    from semcodec.codec.scaffold.codec import default_flow_prior
    from semcodec.codec.scaffold.levels import LevelConfig

    missing = []
    detect = is_detect(header)
    for entry in header.models:
        known, have = True, None
        if detect and is_bottleneck_entry(entry.name):
            if find_bottleneck(entry.sha256, decode.bottleneck_dir) is None:
                missing.append(f"{entry.name} (sha256 {entry.sha256 or 'unknown'}; looked for "
                               "among the shipped bottlenecks and --bottleneck-dir)")  # fmt: skip
            continue
        try:
            if entry.name == "flow_prior":
                config = LevelConfig.from_dict(dict(header.settings))
                have = (load_flow_prior(decode.flow_prior) or default_flow_prior(config)).sha256
            else:
                have = pinned_sha256(model_spec(entry.name))
        except (ModelError, ValueError, TypeError, OSError):
            known = False
        # a version-3 header holds a prefix of the digest: ModelEntry.matches compares
        if not known or (entry.sha256 and have and not entry.matches(have)):
            missing.append(f"{entry.name} (sha256 {entry.sha256 or 'unknown'})")
    return missing


def check_decodable(header: StreamHeader, decode: DecodeSettings) -> None:
    """Raises :class:`MissingModelsError` or :class:`InvalidRequestError` when this server
    cannot decode the stream (missing models, settings outside its limits)."""
    from semcodec.codec.scaffold.codec import ScaffoldCodecError, ScaffoldDecoder

    missing = missing_models(header, decode)
    if is_detect(header) and BOTTLENECK_MODEL not in {m.name for m in header.models}:
        missing.append(f"{BOTTLENECK_MODEL} (the detect-mode header names none)")
    if missing:
        raise MissingModelsError("this server lacks the model(s) the stream needs: "
                                 + ", ".join(missing))  # fmt: skip
    if is_detect(header):
        from semcodec.codec.task.bottleneck import BottleneckFileError

        sha = {m.name: m.sha256 for m in header.models}[BOTTLENECK_MODEL]
        try:
            check_unit_shape(header, find_bottleneck(sha, decode.bottleneck_dir))
        except (BottleneckFileError, ValueError) as exc:
            raise InvalidRequestError(f"this server cannot decode the stream: {exc}") from exc
        return
    try:
        ScaffoldDecoder(header, flow_prior=load_flow_prior(decode.flow_prior))
    except (ScaffoldCodecError, ValueError) as exc:
        raise InvalidRequestError(f"this server cannot decode the stream: {exc}") from exc


# ------------------------------------------------------------------------------ session


class Session:
    """One session: its log, its decoder thread and what has been stored and decoded."""

    def __init__(self, tenant: str, session_id: str, state_dir: Path, out_dir: Path,
                 log: SessionLog, limits: ServiceLimits, decode: DecodeSettings,
                 metrics: Metrics, record: dict,
                 slots: FairSlots | None = None) -> None:  # fmt: skip
        self.tenant, self.session_id = tenant, session_id
        self.state_dir, self.out_dir, self.log = state_dir, out_dir, log
        self.limits, self.decode_settings, self.metrics = limits, decode, metrics
        self.record = record
        self.dropped: list[int] = read_dropped(state_dir, record)
        self.next_seq = log.units + len(self.dropped)
        header = StreamHeader.from_bytes(log.header_bytes())
        self.num_frames, self.detect = header.num_frames, is_detect(header)
        self.decoded = 0
        self.generation = 0
        self.streams = 0  # StreamUnits calls attached (superseded ones until they end)
        self.last_active = time.monotonic()
        self.closing = False
        self.abandoned = False
        self.gap = False  # the decoder reached a unit the edge dropped: it decodes no more
        self.decode_state: dict | None = None  # frames, complete, error once the worker ends
        #: detect mode: the rate status the edge's last decoded unit carried (None before)
        self.edge_rate_status: str | None = None
        self._cond = threading.Condition()
        self._window: collections.deque[tuple[float, int]] = collections.deque()
        self._decoded_at: collections.deque[float] = collections.deque()
        self._detections: collections.deque[FrameDetections] = collections.deque(
            maxlen=DETECTIONS_KEPT)
        self._worker = DecodeWorker(log.path, out_dir, decode, self, slots)
        self._listeners: set = set()
        self.live = LiveFeed()  # the latest reconstructed frame, for viewers
        self.last_stored_at: float | None = None  # wall clock of the last acknowledged unit
        # (seq, the edge's timestamp) of the last units stored: the live view's latency
        self._stamps: collections.deque[tuple[int, int]] = collections.deque(maxlen=64)
        self._limiter = None  # kept across streams: reconnecting does not refill it
        if limits.max_session_bytes_per_s > 0:
            rate = limits.max_session_bytes_per_s
            self._limiter = RateLimiter(rate, limits.session_burst_bytes or max(rate, 4096))

    @property
    def ended(self) -> bool:
        return self.log.ended

    def start(self) -> None:
        """Starts the decoder, unless an earlier server already committed the outputs."""
        done = committed_decode(self.out_dir)
        if done is not None:
            self.decoded = self.log.units
            self.decode_state = {"frames": done[0], "complete": done[1], "error": None}
            return
        frames = committed_frames(self.out_dir)  # a detect-mode session's
        if frames is not None:
            declared = StreamHeader.from_bytes(self.log.header_bytes()).num_frames
            self.decoded = self.log.units
            self.decode_state = {"frames": frames, "error": None,
                                 "complete": self.ended and declared in (0, frames)}  # fmt: skip
            return
        self._worker.start()

    # -- the stream side

    def attach(self) -> int:
        """A new stream takes over the session; returns its generation (call
        :meth:`detach` when the stream ends)."""
        with self._cond:
            self._check_writable()
            self.generation += 1
            self.streams += 1
            self.last_active = time.monotonic()
            self._changed()
            return self.generation

    def detach(self) -> None:
        """A stream of this session ended."""
        with self._cond:
            self.streams = max(0, self.streams - 1)
            self.last_active = time.monotonic()

    def touch(self) -> None:
        """A request for this session: it is not idle."""
        self.last_active = time.monotonic()

    def idle_for(self, now: float) -> float | None:
        """Seconds this session has been idle (no stream, nothing to decode, not closing),
        or None while it is busy."""
        with self._cond:
            if self.streams or self.closing or (self.backlog and self.decode_state is None):
                return None
            return now - self.last_active

    # -- change notification (the asynchronous server waits on these, never polls)

    def listen(self, callback) -> None:
        """Calls ``callback()`` (from any thread) whenever the session changes: a unit
        decoded, decoding ended, a newer stream, the server stopping."""
        with self._cond:
            self._listeners.add(callback)

    def unlisten(self, callback) -> None:
        with self._cond:
            self._listeners.discard(callback)

    def _changed(self) -> None:
        """Wakes waiting threads and listeners (call with ``_cond`` held)."""
        self._cond.notify_all()
        for callback in list(self._listeners):
            callback()

    def has_room(self) -> bool:
        """Whether a unit can be stored without waiting for the decoder."""
        with self._cond:
            return self.backlog < self.limits.max_backlog_units or self.decode_state is not None

    @property
    def decode_finished(self) -> bool:
        """Decoding ended (outputs committed, failed, or found committed at start)."""
        return self.decode_state is not None

    def _check_writable(self) -> None:
        if self.closing:
            raise SessionStateError(f"session {self.session_id} is closed")
        if self.decode_state is not None and self.decode_state["error"]:
            raise InvalidRequestError(f"session {self.session_id}: the stream does not "
                                      f"decode: {self.decode_state['error']}")  # fmt: skip

    def check_seq(self, seq: int, generation: int) -> None:
        """Refuses a unit that is not the next one, or a stream that was superseded."""
        with self._cond:
            self._check_current(generation)
            if seq < self.next_seq:
                raise ReplayError(f"unit seq {seq} is already stored (next expected: "
                                  f"{self.next_seq}); resume from {self.next_seq}")  # fmt: skip
            if seq > self.next_seq:
                raise SequenceGapError(f"unit seq {seq} skips ahead: the next expected is "
                                       f"{self.next_seq}")  # fmt: skip
            if self.ended:
                raise SessionStateError(f"unit seq {seq} follows the END unit")
            if self.num_frames and seq > self.num_frames:
                last = self.num_frames
                raise SequenceGapError(f"unit seq {seq}: the stream declares {last} frames "
                                       f"(units 0 to {last}, END last)")  # fmt: skip

    def check_current(self, generation: int) -> None:
        """Raises when the stream of ``generation`` may no longer write (superseded, session
        closed or put to rest, server stopping)."""
        with self._cond:
            self._check_current(generation)

    def _check_current(self, generation: int) -> None:
        self._check_writable()
        if self.abandoned:
            raise ShuttingDownError("the session was put to rest (idle) or the server is "
                                    "stopping; resume it")  # fmt: skip
        if generation != self.generation:
            raise SupersededError("a newer stream took over this session")

    def throttle(self, nbytes: int, generation: int) -> None:
        """Holds the stream until the session's rate limit allows ``nbytes`` more (returns
        at once without a limit); a superseded stream or a stopping server ends the wait."""
        wait = self.throttle_delay(nbytes)
        if wait > 0:
            self.wait(wait, generation)

    def wait(self, seconds: float, generation: int) -> None:
        """Holds a stream for ``seconds``; a superseded stream or a stopping server ends the
        wait (with their error)."""
        until = time.monotonic() + seconds
        with self._cond:
            while (left := until - time.monotonic()) > 0:
                self._check_current(generation)
                self._cond.wait(min(left, 0.25))

    def throttle_delay(self, nbytes: int) -> float:
        """Takes ``nbytes`` from the session's rate limit; returns how long the stream should
        wait before reading more, seconds (0: at once, or no limit)."""
        if self._limiter is None:
            return 0.0
        wait = self._limiter.take(nbytes)
        if wait > 0:
            self.metrics.throttled(wait)
        return wait

    def store(self, unit: AssembledUnit, generation: int) -> None:
        """Writes and fsyncs a verified unit once the decoder's backlog has room."""
        self._wait_for_room(generation)
        with self._cond:
            self._check_current(generation)
            self.log.append(unit.data, unit.unit.kind == UnitKind.END)
            self._stamps.append((self.next_seq, unit.timestamp_us))
            self.next_seq += 1
            self.last_stored_at = time.time()
            self.last_active = now = time.monotonic()
            self._window.append((now, len(unit.data)))
            self._changed()
        self.metrics.unit_stored(len(unit.data))

    def store_dropped(self, seq: int, generation: int) -> None:
        """Records that the edge dropped unit ``seq`` (durably, before it is acknowledged)."""
        with self._cond:
            self._check_current(generation)
            if len(self.dropped) >= self.limits.max_markers:
                raise QuotaError(f"unit seq {seq}: the session already holds "
                                 f"{len(self.dropped)} dropped markers, its limit")  # fmt: skip
            # one fsynced line per marker (the record is not rewritten: no cost per marker
            # that grows with the markers before it)
            append_line_durably(self.state_dir / DROPPED_NAME, str(seq))
            self.dropped.append(seq)
            self.next_seq += 1
            self.last_active = time.monotonic()
            self._changed()

    def _wait_for_room(self, generation: int) -> None:
        deadline = time.monotonic() + self.limits.backlog_wait_s
        with self._cond:
            while self.backlog >= self.limits.max_backlog_units and self.decode_state is None:
                self._check_current(generation)
                left = deadline - time.monotonic()
                if left <= 0:
                    raise ShuttingDownError(f"the decoder stayed {self.backlog} units behind "
                                            f"for {self.limits.backlog_wait_s:.0f} s")  # fmt: skip
                self._cond.wait(min(left, 0.5))

    @property
    def backlog(self) -> int:
        """Units stored but not yet decoded (0 once decoding stopped)."""
        if self.decode_state is not None or self.gap:
            return 0
        return max(0, self.log.units - self.decoded)

    def _rates(self, now: float) -> tuple[float, float]:
        """``(goodput, decode rate)`` over the last ``GOODPUT_WINDOW_S``, bits per second
        (the decode rate: units decoded times the mean stored unit's bits)."""
        horizon = now - GOODPUT_WINDOW_S
        while self._window and self._window[0][0] < horizon:
            self._window.popleft()
        while self._decoded_at and self._decoded_at[0] < horizon:
            self._decoded_at.popleft()
        span = max(now - self._window[0][0], 1.0) if self._window else GOODPUT_WINDOW_S
        stored = sum(n for _, n in self._window)
        goodput = 8 * stored / span
        if self._window:
            unit_bytes = stored / len(self._window)
        else:
            unit_bytes = self.log.unit_bytes / max(self.log.units, 1)
        if not self._decoded_at:
            return goodput, 0.0
        decode_span = max(now - self._decoded_at[0], 1.0)
        return goodput, 8 * unit_bytes * len(self._decoded_at) / decode_span

    def feedback(self) -> Feedback:
        with self._cond:
            goodput, decode = self._rates(time.monotonic())
            backlog, limit = self.backlog, self.limits.max_backlog_units
            error = (self.decode_state or {}).get("error") or ""
            return Feedback(self.next_seq, goodput, backlog, limit,
                            recommend_rate(goodput, decode, backlog, limit),
                            self.decoded, error)  # fmt: skip

    # -- the decoder side (see cloud.service.decode.WorkSource)

    def next_work(self, decoded: int) -> str:
        with self._cond:
            while True:
                if self.abandoned:
                    return "abandon"
                if decoded >= 0 and decoded in self.dropped:
                    self.gap = True
                    self._cond.notify_all()
                    return "dropped"
                if 0 <= decoded < self.log.units and decoded < self.next_seq:
                    return "unit"
                if self.closing:
                    return "finish"
                self._cond.wait()

    def frame_decoded(self, decoded: int, seconds: float,
                      detections: FrameDetections | None = None) -> None:  # fmt: skip
        with self._cond:
            self.decoded = decoded
            if detections is not None:
                self._detections.append(detections)
            now = time.monotonic()
            self._decoded_at.append(now)
            while self._decoded_at[0] < now - GOODPUT_WINDOW_S:
                self._decoded_at.popleft()
            self._changed()
        self.metrics.frame_decoded(seconds)

    def frame_shown(self, frame, picture) -> None:
        """A reconstructed frame (``(H, W, 3)`` uint8 RGB) for the live viewers, with the
        edge's timestamp of its unit (frame N is unit N - 1)."""
        number, boxes = frame.scaffold.number, boxes_of(frame)
        with self._cond:
            stamp = next((t for seq, t in self._stamps if seq == number - 1), 0)
            if frame.scaffold.tracks is not None:  # level 1: returned over gRPC when asked
                self._detections.append(FrameDetections.of_tracks(boxes))
        self.live.publish(number, picture, boxes, stamp)

    def detections_since(self, frame: int) -> tuple[FrameDetections, ...]:
        """The kept detections of frames ``frame``, ``frame + 1``, ... (in order)."""
        with self._cond:
            return tuple(d for d in self._detections if d.frame >= frame)

    def rate_status(self, frame: int, status: str) -> None:
        """The rate status a detect-mode unit carries (``codec.task.coder.RATE_STATUSES``:
        ``ok``; ``over_budget``, the edge's budget cannot reach its agreement floor;
        ``below_floor``, no setting reaches it): each frame is counted by status, a change is
        logged, and the session counts among those the edge cannot hold while it says so."""
        self.metrics.detect_frame(status)
        previous, self.edge_rate_status = self.edge_rate_status, status
        if status == previous:
            return
        unheld, was = status != "ok", previous not in (None, "ok")
        if unheld != was:
            self.metrics.detect_unheld(1 if unheld else -1)
        if unheld or was:
            _logger.warning("session %s: frame %d: the edge's rate status is %s%s",
                            brief_id(self.session_id), frame, status, {
                                "over_budget": " (its budget cannot reach the agreement floor)",
                                "below_floor": " (no setting reaches the agreement floor)",
                            }.get(status, ""))  # fmt: skip

    def decode_done(self, frames: int, complete: bool, error: str | None) -> None:
        with self._cond:
            self.decode_state = {"frames": frames, "complete": complete, "error": error}
            self._changed()
        if self.edge_rate_status not in (None, "ok"):
            self.metrics.detect_unheld(-1)
        self.edge_rate_status = None
        if error:
            self.metrics.error("DECODE")

    # -- closing

    def close(self, timeout_s: float) -> bool:
        """Asks the decoder to finish what is stored; waits up to ``timeout_s``; True when
        it finished."""
        self.request_close()
        if self._worker.ident is not None:
            self._worker.join(timeout_s)
        return not self._worker.is_alive()

    def request_close(self) -> None:
        """Asks the decoder to finish what is stored (see :meth:`close`); does not wait."""
        with self._cond:
            self.closing = True
            self._changed()

    def abandon(self, timeout_s: float) -> None:
        """Stops the decoder without outputs (the server stops; the log stays)."""
        with self._cond:
            self.abandoned = True
            self._changed()
        if self._worker.ident is not None:
            self._worker.join(timeout_s)

    def rest_if_idle(self, now: float, idle_s: float) -> bool:
        """Stops the decoder (without outputs) when the session has been idle for
        ``idle_s``; True when it did (then :meth:`join` the decoder)."""
        with self._cond:
            idle = self.idle_for(now)
            if idle is None or idle < idle_s:
                return False
            self.abandoned = True
            self._changed()
            return True

    def join(self, timeout_s: float) -> None:
        """Waits for the decoder thread to end."""
        if self._worker.ident is not None:
            self._worker.join(timeout_s)

    def results(self) -> Results:
        with self._cond:
            state = self.decode_state or {}
            status = "failed" if state.get("error") else "closed" if state else "open"
            return Results(self.session_id, status, self.log.units, self.log.unit_bytes,
                           state.get("frames", self.decoded), bool(state.get("complete")),
                           state.get("error") or "", f"{self.tenant}/{self.session_id}",
                           list(self.dropped))  # fmt: skip


class StreamReceiver:
    """One stream of chunks into a session (what the servicer drives).

    Its feedback carries the detections of the frames decoded since its previous feedback,
    from frame ``detections_from`` on (detect mode).
    """

    def __init__(self, session: Session, generation: int, limits: ServiceLimits,
                 metrics: Metrics, detections_from: int = 1,
                 tenant: TenantUsage | None = None) -> None:  # fmt: skip
        self.session, self.generation, self.metrics = session, generation, metrics
        self.tenant = tenant
        spill = partial_path(session.state_dir, generation)
        self._assembler = ChunkAssembler(limits.max_chunk_bytes, limits.max_unit_bytes, spill)
        self._next_detection = max(1, detections_from)
        # a generative stream's tracked boxes go back only when asked (detections_from >= 1)
        self._send_detections = detections_from > 0 or session.detect
        self._detached = False
        self._reserved = 0  # the unit in progress's bytes, counted in the tenant's storage

    @property
    def between_units(self) -> bool:
        """No unit is partly received (the next chunk starts one)."""
        return self._assembler.pending_seq is None

    @property
    def pending_bytes(self) -> int:
        """Bytes received of the unit in progress."""
        return self._assembler.pending_bytes

    def detach(self) -> None:
        """The stream ended: its partial unit is forgotten (and its file removed)."""
        if not self._detached:
            self._detached = True
            self._assembler.reset()
            self._release()
            self.session.detach()

    def _release(self) -> None:
        """The unit in progress no longer holds its place in the tenant's storage."""
        if self._reserved and self.tenant is not None:
            self.tenant.release(self._reserved)
        self._reserved = 0

    def throttle_delay(self, nbytes: int) -> float:
        """Takes ``nbytes`` from the session's and the tenant's rate limits; returns how long
        to wait before reading more, seconds."""
        wait = self.session.throttle_delay(nbytes)
        if self.tenant is not None:
            wait = max(wait, self.tenant.throttle_delay(nbytes))
        return wait

    def feedback(self) -> Feedback:
        feedback = self.session.feedback()
        if not self._send_detections:
            return feedback
        detections = self.session.detections_since(self._next_detection)
        if not detections:
            return feedback
        self._next_detection = detections[-1].frame + 1
        return dataclasses.replace(feedback, detections=detections)

    def add(self, chunk: Chunk) -> Feedback | None:
        """Takes one chunk; returns the acknowledgement once a unit is stored, else None.

        Raises:
            ServiceError subclasses (see :mod:`cloud.service.errors`); nothing is stored for
            a refused unit.
        """
        wait = self.throttle_delay(len(chunk.data))
        if wait > 0:
            self.session.wait(wait, self.generation)
        return self.take(chunk)

    def take(self, chunk: Chunk) -> Feedback | None:
        """:meth:`add` without waiting for the rate limits (the caller waited
        :meth:`throttle_delay`) -- nor for the decoder when it checked
        :meth:`Session.has_room` before the unit's first chunk.

        Every chunk is checked against the session first: a superseded stream (or one whose
        session closed or was put to rest) writes nothing more, and its partial unit is
        removed when it ends. A unit's declared size is counted in the tenant's stored bytes
        from its first chunk (its partial file included) until it is stored or dropped.
        """
        if self._assembler.pending_seq is None:
            self.session.check_seq(chunk.seq, self.generation)
            if chunk.dropped:
                self.session.store_dropped(chunk.seq, self.generation)
                return self.feedback()
            if self.tenant is not None:
                self.tenant.reserve(chunk.unit_size)
                self._reserved = chunk.unit_size
        else:
            self.session.check_current(self.generation)
        try:
            unit = self._assembler.add(chunk)
            if unit is None:
                return None
            self.session.store(unit, self.generation)
        except BaseException:
            if self._assembler.pending_seq is None:  # the unit was refused or forgotten
                self._release()
            raise
        self._release()
        if self.tenant is not None:
            self.tenant.stored(len(unit.data))
        return self.feedback()


# ------------------------------------------------------------------------------ tenants


class TenantUsage:
    """One tenant's use of its quotas (see :class:`ServiceLimits`); thread-safe.

    Args:
        name: the tenant.
        limits: the server's limits (the ``tenant_*`` quotas).
        sessions_dir: ``OUT/.sessions/<tenant>``, whose stored streams count as its storage.
        quotas: this tenant's own quotas, overriding ``limits`` (``max_sessions``,
            ``max_streams``, ``max_kbps``, ``max_stored_mib``; from the tokens file).
    """

    def __init__(self, name: str, limits: ServiceLimits, sessions_dir: Path,
                 quotas: dict[str, float] | None = None) -> None:  # fmt: skip
        self.name, self.limits, self.sessions_dir = name, limits, sessions_dir
        quotas = quotas or {}
        self.max_sessions = int(quotas.get("max_sessions", limits.tenant_max_sessions))
        self.max_streams = int(quotas.get("max_streams", limits.tenant_max_streams))
        self.max_stored_bytes = int(quotas["max_stored_mib"] * (1 << 20)
                                    if "max_stored_mib" in quotas
                                    else limits.tenant_max_stored_bytes)  # fmt: skip
        rate = (quotas["max_kbps"] * 1000 / 8 if "max_kbps" in quotas
                else limits.tenant_bytes_per_s)  # fmt: skip
        self.streams = 0
        self.reserved = 0  # units being received: their declared sizes
        self._stored: int | None = None  # read from disk on first use
        self._lock = threading.Lock()
        self._limiter = RateLimiter(rate, max(rate, 4096)) if rate > 0 else None

    def open_stream(self) -> None:
        """Counts a new ``StreamUnits`` call (call :meth:`close_stream` when it ends).

        Raises:
            QuotaError: the tenant holds ``tenant_max_streams`` streams already.
        """
        with self._lock:
            quota = self.max_streams
            if quota and self.streams >= quota:
                raise QuotaError(f"tenant {self.name} has {self.streams} streams open, its "
                                 "quota (tenant_max_streams): end one first")  # fmt: skip
            self.streams += 1

    def close_stream(self) -> None:
        with self._lock:
            self.streams = max(0, self.streams - 1)

    def throttle_delay(self, nbytes: int) -> float:
        """Takes ``nbytes`` from the tenant's rate (``tenant_bytes_per_s``); returns how
        long to wait, seconds."""
        return 0.0 if self._limiter is None else self._limiter.take(nbytes)

    @property
    def stored_bytes(self) -> int:
        """Bytes of the tenant's stored streams on disk, and of the units being received
        (their declared sizes)."""
        with self._lock:
            if self._stored is None:
                self._stored = sum(p.stat().st_size
                                   for p in self.sessions_dir.glob(f"*/{LOG_NAME}"))  # fmt: skip
            return self._stored + self.reserved

    def reserve(self, unit_bytes: int) -> None:
        """Counts a unit whose first chunk came (its partial file grows to ``unit_bytes``)
        in the tenant's storage; call :meth:`release` once it is stored or forgotten.

        Raises:
            QuotaError: it would pass ``tenant_max_stored_bytes``.
        """
        held = self.stored_bytes  # reads the disk once, outside the lock
        with self._lock:
            quota = self.max_stored_bytes
            if quota and self._stored + self.reserved + unit_bytes > quota:
                raise QuotaError(f"tenant {self.name} stores {held} bytes (units being "
                                 f"received included); a unit of {unit_bytes} would pass its "
                                 f"quota (tenant_max_stored_bytes, {quota}): close or remove "
                                 "sessions first")  # fmt: skip
            self.reserved += unit_bytes

    def release(self, unit_bytes: int) -> None:
        """A unit counted by :meth:`reserve` is stored (then :meth:`stored` counts it) or
        forgotten."""
        with self._lock:
            self.reserved = max(0, self.reserved - unit_bytes)

    def stored(self, nbytes: int) -> None:
        """``nbytes`` more are stored (negative: removed)."""
        with self._lock:
            if self._stored is not None:
                self._stored = max(0, self._stored + nbytes)


# ------------------------------------------------------------------------------ views


@dataclass(frozen=True)
class SessionView:
    """What a viewer is shown of a session (the dashboard's row, the JSON API's object).

    Attributes:
        session_id, state: ``streaming`` (a stream attached), ``open``, ``at rest`` (open,
            out of memory), ``closed`` or ``failed``.
        mode, level: ``generative`` (level 0-3) or ``task``.
        width, height, fps: the stream's frames.
        frames_decoded, units_stored: so far.
        kbps: stored unit bits per second over the last ``GOODPUT_WINDOW_S`` (0 at rest).
        last_ack: wall-clock time of the last stored unit (None: none yet, or at rest).
        decoder: the reconstructor's name; live: frames can be watched now.
    """

    session_id: str
    state: str
    mode: str
    level: int
    width: int
    height: int
    fps: float
    frames_decoded: int
    units_stored: int
    kbps: float
    last_ack: float | None
    decoder: str
    live: bool


def _header_fields(header: StreamHeader) -> dict:
    return {"mode": "task" if is_detect(header) else "generative", "level": header.level,
            "width": header.width, "height": header.height,
            "fps": round(header.fps_num / max(header.fps_den, 1), 3)}  # fmt: skip


def view_of(session: Session, decoder: str) -> SessionView:
    """A held session's view."""
    header = StreamHeader.from_bytes(session.log.header_bytes())
    results, feedback = session.results(), session.feedback()
    state = "streaming" if session.streams else results.state
    return SessionView(session.session_id, state, frames_decoded=results.frames_decoded,
                       units_stored=results.units_stored,
                       kbps=round(feedback.goodput_bps / 1000, 2),
                       last_ack=session.last_stored_at, decoder=decoder, live=True,
                       **_header_fields(header))  # fmt: skip


def stored_view(state_dir: Path, decoder: str) -> SessionView:
    """The view of a session on disk only (at rest, closed or failed)."""
    from semcodec.codec.bitstream import read_stream

    record = read_json(state_dir / RECORD_NAME)
    results = record.get("results") or {}
    with open(state_dir / LOG_NAME, "rb") as fh:
        header = read_stream(fh)[0]
    state = record.get("state", "open")
    return SessionView(state_dir.name, "at rest" if state == "open" else state,
                       frames_decoded=int(results.get("frames_decoded", 0)),
                       units_stored=int(results.get("units_stored", 0)), kbps=0.0,
                       last_ack=None, decoder=decoder, live=False,
                       **_header_fields(header))  # fmt: skip


def _mtime(path: Path) -> float:
    try:
        return path.stat().st_mtime
    except OSError:
        return 0.0


# ------------------------------------------------------------------------------ manager


def _expired(state_dir: Path, now: float, retain_s: float) -> bool:
    """Whether a session's state folder has been at rest longer than ``retain_s`` (by its
    files' age; an unreadable record counts as not expired)."""
    try:
        read_json(state_dir / RECORD_NAME)
        age = now - max(p.stat().st_mtime for p in state_dir.iterdir())
    except (OSError, ValueError):
        return False
    return age > retain_s



class SessionManager:
    """All sessions of one server, by tenant.

    Args:
        out_root: the server's output folder.
        limits: see :class:`ServiceLimits`.
        decode: how sessions are decoded.
        metrics: hooks for counters (default: none).
        tenant_quotas: quotas of named tenants, overriding ``limits``' ``tenant_*`` (see
            :class:`TenantUsage`).
    """

    def __init__(self, out_root: Path, limits: ServiceLimits | None = None,
                 decode: DecodeSettings | None = None, metrics: Metrics | None = None,
                 tenant_quotas: dict[str, dict[str, float]] | None = None):  # fmt: skip
        self.out_root = Path(out_root)
        self.tenant_quotas = tenant_quotas or {}
        self.limits = limits or ServiceLimits()
        self.decode = decode or DecodeSettings()
        self.metrics = metrics or Metrics()
        self._sessions: dict[tuple[str, str], Session] = {}
        self._tenants: dict[str, TenantUsage] = {}
        self._slots = (FairSlots(self.limits.decode_threads)
                       if self.limits.decode_threads > 0 else None)  # fmt: skip
        self._lock = threading.RLock()
        self._draining = False

    def tenant(self, tenant: str) -> TenantUsage:
        """The quota use of ``tenant`` (a valid tenant name)."""
        check_tenant(tenant)
        with self._lock:
            usage = self._tenants.get(tenant)
            if usage is None:
                usage = TenantUsage(tenant, self.limits, self.out_root / SESSIONS_DIR / tenant,
                                    self.tenant_quotas.get(tenant))  # fmt: skip
                self._tenants[tenant] = usage
            return usage

    # -- lookup

    def _paths(self, tenant: str, session_id: str) -> tuple[Path, Path]:
        return (self.out_root / SESSIONS_DIR / tenant / session_id,
                self.out_root / tenant / session_id)  # fmt: skip

    def _find(self, tenant: str, session_id: str) -> Session:
        """The session, loaded from disk after a restart; NOT_FOUND for any other tenant's."""
        check_tenant(tenant)
        if not _SESSION_ID.match(session_id):
            raise SessionNotFoundError(f"no session {brief_id(session_id)}")
        with self._lock:
            session = self._sessions.get((tenant, session_id))
            if session is not None:
                session.touch()
                return session
            state_dir, out_dir = self._paths(tenant, session_id)
            if not (state_dir / RECORD_NAME).is_file():
                raise SessionNotFoundError(f"no session {session_id}")
            record = read_json(state_dir / RECORD_NAME)
            if record.get("state") != "open":
                raise SessionStateError(f"session {session_id} is {record.get('state')}")
            self._check_capacity(tenant)
            # the session is this server's now: what earlier servers left of it goes
            remove_paths(leftovers(state_dir, out_dir, everyone=True))
            session = Session(tenant, session_id, state_dir, out_dir,
                              SessionLog.recover(state_dir / LOG_NAME), self.limits,
                              self.decode, self.metrics, record, self._slots)  # fmt: skip
            self._sessions[(tenant, session_id)] = session
        session.start()
        return session

    def _check_capacity(self, tenant: str) -> None:
        """Room for one more session of ``tenant`` (call with ``_lock`` held)."""
        if self._draining:
            raise ShuttingDownError("the server is stopping: it takes no new sessions")
        quota = self.tenant(tenant).max_sessions
        if quota:
            held = sum(1 for owner, _ in self._sessions if owner == tenant)
            if held >= quota:
                raise QuotaError(f"tenant {tenant} holds {held} sessions, its quota "
                                 "(tenant_max_sessions): close one, or wait for idle ones to "
                                 "be put to rest (session_idle_s)")  # fmt: skip
        if len(self._sessions) >= self.limits.max_sessions:
            raise CapacityError(f"the server holds {len(self._sessions)} sessions, its limit "
                                "(--max-sessions): retry later")  # fmt: skip

    @property
    def active(self) -> int:
        """Sessions held open."""
        return len(self._sessions)

    def total_backlog(self) -> int:
        """Units stored but not decoded, over all sessions."""
        with self._lock:
            sessions = list(self._sessions.values())
        return sum(s.backlog for s in sessions)

    # -- requests

    def open(self, tenant: str, request: OpenRequest) -> Opened:
        """Opens a new session, or resumes ``request.session_id``."""
        header = parse_open(request)
        if request.session_id:
            session = self._find(tenant, request.session_id)
            if session.log.header_bytes() != request.header:
                raise InvalidRequestError(f"the stream header differs from the one session "
                                          f"{session.session_id} was opened with")  # fmt: skip
            self.metrics.session_opened(True)
            return Opened(session.session_id, session.next_seq, True)
        check_decodable(header, self.decode)
        session = self._create(check_tenant(tenant), request.header)
        self.metrics.session_opened(False)
        return Opened(session.session_id, 0, False)

    def _create(self, tenant: str, header: bytes) -> Session:
        with self._lock:
            self._check_capacity(tenant)
            session_id = secrets.token_hex(16)
            state_dir, out_dir = self._paths(tenant, session_id)
            make_private_dir(state_dir.parent)
            state_dir.mkdir(mode=0o700)
            log = SessionLog.create(state_dir / LOG_NAME, header)
            record = {"session_id": session_id, "tenant": tenant, "state": "open",
                      "created": time.time(), "dropped": []}  # fmt: skip
            write_json_atomic(state_dir / RECORD_NAME, record)
            session = Session(tenant, session_id, state_dir, out_dir, log, self.limits,
                              self.decode, self.metrics, record, self._slots)  # fmt: skip
            self._sessions[(tenant, session_id)] = session
        session.start()
        return session

    def attach(self, tenant: str, session_id: str, detections_from: int = 0) -> StreamReceiver:
        """A stream for the session (a newer stream supersedes an older one); its feedback
        carries detections from frame ``detections_from`` on (detect mode; 0: from the
        first), or a generative stream's tracked boxes (level 1; only when asked:
        ``detections_from`` >= 1)."""
        if self._draining:
            raise ShuttingDownError("the server is stopping; resume the session later")
        session = self._find(tenant, session_id)
        return StreamReceiver(session, session.attach(), self.limits, self.metrics,
                              detections_from, self.tenant(tenant))  # fmt: skip

    def close(self, tenant: str, session_id: str, timeout_s: float = 0.0,
              detections_from: int = 0) -> Results:  # fmt: skip
        """Ends a session: the decoder finishes what is stored; returns the results, with
        the kept detections from frame ``detections_from`` on (detect mode; 0: the first;
        a generative stream's tracked boxes only when asked, ``detections_from`` >= 1).

        A closed session is final: its results stay readable, it cannot be resumed.
        """
        session = self.start_close(tenant, session_id)
        if isinstance(session, Results):
            return session
        wait = close_wait_s(timeout_s, self.limits.close_timeout_s)
        if not session.close(wait):
            raise ShuttingDownError(f"session {session_id}: the decoder did not finish in "
                                    f"{wait:.0f} s; close it again to wait longer")  # fmt: skip
        return self.finish_close(session, detections_from)

    def start_close(self, tenant: str, session_id: str) -> Session | Results:
        """First half of :meth:`close`: asks the session's decoder to finish (without
        waiting); the results at once when the session is closed already."""
        try:
            session = self._find(tenant, session_id)
        except SessionStateError:
            return self.results(tenant, session_id)
        session.request_close()
        return session

    def finish_close(self, session: Session, detections_from: int = 0) -> Results:
        """Second half of :meth:`close`, once ``session.decode_finished`` (or its decoder
        thread ended): records the results and forgets the session."""
        tenant, session_id = session.tenant, session.session_id
        session.close(10.0)  # the decoder thread ends right after it reports
        results = session.results()
        session.record.update(state=results.state, results=results.record())
        write_json_atomic(session.state_dir / RECORD_NAME, session.record)
        with self._lock:
            self._sessions.pop((tenant, session_id), None)
        self.metrics.session_closed(results.state)
        if detections_from > 0 or session.detect:
            results.detections = list(session.detections_since(max(1, detections_from)))
        return results

    def results(self, tenant: str, session_id: str) -> Results:
        """The results so far (never waits)."""
        check_tenant(tenant)
        if not _SESSION_ID.match(session_id):
            raise SessionNotFoundError(f"no session {brief_id(session_id)}")
        with self._lock:
            session = self._sessions.get((tenant, session_id))
        if session is not None:
            session.touch()
            return session.results()
        state_dir, _ = self._paths(tenant, session_id)
        if not (state_dir / RECORD_NAME).is_file():
            raise SessionNotFoundError(f"no session {session_id}")
        record = read_json(state_dir / RECORD_NAME)
        if "results" in record:
            return Results(**record["results"])
        log = SessionLog.recover(state_dir / LOG_NAME)
        return Results(session_id, "open", log.units, log.unit_bytes, 0, False, "",
                       f"{tenant}/{session_id}", read_dropped(state_dir, record))  # fmt: skip

    # -- viewers (read only: a viewer never loads, resumes or keeps a session)

    def held(self, tenant: str, session_id: str) -> Session:
        """The session of ``tenant`` held in memory (open, decoding) for a viewer.

        Raises:
            SessionNotFoundError: no such session of this tenant in memory (another tenant's
                sessions are not found either).
        """
        check_tenant(tenant)
        with self._lock:
            session = self._sessions.get((tenant, session_id))
        if session is None:
            raise SessionNotFoundError(f"no live session {brief_id(session_id)}")
        return session

    def listing(self, tenant: str, limit: int = 100) -> list[SessionView]:
        """The tenant's sessions, those held first then the newest on disk, at most
        ``limit``."""
        check_tenant(tenant)
        with self._lock:
            held = [s for (owner, _), s in self._sessions.items() if owner == tenant]
        views = [view_of(s, self.decode.decoder) for s in held]
        seen = {v.session_id for v in views}
        folder = self.out_root / SESSIONS_DIR / tenant
        stored = sorted((p for p in folder.glob("*") if _SESSION_ID.match(p.name)
                         and p.name not in seen and not p.is_symlink()),
                        key=_mtime, reverse=True)  # fmt: skip
        for state_dir in stored[: max(0, limit - len(views))]:
            with contextlib.suppress(OSError, ValueError, BitstreamError):
                views.append(stored_view(state_dir, self.decode.decoder))
        return views[:limit]


    def reap(self, now: float | None = None, timeout_s: float = 10.0) -> list[str]:
        """Puts to rest the sessions idle for ``session_idle_s`` (see :class:`ServiceLimits`):
        their decoders stop and they leave memory; their logs stay for a resume. Returns
        their ids."""
        idle_s = self.limits.session_idle_s
        if idle_s <= 0:
            return []
        now = time.monotonic() if now is None else now
        rested = []
        with self._lock:
            for key, session in list(self._sessions.items()):
                if session.rest_if_idle(now, idle_s):
                    del self._sessions[key]
                    rested.append(session)
        for session in rested:
            session.join(timeout_s)
            self.metrics.session_closed("rested")
        return [s.session_id for s in rested]

    def sweep(self, now: float | None = None) -> list[Path]:
        """Removes the sessions at rest for longer than ``retain_s`` (by the age of their
        files): open sessions put to rest, and closed or failed ones, whose outputs go with
        them; a tenant's folders go once empty. Returns the state folders removed."""
        retain = self.limits.retain_s
        if retain <= 0:
            return []
        now = time.time() if now is None else now
        removed = []
        for state_dir in (self.out_root / SESSIONS_DIR).glob("*/*"):
            tenant, session_id = state_dir.parent.name, state_dir.name
            if not _SESSION_ID.match(session_id) or state_dir.is_symlink():
                continue
            with self._lock:
                if (tenant, session_id) in self._sessions or not _expired(state_dir, now, retain):
                    continue
                size = sum(p.stat().st_size for p in state_dir.glob(LOG_NAME))
                out_dir = self._paths(tenant, session_id)[1]
                remove_paths([state_dir, *leftovers(state_dir, out_dir, everyone=False)]
                             + ([out_dir] if out_dir.is_dir() else []))  # fmt: skip
                for folder in (state_dir.parent, out_dir.parent):
                    with contextlib.suppress(OSError):
                        folder.rmdir()  # only when empty
            usage = self._tenants.get(tenant)
            if usage is not None:
                usage.stored(-size)
            removed.append(state_dir)
        return removed

    def clean_start(self) -> list[Path]:
        """At start-up: removes what killed servers left (partial units, unfinished record
        writes, hidden partial output folders) of processes that no longer run. Returns what
        it removed."""
        found = []
        for state_dir in (self.out_root / SESSIONS_DIR).glob("*/*"):
            tenant, session_id = state_dir.parent.name, state_dir.name
            if _SESSION_ID.match(session_id) and not state_dir.is_symlink():
                out_dir = self._paths(tenant, session_id)[1]
                found += leftovers(state_dir, out_dir, everyone=False)
        remove_paths(found)
        return found

    # -- stopping

    def drain(self) -> None:
        """Takes no new sessions or streams from now on."""
        self._draining = True

    def shutdown(self, timeout_s: float = 10.0) -> None:
        """Stops every decoder; open sessions keep their logs for a resume after a restart."""
        self.drain()
        with self._lock:
            sessions = list(self._sessions.values())
            self._sessions.clear()
        for session in sessions:
            session.abandon(timeout_s)
