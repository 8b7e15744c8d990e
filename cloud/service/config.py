"""Settings of ``cloud-decoder serve``: flags, then environment, then a TOML file, then defaults.

Environment variables are ``SEMCODEC_SERVE_<NAME>`` (``SEMCODEC_SERVE_MAX_SESSIONS=8``);
the file (``--config F`` or ``$SEMCODEC_SERVE_CONFIG``) is TOML with the same names in a
``[serve]`` table (``max_sessions = 8``). Unknown names are errors, never ignored.

Every setting is declared once, as a field of :class:`ServeSettings` that carries its help;
:func:`add_serve_arguments` makes the flags of them and :func:`serve_overrides` reads the
flags back, and the session core's limits are derived from them
(:meth:`cloud.service.limits.ServiceLimits.of`).
"""

from __future__ import annotations

import argparse
import dataclasses
import ipaddress
import os
import tomllib
from dataclasses import MISSING, dataclass, field
from pathlib import Path
from typing import Any

ENV_PREFIX = "SEMCODEC_SERVE_"
CONFIG_ENV = "SEMCODEC_SERVE_CONFIG"
#: gRPC's default message limit, which this service never raises (bytes).
GRPC_MESSAGE_LIMIT = 4 << 20


class ConfigError(ValueError):
    """A setting that cannot be used (names the setting and where it came from)."""


def setting(default: Any = MISSING, *, help: str, metavar: str | None = None,
            flag: bool = True) -> Any:  # fmt: skip
    """One serve setting's declaration: a dataclass field whose metadata holds what
    :func:`add_serve_arguments` makes its flag of.

    Args:
        default: its value when nothing sets it (none: the setting is required).
        help: what it means, its unit and what 0 means: the flag's help (its default is
            added there) and the setting's documentation.
        metavar: the flag's value placeholder (None: from the name's unit, see
            :func:`_metavar`).
        flag: whether ``cloud-decoder serve`` has a flag for it (False: only the config file
            and the environment set it).
    """
    return field(default=default, metadata={"help": help, "metavar": metavar, "flag": flag})


