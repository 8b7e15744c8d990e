"""``edge-agent stream``'s pipeline: source -> encoder -> spool -> client, as frames come.

The encoder is the one ``edge-agent encode`` runs (:class:`~codec.scaffold.codec.
ScaffoldEncoder` with the same look-ahead), so a streamed session stores exactly the bytes
``encode`` would write to a file. It runs in a thread that fills the spool while the client
drains it; a restarted agent encodes from the start again (the encoder is deterministic) and
the spool skips the units it already holds. With closed-loop rate control (:class:`AutoRate`)
the encoder's target follows the link, and the targets are kept in the spool so that a
restart re-encodes the same way. In detect mode the units come from
:func:`codec.task.stream.encode_detect` (:class:`UnitProducer`), with no rate control.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterable

import numpy as np

from semcodec.edge.stream.client import LinkStats
from semcodec.edge.stream.ratecontrol import LinkRateController, LinkSample
from semcodec.edge.stream.spool import Spool

log = logging.getLogger("semcodec.edge.stream")


class AutoRate:
    """Closed-loop rate control wired to one stream.

    Samples the client's :class:`LinkStats` and the spool into a
    :class:`~edge.stream.ratecontrol.LinkRateController` (after each acknowledgement and
    before each frame), and answers the target the encoder codes each unit at, in bits per
    second like every rate of the link (the encoder's rate account turns it into bytes per
    frame; nothing converts it on the way). Targets are recorded in the spool: a restarted
    agent re-encodes the units an earlier run produced at the targets that run used, so it
    rebuilds the same encoder state (the units themselves are not sent again).

    Args:
        controller: the controller (its rates are bits per second).
        spool: the stream's spool.
        stats: the client's link statistics.
        pixels_per_s: ``width * height * fps`` of the stream: reads the bits-per-pixel
            targets of spools written by older versions.
        clock: seconds, monotonic.
    """

    def __init__(self, controller: LinkRateController, spool: Spool, stats: LinkStats,
                 pixels_per_s: float,
                 clock: Callable[[], float] = time.monotonic) -> None:  # fmt: skip
        self.controller, self.spool, self.stats = controller, spool, stats
        self.pixels_per_s, self._clock = float(pixels_per_s), clock
        self._lock = threading.Lock()
        self._applied: float | None = None
        self._first_call: float | None = None
        self.targets: list[tuple[int, float]] = []  # (first seq, bit/s) as applied this run

    def update(self) -> float:
        """Feeds the controller a snapshot; returns the target, bits per second."""
        s = self.stats
        sample = LinkSample(self._clock(), s.wire_bytes, self.spool.acked_bytes,
                            self.spool.spooled_bytes, s.backlog_units, s.max_backlog_units,
                            s.recommended_bps)  # fmt: skip
        with self._lock:
            before = self.controller.target_bps
            target = self.controller.update(sample)
        if abs(target - before) > 0.1 * before:
            decision = self.controller.decisions[-1]
            log.info("rate: target %.1f kbit/s (%s)", target / 1000, decision.reason)
        return target

    def target_bps(self, seq: int) -> float:
        """The target unit ``seq`` is coded at, bits per second (recorded when it changes)."""
        if seq < self.spool.produced:  # produced by an earlier run: replay its target
            recorded = self.spool.recorded_target(seq, self.pixels_per_s)
            if recorded is not None:
                return recorded
        now = self._clock()
        self._first_call = now if self._first_call is None else self._first_call
        bps = self.update()
        if bps != self._applied:
            self.spool.record_target(seq, bps, now - self._first_call)
            self.targets.append((seq, bps))
        return bps

    def apply(self, encoder, seq: int) -> None:
        """Sets the encoder's target for unit ``seq`` (when it changed)."""
        bps = self.target_bps(seq)
        if bps != self._applied:
            encoder.set_target_bps(bps)
            self._applied = bps


