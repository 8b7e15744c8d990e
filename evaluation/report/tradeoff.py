"""Compute buys bits: for a fixed quality, the BPP each decoder needs against its FLOPs.

Every scaffold decoder setting at one level (``warp``, ``restore``, ``diffusion`` at each
step count) is one curve over its rate targets (``target_bpp``, one row each). For a
quality ``q`` each curve is asked for the BPP at which it reaches ``q`` (log-BPP
interpolation, :func:`evaluation.report.saving.bpp_for_quality`);
plotting that BPP against the curve's decoder FLOPs per frame gives one line per quality,
the figure of the published claim (about 4x fewer bits for 100x more decoder FLOPs).
``warp`` runs no neural network (no FLOPs are counted for it): it and the best baseline are
drawn as horizontal lines.
"""

from __future__ import annotations

import math
import statistics
from pathlib import Path

from semcodec.evaluation.report.saving import (
    SAVING_METRICS,
    baseline_curves,
    bpp_for_quality,
    row_number,
)

#: The codec whose curves are compared.
DECODER_CODEC = "scaffold"


def decoder_curves(rows: list[dict], sequence: str, metric: str) -> dict[str, dict]:
    """``{curve: {"points": [(bpp, quality)], "flops": median FLOPs/frame or None}}`` of the
    scaffold rows of ``sequence``."""
    out: dict[str, dict] = {}
    for row in rows:
        bpp, quality = row_number(row, "bpp"), row_number(row, metric)
        if row["sequence"] != sequence or row["codec"] != DECODER_CODEC:
            continue
        if not bpp or bpp <= 0 or quality is None:
            continue
        curve = out.setdefault(row.get("curve") or row["codec"], {"points": [], "flops": []})
        curve["points"].append((bpp, quality))
        flops = row_number(row, "dec_flops_per_frame")
        if flops:
            curve["flops"].append(flops)
    for curve in out.values():
        curve["flops"] = statistics.median(curve["flops"]) if curve["flops"] else None
    return out


def quality_levels(curves: dict[str, dict], count: int = 3) -> list[float]:
    """``count`` qualities spread over the range every neural curve spans (its inner
    quartiles), so that most curves can be interpolated at them."""
    lows, highs = [], []
    for curve in curves.values():
        if curve["flops"] and len(curve["points"]) >= 2:
            qs = sorted(q for _, q in curve["points"])
            lows.append(qs[0])
            highs.append(qs[-1])
    if not lows:
        return []
    lo, hi = max(lows), min(highs)
    if lo >= hi:  # the curves do not overlap: use the middle of all of them
        lo, hi = min(lows), max(highs)
    return [lo + (hi - lo) * (k + 1) / (count + 1) for k in range(count)]


def bits_needed(rows: list[dict], metric: str = "person_st_lpips") -> list[dict]:
    """One dict per sequence, quality level and curve: ``flops`` (None for ``warp``),
    ``bpp`` needed and its ``bound`` (``=``, ``<=``, ``>=``), plus the best baseline's."""
    higher = SAVING_METRICS.get(metric, metric in ("moda", "psnr", "ms_ssim"))
    out = []
    for sequence in sorted({r["sequence"] for r in rows}):
        curves = decoder_curves(rows, sequence, metric)
        baselines = baseline_curves(rows, sequence, metric)
        for q in quality_levels(curves):
            base = {name: bpp_for_quality(p, q, higher) for name, p in baselines.items()}
            best = min(((b, n) for n, (b, bound) in base.items() if bound == "="), default=None)
            for name, curve in sorted(curves.items()):
                bpp, bound = bpp_for_quality(curve["points"], q, higher)
                out.append({"sequence": sequence, "metric": metric, "quality": q,
                            "curve": name, "flops": curve["flops"], "bpp": bpp,
                            "bound": bound, "baseline": best[1] if best else "",
                            "baseline_bpp": best[0] if best else None})  # fmt: skip
    return out


