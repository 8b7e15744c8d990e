"""The README's first commands run as written on a fresh clone: the scaffold codec's example
block (``## The scaffold codec``) is read out of the README and each command run in an empty
folder, with ``../shared`` hidden."""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

README = Path(__file__).resolve().parents[1] / "README.md"


def readme_block(heading: str) -> list[str]:
    """The commands of the first ``sh`` block after ``heading`` (comments and blanks dropped)."""
    text = README.read_text()
    section = text[text.index(heading):]
    block = re.search(r"```sh\n(.*?)```", section, re.S).group(1)
    return [line.split("#")[0].strip() for line in block.splitlines()
            if line.split("#")[0].strip()]  # fmt: skip


def test_the_scaffold_codec_example_runs_as_written(tmp_path):
    commands = readme_block("## The scaffold codec")
    assert [c.split()[0] for c in commands] == [".venv/bin/edge-agent", ".venv/bin/cloud-decoder"]
    env = {k: v for k, v in os.environ.items() if not k.startswith("SEMCODEC_")}
    env["SEMCODEC_NO_SHARED"] = "1"
    bin_dir = Path(sys.executable).parent
    modules = {"edge-agent": "semcodec.edge.cli", "cloud-decoder": "semcodec.cloud.cli"}
    for command in commands:
        argv = shlex.split(command)
        program = Path(argv[0]).name
        if (bin_dir / program).exists():
            argv[0] = str(bin_dir / program)
        else:  # an environment without the scripts (make test-numpy2's layer): the modules
            argv[:1] = [sys.executable, "-m", modules[program]]
        done = subprocess.run(argv, cwd=tmp_path, env=env, capture_output=True, text=True,
                              timeout=900)  # fmt: skip
        assert done.returncode == 0, f"{command}\n{done.stderr[-2000:]}"
    decoded = tmp_path / "sample_decoded"
    assert len(list((decoded / "frames").glob("*.png"))) == 60
    for name in ("scaffolds.npz", "stream.json", "overview.mp4"):
        assert (decoded / name).is_file(), name

