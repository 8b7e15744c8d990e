"""One session of the service: its stored log, its decoder thread, and what has been
stored and decoded (:class:`Session`).

Streams write to it (a unit is acknowledged once it is written and fsynced), its
:class:`~cloud.service.decode.DecodeWorker` decodes the log behind them, at most
``max_backlog_units`` behind: a stream whose decoder lags waits (back-pressure), nothing
grows. A detect-mode session keeps the last ``DETECTIONS_KEPT`` frames' detections for
the edge (bounded memory).
"""

from __future__ import annotations

import collections
import logging
import threading
import time
from pathlib import Path

from semcodec.cloud.service.assembler import AssembledUnit
from semcodec.cloud.service.compute import ComputeBudget, FlopsMeter
from semcodec.cloud.service.decode import DecodeSettings, DecodeWorker, FairSlots, committed_decode
from semcodec.cloud.service.detect import FrameDetections, committed_frames
from semcodec.cloud.service.errors import (
    InvalidRequestError,
    QuotaError,
    ReplayError,
    SequenceGapError,
    SessionStateError,
    ShuttingDownError,
    SupersededError,
    brief_id,
)
from semcodec.cloud.service.limits import RateLimiter, ServiceLimits
from semcodec.cloud.service.live import LiveFeed, boxes_of
from semcodec.cloud.service.messages import (
    GOODPUT_WINDOW_S,
    Feedback,
    Metrics,
    Results,
    recommend_rate,
)
from semcodec.cloud.service.store import (
    DROPPED_NAME,
    SessionLog,
    append_line_durably,
    read_dropped,
)
from semcodec.codec.bitstream import StreamHeader, UnitKind
from semcodec.codec.task import is_detect_stream

_logger = logging.getLogger("semcodec.cloud.service")

#: Frames whose detections a detect-mode session keeps for the edge (the last ones decoded):
#: what a reconnecting edge, or its CloseSession, can still get.
DETECTIONS_KEPT = 256
#: The last changes of its decoder's rung a session shows (all are in its stream.json).
STEPS_SHOWN = 16


class Session:
    """One session: its log, its decoder thread and what has been stored and decoded.

    ``decode.decoder`` is the session's own decoder, in full ("" for a detect-mode stream);
    its FLOPs are metered (``meter``) into the tenant's ``budget`` (None: not counted), whose
    compute rung its decoder is held at; the outputs it writes count in the tenant's
    ``usage`` (its :class:`~cloud.service.tenants.TenantUsage`; None: not counted).
    """

    def __init__(self, tenant: str, session_id: str, state_dir: Path, out_dir: Path,
                 log: SessionLog, limits: ServiceLimits, decode: DecodeSettings,
                 metrics: Metrics, record: dict, slots: FairSlots | None = None,
                 budget: ComputeBudget | None = None, usage=None) -> None:  # fmt: skip
        self.tenant, self.session_id = tenant, session_id
        self.state_dir, self.out_dir, self.log = state_dir, out_dir, log
        self.limits, self.decode_settings, self.metrics = limits, decode, metrics
        self.record = record
        self.budget, self.meter = budget, FlopsMeter(limits.compute_window_s)
        self.usage = usage  # the tenant's TenantUsage: its outputs are counted (None: not)
        #: the rung its decoder decodes at now ("" before it opens and for detect mode)
        self.rung = ""
        #: ``{"frame", "rung", "cause"}`` of the last changes of rung (pace or compute)
        self.steps: collections.deque[dict] = collections.deque(maxlen=STEPS_SHOWN)
        self.dropped: list[int] = read_dropped(state_dir, record)
        self.next_seq = log.units + len(self.dropped)
        header = StreamHeader.from_bytes(log.header_bytes())
        self.num_frames, self.detect = header.num_frames, is_detect_stream(header)
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

    @property
    def decoder(self) -> str:
        """The session's decoder, in full ("": a detect-mode stream's detections)."""
        return self.decode_settings.decoder

    def decoder_opened(self, ladder: tuple[str, ...]) -> None:
        """The decoder is open, at the first of its ``ladder``'s rungs: its FLOPs count in
        the tenant's compute from now on."""
        self.rung = ladder[0]
        if self.budget is not None:
            self.budget.add(self.meter, len(ladder) - 1)

    def outputs_grew(self, nbytes: int) -> None:
        """The decoder wrote ``nbytes`` more outputs (negative: removed); raises
        :class:`~cloud.service.errors.QuotaError` past the tenant's output quota."""
        if self.usage is not None:
            self.usage.wrote_outputs(nbytes)

    def decoder_ran(self, flops: float) -> None:
        """The decoder ran ``flops`` for a frame (its networks: matte, restorer, refiner,
        upscaler)."""
        self.meter.add(flops)

    def compute_rung(self) -> int:
        """The rung of its ladder the tenant's compute limit holds the decoder at, at least."""
        return 0 if self.budget is None else self.budget.rung()

    def decoder_stepped(self, rung: str, frame: int, down: bool, cause: str) -> None:
        """The decoder decodes at ``rung`` from ``frame`` on (cause ``pace``: behind the
        camera or caught up; ``compute``: the tenant's compute limit)."""
        self.rung = rung
        self.steps.append({"frame": frame, "rung": rung, "cause": cause})
        self.metrics.decoder_stepped(down, cause)

    def decoder_closed(self) -> None:
        """The decoder thread ends: its FLOPs no longer count."""
        if self.budget is not None:
            self.budget.remove(self.meter)

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
