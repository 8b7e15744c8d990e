"""A session's decoder and a tenant's decoder compute.

A session request may name its decoder (the text :meth:`~codec.reconstruct.pipeline.
DecoderSpec.parse` reads; empty: the server's ``--decoder``). :func:`choose_decoder` resolves
it against the server's default and checks it against the stream before the session exists:
a decoder or option that does not exist or cannot apply, a decoder named for a detect-mode
stream, a file of the server named by a tenant, a memory above the server's, or networks
the server cannot have are refused with a message that says what to change.

Each session's decoder FLOPs are metered from what it ran (:class:`FlopsMeter`: FLOPs per
wall second over a window), and each tenant's sum is held to its limit
(:class:`ComputeBudget`, ``tenant_max_decoder_gflops``): at or over it, a new session whose
decoder runs networks is refused (RESOURCE_EXHAUSTED; ``warp`` is taken), and the tenant's
sessions are held one rung further down their decoders' ladders at a time until it is under
again, then let back up.
"""

from __future__ import annotations

import collections
import logging
import threading
import time

from semcodec.cloud.service.errors import (
    InvalidRequestError,
    MissingModelsError,
    QuotaError,
    ServiceError,
)

log = logging.getLogger("semcodec.cloud.service")


class ComputeQuotaError(QuotaError):
    """A tenant at or over its decoder compute limit asked for a decoder that runs networks."""


class DecoderMismatchError(ServiceError):
    """A resume that names another decoder than the one the session was opened with."""

    code = "FAILED_PRECONDITION"


# ------------------------------------------------------------------ choosing a decoder


def _server_files() -> dict[str, tuple[str, ...]]:
    """The options whose value may name a file of the server, and the shipped names a
    session may give them instead."""
    from semcodec.codec.reconstruct.pipeline import NO_REDRAW
    from semcodec.codec.reconstruct.refiner import SHIPPED_REFINERS
    from semcodec.codec.reconstruct.restore import SHIPPED_REDRAWERS, SHIPPED_RESTORERS

    return {"weights": SHIPPED_RESTORERS,
            "refiner": (*SHIPPED_REFINERS, *SHIPPED_REFINERS.values()),
            "redraw": (*SHIPPED_REDRAWERS, *SHIPPED_REDRAWERS.values(), NO_REDRAW)}  # fmt: skip


def _memory_mb(spec) -> float:
    """The memory of references ``spec`` keeps per stream, MB (its reconstructor's default
    where not given)."""
    from semcodec.codec.reconstruct.restore import DEFAULT_MEMORY_MB

    return float(dict(spec.options).get("memory_mb", DEFAULT_MEMORY_MB))


def parse_decoder(text: str, default):
    """The :class:`~codec.reconstruct.pipeline.DecoderSpec` of a session's ``text`` (""
    or ``KEY=VALUE,...``: over the server's ``default``).

    Raises:
        InvalidRequestError: a decoder or an option that does not exist or has a bad value.
    """
    from semcodec.codec.reconstruct.pipeline import DecoderOptionError, DecoderSpec

    try:
        return DecoderSpec.parse(text, default)
    except DecoderOptionError as exc:
        said = str(exc)
        raise InvalidRequestError(said if said.startswith("decoder ")
                                  else f"decoder {text!r}: {said}") from None  # fmt: skip


