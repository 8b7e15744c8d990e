"""Settings of ``cloud-decoder serve``: flags, then environment, then a TOML file, then defaults.

Environment variables are ``SEMCODEC_SERVE_<NAME>`` (``SEMCODEC_SERVE_MAX_SESSIONS=8``);
the file (``--config F`` or ``$SEMCODEC_SERVE_CONFIG``) is TOML with the same names in a
``[serve]`` table (``max_sessions = 8``). Unknown names are errors, never ignored.
"""

from __future__ import annotations

import dataclasses
import ipaddress
import os
import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ENV_PREFIX = "SEMCODEC_SERVE_"
CONFIG_ENV = "SEMCODEC_SERVE_CONFIG"
#: gRPC's default message limit, which this service never raises (bytes).
GRPC_MESSAGE_LIMIT = 4 << 20


class ConfigError(ValueError):
    """A setting that cannot be used (names the setting and where it came from)."""


@dataclass(frozen=True)
class ServeSettings:
    """Everything ``cloud-decoder serve`` is configured by.

    Attributes:
        listen: ``HOST:PORT`` of the gRPC service (port 0: a free one).
        out: the output folder (sessions under ``out/<tenant>/<session-id>``).
        tls_cert, tls_key: PEM certificate chain and private key: serve TLS.
        client_ca: PEM CA that client certificates must chain to: mutual TLS.
        tokens: tokens file (``TOKEN TENANT`` per line): bearer tokens required.
        allow_anonymous_remote: serve without tokens on an address beyond the loopback (by
            default refused: anyone who reaches the port could stream and read results).
        metrics_listen: ``HOST:PORT`` of the Prometheus ``/metrics`` endpoint ("": none).
        http_listen: ``HOST:PORT`` of the HTTP front door (dashboard, live view, MJPEG,
            events, JSON API; "": none, the default). Same tokens, TLS and rule beyond the
            loopback as the gRPC port.
        tenant_max_viewers, max_viewers: concurrent live viewers (MJPEG or events) per
            tenant and in all (0: no cap).
        viewer_stall_s: a viewer whose socket takes nothing for this long is dropped.
        max_sessions: open sessions at once.
        max_backlog_units: per-session units stored but not yet decoded.
        max_chunk_kib: largest chunk of a unit, KiB (below gRPC's 4 MiB message limit).
        max_unit_mib: largest unit, MiB (at most 64).
        max_session_kbps: per-session rate of unit bytes, kbit/s (1000 bits; 0: unlimited):
            a faster stream is slowed down by reading it later (back-pressure), not refused.
        session_burst_kib: what an idle session may send at once beyond that rate, KiB
            (0: one second at the rate, at least 4 KiB).
        grace_s: seconds a stop waits for streams to end before cutting them.
        notice_s: seconds a stop answers NOT_SERVING (still serving open sessions) before
            it drains, so load balancers see it go.
        workers: threads for the session core's blocking work (disk writes and fsyncs,
            opening sessions); an open or idle stream holds none (0: 16).
        tenant_max_sessions, tenant_max_streams: open sessions and concurrent streams per
            tenant (0: no per-tenant bound). On by default (16 of the 64 sessions, 32
            streams): one tenant cannot take the server from the others.
        tenant_max_kbps: unit bytes per tenant, kbit/s, over all its sessions (back-pressure;
            0: unlimited).
        tenant_max_stored_mib: stored streams per tenant on disk, units being received
            included, MiB (0: unlimited; 4096 by default).
        session_idle_s: a session without a stream or request for this long is put to rest
            (decoder stopped, out of memory, resumable; 0: never).
        retain_s: a session at rest (open and idle, or closed) this long is removed from
            disk, its outputs with it (0: never).
        stream_start_s: a stream must send its StreamStart within this long.
        stream_idle_s: a stream may stay quiet between units this long.
        progress_window_s, min_progress_bytes: a unit in progress must bring at least that
            many bytes in every window (slower: DEADLINE_EXCEEDED).
        keepalive_s, keepalive_timeout_s: the server pings a quiet connection this often and
            drops it when the ping is not answered in time.
        max_connection_idle_s: a connection without calls is closed after this long (0: never).
        max_connection_age_s, max_connection_age_grace_s: a connection is asked to go away
            after this long (0: never), its calls given the grace to end (edges reconnect and
            resume).
        max_streams_per_connection: concurrent calls on one HTTP/2 connection.
        max_calls: concurrent calls on the server (more: RESOURCE_EXHAUSTED; 0: no cap).
        max_open_streams: concurrent reflection streams (unauthenticated; 0: no cap).
        max_watch_streams: concurrent health ``Watch`` streams (unauthenticated, apart from
            reflection; 0: no cap). Both caps together stay below ``max_calls``, so that
            unauthenticated calls always leave room for authenticated ones.
        max_calls_per_peer: concurrent calls from one address (0: no cap; behind a load
            balancer all calls come from its address).
        decode_threads: frames decoded at once over all sessions (0: the machine's cores).
        decoder: reconstructor name.
        sr: the plate's upscaler where an edge sent it smaller than the frame (``bicubic``,
            or a network of ``codec.reconstruct.superres``: ``cloud-decoder decode --sr``).
        overview: write overview.mp4 per session.
        flow_prior: the flow prior file the edges use, when not the shipped one.
        bottleneck_dir: a folder of bottleneck files (``*.pt``, from ``semcodec-bench
            train-bottleneck``) for detect-mode streams, beside the shipped ones.
    """

    out: Path
    listen: str = "127.0.0.1:50051"
    tls_cert: Path | None = None
    tls_key: Path | None = None
    client_ca: Path | None = None
    tokens: Path | None = None
    allow_anonymous_remote: bool = False
    metrics_listen: str = "127.0.0.1:9464"
    http_listen: str = ""
    tenant_max_viewers: int = 8
    max_viewers: int = 64
    viewer_stall_s: float = 5.0
    max_sessions: int = 64
    max_backlog_units: int = 32
    max_chunk_kib: int = 1024
    max_unit_mib: int = 64
    max_session_kbps: float = 0.0
    session_burst_kib: int = 0
    grace_s: float = 10.0
    notice_s: float = 1.0
    workers: int = 0  # 0: 16
    decoder: str = "warp"
    sr: str = "bicubic"
    overview: bool = True
    flow_prior: Path | None = None
    bottleneck_dir: Path | None = None
    tenant_max_sessions: int = 16
    tenant_max_streams: int = 32
    tenant_max_kbps: float = 0.0
    tenant_max_stored_mib: float = 4096.0
    session_idle_s: float = 300.0
    retain_s: float = 7 * 86400.0
    stream_start_s: float = 10.0
    stream_idle_s: float = 300.0
    progress_window_s: float = 30.0
    min_progress_bytes: int = 1024
    keepalive_s: float = 60.0
    keepalive_timeout_s: float = 20.0
    max_connection_idle_s: float = 300.0
    max_connection_age_s: float = 3600.0
    max_connection_age_grace_s: float = 30.0
    max_streams_per_connection: int = 32
    max_calls: int = 8192
    max_open_streams: int = 256
    max_watch_streams: int = 4096
    max_calls_per_peer: int = 0
    decode_threads: int = 0

    def check(self) -> ServeSettings:
        """Raises :class:`ConfigError` for inconsistent settings; returns self."""
        if (self.tls_cert is None) != (self.tls_key is None):
            raise ConfigError("tls_cert and tls_key go together")
        if self.client_ca is not None and self.tls_cert is None:
            raise ConfigError("client_ca (mutual TLS) needs tls_cert and tls_key")
        if not 1 <= self.max_chunk_kib * 1024 + 4096 <= GRPC_MESSAGE_LIMIT:
            raise ConfigError(f"max_chunk_kib {self.max_chunk_kib}: a chunk must stay below "
                              "gRPC's 4 MiB message limit (at most 4092 KiB)")  # fmt: skip
        if not 1 <= self.max_unit_mib <= 64:
            raise ConfigError(f"max_unit_mib {self.max_unit_mib}: expected 1 to 64")
        for name in ("max_sessions", "max_backlog_units"):
            if getattr(self, name) < 1:
                raise ConfigError(f"{name} must be at least 1")
        for name in ("stream_start_s", "stream_idle_s", "progress_window_s", "keepalive_s",
                     "keepalive_timeout_s", "max_streams_per_connection",
                     "viewer_stall_s"):  # fmt: skip
            if getattr(self, name) <= 0:
                raise ConfigError(f"{name} {getattr(self, name)}: must be positive")
        for name in ("max_session_kbps", "session_burst_kib", "workers", "tenant_max_sessions",
                     "tenant_max_streams", "tenant_max_kbps", "tenant_max_stored_mib",
                     "session_idle_s", "retain_s", "min_progress_bytes",
                     "max_connection_idle_s", "max_connection_age_s",
                     "max_connection_age_grace_s", "max_calls", "max_open_streams",
                     "max_watch_streams", "tenant_max_viewers", "max_viewers",
                     "max_calls_per_peer", "decode_threads"):  # fmt: skip
            if getattr(self, name) < 0:
                raise ConfigError(f"{name} {getattr(self, name)}: must be 0 (none) or more")
        if self.bottleneck_dir is not None and not self.bottleneck_dir.is_dir():
            raise ConfigError(f"bottleneck_dir {self.bottleneck_dir}: no such folder")
        for name in ("listen", "http_listen"):
            self._check_anonymous(name)
        unauthenticated = self.max_open_streams + self.max_watch_streams
        if self.max_calls and (not self.max_open_streams or not self.max_watch_streams
                               or unauthenticated >= self.max_calls):  # fmt: skip
            raise ConfigError(f"max_open_streams + max_watch_streams ({unauthenticated}) must "
                              f"be capped and below max_calls ({self.max_calls}): "
                              "unauthenticated calls must leave room for the others")  # fmt: skip
        if self.metrics_listen:
            split_host_port(self.metrics_listen, "metrics_listen")
        return self

    def _check_anonymous(self, name: str) -> None:
        """Refuses an address beyond the loopback without tokens (unless asked for)."""
        address = getattr(self, name)
        if not address:
            return
        host, _ = split_host_port(address, name)
        if self.tokens is None and not self.allow_anonymous_remote and not is_loopback(host):
            raise ConfigError(f"{name} {address!r} is beyond the loopback address and no "
                              "tokens are set: anyone who reaches it could stream and read "
                              "results. Give --tokens FILE, listen on 127.0.0.1, or pass "
                              "--allow-anonymous-remote to serve anyone on purpose")  # fmt: skip