@dataclass(frozen=True)
class ServeSettings:
    """Everything ``cloud-decoder serve`` is configured by.

    Each field is declared once, with :func:`setting`: its default, its meaning (``help``:
    units, what 0 means) and its flag (``--max-sessions`` for ``max_sessions``; a boolean
    that is off by default is a switch of its name, one that is on a ``--no-`` switch). The
    flags, the environment's names and the config file's keys all come from these fields.
    """

    out: Path = setting(metavar="DIR", help="the output folder: each session's files go "
                        "under OUT/<tenant>/<session-id>/")  # fmt: skip
    listen: str = setting("127.0.0.1:50051", metavar="HOST:PORT",
                          help="address of the gRPC service (port 0: a free one)")
    tls_cert: Path | None = setting(None, metavar="FILE",
                                    help="PEM certificate chain: serve TLS (with --tls-key)")
    tls_key: Path | None = setting(None, metavar="FILE", help="PEM private key of --tls-cert")
    client_ca: Path | None = setting(None, metavar="FILE", help="PEM CA that client "
                                     "certificates must chain to: mutual TLS")  # fmt: skip
    tokens: Path | None = setting(None, metavar="FILE", help="bearer tokens, one 'TOKEN "
                                  "TENANT' pair per line: tokens required")  # fmt: skip
    allow_anonymous_remote: bool = setting(False, help="serve without --tokens on an address "
                                           "beyond the loopback (refused otherwise: anyone "
                                           "reaching the port could stream and read "
                                           "results)")  # fmt: skip
    metrics_listen: str = setting("127.0.0.1:9464", metavar="HOST:PORT",
                                  help="address of the Prometheus /metrics endpoint ('': none)")
    http_listen: str = setting("", metavar="HOST:PORT", help="address of the HTTP front "
                               "door: dashboard, live view (MJPEG, boxes as events), JSON API, "
                               "on the same tokens, TLS and rule beyond the loopback as the "
                               "gRPC port ('': none)")  # fmt: skip
    tenant_max_viewers: int = setting(8, help="concurrent live viewers (MJPEG or events) per "
                                      "tenant (0: no cap)")  # fmt: skip
    max_viewers: int = setting(64, help="concurrent live viewers in all (0: no cap)")
    viewer_stall_s: float = setting(5.0, help="a viewer whose socket takes nothing for this "
                                    "long, or that takes none of its --viewer-max-behind "
                                    "frames in flight for this long, is dropped, "
                                    "seconds")  # fmt: skip
    viewer_max_behind: int = setting(8, help="frames a live viewer may have been sent and "
                                     "not yet taken (acknowledged by its machine); past it, "
                                     "frames are skipped for it (at least 1)")  # fmt: skip
    http_header_s: float = setting(10.0, help="an HTTP connection must send its first "
                                   "request's head within this long of opening (a TLS "
                                   "handshake included), or it is closed, seconds")  # fmt: skip
    http_body_s: float = setting(10.0, help="an HTTP request's body must come within this "
                                 "long (longer: 408), seconds")  # fmt: skip
    http_keepalive_s: float = setting(15.0, help="an HTTP connection waits this long for its "
                                      "next request's head after an answer, then it is "
                                      "closed; it counts from the opening too, "
                                      "seconds")  # fmt: skip
    http_max_connections: int = setting(1024, help="open HTTP connections in all, and never "
                                        "more than half the open-files limit, so that the "
                                        "gRPC port keeps descriptors (past it: 503 and "
                                        "closed; 0: half the open-files limit)")  # fmt: skip
    http_max_connections_per_peer: int = setting(32, help="open HTTP connections from one "
                                                 "address (past it: 503 and closed; 0: no "
                                                 "cap; behind a reverse proxy all come from "
                                                 "its address)")  # fmt: skip
    http_tenant_rps: float = setting(20.0, metavar="R", help="HTTP requests per second of "
                                     "one tenant (pages, API, viewers' opening): past it a "
                                     "request waits its turn, up to 2 s, then gets 429, so "
                                     "that no tenant's clients slow another's (0: no "
                                     "limit)")  # fmt: skip
    http_tenant_burst: int = setting(40, help="HTTP requests a quiet tenant may make at once "
                                     "beyond --http-tenant-rps")  # fmt: skip
    http_login_rps: float = setting(1.0, metavar="R", help="POST /login per second from one "
                                    "address (5 at once; past it 429; 0: no limit)")  # fmt: skip
    max_sessions: int = setting(64, help="open sessions at once (more: RESOURCE_EXHAUSTED)")
    max_backlog_units: int = setting(32, help="units stored but not yet decoded, per session "
                                     "(more: the stream waits for its decoder)")  # fmt: skip
    max_chunk_kib: int = setting(1024, help="largest chunk of a unit, KiB (below gRPC's 4 MiB "
                                 "message limit: at most 4092)")  # fmt: skip
    max_unit_mib: int = setting(64, help="largest unit, MiB (1 to 64)")
    max_session_kbps: float = setting(0.0, help="per-session rate of unit bytes, kbit/s (1000 "
                                      "bits): a faster stream is read more slowly "
                                      "(back-pressure), not refused (0: unlimited)")  # fmt: skip
    session_burst_kib: int = setting(0, help="what an idle session may send at once beyond "
                                     "--max-session-kbps, KiB (0: one second at the rate, at "
                                     "least 4)")  # fmt: skip
    grace_s: float = setting(10.0, help="on stop, how long streams may take to end before "
                             "they are cut, seconds")  # fmt: skip
    notice_s: float = setting(1.0, help="on stop, how long the server answers NOT_SERVING "
                              "(still serving open sessions) before it drains, so that load "
                              "balancers see it go, seconds")  # fmt: skip
    workers: int = setting(0, help="threads for the session core's blocking work (disk writes "
                           "and fsyncs, opening sessions); an open or idle stream holds none "
                           "(0: 16)")  # fmt: skip
    tenant_max_sessions: int = setting(16, help="open sessions per tenant, so that one tenant "
                                       "cannot take the server from the others (0: no "
                                       "per-tenant bound)")  # fmt: skip
    tenant_max_streams: int = setting(32, help="concurrent streams per tenant (0: no bound)")
    tenant_max_kbps: float = setting(0.0, help="unit bytes per tenant over all its sessions, "
                                     "kbit/s, by back-pressure (0: unlimited)")  # fmt: skip
    tenant_max_decoder_gflops: float = setting(400.0, metavar="G", help="decoder compute per "
                                               "tenant, GFLOP/s, metered from what its "
                                               "sessions' decoders ran: at or over it, a new "
                                               "session whose decoder runs networks is refused "
                                               "(RESOURCE_EXHAUSTED; warp is taken) and its "
                                               "sessions step down their decoders' ladder until "
                                               "it is under (0: no limit). The default is 16 "
                                               "sessions (--tenant-max-sessions) x 25 GFLOP/s, "
                                               "above the median camera of the level-1 result "
                                               "sets with the default decoder at its 0.004 "
                                               "target (dec_flops_per_frame x fps, PETS, "
                                               "zoomed PETS, TUD, TUD at half size in cold "
                                               "start: median 17.9 GFLOP/s; 9.8 to "
                                               "33.5)")  # fmt: skip
    tenant_max_stored_mib: float = setting(4096.0, help="stored streams per tenant on disk, "
                                           "units being received included, MiB (0: "
                                           "unlimited)")  # fmt: skip
    tenant_max_stored_sessions: int = setting(4096, help="sessions per tenant on disk, open, "
                                              "at rest, closed or failed, until --retain-s "
                                              "removes them (more: a new session is "
                                              "RESOURCE_EXHAUSTED; 0: no bound)")  # fmt: skip
    tenant_max_output_mib: float = setting(65536.0, help="decoded outputs per tenant on disk "
                                           "(frames, scaffolds, overview), those being "
                                           "written included, MiB: at it, a new session is "
                                           "refused and a decoder that would pass it fails "
                                           "its session, its partial outputs removed "
                                           "(RESOURCE_EXHAUSTED; 0: unlimited)")  # fmt: skip
    session_idle_s: float = setting(300.0, help="a session without a stream or request for "
                                    "this long is put to rest (decoder stopped, out of memory, "
                                    "resumable), seconds (0: never)")  # fmt: skip
    retain_s: float = setting(7 * 86400.0, help="a session at rest (open and idle, or closed) "
                              "this long is removed from disk, its outputs with it, seconds "
                              "(0: never)")  # fmt: skip
    stream_start_s: float = setting(10.0, help="a stream must send its StreamStart within "
                                    "this long, seconds")  # fmt: skip
    stream_idle_s: float = setting(300.0, help="a stream may stay quiet between units this "
                                   "long, seconds")  # fmt: skip
    progress_window_s: float = setting(30.0, help="a unit in progress must bring "
                                       "--min-progress-bytes in every window this long "
                                       "(slower: DEADLINE_EXCEEDED), seconds")  # fmt: skip
    min_progress_bytes: int = setting(1024, help="bytes a unit in progress must bring in "
                                      "every --progress-window-s")  # fmt: skip
    keepalive_s: float = setting(60.0, help="the server pings a quiet connection this often "
                                 "and drops it when the ping goes unanswered, seconds")
    keepalive_timeout_s: float = setting(20.0, flag=False, help="how long a keepalive ping "
                                         "may go unanswered, seconds")  # fmt: skip
    max_connection_idle_s: float = setting(300.0, help="a connection without calls is closed "
                                           "after this long, seconds (0: never)")  # fmt: skip
    max_connection_age_s: float = setting(3600.0, help="a connection is asked to go away "
                                          "after this long (edges reconnect and resume), "
                                          "seconds (0: never)")  # fmt: skip
    max_connection_age_grace_s: float = setting(30.0, flag=False, help="how long the calls of "
                                                "a connection asked to go away may take to "
                                                "end, seconds")  # fmt: skip
    max_streams_per_connection: int = setting(32, help="concurrent calls on one HTTP/2 "
                                              "connection")  # fmt: skip
    max_calls: int = setting(8192, help="concurrent calls on the server (more: "
                             "RESOURCE_EXHAUSTED; 0: no cap)")  # fmt: skip
    max_open_streams: int = setting(256, help="concurrent reflection streams, which are "
                                    "unauthenticated; with --max-watch-streams it stays below "
                                    "--max-calls, so that unauthenticated calls leave room for "
                                    "the others")  # fmt: skip
    max_watch_streams: int = setting(4096, help="concurrent health Watch streams, which are "
                                     "unauthenticated, apart from reflection")  # fmt: skip
    max_watch_streams_per_peer: int = setting(4, help="concurrent health Watch streams from "
                                              "one address, so that one client cannot take "
                                              "--max-watch-streams from the others (0: no "
                                              "cap; behind a load balancer all come from its "
                                              "address)")  # fmt: skip
    trusted_proxies: str = setting("", metavar="ADDRESSES", help="load balancers or reverse "
                                   "proxies whose X-Forwarded-For is believed, as addresses "
                                   "or networks, comma-separated (10.0.0.0/8,127.0.0.1): "
                                   "behind them the caps and paces per address (health Watch "
                                   "streams, calls, logins, refusals' log lines) count the "
                                   "client the header names, not the proxy; the HTTP "
                                   "connections per address still count the proxy's ('': "
                                   "none, the header is ignored)")  # fmt: skip
    max_calls_per_peer: int = setting(0, help="concurrent calls from one address (0: no cap; "
                                      "behind a load balancer all calls come from its "
                                      "address)")  # fmt: skip
    decode_threads: int = setting(0, help="frames decoded at once over all sessions (0: the "
                                  "machine's cores)")  # fmt: skip
    decoder: str = setting("", metavar="NAME[,KEY=VALUE...]", help="the decoder of sessions "
                           "whose request names none (a request's KEY=VALUE,... is laid over "
                           "it): a reconstructor and its options as "
                           "`cloud-decoder decode --decoder` takes them, e.g. "
                           "restore,person_matte=none or warp,sr=esrgan-slim ('': the best "
                           "measured for a viewer, as `cloud-decoder decode --help` "
                           "shows it)")  # fmt: skip
    decoder_ladder: bool = setting(True, help="no stepping down: a session's decoder that "
                                   "falls behind its camera, or whose tenant is over "
                                   "--tenant-max-decoder-gflops, steps down a ladder of cheaper "
                                   "rungs (no person matte, no restorer) by default, and back "
                                   "up when it has caught up")  # fmt: skip
    overview: bool = setting(True, help="no overview.mp4 per session (written by default)")
    flow_prior: Path | None = setting(None, metavar="FILE", help="the flow prior file the "
                                      "edges use, when not the shipped one")  # fmt: skip
    bottleneck_dir: Path | None = setting(None, metavar="DIR", help="detect-mode streams: a "
                                          "folder of bottleneck files (*.pt from "
                                          "`semcodec-bench train-bottleneck`) looked in beside "
                                          "the shipped ones; a stream whose bottleneck is "
                                          "found nowhere is refused "
                                          "(FAILED_PRECONDITION)")  # fmt: skip

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
        for name in ("max_sessions", "max_backlog_units", "viewer_max_behind"):
            if getattr(self, name) < 1:
                raise ConfigError(f"{name} must be at least 1")
        for name in ("stream_start_s", "stream_idle_s", "progress_window_s", "keepalive_s",
                     "keepalive_timeout_s", "max_streams_per_connection",
                     "viewer_stall_s", "http_header_s", "http_body_s",
                     "http_keepalive_s"):  # fmt: skip
            if getattr(self, name) <= 0:
                raise ConfigError(f"{name} {getattr(self, name)}: must be positive")
        for name in ("max_session_kbps", "session_burst_kib", "workers", "tenant_max_sessions",
                     "tenant_max_streams", "tenant_max_kbps", "tenant_max_stored_mib",
                     "tenant_max_stored_sessions", "tenant_max_output_mib",
                     "tenant_max_decoder_gflops",
                     "session_idle_s", "retain_s", "min_progress_bytes",
                     "max_connection_idle_s", "max_connection_age_s",
                     "max_connection_age_grace_s", "max_calls", "max_open_streams",
                     "max_watch_streams", "max_watch_streams_per_peer",
                     "tenant_max_viewers", "max_viewers",
                     "max_calls_per_peer", "decode_threads", "http_max_connections",
                     "http_max_connections_per_peer", "http_tenant_rps",
                     "http_tenant_burst", "http_login_rps"):  # fmt: skip
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
        proxy_networks(self.trusted_proxies)
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


