"""Compute cost: FLOPs of a module's forward pass and wall-clock timing helpers."""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from types import TracebackType
from typing import Any

import torch
from torch.utils.flop_counter import FlopCounterMode

__all__ = ["Stopwatch", "flops_per_frame", "median_fps"]


def flops_per_frame(module: torch.nn.Module, example_inputs: tuple, frames: int = 1) -> int:
    """FLOPs of one forward ``module(*example_inputs)`` divided by ``frames`` (integer division).

    Counted with :class:`torch.utils.flop_counter.FlopCounterMode` (one multiply-add = 2 FLOPs;
    only matmul/conv-like ops are counted, element-wise ops are not). Runs under
    ``torch.no_grad()``; the module's train/eval mode is left as it is.

    Raises:
        ValueError: ``frames < 1`` or ``example_inputs`` is not a tuple.
    """
    if frames < 1:
        raise ValueError(f"frames must be >= 1, got {frames}")
    if not isinstance(example_inputs, tuple):
        raise ValueError(
            "example_inputs must be a tuple of positional inputs (wrap one tensor as (x,)), "
            f"got {type(example_inputs).__name__}"
        )
    counter = FlopCounterMode(display=False)
    with torch.no_grad(), counter:
        module(*example_inputs)
    return counter.get_total_flops() // frames


class Stopwatch:
    """Context manager accumulating wall-clock seconds (``time.perf_counter``) over uses.

    >>> watch = Stopwatch()
    >>> with watch:
    ...     pass
    >>> watch.seconds >= 0.0
    True
    """

    def __init__(self) -> None:
        self.seconds = 0.0
        self.laps = 0
        self._start: float | None = None

    def __enter__(self) -> Stopwatch:
        if self._start is not None:
            raise RuntimeError("Stopwatch is already running; it cannot be nested")
        self._start = time.perf_counter()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        assert self._start is not None
        self.seconds += time.perf_counter() - self._start
        self.laps += 1
        self._start = None

    def fps(self, frames: int) -> float:
        """Frames per second for ``frames`` frames processed in the accumulated time.

        Raises:
            ValueError: ``frames < 0`` or no time has been accumulated.
        """
        if frames < 0:
            raise ValueError(f"frames must be >= 0, got {frames}")
        if self.seconds <= 0.0:
            raise ValueError("no time accumulated yet; time some work with `with watch:` first")
        return frames / self.seconds


def median_fps(
    step: Callable[[], Any], frames_per_call: int = 1, repeats: int = 5, warmup: int = 1
) -> float:
    """Median throughput (frames/s) of ``repeats`` timed calls of ``step()``.

    ``warmup`` untimed calls are made first (allocator, lazy init). Each call is assumed to
    process ``frames_per_call`` frames.

    Raises:
        ValueError: ``repeats < 1``, ``warmup < 0`` or ``frames_per_call < 1``.
    """
    if repeats < 1 or warmup < 0 or frames_per_call < 1:
        raise ValueError(
            f"need repeats >= 1, warmup >= 0, frames_per_call >= 1; "
            f"got {repeats}, {warmup}, {frames_per_call}"
        )
    for _ in range(warmup):
        step()
    rates = []
    for _ in range(repeats):
        start = time.perf_counter()
        step()
        elapsed = max(time.perf_counter() - start, 1e-12)
        rates.append(frames_per_call / elapsed)
    return statistics.median(rates)
