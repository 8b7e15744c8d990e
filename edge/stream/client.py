"""The edge's gRPC client: streams spooled units to ``cloud-decoder serve`` until every one
is acknowledged, reconnecting with exponential backoff and resuming from the cloud's ack.

Exactly once: the cloud stores units strictly in sequence and refuses any other; after a
reconnect it says which unit it needs next (``OpenSession`` with the session id), and the
client resends from there out of its spool. A unit whose ack was lost is never stored twice.

A detect-mode stream (header setting ``mode=detect``) is opened as codec ``features``, mode
``TASK``; the detections the cloud sends back (in its feedback, and the rest with
CloseSession) go to a :class:`~edge.stream.detections.DetectionRecorder`, which tells the
cloud from which frame on it still needs them after a reconnect.
"""

from __future__ import annotations

import hashlib
import logging
import random
import threading
import time
import zlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import grpc

from semcodec.codec.bitstream import StreamHeader
from semcodec.codec.task import is_detect_stream
from semcodec.edge.stream.detections import DetectionRecorder
from semcodec.edge.stream.pacer import Pacer, Unpaced
from semcodec.edge.stream.spool import Spool, SpooledUnit
from semcodec.protos import semcodec_v1_pb2 as pb
from semcodec.protos import semcodec_v1_pb2_grpc as pb_grpc

log = logging.getLogger("semcodec.edge.stream")

#: Statuses after which the client reconnects and resumes; any other ends the stream.
#: ALREADY_EXISTS is among them: after a restart, a unit that the previous connection had
#: in flight can be stored after OpenSession read the resume point; the cloud then refuses
#: the resent copy (storing nothing) and the next OpenSession resumes after it.
RETRYABLE = frozenset({grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED,
                       grpc.StatusCode.ABORTED, grpc.StatusCode.INTERNAL,
                       grpc.StatusCode.UNKNOWN, grpc.StatusCode.CANCELLED,
                       grpc.StatusCode.RESOURCE_EXHAUSTED, grpc.StatusCode.DATA_LOSS,
                       grpc.StatusCode.ALREADY_EXISTS})  # fmt: skip
DEFAULT_CHUNK_BYTES = 256 * 1024
#: Metadata sent with every call of a stream: its spool's stream key, the same from the
#: first OpenSession on and after every restart, so a load balancer can keep the stream
#: (and so its session) on one replica (hash the header; docs/deployment.md).
AFFINITY_HEADER = "x-semcodec-stream"


class StreamError(RuntimeError):
    """The cloud refused the stream for good (bad token, unknown session, bad unit, ...).

    Attributes:
        code: the gRPC status name.
    """

    def __init__(self, code: str, details: str) -> None:
        super().__init__(f"{code}: {details}")
        self.code = code


@dataclass(frozen=True)
class ChannelSecurity:
    """How to reach the server: plaintext, TLS (``ca``) or mutual TLS (``cert``, ``key``).

    Attributes:
        ca: PEM CA the server's certificate must chain to (None: plaintext).
        cert, key: PEM client certificate chain and key (mutual TLS).
        token: bearer token sent as ``authorization`` metadata.
        server_name: the name to check the server's certificate against, when not the host.
    """

    ca: Path | None = None
    cert: Path | None = None
    key: Path | None = None
    token: str | None = None
    server_name: str | None = None

    def channel(self, target: str, extra: tuple[tuple[str, int], ...] = ()) -> grpc.Channel:
        """A channel to ``target`` with these credentials (``extra``: more channel options)."""
        options = [("grpc.max_receive_message_length", 4 << 20), *extra]
        if self.server_name:
            options.append(("grpc.ssl_target_name_override", self.server_name))
        if self.ca is None:
            return grpc.insecure_channel(target, options=options)
        creds = grpc.ssl_channel_credentials(
            root_certificates=self.ca.read_bytes(),
            private_key=self.key.read_bytes() if self.key else None,
            certificate_chain=self.cert.read_bytes() if self.cert else None,
        )
        return grpc.secure_channel(target, creds, options=options)

    def metadata(self) -> tuple[tuple[str, str], ...]:
        return (("authorization", f"Bearer {self.token}"),) if self.token else ()


