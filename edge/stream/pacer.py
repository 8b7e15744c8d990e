"""A token bucket that holds the sent rate to a bandwidth.

Tokens are bytes: they refill at ``rate_bps / 8`` bytes per second up to ``burst_bytes``;
sending ``n`` bytes takes ``n`` tokens, waiting for them when too few are left. A send
larger than the burst waits for its debt, so any size works and the long-run rate holds.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable


class TokenBucket:
    """Paces bytes to ``rate_bps`` bits per second with bursts of ``burst_bytes``.

    Args:
        rate_bps: the sustained rate, bits per second (> 0).
        burst_bytes: the most bytes sent back to back after an idle spell (> 0).
        clock, sleep: injectable for tests (seconds).
    """

    def __init__(self, rate_bps: float, burst_bytes: int,
                 clock: Callable[[], float] = time.monotonic,
                 sleep: Callable[[float], None] = time.sleep) -> None:  # fmt: skip
        if rate_bps <= 0 or burst_bytes <= 0:
            raise ValueError(f"rate ({rate_bps} bit/s) and burst ({burst_bytes} B) must be > 0")
        self.rate = rate_bps / 8.0
        self.burst = float(burst_bytes)
        self._clock, self._sleep = clock, sleep
        self._tokens = self.burst
        self._last = clock()
        self._lock = threading.Lock()

    def _refill(self) -> None:
        now = self._clock()
        self._tokens = min(self.burst, self._tokens + (now - self._last) * self.rate)
        self._last = now

    def consume(self, nbytes: int) -> float:
        """Takes ``nbytes`` tokens, sleeping until they are there; returns the seconds slept."""
        with self._lock:
            self._refill()
            self._tokens -= nbytes
            wait = -self._tokens / self.rate if self._tokens < 0 else 0.0
        if wait > 0:
            self._sleep(wait)
        return wait


class Unpaced:
    """No pacing: sends as fast as the link takes."""

    def consume(self, nbytes: int) -> float:
        return 0.0
