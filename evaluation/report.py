"""Plots, BD-rates and the Markdown report of a benchmark, made from its result rows.

Everything here reads rows (dicts as in ``results.jsonl``) and writes files; nothing is
re-encoded, so ``semcodec-bench report OUT`` redraws a finished run in seconds.
"""

from __future__ import annotations

import json
import math
import warnings
from collections import defaultdict
from pathlib import Path

#: Quality metrics with their direction (True: higher is better) and axis label.
QUALITY_METRICS: dict[str, tuple[bool, str]] = {
    "psnr": (True, "PSNR RGB (dB)"),
    "psnr_y": (True, "PSNR Y (dB)"),
    "ms_ssim": (True, "MS-SSIM"),
    "st_lpips": (False, "ST-LPIPS (lower is better)"),
    "fvd": (False, "FVD (lower is better)"),
    "moda": (True, "MODA"),
    "modp": (True, "MODP"),
}
ANCHOR_CURVE = "x265"


def _number(value) -> float | None:
    try:
        number = float(value)
    except (TypeError, ValueError):
        return None
    return number if math.isfinite(number) else None


def curves(rows: list[dict], metric: str) -> dict[tuple[str, str], list[tuple[float, float]]]:
    """``{(sequence, curve): [(bpp, metric), ...]}`` sorted by bpp, rows without values left out.

    The uncompressed ``raw`` row is not a curve (it is drawn as a reference line).
    """
    out: dict[tuple[str, str], list[tuple[float, float]]] = defaultdict(list)
    for row in rows:
        bpp, value = _number(row.get("bpp")), _number(row.get(metric))
        if row.get("codec") == "raw" or bpp is None or value is None or bpp <= 0:
            continue
        out[(row["sequence"], row.get("curve") or row["codec"])].append((bpp, value))
    return {k: sorted(v) for k, v in out.items()}


def bd_rates(rows: list[dict], metrics: tuple[str, ...] | None = None) -> list[dict]:
    """BD-rate (%) of every curve against the x265 curve of the same sequence, per metric.

    Negative = fewer bits than x265 at equal quality. Computed with the ``bjontegaard``
    package (piecewise cubic Hermite interpolation, the method of the common test conditions
    of JVET), on log10 rate over the overlapping quality range; metrics where lower is
    better are negated first. A curve needs 4 points; too little overlap gives no value.
    """
    import bjontegaard

    if metrics is None:  # every quality metric the rows have
        metrics = tuple(m for m in QUALITY_METRICS if m != "modp"
                        and any(_number(r.get(m)) is not None for r in rows))  # fmt: skip
    results = []
    for metric in metrics:
        higher_better = QUALITY_METRICS[metric][0]
        sign = 1.0 if higher_better else -1.0
        table = curves(rows, metric)
        for (sequence, curve), points in sorted(table.items()):
            anchor = table.get((sequence, ANCHOR_CURVE))
            if curve == ANCHOR_CURVE or not anchor or len(points) < 4 or len(anchor) < 4:
                continue
            rate_a, dist_a = zip(*anchor, strict=True)
            rate_t, dist_t = zip(*points, strict=True)
            value, note = None, ""
            try:
                with warnings.catch_warnings(record=True) as caught:
                    warnings.simplefilter("always")
                    value = float(
                        bjontegaard.bd_rate(
                            rate_a,
                            [sign * d for d in dist_a],
                            rate_t,
                            [sign * d for d in dist_t],
                            method="pchip",
                            require_matching_points=False,
                        )
                    )
                if caught:
                    note = str(caught[0].message)
                if not math.isfinite(value):
                    value = None
            except (ValueError, ZeroDivisionError) as exc:
                note = str(exc)
            results.append(
                {
                    "sequence": sequence,
                    "curve": curve,
                    "anchor": ANCHOR_CURVE,
                    "metric": metric,
                    "bd_rate_percent": value,
                    "note": note,
                }
            )
    return results


