"""``cloud-decoder loadtest`` in small: 8 concurrent streams against a real server process
for 12 s, checked for what the issue asks of 64 streams over 60 s that does not depend on
the machine's load (flat memory, no stream starved, no errors); the latencies are measured
and printed, and the loadtest command's exit status says whether they met their targets.
The full run is ``cloud-decoder loadtest --streams 64 --seconds 60 --out DIR``
(see docs/service.md)."""

from __future__ import annotations

import csv
import json

import pytest
from loadtest import percentile  # tools/loadtest/ (pytest's pythonpath): not in the package

from semcodec.cloud.cli import main as cloud_main
from semcodec.edge.cli import main as edge_main


def test_percentile_is_the_nearest_rank():
    values = [float(v) for v in range(1, 101)]
    assert percentile(values, 0.99) == 99.0 and percentile(values, 0.5) == 50.0
    assert percentile([3.0], 0.99) == 3.0 and percentile([], 0.99) == 0.0


@pytest.mark.slow
def test_eight_streams_hold_the_latency_memory_and_fairness_checks(sample_dir, tmp_path,
                                                                   capsys):  # fmt: skip
    from semcodec.codec.core.models import ModelNotFoundError, resolve_model

    try:
        resolve_model("ssdlite_person")
    except ModelNotFoundError as exc:
        pytest.skip(f"the person detector is not available: {exc}")
    semc = tmp_path / "sample20.semc"  # 21 units: at 2 units/s a session lasts the run
    assert edge_main(["-q", "encode", str(sample_dir), "-o", str(semc), "--level", "1",
                      "--frames", "20"]) == 0  # fmt: skip
    out = tmp_path / "load"
    status = cloud_main(["loadtest", "--streams", "8", "--seconds", "12", "--fps", "2",
                         "--ramp-s", "2", "--workers", "2", "--semc", str(semc), "--out",
                         str(out)])  # fmt: skip
    summary = json.loads((out / "summary.json").read_text())
    with capsys.disabled():
        print(f"\nloadtest (8 streams, 12 s): health {summary['health_ms']}, ack "
              f"{summary['ack_ms']}, streams {summary['streams']}, RSS {summary['rss_mib']}")
    # latency targets (health p99 < 50 ms, ack p99 < 200 ms) are the benchmark's to measure
    # (`cloud-decoder loadtest`, numbers in the note): a loaded CI machine must not fail them
    checks = summary["checks"]
    assert status == (0 if summary["ok"] else 1)
    assert checks["no_errors"] and checks["no_stream_starved"] and checks["rss_flat"], summary
    streams = summary["streams"]
    assert streams["count"] == 8 and streams["error_count"] == 0
    assert streams["sessions_complete"] == streams["sessions"] >= 8
    assert streams["units_acked_min"] >= 21
    assert summary["health_ms"]["count"] >= 100 and summary["ack_ms"]["count"] >= 8 * 20
    assert summary["server"]["exit_status"] == 0
    rows = list(csv.DictReader((out / "rss.csv").read_text().splitlines()))
    assert len(rows) >= 12 and all(float(r["rss_mib"]) > 0 for r in rows)
    assert max(float(r["sessions_active"]) for r in rows) == 8
    assert (out / "rss.png").stat().st_size > 0


@pytest.mark.slow
def test_viewers_watch_every_camera_while_the_streams_run(sample_dir, tmp_path, capsys):
    """16 live viewers (MJPEG from the HTTP front door) on 8 streams: every viewer gets
    frames, none fails, and the streams pass the same checks (the acknowledgement p99 with
    and without viewers is the benchmark's: docs/service.md)."""
    semc = tmp_path / "sample20.semc"
    assert edge_main(["-q", "encode", str(sample_dir), "-o", str(semc), "--level", "1",
                      "--frames", "20"]) == 0  # fmt: skip
    out = tmp_path / "load"
    status = cloud_main(["loadtest", "--streams", "8", "--seconds", "12", "--fps", "2",
                         "--ramp-s", "2", "--workers", "2", "--semc", str(semc), "--out",
                         str(out), "--viewers", "16"])  # fmt: skip
    summary = json.loads((out / "summary.json").read_text())
    with capsys.disabled():
        print(f"\nloadtest (8 streams, 16 viewers, 12 s): ack {summary['ack_ms']['p99']} ms "
              f"p99, viewers {summary['viewers']}")
    assert status == (0 if summary["ok"] else 1)
    assert summary["checks"]["no_errors"] and summary["checks"]["no_stream_starved"], summary
    viewers = summary["viewers"]
    assert viewers["count"] == 16 and viewers["frames_min"] > 0 and not viewers["errors"]
