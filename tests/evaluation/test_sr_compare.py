"""The super-resolution measurement of issue 54 (evaluation/bench/sr_compare.py): its held-out
ranges, person crops, the degraded pictures each upscaler rebuilds, and a run on the sample."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from semcodec.evaluation.bench.sr_compare import (
    HeldOutSet,
    degrade,
    main,
    person_crop,
    table,
)

SAMPLE = Path(__file__).resolve().parents[2] / "datasets" / "sample" / "PETS09-S2L1-384x288"


def test_held_out_ranges_are_read_and_bad_ones_refused():
    one = HeldOutSet.parse("../shared/data/TUD-Stadtmitte:91:179:10")
    assert (one.path, one.start, one.stop, one.every) == ("../shared/data/TUD-Stadtmitte",
                                                          91, 179, 10)  # fmt: skip
    assert one.name == "TUD-Stadtmitte 91-179"
    for bad in ("x:5:4:1", "x:1:2", "x:1:2:0"):
        with pytest.raises(ValueError):
            HeldOutSet.parse(bad)


def test_person_crops_keep_a_margin_and_skip_small_or_cut_people():
    frame = np.arange(100 * 120 * 3, dtype=np.uint32).reshape(100, 120, 3).astype(np.uint8)
    crop = person_crop(frame, np.array([20.0, 10.0, 30.0, 60.0]))
    assert crop.shape == (72, 36, 3)  # 60 + 2 x 6 tall, 30 + 2 x 3 wide: multiples of 4
    assert (crop == frame[4:76, 17:53]).all()
    assert person_crop(frame, np.array([20.0, 10.0, 30.0, 40.0])) is None  # under 48 tall
    assert person_crop(frame, np.array([100.0, 10.0, 30.0, 60.0])) is None  # leaves the frame


def test_each_upscaler_rebuilds_the_same_small_picture():
    rng = np.random.default_rng(0)
    picture = rng.integers(0, 256, (48, 64, 3), np.uint8)
    seen = []

    def upscale(small, size):
        seen.append((small.shape, size))
        return np.zeros((size[1], size[0], 3), np.uint8)

    for factor in (2, 4):
        assert degrade(picture, factor)(upscale).shape == picture.shape
    assert degrade(picture, 2, quality=50)(upscale).shape == picture.shape  # WebP first
    assert seen == [((24, 32, 3), (64, 48)), ((12, 16, 3), (64, 48)),
                    ((24, 32, 3), (64, 48))]  # fmt: skip


def test_the_table_compares_with_bicubic_of_the_same_set():
    rows = [{"set": "s", "kind": "plate", "factor": 2, "upscaler": "bicubic",
             "scores": [0.3, 0.2], "flops": 0.0},
            {"set": "s", "kind": "plate", "factor": 2, "upscaler": "span-x2",
             "scores": [0.1, 0.25], "flops": 2e9}]  # fmt: skip
    text = table(rows)
    assert "| s | plate | x2 | span-x2 | 2 | 0.1750 | -0.0750 | 1/2 | 2,000 |" in text


def test_a_run_on_the_sample_writes_its_table(tmp_path, capsys):
    from semcodec.codec.core.models import ModelError

    try:
        main(["--set", f"{SAMPLE}:1:1:1", "--factors", "2", "--upscalers", "bicubic",
              "--min-height", "30", "--out", str(tmp_path)])  # fmt: skip
    except (ModelError, OSError) as exc:  # ST-LPIPS's weights cannot be had here
        pytest.skip(f"ST-LPIPS cannot be had here: {exc}")
    text = (tmp_path / "table.md").read_text()
    assert "| plate | x2 | bicubic | 1 |" in text and "| person | x2 | bicubic |" in text
    assert (tmp_path / "rows.json").is_file() and "ST-LPIPS" in capsys.readouterr().out
