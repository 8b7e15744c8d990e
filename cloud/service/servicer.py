"""The gRPC servicer (``grpc.aio``): translates messages and calls the session core.

Core errors (:mod:`cloud.service.errors`) become the status they name, with their message
(capped: :func:`~cloud.service.errors.brief`). An idle call costs a coroutine, never a
thread: what blocks (disk writes and fsyncs, opening a session, the decoder's setup) runs
in a bounded thread pool, and every wait -- for the next message, for the decoder's backlog,
for a rate limit, for a close -- is awaited on the event loop, woken by the session's change
notifications (:meth:`~cloud.service.session.Session.listen`), never by polling.

Streams are timed (:class:`StreamTimeouts`): a call must send its ``StreamStart`` within
``start_s``; between units it may stay quiet for ``idle_s``; a unit in progress must bring
at least ``min_progress_bytes`` every ``progress_window_s`` (a client that trickles a byte a
second is cut off). Each ends with DEADLINE_EXCEEDED; the edge reconnects and resumes.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import math
import time
from concurrent.futures import Executor
from dataclasses import dataclass

import grpc

from semcodec.cloud.service.assembler import Chunk
from semcodec.cloud.service.auth import tenant_of
from semcodec.cloud.service.errors import (
    InvalidRequestError,
    ProgressTimeoutError,
    ServiceError,
    ShuttingDownError,
    SupersededError,
    brief,
)
from semcodec.cloud.service.limits import close_wait_s
from semcodec.cloud.service.manager import SessionManager
from semcodec.cloud.service.messages import Feedback, Metrics, OpenRequest, Results
from semcodec.protos import semcodec_v1_pb2 as pb
from semcodec.protos import semcodec_v1_pb2_grpc as pb_grpc

log = logging.getLogger("semcodec.cloud.service")
#: Refusals of one status are logged at most this often (seconds); the metrics count all.
REFUSAL_LOG_EVERY_S = 1.0

_MODES = {pb.MODE_UNSPECIFIED: "generative", pb.MODE_GENERATIVE: "generative",
          pb.MODE_TASK: "task"}  # fmt: skip
_STATES = {"open": pb.SESSION_STATE_OPEN, "closed": pb.SESSION_STATE_CLOSED,
           "failed": pb.SESSION_STATE_FAILED}  # fmt: skip


def open_request(msg: pb.OpenSessionRequest) -> OpenRequest:
    """The core's view of an OpenSessionRequest."""
    return OpenRequest(
        header=msg.stream_header, session_id=msg.session_id,
        protocol_version=msg.protocol_version, codec=msg.codec,
        mode=_MODES.get(msg.mode, f"unknown ({msg.mode})"), level=msg.level, width=msg.width,
        height=msg.height, fps_num=msg.fps_num, fps_den=msg.fps_den, num_frames=msg.num_frames,
        models=tuple((m.name, m.sha256) for m in msg.models), decoder=msg.decoder,
    )  # fmt: skip


def chunk_of(msg: pb.UnitChunk) -> Chunk:
    """The core's view of a UnitChunk."""
    return Chunk(seq=msg.seq, kind=int(msg.kind), unit_size=msg.unit_size, offset=msg.offset,
                 data=msg.data, crc32=msg.crc32, unit_sha256=msg.unit_sha256,
                 timestamp_us=msg.timestamp_us, dropped=msg.dropped)  # fmt: skip


def detections_of(frames) -> list[pb.FrameDetections]:
    """FrameDetections messages of the core's :class:`~cloud.service.detect.FrameDetections`."""
    return [pb.FrameDetections(frame=f.frame, boxes=[
        pb.Detection(x1=x1, y1=y1, x2=x2, y2=y2, score=score, track_id=track)
        for (x1, y1, x2, y2, score), track in zip(f.boxes, f.ids or (0,) * len(f.boxes),
                                                   strict=True)])
        for f in frames]  # fmt: skip