def proxy_networks(text: str) -> tuple:
    """The networks of ``trusted_proxies`` (an address is a network of one).

    Raises:
        ConfigError: an entry that is no address or network.
    """
    networks = []
    for entry in filter(None, (part.strip() for part in text.split(","))):
        try:
            networks.append(ipaddress.ip_network(entry, strict=False))
        except ValueError:
            raise ConfigError(f"trusted_proxies {entry!r}: expected an address or a network "
                              "(10.0.0.0/8)") from None  # fmt: skip
    return tuple(networks)


def client_address(peer: str, forwarded: str | None, trusted: tuple) -> str:
    """Who a request comes from: ``peer`` (its connection's address), or, when ``peer`` is a
    trusted proxy, the nearest address of its ``X-Forwarded-For`` (read from the right, each
    trusted proxy skipped) that is not one: what a client writes there itself is only ever
    to the left of what the proxies add."""
    def is_trusted(address: str) -> bool | None:  # None: not an address
        try:
            ip = ipaddress.ip_address(address.strip("[]"))
        except ValueError:
            return None
        return any(ip in network for network in trusted)

    if not trusted or not forwarded or not is_trusted(peer):
        return peer
    for hop in reversed([part.strip() for part in forwarded.split(",")]):
        verdict = is_trusted(hop)
        if verdict is None:  # not an address: nothing further left can be believed
            break
        if not verdict:
            return hop
    return peer


