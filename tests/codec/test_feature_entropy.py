"""Entropy coding of quantized detector features: round trips, the temporal model's gain on
still scenes, decoding in another process, and bad input."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest

from semcodec.codec.entropy.features import (
    MAX_VALUES,
    FeatureCodingError,
    decode_features,
    encode_features,
    fit_tables,
)

SHAPE = (8, 19, 19)


def _sequence(seed: int, frames: int = 6, moving: float = 0.1) -> list[np.ndarray]:
    """Laplacian-ish integer features where a share ``moving`` of values change per frame."""
    rng = np.random.default_rng(seed)
    q = np.round(rng.laplace(0, 2.0, SHAPE)).astype(np.int32)
    out = [q.copy()]
    for _ in range(frames - 1):
        change = rng.random(SHAPE) < moving
        q = np.where(change, q + np.round(rng.laplace(0, 1.5, SHAPE)).astype(np.int32), q)
        out.append(q.copy())
    return out


def _coded(sequence, tables):
    previous, payloads = None, []
    for q in sequence:
        payloads.append(encode_features(q, tables, previous))
        previous = q
    return payloads


def test_both_models_round_trip_exactly_including_escaped_values():
    tables = fit_tables([_sequence(0), _sequence(1)])
    sequence = _sequence(2)
    sequence[3][0, 0, 0] = 5000  # far outside the tables' support: escaped
    previous = None
    for q, data in zip(sequence, _coded(sequence, tables), strict=True):
        decoded = decode_features(data, SHAPE, tables, previous)
        np.testing.assert_array_equal(decoded, q)
        previous = decoded


def test_the_temporal_model_codes_a_still_scene_for_almost_nothing():
    tables = fit_tables([_sequence(s, moving=0.05) for s in range(3)])
    still = [_sequence(9)[0]] * 4
    first, *rest = _coded(still, tables)
    assert all(len(p) < len(first) / 20 for p in rest), (len(first), [len(p) for p in rest])


def test_tables_are_the_same_integers_in_another_process(tmp_path):
    tables = fit_tables([_sequence(0), _sequence(1)])
    sequence = _sequence(5)
    payloads = _coded(sequence, tables)
    for k, data in enumerate(payloads):
        (tmp_path / f"{k}.bin").write_bytes(data)
    script = f"""
import numpy as np
from tests.codec.test_feature_entropy import _sequence, SHAPE
from semcodec.codec.entropy.features import fit_tables, decode_features
from pathlib import Path
tables = fit_tables([_sequence(0), _sequence(1)])
print(tables.sha256())
previous = None
for k in range({len(payloads)}):
    previous = decode_features(Path({str(tmp_path)!r}, f"{{k}}.bin").read_bytes(), SHAPE,
                               tables, previous)
    np.save(Path({str(tmp_path)!r}, f"{{k}}.npy"), previous)
"""
    from pathlib import Path

    root = Path(__file__).resolve().parents[2]
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                            cwd=root, timeout=120, check=False)  # fmt: skip
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == tables.sha256()
    for k, q in enumerate(sequence):
        np.testing.assert_array_equal(np.load(tmp_path / f"{k}.npy"), q)


def test_bad_input_is_a_typed_error():
    tables = fit_tables([_sequence(0)])
    q = _sequence(1)[0]
    with pytest.raises(FeatureCodingError, match="integer"):
        encode_features(q.astype(np.float32), tables)
    with pytest.raises(FeatureCodingError, match="C=8"):
        encode_features(q[:4], tables)
    with pytest.raises(FeatureCodingError, match="differ"):
        encode_features(q, tables, previous=q[:, :5])
    with pytest.raises(FeatureCodingError, match="cannot decode"):
        decode_features(b"\x01\x02", (8, MAX_VALUES, 2), tables)  # a claimed size: refused
    data = encode_features(q, tables)
    with pytest.raises(FeatureCodingError):
        decode_features(data[: len(data) // 2], SHAPE, tables)
    with pytest.raises(FeatureCodingError, match="at least one frame"):
        fit_tables([])
