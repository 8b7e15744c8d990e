"""semcodec-bench (and edge-agent) through main([...]) and as processes: a real small grid,
resumability, argument checks before any expensive work, --version, Ctrl-C."""

from __future__ import annotations

import csv
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from semcodec.codec.core.console import package_version
from semcodec.evaluation.cli import main

REQUIRED_COLUMNS = [
    "sequence", "codec", "setting", "frames", "width", "height", "bytes", "bpp", "psnr",
    "ms_ssim", "st_lpips", "moda", "modp", "enc_fps", "dec_fps", "dec_flops_per_frame",
]  # fmt: skip


def _run(tmp_path, *extra):
    return main(
        [
            "run",
            "--frames",
            "6",
            "--codecs",
            "x264,raw",
            "--crf",
            "30,40",
            "--preset",
            "ultrafast",
            "--metrics",
            "psnr",
            "--out",
            str(tmp_path),
            "--no-progress",
            *extra,
        ]
    )


def test_run_writes_rows_and_is_resumable(tmp_path, capsys):
    assert _run(tmp_path) == 0
    with open(tmp_path / "results.csv") as fh:
        rows = list(csv.DictReader(fh))
    assert set(REQUIRED_COLUMNS) <= set(rows[0])
    assert {(r["codec"], r["setting"]) for r in rows} == {
        ("x264", "crf=30"),
        ("x264", "crf=40"),
        ("raw", "format=rgb24"),
    }
    by_setting = {r["setting"]: r for r in rows}
    raw = by_setting["format=rgb24"]
    assert float(raw["bpp"]) == 24.0 and int(raw["bytes"]) == 6 * 288 * 384 * 3
    assert raw["ms_ssim"] == "" and raw["dec_flops_per_frame"] == ""
    crf30, crf40 = by_setting["crf=30"], by_setting["crf=40"]
    assert int(crf30["bytes"]) > int(crf40["bytes"]) > 0
    assert float(crf30["bpp"]) == pytest.approx(8 * int(crf30["bytes"]) / (6 * 288 * 384))
    assert float(crf30["psnr"]) > float(crf40["psnr"]) > 20
    assert int(crf30["frames"]) == 6 and crf30["width"] == "384" and crf30["height"] == "288"
    assert (tmp_path / "report.md").exists() and (tmp_path / "rate_psnr.png").exists()
    lines = (tmp_path / "results.jsonl").read_text().splitlines()
    assert len(lines) == 3

    capsys.readouterr()
    assert _run(tmp_path) == 0
    assert "3 of 3 cells already done" in capsys.readouterr().err
    assert (tmp_path / "results.jsonl").read_text().splitlines() == lines


def test_raw_has_no_codec_speed(tmp_path):
    assert _run(tmp_path, "--crf", "30") == 0
    with open(tmp_path / "results.csv") as fh:
        rows = {r["codec"]: r for r in csv.DictReader(fh)}
    assert rows["raw"]["enc_fps"] == "" and rows["raw"]["dec_fps"] == ""
    assert float(rows["x264"]["enc_fps"]) > 0 and float(rows["x264"]["dec_fps"]) > 0
    table = (tmp_path / "report.md").read_text().split("## Results")[1]
    raw_line = next(line for line in table.splitlines() if "| raw |" in line)
    assert raw_line.rstrip().endswith("|  |  |")  # enc_fps, dec_fps: empty cells


def test_a_killed_run_leaves_a_resumable_file(tmp_path):
    (tmp_path / "results.jsonl").write_text('{"key": "partial-li')  # torn last line
    assert _run(tmp_path) == 0
    assert len(json.loads((tmp_path / "results.jsonl").read_text().splitlines()[-1])) > 5