_FIELDS = {f.name: f for f in dataclasses.fields(ServeSettings)}
#: The settings ``cloud-decoder serve`` has a flag for, in their declaration's order.
FLAG_FIELDS = tuple(name for name, f in _FIELDS.items() if f.metadata["flag"])
#: The value placeholder of a flag by its setting's unit (the name's ending).
_UNIT_METAVARS = {"_s": "S", "_kbps": "K", "_kib": "K", "_mib": "M", "_bytes": "B"}


def _kind(name: str) -> type:
    """The type of setting ``name``'s values: ``Path``, ``bool``, ``int``, ``float`` or
    ``str`` (its annotation, read as text: ``Path | None`` is ``Path``)."""
    annotation = str(_FIELDS[name].type)
    kinds = {"Path": Path, "bool": bool, "int": int, "float": float}
    return next((k for text, k in kinds.items() if annotation.startswith(text)), str)


def _convert(name: str, value: Any, where: str) -> Any:
    kind = _kind(name)
    try:
        if kind is Path:
            return None if value in (None, "") else Path(value)
        if kind is bool:
            if isinstance(value, bool):
                return value
            if str(value).lower() in ("1", "true", "yes", "on"):
                return True
            if str(value).lower() in ("0", "false", "no", "off"):
                return False
            raise ValueError(value)
        return kind(value)
    except (TypeError, ValueError):
        raise ConfigError(f"{name} = {value!r} ({where}): expected "
                          f"{_FIELDS[name].type}") from None  # fmt: skip