def plot_rate_quality(rows: list[dict], metric: str, path: Path) -> bool:
    """One panel per sequence: metric against BPP (log axis), a line per curve."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    table = curves(rows, metric)
    if not table:
        return False
    sequences = sorted({s for s, _ in table})
    fig, axes = plt.subplots(1, len(sequences), figsize=(6 * len(sequences), 4.5), squeeze=False)
    for ax, sequence in zip(axes[0], sequences, strict=True):
        for (seq, curve), points in sorted(table.items()):
            if seq != sequence:
                continue
            xs, ys = zip(*points, strict=True)
            ax.plot(xs, ys, marker="o", label=curve)
        raw = [r for r in rows if r.get("codec") == "raw" and r["sequence"] == sequence]
        if raw and _number(raw[0].get(metric)) is not None and metric.startswith("mod"):
            ax.axhline(_number(raw[0][metric]), color="k", ls="--", lw=1, label="uncompressed")
        ax.set_xscale("log")
        ax.set_xlabel("bits per pixel")
        ax.set_ylabel(QUALITY_METRICS.get(metric, (True, metric))[1])
        ax.set_title(sequence)
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return True


def plot_rate_compute_quality(rows: list[dict], path: Path, metric: str = "st_lpips") -> bool:
    """Rate against decoder compute, coloured by quality: the trade-off in one picture.

    Compute is decoder FLOPs per frame where a codec reports them (neural decoders), else
    decode milliseconds per frame on this machine (marked with a different symbol).
    """
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    points = []
    for row in rows:
        bpp, quality = _number(row.get("bpp")), _number(row.get(metric))
        flops, dec_fps = _number(row.get("dec_flops_per_frame")), _number(row.get("dec_fps"))
        if row.get("codec") == "raw" or bpp is None or quality is None:
            continue
        if flops:
            points.append((bpp, flops, quality, row["codec"], "FLOPs/frame"))
        elif dec_fps:
            points.append((bpp, 1000.0 / dec_fps, quality, row["codec"], "decode ms/frame"))
    if not points:
        return False
    kinds = sorted({p[4] for p in points})
    fig, axes = plt.subplots(1, len(kinds), figsize=(6.5 * len(kinds), 4.5), squeeze=False)
    qs = [p[2] for p in points]
    markers = "os^Dv<>p*h"
    codecs = sorted({p[3] for p in points})
    for ax, kind in zip(axes[0], kinds, strict=True):
        for i, codec in enumerate(codecs):
            sel = [p for p in points if p[4] == kind and p[3] == codec]
            if not sel:
                continue
            scatter = ax.scatter(
                [p[0] for p in sel],
                [p[1] for p in sel],
                c=[p[2] for p in sel],
                cmap="viridis_r" if metric in ("st_lpips", "fvd") else "viridis",
                vmin=min(qs),
                vmax=max(qs),
                marker=markers[i % len(markers)],
                label=codec,
                edgecolors="k",
                linewidths=0.4,
            )
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlabel("bits per pixel")
        ax.set_ylabel(f"decoder compute ({kind})")
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize=8)
        fig.colorbar(scatter, ax=ax, label=QUALITY_METRICS.get(metric, (True, metric))[1])
    fig.suptitle("rate - compute - quality")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return True


def _fmt(value, digits: int = 4) -> str:
    number = _number(value)
    if number is None:
        return "" if value in (None, "") else str(value)
    if abs(number) >= 1000:
        return f"{number:.0f}"
    return f"{number:.{digits}g}"


def markdown_table(rows: list[dict], columns: list[str]) -> str:
    """A GitHub Markdown table of ``columns`` (empty cells where a row lacks a value)."""
    lines = ["| " + " | ".join(columns) + " |", "|" + "---|" * len(columns)]
    for row in rows:
        lines.append("| " + " | ".join(_fmt(row.get(c)) for c in columns) + " |")
    return "\n".join(lines)


RESULT_COLUMNS = [
    "sequence",
    "codec",
    "setting",
    "bpp",
    "psnr",
    "psnr_y",
    "ms_ssim",
    "st_lpips",
    "moda",
    "modp",
    "enc_fps",
    "dec_fps",
]


def write_report(rows: list[dict], out_dir: Path, command: str = "") -> Path:
    """Writes plots, ``bd_rate.csv``/``.json`` and ``report.md`` into ``out_dir``."""
    out_dir = Path(out_dir)
    plots = []
    for metric in QUALITY_METRICS:
        if metric in ("psnr_y", "modp"):
            continue
        name = f"rate_{metric}.png"
        if plot_rate_quality(rows, metric, out_dir / name):
            plots.append((metric, name))
    rcq = plot_rate_compute_quality(rows, out_dir / "rate_compute_quality.png")
    bd = bd_rates(rows)
    (out_dir / "bd_rate.json").write_text(json.dumps(bd, indent=1))
    with open(out_dir / "bd_rate.csv", "w") as fh:
        fh.write("sequence,curve,anchor,metric,bd_rate_percent,note\n")
        for r in bd:
            note = r["note"].replace(",", ";").replace("\n", " ")
            fh.write(
                f"{r['sequence']},{r['curve']},{r['anchor']},{r['metric']},"
                f"{'' if r['bd_rate_percent'] is None else round(r['bd_rate_percent'], 2)},"
                f"{note}\n"
            )
    ordered = sorted(
        rows,
        key=lambda r: (r["sequence"], r.get("curve") or r["codec"], _number(r.get("bpp")) or 0.0),
    )
    columns = [
        c
        for c in RESULT_COLUMNS
        if any(_number(r.get(c)) is not None or c in ("sequence", "codec", "setting") for r in rows)
    ]
    machine = rows[0].get("machine", "") if rows else ""
    parts = [
        "# semcodec benchmark report",
        "",
        f"Machine: {machine}. Rows: {len(rows)}." + (f" Command: `{command}`" if command else ""),
        "",
        "BPP counts the payload bytes actually written (bits / (width x height x frames));",
        "container overhead is in `container_bytes` of results.csv. `enc_fps` and `dec_fps` are",
        "wall-clock on this machine. MODA/MODP: CLEAR MOD, person detector on decoded frames.",
        "",
        "## Results",
        "",
        markdown_table(ordered, columns),
        "",
    ]
    if bd:
        parts += [
            "## BD-rate against x265 (negative: fewer bits at equal quality)",
            "",
            markdown_table(
                [{**r, "bd_rate_%": r["bd_rate_percent"]} for r in bd],
                ["sequence", "curve", "metric", "bd_rate_%", "note"],
            ),
            "",
        ]
    if plots or rcq:
        parts += ["## Plots", ""]
        parts += [f"![{metric}]({name})" for metric, name in plots]
        if rcq:
            parts.append("![rate-compute-quality](rate_compute_quality.png)")
        parts.append("")
    path = out_dir / "report.md"
    path.write_text("\n".join(parts))
    return path
