"""Tests of evaluation.metrics.compute: FLOP counting and timing."""

from __future__ import annotations

import itertools

import pytest
import torch
from torch import nn

from semcodec.evaluation.metrics import compute
from semcodec.evaluation.metrics.compute import Stopwatch, flops_per_frame, median_fps


@pytest.mark.parametrize(("batch", "d_in", "d_out"), [(1, 8, 4), (5, 16, 32)])
def test_linear_flops(batch: int, d_in: int, d_out: int) -> None:
    layer = nn.Linear(d_in, d_out)
    assert flops_per_frame(layer, (torch.zeros(batch, d_in),)) == 2 * batch * d_in * d_out


def test_conv2d_flops_and_per_frame_division() -> None:
    frames, c_in, c_out, k, h, w = 4, 3, 8, 3, 10, 12
    conv = nn.Conv2d(c_in, c_out, k, padding=1)
    total = 2 * frames * c_out * h * w * c_in * k * k
    x = torch.zeros(frames, c_in, h, w)
    assert flops_per_frame(conv, (x,)) == total
    assert flops_per_frame(conv, (x,), frames=frames) == total // frames


def test_flops_argument_errors() -> None:
    layer = nn.Linear(2, 2)
    with pytest.raises(ValueError, match="frames"):
        flops_per_frame(layer, (torch.zeros(1, 2),), frames=0)
    with pytest.raises(ValueError, match="tuple"):
        flops_per_frame(layer, torch.zeros(1, 2))  # type: ignore[arg-type]


def test_stopwatch_accumulates(monkeypatch: pytest.MonkeyPatch) -> None:
    ticks = itertools.chain([10.0, 10.5, 20.0, 21.5])
    monkeypatch.setattr(compute.time, "perf_counter", lambda: next(ticks))
    watch = Stopwatch()
    with watch:
        pass
    with watch:
        pass
    assert watch.seconds == pytest.approx(2.0)
    assert watch.laps == 2
    assert watch.fps(50) == pytest.approx(25.0)


def test_stopwatch_errors() -> None:
    watch = Stopwatch()
    with pytest.raises(ValueError, match="no time"):
        watch.fps(10)
    with watch, pytest.raises(RuntimeError, match="nested"), watch:
        pass


def test_stopwatch_counts_time_on_exceptions() -> None:
    watch = Stopwatch()
    with pytest.raises(KeyError), watch:
        raise KeyError("x")
    assert watch.laps == 1 and watch.seconds >= 0.0


def test_median_fps(monkeypatch: pytest.MonkeyPatch) -> None:
    # Each timed call reads perf_counter twice; durations 0.1, 0.2, 0.4 s -> median 0.2 s.
    ticks = iter([0.0, 0.1, 1.0, 1.2, 2.0, 2.4])
    monkeypatch.setattr(compute.time, "perf_counter", lambda: next(ticks))
    calls = []
    assert median_fps(lambda: calls.append(1), frames_per_call=4, repeats=3, warmup=2) == (
        pytest.approx(20.0)
    )
    assert len(calls) == 5
    with pytest.raises(ValueError):
        median_fps(lambda: None, repeats=0)
