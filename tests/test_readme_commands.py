"""The README's quick starts run as written on a fresh clone: each ``sh`` block under
``## Quick starts`` runs in bash in an empty folder, with ``../shared`` hidden, ``.venv/bin``
standing for this environment's programs and the service's ports swapped for free ones.
Every ``sh`` block of the README is a quick start, apart from the two commands (``make
test`` is this suite; the demo has its own target)."""

from __future__ import annotations

import os
import re
import signal
import socket
import subprocess
import sys
from pathlib import Path

import pytest

README = Path(__file__).resolve().parents[1] / "README.md"
BLOCK = re.compile(r"```sh\n(.*?)```", re.S)
#: The programs a block may name as ``.venv/bin/NAME``, and the module each runs.
PROGRAMS = {"edge-agent": "semcodec.edge.cli", "cloud-decoder": "semcodec.cloud.cli",
            "semcodec-bench": "semcodec.evaluation.cli"}  # fmt: skip
#: The service's ports in the README, swapped for free ones (other tests, or a user's server).
PORTS = ("50051", "8080")


def sections(level: str, text: str) -> dict[str, str]:
    """``{heading: body}`` of the headings of one level (``"##"``, ``"###"``) in ``text``."""
    parts = re.split(rf"^{level} (.+)$", text, flags=re.M)
    return dict(zip(parts[1::2], parts[2::2], strict=True))


def quick_starts() -> dict[str, str]:
    """``{heading: script}``: the ``sh`` block of each quick start."""
    body = sections("##", README.read_text())["Quick starts"]
    return {heading: BLOCK.search(text).group(1) for heading, text in sections("###", body).items()}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def venv_here(folder: Path) -> None:
    """``folder/.venv/bin``: this interpreter as ``python``, and each program as its module
    run by it (also where the scripts are not installed: make test-numpy2's layer)."""
    bin_dir = folder / ".venv" / "bin"
    bin_dir.mkdir(parents=True)
    for name, module in {"python": None, **PROGRAMS}.items():
        run = f'"{sys.executable}"' + (f" -m {module}" if module else "")
        (bin_dir / name).write_text(f'#!/bin/sh\nexec {run} "$@"\n')
        (bin_dir / name).chmod(0o755)


def test_every_sh_block_is_a_quick_start_or_the_two_commands():
    text = README.read_text()
    two = BLOCK.findall(sections("##", text)["Two commands"])
    assert [line.split()[:2] for line in two[0].splitlines()] == [["make", "test"],
                                                                  ["make", "demo"]]
    assert len(BLOCK.findall(text)) == len(two) + len(quick_starts())
    assert list(quick_starts()) == [
        "Compress and decode a video file",
        "Stream a camera to a cloud-decoder and watch it in a browser",
        "Detections at a link budget",
        "Benchmark a codec of your own against x265",
    ]


#: Quick starts of several minutes on 2 cores: detect mode's start-up search (every shipped
#: bottleneck at a ladder of skip thresholds and intra periods, both halves of the
#: detector) took 7 minutes of CPU on the sample.
SLOW = {"Detections at a link budget"}


@pytest.mark.parametrize("heading", [pytest.param(h, marks=pytest.mark.slow) if h in SLOW
                                     else h for h in quick_starts()])  # fmt: skip
def test_the_quick_start_runs_as_written(heading, tmp_path):
    script = quick_starts()[heading]
    for port in PORTS:
        script = script.replace(f"127.0.0.1:{port}", f"127.0.0.1:{free_port()}")
    venv_here(tmp_path)
    # a background server is stopped whatever happens to the block
    (tmp_path / "quickstart.sh").write_text("set -euo pipefail\n"
                                            "trap 'kill $(jobs -p) 2>/dev/null || true' EXIT\n"
                                            + script)  # fmt: skip
    env = {k: v for k, v in os.environ.items() if not k.startswith("SEMCODEC_")}
    env["SEMCODEC_NO_SHARED"] = "1"
    process = subprocess.Popen(["bash", "quickstart.sh"], cwd=tmp_path, env=env, text=True,
                               stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                               start_new_session=True)  # fmt: skip
    try:
        output, _ = process.communicate(timeout=900)
    finally:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGKILL)
    assert process.returncode == 0, f"{heading}\n{output[-3000:]}"
    CHECKS[heading](tmp_path, output)


def _decoded_file(folder: Path, output: str) -> None:
    decoded = folder / "sample_decoded"
    assert len(list((decoded / "frames").glob("*.png"))) == 60
    for name in ("scaffolds.npz", "stream.json", "overview.mp4", "tracks.txt"):
        assert (decoded / name).is_file(), name


def _streamed(folder: Path, output: str) -> None:
    (session,) = (folder / "out-serve" / "default").iterdir()
    assert len(list((session / "frames").glob("*.png"))) == 28
    assert '"session_id"' in output or str(session.name) in output  # the JSON API listed it


def _detections(folder: Path, output: str) -> None:
    lines = (folder / "d_decoded" / "detections.txt").read_text().splitlines()
    assert lines and {int(line.split(",")[0]) for line in lines} <= set(range(1, 61))


def _benchmarked(folder: Path, output: str) -> None:
    report = (folder / "runs" / "mycodec" / "report.md").read_text()
    assert "mycodec" in report and "x265" in report
    rows = (folder / "runs" / "mycodec" / "results.csv").read_text().splitlines()
    assert sum(",mycodec," in row for row in rows) == 3


CHECKS = {
    "Compress and decode a video file": _decoded_file,
    "Stream a camera to a cloud-decoder and watch it in a browser": _streamed,
    "Detections at a link budget": _detections,
    "Benchmark a codec of your own against x265": _benchmarked,
}
