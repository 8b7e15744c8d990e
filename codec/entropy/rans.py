"""A thin, safe layer over compressai's rANS coder with integer CDF tables.

Conventions (compressai's, so tables interoperate): a CDF over ``L`` in-range symbols is a
list of ``L + 2`` integers ``0 = c[0] < c[1] < ... < c[L + 1] = 2**16``; slot ``L`` (the last
interval) is the **escape** symbol. ``lengths[i] = L + 2`` (compressai's ``cdf_length``) and
``offsets[i]`` is the symbol value coded by slot 0, so table ``i`` covers the values
``offsets[i] .. offsets[i] + L - 1``. Any other integer with ``|v| <= MAX_ABS_SYMBOL`` is coded
as the escape slot followed by the escaped value (below), so every such integer round-trips.

Every table here is computed from integers only (counts, or a float64 pmf turned into integer
weights by an exact power-of-two scaling, or exact rational Laplacian weights), with a
largest-remainder quantiser in exact integer arithmetic. A table is therefore bit-identical on
every machine; :meth:`CdfTable.sha256` names it.

What compressai 1.2.8 does with bad input (measured; the C++ asserts are compiled out, as in
PyPI's wheels and pip's builds: a build with them is refused, see :func:`_check_release_build`):

* ``RansEncoder.encode_with_indexes`` on 0 symbols segfaults and on 1 symbol corrupts the heap
  (its output buffer holds one 32-bit word per symbol but the flush alone writes two).
* A bypass value ``>= 2**27`` makes the encoder loop forever (``raw >> 32`` is undefined
  behaviour, on x86 it is ``raw``).
* The decoder never checks the end of its input: it reads past the buffer, one word per
  symbol and arbitrarily many in bypass mode, and garbage input decodes to garbage values
  (up to ~1e9) without any error.

How this module guards against all of that:

* the escape mechanism is our own, coded with small escape-free tables; compressai's bypass
  is never entered: each CDF is passed with one extra unreachable slot, so the decoder's
  ``value == max_value`` test can never hold. Every decoded symbol therefore reads at most
  one 32-bit word, and the number of symbols is known in advance, so the payload is padded
  with enough zero bytes that no read leaves the buffer;
* 8 near-free padding symbols (probability 65535/65536) end every stream, so the encoder's
  buffer is always large enough; symbol values are checked against ``MAX_ABS_SYMBOL``;
* indexes, table shapes and symbol ranges are validated before any C++ call;
* decoding **verifies** (by default) that re-encoding the decoded symbols gives back exactly
  the payload (the encoding is canonical), so a truncated, extended or corrupted payload
  raises :class:`EntropyCodingError` instead of silently returning garbage -- nearly always:
  an efficient code has little redundancy, and a flip inside the near-raw bits of an escaped
  value can turn a payload into the exact encoding of other symbols (seen in tests). The
  bitstream's per-unit CRC is the real integrity check; this one keeps the entropy layer
  safe and mostly self-checking when it is called on its own. Decoded values are
  range-checked too, and the coders above check their own invariants (flags, ids, ...).

Trailing zero bytes of the rANS output are dropped (the decoder pads with zeros anyway), so a
payload never ends in ``0x00`` and a near-deterministic stream costs 4 bytes, not 8.
"""

from __future__ import annotations

import hashlib
import importlib.machinery
import importlib.util
import math
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cache, cached_property
from pathlib import Path

import numpy as np

__all__ = [
    "MAX_ABS_SYMBOL",
    "MAX_TABLE_SYMBOLS",
    "PRECISION",
    "CdfTable",
    "EntropyCodingError",
    "RansReader",
    "RansWriter",
    "cdf_from_counts",
    "cdfs_from_counts",
    "cdf_from_pmf",
    "cdf_from_weights",
    "decode",
    "encode",
    "laplace_table",
    "uniform_table",
]

