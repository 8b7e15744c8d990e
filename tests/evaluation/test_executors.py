"""Executors run grid cells locally or in a process pool, and fail clearly otherwise."""

from __future__ import annotations

import math

import pytest

from semcodec.evaluation.bench.executors import (
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


_RAY_ENV = {"RAY_USAGE_STATS_ENABLED": "0", "RAY_ADDRESS": ""}


@pytest.fixture(scope="module")
def ray_starts():
    """Skips, with the reason, where Ray is not installed or a local instance cannot start."""
    import os
    import subprocess
    import sys

    pytest.importorskip("ray", reason="Ray is not installed (pip install 'semcodec[ray]')")
    probe = ("import ray; ray.init(num_cpus=1, include_dashboard=False); "
             "print('CPUS', ray.cluster_resources().get('CPU')); ray.shutdown()")  # fmt: skip
    try:
        done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True,
                              timeout=180, env={**os.environ, **_RAY_ENV})  # fmt: skip
    except subprocess.TimeoutExpired:
        pytest.skip("a local Ray instance did not start within 180 s")
    if done.returncode != 0 or "CPUS" not in done.stdout:
        pytest.skip(f"a local Ray instance cannot start here: {done.stderr.strip()[-300:]}")


@pytest.mark.slow
def test_a_grid_on_ray_gives_the_local_executors_rows(ray_starts, tmp_path):
    """A real local Ray instance runs the cells as Ray tasks in other processes: the rows
    (bytes and quality) equal those of the local executor."""
    import json
    import os
    import subprocess
    import sys

    grid = ["run", "--codecs", "x264,jpeg", "--crf", "33,38", "--quality", "50", "--frames",
            "12", "--metrics", "psnr", "-q"]  # fmt: skip
    rows = {}
    for executor in ("local", "ray"):
        out = tmp_path / executor
        done = subprocess.run([sys.executable, "-m", "semcodec.evaluation.cli", *grid,
                               "--executor", executor, "--out", str(out)],
                              capture_output=True, text=True, timeout=900,
                              env={**os.environ, **_RAY_ENV})  # fmt: skip
        assert done.returncode == 0, done.stderr[-2000:]
        lines = (out / "results.jsonl").read_text().splitlines()
        rows[executor] = {(r["codec"], r["setting"]): (r["bytes"], r["psnr"])
                          for r in map(json.loads, lines)}  # fmt: skip
    assert len(rows["local"]) == 3
    assert rows["ray"] == rows["local"]
