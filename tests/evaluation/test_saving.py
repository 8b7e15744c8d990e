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


def _point(setting, bpp, person, moda=None, sequence="seq"):
    return {"sequence": sequence, "codec": "scaffold", "setting": setting, "bpp": bpp,
            "person_st_lpips": person, "moda": moda}  # fmt: skip


def test_a_curve_over_its_targets_reaches_the_reference_with_fewer_bits():
    """Issue 39's first line: restore at targets 0.001/0.002 against warp at its default
    0.004 target; the factor is the reference's BPP over the BPP the curve needs."""
    from semcodec.evaluation.report.saving import reach_factors, setting_family

    assert setting_family("level=1,target_bpp=0.002,decoder=restore") == "level=1,decoder=restore"
    rows = [_point("level=1", 0.004, 0.26, 0.40), _point("level=1,target_bpp=0.002", 0.002, 0.30),
            _point("level=1,target_bpp=0.001,decoder=restore", 0.001, 0.30, 0.30),
            _point("level=1,target_bpp=0.002,decoder=restore", 0.002, 0.22, 0.50),
            _point("level=1,decoder=restore", 0.004, 0.20, 0.60),
            _point("level=1", 0.008, 0.10, sequence="other")]  # fmt: skip
    reaches = reach_factors(rows, "scaffold:level=1")
    got = {(r.family, r.metric): r for r in reaches if r.sequence == "seq"}
    person = got[("level=1,decoder=restore", "person_st_lpips")]
    assert person.needed_bpp == pytest.approx(0.001 * 2 ** 0.5)  # halfway in log-BPP
    assert person.factor == pytest.approx(0.004 / (0.001 * 2 ** 0.5)) and person.bound == "="
    assert person.text() == "2.83x (0.001414)"
    moda = got[("level=1,decoder=restore", "moda")]
    assert moda.factor == pytest.approx(4 / 2 ** 0.5)  # 0.40: halfway between 0.30 and 0.50
    own = got[("level=1", "person_st_lpips")]
    assert own.factor == pytest.approx(1.0) and own.bound == "="
    assert ("level=1", "moda") in got  # the reference's own curve: only its 0.004 point
    other = [(r.family, r.metric) for r in reaches if r.sequence == "other"]
    assert other == [("level=1", "person_st_lpips")]  # its own row only: no curve of restore


def test_a_curve_outside_its_range_bounds_the_factor():
    from semcodec.evaluation.report.saving import reach_factors

    better = [_point("level=1", 0.004, 0.26),
              _point("level=1,target_bpp=0.001,decoder=r", 0.001, 0.2)]
    (_, reach) = sorted(reach_factors(better, "scaffold:level=1"), key=lambda r: r.family)
    assert (reach.bound, reach.factor) == (">=", pytest.approx(4.0))  # cheapest already better
    assert reach.text() == ">= 4.00x (0.001)"
    worse = [_point("level=1", 0.004, 0.26), _point("level=1,decoder=r", 0.004, 0.3)]
    (_, reach) = sorted(reach_factors(worse, "scaffold:level=1"), key=lambda r: r.family)
    assert (reach.bound, reach.factor) == ("<=", pytest.approx(1.0))  # never gets there
    assert reach_factors(worse, "scaffold:level=2") == []