def reply_of(fb: Feedback) -> pb.StreamReply:
    feedback = pb.Feedback(goodput_bps=fb.goodput_bps, backlog_units=fb.backlog_units,
                           max_backlog_units=fb.max_backlog_units,
                           recommended_rate_bps=fb.recommended_rate_bps,
                           frames_decoded=fb.frames_decoded,
                           decode_error=fb.decode_error,
                           detections=detections_of(fb.detections))  # fmt: skip
    return pb.StreamReply(ack=pb.Ack(next_seq=fb.next_seq, feedback=feedback))


def results_of(r: Results) -> pb.SessionResults:
    return pb.SessionResults(session_id=r.session_id, state=_STATES[r.state],
                             units_stored=r.units_stored, bytes_stored=r.bytes_stored,
                             frames_decoded=r.frames_decoded, complete=r.complete,
                             error=r.error, output_dir=r.output_dir,
                             dropped_seqs=r.dropped,
                             detections=detections_of(r.detections))  # fmt: skip


@dataclass(frozen=True)
class StreamTimeouts:
    """How long a stream may take (seconds; see the module's docstring)."""

    start_s: float = 10.0
    idle_s: float = 300.0
    progress_window_s: float = 30.0
    min_progress_bytes: int = 1024


class Progress:
    """Whether a stream in the middle of a unit keeps sending: at least ``min_bytes`` every
    ``window_s`` seconds (transport-free; ``clock``: monotonic seconds)."""

    def __init__(self, window_s: float, min_bytes: int, clock=time.monotonic) -> None:
        self.window_s, self.min_bytes, self._clock = window_s, min_bytes, clock
        self._start = clock()
        self._bytes = 0

    def restart(self) -> None:
        """A new unit starts (or none is in progress)."""
        self._start, self._bytes = self._clock(), 0

    def deadline_in(self) -> float:
        """Seconds left in the current window."""
        return max(0.0, self._start + self.window_s - self._clock())

    def add(self, nbytes: int) -> None:
        """Counts ``nbytes`` received; a window that ended with enough starts a new one.

        Raises:
            ProgressTimeoutError: the window ended with less than ``min_bytes``.
        """
        self._bytes += nbytes
        if self._clock() >= self._start + self.window_s:
            self.check()
            self.restart()

    def check(self) -> None:
        if self._bytes < self.min_bytes:
            raise ProgressTimeoutError(
                f"the stream sent {self._bytes} bytes of a unit in {self.window_s:.0f} s; at "
                f"least {self.min_bytes} are required (a slower link: smaller units)")


_TIMED_OUT = object()
_STOPPED = object()


class _Reader:
    """Reads a request stream with timeouts. A read that times out is kept, not cancelled:
    cancelling the read of gRPC's request iterator (an async generator) would close it, and
    the stream would seem to have ended."""

    def __init__(self, request_iterator) -> None:
        self._messages = aiter(request_iterator)
        self._pending: asyncio.Future | None = None
        self.stop: asyncio.Future | None = None  # done: stop reading (see _Superseded)

    async def next(self, timeout_s: float, stop: asyncio.Future | None = None):
        """The next message, None at the end, ``_TIMED_OUT`` after ``timeout_s``, or
        ``_STOPPED`` as soon as ``stop`` is done."""
        if self._pending is None:
            self._pending = asyncio.ensure_future(anext(self._messages, None))
        waits = {self._pending} if stop is None else {self._pending, stop}
        await asyncio.wait(waits, timeout=max(timeout_s, 0.001),
                           return_when=asyncio.FIRST_COMPLETED)  # fmt: skip
        if not self._pending.done():
            return _STOPPED if stop is not None and stop.done() else _TIMED_OUT
        read, self._pending = self._pending, None
        return read.result()

    def close(self) -> None:
        if self._pending is not None:
            self._pending.cancel()
            self._pending = None


