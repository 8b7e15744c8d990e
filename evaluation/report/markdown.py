"""Plots, BD-rates and the Markdown report of a benchmark, made from its result rows.

Everything here reads rows (dicts as in ``results.jsonl``) and writes files; nothing is
re-encoded, so ``semcodec-bench report OUT`` redraws a finished run in seconds.
"""

from __future__ import annotations

import json
import math
import re
import warnings
from collections import defaultdict
from pathlib import Path

from semcodec.evaluation.report.columns import definitions_for
from semcodec.evaluation.report.rows import write_rows_csv

#: Quality metrics with their direction (True: higher is better) and axis label.
QUALITY_METRICS: dict[str, tuple[bool, str]] = {
    "psnr": (True, "PSNR RGB (dB, higher is better)"),
    "psnr_y": (True, "PSNR Y (dB, higher is better)"),
    "ms_ssim": (True, "MS-SSIM (higher is better)"),
    "st_lpips": (False, "ST-LPIPS (lower is better)"),
    "person_st_lpips": (False, "person-region ST-LPIPS (lower is better)"),
    "person_psnr": (True, "person-region PSNR (dB, higher is better)"),
    "fvd": (False, "FVD (lower is better)"),
    "moda": (True, "MODA (higher is better; 1 = every person found, no false alarm)"),
    "modp": (True, "MODP (higher is better)"),
}
ANCHOR_CURVE = "x265"
#: Least overlap of two curves' quality ranges for a BD-rate, as a fraction of their joint
#: range: the ``bjontegaard`` package's own default rule (it warns below it; we then give no
#: value and say why).
MIN_OVERLAP = 0.75
#: One marker per codec, in the order of the sorted codec names.
MARKERS = "os^Dv<>pPX*h"


def write_text_atomic(path: Path, text: str) -> Path:
    """Writes ``text`` to ``path`` through ``path.partial`` and a rename: a reader never sees
    a partial file under the final name. Creates the parent folders."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_name(path.name + ".partial")
    partial.write_text(text)
    partial.replace(path)
    return path


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
    better are negated first. A curve needs 4 points. When the two curves' quality ranges
    overlap less than :data:`MIN_OVERLAP` (the package's rule) the value is None and
    ``note`` says how much they overlap.
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
                            min_overlap=MIN_OVERLAP,
                        )
                    )
                if caught:
                    value, note = _overlap_verdict(value, str(caught[0].message))
                if value is not None and not math.isfinite(value):
                    value = None
            except (ValueError, ZeroDivisionError) as exc:
                note = _failure_note(exc)
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


def _overlap_verdict(value: float, warning: str) -> tuple[float | None, str]:
    """``(value, note)`` after a ``bjontegaard`` warning: no value when the overlap is short."""
    if "do not overlap" in warning:
        return None, "no BD-rate: the curves' quality ranges do not overlap"
    if "Insufficient curve overlap" in warning:
        found = re.search(r"overlap: '([0-9.]+)'", warning)
        share = f"{float(found.group(1)):.1f} %" if found else "too little"
        return None, (
            f"no BD-rate: the quality ranges overlap by {share} of their span; "
            f"at least {MIN_OVERLAP * 100:.0f} % is needed (bjontegaard's rule)"
        )
    return value, warning


def _failure_note(exc: Exception) -> str:
    """Why ``bjontegaard`` gave no value, in the report's words."""
    if "strictly increasing" in str(exc):
        return (
            "no BD-rate: the quality does not rise strictly with the rate along a curve "
            "(two settings with equal or reversed quality); the interpolation needs it"
        )
    return f"no BD-rate: {exc}"


def _labelled_points(rows: list[dict], metric: str) -> dict[tuple[str, str], list[tuple]]:
    """``{(sequence, curve): [(bpp, value, label, codec), ...]}`` sorted by bpp (no raw).

    ``label`` is the setting without the curve's own parameters (``crf=28`` of
    ``x264@scale=0.5``), written next to the point in plots.
    """
    out: dict[tuple[str, str], list[tuple]] = defaultdict(list)
    for row in rows:
        bpp, value = _number(row.get("bpp")), _number(row.get(metric))
        if row.get("codec") == "raw" or bpp is None or value is None or bpp <= 0:
            continue
        label = ",".join(p for p in str(row.get("setting", "")).split(",")
                         if not p.startswith("scale="))  # fmt: skip
        out[(row["sequence"], row.get("curve") or row["codec"])].append(
            (bpp, value, label, row["codec"])
        )
    return {k: sorted(v) for k, v in out.items()}


