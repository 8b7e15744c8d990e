"""Saving factors: known answers for the interpolation, the bounds and the best baseline."""

from __future__ import annotations

import math

import pytest

from semcodec.evaluation.report.saving import bpp_for_quality, saving_factors, saving_for

CURVE = [(0.01, 0.30), (0.04, 0.10), (0.02, 0.20)]  # ST-LPIPS falls as BPP rises


def test_interpolates_in_log_bpp():
    bpp, bound = bpp_for_quality(CURVE, 0.25, higher_is_better=False)
    assert bound == "=" and bpp == pytest.approx(math.sqrt(0.01 * 0.02))  # halfway in log
    assert bpp_for_quality(CURVE, 0.20, False) == (pytest.approx(0.02), "=")
    moda = [(0.01, 0.2), (0.1, 0.6)]
    assert bpp_for_quality(moda, 0.4, True)[0] == pytest.approx(math.sqrt(0.001))


def test_outside_the_measured_range_is_a_bound():
    assert bpp_for_quality(CURVE, 0.35, False) == (0.01, "<=")  # cheapest point is better
    assert bpp_for_quality(CURVE, 0.05, False) == (0.04, ">=")  # never gets there
    assert bpp_for_quality(CURVE, 0.30, False) == (0.01, "=")


def _row(codec, bpp, lpips, curve=None, setting="s"):
    return {"sequence": "seq", "codec": codec, "setting": setting, "bpp": bpp,
            "st_lpips": lpips, "curve": curve or codec}  # fmt: skip


def test_the_cheapest_baseline_sets_the_factor():
    rows = [_row("x265", b, q) for b, q in CURVE]
    rows += [_row("x264", b * 2, q, setting="x") for b, q in CURVE]
    rows += [_row("x265", 0.005, 0.25, curve="x265@ipratio=8")]  # one point: a bound only
    rows.append(_row("scaffold", 0.005, 0.20))
    (saving,) = saving_factors(rows)
    assert (saving.baseline, saving.bound) == ("x265", "=")
    assert saving.factor == pytest.approx(0.02 / 0.005) and saving.text() == "4.00x (x265)"
    worse = saving_for(_row("scaffold", 0.02, 0.32), "st_lpips", {"x265": CURVE})
    assert worse.bound == "<=" and worse.factor == pytest.approx(0.5)  # spends more bits
    assert worse.text() == "<= 0.50x (x265)"
    assert saving_for(_row("scaffold", 0.02, None), "st_lpips", {"x265": CURVE}) is None
    assert saving_for(_row("scaffold", 0.02, 0.1), "st_lpips", {}).text() == "n/a"
