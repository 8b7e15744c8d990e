"""The gRPC server of ``cloud-decoder serve``: service, health, reflection, TLS, metrics.

:class:`DecoderServer` wires the pieces on an asynchronous server (``grpc.aio``, its event
loop in a thread of its own, so that callers -- the CLI, tests -- use it synchronously) and
stops gracefully: health turns NOT_SERVING, no new sessions or streams are taken, running
streams get ``grace_s`` seconds to end, decoders stop (open sessions keep their logs: an edge
resumes them after a restart). An idle call costs a coroutine; the blocking work of the
session core runs in a bounded pool of ``workers`` threads. HTTP/2 keepalive, connection
idle and age limits, a cap on concurrent streams per connection and on all calls, and
:mod:`cloud.service.guard` bound what connections can hold; a reaper puts idle sessions to
rest and removes those kept past their retention.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import signal
import threading
import time
from concurrent import futures

import grpc
from grpc_health.v1 import health_pb2, health_pb2_grpc
from grpc_reflection.v1alpha import reflection

from semcodec.cloud.service.auth import AuthInterceptor, TokenTable, load_token_file
from semcodec.cloud.service.config import (
    GRPC_MESSAGE_LIMIT,
    ConfigError,
    ServeSettings,
    is_loopback,
    proxy_networks,
    split_host_port,
)
from semcodec.cloud.service.decode import DecodeSettings
from semcodec.cloud.service.front import bindable, raise_open_files
from semcodec.cloud.service.guard import BoundedHealth, CallGuard, cap_logs
from semcodec.cloud.service.limits import ServiceLimits
from semcodec.cloud.service.manager import SessionManager
from semcodec.cloud.service.metrics import PrometheusMetrics
from semcodec.cloud.service.servicer import SemanticStreamServicer, StreamTimeouts
from semcodec.cloud.service.store import read_json, write_json_atomic
from semcodec.protos import semcodec_v1_pb2 as pb
from semcodec.protos import semcodec_v1_pb2_grpc as pb_grpc

log = logging.getLogger("semcodec.cloud.service")
SERVICE_NAME = pb.DESCRIPTOR.services_by_name["SemanticStream"].full_name


class ServerStartError(RuntimeError):
    """The server cannot start: the port is taken, a certificate cannot be read, ..."""


def server_credentials(settings: ServeSettings) -> grpc.ServerCredentials | None:
    """TLS credentials from the settings' PEM files (None: plaintext)."""
    if settings.tls_cert is None:
        return None
    try:
        chain, key = settings.tls_cert.read_bytes(), settings.tls_key.read_bytes()
        ca = settings.client_ca.read_bytes() if settings.client_ca else None
    except OSError as exc:
        raise ServerStartError(f"cannot read a TLS file: {exc}") from exc
    return grpc.ssl_server_credentials([(key, chain)], root_certificates=ca,
                                       require_client_auth=ca is not None)  # fmt: skip


def http_tls(settings: ServeSettings):
    """The HTTP front door's ``ssl.SSLContext`` from the gRPC port's PEM files (None:
    plaintext); with ``client_ca``, clients must show a certificate signed by it."""
    if settings.tls_cert is None:
        return None
    import ssl

    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    try:
        context.load_cert_chain(settings.tls_cert, settings.tls_key)
        if settings.client_ca is not None:
            context.load_verify_locations(settings.client_ca)
            context.verify_mode = ssl.CERT_REQUIRED
    except (OSError, ssl.SSLError) as exc:
        raise ServerStartError(f"cannot read a TLS file: {exc}") from exc
    return context


#: What each port of a server exposes, for the start-up lines.
EXPOSES = {"listen": "gRPC: sessions and streams; health and reflection without a token",
           "http_listen": "HTTP: dashboard, live video, JSON API, login",
           "metrics_listen": "Prometheus /metrics: counts, no session ids, no token asked"}