def choose_decoder(header, text: str, default):
    """The decoder a session of the stream of ``header`` is decoded with, checked; None for
    a detect-mode stream (decoded to detections).

    Args:
        header: the stream's :class:`~codec.bitstream.StreamHeader`.
        text: the request's decoder ("": ``default``).
        default: the server's :class:`~codec.reconstruct.pipeline.DecoderSpec`.

    Raises:
        InvalidRequestError: a decoder named for a detect-mode stream; a decoder or option
            that does not exist, has a bad value or cannot apply to the stream; a file of the
            server named as weights or refiner; a memory above the server's default decoder's.
        MissingModelsError: networks of the decoder this server cannot have.
    """
    from semcodec.codec.task import is_detect_stream

    if is_detect_stream(header):
        if text.strip():
            raise InvalidRequestError(f"decoder {text!r}: a task-mode (detect) stream is decoded "
                                      "to detections by its bottleneck and takes no decoder; "
                                      "leave decoder empty")  # fmt: skip
        return None
    from semcodec.codec.reconstruct.pipeline import DecoderOptionError

    spec = parse_decoder(text, default)
    try:
        spec.check(header)
    except DecoderOptionError as exc:
        raise InvalidRequestError(f"decoder {text or str(spec)!r}: {exc}") from None
    if spec == default:  # its networks were had when the server started
        return spec
    given, server = dict(spec.options), dict(default.options)
    for key, names in _server_files().items():
        if key in given and given[key] != server.get(key) and str(given[key]) not in names:
            raise InvalidRequestError(f"decoder {text!r}: {key}={given[key]}: a session may name "
                                      f"shipped {key} only ({', '.join(names)}); other files "
                                      "are the server's to choose (its --decoder)")  # fmt: skip
    if _memory_mb(spec) > _memory_mb(default):
        raise InvalidRequestError(f"decoder {text!r}: memory_mb={_memory_mb(spec):g} is above "
                                  f"this server's {_memory_mb(default):g} MB per stream (its "
                                  "--decoder); ask for less")  # fmt: skip
    _check_networks(spec, text)
    return spec


def _check_networks(spec, text: str) -> None:
    """Refuses a decoder whose networks this server cannot have (or that refuses its
    options when made)."""
    from semcodec.codec.core.models import ModelError
    from semcodec.codec.reconstruct.pipeline import DecoderOptionError

    try:
        spec.build()
    except DecoderOptionError as exc:
        raise InvalidRequestError(f"decoder {text!r}: {exc}") from None
    except (ModelError, OSError) as exc:
        raise MissingModelsError(f"decoder {text!r}: this server cannot have its networks: "
                                 f"{exc}") from None  # fmt: skip


# ------------------------------------------------------------------ metering


class FlopsMeter:
    """One session decoder's FLOPs per wall second over the last ``window_s`` seconds
    (thread-safe; ``clock``: monotonic seconds)."""

    def __init__(self, window_s: float, clock=time.monotonic) -> None:
        if not window_s > 0:
            raise ValueError(f"window_s {window_s}: must be > 0")
        self.window_s, self._clock = float(window_s), clock
        self._ran: collections.deque[tuple[float, float]] = collections.deque()
        self._sum = 0.0  # of the FLOPs in _ran
        self._started: float | None = None
        self._lock = threading.Lock()

    def add(self, flops: float) -> None:
        """Books ``flops`` (>= 0) the decoder ran for one frame, now."""
        now = self._clock()
        with self._lock:
            self._started = now if self._started is None else self._started
            self._ran.append((now, max(0.0, float(flops))))
            self._sum += self._ran[-1][1]

    def rate(self, now: float | None = None) -> float:
        """FLOP/s over the window: the FLOPs booked in it over its span (the time since the
        first booking while shorter, at least a second or the window)."""
        now = self._clock() if now is None else now
        with self._lock:
            while self._ran and self._ran[0][0] < now - self.window_s:
                self._sum -= self._ran.popleft()[1]
            if not self._ran or self._started is None:
                self._sum = 0.0  # no drift from the running sum
                return 0.0
            span = max(min(1.0, self.window_s), min(self.window_s, now - self._started))
            return max(0.0, self._sum) / span


