"""Compute buys bits: BPP needed for a fixed quality against decoder FLOPs."""

from __future__ import annotations

import pytest

from semcodec.evaluation.report.markdown import write_report
from semcodec.evaluation.report.tradeoff import (
    bits_needed,
    bits_ratio_per_decade,
    quality_levels,
    tradeoff_table,
)


def _row(curve, bpp, quality, flops=None, codec="scaffold"):
    return {"sequence": "S", "codec": codec, "curve": curve, "setting": f"{curve}@{bpp}",
            "bpp": bpp, "person_st_lpips": quality, "dec_flops_per_frame": flops}  # fmt: skip


def _rows():
    # two levels per decoder; 10x the FLOPs reaches each quality with half the bits
    rows = [_row("scaffold", 0.004, 0.40), _row("scaffold", 0.016, 0.20)]
    for flops, factor in ((1e9, 1.0), (1e10, 0.5), (1e11, 0.25)):
        curve = f"scaffold@decoder=diffusion,steps={int(flops / 1e9)}"
        rows += [_row(curve, 0.002 * factor, 0.40, flops), _row(curve, 0.008 * factor, 0.20, flops)]
    rows += [_row("x265", 0.01, 0.40, codec="x265"), _row("x265", 0.04, 0.20, codec="x265")]
    return rows


def test_ten_times_the_flops_for_half_the_bits_is_a_ratio_of_two_per_decade():
    assert bits_ratio_per_decade([(1e9, 0.004), (1e10, 0.002), (1e11, 0.001)]) == pytest.approx(2)
    assert bits_ratio_per_decade([(1e9, 0.004)]) is None


def test_bits_needed_interpolates_each_decoder_curve_at_fixed_qualities():
    needed = bits_needed(_rows())
    levels = sorted({n["quality"] for n in needed})
    assert levels == pytest.approx([0.25, 0.30, 0.35])
    at_030 = {n["curve"]: n for n in needed if n["quality"] == pytest.approx(0.30)}
    # halfway in quality is the geometric mean in BPP
    assert at_030["scaffold"]["bpp"] == pytest.approx(0.008) and at_030["scaffold"]["flops"] is None
    assert at_030["scaffold@decoder=diffusion,steps=10"]["bpp"] == pytest.approx(0.002)
    assert at_030["scaffold"]["baseline_bpp"] == pytest.approx(0.02)
    table = tradeoff_table(needed)
    assert [t["bits_ratio_per_decade"] for t in table] == pytest.approx([2, 2, 2])
    assert all(t["flops_decades"] == 2 and t["curves"] == 3 for t in table)


def test_no_quality_levels_without_neural_curves():
    assert quality_levels({"scaffold": {"points": [(0.1, 0.3), (0.2, 0.2)], "flops": None}}) == []


def test_the_report_draws_the_tradeoff_when_decoders_have_flops(tmp_path):
    text = write_report(_rows(), tmp_path).read_text()
    assert "## Compute buys bits" in text and "tradeoff.png" in text
    assert (tmp_path / "tradeoff.png").stat().st_size > 0
    assert (tmp_path / "tradeoff.csv").read_text().count("\n") == 1 + 3 * 4
    (tmp_path / "p").mkdir()
    plain = write_report([r for r in _rows() if not r["dec_flops_per_frame"]], tmp_path / "p")
    assert "Compute buys bits" not in plain.read_text()


def test_savings_against_warp_take_the_smaller_of_person_quality_and_moda(tmp_path):
    def row(curve, bpp, person, moda, flops=None):
        return {**_row(curve, bpp, person, flops), "moda": moda}

    rows = [row("scaffold@decoder=warp", 0.004, 0.30, 0.40),
            row("scaffold@decoder=warp", 0.002, 0.40, 0.20),
            # reaches warp's 0.004 person quality at 0.001 (4x) but its MODA only at 0.002 (2x)
            row("scaffold@decoder=restore", 0.001, 0.30, 0.20, 1e9),
            row("scaffold@decoder=restore", 0.002, 0.20, 0.40, 1e9)]  # fmt: skip
    from semcodec.evaluation.report.tradeoff import savings_against_warp

    at = {r["reference_bpp"]: r for r in savings_against_warp(rows)}
    top = at[0.004]
    assert top["curve"] == "scaffold@decoder=restore" and top["flops"] == 1e9
    assert top["saving_person_st_lpips"] == pytest.approx(4) and top["bound_person_st_lpips"] == "="
    assert top["saving_moda"] == pytest.approx(2) and top["saving"] == pytest.approx(2)
    # at 0.002 warp's qualities are below restore's cheapest point: at least 2x
    assert at[0.002]["saving"] == pytest.approx(2) and at[0.002]["bound"] == ">="
    cheaper = [row("scaffold@decoder=warp", 0.0005, 0.5, 0.1)] + rows
    assert min(r["reference_bpp"] for r in savings_against_warp(cheaper)) == 0.002
    assert "Bits saved against the network-free decoder" in write_report(rows, tmp_path).read_text()