def who_can_connect(settings: ServeSettings, tenants: list[str] | None,
                    ports: dict[str, int] | None = None) -> list[str]:  # fmt: skip
    """A line per port the server listens on (gRPC, HTTP, metrics) that says what it
    exposes, who can reach it and as whom, and how (logged at start). ``ports``: the ports
    bound, by setting name (default: those of the settings)."""
    lines = []
    for name, exposes in EXPOSES.items():
        address = getattr(settings, name)
        if not address:
            continue
        host, port = split_host_port(address, name)
        port = (ports or {}).get(name) or port
        shown = f"[{host}]:{port}" if ":" in host else f"{host}:{port}"
        loopback = is_loopback(host)
        where = ("this machine only (loopback)" if loopback
                 else f"any machine that reaches {host or 'every interface'}")  # fmt: skip
        if name == "metrics_listen":
            who, how = "anyone, without a token", "plaintext"
        else:
            who, how = _who(tenants, loopback), _how(settings, tenants, loopback)
        lines.append(f"who can connect to {shown} ({exposes}): {who}, from {where}, over {how}")
    return lines


def _who(tenants: list[str] | None, loopback: bool) -> str:
    if tenants is None:
        who = "anyone, without a token (tenant 'default')"
        return who if loopback else who + ", as asked by --allow-anonymous-remote"
    names = ", ".join(sorted(set(tenants))[:8]) + (", ..." if len(set(tenants)) > 8 else "")
    return f"holders of the {len(tenants)} token(s) of --tokens (tenants: {names})"


def _how(settings: ServeSettings, tenants: list[str] | None, loopback: bool) -> str:
    if settings.client_ca is not None:
        return f"mutual TLS (client certificates signed by {settings.client_ca})"
    if settings.tls_cert is not None:
        return "TLS"
    return "plaintext" + ("" if loopback or tenants is None
                          else ": tokens cross the network readable, use --tls-cert")


def timeouts_of(settings: ServeSettings) -> StreamTimeouts:
    return StreamTimeouts(start_s=settings.stream_start_s, idle_s=settings.stream_idle_s,
                          progress_window_s=settings.progress_window_s,
                          min_progress_bytes=settings.min_progress_bytes)  # fmt: skip


def channel_options(settings: ServeSettings) -> list[tuple[str, int]]:
    """The server's HTTP/2 settings: message limits (never raised), keepalive, connection
    idle and age limits, concurrent streams per connection."""
    ms = lambda seconds: max(1, int(seconds * 1000))  # noqa: E731
    options = [("grpc.max_receive_message_length", GRPC_MESSAGE_LIMIT),
               ("grpc.max_send_message_length", GRPC_MESSAGE_LIMIT),
               ("grpc.so_reuseport", 0),
               # edges ping (keepalive) to notice a cut link: allow one a second
               ("grpc.http2.min_recv_ping_interval_without_data_ms", 1000),
               ("grpc.http2.max_ping_strikes", 0),
               ("grpc.keepalive_permit_without_calls", 1),
               # the server pings quiet connections too: a vanished peer is dropped
               ("grpc.keepalive_time_ms", ms(settings.keepalive_s)),
               ("grpc.keepalive_timeout_ms", ms(settings.keepalive_timeout_s)),
               ("grpc.max_concurrent_streams", settings.max_streams_per_connection)]  # fmt: skip
    if settings.max_connection_idle_s > 0:
        options.append(("grpc.max_connection_idle_ms", ms(settings.max_connection_idle_s)))
    if settings.max_connection_age_s > 0:
        options += [("grpc.max_connection_age_ms", ms(settings.max_connection_age_s)),
                    ("grpc.max_connection_age_grace_ms",
                     ms(settings.max_connection_age_grace_s))]  # fmt: skip
    return options


