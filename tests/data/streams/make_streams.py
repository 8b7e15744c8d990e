"""Rebuilds the reference streams and their digests (run from the repository root).

``level{0..3}.semc``: the first 12 frames of the embedded sample coded at each level by
``edge-agent encode``; ``digests.json``: the sha256 of every stream's decoded scaffolds and of
its frames rebuilt by ``warp``, which ``tests/codec/test_reference_streams.py`` checks. Run
it only when the bitstream or the decoder changes on purpose, and say so in the commit.

    python tests/data/streams/make_streams.py
"""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
_spec = importlib.util.spec_from_file_location(
    "test_reference_streams", HERE.parents[1] / "codec" / "test_reference_streams.py")
_test = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_test)
FRAMES, LEVELS, stream_digests = _test.FRAMES, _test.LEVELS, _test.stream_digests


def main() -> None:
    digests = {}
    for level in LEVELS:
        path = HERE / f"level{level}.semc"
        subprocess.run([Path(sys.executable).parent / "edge-agent", "-q", "encode",
                        "PETS09-S2L1-384x288", "--level", str(level), "--frames", str(FRAMES),
                        "-o", str(path)], check=True)  # fmt: skip
        digests[path.name] = stream_digests(path)
    (HERE / "digests.json").write_text(json.dumps(digests, indent=1) + "\n")


if __name__ == "__main__":
    main()
