"""The README's figures regenerate: its generated blocks equal the files under
``docs/results/`` (``semcodec-bench figures --readme README.md`` writes them), the code's
parameters there (``parameters.json``, ``levels.md``, ``columns.md``) equal what the code
gives now, and every number the README states outside code is in a file of
``docs/results/``. (The measurements behind the design are in ``docs/journal.md``, dated and
not regenerated.)"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from semcodec.evaluation.report.figures import FiguresError, spliced

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
RESULTS = ROOT / "docs" / "results"
NUMBER = re.compile(r"(?<![\w.\-/])(\d{1,3}(?:,\d{3})+|\d+(?:\.\d+)?)(?!\d|\.\d)")


def _prose(text: str) -> str:
    """``text`` without code blocks, code spans, link targets and generated blocks."""
    text = re.sub(r"```.*?```", " ", text, flags=re.S)
    text = re.sub(r"<!-- figures:([\w.-]+) -->.*?<!-- /figures:\1 -->", " ", text, flags=re.S)
    text = re.sub(r"`[^`\n]*`", " ", text)
    return re.sub(r"\]\([^)]*\)", "]", text)


def _json_numbers(value) -> list[float]:
    if isinstance(value, bool):
        return []
    if isinstance(value, int | float):
        return [float(value)]
    if isinstance(value, dict):
        return [n for v in value.values() for n in _json_numbers(v)]
    if isinstance(value, list):
        return [n for v in value for n in _json_numbers(v)]
    return []


def result_numbers() -> tuple[set[str], list[float]]:
    """Every number token of the files in ``docs/results/`` and every JSON number there."""
    tokens, values = set(), []
    for path in sorted(RESULTS.glob("*")):
        text = path.read_text()
        tokens.update(NUMBER.findall(text))
        if path.suffix == ".json":
            values += _json_numbers(json.loads(text))
    return tokens, values


def is_in_results(token: str, tokens: set[str], values: list[float]) -> bool:
    """The token is written in a result file, or a result value rounds to it."""
    if token in tokens:
        return True
    number = float(token.replace(",", ""))
    decimals = len(token.split(".")[1]) if "." in token else 0
    return any(round(v, decimals) == number for v in values)


def test_generated_blocks_are_current():
    readme = README.read_text()
    try:
        assert spliced(readme, RESULTS) == readme, (
            "a generated block differs from its result set: run "
            "`semcodec-bench figures --readme README.md`")
    except FiguresError as exc:
        pytest.fail(str(exc))


def test_the_code_parameters_are_current():
    from semcodec.evaluation.cli.parameters import code_figures

    stale = [name for name, text in code_figures().items()
             if not (RESULTS / name).is_file() or (RESULTS / name).read_text() != text]  # fmt: skip
    assert stale == [], (f"{stale} differ from the code: run "
                         "`semcodec-bench figures --readme README.md`")  # fmt: skip


def test_every_number_of_the_readme_is_in_the_results():
    tokens, values = result_numbers()
    missing = sorted({t for t in NUMBER.findall(_prose(README.read_text()))
                      if not is_in_results(t, tokens, values)})  # fmt: skip
    assert missing == []


def test_the_check_finds_a_number_that_is_not_there():
    tokens, values = result_numbers()
    assert not is_in_results("98765.4321", tokens, values)
    assert NUMBER.findall(_prose("saves 1.25x, not `0.5` nor ```\n7\n```")) == ["1.25"]