def flag_of(name: str) -> str:
    """The flag of setting ``name``: ``--max-sessions`` for ``max_sessions``; a boolean on by
    default is turned off by ``--no-NAME``."""
    negated = _kind(name) is bool and _FIELDS[name].default is True
    return ("--no-" if negated else "--") + name.replace("_", "-")


def flag_help(name: str) -> str:
    """The help of setting ``name``'s flag: what it means, then its default (a switch's is
    not to give it; a setting without one is required)."""
    text, default = _FIELDS[name].metadata["help"], _FIELDS[name].default
    if _kind(name) is bool:
        return text
    if default is MISSING:
        return f"{text} (required)"
    if default is None or default == "":
        shown = "none" if default is None else "''"
    else:
        shown = str(int(default) if isinstance(default, float) and default.is_integer()
                    else default)  # fmt: skip
    return f"{text} (default: {shown})"


def _metavar(name: str) -> str:
    """The flag's value placeholder: declared, else from the name's unit, else ``N``."""
    declared = _FIELDS[name].metadata["metavar"]
    unit = next((m for end, m in _UNIT_METAVARS.items() if name.endswith(end)), "N")
    return declared or unit


#: What ``serve --help`` ends with: what serving beyond the loopback needs.
BEYOND_LOOPBACK = (
    "Beyond the loopback (--listen or --http-listen on another address): give --tokens FILE "
    "('TOKEN TENANT' per line; without it the start is refused unless "
    "--allow-anonymous-remote) and --tls-cert with --tls-key (without them tokens and login "
    "cookies cross the network readable; --client-ca asks clients for certificates). The "
    "metrics port asks no token: keep --metrics-listen on the loopback or behind a firewall. "
    "Behind a load balancer or reverse proxy every connection comes from its address: give "
    "--trusted-proxies its address (its X-Forwarded-For then names the client), and raise "
    "--http-max-connections-per-peer (0: no cap). The start-up log says, for each port, what "
    "it exposes and who can reach it.")


def add_serve_arguments(parser: argparse.ArgumentParser) -> None:
    """Adds ``--config`` and a flag for every setting of :data:`FLAG_FIELDS` to ``parser``:
    its help is the setting's, with its default; an unset flag is None (see
    :func:`serve_overrides`). The help ends with :data:`BEYOND_LOOPBACK` (unless the parser
    has an epilog of its own)."""
    if parser.epilog is None:
        parser.epilog = BEYOND_LOOPBACK
    parser.add_argument("--config", type=Path, metavar="FILE",
                        help=f"TOML settings, in a [serve] table (default: ${CONFIG_ENV})")
    for name in FLAG_FIELDS:
        kind, text = _kind(name), flag_help(name).replace("%", "%%")
        if kind is bool:
            parser.add_argument(flag_of(name), dest=name, action="store_const",
                                const=not _FIELDS[name].default, help=text)  # fmt: skip
        else:
            parser.add_argument(flag_of(name), type=None if kind is str else kind,
                                metavar=_metavar(name), help=text)  # fmt: skip


def serve_overrides(args: argparse.Namespace) -> dict[str, Any]:
    """The settings the flags of :func:`add_serve_arguments` give, for :func:`load_settings`
    (None: the flag was not given)."""
    return {name: getattr(args, name) for name in FLAG_FIELDS}


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
