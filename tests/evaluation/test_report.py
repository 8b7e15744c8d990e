"""BD-rate, plots and the Markdown report from result rows."""

from __future__ import annotations

import pytest
from semcodec.evaluation.report import bd_rates, curves, write_report


def _rows(curve: str, codec: str, rate_factor: float, psnr_offset: float = 0.0) -> list[dict]:
    rates = [0.01, 0.02, 0.04, 0.08, 0.16]
    return [
        {
            "sequence": "seq",
            "codec": codec,
            "curve": curve,
            "setting": f"crf={i}",
            "bpp": r * rate_factor,
            "psnr": 30 + 3 * i + psnr_offset,
            "st_lpips": 0.5 - 0.08 * i,
            "dec_fps": 100.0,
        }
        for i, r in enumerate(rates)
    ]


def test_bd_rate_of_a_curve_at_half_the_rate_is_minus_fifty_percent():
    rows = _rows("x265", "x265", 1.0) + _rows("x264", "x264", 0.5)
    result = {(r["curve"], r["metric"]): r["bd_rate_percent"] for r in bd_rates(rows)}
    assert result[("x264", "psnr")] == pytest.approx(-50.0, abs=1e-6)
    # lower-is-better metrics are negated, so the sign means the same thing
    assert result[("x264", "st_lpips")] == pytest.approx(-50.0, abs=1e-6)


def test_bd_rate_doubles_rate_gives_plus_hundred_percent():
    rows = _rows("x265", "x265", 1.0) + _rows("jpeg", "jpeg", 2.0)
    (row,) = [r for r in bd_rates(rows, metrics=("psnr",))]
    assert row["bd_rate_percent"] == pytest.approx(100.0, abs=1e-6)


def test_raw_rows_and_missing_values_are_not_curve_points():
    rows = _rows("x265", "x265", 1.0) + [
        {"sequence": "seq", "codec": "raw", "curve": "raw", "bpp": 24.0, "psnr": 100.0},
        {"sequence": "seq", "codec": "x264", "curve": "x264", "bpp": 0.1, "psnr": ""},
    ]
    table = curves(rows, "psnr")
    assert list(table) == [("seq", "x265")]
    assert len(table[("seq", "x265")]) == 5


def test_report_writes_plots_and_markdown(tmp_path):
    rows = _rows("x265", "x265", 1.0) + _rows("x264", "x264", 0.7)
    path = write_report(rows, tmp_path, command="semcodec-bench run")
    text = path.read_text()
    assert "| sequence | codec | setting | bpp |" in text
    assert "BD-rate against x265" in text
    for name in (
        "rate_psnr.png",
        "rate_st_lpips.png",
        "rate_compute_quality.png",
        "bd_rate.csv",
        "bd_rate.json",
    ):
        assert (tmp_path / name).stat().st_size > 0
