"""What keeps strangers and heavy clients from exhausting the server (``grpc.aio``).

* :class:`CallGuard`, an interceptor: the unauthenticated streaming calls are counted over
  the whole server, each kind in a pool of its own -- reflection (``max_open_streams``) and
  health ``Watch`` (``max_watch_streams``) -- so that idle reflection streams never lock
  health watches; past a cap, RESOURCE_EXHAUSTED. Both caps stay below the server's
  ``max_calls`` (checked by the settings): authenticated calls always find room.
  Health ``Watch`` streams are also capped per peer address (``max_watch_streams_per_peer``,
  4 by default), so that one address holding thousands cannot take the pool from a
  legitimate watcher. Optionally every call is counted per peer address and capped
  (``max_calls_per_peer``; off by default: behind a load balancer every call comes from
  its address). Unary health
  checks are never capped: a balancer must always get its answer.
* :class:`BoundedHealth`: the standard health service whose ``Watch`` answers only the
  services the server has (NOT_FOUND otherwise), so a watcher cannot make it keep state
  for names of its choosing.
* :class:`CappedLog`: a logging filter that cuts every record to ``MAX_LOG_CHARS``.
"""

from __future__ import annotations

import collections
import logging

import grpc
from grpc_health.v1 import health

from semcodec.cloud.service.auth import OPEN_METHODS, wrap_handler
from semcodec.cloud.service.config import client_address
from semcodec.cloud.service.errors import brief

#: The longest log record the service writes, characters (before the handler's prefix).
MAX_LOG_CHARS = 1800
#: Methods never capped: a balancer's health probe.
UNCAPPED = ("/grpc.health.v1.Health/Check",)
#: The pools of unauthenticated calls, by method prefix: (pool, the setting that caps it).
POOLS = {"/grpc.health.v1.Health/Watch": ("watch", "max_watch_streams"),
         "/grpc.reflection.": ("reflection", "max_open_streams")}  # fmt: skip


def pool_of(method: str) -> str | None:
    """The pool of an unauthenticated method ("watch", "reflection"), or None."""
    for prefix, (pool, _) in POOLS.items():
        if method.startswith(prefix):
            return pool
    return None if not method.startswith(OPEN_METHODS) else "reflection"


class CappedLog(logging.Filter):
    """Cuts each record's message to ``MAX_LOG_CHARS`` (see :func:`~cloud.service.errors.
    brief`), whatever a client sent; exception texts are cut alike."""

    def filter(self, record: logging.LogRecord) -> bool:
        message = record.getMessage()
        if len(message) > MAX_LOG_CHARS:
            record.msg, record.args = brief(message, MAX_LOG_CHARS), ()
        if record.exc_info and record.exc_info[1] is not None:
            text = logging.Formatter().formatException(record.exc_info)
            if len(text) > MAX_LOG_CHARS:
                record.msg = f"{record.msg}\n{brief(text, MAX_LOG_CHARS)}"
                record.exc_info, record.exc_text = None, None
        return True


def cap_logs(*names: str) -> None:
    """Adds :class:`CappedLog` to the named loggers (once)."""
    for name in names:
        logger = logging.getLogger(name)
        if not any(isinstance(f, CappedLog) for f in logger.filters):
            logger.addFilter(CappedLog())


class BoundedHealth(health.aio.HealthServicer):
    """The asynchronous health service; ``Watch`` of an unknown service is NOT_FOUND."""

    def __init__(self, services: tuple[str, ...]) -> None:
        super().__init__()
        self.services = frozenset(services)

    async def Watch(self, request, context):
        if request.service not in self.services:
            await context.abort(grpc.StatusCode.NOT_FOUND,
                                f"unknown service {brief(repr(request.service), 64)}")  # fmt: skip
        await super().Watch(request, context)


