"""Entropy coding of quantized split-detector features (the task-feature codec, issue 14).

A frame's features are an integer tensor ``(C, H, W)`` (the bottleneck's quantized output).
Two models code it with compressai's rANS through :mod:`codec.entropy.rans`, both with
integer CDF tables fitted from counts, so encoder and decoder agree bit for bit on every
machine and in every process (nothing is computed in floating point at coding time):

* **per-frame** (factorized): each value with its channel's table;
* **temporal**: the change from the previous frame's decoded values, with the table of a
  context read off that previous frame (how large the value was, by :data:`CONTEXT_EDGES`,
  per channel group); no side information is sent. An unchanged region costs the
  probability of a zero change under its context, close to nothing once the tables have
  seen static scenes.

:class:`FeatureTables` holds both banks and names them by sha256 (a stream records the name
of the tables it was coded with).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from semcodec.codec.entropy.rans import CdfTable, EntropyCodingError, cdfs_from_counts
from semcodec.codec.entropy.rans import decode as rans_decode
from semcodec.codec.entropy.rans import encode as rans_encode

#: Context buckets of the temporal model: |previous value| < 1, < 2, < 4, < 8, < 16, else.
CONTEXT_EDGES = (1, 2, 4, 8, 16)
#: Symbols each table covers directly: -SUPPORT .. SUPPORT (others are escaped).
SUPPORT = 31
#: The most values one frame may hold (the decoder's bound, whatever a caller claims).
MAX_VALUES = 1 << 22


class FeatureCodingError(EntropyCodingError):
    """Features that cannot be coded or a payload that does not decode to them."""


@dataclass(frozen=True)
class FeatureTables:
    """The CDF banks of both models for features of ``channels`` channels.

    Attributes:
        channels: C of the ``(C, H, W)`` tensors these tables code.
        factorized: one table per channel.
        temporal: one table per (channel group, context bucket); ``groups`` channel groups.
        groups: channels are grouped ``channel * groups // channels``.
    """

    channels: int
    factorized: CdfTable
    temporal: CdfTable
    groups: int

    def sha256(self) -> str:
        """Names the tables (both banks and the grouping)."""
        import hashlib

        text = f"{self.channels}:{self.groups}:{self.factorized.sha256()}:{self.temporal.sha256()}"
        return hashlib.sha256(text.encode("ascii")).hexdigest()


def _check(q: np.ndarray, channels: int, what: str = "features") -> np.ndarray:
    q = np.asarray(q)
    if q.ndim != 3 or q.shape[0] != channels or not np.issubdtype(q.dtype, np.integer):
        raise FeatureCodingError(f"{what} must be integer (C={channels}, H, W), got "
                                 f"{q.dtype} {q.shape}")  # fmt: skip
    if q.size > MAX_VALUES:
        raise FeatureCodingError(f"{what}: {q.size} values, more than {MAX_VALUES}")
    return q.astype(np.int64)


def _channel_index(shape: tuple[int, int, int]) -> np.ndarray:
    c, h, w = shape
    return np.broadcast_to(np.arange(c)[:, None, None], (c, h, w)).ravel()


def _context_index(previous: np.ndarray, groups: int) -> np.ndarray:
    c = previous.shape[0]
    bucket = np.searchsorted(np.array(CONTEXT_EDGES), np.abs(previous), side="right")
    group = (np.arange(c) * groups // c)[:, None, None]
    return (group * (len(CONTEXT_EDGES) + 1) + bucket).ravel()


def _histogram(values: np.ndarray, index: np.ndarray, tables: int) -> np.ndarray:
    counts = np.zeros((tables, 2 * SUPPORT + 1), np.int64)
    inside = np.abs(values) <= SUPPORT
    np.add.at(counts, (index[inside], values[inside] + SUPPORT), 1)
    return counts


def count_symbols(sequences: list[list[np.ndarray]],
                  groups: int = 4) -> tuple[np.ndarray, np.ndarray, int]:  # fmt: skip
    """Symbol counts of ``sequences`` (lists of consecutive ``(C, H, W)`` integer frames):
    ``(factorized (C, 2*SUPPORT+1), temporal (groups*6, 2*SUPPORT+1), groups)`` int64; every
    frame counts in the per-frame model, every frame after the first of its sequence also in
    the temporal one. ``groups`` is clipped to 1..C."""
    frames = [f for seq in sequences for f in seq]
    if not frames:
        raise FeatureCodingError("fitting tables needs at least one frame")
    channels = int(np.asarray(frames[0]).shape[0])
    groups = max(1, min(groups, channels))
    n_temporal = groups * (len(CONTEXT_EDGES) + 1)
    factorized = np.zeros((channels, 2 * SUPPORT + 1), np.int64)
    temporal = np.zeros((n_temporal, 2 * SUPPORT + 1), np.int64)
    for seq in sequences:
        previous = None
        for frame in seq:
            q = _check(frame, channels)
            factorized += _histogram(q.ravel(), _channel_index(q.shape), channels)
            if previous is not None:
                temporal += _histogram((q - previous).ravel(),
                                       _context_index(previous, groups), n_temporal)  # fmt: skip
            previous = q
    return factorized, temporal, groups


def tables_from_counts(factorized: np.ndarray, temporal: np.ndarray, groups: int) -> FeatureTables:
    """The tables of :func:`count_symbols`' counts (integer arithmetic only: the same tables
    on every machine; stored models keep the counts and rebuild the tables on loading)."""
    factorized, temporal = np.asarray(factorized, np.int64), np.asarray(temporal, np.int64)
    channels, width = factorized.shape
    if (width != 2 * SUPPORT + 1 or temporal.shape[1:] != (width,) or not 1 <= groups <= channels
            or temporal.shape[0] != groups * (len(CONTEXT_EDGES) + 1)):
        raise FeatureCodingError(f"symbol counts of shapes {factorized.shape} and "
                                 f"{temporal.shape} do not fit {groups} groups")  # fmt: skip
    offsets = lambda n: [-SUPPORT] * n  # noqa: E731
    return FeatureTables(
        channels=channels,
        factorized=CdfTable.from_cdfs(cdfs_from_counts(factorized), offsets(channels)),
        temporal=CdfTable.from_cdfs(cdfs_from_counts(temporal), offsets(len(temporal))),
        groups=groups,
    )


def fit_tables(sequences: list[list[np.ndarray]], groups: int = 4) -> FeatureTables:
    """Tables fitted (by counting, :func:`count_symbols`) to ``sequences``."""
    return tables_from_counts(*count_symbols(sequences, groups))


def encode_features(q: np.ndarray, tables: FeatureTables,
                    previous: np.ndarray | None = None) -> bytes:  # fmt: skip
    """One frame's ``(C, H, W)`` integer features -> rANS payload: per-frame model without
    ``previous`` (the previous frame's decoded features), else the temporal model."""
    q = _check(q, tables.channels)
    if previous is None:
        return rans_encode(q.ravel(), _channel_index(q.shape), tables.factorized)
    previous = _check(previous, tables.channels, "previous features")
    if previous.shape != q.shape:
        raise FeatureCodingError(f"previous features {previous.shape} differ from {q.shape}")
    index = _context_index(previous, tables.groups)
    return rans_encode((q - previous).ravel(), index, tables.temporal)


def decode_features(data: bytes, shape: tuple[int, int, int], tables: FeatureTables,
                    previous: np.ndarray | None = None) -> np.ndarray:  # fmt: skip
    """Inverse of :func:`encode_features`: ``(C, H, W)`` int32 features.

    Raises:
        FeatureCodingError: a shape the tables cannot code or above :data:`MAX_VALUES`, or a
            payload that is not the encoding of what it decodes to.
    """
    c, h, w = (int(v) for v in shape)
    if c != tables.channels or h < 1 or w < 1 or c * h * w > MAX_VALUES:
        raise FeatureCodingError(f"cannot decode features of shape {tuple(shape)} with tables "
                                 f"for {tables.channels} channels (at most {MAX_VALUES} values)")
    try:
        if previous is None:
            values = rans_decode(data, _channel_index((c, h, w)), tables.factorized)
            return values.reshape(c, h, w).astype(np.int32)
        previous = _check(previous, c, "previous features")
        if previous.shape != (c, h, w):
            raise FeatureCodingError(f"previous features {previous.shape} differ from {shape}")
        change = rans_decode(data, _context_index(previous, tables.groups), tables.temporal)
    except FeatureCodingError:
        raise
    except EntropyCodingError as exc:
        raise FeatureCodingError(f"feature payload: {exc}") from None
    return (previous + change.reshape(c, h, w)).astype(np.int32)