class ComputeBudget:
    """One tenant's decoder compute against its limit; thread-safe.

    Its sessions' meters are summed (:meth:`usage`). :meth:`rung` is the rung of their
    decoders' ladders the tenant's sessions are held at, at least: at or over the limit, one
    rung further down every ``window_s`` (by then the meters show the new rung); under
    ``UP_MARGIN`` x the limit ``retry_s`` after the last change (first ``2 x window_s``), one
    rung back up; a step down within ``retry_s`` of a step up doubles it (at most
    ``MAX_RETRY_S``), so a tenant that cannot hold the better rung does not flap.

    Args:
        tenant: its name (for messages).
        limit: FLOP/s (0: no limit).
        window_s: seconds (see :class:`FlopsMeter`).
    """

    UP_MARGIN = 0.6
    MAX_RETRY_S = 120.0
    #: The usage is summed at most this often by :meth:`rung` (each decoder asks each
    #: frame), seconds.
    CHECK_EVERY_S = 0.5

    def __init__(self, tenant: str, limit: float, window_s: float,
                 clock=time.monotonic) -> None:  # fmt: skip
        self.tenant, self.limit, self.window_s, self._clock = tenant, float(limit), window_s, clock
        self._meters: dict[FlopsMeter, int] = {}  # meter: its ladder's deepest rung
        self._rung = 0
        self._changed_at = clock()
        self._retry = self._base_retry = 2 * window_s
        self._last_up_at: float | None = None
        self._checked_at = -float("inf")
        self._lock = threading.Lock()

    def add(self, meter: FlopsMeter, depth: int) -> None:
        """Counts a session's decoder, whose ladder goes ``depth`` rungs down."""
        with self._lock:
            self._meters[meter] = max(0, int(depth))

    def remove(self, meter: FlopsMeter) -> None:
        with self._lock:
            self._meters.pop(meter, None)

    def usage(self, now: float | None = None) -> float:
        """The tenant's decoders' FLOP/s (see :meth:`FlopsMeter.rate`)."""
        with self._lock:
            meters = list(self._meters)
        return sum(m.rate(now) for m in meters)

    def over(self, now: float | None = None) -> bool:
        """Whether a limit is set and the usage is at or over it."""
        return self.limit > 0 and self.usage(now) >= self.limit

    def check_open(self, spec) -> None:
        """Refuses a new session of decoder ``spec`` (that runs networks) while the tenant
        is at or over its limit.

        Raises:
            ComputeQuotaError: its usage, its limit and what to do.
        """
        if spec is None or not spec.runs_networks() or not self.over():
            return
        raise ComputeQuotaError(f"tenant {self.tenant}'s decoders run "
                                f"{self.usage() / 1e9:.2f} GFLOP/s, at or over its limit of "
                                f"{self.limit / 1e9:g} GFLOP/s (tenant_max_decoder_gflops), "
                                f"and decoder {spec} runs networks: ask for decoder=warp (no "
                                "network), or close a session and retry")  # fmt: skip

    def rung(self) -> int:
        """The rung the tenant's sessions decode at, at least (0: full); may step it."""
        if self.limit <= 0:
            return 0
        now = self._clock()
        with self._lock:
            if now - self._changed_at < self.window_s or \
                    now - self._checked_at < self.CHECK_EVERY_S:  # fmt: skip
                return self._rung
            self._checked_at = now
            depth = max(self._meters.values(), default=0)
        usage = self.usage(now)
        with self._lock:
            if now - self._changed_at < self.window_s:  # another decoder stepped meanwhile
                return self._rung
            if usage >= self.limit and self._rung < depth:
                if self._last_up_at is not None and now - self._last_up_at < self._retry:
                    self._retry = min(2 * self._retry, self.MAX_RETRY_S)
                self._step(self._rung + 1, now, usage)
            elif usage < self.UP_MARGIN * self.limit and self._rung > 0 \
                    and now - self._changed_at >= self._retry:  # fmt: skip
                self._last_up_at = now
                self._step(self._rung - 1, now, usage)
            return self._rung

    def _step(self, rung: int, now: float, usage: float) -> None:
        log.info("tenant %s: decoders at %.2f GFLOP/s, %s its limit of %g GFLOP/s: its "
                 "sessions decode at rung %d of their ladders or below", self.tenant,
                 usage / 1e9, "over" if rung > self._rung else "under", self.limit / 1e9,
                 rung)  # fmt: skip
        self._rung, self._changed_at = rung, now
