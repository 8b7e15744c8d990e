"""README figures that regenerate: named result sets under ``docs/results/``, and the
README's generated blocks.

``semcodec-bench figures --name NAME RUN_DIR...`` reads the runs' rows (the newest of each
cell) and writes ``docs/results/NAME.json`` (the commands that made the runs, every row's
figures, the saving factors) and ``docs/results/NAME.md`` (the tables the README shows).
``semcodec-bench figures --readme README.md docs/results.md ...`` replaces each block between
``<!-- figures:NAME -->`` and ``<!-- /figures:NAME -->`` of those pages with ``NAME.md``;
``tests/test_readme_figures.py`` checks that the blocks of the README and of every page of
``docs/`` are current and that every number those pages state elsewhere is in
``docs/results/``.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

from semcodec.evaluation.report.markdown import markdown_table, write_text_atomic
from semcodec.evaluation.report.rows import latest_rows, read_rows
from semcodec.evaluation.report.saving import (
    SAVING_METRICS,
    Reach,
    reach_factors,
    saving_factors,
    saving_rows,
)

#: Columns of a result set's rows, in the README's order.
#: ``dec_flops_per_frame``: the decoder's network FLOPs a frame (issue 39: bits x FLOPs).
FIGURE_COLUMNS = ("codec", "setting", "bpp", "st_lpips", "person_st_lpips", "moda", "twe",
                  "pose_pck", "dec_flops_per_frame", "seam", "rate_window_min",
                  "rate_window_max", "track_moda", "track_mota", "kbps", "rate_ratio", "beta",
                  "saving", "saving_baseline")  # fmt: skip
#: Columns kept in ``NAME.json`` beside :data:`FIGURE_COLUMNS`: where and how a row was made.
CONTEXT_COLUMNS = ("sequence", "start", "frames", "protocol", "warmup_frames", "width",
                   "height", "fps", "bytes", "st_lpips_frames", "moda_frames", "semcodec_version",
                   "machine", "camera_profile", "bytes_header", "psnr",
                   "dec_fps", "enc_fps")  # fmt: skip
_BLOCK = re.compile(r"(<!-- figures:(?P<name>[\w.-]+) -->\n)(?P<body>.*?)"
                    r"(<!-- /figures:(?P=name) -->)", re.S)  # fmt: skip
_NAME = re.compile(r"[\w.-]+")


class FiguresError(ValueError):
    """A result set cannot be made (no rows, bad name) or a README block has no result set."""


#: Every command that wrote rows into a run folder, one per line, in order (a folder may be
#: filled by several invocations: a result set names them all).
COMMANDS_FILE = "commands.txt"


def record_command(run_dir: Path, command: str) -> None:
    """Adds ``command`` to ``run_dir``'s :data:`COMMANDS_FILE` unless it is there already."""
    path = Path(run_dir) / COMMANDS_FILE
    known = path.read_text().splitlines() if path.exists() else []
    if command not in known:
        path.parent.mkdir(parents=True, exist_ok=True)
        with open(path, "a") as fh:
            fh.write(command + "\n")


def _commands_of(run_dir: Path) -> list[str]:
    """The commands that filled ``run_dir``: its :data:`COMMANDS_FILE`, else the one command
    recorded in its ``report.md`` (folders written before the file existed; ``[]`` when the
    report names none)."""
    listed = run_dir / COMMANDS_FILE
    if listed.exists():
        return [line for line in listed.read_text().splitlines() if line.strip()]
    report = run_dir / "report.md"
    found = re.search(r"Command: `([^`]*)`", report.read_text()) if report.exists() else None
    return [found.group(1)] if found else []


def load_result_set(run_dirs: list[Path]) -> tuple[list[dict], list[str]]:
    """The newest row of every cell of the runs (a later run wins) and their commands."""
    rows, commands = [], []
    for run_dir in run_dirs:
        found = read_rows(Path(run_dir) / "results.jsonl")
        if not found:
            raise FiguresError(f"{run_dir}: no results.jsonl rows")
        rows += found
        commands += [c for c in _commands_of(Path(run_dir)) if c not in commands]
    return latest_rows(rows), commands


def _range_title(row: dict) -> str:
    start, frames = int(row.get("start") or 1), int(row.get("frames") or 0)
    protocol = "steady state" if row.get("protocol") == "steady" else "cold start"
    return f"**{row['sequence']}**, frames {start}–{start + frames - 1}, {protocol}"


