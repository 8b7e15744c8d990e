"""Makes the synthetic stream builder of the fuzz harness (``tests/fuzz/semc_streams.py``)
importable from the cloud tests."""

from __future__ import annotations

import sys
from pathlib import Path

FUZZ_DIR = Path(__file__).resolve().parents[1] / "fuzz"
if str(FUZZ_DIR) not in sys.path:
    sys.path.insert(0, str(FUZZ_DIR))
