"""Reading a run's result rows: ``results.jsonl`` (one JSON object per finished cell,
appended as cells finish) and the newest row of each cell."""

from __future__ import annotations

import json
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
