"""Makes the synthetic stream builder of the fuzz harness (``tests/fuzz/semc_streams.py``)
importable from the cloud tests."""

from __future__ import annotations

import sys
from pathlib import Path

FUZZ_DIR = Path(__file__).resolve().parents[1] / "fuzz"
if str(FUZZ_DIR) not in sys.path:
    sys.path.insert(0, str(FUZZ_DIR))

import numpy as np  # noqa: E402
import pytest  # noqa: E402

#: ``(width, height)`` of :func:`level1_stream`'s frames.
LEVEL1_SIZE = (96, 64)


@pytest.fixture(scope="session")
def level1_stream() -> bytes:
    """A synthetic level-1 stream of 4 frames of :data:`LEVEL1_SIZE` with people."""
    from semc_streams import stream_bytes, synthetic_stream

    return stream_bytes(*synthetic_stream(level=1, count=4, size=LEVEL1_SIZE))


@pytest.fixture(scope="session")
def decode_with():
    """``decode_with(stream, name, **options)`` -> ``(reconstructor, decoded units, frames
    (T, H, W, 3) uint8)`` with reconstructor ``name``."""
    from semcodec.codec.reconstruct import create_reconstructor
    from semcodec.codec.scaffold.codec import decode_stream

    def decode(stream, name, **options):
        rec = create_reconstructor(name, **options)
        pairs = list(decode_stream(stream, rec))
        return rec, [d for d, _ in pairs], np.stack([f for _, f in pairs])

    return decode
