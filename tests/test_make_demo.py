"""``make demo`` measures what the demo needs and writes only under ``runs/``: level 1 on the
embedded sample beside x265 at its rate (the settings the default grid adds for that, so the
picture at equal bits has its x265 row) and the uncompressed frames. The run itself is the
grid's and the picture's (tests/evaluation/); this reads the recipe ``make -n`` prints."""

from __future__ import annotations

import shlex
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def demo_command(*variables: str) -> list[str]:
    if shutil.which("make") is None:
        pytest.skip("make is not installed")
    done = subprocess.run(["make", "-n", "demo", *variables], cwd=ROOT, capture_output=True,
                          text=True, timeout=60, check=True)  # fmt: skip
    (line,) = [line for line in done.stdout.splitlines() if "semcodec-bench run" in line]
    return shlex.split(line)


def test_the_demo_runs_level_1_beside_x265_at_its_rate_into_runs():
    from semcodec.evaluation.cli import build_parser
    from semcodec.evaluation.cli.common import DEMO_X265_AT_LEVEL1_RATE
    from semcodec.evaluation.cli.run import DEMO_PICTURE_SETTING, grid_from_args

    argv = demo_command()
    args = build_parser().parse_args(argv[argv.index("run"):])
    config = grid_from_args(args)
    assert config.codecs["x265"] == list(DEMO_X265_AT_LEVEL1_RATE)
    assert config.codecs["scaffold"] == [DEMO_PICTURE_SETTING]  # the default decoder
    assert set(config.codecs) == {"x265", "scaffold", "raw"}
    assert config.out_dir == Path("runs/demo") and not args.data  # the picture needs the sample
    assert demo_command("DEMO_OUT=runs/elsewhere")[-1] == "runs/elsewhere"


def test_the_demo_recipe_writes_nothing_outside_its_folder():
    argv = demo_command()
    assert not [a for a in argv if "docs" in a or a.startswith(">")]