def split_host_port(text: str, name: str) -> tuple[str, int]:
    """``("host", port)`` of ``HOST:PORT`` (``[::1]:50051`` for IPv6)."""
    host, sep, port = text.rpartition(":")
    if not sep or not host or not port.isdigit() or int(port) > 65535:
        raise ConfigError(f"{name} {text!r}: expected HOST:PORT")
    return host.strip("[]"), int(port)


def is_loopback(host: str) -> bool:
    """Whether ``host`` (a name or an address) only ever means this machine: ``localhost``
    or a loopback address. Any other name counts as beyond the loopback (it may resolve
    anywhere); so do ``0.0.0.0``, ``::`` and the empty host (every interface)."""
    if host.lower() in ("localhost", "localhost."):
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


_FIELDS = {f.name: f for f in dataclasses.fields(ServeSettings)}


def _convert(name: str, value: Any, where: str) -> Any:
    kind = str(_FIELDS[name].type)
    try:
        if kind.startswith("Path"):
            return None if value in (None, "") else Path(value)
        if kind == "bool":
            if isinstance(value, bool):
                return value
            if str(value).lower() in ("1", "true", "yes", "on"):
                return True
            if str(value).lower() in ("0", "false", "no", "off"):
                return False
            raise ValueError(value)
        if kind == "int":
            return int(value)
        if kind == "float":
            return float(value)
        return str(value)
    except (TypeError, ValueError):
        raise ConfigError(f"{name} = {value!r} ({where}): expected {kind}") from None


