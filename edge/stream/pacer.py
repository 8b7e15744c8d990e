"""Pacers: hold the sent rate to a bandwidth (token bucket) or to a recorded link (trace).

Every pacer has one method, ``consume(nbytes) -> seconds slept``, called before bytes are
handed to the link; it sleeps until the link (as modelled) may take them.

:class:`TokenBucket`: tokens are bytes; they refill at ``rate_bps / 8`` bytes per second up
to ``burst_bytes``; sending ``n`` bytes takes ``n`` tokens, waiting for them when too few
are left. A send larger than the burst waits for its debt, so any size works and the
long-run rate holds.

:class:`TracePacer`: follows a Mahimahi capacity trace (one line per 1500-byte delivery
opportunity, milliseconds), looped and scaled to a mean rate with its shape kept.
"""

from __future__ import annotations

import bisect
import math
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Protocol


class Pacer(Protocol):
    """What the client calls before handing bytes to the link."""

    def consume(self, nbytes: int) -> float:
        """Waits until ``nbytes`` may be sent; returns the seconds slept."""
        ...


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


#: Bytes one line (one delivery opportunity) of a Mahimahi trace carries.
MAHIMAHI_PACKET_BYTES = 1500


class TraceError(ValueError):
    """A capacity trace that cannot be used (unreadable, empty, not Mahimahi's format)."""


def read_mahimahi(path: Path) -> list[int]:
    """The delivery opportunities of a Mahimahi trace, milliseconds, sorted.

    Each line is one millisecond timestamp at which one 1500-byte packet may be sent
    (repeated for several packets in one millisecond); blank lines are skipped.

    Raises:
        TraceError: the file cannot be read, a line is not a non-negative integer, or the
            trace has no opportunity after 0 ms (no period to loop on).
    """
    try:
        text = Path(path).read_text(encoding="ascii")
    except (OSError, UnicodeDecodeError) as exc:
        raise TraceError(f"trace {path}: cannot read it: {exc}") from exc
    stamps = []
    for number, line in enumerate(text.splitlines(), 1):
        line = line.strip()
        if not line:
            continue
        if not line.isdigit():
            raise TraceError(f"trace {path} line {number}: {line[:40]!r} is not a millisecond "
                             "timestamp (Mahimahi format: one integer per line)")  # fmt: skip
        stamps.append(int(line))
    stamps.sort()
    if not stamps or stamps[-1] <= 0:
        raise TraceError(f"trace {path}: no delivery opportunity after 0 ms")
    return stamps


class TracePacer:
    """Paces bytes to the capacity of a recorded link (a Mahimahi trace), looped.

    The link delivers ``packet_bytes`` at each opportunity ``t_i + k * period`` (ms, ``k``
    = 0, 1, ...; the period is the last timestamp, as Mahimahi loops). Bytes go out in
    order as a fluid: a send waits until the opportunities after the previous send's end
    have carried it. Capacity the sender leaves unused is lost, as on the real link (no
    bucket to save it in). ``scale_bps`` multiplies every opportunity's bytes by
    ``scale_bps / mean_bps``: the mean becomes ``scale_bps`` and the shape (dips, outages,
    how fast capacity changes) stays.

    Args:
        stamps_ms: sorted opportunity timestamps, milliseconds (see :func:`read_mahimahi`).
        scale_bps: the mean rate to scale to, bits per second (None: the trace's own).
        packet_bytes: bytes per opportunity before scaling.
        clock, sleep: injectable for tests (seconds); time 0 of the trace is the first
            :meth:`consume` (the stream's first byte).
    """

    def __init__(self, stamps_ms: Sequence[int], scale_bps: float | None = None,
                 packet_bytes: int = MAHIMAHI_PACKET_BYTES,
                 clock: Callable[[], float] = time.monotonic,
                 sleep: Callable[[float], None] = time.sleep) -> None:  # fmt: skip
        self._stamps = sorted(int(t) for t in stamps_ms)
        if not self._stamps or self._stamps[-1] <= 0 or self._stamps[0] < 0:
            raise TraceError("a trace needs timestamps >= 0 ms and one after 0 ms")
        if scale_bps is not None and not scale_bps > 0:
            raise TraceError(f"trace scale {scale_bps} bit/s: must be > 0")
        self.period_ms = self._stamps[-1]
        raw_mean = 8 * packet_bytes * len(self._stamps) / (self.period_ms / 1000)
        self.packet_bytes = packet_bytes * (scale_bps / raw_mean if scale_bps else 1.0)
        self._clock, self._sleep = clock, sleep
        self._start: float | None = None
        self._sent = 0.0  # bytes handed over, plus capacity the sender left unused
        self._lock = threading.Lock()

    @classmethod
    def from_file(cls, path: Path, scale_bps: float | None = None, **kwargs) -> TracePacer:
        """A pacer of the Mahimahi trace at ``path`` (see :func:`read_mahimahi`)."""
        return cls(read_mahimahi(path), scale_bps, **kwargs)

    @property
    def mean_bps(self) -> float:
        """The (scaled) mean capacity, bits per second."""
        return 8 * self.packet_bytes * len(self._stamps) / (self.period_ms / 1000)

    def opportunities(self, t_ms: float) -> int:
        """Opportunities at times ``<= t_ms`` since the start (looped)."""
        if t_ms < 0:
            return 0
        laps, rest = divmod(t_ms, self.period_ms)
        return int(laps) * len(self._stamps) + bisect.bisect_right(self._stamps, rest)

    def capacity_bytes(self, t0_s: float, t1_s: float) -> float:
        """Bytes the link can carry in ``(t0_s, t1_s]``, seconds since the start."""
        return self.packet_bytes * (self.opportunities(t1_s * 1000) -
                                    self.opportunities(t0_s * 1000))  # fmt: skip

    def _time_of(self, n: int) -> float:
        """Seconds since the start of opportunity number ``n`` (1-based)."""
        laps, index = divmod(n - 1, len(self._stamps))
        return (laps * self.period_ms + self._stamps[index]) / 1000

    def consume(self, nbytes: int) -> float:
        """Sends ``nbytes``, sleeping until the trace's capacity carried them; returns the
        seconds slept."""
        with self._lock:
            if self._start is None:
                self._start = self._clock()
            now = self._clock() - self._start
            # opportunities before now that found nothing to send are lost (one at this
            # very instant still takes these bytes)
            carried = self.packet_bytes * self.opportunities(now * 1000 - 1e-6)
            self._sent = max(self._sent, carried)
            self._sent += nbytes
            needed = math.ceil(self._sent / self.packet_bytes - 1e-9)
            wait = max(0.0, self._time_of(needed) - now) if needed > 0 else 0.0
        if wait > 0:
            self._sleep(wait)
        return wait
