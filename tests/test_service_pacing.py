"""Pacers with known answers: the capacity-trace pacer (Mahimahi format, looped, scaled with
its shape kept) on a tiny hand-written trace and a simulated clock."""

from __future__ import annotations

import pytest

from semcodec.edge.stream.pacer import TraceError, TracePacer, read_mahimahi

from .conftest import SHARED

#: Opportunities at 1 ms (two packets), 3 ms and 10 ms; the trace loops every 10 ms.
TINY = [1, 1, 3, 10]


class FakeClock:
    """A clock that only moves when slept on (seconds)."""

    def __init__(self) -> None:
        self.now = 0.0
        self.slept: list[float] = []

    def __call__(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.slept.append(seconds)
        self.now += seconds


def tiny(scale_bps: float | None = None) -> tuple[TracePacer, FakeClock]:
    clock = FakeClock()
    return TracePacer(TINY, scale_bps, clock=clock, sleep=clock.sleep), clock


def test_capacity_of_a_tiny_trace_over_time_spans():
    pacer, _ = tiny()
    assert pacer.period_ms == 10
    assert pacer.mean_bps == pytest.approx(4 * 1500 * 8 / 0.010)  # 4.8 Mbit/s
    assert [pacer.opportunities(t) for t in (0, 1, 2, 3, 9, 10, 11, 13, 20, 25)] == [
        0, 2, 2, 3, 3, 4, 6, 7, 8, 11]  # fmt: skip
    assert pacer.capacity_bytes(0, 0.010) == 6000
    assert pacer.capacity_bytes(0.005, 0.012) == 4500  # 10 ms, then 11 ms twice
    assert pacer.capacity_bytes(0.0035, 0.0095) == 0  # a gap: nothing can be sent
    assert pacer.capacity_bytes(0, 1.0) == 100 * 6000  # looped


def test_scaling_sets_the_mean_and_keeps_the_shape():
    raw, _ = tiny()
    scaled, _ = tiny(scale_bps=480_000)  # a tenth of the trace's 4.8 Mbit/s
    assert scaled.mean_bps == pytest.approx(480_000)
    assert scaled.packet_bytes == pytest.approx(150)
    spans = [(0, 0.001), (0.0005, 0.0031), (0.003, 0.0095), (0.0095, 0.0205), (0, 0.37)]
    for t0, t1 in spans:
        assert scaled.capacity_bytes(t0, t1) == pytest.approx(raw.capacity_bytes(t0, t1) / 10)


def test_consume_waits_for_the_opportunities_and_idle_capacity_is_lost():
    pacer, clock = tiny()
    assert pacer.consume(3000) == pytest.approx(0.001)  # both 1 ms packets
    assert clock.now == pytest.approx(0.001)
    assert pacer.consume(1500) == pytest.approx(0.002)  # the 3 ms packet
    assert pacer.consume(1) == pytest.approx(0.007)  # the 10 ms packet (a gap before it)
    clock.now = 0.025  # idle: the packets at 11, 11, 13, 20 ms went unused
    assert pacer.consume(100) == pytest.approx(0.005)  # waits for 30 ms, saves nothing
    assert pacer.consume(1400) == 0.0  # the rest of the 30 ms packet


def test_long_run_rate_of_a_scaled_trace():
    pacer, clock = tiny(scale_bps=80_000)  # 10 kB/s
    for _ in range(200):
        pacer.consume(500)  # 100 kB
    assert clock.now == pytest.approx(10.0, abs=0.011)


def test_read_mahimahi_and_refuse_bad_traces(tmp_path):
    good = tmp_path / "good.up"
    good.write_text("1\n1\n\n3\n10\n")
    assert read_mahimahi(good) == TINY
    assert TracePacer.from_file(good, 480_000).packet_bytes == pytest.approx(150)
    for name, text in (("empty.up", ""), ("zero.up", "0\n0\n"), ("words.up", "1\nten\n"),
                       ("negative.up", "-1\n5\n")):  # fmt: skip
        (tmp_path / name).write_text(text)
        with pytest.raises(TraceError):
            read_mahimahi(tmp_path / name)
    with pytest.raises(TraceError, match="cannot read"):
        read_mahimahi(tmp_path / "missing.up")
    with pytest.raises(TraceError):
        TracePacer(TINY, scale_bps=0)


@pytest.mark.shared
def test_real_traces_scale_to_the_rate_under_test_with_their_dips():
    for name in ("ATT-LTE-driving-2016.up", "Verizon-EVDO-driving.up"):
        stamps = read_mahimahi(SHARED / "data" / "traces" / name)
        raw, scaled = TracePacer(stamps), TracePacer(stamps, 50_000)
        assert scaled.mean_bps == pytest.approx(50_000)
        ratio = 50_000 / raw.mean_bps
        seconds = [(t, t + 1.0) for t in range(0, 60)]
        raw_caps = [raw.capacity_bytes(*s) for s in seconds]
        assert [scaled.capacity_bytes(*s) for s in seconds] == pytest.approx(
            [c * ratio for c in raw_caps])
        assert min(raw_caps) < 0.5 * max(raw_caps)  # the shape has dips worth keeping
