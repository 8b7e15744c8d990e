"""The limits the session core enforces (:class:`ServiceLimits`, derived from the serve
settings), the token bucket its rate limits use, and how long a close may wait.
"""

from __future__ import annotations

import math
import os
import threading
import time
from dataclasses import dataclass

from semcodec.cloud.service.config import ServeSettings

#: The longest one CloseSession waits for the decoder, whatever it asks, seconds.
MAX_CLOSE_WAIT_S = 600.0


@dataclass(frozen=True)
class ServiceLimits:
    """The limits of one server, as the session core applies them: the serve settings it
    enforces, in bytes and seconds (made by :meth:`of`), and three of its own.

    Each field but the last three is the :class:`~cloud.service.config.ServeSettings` field
    of the same name, or its conversion: ``max_chunk_bytes`` (``max_chunk_kib``),
    ``max_unit_bytes`` (``max_unit_mib``), ``max_session_bytes_per_s`` (``max_session_kbps``),
    ``session_burst_bytes`` (``session_burst_kib``), ``tenant_bytes_per_s``
    (``tenant_max_kbps``), ``tenant_max_stored_bytes`` (``tenant_max_stored_mib``),
    ``tenant_max_output_bytes`` (``tenant_max_output_mib``),
    ``tenant_max_decoder_flops`` (``tenant_max_decoder_gflops``, in FLOP/s). The
    settings say what each means; here 0 means no bound for ``decode_threads`` too (the
    setting's 0, the machine's cores, is resolved by :meth:`of`).

    Attributes (the core's own):
        backlog_wait_s: how long a stream waits for the decoder before giving up, seconds.
        close_timeout_s: how long CloseSession waits for the decoder by default, seconds.
        max_markers: the most "dropped" markers one session takes (beyond the stream's
            declared frame count, every unit is refused anyway).
        compute_window_s: the window a session's decoder FLOP/s is metered over, and the
            least time between two steps of a tenant's compute rung, seconds.
    """

    max_sessions: int
    max_backlog_units: int
    max_chunk_bytes: int
    max_unit_bytes: int
    max_session_bytes_per_s: float
    session_burst_bytes: int
    tenant_max_sessions: int
    tenant_max_streams: int
    tenant_bytes_per_s: float
    tenant_max_stored_bytes: int
    tenant_max_decoder_flops: float
    tenant_max_stored_sessions: int
    tenant_max_output_bytes: int
    session_idle_s: float
    retain_s: float
    decode_threads: int
    backlog_wait_s: float = 120.0
    close_timeout_s: float = 120.0
    max_markers: int = 10000
    compute_window_s: float = 5.0

    @classmethod
    def of(cls, settings: ServeSettings, **own: float) -> ServiceLimits:
        """The limits ``settings`` set; ``own``: any of the core's own (``backlog_wait_s``,
        ``close_timeout_s``, ``max_markers``, ``compute_window_s``) when not their
        defaults."""
        return cls(max_sessions=settings.max_sessions,
                   max_backlog_units=settings.max_backlog_units,
                   max_chunk_bytes=settings.max_chunk_kib * 1024,
                   max_unit_bytes=settings.max_unit_mib << 20,
                   max_session_bytes_per_s=settings.max_session_kbps * 1000 / 8,
                   session_burst_bytes=settings.session_burst_kib * 1024,
                   tenant_max_sessions=settings.tenant_max_sessions,
                   tenant_max_streams=settings.tenant_max_streams,
                   tenant_bytes_per_s=settings.tenant_max_kbps * 1000 / 8,
                   tenant_max_stored_bytes=int(settings.tenant_max_stored_mib * (1 << 20)),
                   tenant_max_decoder_flops=settings.tenant_max_decoder_gflops * 1e9,
                   tenant_max_stored_sessions=settings.tenant_max_stored_sessions,
                   tenant_max_output_bytes=int(settings.tenant_max_output_mib * (1 << 20)),
                   session_idle_s=settings.session_idle_s,
                   retain_s=settings.retain_s,
                   decode_threads=settings.decode_threads or os.cpu_count() or 2,
                   **own)  # fmt: skip


class RateLimiter:
    """A token bucket of bytes per second that lets a chunk of any size through and makes
    the *next* one wait for the debt (so a chunk larger than the bucket never blocks for
    good). Thread-safe; ``clock`` is monotonic seconds.

    Args:
        rate: bytes per second (> 0).
        burst: the bucket's depth, bytes (> 0): what an idle session may send at once.
    """

    def __init__(self, rate: float, burst: float, clock=time.monotonic) -> None:
        if rate <= 0 or burst <= 0:
            raise ValueError(f"rate {rate} B/s and burst {burst} B must be positive")
        self.rate, self.burst, self._clock = float(rate), float(burst), clock
        self._tokens, self._at = float(burst), clock()
        self._lock = threading.Lock()

    def take(self, nbytes: int) -> float:
        """Takes ``nbytes``; returns how long to wait before reading more, seconds."""
        with self._lock:
            now = self._clock()
            self._tokens = min(self.burst, self._tokens + (now - self._at) * self.rate)
            self._at = now
            self._tokens -= nbytes
            return max(0.0, -self._tokens / self.rate)

    def give_back(self, nbytes: int) -> None:
        """Returns ``nbytes`` taken by :meth:`take` but not used (a request refused)."""
        with self._lock:
            self._tokens = min(self.burst, self._tokens + nbytes)


def close_wait_s(requested: float, default: float) -> float:
    """How long a CloseSession waits for the decoder, seconds: ``requested`` (0, negative or
    not a number: ``default``), at most ``MAX_CLOSE_WAIT_S``, so that a close never holds
    its thread for good (the client closes again to wait longer)."""
    wait = requested if math.isfinite(requested) and requested > 0 else default
    return min(wait, MAX_CLOSE_WAIT_S)