def reach_table(reaches: list[Reach]) -> str:
    """The Markdown table of one sequence and protocol's
    :func:`~evaluation.report.saving.reach_factors` (``""`` without any)."""
    if not reaches:
        return ""
    first, table = reaches[0], {}
    for r in reaches:
        line = table.setdefault(r.family, {"codec": r.codec, "curve": r.family})
        line[f"reach: {r.metric}"] = r.text()
    metrics = [f"reach: {m}" for m in SAVING_METRICS if any(r.metric == m for r in reaches)]
    title = (f"Fewer bits than `{first.codec}:{first.reference}` ({first.reference_bpp:.4g} "
             "BPP) for its quality, on each curve of the codec's settings over their rate "
             "targets (the BPP it needs in brackets):")  # fmt: skip
    return title + "\n\n" + markdown_table(list(table.values()), ["codec", "curve", *metrics])


def figure_tables(rows: list[dict], reaches: list[Reach] = ()) -> str:
    """The Markdown the README shows for a result set: per sequence and protocol, the rows
    (by codec, then BPP), the saving factors of the rows that are not baselines and the
    :func:`reach_table` of its ``reaches``."""
    parts = []
    groups: dict[tuple, list[dict]] = {}
    for row in rows:
        groups.setdefault((row["sequence"], row.get("protocol") or "cold"), []).append(row)
    for (sequence, protocol), mine in sorted(groups.items()):
        mine = sorted(mine, key=lambda r: (r["codec"], float(r.get("bpp") or 0)))
        columns = [c for c in FIGURE_COLUMNS
                   if any(r.get(c) not in (None, "") for r in mine)]  # fmt: skip
        parts += [_range_title(mine[0]), "", markdown_table(mine, columns), ""]
        savings = saving_factors(mine)
        if any(s.factor is not None for s in savings):
            table: dict[tuple, dict] = {}
            for s in savings:
                line = table.setdefault((s.codec, s.setting), {"codec": s.codec,
                                        "setting": s.setting, "bpp": s.bpp})  # fmt: skip
                line[f"saving: {s.metric}"] = s.text()
            metrics = [f"saving: {m}" for m in SAVING_METRICS
                       if any(s.metric == m for s in savings)]  # fmt: skip
            parts += [markdown_table(list(table.values()), ["codec", "setting", "bpp", *metrics]),
                      ""]  # fmt: skip
        reach = reach_table([r for r in reaches
                             if (r.sequence, r.protocol) == (sequence, protocol)])  # fmt: skip
        if reach:
            parts += [reach, ""]
    return "\n".join(parts).rstrip() + "\n"


def write_result_set(name: str, run_dirs: list[Path], results_dir: Path,
                     against: str | None = None) -> tuple[Path, Path]:  # fmt: skip
    """Writes ``results_dir/NAME.json`` and ``NAME.md`` from the runs; returns both paths.
    ``against`` (``"CODEC:SETTING"``): also the bits each curve of that codec needs for that
    row's quality (:func:`reach_table`); a set without such a row is refused."""
    if not _NAME.fullmatch(name):
        raise FiguresError(f"--name {name!r}: use letters, digits, '.', '_' and '-'")
    rows, commands = load_result_set(run_dirs)
    reaches = reach_factors(rows, against) if against else []
    if against and not reaches:
        raise FiguresError(f"--against {against!r}: no row of the runs has that codec and "
                           "setting, with a BPP and a quality")  # fmt: skip
    keep = (*CONTEXT_COLUMNS, *FIGURE_COLUMNS)
    data = {
        "name": name,
        "commands": commands,
        "rows": [{k: r[k] for k in keep if r.get(k) not in (None, "")} for r in rows],
        "savings": saving_rows(saving_factors(rows)),
    }
    if against:
        data["against"] = against
        data["reach"] = saving_rows(reaches)
    results_dir.mkdir(parents=True, exist_ok=True)
    json_path = write_text_atomic(results_dir / f"{name}.json", json.dumps(data, indent=1) + "\n")
    md_path = write_text_atomic(results_dir / f"{name}.md", figure_tables(rows, reaches))
    return json_path, md_path


#: The quick figures ``make test``, ``make test-no-shared`` and ``make demo`` write.
QUICK_SOURCES = (("make test", "tests.json"), ("make test-no-shared", "tests-no-shared.json"),
                 ("make demo", "demo.json"))  # fmt: skip


