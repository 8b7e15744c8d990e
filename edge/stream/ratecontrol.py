"""Closed-loop control of the edge's target rate from what the link and the cloud report.

Transport-free: :class:`LinkRateController` is fed :class:`LinkSample` snapshots (counters
the client and the spool keep, the cloud's last feedback) with their time, and answers the
target rate the encoder should hold, bits per second. Decisions are taken at most every
``interval_s``; the rates are measured over the last ``window_s``:

* ``sent_bps``: bytes handed to the link (paced), ``goodput_bps``: bytes acknowledged by the
  cloud (an ack means durably stored), ``link_bps = max(sent_bps, goodput_bps)``: what the
  link is carrying now;
* ``queue_s = 8 * unacked_bytes / link_bps``: how long the spool takes to drain at that rate.

Back off fast (multiplicative decrease, at most once per ``interval_s``) when

1. the cloud recommends less than the target (``recommended_bps``): take it;
2. the cloud's decode backlog is over ``backlog_high`` of its bound: ``target * decrease``;
3. the spool grows: ``queue_s > queue_high_s`` while the link carries less than
   ``link_share`` of the target: ``min(target * decrease, headroom * link_bps - excess /
   drain_s)``, ``excess`` the spool's bits beyond ``queue_high_s`` at the link rate (so the
   spool drains in about ``drain_s``; a cut link carries nothing: the target falls to
   ``min_bps``); once the spool has drained, the target goes back to ``min(target *
   decrease, headroom * link_bps)`` of that moment;
4. goodput falls below the sent rate: ``goodput_bps < link_share * sent_bps`` and the bytes
   sent but not yet acknowledged are worth more than ``queue_high_s`` of goodput (the network
   queues what the pacer lets through), with at least ``min_acks`` acknowledgements in the
   window (a single large unit in flight, one ack at its end, is not taken for loss):
   ``min(target * decrease, headroom * goodput)``.

Probe up slowly (``probe_share`` of the target per second, added at each decision) once
``hold_s`` passed since the last decrease and the spool drains in under ``queue_low_s``.
The target always stays within ``[min_bps, max_bps]``. A keyframe is one large unit (a
third of a 10-s budget): at a link as fast as the target it makes a queue, but the link
still carries the target, so rule 3 does not fire on it.
"""

from __future__ import annotations

import collections
from dataclasses import dataclass


@dataclass(frozen=True)
class RateControlConfig:
    """Settings of :class:`LinkRateController` (rates in bits per second, times in seconds).

    Attributes:
        min_bps, max_bps: bounds of the target (``0 < min_bps <= max_bps``).
        start_bps: the first target (None: ``max_bps``, clamped to the bounds).
        window_s: the window the sent rate and goodput are measured over.
        interval_s: the least time between two decisions.
        queue_high_s: a spool that takes longer than this to drain is congestion.
        queue_low_s: the target probes up only while the spool drains faster than this.
        decrease: multiplicative decrease factor (0 < decrease < 1).
        headroom: after a decrease on a measured link rate, the target is at most this share
            of it (below 1, so the spool drains).
        link_share: "carries less than the target" means less than this share of it.
        hold_s: no probing up for this long after a decrease.
        drain_s: after the spool grew, the target leaves room to drain what it holds beyond
            ``queue_high_s`` in this long.
        probe_share: probing up adds this share of the target per second (8 %: about 9 s
            to double; slow next to a decrease, which halves it in under 1 s).
        backlog_high: the cloud's decode backlog over this share of its bound is congestion.
        min_acks: acknowledgements a window needs before goodput is compared with the sent
            rate (rule 4).
    """

    min_bps: float
    max_bps: float
    start_bps: float | None = None
    window_s: float = 1.0
    interval_s: float = 0.5
    queue_high_s: float = 1.0
    queue_low_s: float = 0.5
    decrease: float = 0.7
    headroom: float = 0.85
    link_share: float = 0.9
    hold_s: float = 2.0
    drain_s: float = 5.0
    probe_share: float = 0.08
    backlog_high: float = 0.5
    min_acks: int = 3

    def check(self) -> RateControlConfig:
        """Returns itself; raises ValueError on bounds or factors that cannot work."""
        if not 0 < self.min_bps <= self.max_bps:
            raise ValueError(f"rate bounds {self.min_bps:g}..{self.max_bps:g} bit/s: need "
                             "0 < min <= max")  # fmt: skip
        if not (0 < self.decrease < 1 and 0 < self.headroom <= 1 and 0 < self.link_share <= 1):
            raise ValueError("decrease must be in (0, 1); headroom and link_share in (0, 1]")
        if not (self.window_s > 0 and self.interval_s > 0 and self.queue_high_s > 0):
            raise ValueError("window_s, interval_s and queue_high_s must be > 0")
        return self