class _Superseded:
    """A future done as soon as a newer stream takes the receiver's session, so that a
    superseded stream ends at once (its partial unit removed) instead of when it next
    sends; woken by the session's change notifications."""

    def __init__(self, receiver) -> None:
        loop = asyncio.get_running_loop()
        self.session, self.generation = receiver.session, receiver.generation
        self.future: asyncio.Future = loop.create_future()

        def done() -> None:
            if not self.future.done():
                self.future.set_result(None)

        def wake() -> None:  # any thread
            if self.session.generation != self.generation:
                loop.call_soon_threadsafe(done)

        self._wake = wake
        self.session.listen(wake)
        wake()

    def close(self) -> None:
        self.session.unlisten(self._wake)


class SemanticStreamServicer(pb_grpc.SemanticStreamServicer):
    """``semcodec.v1.SemanticStream`` over a :class:`SessionManager`, asynchronous.

    Args:
        manager: the session core.
        metrics: counters.
        pool: the threads that run the core's blocking calls.
        timeouts: see :class:`StreamTimeouts`.
    """

    def __init__(self, manager: SessionManager, metrics: Metrics, pool: Executor,
                 timeouts: StreamTimeouts | None = None) -> None:  # fmt: skip
        self.manager = manager
        self.metrics = metrics
        self.pool = pool
        self.timeouts = timeouts or StreamTimeouts()
        self._refusals: dict[str, tuple[float, int]] = {}  # code: (last logged, skipped)

    async def _call(self, fn, *args):
        """Runs a blocking core call in the pool."""
        return await asyncio.get_running_loop().run_in_executor(
            self.pool, functools.partial(fn, *args))

    async def _abort(self, context, exc: ServiceError):
        self.metrics.error(exc.code)
        message = brief(str(exc))
        self._log_refusal(exc.code, message)
        await context.abort(grpc.StatusCode[exc.code], message)

    def _log_refusal(self, code: str, message: str) -> None:
        """Logs a refusal, at most one per status each ``REFUSAL_LOG_EVERY_S`` (a client
        that is refused a thousand times a second makes one line a second, with the count;
        the metrics count every one)."""
        now = time.monotonic()
        last, skipped = self._refusals.get(code, (-math.inf, 0))
        if now - last < REFUSAL_LOG_EVERY_S:
            self._refusals[code] = (last, skipped + 1)
            return
        self._refusals[code] = (now, 0)
        more = f" (and {skipped} more {code} since the last line)" if skipped else ""
        log.info("refused (%s): %s%s", code, message, more)

    async def OpenSession(self, request, context):
        try:
            opened = await self._call(self.manager.open, tenant_of(context),
                                      open_request(request))  # fmt: skip
        except ServiceError as exc:
            await self._abort(context, exc)
        limits = self.manager.limits
        return pb.OpenSessionResponse(session_id=opened.session_id, next_seq=opened.next_seq,
                                      resumed=opened.resumed,
                                      max_chunk_bytes=limits.max_chunk_bytes,
                                      max_unit_bytes=limits.max_unit_bytes,
                                      decoder=opened.decoder)  # fmt: skip

    async def StreamUnits(self, request_iterator, context):
        receiver, usage, superseded = None, None, None
        messages = _Reader(request_iterator)
        try:
            tenant = self.manager.tenant(tenant_of(context))
            tenant.open_stream()
            usage = tenant
            first = await self._next(messages, self.timeouts.start_s, "no StreamStart")
            if first is None or first.WhichOneof("body") != "start":
                raise InvalidRequestError("the first message of a stream must be StreamStart")
            receiver = await self._call(self.manager.attach, usage.name,
                                        first.start.session_id,
                                        first.start.detections_from)  # fmt: skip
            superseded = _Superseded(receiver)
            messages.stop = superseded.future
            yield reply_of(receiver.feedback())
            progress = Progress(self.timeouts.progress_window_s,
                                self.timeouts.min_progress_bytes)  # fmt: skip
            while True:
                if receiver.between_units:
                    message = await self._next(messages, self.timeouts.idle_s, "no unit")
                    progress.restart()
                else:
                    message = await self._next(messages, progress.deadline_in(), None)
                    if message is False:  # the window ended without a chunk
                        progress.check()
                        progress.restart()
                        continue
                if message is None:
                    return
                if message.WhichOneof("body") != "chunk":
                    raise InvalidRequestError("StreamStart may only be the first message")
                chunk = chunk_of(message.chunk)
                if not receiver.between_units:
                    progress.add(len(chunk.data))
                feedback = await self._take(receiver, chunk)
                if feedback is not None:
                    yield reply_of(feedback)
        except ServiceError as exc:
            await self._abort(context, exc)
        finally:
            messages.close()
            if superseded is not None:
                superseded.close()
            if receiver is not None:
                receiver.detach()
            if usage is not None:
                usage.close_stream()

    async def _next(self, messages: _Reader, timeout_s: float, what: str | None):
        """The next message (None: the client ended its side); after ``timeout_s`` without
        one: ProgressTimeoutError naming ``what``, or False when ``what`` is None (the read
        goes on: the next call gets its message)."""
        message = await messages.next(timeout_s, messages.stop)
        if message is _STOPPED:
            raise SupersededError("a newer stream took over this session")
        if message is not _TIMED_OUT:
            return message
        if what is None:
            return False
        raise ProgressTimeoutError(f"{what} in {timeout_s:.0f} s: the stream is ended "
                                   "(resume it when there is something to send)")

    async def _take(self, receiver, chunk):
        """One chunk into the session: the rate limits and the decoder's backlog are waited
        for here (asynchronously), the disk work runs in the pool."""
        delay = receiver.throttle_delay(len(chunk.data))
        if delay > 0:
            await asyncio.sleep(delay)
        if receiver.between_units and not chunk.dropped:
            await self._room(receiver)
        return await self._call(receiver.take, chunk)

    async def _room(self, receiver) -> None:
        """Waits until the session's decoder backlog has room for a unit (back-pressure)."""
        session, wait = receiver.session, self.manager.limits.backlog_wait_s
        if not await self._until(session, session.has_room, wait,
                                 lambda: session.check_current(receiver.generation)):  # fmt: skip
            raise ShuttingDownError(f"the decoder stayed {session.backlog} units behind for "
                                    f"{wait:.0f} s")  # fmt: skip

    async def CloseSession(self, request, context):
        try:
            tenant = tenant_of(context)
            got = await self._call(self.manager.start_close, tenant, request.session_id)
            if isinstance(got, Results):
                return results_of(got)
            wait = close_wait_s(request.timeout_s, self.manager.limits.close_timeout_s)
            if not await self._until(got, lambda: got.decode_finished, wait):
                raise ShuttingDownError(f"session {got.session_id}: the decoder did not "
                                        f"finish in {wait:.0f} s; close it again to wait "
                                        "longer")  # fmt: skip
            results = await self._call(self.manager.finish_close, got,
                                       request.detections_from)  # fmt: skip
        except ServiceError as exc:
            await self._abort(context, exc)
        return results_of(results)

    async def _until(self, session, ready, timeout_s: float, check=None) -> bool:
        """Waits on the session's change notifications (never polling) until ``ready()``, at
        most ``timeout_s``; returns ``ready()``. ``check()`` runs at each wake-up (it raises
        to end the wait)."""
        changed = asyncio.Event()
        loop = asyncio.get_running_loop()

        def wake() -> None:
            loop.call_soon_threadsafe(changed.set)

        session.listen(wake)
        deadline = time.monotonic() + timeout_s
        try:
            while True:
                changed.clear()  # before the test: a change after it wakes the wait below
                if ready():
                    return True
                if check is not None:
                    check()
                left = deadline - time.monotonic()
                if left <= 0:
                    return False
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(changed.wait(), left)
        finally:
            session.unlisten(wake)

    async def GetResults(self, request, context):
        try:
            results = await self._call(self.manager.results, tenant_of(context),
                                       request.session_id)  # fmt: skip
        except ServiceError as exc:
            await self._abort(context, exc)
        return results_of(results)
