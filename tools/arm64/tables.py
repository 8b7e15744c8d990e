"""The entropy coders' CDF tables and rANS payloads, as digests (issue 52).

Prints one line per table: its name, ``CdfTable.sha256`` and the sha256 of a fixed symbol
sequence (in range, out of range: escapes) coded with it by compressai's rANS, decoded back
with verification. Run by ``make arm64-check`` on both machines (seconds, no torch, no
frames): the lines must be equal. Exits 1 if a payload does not decode to its symbols.

    python tools/arm64/tables.py            # this machine's digests
"""

from __future__ import annotations

import hashlib
import platform
import sys

import numpy as np

from semcodec.codec.entropy import boxes, pose, rans, segmentation, sparse_pose
from semcodec.codec.entropy.flow import default_flow_prior, load_default_prior


def _tables() -> dict[str, rans.CdfTable]:
    out: dict[str, rans.CdfTable] = {}
    for name, module in (("boxes", boxes), ("pose", pose), ("sparse_pose", sparse_pose)):
        for key, table in module._tables().items():
            out[f"{name}.{key}"] = table
    count, gap = segmentation._fixed()
    out["segmentation.count"], out["segmentation.gap"] = count, gap
    fresh = segmentation._Tables(segmentation.SegmentationCoder())
    for key in ("changed", "cand", "shift", "flag"):
        out[f"segmentation.{key}"] = getattr(fresh, key)
    for step in (1.0, 0.5, 0.25):
        out[f"flow.learned.{step}"] = load_default_prior(step).table
        out[f"flow.default.{step}"] = default_flow_prior(step).table
    out["rans.nbits"] = rans._NBITS_TABLE
    out["rans.chunks"] = rans._CHUNK_TABLES
    out["rans.laplace"] = rans.laplace_table([0.3, 1.0, 2.5, 7.0, 40.0], 60)
    out["rans.pmf"] = rans.CdfTable.from_cdfs(
        [rans.cdf_from_pmf([0.5, 0.25, 1e-300, 0.0, 0.125], escape=1e-9)], [-2]
    )
    return out


def _symbols(table: rans.CdfTable, n: int = 2000) -> tuple[np.ndarray, np.ndarray]:
    """``n`` symbols and table indexes from a fixed integer generator, about 1 in 50 escaped."""
    state = np.uint64(0x9E3779B97F4A7C15)
    syms, idx = [], []
    for _ in range(n):
        state = np.uint64((int(state) * 6364136223846793005 + 1442695040888963407) % (1 << 64))
        r = int(state) >> 11
        i = r % len(table)
        lo, width = table.offsets[i], table.lengths[i] - 2
        v = lo + (r >> 20) % width
        if (r >> 40) % 50 == 0:
            v = lo + width + (r >> 44) % 5000  # escaped
        syms.append(v)
        idx.append(i)
    return np.array(syms, np.int64), np.array(idx, np.int64)


def digest_lines() -> list[str]:
    """``name table-sha256 payload-sha256 payload-bytes`` per table (digests cut to 16).

    Raises:
        rans.EntropyCodingError: a payload that does not decode to its symbols.
    """
    lines = []
    for name, table in _tables().items():
        syms, idx = _symbols(table)
        payload = rans.encode(syms, idx, table)
        if not np.array_equal(rans.decode(payload, idx, table), syms):
            raise rans.EntropyCodingError(f"{name}: decoded symbols differ")
        lines.append(f"{name} {table.sha256()[:16]} {hashlib.sha256(payload).hexdigest()[:16]} "
                     f"{len(payload)}")  # fmt: skip
    return lines


def main() -> int:
    print(f"# {platform.machine()} numpy {np.__version__}")
    try:
        lines = digest_lines()
    except rans.EntropyCodingError as exc:
        print(exc, file=sys.stderr)
        return 1
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
