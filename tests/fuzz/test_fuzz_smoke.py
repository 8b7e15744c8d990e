"""The fuzz harness on a small budget: no untyped error, crash, hang or memory blow-up."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))

import fuzz_decoder  # noqa: E402


@pytest.fixture(scope="module")
def seeds():
    return fuzz_decoder.synthetic_seeds(cache=None)


def test_parser_fuzz_smoke(seeds, tmp_path):
    tally = fuzz_decoder.run_parser_fuzz(400, seed=11, seeds=seeds, failures=tmp_path)
    assert tally.inputs == 400
    assert (tally.untyped, tally.crashes, tally.hangs) == (0, 0, 0), list(tmp_path.iterdir())


def test_decode_fuzz_smoke(seeds, tmp_path):
    tally = fuzz_decoder.run_decode_fuzz(24, seed=12, seeds=seeds, timeout=60, jobs=1,
                                         failures=tmp_path)  # fmt: skip
    assert tally.inputs == 24 and tally.ok + tally.typed == 24, fuzz_decoder.summary([tally])
    assert tally.failures == 0, [p.read_text()[-2000:] for p in tmp_path.glob("*.txt")]


def test_a_crashing_worker_is_counted_as_a_crash(seeds, monkeypatch, tmp_path):
    tally = fuzz_decoder.Tally("decode")
    assert fuzz_decoder.classify({"failure": "crash"}, tally, 1500) == "crash"
    assert (
        fuzz_decoder.classify(
            {
                "status": None,
                "message": "Traceback",
                "rss_mb": 1.0,
                "leftovers": [],
                "out_exists": False,
            },
            tally,
            1500,
        )
        == "untyped"
    )
    assert (
        fuzz_decoder.classify(
            {"status": 2, "message": "e", "rss_mb": 9999.0, "leftovers": [], "out_exists": False},
            tally,
            1500,
        )
        == "memory"
    )
    assert (tally.crashes, tally.untyped, tally.memory) == (1, 1, 1)
    worker = fuzz_decoder.Worker()
    try:
        worker.proc.kill()
        assert worker.decode(seeds[0], timeout=10, rss_cap_mb=1500)["failure"] == "crash"
    finally:
        worker.close()
    worker = fuzz_decoder.Worker()
    try:  # an input that takes longer than the timeout is a hang, and the worker is killed
        assert worker.decode(seeds[0], timeout=0.001, rss_cap_mb=1500)["failure"] == "hang"
        assert worker.proc.poll() is not None
    finally:
        worker.close()