@dataclass(frozen=True)
class LinkSample:
    """A snapshot of the link's counters (totals since the stream started, bytes).

    Attributes:
        t: when, seconds (any monotonic clock; the controller only takes differences).
        sent_bytes: unit bytes handed to the link (after the pacer).
        acked_bytes: unit bytes the cloud acknowledged.
        unacked_bytes: unit bytes in the spool (produced, not yet acknowledged).
        cloud_backlog: units the cloud stored but has not decoded yet.
        cloud_max_backlog: the cloud's bound on that backlog (0: unknown).
        recommended_bps: the cloud's recommended rate (0: none).
    """

    t: float
    sent_bytes: int
    acked_bytes: int
    unacked_bytes: int
    cloud_backlog: int = 0
    cloud_max_backlog: int = 0
    recommended_bps: float = 0.0


@dataclass(frozen=True)
class Decision:
    """One change of the target: when, to what (bit/s), and why."""

    t: float
    target_bps: float
    reason: str


class LinkRateController:
    """AIMD control of the target rate (see the module docstring for the rules).

    Args:
        config: the settings.
        history: decisions kept in :attr:`decisions` (oldest dropped first).
    """

    def __init__(self, config: RateControlConfig, history: int = 1000) -> None:
        self.config = config.check()
        start = config.max_bps if config.start_bps is None else config.start_bps
        self.target_bps = self._clamp(start)
        self.decisions: collections.deque[Decision] = collections.deque(maxlen=history)
        self._samples: collections.deque[LinkSample] = collections.deque()
        self._last_decision: float | None = None
        self._last_decrease = float("-inf")
        self._resume_bps = 0.0  # where to go back to once a drained spool is empty

    def _clamp(self, bps: float) -> float:
        return min(self.config.max_bps, max(self.config.min_bps, bps))

    def update(self, sample: LinkSample) -> float:
        """Takes a snapshot; returns the target rate, bits per second."""
        self._remember(sample)
        if self._last_decision is None:
            self._last_decision = sample.t
            return self.target_bps
        dt = sample.t - self._last_decision
        if dt < self.config.interval_s:
            return self.target_bps
        self._last_decision = sample.t
        target, reason = self._decide(sample, dt)
        if target != self.target_bps:
            self.target_bps = target
            self.decisions.append(Decision(sample.t, target, reason))
        return self.target_bps

    def _remember(self, sample: LinkSample) -> None:
        self._samples.append(sample)
        horizon = sample.t - self.config.window_s
        while len(self._samples) > 2 and self._samples[1].t <= horizon:
            self._samples.popleft()

    def rates(self) -> tuple[float, float, int]:
        """``(sent_bps, goodput_bps, acks)`` over the window (acks: samples whose acked
        bytes grew), or zeros before there is a window."""
        first, last = self._samples[0], self._samples[-1]
        span = last.t - first.t
        if span < self.config.interval_s / 2:
            return 0.0, 0.0, 0
        samples = list(self._samples)
        acks = sum(1 for a, b in zip(samples, samples[1:], strict=False)
                   if b.acked_bytes > a.acked_bytes)  # fmt: skip
        return (8 * (last.sent_bytes - first.sent_bytes) / span,
                8 * (last.acked_bytes - first.acked_bytes) / span, acks)  # fmt: skip

    def _decide(self, s: LinkSample, dt: float) -> tuple[float, str]:
        c, target = self.config, self.target_bps
        sent, goodput, acks = self.rates()
        link = max(sent, goodput)
        if link > 0:
            queue_s = 8 * s.unacked_bytes / link
        else:
            queue_s = float("inf") if s.unacked_bytes else 0.0
        first = self._samples[0]  # the link is judged once it carried the whole window
        measured = first.sent_bytes > 0 and s.t - first.t >= c.window_s / 2
        cut = None
        if 0 < s.recommended_bps < target:
            cut = (s.recommended_bps, "cloud recommends")
        elif s.cloud_max_backlog and s.cloud_backlog > c.backlog_high * s.cloud_max_backlog:
            cut = (target * c.decrease, "cloud decode backlog")
        elif measured and queue_s > c.queue_high_s and link < c.link_share * target:
            excess = 8 * s.unacked_bytes - c.queue_high_s * link  # bits beyond the allowance
            drain = c.headroom * link - excess / c.drain_s
            cut = (min(target * c.decrease, drain), "spool grows")
            self._resume_bps = min(target * c.decrease, c.headroom * link)
        elif (measured and acks >= c.min_acks and goodput < c.link_share * sent
              and 8 * (s.sent_bytes - s.acked_bytes) > c.queue_high_s * goodput):  # fmt: skip
            cut = (min(target * c.decrease, c.headroom * goodput), "goodput below sent rate")
        if cut is not None:
            if cut[1] != "spool grows":
                self._resume_bps = 0.0
            self._last_decrease = s.t
            return self._clamp(cut[0]), cut[1]
        if queue_s < c.queue_low_s and self._resume_bps > target:
            resume, self._resume_bps = self._resume_bps, 0.0
            return self._clamp(resume), "spool drained"
        if s.t - self._last_decrease >= c.hold_s and queue_s < c.queue_low_s:
            return self._clamp(target + c.probe_share * target * dt), "probe up"
        return target, "hold"
