"""The edge's gRPC client: streams spooled units to ``cloud-decoder serve`` until every one
is acknowledged, reconnecting with exponential backoff and resuming from the cloud's ack.

Exactly once: the cloud stores units strictly in sequence and refuses any other; after a
reconnect it says which unit it needs next (``OpenSession`` with the session id), and the
client resends from there out of its spool. A unit whose ack was lost is never stored twice.
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
from semcodec.edge.stream.pacer import TokenBucket, Unpaced
from semcodec.edge.stream.spool import Spool, SpooledUnit
from semcodec.protos import semcodec_v1_pb2 as pb
from semcodec.protos import semcodec_v1_pb2_grpc as pb_grpc

log = logging.getLogger("semcodec.edge.stream")

#: Statuses after which the client reconnects and resumes; any other ends the stream.
RETRYABLE = frozenset({grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED,
                       grpc.StatusCode.ABORTED, grpc.StatusCode.INTERNAL,
                       grpc.StatusCode.UNKNOWN, grpc.StatusCode.CANCELLED,
                       grpc.StatusCode.RESOURCE_EXHAUSTED, grpc.StatusCode.DATA_LOSS})  # fmt: skip
DEFAULT_CHUNK_BYTES = 256 * 1024


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

    def channel(self, target: str) -> grpc.Channel:
        options = [("grpc.max_receive_message_length", 4 << 20)]
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
    """What the link did (bytes are unit bytes as sent, protocol overhead excluded)."""

    units_sent: int = 0
    units_resent: int = 0
    units_acked: int = 0
    bytes_sent: int = 0
    reconnects: int = 0
    first_sent: float | None = None  # time.monotonic() of the first byte handed to the link
    goodput_bps: float = 0.0
    backlog_units: int = 0
    dropped: int = 0

    def kbps(self) -> float:
        """Achieved rate, kbit/s (1000 bits), from the first byte sent until now."""
        if self.first_sent is None:
            return 0.0
        return 8 * self.bytes_sent / 1000 / max(time.monotonic() - self.first_sent, 1e-3)

    def summary(self) -> str:
        return (f"units sent {self.units_sent}, acknowledged {self.units_acked}, resent "
                f"{self.units_resent}, dropped by policy {self.dropped}, achieved "
                f"{self.kbps():.1f} kbit/s")  # fmt: skip


def open_request(header: bytes, session_id: str = "") -> pb.OpenSessionRequest:
    """The OpenSessionRequest of a stream header (every field taken from it)."""
    h = StreamHeader.from_bytes(header)
    return pb.OpenSessionRequest(
        protocol_version=1, session_id=session_id, codec="scaffold", mode=pb.MODE_GENERATIVE,
        level=h.level, width=h.width, height=h.height, fps_num=h.fps_num, fps_den=h.fps_den,
        num_frames=h.num_frames, stream_header=header,
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
        pacer: a :class:`TokenBucket` (default: unpaced).
        chunk_bytes: the largest chunk sent (also capped by the server's limit).
        backoff_s: first and largest wait between reconnects, seconds (doubles each time).
        max_outage_s: give up after this long without progress, seconds.
        progress: called with the stats after each acknowledgement.
    """

    def __init__(self, target: str, spool: Spool, security: ChannelSecurity | None = None,
                 pacer: TokenBucket | Unpaced | None = None,
                 chunk_bytes: int = DEFAULT_CHUNK_BYTES,
                 backoff_s: tuple[float, float] = (0.2, 5.0), max_outage_s: float = 300.0,
                 progress: Callable[[LinkStats], None] | None = None) -> None:  # fmt: skip
        self.target, self.spool = target, spool
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
        with self.security.channel(self.target) as channel:
            stub = pb_grpc.SemanticStreamStub(channel)
            metadata = self.security.metadata()
            opened = stub.OpenSession(open_request(header, self.spool.session_id),
                                      metadata=metadata, timeout=30)  # fmt: skip
            self.spool.set_session(opened.session_id)
            self._acked(opened.next_seq)
            if not self.spool.finished():
                chunk = min(self.chunk_bytes, opened.max_chunk_bytes or self.chunk_bytes)
                self._stream(stub, metadata, opened.session_id, opened.next_seq, chunk)
            if self.spool.error is not None:
                raise self.spool.error
            if not self.spool.finished():
                raise _retry("the stream ended before every unit was acknowledged")
            return stub.CloseSession(pb.CloseSessionRequest(session_id=opened.session_id),
                                     metadata=metadata, timeout=600)  # fmt: skip

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
        yield pb.StreamRequest(start=pb.StreamStart(session_id=session_id))
        while not stop.is_set() and self.spool.error is None:
            unit = self.spool.get(seq)
            if unit is None:
                if self.spool.done and seq >= self.spool.produced:
                    return
                continue
            for message in unit_chunks(unit, chunk):
                self.pacer.consume(len(message.chunk.data))
                if self.stats.first_sent is None:
                    self.stats.first_sent = time.monotonic()
                yield message
            self._sent(unit)
            seq += 1

    def _sent(self, unit: SpooledUnit) -> None:
        self.stats.units_sent += 1
        self.stats.bytes_sent += len(unit.data)
        if unit.seq < self._high_sent:
            self.stats.units_resent += 1
        self._high_sent = max(self._high_sent, unit.seq + 1)

    def _acked(self, next_seq: int, feedback: pb.Feedback | None = None) -> None:
        self.spool.ack(next_seq)
        self.stats.units_acked = self.spool.acked
        self.stats.dropped = self.spool.dropped_count
        if feedback is not None:
            self.stats.goodput_bps = feedback.goodput_bps
            self.stats.backlog_units = feedback.backlog_units
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