def _markers(rows: list[dict]) -> dict[str, str]:
    """A distinct marker per codec name (stable: by sorted name)."""
    codecs = sorted({str(r.get("codec")) for r in rows})
    return {codec: MARKERS[i % len(MARKERS)] for i, codec in enumerate(codecs)}


#: Where a point's label may go, in points from the point, tried in order.
LABEL_OFFSETS = ((4, 3), (4, -9), (-4, 3), (-4, -9), (4, 10), (4, -16))


def _label_points(ax, points: list[tuple[float, float, str]]) -> None:
    """Writes each ``(x, y, text)`` label next to its point where it overlaps no label written
    before it (trying :data:`LABEL_OFFSETS`); a label with no free place is left out."""
    renderer = ax.figure.canvas.get_renderer()
    placed = []
    for x, y, text in points:
        for dx, dy in LABEL_OFFSETS:
            note = ax.annotate(text, (x, y), xytext=(dx, dy), textcoords="offset points",
                               fontsize=6, alpha=0.8, ha="left" if dx > 0 else "right")  # fmt: skip
            box = note.get_window_extent(renderer)
            if not any(box.overlaps(other) for other in placed):
                placed.append(box)
                break
            note.remove()


def _save_labelled(fig, panel_labels: list[tuple], path: Path) -> None:
    """Lays ``fig`` out, writes each panel's point labels (after the layout, which moves the
    axes), saves it to ``path`` and closes it."""
    import matplotlib.pyplot as plt

    fig.tight_layout()
    for ax, labels in panel_labels:
        _label_points(ax, labels)
    fig.savefig(path, dpi=110)
    plt.close(fig)


def _panel_title(rows: list[dict], sequence: str, metric: str) -> str:
    """``"TUD-Stadtmitte, frames 91–179, MODA on every 2nd frame"``: what a panel shows."""
    mine = [r for r in rows if r["sequence"] == sequence]
    frames = int(_number(mine[0].get("frames")) or 0) if mine else 0
    start = int(_number(mine[0].get("start")) or 1) if mine else 1
    title = f"{sequence}, frames {start}–{start + frames - 1}" if frames else sequence
    name, column = {"st_lpips": ("ST-LPIPS", "st_lpips_frames"),
                    "person_st_lpips": ("ST-LPIPS", "st_lpips_frames"),
                    "moda": ("MODA", "moda_frames"),
                    "modp": ("MODP", "moda_frames")}.get(metric, (metric, None))  # fmt: skip
    sampled = [int(n) for r in mine if column and (n := _number(r.get(column))) is not None]
    if frames and sampled and 0 < max(sampled) < frames:
        title += f", {name} on every {_ordinal(max(1, math.ceil(frames / max(sampled))))} frame"
    if any(r.get("protocol") == "steady" for r in mine):
        title += " (steady state)"
    return title


