"""The gRPC server of ``cloud-decoder serve``: service, health, reflection, TLS, metrics.

:class:`DecoderServer` wires the pieces and stops gracefully: health turns NOT_SERVING, no
new sessions or streams are taken, running streams get ``grace_s`` seconds to end, decoders
stop (open sessions keep their logs: an edge resumes them after a restart).
"""

from __future__ import annotations

import logging
import signal
import threading
import time
from concurrent import futures

import grpc
from grpc_health.v1 import health, health_pb2, health_pb2_grpc
from grpc_reflection.v1alpha import reflection

from semcodec.cloud.service.auth import AuthInterceptor, TokenTable, load_tokens
from semcodec.cloud.service.config import (
    GRPC_MESSAGE_LIMIT,
    ConfigError,
    ServeSettings,
    split_host_port,
)
from semcodec.cloud.service.core import ServiceLimits, SessionManager
from semcodec.cloud.service.decode import DecodeSettings
from semcodec.cloud.service.metrics import PrometheusMetrics
from semcodec.cloud.service.servicer import SemanticStreamServicer
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


def limits_of(settings: ServeSettings) -> ServiceLimits:
    return ServiceLimits(max_sessions=settings.max_sessions,
                         max_backlog_units=settings.max_backlog_units,
                         max_chunk_bytes=settings.max_chunk_kib * 1024,
                         max_unit_bytes=settings.max_unit_mib << 20,
                         max_session_bytes_per_s=settings.max_session_kbps * 1000 / 8,
                         session_burst_bytes=settings.session_burst_kib * 1024)  # fmt: skip


class DecoderServer:
    """One ``cloud-decoder serve``: call :meth:`start`, then :meth:`stop` (or :meth:`run`).

    Attributes:
        port: the gRPC port bound (after :meth:`start`).
        metrics_port: the ``/metrics`` port (None when metrics are off).
        manager: the session core.
    """

    def __init__(self, settings: ServeSettings) -> None:
        from semcodec.codec.reconstruct import available_reconstructors

        self.settings = settings.check()
        if settings.decoder not in available_reconstructors():
            raise ConfigError(f"decoder {settings.decoder!r}: expected one of "
                              f"{', '.join(available_reconstructors())}")  # fmt: skip
        self.metrics = PrometheusMetrics()
        decode = DecodeSettings(settings.decoder, settings.overview, settings.flow_prior,
                                settings.bottleneck_dir)  # fmt: skip
        self.manager = SessionManager(settings.out, limits_of(settings), decode, self.metrics)
        self.metrics.bind(self.manager)
        self.health = health.HealthServicer()
        self.port: int | None = None
        self.metrics_port: int | None = None
        self._stopped = threading.Event()
        self._server = self._build()

    def _interceptors(self) -> list[grpc.ServerInterceptor]:
        if self.settings.tokens is None:
            return []
        try:
            table = TokenTable(load_tokens(self.settings.tokens))
        except OSError as exc:
            raise ServerStartError(f"cannot read the tokens file: {exc}") from exc
        return [AuthInterceptor(table, lambda: self.metrics.error("UNAUTHENTICATED"))]

    def _build(self) -> grpc.Server:
        workers = self.settings.workers or 2 * self.settings.max_sessions + 8
        options = [("grpc.max_receive_message_length", GRPC_MESSAGE_LIMIT),
                   ("grpc.max_send_message_length", GRPC_MESSAGE_LIMIT),
                   ("grpc.so_reuseport", 0),
                   # edges ping (keepalive) to notice a cut link: allow one a second
                   ("grpc.http2.min_recv_ping_interval_without_data_ms", 1000),
                   ("grpc.http2.max_ping_strikes", 0),
                   ("grpc.keepalive_permit_without_calls", 1)]  # fmt: skip
        server = grpc.server(futures.ThreadPoolExecutor(max_workers=workers,
                                                        thread_name_prefix="grpc"),
                             interceptors=self._interceptors(), options=options)  # fmt: skip
        pb_grpc.add_SemanticStreamServicer_to_server(
            SemanticStreamServicer(self.manager, self.metrics), server)
        health_pb2_grpc.add_HealthServicer_to_server(self.health, server)
        names = (SERVICE_NAME, health_pb2.DESCRIPTOR.services_by_name["Health"].full_name,
                 reflection.SERVICE_NAME)  # fmt: skip
        reflection.enable_server_reflection(names, server)
        return server

    def start(self) -> DecoderServer:
        """Binds the ports and starts serving."""
        host, port = split_host_port(self.settings.listen, "listen")
        address = f"[{host}]:{port}" if ":" in host else f"{host}:{port}"
        credentials = server_credentials(self.settings)
        try:
            if credentials is None:
                self.port = self._server.add_insecure_port(address)
            else:
                self.port = self._server.add_secure_port(address, credentials)
        except RuntimeError as exc:
            raise ServerStartError(f"cannot listen on {self.settings.listen}: {exc}") from exc
        if not self.port:
            raise ServerStartError(f"cannot listen on {self.settings.listen}")
        self.settings.out.mkdir(parents=True, exist_ok=True)
        if self.settings.metrics_listen:
            self.metrics_port = self.metrics.serve(
                *split_host_port(self.settings.metrics_listen, "metrics_listen"))
        self._server.start()
        for name in ("", SERVICE_NAME):
            self.health.set(name, health_pb2.HealthCheckResponse.SERVING)
        log.info("serving on %s:%d (%s), outputs under %s", host, self.port,
                 "TLS" if credentials else "plaintext", self.settings.out)  # fmt: skip
        return self

    def stop(self, grace_s: float | None = None) -> None:
        """Graceful stop: NOT_SERVING, no new work, streams drained for ``grace_s``."""
        if self._stopped.is_set():
            return
        self._stopped.set()
        grace = self.settings.grace_s if grace_s is None else grace_s
        self.health.enter_graceful_shutdown()
        self.manager.drain()
        time.sleep(self.settings.notice_s)
        self._server.stop(grace).wait()
        self.manager.shutdown()
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