def _from_file(path: Path) -> dict[str, Any]:
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except (OSError, tomllib.TOMLDecodeError) as exc:
        raise ConfigError(f"config file {path}: {exc}") from exc
    table = data.get("serve", {})
    extra = set(data) - {"serve"} | set(table) - set(_FIELDS)
    if extra:
        raise ConfigError(f"config file {path}: unknown setting(s) {', '.join(sorted(extra))} "
                          f"(known, in a [serve] table: {', '.join(_FIELDS)})")  # fmt: skip
    return {k: _convert(k, v, str(path)) for k, v in table.items()}


def _from_env(environ: dict[str, str]) -> dict[str, Any]:
    values = {}
    for key, value in environ.items():
        if not key.startswith(ENV_PREFIX) or key == CONFIG_ENV:
            continue
        name = key[len(ENV_PREFIX) :].lower()
        if name not in _FIELDS:
            raise ConfigError(f"${key}: unknown setting (known: {', '.join(_FIELDS)})")
        values[name] = _convert(name, value, f"${key}")
    return values


def load_settings(flags: dict[str, Any], config: Path | None = None,
                  environ: dict[str, str] | None = None) -> ServeSettings:  # fmt: skip
    """Merges defaults < config file < environment < flags (None flags are unset).

    Raises:
        ConfigError: an unknown or malformed setting, a missing ``out``, or inconsistency.
    """
    environ = dict(os.environ if environ is None else environ)
    if config is None and environ.get(CONFIG_ENV):
        config = Path(environ[CONFIG_ENV])
    values: dict[str, Any] = _from_file(config) if config is not None else {}
    values.update(_from_env(environ))
    values.update({k: _convert(k, v, "flag") for k, v in flags.items() if v is not None})
    if values.get("out") is None:
        raise ConfigError("the output folder is not set: --out DIR (or out = ... in the "
                          f"config file, or ${ENV_PREFIX}OUT)")  # fmt: skip
    return ServeSettings(**values).check()
