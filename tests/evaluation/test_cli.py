"""semcodec-bench through main([...]): a real small grid, resumability, errors."""

from __future__ import annotations

import csv
import json

import pytest
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
    assert "3 of 3 cells already done" in capsys.readouterr().out
    assert (tmp_path / "results.jsonl").read_text().splitlines() == lines


def test_a_killed_run_leaves_a_resumable_file(tmp_path):
    (tmp_path / "results.jsonl").write_text('{"key": "partial-li')  # torn last line
    assert _run(tmp_path) == 0
    assert len(json.loads((tmp_path / "results.jsonl").read_text().splitlines()[-1])) > 5


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


@pytest.mark.parametrize(
    "argv, message",
    [
        (["run", "--codecs", "nope"], "unknown codec"),
        (["run", "--data", "/no/such/sequence"], "/no/such/sequence"),
        (["run", "--metrics", "psnr,vmaf"], "unknown metric"),
        (["run", "--codecs", "x264", "--settings", "x264:crf=99"], "crf"),
    ],
)
def test_bad_input_exits_2_with_a_message(argv, message, tmp_path, capsys):
    assert main([*argv, "--frames", "2", "--out", str(tmp_path), "--no-progress"]) == 2
    assert message in capsys.readouterr().err


def test_codecs_and_models_listing(capsys):
    assert main(["codecs"]) == 0
    out = capsys.readouterr().out
    assert "x264" in out and "crf=23" in out
    assert main(["models", "list"]) == 0
    assert "stlpips_alex" in capsys.readouterr().out


def test_edge_and_cloud_entry_points_print_help(capsys):
    from semcodec.cloud.cli import main as cloud_main
    from semcodec.edge.cli import main as edge_main

    assert edge_main([]) == 0 and "edge-agent" in capsys.readouterr().out
    assert cloud_main([]) == 0 and "cloud-decoder" in capsys.readouterr().out


def test_lpips_every_reaches_the_rows(tmp_path):
    from semcodec.codec.models import ModelNotFoundError, resolve_model

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
