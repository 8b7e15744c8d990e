"""The figures of the README and of the documentation's pages regenerate: their generated
blocks equal the files under ``docs/results/`` (``semcodec-bench figures --readme README.md
docs/results.md ...`` writes them, as ``make readme-figures`` does), the code's parameters
there (``parameters.json``, ``levels.md``, ``columns.md``) and the tables made of other
result files (``headline.md``, ``quick.md``) equal what the code gives now, and every number
those pages state outside code is in a file of ``docs/results/``. (The measurements behind
the design are in ``docs/journal.md``, dated and not regenerated; ``docs/service.md``,
``docs/deployment.md`` and ``docs/architecture.md`` are references with numbers of their
own.)"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from semcodec.evaluation.report.figures import FiguresError, spliced

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
RESULTS = ROOT / "docs" / "results"
#: The pages whose numbers come from ``docs/results/``: the README, the results, the site's
#: home page and the guides.
PAGES = (README, ROOT / "docs" / "results.md", ROOT / "docs" / "index.md",
         *sorted((ROOT / "docs" / "guide").glob("*.md")))  # fmt: skip
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


def page_id(path: Path) -> str:
    return str(path.relative_to(ROOT))


@pytest.mark.parametrize("page", PAGES, ids=page_id)
def test_generated_blocks_are_current(page):
    text = page.read_text()
    try:
        assert spliced(text, RESULTS) == text, (
            f"a generated block of {page_id(page)} differs from its result set: run "
            "`make readme-figures` (its last step, `semcodec-bench figures --readme ...`)")
    except FiguresError as exc:
        pytest.fail(str(exc))


def test_the_pages_with_generated_blocks_are_all_checked():
    """A page of docs/ (other than the references) with a generated block is in PAGES."""
    block = re.compile(r"^<!-- figures:[\w.-]+ -->$", re.M)
    blocks = {p for p in (ROOT / "docs").rglob("*.md")
              if block.search(p.read_text()) and RESULTS not in p.parents}  # fmt: skip
    assert blocks <= set(PAGES)
    assert all(block.search(p.read_text()) for p in (README, ROOT / "docs" / "results.md"))


def test_the_tables_made_of_other_result_files_are_current():
    from semcodec.evaluation.report.figures import headline_table

    assert (RESULTS / "headline.md").read_text() == headline_table(RESULTS), (
        "run `semcodec-bench figures --readme README.md ...`")
    assert "| PETS09-S2L1 |" in (RESULTS / "headline.md").read_text()


def test_the_code_parameters_are_current():
    from semcodec.evaluation.cli.parameters import code_figures

    stale = [name for name, text in code_figures().items()
             if not (RESULTS / name).is_file() or (RESULTS / name).read_text() != text]  # fmt: skip
    assert stale == [], (f"{stale} differ from the code: run "
                         "`semcodec-bench figures --readme README.md`")  # fmt: skip


@pytest.mark.parametrize("page", PAGES, ids=page_id)
def test_every_number_of_the_page_is_in_the_results(page):
    tokens, values = result_numbers()
    missing = sorted({t for t in NUMBER.findall(_prose(page.read_text()))
                      if not is_in_results(t, tokens, values)})  # fmt: skip
    assert missing == []


def test_the_check_finds_a_number_that_is_not_there():
    tokens, values = result_numbers()
    assert not is_in_results("98765.4321", tokens, values)
    assert NUMBER.findall(_prose("saves 1.25x, not `0.5` nor ```\n7\n```")) == ["1.25"]
