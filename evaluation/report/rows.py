"""Reading a run's result rows: ``results.jsonl`` (one JSON object per finished cell,
appended as cells finish) and the newest row of each cell."""

from __future__ import annotations

import csv
import json
import os
from pathlib import Path


def read_rows(path: Path) -> list[dict]:
    """Rows of a results.jsonl (an incomplete last line, from a killed run, is skipped)."""
    if not path.exists():
        return []
    rows = []
    for line in path.read_text().splitlines():
        try:
            rows.append(json.loads(line))
        except json.JSONDecodeError:
            continue
    return rows


def latest_rows(rows: list[dict]) -> list[dict]:
    """One row per (sequence, codec, setting, range, size, protocol): the last one written.

    A results.jsonl can hold rows of the same cell made by different code versions or
    metric choices; the report shows the newest.
    """
    key = ("sequence", "codec", "setting", "start", "frames", "width", "height")

    def ident(row: dict) -> tuple:
        return (*(row.get(k) for k in key), row.get("protocol") or "cold")

    return list({ident(row): row for row in rows}.values())


def write_rows_csv(rows: list[dict], columns: list[str], path: Path) -> None:
    """Writes ``rows`` as CSV with ``columns`` (a header line, then one line per row; keys
    outside ``columns`` are left out, missing values are empty, floats to 8 significant
    digits). Every field is written by the csv module, so a value holding commas or quotes
    (a setting such as ``level=1,decoder=restore``) stays one field.

    Atomic: the table goes to a temporary file in the same folder that is then renamed over
    ``path``, so a reader (or a killed run) never sees a half-written table.
    """
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        with open(tmp, "w", newline="") as fh:
            writer = csv.DictWriter(fh, columns, extrasaction="ignore")
            writer.writeheader()
            for row in rows:
                writer.writerow({k: _csv_value(row.get(k)) for k in columns})
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)


def _csv_value(value):
    if value is None:
        return ""
    if isinstance(value, float):
        return f"{value:.8g}"
    return value
