"""The documentation site (``mkdocs.yml``, the pages of ``docs/``) builds in strict mode: a
link to a page or file that is not there, a page left out of the navigation, or a link to a
heading that is not there fails. The journal is kept as written (it is the history), so a
stale anchor of its own is the one thing let through."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
#: mkdocs' line for a link to a heading that is not there (``anchors: info`` in mkdocs.yml:
#: strict mode stops on warnings only, so this test reads these lines itself).
MISSING_ANCHOR = re.compile(r"Doc file '(?P<page>[^']+)' contains a link '[^']*', but "
                            r"(the doc '[^']*' does not contain an anchor|there is no such "
                            r"anchor on this page)")  # fmt: skip


def build(site: Path, config: Path = ROOT / "mkdocs.yml") -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "--config-file",
                           str(config), "--site-dir", str(site)],
                          capture_output=True, text=True, timeout=300)  # fmt: skip


def broken_anchors(log: str) -> list[str]:
    return [m.group(0) for m in MISSING_ANCHOR.finditer(log) if m["page"] != "journal.md"]


def test_the_site_builds_strict_with_no_broken_link(tmp_path):
    done = build(tmp_path / "site")
    assert done.returncode == 0, done.stderr[-3000:]
    assert broken_anchors(done.stderr) == []
    for page in ("index.html", "results/index.html", "guide/bench/index.html"):
        assert (tmp_path / "site" / page).is_file(), page


def test_a_broken_link_or_anchor_is_caught(tmp_path):
    """The check itself: a page with a link to a missing page fails the strict build, and a
    link to a missing heading of a real page is reported."""
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "index.md").write_text("# Home\n\n[there](other.md#nowhere)\n")
    (docs / "other.md").write_text("# Other\n")
    config = tmp_path / "mkdocs.yml"
    config.write_text((ROOT / "mkdocs.yml").read_text().split("\nnav:")[0]
                      .replace("docs_dir: docs", f"docs_dir: {docs}") +
                      "\nvalidation:\n  anchors: info\n")  # fmt: skip
    done = build(tmp_path / "site", config)
    assert done.returncode == 0, done.stderr[-3000:]
    assert len(broken_anchors(done.stderr)) == 1
    (docs / "index.md").write_text("# Home\n\n[gone](missing.md)\n")
    assert build(tmp_path / "site", config).returncode != 0
