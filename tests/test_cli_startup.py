"""The three programs answer ``--help`` without loading torch (which costs seconds and
hundreds of MB): a user asking for help waits for nothing. Timings are in the benchmark."""

from __future__ import annotations

import subprocess
import sys

import pytest

_PROBE = """
import sys
from {module} import main
try:
    main({argv!r})
except SystemExit:
    pass
heavy = sorted(m for m in ("torch", "cv2", "av", "diffusers", "onnxruntime", "grpc", "scipy")
               if m in sys.modules)
print("HEAVY", ",".join(heavy))
"""


@pytest.mark.parametrize(
    ("module", "argv", "allowed"),
    [
        ("semcodec.cloud.cli", ["--help"], set()),
        ("semcodec.cloud.cli", ["decode", "--help"], set()),
        ("semcodec.edge.cli", ["--help"], set()),
        ("semcodec.evaluation.cli", ["--help"], set()),
        ("semcodec.evaluation.cli", ["run", "--help"], set()),
    ],
)
def test_help_does_not_load_heavy_modules(module, argv, allowed):
    probe = _PROBE.format(module=module, argv=argv)
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True,
                         timeout=120, check=True).stdout  # fmt: skip
    assert "usage:" in out
    heavy = set(out.rsplit("HEAVY", 1)[1].strip().split(",")) - {""}
    assert heavy <= allowed, f"{module} {argv} imported {sorted(heavy)}"