def produce_units(encoder, frames: Iterable[np.ndarray], spool: Spool,
                  auto: AutoRate | None = None, realtime_fps: float | None = None,
                  stop: threading.Event | None = None) -> int:  # fmt: skip
    """Encodes ``frames`` (``(H, W, 3)`` uint8 RGB) into the spool, END included; returns
    the number of units. With ``auto`` the encoder's target follows the link; with
    ``realtime_fps`` frame ``k`` is not encoded before ``k / realtime_fps`` seconds after the
    first (a file streamed as a camera delivers it; units an earlier run already spooled are
    re-encoded at once); once ``stop`` is set, nothing more is encoded (no END either)."""
    from semcodec.codec.scaffold.codec import with_lookahead

    seq, first_new, start = 0, spool.produced, None  # units before first_new are spooled
    for frame in with_lookahead(encoder, frames):
        if stop is not None and stop.is_set():
            return seq
        if realtime_fps and seq >= first_new:  # an earlier run's units: no need to wait
            start = time.monotonic() if start is None else start
            time.sleep(max(0.0, start + (seq - first_new) / realtime_fps - time.monotonic()))
        if auto is not None:
            auto.apply(encoder, seq)
        unit, _ = encoder.encode_frame(frame)
        spool.put(seq, int(unit.kind), unit.to_bytes())
        seq += 1
    end = encoder.end()
    spool.put(seq, int(end.kind), end.to_bytes())
    return seq + 1


def spool_units(units: Iterable, spool: Spool, stop: threading.Event | None = None,
                realtime_fps: float | None = None) -> int:  # fmt: skip
    """Puts ready-made units (``Unit`` objects, END last) into the spool as they come;
    returns how many. Units an earlier run spooled are skipped by the spool; once ``stop`` is
    set nothing more is put (no END either). With ``realtime_fps`` unit ``k`` is not taken
    (so not coded: the units are made as they are asked for) before ``k / realtime_fps``
    seconds after the first new one, as :func:`produce_units` reads a file."""
    count, first_new, start = 0, spool.produced, None
    iterator = iter(units)
    while True:
        if stop is not None and stop.is_set():
            return count
        if realtime_fps and count >= first_new:
            start = time.monotonic() if start is None else start
            time.sleep(max(0.0, start + (count - first_new) / realtime_fps - time.monotonic()))
        unit = next(iterator, None)
        if unit is None:
            return count
        spool.put(count, int(unit.kind), unit.to_bytes())
        count += 1


class Producer(threading.Thread):
    """Runs :func:`produce_units` in a thread; a failure is handed to the spool (and so to
    the client, which stops) and kept in ``error``."""

    def __init__(self, encoder, frames: Iterable[np.ndarray], spool: Spool,
                 auto: AutoRate | None = None,
                 realtime_fps: float | None = None) -> None:  # fmt: skip
        super().__init__(name="encoder", daemon=True)
        self.encoder, self.frames, self.spool, self.auto = encoder, frames, spool, auto
        self.realtime_fps = realtime_fps
        self.error: BaseException | None = None
        self._halt = threading.Event()

    def stop(self, timeout_s: float = 30.0) -> None:
        """Stops encoding after the frame in hand and waits for the thread (so the process
        never exits while the encoder runs native code)."""
        self._halt.set()
        if self.ident is not None:
            self.join(timeout_s)

    def run(self) -> None:
        try:
            self._produce()
        except BaseException as exc:  # handed over to the main thread
            self.error = exc
            self.spool.fail(exc)

    def _produce(self) -> None:
        produce_units(self.encoder, self.frames, self.spool, self.auto, self.realtime_fps,
                      self._halt)  # fmt: skip


class UnitProducer(Producer):
    """A :class:`Producer` of ready-made units (detect mode: ``encode_detect``'s, which
    encode each frame as it is asked for)."""

    def __init__(self, units: Iterable, spool: Spool, realtime_fps: float | None = None) -> None:
        super().__init__(None, (), spool, realtime_fps=realtime_fps)
        self.units = units

    def _produce(self) -> None:
        spool_units(self.units, self.spool, self._halt, self.realtime_fps)


class ProgressLog:
    """Logs link statistics at most every ``every_s`` seconds."""

    def __init__(self, spool: Spool, every_s: float = 2.0, auto: AutoRate | None = None) -> None:
        self.spool, self.every_s, self.auto = spool, every_s, auto
        self._last = 0.0

    def __call__(self, stats: LinkStats) -> None:
        if self.auto is not None:
            self.auto.update()
        now = time.monotonic()
        if now - self._last < self.every_s or not self.spool.produced:
            return
        self._last = now
        log.info("stream: %d/%d units acknowledged, %.1f kbit/s sent, cloud goodput %.1f "
                 "kbit/s, cloud backlog %d, spool %d KiB, %d reconnect(s), %d dropped",
                 stats.units_acked, self.spool.produced, stats.kbps(), stats.goodput_bps / 1000,
                 stats.backlog_units, self.spool.spooled_bytes // 1024, stats.reconnects,
                 stats.dropped)  # fmt: skip
