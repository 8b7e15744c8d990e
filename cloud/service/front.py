"""What bounds the HTTP front door's connections (aiohttp), so that strangers on its port
can neither hold it nor take the gRPC port's descriptors.

aiohttp's own knobs do what they can: ``keepalive_timeout`` (a connection waits that long
for its next request's head, the first one included, and is closed), ``lingering_time``
(a body left unread after the answer is read for that long at most), the parser's limits on
header lines, fields and URLs (400). What aiohttp has no knob for is here, thinly:

* :class:`ConnectionGate` and :class:`GatedSite`: the site's protocol factory is wrapped, so
  that connections are counted in all and per peer address: past a cap a connection gets a
  fixed ``503`` and is closed before any parsing; and one that has not sent a complete
  request head within ``header_s`` of opening is closed (a middleware of the front door
  calls :meth:`ConnectionGate.seen` on each request). The site reuses the address, so a
  restarted server binds at once over connections left in TIME_WAIT.
* :class:`QuietServerLog`: the logger handed to aiohttp's request handler; a request its
  parser refuses (malformed, too long) is counted and logged as one short line at most every
  ``LOG_EVERY_S``, not as a traceback per request.
* :class:`Paces`: requests per second per key (a tenant's pages and API, a peer's logins),
  a request over the rate held until its turn, then refused (429).
* :class:`PeerRefusals`: refused requests counted by reason and logged at most once a
  second per peer.
* :func:`unsent_bytes` and :func:`hang_up`: what a viewer's socket holds that its peer has
  not taken, and a close that releases it at once.
* :func:`raise_open_files`: the soft limit of open files raised to the hard one at start.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import logging
import socket
import struct
import sys
import time

from aiohttp import web
from aiohttp.http_exceptions import HttpProcessingError

from semcodec.cloud.service.limits import RateLimiter

try:  # the kernel's send queue of a socket (Linux: SIOCOUTQ, the same number)
    import fcntl
    import termios

    _OUTQ = termios.TIOCOUTQ if sys.platform.startswith("linux") else None
except ImportError:  # not POSIX
    _OUTQ = None

log = logging.getLogger("semcodec.cloud.service")
#: A refusal (connections over a cap, malformed requests) is logged at most this often, s.
LOG_EVERY_S = 10.0
#: What a connection over a cap gets before it is closed.
BUSY = (b"HTTP/1.1 503 Service Unavailable\r\nContent-Type: text/plain\r\n"
        b"Content-Length: %d\r\nRetry-After: 1\r\nConnection: close\r\n\r\n%s")  # fmt: skip


def unsent_bytes(transport) -> int:
    """Bytes written to ``transport`` that its peer has not acknowledged yet: asyncio's
    buffer and the kernel's send queue (Linux's SIOCOUTQ; elsewhere asyncio's buffer
    only)."""
    size = transport.get_write_buffer_size()
    sock = transport.get_extra_info("socket")
    if sock is not None and _OUTQ is not None:
        with contextlib.suppress(OSError, ValueError):
            size += struct.unpack("i", fcntl.ioctl(sock.fileno(), _OUTQ, b"\0" * 4))[0]
    return size


def hang_up(transport) -> None:
    """Closes a connection at once with its buffers released: the kernel resets it
    (``SO_LINGER`` 0) instead of holding unsent bytes in FIN-WAIT-1 for minutes."""
    sock = transport.get_extra_info("socket")
    if sock is not None:
        with contextlib.suppress(OSError, ValueError):
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    transport.abort()


def raise_open_files() -> tuple[int, int]:
    """Raises this process's soft limit of open files to its hard limit (where the platform
    lets it); returns ``(soft before, soft now)``."""
    try:
        import resource
    except ImportError:  # not POSIX: nothing to raise
        return 0, 0
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    target = hard if hard != resource.RLIM_INFINITY else max(soft, 1 << 20)
    if soft == resource.RLIM_INFINITY or soft >= target:
        return soft, soft
    try:
        resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
    except (ValueError, OSError):  # e.g. macOS refuses above OPEN_MAX
        return soft, soft
    return soft, target


class Throttled:
    """Counts a kind of event and says when it may be logged: at most once per
    ``every_s``, with how many happened since the last line."""

    def __init__(self, every_s: float = LOG_EVERY_S) -> None:
        self.every_s, self.total, self._since, self._last = every_s, 0, 0, -every_s

    def count(self) -> int:
        """Counts one event; returns how many to report now (0: stay quiet)."""
        self.total += 1
        self._since += 1
        now = time.monotonic()
        if now - self._last < self.every_s:
            return 0
        self._last, told, self._since = now, self._since, 0
        return told


class PeerRefusals:
    """Refused requests counted by reason (the metrics read :attr:`counts`) and logged at
    most once per ``every_s`` per peer address, with how many came since: a client guessing
    tokens leaves a trace, not a line per guess. The line names the peer and the reason,
    never what the client sent (no token bytes). Peers are forgotten once quiet, so the
    table stays bounded by those active."""

    MAX_PEERS = 4096

    def __init__(self, every_s: float = 1.0) -> None:
        self.every_s = every_s
        self.counts: collections.Counter[str] = collections.Counter()
        self._peers: dict[str, Throttled] = {}

    def count(self, peer: str, reason: str, status: int) -> None:
        self.counts[reason] += 1
        throttle = self._peers.get(peer)
        if throttle is None:
            if len(self._peers) >= self.MAX_PEERS:
                now = time.monotonic()
                self._peers = {k: t for k, t in self._peers.items()
                               if now - t._last < self.every_s}  # fmt: skip
            throttle = self._peers[peer] = Throttled(self.every_s)
        told = throttle.count()
        if told:
            log.warning("refused %d HTTP request(s) from %s in the last %.0f s at most; the "
                        "last: %d (%s)", told, peer, self.every_s, status, reason)  # fmt: skip


class Paces:
    """Token buckets per key (a tenant, a peer's address): :meth:`turn` makes a request
    wait its turn, ``hold_s`` at most, and says whether it may go on; one refused is held
    ``hold_s`` too, so a client that loops is paced by the server whatever it does with the
    answer. Buckets of keys unseen for a while are forgotten (a full bucket is the same as
    none), so the keys held stay bounded by those active.

    Args:
        rate: requests per second per key (0: no limit, :meth:`turn` never waits).
        burst: what a quiet key may ask at once.
        hold_s: the longest a request waits for its turn, seconds (0: one over the rate is
            refused at once).
    """

    #: Keys held before the quiet ones are forgotten.
    MAX_KEYS = 4096

    def __init__(self, rate: float, burst: int, hold_s: float = 2.0) -> None:
        self.rate, self.burst, self.hold_s = rate, max(1, burst), hold_s
        self._buckets: dict[str, tuple[RateLimiter, float]] = {}
        self.refused = 0  # requests refused over the rate
        self.held = 0  # requests waiting their turn now

    def _bucket(self, key: str) -> RateLimiter:
        now = time.monotonic()
        found = self._buckets.get(key)
        if found is None:
            if len(self._buckets) >= self.MAX_KEYS:
                full_after = self.burst / self.rate
                self._buckets = {k: v for k, v in self._buckets.items()
                                 if now - v[1] < full_after}  # fmt: skip
            found = (RateLimiter(self.rate, self.burst), now)
        self._buckets[key] = (found[0], now)
        return found[0]

    async def turn(self, key: str) -> bool:
        """Waits for ``key``'s turn; False: over its rate for longer than ``hold_s`` (the
        request is refused, after ``hold_s``)."""
        if self.rate <= 0:
            return True
        bucket = self._bucket(key)
        wait = bucket.take(1)
        if wait > self.hold_s:
            bucket.give_back(1)
            self.refused += 1
            wait, go = self.hold_s, False
        else:
            go = True
        if wait > 0:
            self.held += 1
            try:
                await asyncio.sleep(wait)
            finally:
                self.held -= 1
        return go


class ConnectionGate:
    """Counts the front door's connections in all and per peer, refuses past the caps and
    closes those that send no request head in time.

    At the cap in all, a new connection takes the place of the oldest one that has sent no
    request head yet (closed at once): strangers holding idle connections from many
    addresses are turned over, and a client that sends its request gets in; only when
    every connection is in a request is a new one refused. Past the cap per address a
    connection is refused, whatever is idle.

    Args:
        max_connections: open connections in all (0: no cap).
        per_peer: open connections from one address (0: no cap).
        header_s: a connection must send a complete request head within this long of
            opening, seconds.
    """

    def __init__(self, max_connections: int, per_peer: int, header_s: float) -> None:
        self.max_connections, self.per_peer, self.header_s = max_connections, per_peer, header_s
        self.open = 0
        self.peers: collections.Counter[str] = collections.Counter()
        self.refused = Throttled()  # connections refused over a cap
        self.timed_out = 0  # connections closed for sending no request head in time
        self.evicted = 0  # idle connections closed to make room for a new one
        self._waiting: dict[object, asyncio.TimerHandle] = {}  # by age: no request head yet
        self._evicted: set = set()  # closed to make room, not yet gone

    def factory(self, inner):
        """The protocol factory to listen with, over aiohttp's (``inner``)."""
        return lambda: _GatedProtocol(self, inner)

    def admit(self, peer: str) -> str | None:
        """Counts a connection from ``peer`` in; returns why it is refused (None: taken)."""
        live = self.open - len(self._evicted)
        if self.per_peer and self.peers[peer] >= self.per_peer:
            why = (f"{self.peers[peer]} HTTP connections are open from this address, the cap "
                   "(http_max_connections_per_peer)")  # fmt: skip
        elif self.max_connections and live >= self.max_connections and not self._evict():
            why = (f"{live} HTTP connections are open, each in a request, the cap "
                   "(http_max_connections)")  # fmt: skip
        else:
            self.open += 1
            self.peers[peer] += 1
            return None
        told = self.refused.count()
        if told:
            log.warning("refused %d HTTP connection(s) in the last %.0f s at most; the last "
                        "from %s: %s", told, LOG_EVERY_S, peer, why)  # fmt: skip
        return why

    def _evict(self) -> bool:
        """Closes the oldest connection without a request head, if any (True: one was)."""
        if not self._waiting:
            return False
        transport = next(iter(self._waiting))
        self._waiting.pop(transport).cancel()
        self._evicted.add(transport)
        self.evicted += 1
        transport.abort()
        return True

    def release(self, peer: str, transport=None) -> None:
        """A connection from ``peer`` (on ``transport``) is gone."""
        self._evicted.discard(transport)
        self.open -= 1
        self.peers[peer] -= 1
        if self.peers[peer] <= 0:
            del self.peers[peer]

    def waiting(self, transport, handle: asyncio.TimerHandle) -> None:
        self._waiting[transport] = handle

    def seen(self, transport) -> None:
        """A request's head came on ``transport``: its head timer stops."""
        handle = self._waiting.pop(transport, None)
        if handle is not None:
            handle.cancel()

    def late(self, transport) -> None:
        """No request head came on ``transport`` within ``header_s``: it is closed."""
        if self._waiting.pop(transport, None) is not None:
            self.timed_out += 1
            transport.abort()