@dataclass
class LinkStats:
    """What the link did (bytes are unit bytes as sent, protocol overhead excluded).

    ``bytes_sent`` counts each unit's bytes once, when it is first handed to the link (a
    resend after a reconnect is not counted again: a unit counted as handed over may never
    have reached the wire before its connection died); ``wire_bytes`` counts unit bytes as
    each chunk is handed to the link, resends included (what a rate controller measures).
    ``goodput_bps``, ``backlog_units``, ``max_backlog_units`` and ``recommended_bps`` are
    the cloud's last feedback (bits per second, units).
    """

    units_sent: int = 0
    units_resent: int = 0
    units_acked: int = 0
    bytes_sent: int = 0
    wire_bytes: int = 0
    reconnects: int = 0
    first_sent: float | None = None  # time.monotonic() the first byte was ready to send
    last_acked: float | None = None  # time.monotonic() of the last acknowledgement of a unit
    goodput_bps: float = 0.0
    backlog_units: int = 0
    max_backlog_units: int = 0
    recommended_bps: float = 0.0
    dropped: int = 0

    def kbps(self) -> float:
        """Achieved rate, kbit/s (1000 bits): the stream's unit bytes (each unit once) from
        the first byte sent until the last acknowledgement (the cloud's decode and close
        after it do not count)."""
        if self.first_sent is None:
            return 0.0
        end = self.last_acked if self.last_acked is not None else time.monotonic()
        return 8 * self.bytes_sent / 1000 / max(end - self.first_sent, 1e-3)

    def summary(self) -> str:
        return (f"units sent {self.units_sent}, acknowledged {self.units_acked}, resent "
                f"{self.units_resent}, dropped by policy {self.dropped}, achieved "
                f"{self.kbps():.1f} kbit/s")  # fmt: skip


def open_request(header: bytes, session_id: str = "", decoder: str = ""
                 ) -> pb.OpenSessionRequest:  # fmt: skip
    """The OpenSessionRequest of a stream header (every field taken from it; a detect-mode
    header is codec ``features``, mode ``TASK``) and the decoder asked for (text of
    ``cloud-decoder decode --decoder``; "": the server's)."""
    h = StreamHeader.from_bytes(header)
    detect = is_detect_stream(h)
    return pb.OpenSessionRequest(
        protocol_version=1, session_id=session_id, codec="features" if detect else "scaffold",
        mode=pb.MODE_TASK if detect else pb.MODE_GENERATIVE,
        level=h.level, width=h.width, height=h.height, fps_num=h.fps_num, fps_den=h.fps_den,
        num_frames=h.num_frames, stream_header=header, decoder=decoder,
        models=[pb.ModelRef(name=m.name, sha256=m.sha256 or "") for m in h.models],
    )  # fmt: skip


def unit_chunks(unit: SpooledUnit, chunk_bytes: int) -> Iterator[pb.StreamRequest]:
    """The StreamRequests that carry one unit (one marker for a dropped unit)."""
    if unit.dropped:
        yield pb.StreamRequest(chunk=pb.UnitChunk(seq=unit.seq, kind=unit.kind, dropped=True,
                                                  timestamp_us=unit.timestamp_us))  # fmt: skip
        return
    digest = hashlib.sha256(unit.data).digest()
    view = memoryview(unit.data)
    for offset in range(0, len(unit.data), chunk_bytes):
        data = bytes(view[offset : offset + chunk_bytes])
        yield pb.StreamRequest(chunk=pb.UnitChunk(
            seq=unit.seq, timestamp_us=unit.timestamp_us, kind=unit.kind,
            unit_size=len(unit.data), offset=offset, data=data, crc32=zlib.crc32(data),
            unit_sha256=digest if offset == 0 else b""))  # fmt: skip