#: Probability precision of the CDFs (compressai's rANS works with 16 bits).
PRECISION = 16
_TOTAL = 1 << PRECISION
#: Largest magnitude a coded symbol may have.
MAX_ABS_SYMBOL = 1 << 24
#: Largest number of in-range symbols in one CDF.
MAX_TABLE_SYMBOLS = 1 << 12

_N_PAD = 8  # near-free symbols that end every stream (see the module docstring)
_MAX_NBITS = 27  # escaped raw values are < 2**26, so their bit length is 0..26
_CHUNK = 8  # escaped raw bits are sent in chunks of at most 8 bits
_MAX_EXTRA_PER_ESCAPE = 1 + math.ceil((_MAX_NBITS - 2) / _CHUNK)  # nbits + chunks


class EntropyCodingError(ValueError):
    """Invalid input to an entropy coder, or a payload that does not decode."""


#: The text of compressai's ``assert_cdfs`` check that a build with assertions carries (one
#: without -DNDEBUG: PyPI's wheels and pip's builds have none). Such a build aborts the process
#: on :meth:`CdfTable._native`'s unreachable slot (``2**16 + 1``), so it is refused instead.
_ASSERTING_BUILD = b"cdfs[i][cdfs_sizes[i] - 1] == (1 << precision)"


def _check_release_build(path: str | Path | None) -> None:
    """Raise :class:`RuntimeError` if the extension at ``path`` was built with assertions."""
    try:
        data = Path(path).read_bytes() if path is not None else b""
    except OSError:
        return
    if _ASSERTING_BUILD in data:
        raise RuntimeError(
            f"{path}: compressai's rANS extension was built with C++ assertions (without "
            "-DNDEBUG); its assert_cdfs aborts on semcodec's CDF tables. Rebuild it with "
            "-DNDEBUG, as pip does (see tools/arm64/check.sh)"
        )


@cache
def _ans():
    """compressai's rANS extension module, checked to be built without assertions.

    Loaded straight from its file when possible: ``import compressai`` also imports torch and
    its dataset modules (about 6 s on a loaded 2-core machine), none of which the coder needs.
    Falls back to the normal import.
    """
    loaded = sys.modules.get("compressai.ans")
    if loaded is not None:
        _check_release_build(getattr(loaded, "__file__", None))
        return loaded
    spec = importlib.util.find_spec("compressai")
    for folder in (spec.submodule_search_locations or []) if spec else []:
        for suffix in importlib.machinery.EXTENSION_SUFFIXES:
            path = Path(folder) / f"ans{suffix}"
            if path.is_file():
                ext = importlib.util.spec_from_file_location("compressai.ans", path)
                if ext is not None and ext.loader is not None:
                    _check_release_build(path)
                    module = importlib.util.module_from_spec(ext)
                    ext.loader.exec_module(module)
                    return module
    from compressai import ans

    _check_release_build(getattr(ans, "__file__", None))
    return ans


# --------------------------------------------------------------------------- tables