def test_help_lists_accepted_names_without_none_defaults(capsys):
    from semcodec.evaluation.codecs.base import available_codecs

    with pytest.raises(SystemExit):
        main(["run", "--help"])
    text = " ".join(capsys.readouterr().out.split())
    assert ", ".join(available_codecs()) in text
    assert "psnr, ms_ssim, st_lpips, person, temporal, pose, moda, fvd" in text
    assert "local, process, ray" in text
    assert "(default: None)" not in text and "(default: False)" not in text
    assert "(default: )" not in text  # --settings
    assert "default: 0 (cold), 300 (steady)" in text  # --gop, which depends on --protocol
    assert "(default: medium)" in text and "(default: 1)" in text  # --preset, --scales


def test_help_explains_every_option(capsys):
    with pytest.raises(SystemExit) as exit_info:
        main(["run", "--help"])
    assert exit_info.value.code == 0
    text = capsys.readouterr().out
    for option in (
        "--data",
        "--frames",
        "--codecs",
        "--metrics",
        "--out",
        "--scales",
        "--executor",
        "--models-dir",
    ):
        assert option in text


def _status(entry, argv) -> int:
    """Exit status of ``entry(argv)``, whether it returns it or argparse raises SystemExit."""
    try:
        return entry(argv)
    except SystemExit as exc:
        return int(exc.code or 0)


@pytest.fixture
def nothing_expensive(monkeypatch):
    """Fails the test if a model is resolved, frames are read or the detector calibrated."""
    from semcodec.codec.core import models
    from semcodec.codec.scaffold import detector  # imported here, not first under the patch
    from semcodec.evaluation.bench import grid as bench
    from semcodec.evaluation.metrics import perceptual

    def forbidden(*args, **kwargs):
        raise AssertionError("expensive work started before the arguments were checked")

    monkeypatch.setenv("SEMCODEC_MODELS_DIR", "/nonexistent")
    for module, name in ((models, "resolve_model"), (perceptual, "resolve_model"),
                         (detector, "resolve_model"), (bench, "load_sequence"),
                         (bench, "calibrate_detectors")):  # fmt: skip
        monkeypatch.setattr(module, name, forbidden)


BAD_RUNS = [
    (["--codecs", "x266"], "unknown codec 'x266'"),
    (["--codecs", "nope"], "unknown codec"),
    (["--data", "/no/such/sequence"], "/no/such/sequence"),
    (["--metrics", "psnr,vmaf"], "unknown metric(s) vmaf"),
    (["--codecs", "x264", "--settings", "x264:crf=99"], "crf must be an integer in 0..51"),
    (["--codecs", "x264", "--crf", "99"], "crf must be an integer in 0..51"),
    (["--codecs", "x264", "--crf", "abc"], "'abc' is not a number"),
    (["--codecs", "scaffold", "--settings", "scaffold:level=7"], "expected level=0..3"),
    (["--codecs", "x264", "--settings", "x265:crf=30"], "'x265' is not in --codecs"),
    (["--codecs", "x264", "--settings", "x264"], "expected CODEC:SETTING"),
    (["--frames", "0"], "--frames: expected an integer >= 1, got '0'"),
    (["--frames", "-4"], "--frames: expected an integer >= 1, got '-4'"),
    (["--lpips-every", "0"], "--lpips-every"),
    (["--detector-threshold", "1.5"], "--detector-threshold"),
    (["--executor", "dask"], "invalid choice: 'dask'"),
    (["--workers", "0"], "--workers"),
    (["--codecs", "jpeg", "--quality", "0"], "q must be an integer in 1..100"),
    (["--codecs", "x264", "--scales", "2"], "scale must be in (0, 1]"),
    (["--crf", "28", "--qp", "30"], "not both"),
    (["--codecs", "scaffold", "--decoders", "warp,dream"], "--decoders warp,dream: expected"),
    (["--codecs", "scaffold", "--steps", "4"], "add diffusion to --decoders"),
    (["--codecs", "x264", "--decoders", "diffusion"], "name scaffold in --codecs"),
    (["--codecs", "scaffold", "--steps", "0"], "--steps"),
    (["--codecs", "scaffold", "--settings", "scaffold:level=1,steps=4"],
     "only for --decoder diffusion"),
]