class StreamClient:
    """Sends a spool's units to a server until all are acknowledged, then closes the session.

    Args:
        target: ``HOST:PORT`` of the server.
        spool: the spool (bound to the stream header) that the encoder fills.
        security: TLS, mutual TLS and token.
        pacer: a :class:`~edge.stream.pacer.TokenBucket` or :class:`~edge.stream.pacer.
            TracePacer` (default: unpaced).
        chunk_bytes: the largest chunk sent (also capped by the server's limit).
        backoff_s: first and largest wait between reconnects, seconds (doubles each time).
        max_outage_s: give up after this long without progress, seconds.
        progress: called with the stats after each acknowledgement.
        keepalive_s: HTTP/2 pings this often on a quiet connection, and a connection whose
            ping is not answered within as long is dead (a cut link is noticed in about
            twice this), seconds.
        open_timeout_s: how long opening (or resuming) a session may take, seconds.
        detections: where the detections the cloud sends back go (detect mode).
        decoder: the decoder the session asks for (``cloud-decoder decode --decoder``'s
            text; "": the server's default); the server's answer, in full, is kept in
            ``session_decoder``.
    """

    def __init__(self, target: str, spool: Spool, security: ChannelSecurity | None = None,
                 pacer: Pacer | None = None,
                 chunk_bytes: int = DEFAULT_CHUNK_BYTES,
                 backoff_s: tuple[float, float] = (0.2, 5.0), max_outage_s: float = 300.0,
                 progress: Callable[[LinkStats], None] | None = None,
                 keepalive_s: float = 10.0, open_timeout_s: float = 10.0,
                 detections: DetectionRecorder | None = None,
                 decoder: str = "") -> None:  # fmt: skip
        self.target, self.spool = target, spool
        self.decoder, self.session_decoder = decoder, ""
        self.detections = detections
        self.keepalive_s, self.open_timeout_s = keepalive_s, open_timeout_s
        self.security = security or ChannelSecurity()
        self.pacer = pacer or Unpaced()
        self.chunk_bytes, self.backoff_s, self.max_outage_s = chunk_bytes, backoff_s, max_outage_s
        self.progress = progress
        self.stats = LinkStats()
        self._high_sent = spool.acked
        self._stop = threading.Event()

    def run(self) -> pb.SessionResults:
        """Streams until every unit is acknowledged; returns the session's results.

        Raises:
            StreamError: a status that is not worth retrying, or an outage longer than
                ``max_outage_s``.
        """
        header = bytes.fromhex(self.spool.state["header"])
        wait, last_progress = self.backoff_s[0], time.monotonic()
        while True:
            acked_before = self.spool.acked
            try:
                return self._session(header)
            except grpc.RpcError as exc:
                code = exc.code()
                if code not in RETRYABLE:
                    raise StreamError(code.name, exc.details() or "") from None
                if self.spool.acked > acked_before:
                    wait, last_progress = self.backoff_s[0], time.monotonic()
                if time.monotonic() - last_progress > self.max_outage_s:
                    raise StreamError(code.name, f"no progress for {self.max_outage_s:.0f} s: "
                                      f"{exc.details()}") from None  # fmt: skip
                self.stats.reconnects += 1
                log.info("link: %s (%s); reconnecting in %.1f s", code.name, exc.details(), wait)
                time.sleep(wait * random.uniform(0.8, 1.2))
                wait = min(wait * 2, self.backoff_s[1])
            if self.spool.error is not None:
                raise self.spool.error

    def _session(self, header: bytes) -> pb.SessionResults:
        with self.security.channel(self.target, self._options()) as channel:
            stub = pb_grpc.SemanticStreamStub(channel)
            metadata = self.metadata()
            done = self._closed_results(stub, metadata)
            if done is not None:
                return done
            opened = stub.OpenSession(open_request(header, self.spool.session_id, self.decoder),
                                      metadata=metadata, timeout=self.open_timeout_s)  # fmt: skip
            self.session_decoder = opened.decoder
            self.spool.set_session(opened.session_id)
            self._acked(opened.next_seq)
            if not self.spool.finished():
                chunk = min(self.chunk_bytes, opened.max_chunk_bytes or self.chunk_bytes)
                self._stream(stub, metadata, opened.session_id, opened.next_seq, chunk)
            if self.spool.error is not None:
                raise self.spool.error
            if not self.spool.finished():
                raise _retry("the stream ended before every unit was acknowledged")
            results = stub.CloseSession(pb.CloseSessionRequest(
                session_id=opened.session_id, detections_from=self._detections_from()),
                metadata=metadata, timeout=600)  # fmt: skip
            if self.detections is not None:
                self.detections.add(results.detections)
            return results

    def _detections_from(self) -> int:
        """The first frame whose detections this client still needs (0: none wanted)."""
        return self.detections.next_frame if self.detections is not None else 0

    def metadata(self) -> tuple[tuple[str, str], ...]:
        """The metadata of every call: the token, and the stream key for affinity."""
        key = self.spool.stream_key
        return self.security.metadata() + (((AFFINITY_HEADER, key),) if key else ())

    def _closed_results(self, stub, metadata) -> pb.SessionResults | None:
        """The results of a session an earlier run of this spool already closed (running
        the same command again is harmless), else None."""
        if not (self.spool.finished() and self.spool.session_id):
            return None
        results = stub.GetResults(pb.GetResultsRequest(session_id=self.spool.session_id),
                                  metadata=metadata, timeout=self.open_timeout_s)  # fmt: skip
        if results.state in (pb.SESSION_STATE_CLOSED, pb.SESSION_STATE_FAILED):
            self.stats.units_acked = self.spool.acked
            return results
        return None

    def _options(self) -> tuple[tuple[str, int], ...]:
        """Keepalive pings (the server allows one a second) and a quick reconnect."""
        ms = max(1000, int(self.keepalive_s * 1000))
        return (("grpc.keepalive_time_ms", ms), ("grpc.keepalive_timeout_ms", ms),
                ("grpc.keepalive_permit_without_calls", 1),
                ("grpc.http2.max_pings_without_data", 0),
                ("grpc.http2.min_time_between_pings_ms", ms),  # not 5 min while blocked
                ("grpc.http2.min_ping_interval_without_data_ms", ms),
                ("grpc.initial_reconnect_backoff_ms", 200),
                ("grpc.max_reconnect_backoff_ms", 2000))  # fmt: skip

    def _stream(self, stub, metadata, session_id: str, first: int, chunk: int) -> None:
        stop = threading.Event()
        replies = stub.StreamUnits(self._requests(session_id, first, chunk, stop),
                                   metadata=metadata)  # fmt: skip
        try:
            for reply in replies:
                self._acked(reply.ack.next_seq, reply.ack.feedback)
                if self.spool.finished():
                    break
        finally:
            stop.set()
            replies.cancel()

    def _requests(self, session_id: str, seq: int, chunk: int,
                  stop: threading.Event) -> Iterator[pb.StreamRequest]:  # fmt: skip
        yield pb.StreamRequest(start=pb.StreamStart(session_id=session_id,
                                                    detections_from=self._detections_from()))
        while not stop.is_set() and self.spool.error is None:
            # the stream's first ack can be past where it started (the cloud stored a unit
            # that a killed connection had in flight): those units are gone from the spool,
            # go on after them (else get() answers None at once, for ever: a busy loop that
            # sends nothing while the cloud waits for the next unit)
            seq = max(seq, self.spool.acked)
            unit = self.spool.get(seq)
            if unit is None:
                if self.spool.done and seq >= self.spool.produced:
                    return
                continue
            messages = list(unit_chunks(unit, chunk))
            for k, message in enumerate(messages):
                if self.stats.first_sent is None:  # before the pacer's first wait
                    self.stats.first_sent = time.monotonic()
                self.pacer.consume(len(message.chunk.data))
                self.stats.wire_bytes += len(message.chunk.data)
                if k == len(messages) - 1:
                    # counted as sent *before* its last chunk goes to gRPC: gRPC asks for the
                    # next message only once this send completed and its thread ran again,
                    # which on a busy machine can be after the unit's ack came back (a unit
                    # counted after its ack was timed one unit period late by the load test)
                    self._sent(unit)
                yield message
            seq += 1

    def _sent(self, unit: SpooledUnit) -> None:
        """Unit ``unit`` is handed to gRPC (its last chunk; a resend when an earlier
        connection had handed it already)."""
        self.stats.units_sent += 1
        if unit.seq < self._high_sent:
            self.stats.units_resent += 1
        else:
            self.stats.bytes_sent += len(unit.data)
        self._high_sent = max(self._high_sent, unit.seq + 1)

    def _acked(self, next_seq: int, feedback: pb.Feedback | None = None) -> None:
        if next_seq > self.spool.acked and self.stats.first_sent is not None:
            self.stats.last_acked = time.monotonic()
        self.spool.ack(next_seq)
        self.stats.units_acked = self.spool.acked
        self.stats.dropped = self.spool.dropped_count
        if feedback is not None:
            self.stats.goodput_bps = feedback.goodput_bps
            self.stats.backlog_units = feedback.backlog_units
            self.stats.max_backlog_units = feedback.max_backlog_units
            self.stats.recommended_bps = feedback.recommended_rate_bps
            if self.detections is not None and feedback.detections:
                self.detections.add(feedback.detections)
        if self.progress is not None:
            self.progress(self.stats)


class _RetryableEnd(grpc.RpcError):
    """A stream that ended early without a status: reconnect and resume."""

    def __init__(self, details: str) -> None:
        super().__init__(details)
        self._details = details

    def code(self) -> grpc.StatusCode:
        return grpc.StatusCode.UNAVAILABLE

    def details(self) -> str:
        return self._details


def _retry(details: str) -> _RetryableEnd:
    return _RetryableEnd(details)