class _GatedProtocol(asyncio.Protocol):
    """One connection of the front door: counted by the gate, then handed to aiohttp's
    request handler (made only for a connection taken)."""

    def __init__(self, gate: ConnectionGate, inner) -> None:
        self.gate, self.make_inner = gate, inner
        self.inner: asyncio.Protocol | None = None
        self.peer = ""

    def connection_made(self, transport) -> None:
        peername = transport.get_extra_info("peername")
        self.peer = str(peername[0]) if isinstance(peername, tuple) else str(peername)
        why = self.gate.admit(self.peer)
        if why is not None:
            text = f"503: {why}\n".encode()
            transport.write(BUSY % (len(text), text))
            transport.close()
            return
        self.inner = self.make_inner()
        loop = asyncio.get_running_loop()
        self.gate.waiting(transport, loop.call_later(self.gate.header_s, self.gate.late,
                                                     transport))  # fmt: skip
        self.transport = transport
        self.inner.connection_made(transport)

    def data_received(self, data: bytes) -> None:
        if self.inner is not None:
            self.inner.data_received(data)

    def eof_received(self):
        return self.inner.eof_received() if self.inner is not None else None

    def pause_writing(self) -> None:
        if self.inner is not None:
            self.inner.pause_writing()

    def resume_writing(self) -> None:
        if self.inner is not None:
            self.inner.resume_writing()

    def connection_lost(self, exc) -> None:
        if self.inner is None:
            return
        self.gate.seen(self.transport)
        self.gate.release(self.peer, self.transport)
        inner, self.inner = self.inner, None
        inner.connection_lost(exc)


