"""``edge-agent stream``'s pipeline: source -> encoder -> spool -> client, as frames come.

The encoder is the one ``edge-agent encode`` runs (:class:`~codec.scaffold.codec.
ScaffoldEncoder` with the same look-ahead), so a streamed session stores exactly the bytes
``encode`` would write to a file. It runs in a thread that fills the spool while the client
drains it; a restarted agent encodes from the start again (the encoder is deterministic) and
the spool skips the units it already holds.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Iterable

import numpy as np

from semcodec.edge.stream.client import LinkStats
from semcodec.edge.stream.spool import Spool

log = logging.getLogger("semcodec.edge.stream")


def produce_units(encoder, frames: Iterable[np.ndarray], spool: Spool) -> int:
    """Encodes ``frames`` (``(H, W, 3)`` uint8 RGB) into the spool, END included; returns
    the number of units."""
    from semcodec.codec.scaffold.codec import with_lookahead

    seq = 0
    for frame in with_lookahead(encoder, frames):
        unit, _ = encoder.encode_frame(frame)
        spool.put(seq, int(unit.kind), unit.to_bytes())
        seq += 1
    end = encoder.end()
    spool.put(seq, int(end.kind), end.to_bytes())
    return seq + 1


class Producer(threading.Thread):
    """Runs :func:`produce_units` in a thread; a failure is handed to the spool (and so to
    the client, which stops) and kept in ``error``."""

    def __init__(self, encoder, frames: Iterable[np.ndarray], spool: Spool) -> None:
        super().__init__(name="encoder", daemon=True)
        self.encoder, self.frames, self.spool = encoder, frames, spool
        self.error: BaseException | None = None

    def run(self) -> None:
        try:
            produce_units(self.encoder, self.frames, self.spool)
        except BaseException as exc:  # handed over to the main thread
            self.error = exc
            self.spool.fail(exc)


class ProgressLog:
    """Logs link statistics at most every ``every_s`` seconds."""

    def __init__(self, spool: Spool, every_s: float = 2.0) -> None:
        self.spool, self.every_s = spool, every_s
        self._last = 0.0

    def __call__(self, stats: LinkStats) -> None:
        now = time.monotonic()
        if now - self._last < self.every_s or not self.spool.produced:
            return
        self._last = now
        log.info("stream: %d/%d units acknowledged, %.1f kbit/s sent, cloud goodput %.1f "
                 "kbit/s, cloud backlog %d, spool %d KiB, %d reconnect(s), %d dropped",
                 stats.units_acked, self.spool.produced, stats.kbps(), stats.goodput_bps / 1000,
                 stats.backlog_units, self.spool.spooled_bytes // 1024, stats.reconnects,
                 stats.dropped)  # fmt: skip
