"""Each tenant's use of its quotas: concurrent streams, unit bytes per second, bytes
stored on disk, sessions on disk, decoded outputs and decoder compute
(:class:`~cloud.service.compute.ComputeBudget`; its open sessions are counted by
:class:`~cloud.service.manager.SessionManager`).
"""

from __future__ import annotations

import threading
from pathlib import Path

from semcodec.cloud.service.compute import ComputeBudget
from semcodec.cloud.service.errors import QuotaError
from semcodec.cloud.service.limits import RateLimiter, ServiceLimits
from semcodec.cloud.service.store import LOG_NAME, tree_bytes


class TenantUsage:
    """One tenant's use of its quotas (the ``tenant_*`` serve settings); thread-safe.

    Args:
        name: the tenant.
        limits: the server's limits (the ``tenant_*`` quotas).
        sessions_dir: ``OUT/.sessions/<tenant>``, whose stored streams count as its storage.
        quotas: this tenant's own quotas, overriding ``limits`` (``max_sessions``,
            ``max_streams``, ``max_kbps``, ``max_stored_mib``, ``max_decoder_gflops``,
            ``max_stored_sessions``, ``max_output_mib``; from the tokens file).
        outputs_dir: ``OUT/<tenant>``, whose decoded outputs count in its output quota
            (None: not counted).

    Attributes:
        compute: its decoders' FLOP/s against its limit (``tenant_max_decoder_gflops``).
    """

    def __init__(self, name: str, limits: ServiceLimits, sessions_dir: Path,
                 quotas: dict[str, float] | None = None,
                 outputs_dir: Path | None = None) -> None:  # fmt: skip
        self.name, self.limits, self.sessions_dir = name, limits, sessions_dir
        quotas = quotas or {}
        self.max_stored_sessions = int(quotas.get("max_stored_sessions",
                                                  limits.tenant_max_stored_sessions))
        self.max_output_bytes = int(quotas["max_output_mib"] * (1 << 20)
                                    if "max_output_mib" in quotas
                                    else limits.tenant_max_output_bytes)  # fmt: skip
        # made before any decoder of the tenant runs in this server: read once, then counted
        self.output_bytes = (tree_bytes(outputs_dir) if outputs_dir is not None
                             and self.max_output_bytes else 0)  # fmt: skip
        self.max_sessions = int(quotas.get("max_sessions", limits.tenant_max_sessions))
        self.max_streams = int(quotas.get("max_streams", limits.tenant_max_streams))
        self.max_stored_bytes = int(quotas["max_stored_mib"] * (1 << 20)
                                    if "max_stored_mib" in quotas
                                    else limits.tenant_max_stored_bytes)  # fmt: skip
        rate = (quotas["max_kbps"] * 1000 / 8 if "max_kbps" in quotas
                else limits.tenant_bytes_per_s)  # fmt: skip
        flops = (quotas["max_decoder_gflops"] * 1e9 if "max_decoder_gflops" in quotas
                 else limits.tenant_max_decoder_flops)  # fmt: skip
        self.compute = ComputeBudget(name, flops, limits.compute_window_s)
        self.streams = 0
        self.reserved = 0  # units being received: their declared sizes
        self._stored: int | None = None  # read from disk on first use
        self._lock = threading.Lock()
        self._limiter = RateLimiter(rate, max(rate, 4096)) if rate > 0 else None

    def open_stream(self) -> None:
        """Counts a new ``StreamUnits`` call (call :meth:`close_stream` when it ends).

        Raises:
            QuotaError: the tenant holds ``tenant_max_streams`` streams already.
        """
        with self._lock:
            quota = self.max_streams
            if quota and self.streams >= quota:
                raise QuotaError(f"tenant {self.name} has {self.streams} streams open, its "
                                 "quota (tenant_max_streams): end one first")  # fmt: skip
            self.streams += 1

    def close_stream(self) -> None:
        with self._lock:
            self.streams = max(0, self.streams - 1)

    def throttle_delay(self, nbytes: int) -> float:
        """Takes ``nbytes`` from the tenant's rate (``tenant_bytes_per_s``); returns how
        long to wait, seconds."""
        return 0.0 if self._limiter is None else self._limiter.take(nbytes)

    @property
    def stored_bytes(self) -> int:
        """Bytes of the tenant's stored streams on disk, and of the units being received
        (their declared sizes)."""
        with self._lock:
            if self._stored is None:
                self._stored = sum(p.stat().st_size
                                   for p in self.sessions_dir.glob(f"*/{LOG_NAME}"))  # fmt: skip
            return self._stored + self.reserved

    def reserve(self, unit_bytes: int) -> None:
        """Counts a unit whose first chunk came (its partial file grows to ``unit_bytes``)
        in the tenant's storage; call :meth:`release` once it is stored or forgotten.

        Raises:
            QuotaError: it would pass ``tenant_max_stored_bytes``.
        """
        held = self.stored_bytes  # reads the disk once, outside the lock
        with self._lock:
            quota = self.max_stored_bytes
            if quota and self._stored + self.reserved + unit_bytes > quota:
                raise QuotaError(f"tenant {self.name} stores {held} bytes (units being "
                                 f"received included); a unit of {unit_bytes} would pass its "
                                 f"quota (tenant_max_stored_bytes, {quota}): close or remove "
                                 "sessions first")  # fmt: skip
            self.reserved += unit_bytes

    def release(self, unit_bytes: int) -> None:
        """A unit counted by :meth:`reserve` is stored (then :meth:`stored` counts it) or
        forgotten."""
        with self._lock:
            self.reserved = max(0, self.reserved - unit_bytes)

    def stored(self, nbytes: int) -> None:
        """``nbytes`` more are stored (negative: removed)."""
        with self._lock:
            if self._stored is not None:
                self._stored = max(0, self._stored + nbytes)

    def check_sessions(self, on_disk: int) -> None:
        """Room for a new session beside the tenant's ``on_disk`` ones.

        Raises:
            QuotaError: at ``tenant_max_stored_sessions``, or its outputs at their quota.
        """
        quota = self.max_stored_sessions
        if quota and on_disk >= quota:
            raise QuotaError(f"tenant {self.name} has {on_disk} sessions on disk, its quota "
                             "(tenant_max_stored_sessions): resume one, or wait for closed "
                             "ones to be removed (retain_s)")  # fmt: skip
        quota = self.max_output_bytes
        if quota and self.output_bytes >= quota:
            raise QuotaError(f"tenant {self.name} has {self.output_bytes} bytes of decoded "
                             f"outputs, its quota (tenant_max_output_bytes, {quota}): wait for "
                             "old sessions to be removed (retain_s)")  # fmt: skip

    def wrote_outputs(self, nbytes: int) -> None:
        """A decoder wrote ``nbytes`` more of the tenant's outputs (negative: removed).

        Raises:
            QuotaError: more would pass ``tenant_max_output_bytes`` (they are counted: the
                decoder fails, and its partial outputs are removed and uncounted).
        """
        with self._lock:
            self.output_bytes = max(0, self.output_bytes + nbytes)
            held, quota = self.output_bytes, self.max_output_bytes
        if nbytes > 0 and quota and held > quota:
            raise QuotaError(f"tenant {self.name}'s decoded outputs would pass its quota "
                             f"(tenant_max_output_bytes, {quota}): {held} bytes; the session's "
                             "outputs are not kept (its stream is)")  # fmt: skip