def _quantize_weights(weights: Sequence[int]) -> list[int]:
    """Integer frequencies summing to ``2**16``, each >= 1, proportional to ``weights``.

    Exact integer largest-remainder rounding of the mass left after giving every symbol 1;
    ties go to the lower index. All-zero weights give a uniform table.
    """
    w = [int(x) for x in weights]
    n = len(w)
    if n < 1 or n > _TOTAL // 2:
        raise EntropyCodingError(f"a CDF needs 1..{_TOTAL // 2} symbols, got {n}")
    if any(x < 0 for x in w):
        raise EntropyCodingError("weights must be non-negative")
    total = sum(w)
    # Keep ~96 bits of precision: huge exact weights (Laplace) would only slow things down.
    shift = max(0, total.bit_length() - 96)
    if shift:
        w = [x >> shift for x in w]
        total = sum(w)
    spare = _TOTAL - n
    if total == 0:
        return [1 + spare // n + (1 if i < spare % n else 0) for i in range(n)]
    base = [x * spare // total for x in w]
    left = spare - sum(base)
    if left:
        rem = [x * spare - b * total for x, b in zip(w, base, strict=True)]
        for i in sorted(range(n), key=lambda i: (-rem[i], i))[:left]:
            base[i] += 1
    return [1 + b for b in base]


def cdf_from_weights(weights: Sequence[int], escape: int = 0) -> list[int]:
    """CDF (``len(weights) + 2`` entries, escape last) from non-negative integer weights."""
    freqs = _quantize_weights([*weights, int(escape)])
    cdf = [0]
    for f in freqs:
        cdf.append(cdf[-1] + f)
    return cdf


def cdf_from_counts(counts: np.ndarray | Sequence[int]) -> list[int]:
    """CDF from integer symbol counts; every count (and the escape's 0) gets +1.

    Args:
        counts: ``(L,)`` non-negative integers, the counts of symbols ``0..L-1``.

    Returns:
        ``L + 2`` integers, ``0 .. 2**16``, the last interval being the escape.
    """
    arr = np.asarray(counts)
    if arr.ndim != 1 or arr.size < 1 or not np.issubdtype(arr.dtype, np.integer):
        raise EntropyCodingError("counts must be a non-empty 1-D integer array")
    if (arr < 0).any():
        raise EntropyCodingError("counts must be non-negative")
    return cdf_from_weights([int(c) + 1 for c in arr.tolist()], escape=1)


def cdfs_from_counts(counts: np.ndarray) -> list[list[int]]:
    """``[cdf_from_counts(row) for row in counts]``, vectorised (same integers exactly).

    Args:
        counts: ``(n, L)`` non-negative integers, each below ``2**40``.
    """
    arr = np.asarray(counts)
    if arr.ndim != 2 or arr.shape[0] < 1 or arr.shape[1] < 1:
        raise EntropyCodingError("counts must be a non-empty 2-D integer array")
    if not np.issubdtype(arr.dtype, np.integer) or arr.min() < 0 or arr.max() >= 1 << 40:
        raise EntropyCodingError("counts must be integers in 0..2**40 - 1")
    n, length = arr.shape
    w = np.ones((n, length + 1), np.int64)
    w[:, :length] += arr
    m = length + 1
    if m > _TOTAL // 2:
        raise EntropyCodingError(f"a CDF needs 1..{_TOTAL // 2} symbols, got {m}")
    spare = _TOTAL - m
    total = w.sum(axis=1, keepdims=True)
    base = w * spare // total
    left = spare - base.sum(axis=1)
    rem = w * spare - base * total
    index = np.broadcast_to(np.arange(m), w.shape)
    order = np.lexsort((index, -rem), axis=-1)  # by remainder, descending; ties: lower index
    rank = np.empty_like(order)
    np.put_along_axis(rank, order, index, axis=1)
    freqs = 1 + base + (rank < left[:, None])
    cdfs = np.zeros((n, m + 1), np.int64)
    np.cumsum(freqs, axis=1, out=cdfs[:, 1:])
    return cdfs.tolist()


def cdf_from_pmf(pmf: np.ndarray | Sequence[float], escape: float = 0.0) -> list[int]:
    """CDF from a float64 pmf (need not be normalised), deterministically.

    The pmf is turned into integer weights exactly (``floor(p * 2**40)``, a power-of-two
    scaling, so no rounding differs between machines) and quantised in integer arithmetic.

    Args:
        pmf: ``(L,)`` non-negative finite float64, the masses of symbols ``0..L-1``.
        escape: the mass of the escape symbol, in the same units (every symbol, the escape
            included, gets at least ``1 / 2**16``).

    Returns:
        ``L + 2`` integers, ``0 .. 2**16``, the last interval being the escape.
    """
    arr = np.asarray(pmf, dtype=np.float64)
    if arr.ndim != 1 or arr.size < 1:
        raise EntropyCodingError("pmf must be a non-empty 1-D array")
    full = np.append(arr, np.float64(escape))
    if not np.isfinite(full).all() or (full < 0).any():
        raise EntropyCodingError("pmf and escape must be finite and non-negative")
    weights = [int(v) for v in np.floor(np.ldexp(full, 40)).tolist()]
    return cdf_from_weights(weights[:-1], escape=weights[-1])


@dataclass(frozen=True)
class CdfTable:
    """A bank of CDFs in compressai's convention (see the module docstring).

    Attributes:
        cdfs: one CDF per table, ``lengths[i]`` integers from 0 to ``2**16``, escape last.
        offsets: the symbol value of slot 0 of each table.
        lengths: ``len(cdfs[i])`` = number of in-range symbols + 2.
    """

    cdfs: tuple[tuple[int, ...], ...]
    offsets: tuple[int, ...]
    lengths: tuple[int, ...]

    def __post_init__(self) -> None:
        cdfs = tuple(tuple(int(v) for v in c) for c in self.cdfs)
        offsets = tuple(int(v) for v in self.offsets)
        lengths = tuple(int(v) for v in self.lengths)
        object.__setattr__(self, "cdfs", cdfs)
        object.__setattr__(self, "offsets", offsets)
        object.__setattr__(self, "lengths", lengths)
        if not cdfs or not len(cdfs) == len(offsets) == len(lengths):
            raise EntropyCodingError("a CdfTable needs >= 1 CDF and one offset and length each")
        for i, (cdf, off, n) in enumerate(zip(cdfs, offsets, lengths, strict=True)):
            if n != len(cdf) or not 3 <= n <= MAX_TABLE_SYMBOLS + 2:
                raise EntropyCodingError(f"CDF {i}: length {n} for {len(cdf)} entries")
            if cdf[0] != 0 or cdf[-1] != _TOTAL:
                raise EntropyCodingError(f"CDF {i} must run from 0 to {_TOTAL}")
            if any(b <= a for a, b in zip(cdf[:-1], cdf[1:], strict=True)):
                raise EntropyCodingError(f"CDF {i} is not strictly increasing")
            if abs(off) > MAX_ABS_SYMBOL or abs(off + n - 2) > MAX_ABS_SYMBOL:
                raise EntropyCodingError(f"CDF {i}: offset {off} out of range")

    @classmethod
    def from_cdfs(cls, cdfs: Sequence[Sequence[int]], offsets: Sequence[int]) -> CdfTable:
        """Build a bank, the lengths taken from the CDFs."""
        return cls(tuple(tuple(c) for c in cdfs), tuple(offsets), tuple(len(c) for c in cdfs))

    def __len__(self) -> int:
        return len(self.cdfs)

    def concat(self, *others: CdfTable) -> CdfTable:
        """One bank holding this one's CDFs, then each of ``others``' (indexes shift)."""
        tables = (self, *others)
        return CdfTable(
            tuple(c for t in tables for c in t.cdfs),
            tuple(o for t in tables for o in t.offsets),
            tuple(n for t in tables for n in t.lengths),
        )

    def sha256(self) -> str:
        """Hex digest of the bank's integers (canonical text form), to name a table."""
        text = ";".join(
            f"{o}:{','.join(map(str, c))}" for c, o in zip(self.cdfs, self.offsets, strict=True)
        )
        return hashlib.sha256(text.encode("ascii")).hexdigest()

    def cost_bits(self, symbols: np.ndarray, indexes: np.ndarray) -> float:
        """Ideal code length in bits of ``symbols`` (escapes count their slot only)."""
        syms = _as_int_array(symbols, "symbols")
        idx = _check_indexes(indexes, syms.size, len(self))
        rel = syms - self._offset_arr[idx]
        nsym = self._nsym_arr[idx]
        rel = np.where((rel < 0) | (rel >= nsym), nsym, rel)
        freq = self._freq_padded[idx, rel]
        return float(np.sum(PRECISION - np.log2(freq)))

    # -- cached views used by the coder (not fields: equality is on the integers only)

    @cached_property
    def _offset_arr(self) -> np.ndarray:
        return np.asarray(self.offsets, dtype=np.int64)

    @cached_property
    def _nsym_arr(self) -> np.ndarray:
        return np.asarray(self.lengths, dtype=np.int64) - 2

    @cached_property
    def _freq_padded(self) -> np.ndarray:
        width = max(self.lengths) - 1
        out = np.ones((len(self), width), dtype=np.float64)
        for i, c in enumerate(self.cdfs):
            out[i, : len(c) - 1] = np.diff(c)
        return out

    @cached_property
    def _native(self) -> tuple[list[list[int]], list[int], list[int]]:
        # One unreachable slot appended: compressai's bypass test (slot == length - 2) can then
        # never hold when decoding, and the encoder only ever gets slots 0..L (escape = L).
        cdfs = [[*c, _TOTAL + 1] for c in self.cdfs]
        return cdfs, [n + 1 for n in self.lengths], [0] * len(self.cdfs)


def uniform_table(n: int, offset: int = 0) -> CdfTable:
    """One CDF, uniform over ``n`` symbols ``offset .. offset + n - 1`` (escape: minimum mass)."""
    if not 1 <= n <= MAX_TABLE_SYMBOLS:
        raise EntropyCodingError(f"uniform_table: n must be 1..{MAX_TABLE_SYMBOLS}, got {n}")
    return CdfTable.from_cdfs([cdf_from_weights([1] * n)], [offset])


def _laplace_weights(scale: float, max_abs: int) -> tuple[list[int], int]:
    """Exact integer masses of a discretised Laplacian (and of both tails together).

    With ``s = exp(-1 / (2 b))`` rounded to a 32-bit fixed-point number ``S / 2**32`` (the
    only float step), ``P(0) = 1 - s``, ``P(k) = (1 - s**2) s**(2|k| - 1) / 2`` and the mass
    beyond ``±max_abs`` is ``s**(2 max_abs + 1)``; all are scaled by ``2 * 2**(32 (2M + 1))``
    into exact integers.
    """
    s_fixed = int(round(math.exp(-0.5 / scale) * 2.0**32))
    s_fixed = min(max(s_fixed, 1), (1 << 32) - 1)
    m = max_abs
    one = 1 << 32
    centre = 2 * (one - s_fixed) << (32 * 2 * m)
    side = [
        (one * one - s_fixed * s_fixed) * s_fixed ** (2 * k - 1) << (32 * (2 * m - 2 * k))
        for k in range(1, m + 1)
    ]
    tail = 2 * s_fixed ** (2 * m + 1)
    return [*side[::-1], centre, *side], tail


def laplace_table(scales: Sequence[float], max_abs: int) -> CdfTable:
    """Discretised zero-mean Laplacians, one CDF per scale, support ``-max_abs..max_abs``.

    Args:
        scales: Laplace scales ``b > 0`` (mean absolute deviation of the continuous law), in
            quantisation steps.
        max_abs: half-width of the coded support; larger values are escaped (the escape slot
            gets the exact tail mass).
    """
    if not 0 <= max_abs <= (MAX_TABLE_SYMBOLS - 1) // 2:
        raise EntropyCodingError(f"max_abs must be 0..{(MAX_TABLE_SYMBOLS - 1) // 2}")
    cdfs = []
    for b in scales:
        b = float(b)
        if not (math.isfinite(b) and b > 0):
            raise EntropyCodingError(f"Laplace scales must be finite and > 0, got {b}")
        weights, tail = _laplace_weights(b, max_abs)
        cdfs.append(cdf_from_weights(weights, escape=tail))
    if not cdfs:
        raise EntropyCodingError("laplace_table needs at least one scale")
    return CdfTable.from_cdfs(cdfs, [-max_abs] * len(cdfs))


# Escape machinery: bit length of the escaped value, then its bits in chunks of <= 8.
_NBITS_TABLE = uniform_table(_MAX_NBITS)
_CHUNK_TABLES = CdfTable.from_cdfs(
    [cdf_from_weights([1] * (1 << k)) for k in range(1, _CHUNK + 1)], [0] * _CHUNK
)
_PAD_TABLE = CdfTable.from_cdfs([[0, _TOTAL - 1, _TOTAL]], [0])


# --------------------------------------------------------------------------- coding


def _as_int_array(values: np.ndarray | Sequence[int], what: str) -> np.ndarray:
    arr = np.asarray(values)
    if arr.size == 0:
        return np.zeros(0, dtype=np.int64)
    if not np.issubdtype(arr.dtype, np.integer):
        raise EntropyCodingError(f"{what} must be integers, got dtype {arr.dtype}")
    return arr.reshape(-1).astype(np.int64)


def _check_indexes(indexes: np.ndarray | Sequence[int], n: int, n_tables: int) -> np.ndarray:
    idx = _as_int_array(indexes, "indexes")
    if idx.size != n:
        raise EntropyCodingError(f"{n} symbols but {idx.size} indexes")
    if idx.size and (idx.min() < 0 or idx.max() >= n_tables):
        raise EntropyCodingError(f"indexes must be in 0..{n_tables - 1}")
    return idx


def _escape_extras(raw: np.ndarray) -> tuple[list[int], list[int], list[int]]:
    """Escape symbols of raw values: bit lengths, then chunks with their chunk-table indexes."""
    nbits = [int(r).bit_length() for r in raw.tolist()]
    chunks: list[int] = []
    chunk_idx: list[int] = []
    for r, nb in zip(raw.tolist(), nbits, strict=True):
        low = r - (1 << (nb - 1)) if nb else 0  # the bits below the leading 1
        left = max(nb - 1, 0)
        while left > 0:
            k = min(_CHUNK, left)
            chunks.append(low & ((1 << k) - 1))
            chunk_idx.append(k - 1)
            low >>= k
            left -= k
    return nbits, chunks, chunk_idx


def _chunk_plan(nbits: Sequence[int]) -> list[int]:
    plan = []
    for nb in nbits:
        left = max(nb - 1, 0)
        while left > 0:
            k = min(_CHUNK, left)
            plan.append(k - 1)
            left -= k
    return plan


class RansWriter:
    """Accumulates groups of symbols into one rANS stream (decoded in the same order).

    Use several groups when the decoder needs the values of one group to form the indexes of
    the next (e.g. context modelling row by row); a :class:`RansReader` reads them back with
    the same sequence of ``(indexes, table)``.
    """

    def __init__(self) -> None:
        self._enc = _ans().BufferedRansEncoder()
        self._count = 0
        self._done = False

    @property
    def num_symbols(self) -> int:
        """Symbols written so far (escape extras not counted)."""
        return self._count

    def write(
        self,
        symbols: np.ndarray | Sequence[int],
        indexes: np.ndarray | Sequence[int],
        table: CdfTable,
    ) -> None:
        """Append ``symbols[i]`` coded with CDF ``indexes[i]`` of ``table``."""
        if self._done:
            raise EntropyCodingError("RansWriter: write after getvalue")
        syms = _as_int_array(symbols, "symbols")
        idx = _check_indexes(indexes, syms.size, len(table))
        if syms.size == 0:
            return
        if np.abs(syms).max() > MAX_ABS_SYMBOL:
            raise EntropyCodingError(f"symbols must satisfy |s| <= {MAX_ABS_SYMBOL}")
        _write_group(self._enc, syms, idx, table)
        self._count += syms.size

    def getvalue(self) -> bytes:
        """Flush and return the payload (never empty, never ending in a zero byte)."""
        if self._done:
            raise EntropyCodingError("RansWriter: getvalue called twice")
        self._done = True
        cdfs, lengths, offsets = _PAD_TABLE._native
        self._enc.encode_with_indexes([0] * _N_PAD, [0] * _N_PAD, cdfs, lengths, offsets)
        return bytes(self._enc.flush()).rstrip(b"\x00")


def _write_group(enc, syms: np.ndarray, idx: np.ndarray, table: CdfTable) -> None:
    rel = syms - table._offset_arr[idx]
    nsym = table._nsym_arr[idx]
    below, above = rel < 0, rel >= nsym
    esc = below | above
    slots = np.where(esc, nsym, rel)
    cdfs, lengths, offsets = table._native
    enc.encode_with_indexes(slots.tolist(), idx.tolist(), cdfs, lengths, offsets)
    if esc.any():
        # raw = 2 d + sign, d >= 0 the distance past the support's end on that side.
        raw = np.where(below[esc], 2 * (-rel[esc] - 1) + 1, 2 * (rel[esc] - nsym[esc]))
        nbits, chunks, chunk_idx = _escape_extras(raw)
        c2, l2, o2 = _NBITS_TABLE._native
        enc.encode_with_indexes(nbits, [0] * len(nbits), c2, l2, o2)
        if chunks:
            c3, l3, o3 = _CHUNK_TABLES._native
            enc.encode_with_indexes(chunks, chunk_idx, c3, l3, o3)


class RansReader:
    """Reads groups back from a :class:`RansWriter` payload.

    Args:
        data: the payload.
        max_symbols: an upper bound on the symbols the caller will read (escape extras not
            counted); reading more raises :class:`EntropyCodingError`.
        max_escapes: an upper bound on the escaped symbols among them (default:
            ``max_symbols``); decoding one more raises :class:`EntropyCodingError` before its
            extra symbols are read. Callers whose symbols can only escape in a corrupt
            payload pass a small bound.

    The payload is padded with zero bytes so that the C++ decoder never reads past its
    buffer: 4 bytes for each symbol it may decode, i.e. ``4 * (max_symbols + 4 *
    max_escapes)`` bytes plus a few words -- memory proportional to the symbols, and only
    ``4 * max_symbols`` when escapes are bounded.
    """

    def __init__(self, data: bytes, max_symbols: int, max_escapes: int | None = None) -> None:
        if not isinstance(data, bytes | bytearray | memoryview):
            raise EntropyCodingError(f"payload must be bytes, got {type(data).__name__}")
        data = bytes(data)
        if not data:
            raise EntropyCodingError("empty rANS payload")
        if max_symbols < 0 or max_symbols > 1 << 26:
            raise EntropyCodingError(f"max_symbols out of range: {max_symbols}")
        escapes = max_symbols if max_escapes is None else min(max_escapes, max_symbols)
        if escapes < 0:
            raise EntropyCodingError(f"max_escapes out of range: {max_escapes}")
        self._data = data
        self._max = int(max_symbols)
        self._max_escapes = int(escapes)
        self._count = 0
        self._escapes = 0
        # Each decoded symbol reads at most one 32-bit word (bypass is unreachable), init reads
        # two; each escape adds at most _MAX_EXTRA_PER_ESCAPE symbols.
        words = 2 + self._max + self._max_escapes * _MAX_EXTRA_PER_ESCAPE + _N_PAD + 4
        self._dec = _ans().RansDecoder()
        self._dec.set_stream(data + bytes(4 * words + 8))
        self._groups: list[tuple[np.ndarray, np.ndarray, CdfTable]] = []

    def read(self, indexes: np.ndarray | Sequence[int], table: CdfTable) -> np.ndarray:
        """Decode one group: ``len(indexes)`` symbols, as ``(n,)`` int32."""
        idx = _as_int_array(indexes, "indexes")
        idx = _check_indexes(idx, idx.size, len(table))
        if self._count + idx.size > self._max:
            raise EntropyCodingError(
                f"reading {self._count + idx.size} symbols, more than the bound {self._max}"
            )
        self._count += idx.size
        if idx.size == 0:
            return np.zeros(0, dtype=np.int32)
        cdfs, lengths, offsets = table._native
        slots = np.asarray(
            self._dec.decode_stream(idx.tolist(), cdfs, lengths, offsets), dtype=np.int64
        )
        nsym = table._nsym_arr[idx]
        if slots.min() < 0 or (slots > nsym).any():  # cannot happen; cheap to make sure
            raise EntropyCodingError("rANS decoder returned an impossible slot")
        values = slots + table._offset_arr[idx]
        esc = slots == nsym
        if esc.any():
            c2, l2, o2 = _NBITS_TABLE._native
            n_esc = int(esc.sum())
            self._escapes += n_esc
            if self._escapes > self._max_escapes:
                raise EntropyCodingError(
                    f"corrupt rANS payload ({self._escapes} escaped symbols, more than the "
                    f"bound {self._max_escapes})"
                )
            nbits = self._dec.decode_stream([0] * n_esc, c2, l2, o2)
            if max(nbits) >= _MAX_NBITS or min(nbits) < 0:
                raise EntropyCodingError("corrupt rANS payload (bad escape length)")
            plan = _chunk_plan(nbits)
            chunks: list[int] = []
            if plan:
                c3, l3, o3 = _CHUNK_TABLES._native
                chunks = self._dec.decode_stream(plan, c3, l3, o3)
                if any(c >= (2 << k) or c < 0 for c, k in zip(chunks, plan, strict=True)):
                    raise EntropyCodingError("corrupt rANS payload (bad escape chunk)")
            raws = []
            pos = 0
            for nb in nbits:
                if nb == 0:
                    raws.append(0)
                    continue
                low, shift, left = 0, 0, nb - 1
                while left > 0:
                    k = min(_CHUNK, left)
                    low |= chunks[pos] << shift
                    pos += 1
                    shift += k
                    left -= k
                raws.append((1 << (nb - 1)) | low)
            raw = np.asarray(raws, dtype=np.int64)
            lo = table._offset_arr[idx[esc]]
            hi = lo + nsym[esc]
            values[esc] = np.where(raw & 1, lo - 1 - (raw >> 1), hi + (raw >> 1))
        if np.abs(values).max() > MAX_ABS_SYMBOL:
            raise EntropyCodingError("corrupt rANS payload (symbol out of range)")
        self._groups.append((values, idx, table))
        return values.astype(np.int32)

    def finish(self, verify: bool = True) -> None:
        """End reading; with ``verify``, check the payload is exactly what was decoded.

        Raises:
            EntropyCodingError: the payload is truncated, extended or corrupt.
        """
        if not verify:
            return
        writer = RansWriter()
        for values, idx, table in self._groups:
            writer.write(values, idx, table)
        if writer.getvalue() != self._data:
            raise EntropyCodingError("corrupt or truncated rANS payload (re-encoding differs)")


def encode(
    symbols: np.ndarray | Sequence[int],
    indexes: np.ndarray | Sequence[int],
    table: CdfTable,
) -> bytes:
    """Code ``symbols[i]`` with CDF ``indexes[i]`` of ``table`` into one rANS payload.

    Args:
        symbols: ``(n,)`` integers, ``|s| <= MAX_ABS_SYMBOL`` (values outside a CDF's support
            are escaped, so any of them round-trips).
        indexes: ``(n,)`` integers in ``0..len(table) - 1``.
        table: the CDF bank.
    """
    writer = RansWriter()
    writer.write(symbols, indexes, table)
    return writer.getvalue()


def decode(
    data: bytes,
    indexes: np.ndarray | Sequence[int],
    table: CdfTable,
    *,
    verify: bool = True,
) -> np.ndarray:
    """Inverse of :func:`encode`: ``(n,)`` int32 symbols for ``n = len(indexes)``.

    Raises:
        EntropyCodingError: bad arguments, or (with ``verify``) a payload that is not exactly
            the encoding of what it decodes to.
    """
    idx = _as_int_array(indexes, "indexes")
    reader = RansReader(data, idx.size)
    out = reader.read(idx, table)
    reader.finish(verify)
    return out