def write_quick_figures(results_dir: Path) -> Path | None:
    """``results_dir/quick.md``: a table of the last ``make test``/``test-no-shared``/
    ``demo`` runs from the JSON files they wrote (None when none has run)."""
    lines = []
    for command, name in QUICK_SOURCES:
        path = results_dir / name
        if not path.is_file():
            continue
        got = json.loads(path.read_text())
        if "passed" in got:
            outcome = (f"{got['passed']} passed, {got['skipped']} skipped, "
                       f"{got['failed'] + got.get('error', 0)} failed")  # fmt: skip
        else:
            outcome = f"report written, {got.get('cells_computed', '?')} cells measured"
        lines.append({"command": f"`{command}`", "result": outcome, "seconds": got["seconds"],
                      "machine": got.get("machine", ""), "date": got.get("date", ""),
                      "load at the end": got.get("load_1min_at_end")})  # fmt: skip
    if not lines:
        return None
    table = markdown_table(lines, ["command", "result", "seconds", "machine", "date",
                                   "load at the end"])  # fmt: skip
    return write_text_atomic(results_dir / "quick.md", table + "\n")


#: The result sets of the README's headline table: level 1 at its default target against the
#: strongest x265 of the same run, per camera and protocol.
HEADLINE_SETS = ("demo-sample", "level1-cold-tud", "level1-cold-pets", "level1-cold-pets-zoom2",
                 "level1-cold-tud-half", "level1-steady-tud", "level1-steady-pets",
                 "level1-steady-pets-zoom2")  # fmt: skip
HEADLINE_ROW = ("scaffold", "level=1")
_HEADLINE_METRICS = {"st_lpips": "whole frame (ST-LPIPS)",
                     "person_st_lpips": "people (person-region ST-LPIPS)",
                     "moda": "detections (MODA)"}  # fmt: skip


def headline_table(results_dir: Path) -> str:
    """The README's headline: for each result set of :data:`HEADLINE_SETS` in
    ``results_dir``, level 1's BPP and how many times fewer bits than the best x265 curve of
    the same run it needs for the same quality (its saving factors, ``<=``/``>=`` outside the
    range x265 was measured on)."""
    lines = []
    for name in HEADLINE_SETS:
        path = results_dir / f"{name}.json"
        if not path.is_file():
            continue
        data = json.loads(path.read_text())
        for row in data["rows"]:
            if (row["codec"], row["setting"]) != HEADLINE_ROW:
                continue
            start, frames = int(row.get("start") or 1), int(row.get("frames") or 0)
            line = {"camera": row["sequence"], "frames": f"{start}–{start + frames - 1}",
                    "protocol": "steady state" if row.get("protocol") == "steady"
                    else "cold start", "level 1 bpp": row["bpp"]}  # fmt: skip
            mine = (row["sequence"], *HEADLINE_ROW, row.get("protocol") or "cold")
            for s in data["savings"]:
                key = (s["sequence"], s["codec"], s["setting"], s.get("protocol", "cold"))
                if key == mine and s["metric"] in _HEADLINE_METRICS and s["factor"] is not None:
                    bound = "" if s["bound"] == "=" else f"{s['bound']} "
                    line[_HEADLINE_METRICS[s["metric"]]] = f"{bound}{s['factor']:.2f}x"
            lines.append(line)
    return markdown_table(lines, ["camera", "frames", "protocol", "level 1 bpp",
                                  *_HEADLINE_METRICS.values()]) + "\n"  # fmt: skip


def write_headline(results_dir: Path) -> Path:
    """``results_dir/headline.md``: :func:`headline_table`."""
    return write_text_atomic(results_dir / "headline.md", headline_table(results_dir))


def spliced(readme: str, results_dir: Path) -> str:
    """``readme`` with every generated block replaced by its result set's ``NAME.md``."""

    def replace(match: re.Match) -> str:
        source = results_dir / f"{match['name']}.md"
        if not source.is_file():
            raise FiguresError(f"README block figures:{match['name']}: {source} does not exist "
                               "(semcodec-bench figures --name ... makes it)")  # fmt: skip
        return match.group(1) + source.read_text() + match.group(4)

    return _BLOCK.sub(replace, readme)


def splice_readme(readme: Path, results_dir: Path) -> bool:
    """Rewrites ``readme``'s generated blocks (a README or a page of ``docs/``) from
    ``results_dir``, after writing the tables made of other result files (``quick.md``,
    ``headline.md``); True if anything changed."""
    write_quick_figures(results_dir)
    write_headline(results_dir)
    text = readme.read_text()
    new = spliced(text, results_dir)
    if new != text:
        write_text_atomic(readme, new)
    return new != text
