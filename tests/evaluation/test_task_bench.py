"""The task-feature benchmark: saving factors (known answers), and one small real run on the
embedded sample through ``semcodec-bench task`` (features + a JPEG baseline)."""

from __future__ import annotations

import json
import math

import pytest

from semcodec.evaluation.bench.task import add_savings, format_table


def _row(codec, curve, bpp, moda, **kw):
    return {"sequence": "s", "codec": codec, "curve": curve, "setting": kw.pop("setting", "x"),
            "bpp": bpp, "bytes_per_frame": bpp * 100, "moda": moda, "modp": 0.7, **kw}


def test_saving_is_the_best_baseline_bpp_at_the_same_moda_over_the_rows() -> None:
    rows = [
        _row("raw", "raw", 24.0, 0.6),
        _row("x265", "x265", 0.01, 0.3), _row("x265", "x265", 0.04, 0.5),
        _row("jpeg", "jpeg", 0.1, 0.2), _row("jpeg", "jpeg", 0.4, 0.55),
        _row("features", "features", 0.002, 0.4),
        _row("features", "features", 0.001, 0.1),
        _row("features", "features", 0.003, 0.7),
    ]  # fmt: skip
    out = add_savings(rows)
    mid, low, high = out[5], out[6], out[7]
    # x265 reaches 0.4 halfway (in log-BPP) between 0.01 and 0.04: 0.02; JPEG needs more
    assert mid["saving_bound"] == "=" and mid["saving_baseline"] == "x265"
    assert math.isclose(mid["saving"], 0.02 / 0.002, rel_tol=1e-9)
    # every baseline is already better at its cheapest point: an upper bound
    assert low["saving_bound"] == "<=" and math.isclose(low["saving"], 0.01 / 0.001)
    # none reaches 0.7: a lower bound from the dearest point of all
    assert high["saving_bound"] == ">=" and math.isclose(high["saving"], 0.4 / 0.003)
    table = format_table(out)
    assert "| raw | best on uncompressed frames |" in table and ">= 133.33x (jpeg)" in table


def test_task_command_on_the_sample(tmp_path, sample_dir) -> None:
    """A real run: 4 frames, an untrained bottleneck, one JPEG point; rows and files."""
    import numpy as np
    import torch

    from semcodec.codec.core.models import ModelError
    from semcodec.codec.entropy.features import count_symbols, tables_from_counts
    from semcodec.codec.task.bottleneck import (
        BottleneckConfig,
        FeatureBottleneck,
        TaskBottleneck,
    )
    from semcodec.codec.task.split import SplitConfig
    from semcodec.evaluation.cli import main

    torch.manual_seed(0)
    model = FeatureBottleneck(BottleneckConfig(latent=4, hidden=8)).eval()
    rng = np.random.default_rng(0)
    counts = count_symbols([[rng.integers(-2, 3, (4, 19, 19)) for _ in range(2)]], groups=4)
    path = TaskBottleneck(model, tables_from_counts(counts), SplitConfig(), counts,
                          {"beta": 2.0}).save(tmp_path / "b.pt")  # fmt: skip
    out = tmp_path / "out"
    try:
        from semcodec.codec.task.split import load_split_model

        load_split_model()
    except ModelError as exc:
        pytest.skip(f"detector model not available: {exc}")
    code = main(["task", "--data", str(sample_dir), "--frames", "4", "--bottlenecks", str(path),
                 "--baselines", "jpeg:q=50", "--threads", "1", "--out", str(out), "-q"])
    assert code == 0
    rows = json.loads((out / "rows.json").read_text())
    assert [r["codec"] for r in rows] == ["raw", "jpeg", "features"]
    features = rows[2]
    assert features["setting"] == "beta=2,skip=0" and features["frames"] == 4
    assert features["bytes_per_frame"] > 0 and 0 < features["bpp"] < rows[1]["bpp"]
    assert features["temporal_gain"] > 0 and features["edge_mflop_per_frame"] > 1000
    assert rows[0]["edge_process_peak_rss_mib"] > 50 and rows[0]["edge_process_frames"] == 4
    assert (out / "report.md").is_file() and (out / "rows.csv").is_file()
    assert not list(out.glob("*.partial"))
    # what `semcodec-bench figures` reads of a run: its rows and its command
    lines = (out / "results.jsonl").read_text().splitlines()
    assert [json.loads(line)["codec"] for line in lines] == ["raw", "features"]
    assert json.loads(lines[1])["saving_baseline"] == "jpeg"  # measured against the baseline
    assert "Command: `semcodec-bench task --data " in (out / "report.md").read_text()
    commands = (out / "commands.txt").read_text().splitlines()  # what a result set names
    assert len(commands) == 1 and commands[0].startswith("semcodec-bench task --data ")
    # a second run reuses the baseline row (resumes) and gives the same table
    cell = out / "baselines" / "jpeg-q=50.json"
    stamp = cell.stat().st_mtime_ns
    assert main(["task", "--data", str(sample_dir), "--frames", "4", "--bottlenecks", str(path),
                 "--baselines", "jpeg:q=50", "--threads", "1", "--out", str(out), "-q"]) == 0
    assert cell.stat().st_mtime_ns == stamp
    again = json.loads((out / "rows.json").read_text())
    assert again[1]["moda"] == rows[1]["moda"] and again[2]["bpp"] == rows[2]["bpp"]
    # a bad bottleneck file: exit 2
    bad = tmp_path / "bad.pt"
    bad.write_bytes(b"x")
    assert main(["task", "--data", str(sample_dir), "--frames", "2", "--bottlenecks", str(bad),
                 "--baselines", "--out", str(tmp_path / "o2"), "-q"]) == 2


@pytest.mark.slow  # the rate table of six bottlenecks: 45 s of CPU
def test_task_command_at_targets_on_the_sample(tmp_path, sample_dir) -> None:
    """``--targets-kbps``: a row per budget coded as the edge codes it (shipped bottlenecks,
    rate control), with the rate reached and what was chosen; no fixed-bottleneck rows."""
    from semcodec.codec.core.models import ModelError
    from semcodec.codec.task.stream import shipped_bottlenecks
    from semcodec.evaluation.cli import main

    try:
        from semcodec.codec.task.split import load_split_model

        load_split_model()
    except ModelError as exc:
        pytest.skip(f"detector model not available: {exc}")
    out = tmp_path / "out"
    assert main(["task", "--data", str(sample_dir), "--frames", "6", "--baselines",
                 "--targets-kbps", "8", "--threads", "1", "--out", str(out), "-q"]) == 0
    rows = json.loads((out / "rows.json").read_text())
    assert [r["codec"] for r in rows] == ["raw", "features"]
    row = rows[1]
    assert row["curve"] == "features-target" and row["setting"] == "target=8kbps"
    assert row["beta"] in shipped_bottlenecks() and row["rate_status"] in ("ok", "over_budget")
    assert row["kbps"] == pytest.approx(row["rate_ratio"] * 8)
    frame, beta, _, _, reason = json.loads(row["rate_switches"])[0]  # from frame 1, with β
    assert (frame, beta, reason) == (1, row["beta"], "start") and row["frames"] == 6
    assert row["betas_used"].split(",")[0] == f"{row['beta']:g}" and row["beta_switches"] >= 0
    assert row["rate_status_end"] in ("ok", "over_budget", "below_floor")
    assert -1 <= row["moda"] <= 1
    assert main(["task", "--data", str(sample_dir), "--frames", "6", "--min-agreement", "0.5",
                 "--out", str(tmp_path / "o2"), "-q"]) == 2  # the floor goes with a target