class GatedSite(web.BaseSite):
    """aiohttp's TCP site, listening through a :class:`ConnectionGate`, with the address
    reused (a restarted server binds over connections left in TIME_WAIT) and the TLS
    handshake bounded by the gate's ``header_s``."""

    def __init__(self, runner: web.BaseRunner, host: str, port: int, gate: ConnectionGate,
                 ssl_context=None, backlog: int = 128) -> None:  # fmt: skip
        super().__init__(runner, ssl_context=ssl_context, backlog=backlog)
        self._host, self._port, self.gate = host, port, gate

    @property
    def name(self) -> str:
        scheme = "https" if self._ssl_context else "http"
        return f"{scheme}://{self._host}:{self._port}"

    @property
    def port(self) -> int:
        """The port bound (after :meth:`start`)."""
        return self._server.sockets[0].getsockname()[1]

    async def start(self) -> None:
        await super().start()
        loop = asyncio.get_running_loop()
        tls = {"ssl_handshake_timeout": self.gate.header_s} if self._ssl_context else {}
        self._server = await loop.create_server(
            self.gate.factory(self._runner.server), self._host, self._port,
            ssl=self._ssl_context, backlog=self._backlog,
            reuse_address=sys.platform != "win32", **tls)  # fmt: skip


class QuietServerLog:
    """The logger of aiohttp's request handler (``logger=`` of its runner): a request its
    parser refused (an ``HttpProcessingError``: malformed, a line too long, ...) is counted
    and logged as one line at most every ``LOG_EVERY_S`` instead of a traceback each;
    everything else goes to ``aiohttp.server`` as aiohttp would log it."""

    def __init__(self) -> None:
        self.logger = logging.getLogger("aiohttp.server")
        self.malformed = Throttled()

    def exception(self, msg, *args, exc_info=True, **kw) -> None:
        exc = exc_info if isinstance(exc_info, BaseException) else sys.exc_info()[1]
        if not isinstance(exc, HttpProcessingError):
            self.logger.exception(msg, *args, exc_info=exc_info, **kw)
            return
        told = self.malformed.count()
        if told:
            # the kind only: the parser's message quotes the client's bytes (a token's too)
            peer, what = (args[0] if args else "?"), type(exc).__name__
            log.warning("refused %d malformed HTTP request(s) (400) in the last %.0f s at "
                        "most; the last from %s: %s", told, LOG_EVERY_S, peer, what)  # fmt: skip

    def __getattr__(self, name: str):  # debug, info, warning, isEnabledFor, ...
        return getattr(self.logger, name)


def bindable(host: str, port: int) -> str | None:
    """Why ``host:port`` cannot be listened on now, with the address reused as the servers
    do (None: it can); port 0 always can."""
    if port == 0:
        return None
    try:
        infos = socket.getaddrinfo(host or None, port, type=socket.SOCK_STREAM,
                                   flags=socket.AI_PASSIVE)  # fmt: skip
    except socket.gaierror as exc:
        return f"cannot resolve {host!r}: {exc.strerror}"
    for family, kind, proto, _, address in infos:
        with socket.socket(family, kind, proto) as probe:
            if sys.platform != "win32":
                probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            if family == socket.AF_INET6:  # as asyncio and gRPC bind it
                probe.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
            try:
                probe.bind(address)
            except OSError as exc:
                return exc.strerror or str(exc)
    return None