def plot_rate_quality(rows: list[dict], metric: str, path: Path) -> bool:
    """One panel per sequence: metric against BPP (log axis), a line per curve."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    table = _labelled_points(rows, metric)
    if not table:
        return False
    markers = _markers(rows)
    sequences = sorted({s for s, _ in table})
    fig, axes = plt.subplots(1, len(sequences), figsize=(7 * len(sequences), 5), squeeze=False)
    panel_labels = []
    for ax, sequence in zip(axes[0], sequences, strict=True):
        labels_of_panel: list[tuple[float, float, str]] = []
        for (seq, curve), points in sorted(table.items()):
            if seq != sequence:
                continue
            xs, ys, labels, codecs = zip(*points, strict=True)
            ax.plot(xs, ys, marker=markers[codecs[0]], ls="--" if "@" in curve else "-",
                    label=curve)  # fmt: skip
            labels_of_panel += zip(xs, ys, labels, strict=True)
        raw = [r for r in rows if r.get("codec") == "raw" and r["sequence"] == sequence]
        if raw and _number(raw[0].get(metric)) is not None and metric.startswith("mod"):
            ax.axhline(_number(raw[0][metric]), color="k", ls="--", lw=1, label="uncompressed")
        ax.set_xscale("log")
        ax.margins(x=0.08)  # room for the setting labels of the last points
        ax.set_xlabel("bits per pixel")
        ax.set_ylabel(QUALITY_METRICS.get(metric, (True, metric))[1])
        ax.set_title(_panel_title(rows, sequence, metric), fontsize=10)
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize=8)
        panel_labels.append((ax, labels_of_panel))
    _save_labelled(fig, panel_labels, path)
    return True


def plot_rate_compute_quality(rows: list[dict], path: Path, metric: str = "st_lpips") -> bool:
    """Rate against decoder compute, coloured by quality: the trade-off in one picture.

    One panel per sequence and kind of compute: decoder FLOPs per frame where a codec reports
    them (neural decoders), else decode milliseconds per frame on this machine. The marker
    says the codec (legend), the colour the quality (colour bar), the text the setting.
    """
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.lines import Line2D

    points = _compute_points(rows, metric)
    if not points:
        return False
    panels = sorted({(p["sequence"], p["kind"]) for p in points})
    markers = _markers(rows)
    qs = [p["quality"] for p in points]
    cmap = "viridis_r" if not QUALITY_METRICS.get(metric, (True, ""))[0] else "viridis"
    label = QUALITY_METRICS.get(metric, (True, metric))[1]
    fig, axes = plt.subplots(1, len(panels), figsize=(7.5 * len(panels), 5), squeeze=False)
    panel_labels = []
    for ax, (sequence, kind) in zip(axes[0], panels, strict=True):
        sel = [p for p in points if (p["sequence"], p["kind"]) == (sequence, kind)]
        labels_of_panel = []
        for codec in sorted({p["codec"] for p in sel}):
            mine = [p for p in sel if p["codec"] == codec]
            scatter = ax.scatter([p["bpp"] for p in mine], [p["compute"] for p in mine],
                                 c=[p["quality"] for p in mine], cmap=cmap, vmin=min(qs),
                                 vmax=max(qs), marker=markers[codec], s=45, edgecolors="k",
                                 linewidths=0.5)  # fmt: skip
            labels_of_panel += [(p["bpp"], p["compute"], p["setting"]) for p in mine]
        handles = [Line2D([], [], ls="", marker=markers[c], color="0.6", markeredgecolor="k",
                          label=c) for c in sorted({p["codec"] for p in sel})]  # fmt: skip
        ax.legend(handles=handles, title="codec (marker)", fontsize=8, title_fontsize=8)
        ax.set_xscale("log")
        ax.margins(x=0.08)  # room for the setting labels of the last points
        ax.set_yscale("log")
        ax.set_xlabel("bits per pixel")
        ax.set_ylabel(f"decoder compute ({kind})")
        ax.set_title(f"{_panel_title(rows, sequence, metric)}: rate - compute - quality",
                     fontsize=10)  # fmt: skip
        ax.grid(True, which="both", alpha=0.3)
        fig.colorbar(scatter, ax=ax, label=f"colour: {label}")
        panel_labels.append((ax, labels_of_panel))
    _save_labelled(fig, panel_labels, path)
    return True


def _compute_points(rows: list[dict], metric: str) -> list[dict]:
    """Rows with rate, quality and a compute figure (FLOPs/frame, else decode ms/frame)."""
    points = []
    for row in rows:
        bpp, quality = _number(row.get("bpp")), _number(row.get(metric))
        flops, dec_fps = _number(row.get("dec_flops_per_frame")), _number(row.get("dec_fps"))
        if row.get("codec") == "raw" or bpp is None or quality is None:
            continue
        if flops:
            compute, kind = flops, "FLOPs/frame"
        elif dec_fps:
            compute, kind = 1000.0 / dec_fps, "decode ms/frame"
        else:
            continue
        points.append({"sequence": row["sequence"], "codec": row["codec"], "bpp": bpp,
                       "quality": quality, "compute": compute, "kind": kind,
                       "setting": str(row.get("setting", ""))})  # fmt: skip
    return points


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
    "person_st_lpips",
    "seam",
    "frozen_blocks",
    "person_recall",
    "twe",
    "pose_pck",
    "moda",
    "modp",
    "enc_fps",
    "dec_fps",
]


def _display_row(row: dict) -> dict:
    """The row as the report shows it: no speeds for ``raw`` (rows of older runs had them)."""
    if row.get("codec") == "raw":
        return {**row, "enc_fps": None, "dec_fps": None}
    return row


def sequence_lines(rows: list[dict], out_dir: Path | None = None) -> list[str]:
    """One Markdown bullet per sequence: frames, size, rate, detector and ST-LPIPS sampling.

    ``start`` = K (1 when absent: rows made before the column existed) and ``frames`` = N mean
    frames K..K+N-1. The detector line says whether the threshold and tiling were chosen on the
    uncompressed frames (a calibration file in ``OUT/detector/``) or fixed.
    """
    lines = []
    for sequence in sorted({r["sequence"] for r in rows}):
        mine = [r for r in rows if r["sequence"] == sequence]
        first = mine[0]
        frames = int(_number(first.get("frames")) or 0)
        start = int(_number(first.get("start")) or 1)
        text = (f"- **{sequence}**: frames {start}–{start + frames - 1} ({frames} frames), "
                f"{first.get('width')}x{first.get('height')} pixels, "
                f"{_fmt(first.get('fps'))} fps.")  # fmt: skip
        text += _protocol_text(mine, start)
        text += " " + _detector_text(first, out_dir)
        text += _sampling_text(mine, frames)
        text += _profile_text(mine)
        lines.append(text)
    return lines


def _protocol_text(rows: list[dict], start: int) -> str:
    """How the codecs met the range: cold (started at its first frame) or steady state."""
    steady = [r for r in rows if r.get("protocol") == "steady"]
    if not steady:
        return " Protocol: cold start (every codec starts at the range's first frame)."
    warm = int(_number(steady[0].get("warmup_frames")) or 0)
    options = [json.loads(r.get("codec_options") or "{}") for r in steady]
    periods = sorted({o.get(k) for o in options for k in ("gop", "keyframe_interval")} - {None})
    period = f", intra period {', '.join(map(str, periods))} frames" if periods else ""
    mixed = (" (some rows are cold-start rows: each is compared with its own protocol's "
             "baselines)") if len(steady) < len(rows) else ""
    return (f" Protocol: steady state (every codec coded frames {start - warm}–{start - 1} "
            f"before the range without a break and is charged for the range's bytes "
            f"only{period}){mixed}.")  # fmt: skip


def _profile_text(rows: list[dict]) -> str:
    """What the edge chose for this camera by itself (no ground truth), per codec setting
    that says (the ``camera_profile`` column)."""
    chosen = sorted({(r["codec"], r["setting"], r["camera_profile"]) for r in rows
                     if r.get("camera_profile")})  # fmt: skip
    if not chosen:
        return ""
    parts = [f"{codec} {setting}: {profile}" for codec, setting, profile in chosen]
    return (" Chosen by the edge on its start-up frames, without ground truth: "
            + "; ".join(parts) + ".")


def _moda_every(row: dict) -> tuple[int, ...]:
    frames, sampled = _number(row.get("frames")), _number(row.get("moda_frames"))
    return (math.ceil(frames / sampled),) if frames and sampled else ()


def _detector_text(row: dict, out_dir: Path | None) -> str:
    try:
        config = json.loads(row.get("detector") or "null")
    except json.JSONDecodeError:
        config = None
    if not config:
        return "No MODA (no ground truth, or not asked for)."
    tiles = int(config.get("tiles", 1))
    tiling = "whole frame" if tiles == 1 else f"{tiles}x{tiles} tiles"
    if tiles > 1 and config.get("include_full_frame"):
        tiling += " plus the whole frame"
    from semcodec.evaluation.metrics.detector import calibration_name

    frames, start = int(_number(row.get("frames")) or 0), int(_number(row.get("start")) or 1)
    calibrated = out_dir is not None and any(
        (Path(out_dir) / "detector" / calibration_name(row["sequence"], frames, every,
                                                       start)).exists()  # fmt: skip
        for every in (1, *_moda_every(row))
    )
    how = "chosen by best MODA on the uncompressed frames" if calibrated else "fixed"
    return (f"Person detector: score threshold {_fmt(config.get('score_threshold'))}, "
            f"{tiling} ({how}).")  # fmt: skip


def _sampling_text(rows: list[dict], frames: int) -> str:
    """Says which metrics were measured on every k-th frame only (``*_frames`` columns)."""
    parts = []
    for metric, column in (("ST-LPIPS", "st_lpips_frames"), ("MODA", "moda_frames")):
        counts = {int(n) for r in rows if (n := _number(r.get(column))) is not None}
        if not counts or counts == {frames} or not max(counts):
            continue
        sampled = max(counts)
        every = max(1, math.ceil(frames / sampled))
        parts.append(f"{metric} on every {_ordinal(every)} frame ({sampled} of {frames})")
    if not parts:
        return ""
    return " " + "; ".join(parts) + "; the other metrics on every frame."


def _ordinal(n: int) -> str:
    """``1st``, ``2nd``, ``3rd``, ``4th``, ``11th``, ``22nd``..."""
    suffix = "th" if 10 <= n % 100 <= 20 else {1: "st", 2: "nd", 3: "rd"}.get(n % 10, "th")
    return f"{n}{suffix}"


def _saving_section(rows: list[dict], out_dir: Path) -> list[str]:
    """Writes ``saving.csv`` and returns the report's saving-factor section (empty without
    baseline curves or codec rows)."""
    from semcodec.evaluation.report.saving import SAVING_METRICS, saving_factors, saving_rows

    savings = saving_factors(rows)
    if not any(s.factor is not None for s in savings):
        return []
    items = saving_rows(savings)
    write_rows_csv(items, list(items[0]), out_dir / "saving.csv")
    table: dict[tuple, dict] = {}
    for s in savings:
        line = table.setdefault((s.sequence, s.codec, s.setting, s.protocol),
                                {"sequence": s.sequence, "protocol": s.protocol, "codec": s.codec,
                                 "setting": s.setting, "bpp": s.bpp})  # fmt: skip
        line[s.metric] = s.text()
    mixed = len({s.protocol for s in savings}) > 1
    columns = ["sequence", *(["protocol"] if mixed else []), "codec", "setting", "bpp",
               *[m for m in SAVING_METRICS if any(s.metric == m for s in savings)]]  # fmt: skip
    return [
        "## Saving factor against the best baseline (same quality)",
        "",
        "For each row, the BPP the best x264/x265 curve of this run (same protocol) needs for "
        "the same quality (interpolated in log-BPP), divided by the row's BPP: above 1 the row "
        "saves bits, below 1 it spends more. `<=`: a baseline is at least as good already at "
        "its cheapest point (the factor is at most this); `>=`: no baseline reaches it (at "
        "least this). "
        "Values per metric in `saving.csv`.",
        "",
        markdown_table(sorted(table.values(), key=lambda r: (r["sequence"], r["codec"],
                                                              r["bpp"])), columns),  # fmt: skip
        "",
    ]


def _tradeoff_section(rows: list[dict], out_dir: Path) -> list[str]:
    """Bits needed for fixed person-region ST-LPIPS against decoder FLOPs (``tradeoff.png``,
    ``tradeoff.csv``), when scaffold rows with more than one decoder setting are present."""
    from semcodec.evaluation.report.tradeoff import (
        bits_needed,
        plot_tradeoff,
        savings_against_warp,
        tradeoff_table,
    )

    needed = bits_needed(rows)
    if not any(n["flops"] for n in needed):
        return []
    with open(out_dir / "tradeoff.csv", "w") as fh:
        fh.write("sequence,metric,quality,curve,flops,bpp,bound,baseline,baseline_bpp\n")
        for n in needed:
            fh.write(",".join("" if n[k] is None else str(n[k]) for k in (
                "sequence", "metric", "quality", "curve", "flops", "bpp", "bound", "baseline",
                "baseline_bpp")) + "\n")  # fmt: skip
    parts = ["## Compute buys bits (scaffold decoders)", "",
             "For fixed person-region ST-LPIPS levels, the BPP each decoder setting needs (its "
             "levels interpolated in log-BPP) against its decoder FLOPs per frame; the bits "
             "ratio per decade is how many times fewer bits 10x more FLOPs buys (least squares "
             "over the interpolated points). Every point: `tradeoff.csv`.", "",
             markdown_table(tradeoff_table(needed), ["sequence", "metric", "quality", "curves",
                            "flops_decades", "bits_ratio_per_decade"]), ""]  # fmt: skip
    if plot_tradeoff(rows, out_dir / "tradeoff.png"):
        parts += ["![compute buys bits](tradeoff.png)", ""]
    savings = savings_against_warp(rows)
    if savings:
        parts += ["Bits saved against the network-free decoder: for the person-region "
                  "ST-LPIPS and the MODA that `warp` reaches at each of its rates, how many "
                  "times fewer bits each neural decoder needs (`gflops`: its median decoder GFLOP "
                  "per frame; `saving`: the smaller of the "
                  "two; `>=`/`<=`: a bound, the curve's cheapest point already does better / "
                  "it never gets there).", "",
                  markdown_table([{**r, "gflops": round(r["flops"] / 1e9, 3)} for r in savings],
                                 ["sequence", "reference", "reference_bpp", "curve", "gflops",
                                  "saving_person_st_lpips", "bound_person_st_lpips",
                                  "saving_moda", "bound_moda", "saving", "bound"]),
                  ""]  # fmt: skip
    return parts


def _rate_section(rows: list[dict]) -> list[str]:
    """The rate-controlled rows: target, BPP reached and the 10-s windows (empty if none)."""
    lines = []
    for row in rows:
        target = _number(row.get("target_bpp"))
        if target is None:
            continue
        low, high = _number(row.get("rate_window_min")), _number(row.get("rate_window_max"))
        lines.append({"sequence": row["sequence"], "codec": row["codec"],
                      "setting": row["setting"], "target_bpp": target,
                      "bpp": _number(row.get("bpp")),
                      "bpp/target": (_number(row.get("bpp")) or 0) / target,
                      "window_min": low, "window_max": high})  # fmt: skip
    if not lines:
        return []
    return [
        "## Rate control",
        "",
        "Rows coded with a rate target: the BPP reached over the whole clip (first keyframe "
        "included) and the least and largest rate of any 10-second window after the first "
        "frame, as fractions of the target (a clip shorter than 10 s is one window).",
        "",
        markdown_table(lines, list(lines[0])),
        "",
    ]


#: The columns of ``bd_rate.csv``, one line per curve, anchor and metric (a curve's name may
#: hold commas, e.g. ``scaffold@level=1,sr=esrgan-slim``: the csv module quotes it).
BD_RATE_COLUMNS = ("sequence", "curve", "anchor", "metric", "bd_rate_percent", "note")


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
    write_text_atomic(out_dir / "bd_rate.json", json.dumps(bd, indent=1))
    table = [{**r, "bd_rate_percent": None if r["bd_rate_percent"] is None
              else round(r["bd_rate_percent"], 2), "note": r["note"].replace("\n", " ")}
             for r in bd]  # fmt: skip
    write_rows_csv(table, list(BD_RATE_COLUMNS), out_dir / "bd_rate.csv")
    ordered = sorted(
        (_display_row(r) for r in rows),
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
        "## Data",
        "",
        *sequence_lines(rows, out_dir),
        "",
        "## Columns",
        "",
        *definitions_for(columns),
        "",
        "Speeds are empty for `raw` (copying memory has no codec speed).",
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
    parts += _saving_section(rows, out_dir)
    parts += _tradeoff_section(rows, out_dir)
    parts += _rate_section(rows)
    if plots or rcq:
        parts += ["## Plots", ""]
        parts += [f"![{metric}]({name})" for metric, name in plots]
        if rcq:
            parts.append("![rate-compute-quality](rate_compute_quality.png)")
        parts.append("")
    path = out_dir / "report.md"
    path.write_text("\n".join(parts))
    return path
