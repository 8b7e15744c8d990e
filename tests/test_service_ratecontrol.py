"""Closed-loop rate control, transport-free: the controller against a simulated link with a
step down and a step up in capacity (deterministic, simulated clock), the AutoRate wiring
(targets recorded in the spool and replayed), the encoder's mid-stream target, and the
cloud's recommended rate."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import pytest

from semcodec.cloud.service.messages import recommend_rate
from semcodec.codec.scaffold.rate import RateController
from semcodec.edge.stream.agent import AutoRate
from semcodec.edge.stream.client import LinkStats
from semcodec.edge.stream.ratecontrol import LinkRateController, LinkSample, RateControlConfig
from semcodec.edge.stream.spool import Spool

# ------------------------------------------------------------------------------ simulation


@dataclass
class Step:
    """One simulated step: time (s), target (bit/s), capacity (bit/s), spool (bytes)."""

    t: float
    target: float
    capacity: float
    unacked: float


def simulate(capacity: Callable[[float], float], seconds: float, config: RateControlConfig,
             fps: float = 10.0, keyframe_every_s: float = 0.0) -> tuple[LinkRateController,
                                                                        list[Step]]:  # fmt: skip
    """An encoder with a byte account (a keyframe costs 3 s of budget; later frames repay
    it, spending no less than 30 % of their share) into a spool drained by a fluid link;
    acknowledgements come one frame after the bytes leave."""
    ctl = LinkRateController(config)
    queue = sent = acked = balance = 0.0
    in_flight: list[float] = []
    steps = []
    for k in range(int(seconds * fps)):
        t = k / fps
        earn = ctl.target_bps / fps / 8
        balance += earn
        keyframe = keyframe_every_s and k % round(keyframe_every_s * fps) == 0
        frame = 30 * earn if keyframe else max(0.3 * earn, min(earn, balance))
        balance -= frame
        queue += frame
        move = min(queue, capacity(t) / fps / 8)
        queue -= move
        sent += move
        in_flight.append(move)
        if len(in_flight) > 1:
            acked += in_flight.pop(0)
        unacked = queue + sum(in_flight)
        ctl.update(LinkSample(t, int(sent), int(acked), int(unacked)))
        steps.append(Step(t, ctl.target_bps, capacity(t), unacked))
    return ctl, steps


def at(steps: list[Step], t: float) -> Step:
    return min(steps, key=lambda s: abs(s.t - t))


CONFIG = RateControlConfig(min_bps=10e3, max_bps=300e3, start_bps=150e3)


def test_target_follows_a_step_down_fast_and_a_step_up_slowly():
    capacity = lambda t: 60e3 if 10 <= t < 30 else 200e3  # noqa: E731
    ctl, steps = simulate(capacity, 45, CONFIG)
    assert at(steps, 8.0).target > 180e3  # probed up towards the link
    # step down at 10 s: below the new capacity within 2 s, by multiplicative decrease
    assert at(steps, 11.5).target <= 60e3
    cuts = [d for d in ctl.decisions if 10 <= d.t <= 12]
    assert len(cuts) >= 2 and all(d.reason == "spool grows" for d in cuts)
    assert cuts[1].target_bps <= 0.7 * cuts[0].target_bps  # multiplicative, fast
    # the spool drains, the target goes back near the link and saws around it
    resumed = [d for d in ctl.decisions if 12 <= d.t < 30 and d.reason == "spool drained"]
    assert resumed and resumed[0].t < 17 and resumed[0].target_bps == pytest.approx(51e3)
    low = [s for s in steps if 15 <= s.t < 30]
    mean = sum(s.target for s in low) / len(low)
    assert 0.75 * 60e3 < mean < 60e3 and max(s.target for s in low) < 1.3 * 60e3
    assert max(s.unacked for s in low) * 8 < 1.5 * 60e3  # under 1.5 s of spool
    # step up at 30 s: a slow probe, 8 % of the target per second, no jump
    up = [s for s in steps if 30.5 <= s.t < 45]
    assert all(b.target >= a.target for a, b in zip(up, up[1:], strict=False))
    assert at(steps, 32.0).target < 80e3 and at(steps, 44.9).target > 150e3
    gain = at(steps, 38.0).target / at(steps, 36.0).target
    assert gain == pytest.approx(1.04**4, rel=0.01)  # 4 decisions of 0.5 s, +4 % each


def test_keyframes_at_a_link_as_fast_as_the_target_do_not_cut_it():
    ctl, steps = simulate(lambda t: 200e3, 40, RateControlConfig(10e3, 180e3, 180e3),
                          keyframe_every_s=10)  # fmt: skip
    assert all(s.target == 180e3 for s in steps)  # at the max: never cut
    assert max(s.unacked for s in steps) * 8 > 200e3  # though each keyframe queued > 1 s
    assert not ctl.decisions


def test_a_cut_link_drops_the_target_to_the_minimum_and_it_recovers():
    capacity = lambda t: 0.0 if 5 <= t < 10 else 100e3  # noqa: E731
    ctl, steps = simulate(capacity, 40, RateControlConfig(8e3, 120e3, 90e3))
    assert at(steps, 7.0).target == 8e3  # bounded below
    assert all(8e3 <= s.target <= 120e3 for s in steps)
    assert at(steps, 39.9).target > 70e3  # probed back up to the link
    assert max(s.target for s in steps) <= 120e3


def test_cloud_feedback_caps_the_target_and_backlog_backs_off():
    ctl = LinkRateController(RateControlConfig(1e3, 100e3, 80e3))
    assert ctl.update(LinkSample(0.0, 0, 0, 0)) == 80e3
    assert ctl.update(LinkSample(0.6, 6000, 6000, 0, recommended_bps=30e3)) == 30e3
    assert ctl.decisions[-1].reason == "cloud recommends"
    assert ctl.update(LinkSample(1.2, 9000, 9000, 0, cloud_backlog=20, cloud_max_backlog=32)) \
        == pytest.approx(21e3)  # fmt: skip
    assert ctl.decisions[-1].reason == "cloud decode backlog"
    assert ctl.update(LinkSample(1.3, 9000, 9000, 0)) == pytest.approx(21e3)  # interval


def test_goodput_below_the_sent_rate_backs_off():
    ctl = LinkRateController(RateControlConfig(1e3, 100e3, 80e3))
    t, sent, acked = 0.0, 0, 0
    for _ in range(12):  # 10 kB/s handed over, 5 kB/s acknowledged: the network queues
        t, sent, acked = t + 0.1, sent + 1000, acked + 500
        ctl.update(LinkSample(t, sent, acked, sent - acked))
    assert ctl.target_bps == pytest.approx(min(0.7 * 80e3, 0.85 * 40e3), rel=0.05)
    assert ctl.decisions[-1].reason == "goodput below sent rate"


def test_config_is_checked():
    for bad in (RateControlConfig(0, 1), RateControlConfig(2, 1),
                RateControlConfig(1, 2, decrease=1.0)):  # fmt: skip
        with pytest.raises(ValueError):
            LinkRateController(bad)
    assert LinkRateController(RateControlConfig(5, 10, start_bps=100)).target_bps == 10


# ------------------------------------------------------------------------------ wiring


class _Encoder:
    def __init__(self) -> None:
        self.targets: list[float] = []

    def set_target_bps(self, bps: float) -> None:
        self.targets.append(bps)


def test_auto_rate_records_targets_in_the_spool_and_a_restart_replays_them(tmp_path):
    clock = [0.0]
    spool = Spool(tmp_path / "spool", 1 << 20)
    spool.bind(b"header")
    stats = LinkStats()
    config = RateControlConfig(1e3, 100e3, 50e3, probe_share=0.2)
    auto = AutoRate(LinkRateController(config), spool, stats, 1e5, clock=lambda: clock[0])
    encoder = _Encoder()
    for seq in range(4):  # an idle link: the target probes up, 20 % per second
        auto.apply(encoder, seq)
        spool.put(seq, 2, b"x" * 10)
        spool.ack(seq + 1)
        clock[0] += 2.5
    assert encoder.targets == pytest.approx([50e3, 75e3, 100e3])  # bit/s, up to the max
    again = AutoRate(LinkRateController(config), Spool(tmp_path / "spool", 1 << 20), stats,
                     1e5, clock=lambda: clock[0])  # fmt: skip
    replayed = _Encoder()
    for seq in range(4):
        again.apply(replayed, seq)
    assert replayed.targets == encoder.targets


def test_a_spool_of_bits_per_pixel_targets_is_replayed_in_bit_per_s(tmp_path):
    """Spools written before targets were kept in bit/s recorded bits per pixel."""
    spool = Spool(tmp_path / "spool", 1 << 20)
    spool.bind(b"header")
    (tmp_path / "spool" / "targets.jsonl").write_text('{"seq": 0, "target_bpp": 0.004}\n'
                                                      '{"seq": 3, "target_bps": 2500.0}\n')
    assert spool.recorded_target(2, pixels_per_s=1e6) == pytest.approx(4000.0)
    assert spool.recorded_target(5, pixels_per_s=1e6) == pytest.approx(2500.0)


# ------------------------------------------------------------------------------ codec


def test_rate_controller_target_changes_mid_stream():
    rate = RateController(0.004, (768, 576), fps=10.0, margin=1.0, expected_frames=100)
    rate.start_frame()
    rate.spend(5000, 0, 4000)  # the first keyframe: its debt spread over 99 frames
    earn = rate._earn
    rate.set_target_bps(0.008 * 768 * 576 * 10.0)  # 0.008 bits per pixel at 10 frames/s
    assert rate.frame_bytes == pytest.approx(2 * 221.184)
    assert rate.window_bytes == pytest.approx(2 * 221.184 * 100)
    assert rate._earn == pytest.approx(earn + 221.184)  # the debt is still repaid
    balance = rate.balance
    rate.start_frame()
    assert rate.balance == pytest.approx(balance + earn + 221.184)
    with pytest.raises(ValueError):
        rate.set_target_bps(0)


def test_encoder_target_changes_mid_stream_and_lowers_the_cost(sample_frames):
    import dataclasses

    from semcodec.codec.core.models import ModelNotFoundError
    from semcodec.codec.scaffold.codec import ScaffoldEncoder
    from semcodec.codec.scaffold.levels import LEVELS

    config = dataclasses.replace(LEVELS[1], target_bpp=0.2)
    frames = sample_frames[:4]
    size = (frames.shape[2], frames.shape[1])
    try:
        high, low = (ScaffoldEncoder(config, size, 7.0, expected_frames=4) for _ in range(2))
    except ModelNotFoundError as exc:
        pytest.skip(f"the person detector is not available: {exc}")
    cost = {"high": 0, "low": 0}
    for k, frame in enumerate(frames):  # the first frame (the split) at the same target
        if k == 1:
            low.set_target_bps(0.01 * size[0] * size[1] * 7.0)
        high_bytes = len(high.encode_frame(frame)[0].to_bytes())
        low_bytes = len(low.encode_frame(frame)[0].to_bytes())
        cost["high"] += high_bytes if k else 0
        cost["low"] += low_bytes if k else 0
    assert cost["low"] < cost["high"]
    assert low.header(4) == high.header(4)  # the header keeps the starting target
    with pytest.raises(ValueError, match="no rate control"):
        ScaffoldEncoder(LEVELS[0], size, 7.0).set_target_bps(1000.0)


# ------------------------------------------------------------------------------ cloud


def test_recommended_rate_is_the_decoders_throughput_less_a_margin():
    assert recommend_rate(100e3, 50e3, backlog=8, max_backlog=32) == 0.0  # keeping up
    assert recommend_rate(100e3, 50e3, backlog=16, max_backlog=32) == pytest.approx(
        50e3 * 0.9 * 0.75)  # fmt: skip
    assert recommend_rate(40e3, 50e3, backlog=32, max_backlog=32) == pytest.approx(
        40e3 * 0.9 * 0.5)  # fmt: skip
    assert recommend_rate(100e3, 0.0, backlog=16, max_backlog=32) == pytest.approx(
        50e3 * 0.9 * 0.75)  # a stalled decoder: half the goodput  # fmt: skip
    assert recommend_rate(0.0, 0.0, backlog=16, max_backlog=32) == 1.0  # never "none"
    assert recommend_rate(100e3, 50e3, backlog=5, max_backlog=0) == 0.0


class _FakeUnit:
    def __init__(self, kind: int, seq: int) -> None:
        self.kind, self.seq = kind, seq

    def to_bytes(self) -> bytes:
        return bytes([self.kind]) * (10 + self.seq)


class _FakeEncoder(_Encoder):
    lookahead_frames = 0
    primed = True  # codec.scaffold.codec.with_lookahead: nothing to read ahead

    def __init__(self) -> None:
        super().__init__()
        self.seq = 0

    def prime(self, frames) -> None: ...

    def encode_frame(self, frame):
        self.seq += 1
        return _FakeUnit(1 if self.seq == 1 else 2, self.seq - 1), None

    def end(self):
        return _FakeUnit(3, self.seq)


def test_realtime_producer_waits_per_frame_but_not_for_units_already_spooled(tmp_path):
    import time

    from semcodec.edge.stream.agent import produce_units

    spool = Spool(tmp_path / "spool", 1 << 20)
    spool.bind(b"header")
    start = time.monotonic()
    assert produce_units(_FakeEncoder(), [None] * 3, spool, realtime_fps=20) == 4
    assert time.monotonic() - start >= 0.1  # frames at 0, 50 and 100 ms
    again = Spool(tmp_path / "spool2", 1 << 20)
    again.bind(b"header")
    for seq in range(6):  # an earlier run spooled 6 units
        again.put(seq, 2, b"x")
    start = time.monotonic()
    assert produce_units(_FakeEncoder(), [None] * 8, again, realtime_fps=20) == 9
    elapsed = time.monotonic() - start
    assert 0.05 <= elapsed < 0.25  # only frames 6 and 7 are new: at 0 and 50 ms
