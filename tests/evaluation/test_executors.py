"""Executors run grid cells locally or in a process pool, and fail clearly otherwise."""

from __future__ import annotations

import math

import pytest

from semcodec.evaluation.executors import (
    ExecutorError,
    LocalExecutor,
    ProcessExecutor,
    create_executor,
)


def test_local_and_process_pool_give_the_same_results():
    items = [1.0, 4.0, 9.0, 16.0]
    local = dict(LocalExecutor().map_unordered(math.sqrt, items))
    pooled = dict(ProcessExecutor(2).map_unordered(math.sqrt, items))
    assert local == pooled == {1.0: 1.0, 4.0: 2.0, 9.0: 3.0, 16.0: 4.0}


def test_bad_executor_settings():
    with pytest.raises(ExecutorError, match="unknown executor"):
        create_executor("spark")
    with pytest.raises(ExecutorError, match="workers"):
        ProcessExecutor(0)
    try:
        import ray  # noqa: F401
    except ImportError:
        with pytest.raises(ExecutorError, match="pip install ray"):
            create_executor("ray")