class CallGuard(grpc.aio.ServerInterceptor):
    """Caps the unauthenticated streaming calls, each kind apart, and optionally the calls
    per peer.

    Args:
        max_open_streams: concurrent reflection calls (0: no cap).
        max_calls_per_peer: concurrent calls from one address (0: no cap).
        on_refused: called with the status name of each refused call.
        max_watch_streams: concurrent health ``Watch`` calls (0: no cap).
        max_watch_per_peer: concurrent health ``Watch`` calls from one address (0: no cap).
        trusted: networks of proxies whose ``x-forwarded-for`` names the caller's address
            (:func:`~cloud.service.config.client_address`; empty: the connection's).
    """

    def __init__(self, max_open_streams: int, max_calls_per_peer: int = 0,
                 on_refused=None, max_watch_streams: int = 0,
                 max_watch_per_peer: int = 0, trusted: tuple = ()) -> None:  # fmt: skip
        self.caps = {"reflection": max_open_streams, "watch": max_watch_streams}
        self.max_calls_per_peer = max_calls_per_peer
        self.max_watch_per_peer = max_watch_per_peer
        self.trusted = trusted
        self.on_refused = on_refused
        self.open = {"reflection": 0, "watch": 0}
        self.per_peer: collections.Counter[str] = collections.Counter()
        self.watch_peers: collections.Counter[str] = collections.Counter()

    @property
    def open_streams(self) -> int:
        """Unauthenticated streams open, over every pool."""
        return sum(self.open.values())

    async def intercept_service(self, continuation, handler_call_details):
        handler = await continuation(handler_call_details)
        method = handler_call_details.method
        if handler is None or method in UNCAPPED:
            return handler
        pool = pool_of(method)
        per_peer = self.max_calls_per_peer or (pool == "watch" and self.max_watch_per_peer)
        if not (pool and self.caps[pool]) and not per_peer:
            return handler
        return wrap_handler(handler, lambda fn, streaming: self._guarded(fn, streaming, pool))

    def peer_of(self, context) -> str:
        """The address a call is counted under: its connection's, or behind a trusted proxy
        the one its ``x-forwarded-for`` names."""
        peer = _address(context.peer())
        if not self.trusted:
            return peer
        forwarded = next((value for key, value in context.invocation_metadata() or ()
                          if key == "x-forwarded-for"), None)  # fmt: skip
        return client_address(peer, forwarded, self.trusted)

    def _enter(self, peer: str, pool: str | None) -> str | None:
        """Counts a call from ``peer`` in; returns why it is refused (None: taken)."""
        if pool and self.caps[pool] and self.open[pool] >= self.caps[pool]:
            setting = next(name for kind, name in POOLS.values() if kind == pool)
            return (f"{self.open[pool]} unauthenticated {pool} streams are open, the "
                    f"server's cap ({setting})")  # fmt: skip
        if self.max_calls_per_peer and self.per_peer[peer] >= self.max_calls_per_peer:
            return (f"{self.per_peer[peer]} calls are open from this address, the cap "
                    "(max_calls_per_peer)")  # fmt: skip
        watch = pool == "watch" and self.max_watch_per_peer
        if watch and self.watch_peers[peer] >= self.max_watch_per_peer:
            return (f"{self.watch_peers[peer]} health Watch streams are open from this "
                    "address, the cap (max_watch_streams_per_peer)")  # fmt: skip
        if pool:
            self.open[pool] += 1
        if watch:
            self.watch_peers[peer] += 1
        self.per_peer[peer] += 1
        return None

    def _leave(self, peer: str, pool: str | None) -> None:
        if pool:
            self.open[pool] -= 1
        if pool == "watch" and self.max_watch_per_peer:
            _uncount(self.watch_peers, peer)
        _uncount(self.per_peer, peer)

    def _guarded(self, fn, streaming: bool, pool: str | None):
        guard = self

        async def refuse(context, why: str):
            if guard.on_refused is not None:
                guard.on_refused("RESOURCE_EXHAUSTED")
            await context.abort(grpc.StatusCode.RESOURCE_EXHAUSTED, why)

        if streaming:

            async def stream(request, context):
                peer = guard.peer_of(context)
                why = guard._enter(peer, pool)
                if why is not None:
                    await refuse(context, why)
                try:
                    async for reply in _replies(fn(request, context)):
                        yield reply
                finally:
                    guard._leave(peer, pool)

            return stream

        async def call(request, context):
            peer = guard.peer_of(context)
            why = guard._enter(peer, pool)
            if why is not None:
                await refuse(context, why)
            try:
                return await fn(request, context)
            finally:
                guard._leave(peer, pool)

        return call


async def _replies(result):
    """The replies of a streaming behaviour: an async generator, or a coroutine that
    writes them itself (``context.write``, as the health service's Watch does)."""
    if hasattr(result, "__aiter__"):
        async for reply in result:
            yield reply
    else:
        await result


def _uncount(counter: collections.Counter, key: str) -> None:
    counter[key] -= 1
    if counter[key] <= 0:
        del counter[key]


def _address(peer: str) -> str:
    """The address part of a gRPC peer string (``ipv4:127.0.0.1:5000`` -> ``127.0.0.1``)."""
    kind, _, rest = peer.partition(":")
    if kind in ("ipv4", "ipv6"):
        return rest.rsplit(":", 1)[0]
    return peer