class DecoderServer:
    """One ``cloud-decoder serve``: call :meth:`start`, then :meth:`stop` (or :meth:`run`).

    Attributes:
        port: the gRPC port bound (after :meth:`start`).
        metrics_port: the ``/metrics`` port (None when metrics are off).
        manager: the session core.
    """

    def __init__(self, settings: ServeSettings) -> None:
        from semcodec.codec.keyframes import available_intra_coders

        # the codec's registries load their built-ins on first use, without a lock: they are
        # loaded here, before the pool and decoder threads race to them
        self.settings = settings.check()
        check_ports(settings)  # before the slow work: a taken port fails in a moment
        available_intra_coders()
        check_decoder_once(settings)
        cap_logs("semcodec.cloud.service", "grpc", "asyncio")
        self.metrics = PrometheusMetrics()
        decode = DecodeSettings(settings.decoder, settings.overview, settings.flow_prior,
                                settings.bottleneck_dir, settings.decoder_ladder)  # fmt: skip
        self._tokens, quotas = self._load_tokens()
        self.manager = SessionManager(settings.out, ServiceLimits.of(settings), decode,
                                      self.metrics, quotas)  # fmt: skip
        self.metrics.bind(self.manager)
        self.health: BoundedHealth | None = None  # made on the event loop
        self.port: int | None = None
        self.metrics_port: int | None = None
        self.http_port: int | None = None
        self.front_door = None  # the HTTP front door (cloud.service.http), with --http-listen
        self.open_files = 0  # the soft limit of open files (raised by start)
        self.http_caps = (0, 0)  # the front door's connections in all and per address
        self._stopped = threading.Event()
        self._interceptors = self._make_interceptors()
        self._pool = futures.ThreadPoolExecutor(max_workers=settings.workers or 16,
                                                thread_name_prefix="core")  # fmt: skip
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._server: grpc.aio.Server | None = None
        self._reaper: asyncio.Task | None = None

    def _load_tokens(self) -> tuple[dict[str, str] | None, dict[str, dict[str, float]]]:
        """``({token: tenant}, {tenant: quotas})`` of the tokens file (None: no tokens)."""
        if self.settings.tokens is None:
            return None, {}
        try:
            return load_token_file(self.settings.tokens)
        except OSError as exc:
            raise ServerStartError(f"cannot read the tokens file: {exc}") from exc

    def _make_interceptors(self) -> list[grpc.aio.ServerInterceptor]:
        guard = CallGuard(self.settings.max_open_streams, self.settings.max_calls_per_peer,
                          self.metrics.error, self.settings.max_watch_streams,
                          self.settings.max_watch_streams_per_peer,
                          proxy_networks(self.settings.trusted_proxies))  # fmt: skip
        if self._tokens is None:
            return [guard]
        table = TokenTable(self._tokens)
        return [guard, AuthInterceptor(table, lambda: self.metrics.error("UNAUTHENTICATED"))]

    # -- the event loop's side

    async def _start(self, address: str, credentials) -> int:
        server = grpc.aio.server(interceptors=self._interceptors,
                                 options=channel_options(self.settings),
                                 maximum_concurrent_rpcs=self.settings.max_calls or None)
        self._server = server
        pb_grpc.add_SemanticStreamServicer_to_server(
            SemanticStreamServicer(self.manager, self.metrics, self._pool,
                                   timeouts_of(self.settings)), server)  # fmt: skip
        self.health = BoundedHealth(("", SERVICE_NAME))
        health_pb2_grpc.add_HealthServicer_to_server(self.health, server)
        names = (SERVICE_NAME, health_pb2.DESCRIPTOR.services_by_name["Health"].full_name,
                 reflection.SERVICE_NAME)  # fmt: skip
        reflection.enable_server_reflection(names, server)
        try:
            if credentials is None:
                port = server.add_insecure_port(address)
            else:
                port = server.add_secure_port(address, credentials)
        except RuntimeError as exc:
            raise ServerStartError(f"cannot listen on {self.settings.listen}: {exc}") from exc
        if not port:
            raise ServerStartError(f"cannot listen on {self.settings.listen}")
        await server.start()
        if self.settings.http_listen:
            try:
                self.http_port = await self._start_http()
            except BaseException:
                await server.stop(None)  # nothing was served: no grace to wait for
                raise
        for name in ("", SERVICE_NAME):
            await self.health.set(name, health_pb2.HealthCheckResponse.SERVING)
        self._reaper = asyncio.get_running_loop().create_task(self._reap())
        return port

    async def _start_http(self) -> int:
        """Starts the HTTP front door in this event loop; returns its port."""
        from semcodec.cloud.service.http import FrontDoor, HttpSettings

        settings = self.settings
        # at most half the open files, so that the gRPC port and the sessions keep theirs
        caps = [c for c in (settings.http_max_connections, self.open_files // 2) if c > 0]
        most = min(caps) if caps else 0
        http = HttpSettings(settings.tenant_max_viewers, settings.max_viewers,
                            settings.viewer_stall_s, settings.viewer_max_behind,
                            settings.tls_cert is not None,
                            settings.http_header_s, settings.http_body_s,
                            settings.http_keepalive_s, most,
                            settings.http_max_connections_per_peer,
                            settings.http_tenant_rps, settings.http_tenant_burst,
                            settings.http_login_rps,
                            proxy_networks(settings.trusted_proxies))  # fmt: skip
        self.http_caps = (most, settings.http_max_connections_per_peer)
        self.front_door = FrontDoor(self.manager, self._tokens, http, self._pool)
        self.metrics.bind_front(self.front_door)
        host, port = split_host_port(settings.http_listen, "http_listen")
        try:
            return await self.front_door.start(host, port, http_tls(settings))
        except OSError as exc:
            raise ServerStartError(f"cannot listen on {settings.http_listen}: {exc}") from exc

    async def _reap(self) -> None:
        """Puts idle sessions to rest and removes expired ones, every few seconds."""
        loop = asyncio.get_running_loop()
        idle = self.settings.session_idle_s
        every = min(5.0, max(0.2, idle / 4)) if idle > 0 else 5.0
        last_sweep = 0.0
        while True:
            await asyncio.sleep(every)
            try:
                rested = await loop.run_in_executor(self._pool, self.manager.reap)
                if rested:
                    log.info("put %d idle session(s) to rest", len(rested))
                if loop.time() - last_sweep >= min(60.0, max(1.0, self.settings.retain_s / 4)):
                    last_sweep = loop.time()
                    removed = await loop.run_in_executor(self._pool, self.manager.sweep)
                    if removed:
                        log.info("removed %d session(s) kept past --retain-s", len(removed))
            except OSError as exc:  # a full or failing disk: try again later
                log.warning("reaper: %s", exc)

    async def _stop(self, grace: float) -> None:
        if self._reaper is not None:
            self._reaper.cancel()
        await self.health.enter_graceful_shutdown()
        if self.front_door is not None:
            await self.front_door.stop()
        self.manager.drain()
        await asyncio.sleep(self.settings.notice_s)
        await self._server.stop(grace)

    # -- the caller's side

    def start(self) -> DecoderServer:
        """Binds the ports and starts serving."""
        host, port = split_host_port(self.settings.listen, "listen")
        address = f"[{host}]:{port}" if ":" in host else f"{host}:{port}"
        credentials = server_credentials(self.settings)
        before, self.open_files = raise_open_files()
        if before != self.open_files:
            log.info("open files: soft limit raised from %d to %d (the hard limit)", before,
                     self.open_files)  # fmt: skip
        self.settings.out.mkdir(mode=0o700, parents=True, exist_ok=True)
        cleaned = self.manager.clean_start()
        if cleaned:
            log.info("removed %d partial unit(s) and folder(s) left by a stopped server",
                     len(cleaned))  # fmt: skip
        loop = asyncio.new_event_loop()
        ready = threading.Event()

        def serve() -> None:
            asyncio.set_event_loop(loop)
            loop.call_soon(ready.set)
            loop.run_forever()
            loop.run_until_complete(loop.shutdown_asyncgens())
            loop.close()

        self._loop = loop
        self._thread = threading.Thread(target=serve, name="grpc-aio", daemon=True)
        self._thread.start()
        ready.wait()
        try:
            self.port = asyncio.run_coroutine_threadsafe(
                self._start(address, credentials), loop).result(60)
        except BaseException:
            self._end_loop()
            raise
        if self.settings.metrics_listen:
            self.metrics_port = self.metrics.serve(
                *split_host_port(self.settings.metrics_listen, "metrics_listen"))
        log.info("serving on %s:%d (%s), outputs under %s", host, self.port,
                 "TLS" if credentials else "plaintext", self.settings.out)  # fmt: skip
        tenants = None if self._tokens is None else list(self._tokens.values())
        ports = {"listen": self.port, "http_listen": self.http_port,
                 "metrics_listen": self.metrics_port}  # fmt: skip
        for line in who_can_connect(self.settings, tenants, ports):
            log.info("%s", line)
        if self.http_port is not None:
            host = split_host_port(self.settings.http_listen, "http_listen")[0]
            log.info("HTTP front door on %s://%s:%d/ (dashboard, live view, JSON API); at "
                     "most %s connections, %s per address, of %d open files",
                     "https" if self.settings.tls_cert else "http", host, self.http_port,
                     *(c or "no cap on" for c in self.http_caps), self.open_files)
        return self

    def _end_loop(self) -> None:
        if self._loop is not None and self._loop.is_running():
            self._loop.call_soon_threadsafe(self._loop.stop)
        if self._thread is not None:
            self._thread.join(30)
        self._pool.shutdown(wait=False, cancel_futures=True)

    def stop(self, grace_s: float | None = None) -> None:
        """Graceful stop: NOT_SERVING, no new work, streams drained for ``grace_s``."""
        if self._stopped.is_set():
            return
        self._stopped.set()
        grace = self.settings.grace_s if grace_s is None else grace_s
        if self._server is not None:
            asyncio.run_coroutine_threadsafe(self._stop(grace), self._loop).result()
        self.manager.shutdown()
        self._end_loop()
        self.metrics.stop()
        log.info("stopped")

    def run(self) -> int:
        """Serves until SIGTERM or SIGINT, then stops gracefully; returns 0."""
        wake = threading.Event()
        previous = {s: signal.signal(s, lambda *_: wake.set())
                    for s in (signal.SIGTERM, signal.SIGINT)}  # fmt: skip
        try:
            self.start()
            while not wake.wait(0.5):
                pass
            log.info("stopping: draining for up to %.0f s", self.settings.grace_s)
            self.stop()
        finally:
            for sig, handler in previous.items():
                signal.signal(sig, handler)
        return 0


def check_ports(settings: ServeSettings) -> None:
    """Refuses, at once, a gRPC, HTTP or metrics address that cannot be listened on now (a
    port taken by another process), before the slow work of a start (the decoder's networks
    are loaded in seconds); a port taken in between still fails the start itself.

    Raises:
        ServerStartError: which address, and why.
    """
    for name in ("listen", "http_listen", "metrics_listen"):
        address = getattr(settings, name)
        if address:
            why = bindable(*split_host_port(address, name))
            if why is not None:
                raise ServerStartError(f"cannot listen on {address} ({name}): {why}")


#: A start skips its decoder's networks check (seconds of building the networks) when a
#: server on the same output folder checked the same decoder this recently: a server killed
#: and restarted at once serves again in about a second.
CHECK_REUSE_S = 3600.0
#: Where a passed check is recorded, in the output folder: the decoder, in full.
CHECKED_NAME = ".decoder-checked"


def check_decoder_once(settings: ServeSettings) -> None:
    """:func:`check_decoder`, unless a server on ``settings.out`` passed it for the same
    decoder (in full: a new default decoder is checked again) in the last
    ``CHECK_REUSE_S``; then only the decoder's options are read (and the reconstructors'
    registry loaded, before decoder threads race to it). A passed check is recorded.

    Raises:
        ConfigError: see :func:`check_decoder`.
    """
    from semcodec.codec.reconstruct import available_reconstructors
    from semcodec.codec.reconstruct.pipeline import DecoderOptionError, DecoderSpec

    try:
        full = str(DecoderSpec.parse(settings.decoder))
    except DecoderOptionError as exc:
        raise ConfigError(f"decoder {settings.decoder!r}: {exc}") from None
    mark = settings.out / CHECKED_NAME
    try:
        fresh = (time.time() - mark.stat().st_mtime < CHECK_REUSE_S
                 and read_json(mark).get("decoder") == full)  # fmt: skip
    except (OSError, ValueError, AttributeError):  # none, or not a record
        fresh = False
    if fresh:
        available_reconstructors()
        return
    check_decoder(settings.decoder)
    with contextlib.suppress(OSError):  # a read-only folder fails later, with its reason
        settings.out.mkdir(mode=0o700, parents=True, exist_ok=True)
        write_json_atomic(mark, {"decoder": full})


def check_decoder(text: str) -> None:
    """Refuses a decoder that does not exist or options it does not take, and fetches
    (checks) its networks' files now rather than in the first session.

    Raises:
        ConfigError: what is wrong, or a network whose files cannot be had.
    """
    from semcodec.codec.core.models import ModelError
    from semcodec.codec.reconstruct.pipeline import DecoderOptionError, DecoderSpec

    try:
        DecoderSpec.parse(text).build()
    except DecoderOptionError as exc:
        raise ConfigError(f"decoder {text!r}: {exc}") from None
    except ModelError as exc:
        raise ConfigError(f"decoder {text!r}: its networks cannot be had: {exc}") from None