def test_decoders_and_steps_make_one_scaffold_row_each():
    from semcodec.evaluation.cli import build_parser
    from semcodec.evaluation.cli.run import grid_from_args

    args = build_parser().parse_args(["run", "--codecs", "scaffold", "--settings",
                                      "scaffold:level=0;level=1", "--decoders",
                                      "warp,diffusion", "--steps", "1,4"])  # fmt: skip
    assert grid_from_args(args).codecs["scaffold"] == [
        "level=0,decoder=warp", "level=0,decoder=diffusion,steps=1",
        "level=0,decoder=diffusion,steps=4", "level=1,decoder=warp",
        "level=1,decoder=diffusion,steps=1", "level=1,decoder=diffusion,steps=4"]
    args = build_parser().parse_args(["run", "--codecs", "scaffold", "--settings",
                                      "scaffold:level=1"])  # fmt: skip
    assert grid_from_args(args).codecs["scaffold"] == ["level=1"]  # the default decoder


@pytest.mark.parametrize("argv, message", BAD_RUNS, ids=[m for _, m in BAD_RUNS])
def test_bad_input_exits_2_with_one_line_before_any_expensive_work(
    argv, message, tmp_path, capsys, nothing_expensive
):
    out = tmp_path / "out"
    assert _status(main, ["run", *argv, "--out", str(out), "--no-progress"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("semcodec-bench: error: "), err
    assert message in err
    assert not out.exists()


BAD_ENCODES = [
    (["--level", "7"], "invalid choice: 7"),
    (["--frames", "0"], "--frames: expected an integer >= 1"),
    (["--frames", "-2"], "--frames: expected an integer >= 1"),
    (["--start", "0"], "--start: expected an integer >= 1"),
    (["--start", "61"], "--start 61: the input has only 60 frames"),
    (["--threads", "0"], "--threads"),
]


@pytest.mark.parametrize("argv, message", BAD_ENCODES, ids=[m for _, m in BAD_ENCODES])
def test_edge_agent_bad_input_exits_2_before_loading_models(
    argv, message, tmp_path, capsys, sample_dir, nothing_expensive
):
    from semcodec.edge.cli import main as edge_main

    out = tmp_path / "x.semc"
    assert _status(edge_main, ["encode", str(sample_dir), "-o", str(out), *argv]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("edge-agent: error: "), err
    assert message in err
    assert not out.exists()


def test_version_on_all_three_commands(capsys):
    from semcodec.cloud.cli import main as cloud_main
    from semcodec.edge.cli import main as edge_main

    for entry, prog in ((main, "semcodec-bench"), (edge_main, "edge-agent"),
                        (cloud_main, "cloud-decoder")):  # fmt: skip
        assert _status(entry, ["--version"]) == 0
        assert capsys.readouterr().out.strip() == f"{prog} (semcodec {package_version()})"


def test_quiet_run_prints_nothing(tmp_path, capsys):
    assert _run(tmp_path, "-q") == 0
    assert capsys.readouterr() == ("", "")
    assert main(["-q", "report", str(tmp_path)]) == 0
    assert capsys.readouterr() == ("", "")


def test_codecs_and_models_listing(capsys):
    assert main(["codecs"]) == 0
    out = capsys.readouterr().out
    assert "x264" in out and "crf=23" in out
    assert main(["models", "list"]) == 0
    assert "stlpips_alex" in capsys.readouterr().out


def test_data_list_shows_the_sample_and_where_copies_are(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("SEMCODEC_NO_SHARED", "1")
    monkeypatch.delenv("SEMCODEC_DATA_DIR", raising=False)
    (tmp_path / "TUD-Stadtmitte").mkdir()
    assert main(["data", "list", "--data-dir", str(tmp_path)]) == 0
    lines = {line.split()[0]: line for line in capsys.readouterr().out.splitlines()}
    assert "embedded" in lines["PETS09-S2L1-384x288"]
    assert " here " in lines["TUD-Stadtmitte"]
    assert "not here" in lines["PETS09-S2L1"]  # no copy under any data root
    assert main(["data", "list"]) == 0
    assert "no data folder" in capsys.readouterr().out


def test_edge_and_cloud_entry_points_print_help(capsys):
    from semcodec.cloud.cli import main as cloud_main
    from semcodec.edge.cli import main as edge_main

    assert edge_main([]) == 0 and "edge-agent" in capsys.readouterr().out
    assert cloud_main([]) == 0 and "cloud-decoder" in capsys.readouterr().out


@pytest.mark.shared
def test_lpips_every_reaches_the_rows(tmp_path):
    from semcodec.codec.core.models import ModelNotFoundError, resolve_model

    try:
        resolve_model("stlpips_alex")
    except ModelNotFoundError:
        pytest.skip("ST-LPIPS weights are not beside the repository")
    argv = ["run", "--frames", "5", "--codecs", "raw", "--metrics", "st_lpips",
            "--lpips-every", "3", "--out", str(tmp_path), "--no-progress"]  # fmt: skip
    assert main(argv) == 0
    (row,) = [json.loads(line) for line in (tmp_path / "results.jsonl").read_text().splitlines()]
    assert row["st_lpips_frames"] == 2 and row["st_lpips"] == pytest.approx(0.0, abs=1e-6)


def test_raw_yuv_input_with_size_and_rate(tmp_path, sample_frames):
    import cv2

    yuv = tmp_path / "clip_384x288.yuv"
    with open(yuv, "wb") as fh:
        for frame in sample_frames[:4]:
            fh.write(cv2.cvtColor(frame, cv2.COLOR_RGB2YUV_I420).tobytes())
    out = tmp_path / "out"
    argv = ["run", "--data", str(yuv), "--width", "384", "--height", "288", "--fps", "25",
            "--codecs", "raw", "--metrics", "psnr", "--out", str(out), "--no-progress"]  # fmt: skip
    assert main(argv) == 0
    (row,) = [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()]
    assert (row["frames"], row["width"], row["height"], row["fps"]) == (4, 384, 288, 25.0)
    assert main([*argv[:3], *argv[7:]]) == 2  # without --width/--height: a clear error


# --------------------------------------------------------------- resume, versions, results.csv


def _small_grid(out: Path):
    from semcodec.codec.core.sources import sample_path
    from semcodec.evaluation.bench.grid import GridConfig

    return GridConfig(sequences=[str(sample_path())], codecs={"x264": ["crf=30", "crf=40"],
                      "raw": []}, out_dir=out, frames=3, metrics=("psnr",),
                      codec_options={"x264": {"preset": "ultrafast"}})  # fmt: skip


def test_resume_key_names_the_package_and_codec_versions(tmp_path, monkeypatch):
    from semcodec.evaluation.bench import grid as bench
    from semcodec.evaluation.codecs.baselines import X264

    config = _small_grid(tmp_path)
    keys = [c.key() for c in bench.plan_cells(config, {})]
    cells = bench.plan_cells(config, {})
    assert all(f"semcodec {package_version()}" in c.versions for c in cells)
    assert "libavcodec" in cells[0].versions  # x264's encoder_version
    monkeypatch.setattr(bench, "package_version", lambda: "99.0")
    assert set(keys).isdisjoint(c.key() for c in bench.plan_cells(config, {}))
    monkeypatch.undo()
    describe = X264.describe
    monkeypatch.setattr(X264, "describe", lambda self: {**describe(self), "encoder_version": "x"})
    changed = [c.key() for c in bench.plan_cells(config, {})]
    assert changed[:2] != keys[:2] and changed[2] == keys[2]  # raw did not change


def test_rows_of_other_code_versions_are_recomputed_not_reused(tmp_path, monkeypatch):
    from semcodec.evaluation.bench import grid as bench

    config = _small_grid(tmp_path)
    first = bench.run_grid(config, progress=False)
    monkeypatch.setattr(bench, "package_version", lambda: "99.0")
    second = bench.run_grid(config, progress=False)
    assert {r["key"] for r in first}.isdisjoint(r["key"] for r in second)
    assert all(r["semcodec_version"] == "99.0" for r in second)
    assert len((tmp_path / "results.jsonl").read_text().splitlines()) == 6  # history kept
    with open(tmp_path / "results.csv") as fh:
        assert len(list(csv.DictReader(fh))) == 3  # only this grid's rows, no stale ones


def test_results_csv_is_rewritten_after_every_cell(tmp_path):
    from semcodec.evaluation.bench import grid as bench
    from semcodec.evaluation.bench.executors import LocalExecutor

    seen = []

    class Watching(LocalExecutor):
        def map_unordered(self, fn, items):
            for pair in super().map_unordered(fn, items):
                yield pair  # the grid writes the row, then asks for the next cell
                with open(tmp_path / "results.csv") as fh:
                    seen.append(len(list(csv.DictReader(fh))))

    bench.run_grid(_small_grid(tmp_path), Watching(), progress=False)
    assert seen == [1, 2, 3]


def test_results_csv_is_replaced_atomically(tmp_path, monkeypatch):
    from semcodec.evaluation.bench import grid as bench

    path = tmp_path / "results.csv"
    bench.write_csv([{"codec": "old", "bytes": 1}], path)
    before = path.read_text()

    def failing_replace(src, dst):
        assert Path(src).read_text().count("\n") == 3  # the new table was complete
        raise OSError("disk full")

    monkeypatch.setattr(bench.os, "replace", failing_replace)
    with pytest.raises(OSError, match="disk full"):
        bench.write_csv([{"codec": "new", "bytes": 2}, {"codec": "new2", "bytes": 3}], path)
    assert path.read_text() == before  # the old table is intact
    assert sorted(p.name for p in tmp_path.iterdir()) == ["results.csv"]  # no temp file left


# --------------------------------------------------------------- Ctrl-C

#: semcodec-bench with a test codec whose second cell stalls (with SLOW=1) until interrupted;
#: it touches $MARKER when it stalls.
_SLOW_BENCH = """
import os, signal, sys, time
# Ctrl-C as at a terminal, also when the tests run as a background job (SIGINT ignored)
signal.signal(signal.SIGINT, signal.default_int_handler)
from pathlib import Path
from semcodec.evaluation.codecs.baselines import Raw
from semcodec.evaluation.codecs.base import Setting, SettingError, register_codec
from semcodec.evaluation.cli import main

@register_codec("slowraw")
class SlowRaw(Raw):
    quality_key = "n"
    def default_settings(self):
        return [Setting.of(n=n) for n in (1, 2, 3)]
    def check_setting(self, setting):
        if setting.get("n") not in ("1", "2", "3") and str(setting) != "format=rgb24":
            raise SettingError(f"slowraw: n=1..3, got {setting}")
    def encode(self, frames, setting, fps):
        if setting.get("n") == "2" and os.environ.get("SLOW") == "1":
            Path(os.environ["MARKER"]).touch()
            time.sleep(60)
        encoded = super().encode(frames, Setting.of(format="rgb24"), fps)
        encoded.setting = setting
        return encoded

sys.exit(main(sys.argv[1:]))
"""


def _slow_bench(out: Path, marker: Path, slow: bool) -> subprocess.Popen:
    env = {**os.environ, "SLOW": "1" if slow else "0", "MARKER": str(marker)}
    argv = ["run", "--codecs", "slowraw", "--frames", "2", "--metrics", "psnr", "--out", str(out)]
    return subprocess.Popen([sys.executable, "-c", _SLOW_BENCH, *argv], env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)  # fmt: skip


def _wait_for(path: Path, proc: subprocess.Popen, seconds: float = 120) -> None:
    deadline = time.monotonic() + seconds
    while not path.exists():
        if proc.poll() is not None or time.monotonic() > deadline:
            proc.kill()
            pytest.fail(f"the run never reached its slow cell: {proc.communicate()}")
        time.sleep(0.1)


def test_ctrl_c_exits_130_with_one_line_and_a_rerun_resumes(tmp_path):
    out, marker = tmp_path / "out", tmp_path / "stalled"
    proc = _slow_bench(out, marker, slow=True)
    _wait_for(marker, proc)
    proc.send_signal(signal.SIGINT)
    stdout, stderr = proc.communicate(timeout=60)
    assert proc.returncode == 130, stderr
    assert "Traceback" not in stderr and stdout == ""
    lines = stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("semcodec-bench: interrupted"), stderr
    assert len((out / "results.jsonl").read_text().splitlines()) == 1  # cell n=1 was kept
    with open(out / "results.csv") as fh:
        assert [r["setting"] for r in csv.DictReader(fh)] == ["n=1"]

    rerun = _slow_bench(out, marker, slow=False)
    stdout, stderr = rerun.communicate(timeout=120)
    assert rerun.returncode == 0, stderr
    assert "resuming: 1 of 3 cells already done" in stderr
    with open(out / "results.csv") as fh:
        assert [r["setting"] for r in csv.DictReader(fh)] == ["n=1", "n=2", "n=3"]


def test_progress_names_the_running_cell_and_its_stage(tmp_path, capsys):
    from semcodec.evaluation.bench import grid as bench

    bench.run_grid(_small_grid(tmp_path), progress=True)
    err = capsys.readouterr().err
    for text in ("cells", "x264 crf=30: encode", "x264 crf=40: decode",
                 "x264 crf=30: metrics: psnr", "raw format=rgb24"):  # fmt: skip
        assert text in err, text


def test_start_reads_a_frame_range_and_cuts_the_ground_truth_to_it(tmp_path):
    """--start K --frames N: frames K..K+N-1, MODA against their own ground truth."""
    import dataclasses

    from semcodec.codec.core.sources import open_source, sample_path
    from semcodec.evaluation.bench import grid as bench
    from semcodec.evaluation.data.groundtruth import load_mot_groundtruth
    from semcodec.evaluation.report.markdown import sequence_lines

    config = dataclasses.replace(_small_grid(tmp_path), start=31, codecs={"raw": []},
                                 metrics=("psnr", "moda"),
                                 detector={"score_threshold": 0.5, "tiles": 1})  # fmt: skip
    pixels, _, gt = bench.load_sequence(str(sample_path()), 3, (), 31)
    assert np.array_equal(pixels, open_source(sample_path()).read(start=31, count=3))
    full = load_mot_groundtruth(sample_path())
    assert sorted(set(gt.frame_numbers)) == [1, 2, 3]
    assert len(gt) == len(full.restrict(31, 33)) and len(gt) != len(full.restrict(1, 3))
    (row,) = bench.run_grid(config, progress=False)
    assert (row["start"], row["frames"]) == (31, 3) and row["moda"] is not None
    expected = bench.detection_scores(pixels, gt, config.detector, None)["moda"]
    assert row["moda"] == pytest.approx(expected)
    assert "frames 31–33 (3 frames)" in sequence_lines([row], tmp_path)[0]
    other = dataclasses.replace(config, start=1)
    assert {c.key() for c in bench.plan_cells(other, {})}.isdisjoint(
        c.key() for c in bench.plan_cells(config, {}))  # fmt: skip
    with pytest.raises(bench.BenchError, match="start"):
        bench.validate_grid(dataclasses.replace(config, start=0))


@pytest.mark.skipif(__import__("torch").cuda.is_available(), reason="this machine has CUDA")
def test_train_bottleneck_on_cuda_without_cuda_exits_2(tmp_path, capsys):
    out = tmp_path / "out"
    argv = ["train-bottleneck", "--beta", "0.01", "--out", str(out), "--device", "cuda"]
    assert _status(main, argv) == 2
    err = capsys.readouterr().err
    assert "--device cuda: PyTorch sees no CUDA device here" in err
    assert not out.exists()



@pytest.mark.skipif(__import__("torch").cuda.is_available(), reason="this machine has CUDA")
@pytest.mark.parametrize("command", ["train-refiner", "train-sr", "train-decoder"])
def test_every_trainer_refuses_cuda_without_cuda_before_its_data(command, tmp_path, capsys):
    out = tmp_path / "out"
    assert _status(main, [command, "--out", str(out), "--device", "cuda"]) == 2
    assert "--device cuda: PyTorch sees no CUDA device here" in capsys.readouterr().err
    assert not out.exists()

def test_train_bottleneck_from_a_missing_packed_file_exits_2(tmp_path, capsys):
    out = tmp_path / "out"
    argv = ["train-bottleneck", "--beta", "0.01", "--out", str(out),
            "--packed", str(tmp_path / "nowhere.npz")]  # fmt: skip
    assert _status(main, argv) == 2
    assert "nowhere.npz: no such file" in capsys.readouterr().err
    assert not out.exists()


@pytest.mark.parametrize("argv, message", [
    (["--qualities", "0"], "expected an integer >= 1"),
    (["--qualities", "101"], "expected a WebP quality 1..100"),
    (["--scales", "1.5"], "expected a number in (0, 1]"),
])  # fmt: skip
def test_train_restorer_refuses_bad_flags_with_exit_2(argv, message, tmp_path, capsys):
    assert _status(main, ["train-restorer", "--out", str(tmp_path), *argv]) == 2
    assert message in capsys.readouterr().err


@pytest.mark.parametrize(("argv", "message"), [
    (["--width", "16"], "invalid choice: 16"),
    (["--steps", "0"], "expected an integer >= 1"),
    (["--seed", "-1"], "expected an integer >= 0"),
    pytest.param(["--device", "cuda"], "PyTorch sees no CUDA device here",
                 marks=pytest.mark.skipif(__import__("torch").cuda.is_available(),
                                        reason="this machine has CUDA")),
])  # fmt: skip
def test_train_redraw_refuses_bad_flags_with_exit_2(argv, message, tmp_path, capsys):
    assert _status(main, ["train-redraw", "--out", str(tmp_path), *argv]) == 2
    assert message in capsys.readouterr().err
    assert not list(tmp_path.iterdir())  # nothing written


def test_figures_against_is_refused_without_a_result_set(tmp_path, capsys):
    """``--against`` only applies to ``--name``: refused (exit 2, one line), nothing written;
    a row the runs do not have is refused too."""
    readme = tmp_path / "README.md"
    readme.write_text("x\n")
    argv = ["figures", "--readme", str(readme), "--against", "scaffold:level=1",
            "--results", str(tmp_path / "r")]  # fmt: skip
    assert _status(main, argv) == 2
    assert "--against applies to a result set" in capsys.readouterr().err
    assert not (tmp_path / "r").exists()
    run = tmp_path / "run"
    run.mkdir()
    row = {"sequence": "S", "codec": "scaffold", "setting": "level=1", "bpp": 0.004,
           "person_st_lpips": 0.3}  # fmt: skip
    (run / "results.jsonl").write_text(json.dumps(row) + "\n")
    argv = ["figures", "--name", "n", str(run), "--against", "scaffold:level=2",
            "--results", str(tmp_path / "r")]  # fmt: skip
    assert _status(main, argv) == 2
    assert "no row of the runs has that codec and setting" in capsys.readouterr().err
    assert not (tmp_path / "r" / "n.json").exists()