def savings_against_warp(rows: list[dict],
                         metrics: tuple[str, ...] = ("person_st_lpips", "moda")) -> list[dict]:
    """How many times fewer bits each neural decoder curve needs for the quality a network-free
    curve (``warp``) reaches at each of its rates.

    One dict per sequence, network-free point (``reference``, ``reference_bpp``) and neural
    curve: for each metric the BPP the curve needs (``bpp_<metric>``, interpolated in log-BPP)
    and ``saving_<metric>`` = reference BPP / that BPP with its ``bound_<metric>`` (``=``;
    ``>=`` when even the curve's cheapest point is as good; ``<=`` when it never gets
    there); ``saving`` is the smallest over the metrics (every quality reached), ``flops``
    the curve's median decoder FLOPs per frame. Network-free points cheaper than every point
    of a curve are left out for it.
    """
    flip = {"=": "=", "<=": ">=", ">=": "<="}
    out = []
    for sequence in sorted({r["sequence"] for r in rows}):
        per_metric = {m: decoder_curves(rows, sequence, m) for m in metrics}
        names = set.intersection(*(set(c) for c in per_metric.values()))
        plain = sorted(n for n in names if not per_metric[metrics[0]][n]["flops"])
        neural = sorted(n for n in names if per_metric[metrics[0]][n]["flops"])
        for reference in plain:
            qualities = {m: dict(per_metric[m][reference]["points"]) for m in metrics}
            for ref_bpp in sorted(set.intersection(*(set(q) for q in qualities.values()))):
                for name in neural:
                    cheapest = min(b for b, _ in per_metric[metrics[0]][name]["points"])
                    if ref_bpp < cheapest:  # a bound below 1x says nothing
                        continue
                    row = {"sequence": sequence, "reference": reference,
                           "reference_bpp": ref_bpp, "curve": name,
                           "flops": per_metric[metrics[0]][name]["flops"]}  # fmt: skip
                    for m in metrics:
                        bpp, bound = bpp_for_quality(per_metric[m][name]["points"],
                                                     qualities[m][ref_bpp],
                                                     SAVING_METRICS[m])  # fmt: skip
                        row.update({f"quality_{m}": qualities[m][ref_bpp], f"bpp_{m}": bpp,
                                    f"saving_{m}": ref_bpp / bpp, f"bound_{m}": flip[bound]})
                    worst = min(metrics, key=lambda m: row[f"saving_{m}"])
                    row["saving"] = row[f"saving_{worst}"]
                    row["bound"] = row[f"bound_{worst}"]
                    out.append(row)
    return out


def bits_ratio_per_decade(points: list[tuple[float, float]]) -> float | None:
    """How many times fewer bits 10x more FLOPs buys: ``10 ** -slope`` of the least-squares
    line through ``(log10 flops, log10 bpp)``; None with fewer than two FLOPs values."""
    pts = [(math.log10(f), math.log10(b)) for f, b in points if f and b]
    if len({x for x, _ in pts}) < 2:
        return None
    mx = sum(x for x, _ in pts) / len(pts)
    my = sum(y for _, y in pts) / len(pts)
    slope = sum((x - mx) * (y - my) for x, y in pts) / sum((x - mx) ** 2 for x, _ in pts)
    return 10 ** (-slope)


def tradeoff_table(needed: list[dict]) -> list[dict]:
    """Per sequence and quality: the bits ratio per decade of FLOPs over the neural curves
    whose BPP was interpolated (not bounded), and the FLOPs span it covers."""
    out = []
    keys = sorted({(n["sequence"], n["metric"], n["quality"]) for n in needed})
    for sequence, metric, q in keys:
        pts = [(n["flops"], n["bpp"]) for n in needed
               if (n["sequence"], n["metric"], n["quality"]) == (sequence, metric, q)
               and n["flops"] and n["bound"] == "="]  # fmt: skip
        ratio = bits_ratio_per_decade(pts)
        ratio = None if ratio is None else round(ratio, 3)
        span = math.log10(max(f for f, _ in pts) / min(f for f, _ in pts)) if pts else 0.0
        out.append({"sequence": sequence, "metric": metric, "quality": round(q, 4),
                    "curves": len(pts), "flops_decades": round(span, 2),
                    "bits_ratio_per_decade": ratio})  # fmt: skip
    return out


def plot_tradeoff(rows: list[dict], path: Path, metric: str = "person_st_lpips") -> bool:
    """BPP needed for fixed qualities against decoder FLOPs/frame, one panel per sequence;
    False (nothing written) when no neural decoder row has FLOPs."""
    needed = [n for n in bits_needed(rows, metric) if n["bound"] == "="]
    if not any(n["flops"] for n in needed):
        return False
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    sequences = sorted({n["sequence"] for n in needed})
    fig, axes = plt.subplots(1, len(sequences), figsize=(6.5 * len(sequences), 4.5), squeeze=False)
    for ax, sequence in zip(axes[0], sequences, strict=True):
        mine = [n for n in needed if n["sequence"] == sequence]
        for k, q in enumerate(sorted({n["quality"] for n in mine})):
            colour = f"C{k}"
            at_q = [n for n in mine if n["quality"] == q]
            neural = sorted((n["flops"], n["bpp"]) for n in at_q if n["flops"])
            ax.plot(*zip(*neural, strict=True), "o-", color=colour, label=f"{metric} {q:.3f}")
            for n in at_q:
                if not n["flops"]:
                    ax.axhline(n["bpp"], color=colour, ls="--", lw=1)
            if at_q[0]["baseline_bpp"]:
                ax.axhline(at_q[0]["baseline_bpp"], color=colour, ls=":", lw=1)
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlabel("decoder FLOPs per frame")
        ax.set_ylabel("BPP needed")
        ax.set_title(f"{sequence}: bits for a fixed quality\n(dashed: warp, dotted: best "
                     "baseline)", fontsize=10)  # fmt: skip
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return True
