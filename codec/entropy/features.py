"""Entropy coding of quantized split-detector features (the task-feature codec, issue 14).

A frame's features are an integer tensor ``(C, H, W)`` (the bottleneck's quantized output).
Two models code it with compressai's rANS through :mod:`codec.entropy.rans`, both with
integer CDF tables fitted from counts, so encoder and decoder agree bit for bit on every
machine and in every process (nothing is computed in floating point at coding time):

* **per-frame** (factorized): each value with its channel's table;
* **temporal**: an *update map* (one binary flag per position ``(h, w)``: does any channel
  change?), each flag coded with the table of its context (:func:`map_contexts`: how many
  positions around it were updated in the previous unit), then, at the updated positions
  only, the change from the previous frame's decoded values, each with the table of a
  context read off that previous frame (how large the value was, by :data:`CONTEXT_EDGES`,
  per channel group). No side information is sent; an unchanged region costs its map flags
  only. An encoder may skip a region whose change is too small to matter
  (:func:`skip_small_changes`): the decoder keeps its previous values.

:class:`FeatureTables` holds the banks and names them by sha256 (a stream records the name
of the tables it was coded with).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from semcodec.codec.entropy.rans import (
    CdfTable,
    EntropyCodingError,
    RansReader,
    RansWriter,
    cdfs_from_counts,
)
from semcodec.codec.entropy.rans import decode as rans_decode
from semcodec.codec.entropy.rans import encode as rans_encode

#: Context buckets of the temporal model: |previous value| < 1, < 2, < 4, < 8, < 16, else.
CONTEXT_EDGES = (1, 2, 4, 8, 16)
#: Contexts of the update map's flags: updated neighbours (3x3, the position included) in the
#: previous unit's map, 0, 1, 2, 3 or more.
MAP_CONTEXTS = 4
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
        updates: the update map's flag tables, one per :data:`MAP_CONTEXTS` context.
    """

    channels: int
    factorized: CdfTable
    temporal: CdfTable
    groups: int
    updates: CdfTable

    def sha256(self) -> str:
        """Names the tables (every bank and the grouping)."""
        import hashlib

        text = (f"{self.channels}:{self.groups}:{self.factorized.sha256()}:"
                f"{self.temporal.sha256()}:{self.updates.sha256()}")  # fmt: skip
        return hashlib.sha256(text.encode("ascii")).hexdigest()


@dataclass(frozen=True)
class SymbolCounts:
    """The integer counts tables are built from (:func:`count_symbols`).

    Attributes:
        factorized: ``(C, 2*SUPPORT+1)`` int64, per-frame values per channel.
        temporal: ``(groups*6, 2*SUPPORT+1)`` int64, changes at updated positions per
            (channel group, context bucket).
        groups: channel groups of the temporal bank.
        updates: ``(MAP_CONTEXTS, 2)`` int64, update-map flags per context.
    """

    factorized: np.ndarray
    temporal: np.ndarray
    groups: int
    updates: np.ndarray


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


def _context_index(previous: np.ndarray, groups: int, updated: np.ndarray) -> np.ndarray:
    """Temporal-bank indexes of the values at the ``updated`` ``(H, W)`` positions, channel
    after channel: ``(C * updated.sum(),)``."""
    c = previous.shape[0]
    bucket = np.searchsorted(np.array(CONTEXT_EDGES), np.abs(previous[:, updated]), side="right")
    group = (np.arange(c) * groups // c)[:, None]
    return (group * (len(CONTEXT_EDGES) + 1) + bucket).ravel()


def map_contexts(previous_map: np.ndarray | None, shape: tuple[int, int]) -> np.ndarray:
    """``(H*W,)`` int64 contexts of the update flags: updated positions in the 3x3
    neighbourhood of each position in ``previous_map`` (``(H, W)`` bool; ``None``: nothing
    updated, as after an intra unit), capped at ``MAP_CONTEXTS - 1``. Integers only."""
    h, w = shape
    if previous_map is None:
        return np.zeros(h * w, np.int64)
    padded = np.pad(np.asarray(previous_map, np.int64), 1)
    around = sum(padded[dy:dy + h, dx:dx + w] for dy in range(3) for dx in range(3))
    return np.minimum(around, MAP_CONTEXTS - 1).ravel()


def update_map(q: np.ndarray, previous: np.ndarray) -> np.ndarray:
    """``(H, W)`` bool: the positions where any channel of ``q`` differs from ``previous``."""
    return (np.asarray(q) != np.asarray(previous)).any(axis=0)


def skip_small_changes(q: np.ndarray, previous: np.ndarray, threshold: int) -> np.ndarray:
    """What an encoder sends instead of ``q`` (``(C, H, W)`` integers): at each position
    whose change from ``previous`` sums (L1 over the channels) to at most ``threshold``, the
    previous values (the decoder keeps them; the position costs one map flag). ``threshold``
    0 changes nothing."""
    if threshold < 0:
        raise FeatureCodingError(f"skip threshold must be >= 0, got {threshold}")
    q, previous = np.asarray(q), np.asarray(previous)
    if threshold == 0:
        return q
    small = np.abs(q.astype(np.int64) - previous).sum(axis=0) <= threshold
    return np.where(small[None], previous, q).astype(q.dtype)


def _histogram(values: np.ndarray, index: np.ndarray, tables: int) -> np.ndarray:
    counts = np.zeros((tables, 2 * SUPPORT + 1), np.int64)
    inside = np.abs(values) <= SUPPORT
    np.add.at(counts, (index[inside], values[inside] + SUPPORT), 1)
    return counts


def count_symbols(sequences: list[list[np.ndarray]], groups: int = 4,
                  skip_threshold: int = 0) -> SymbolCounts:  # fmt: skip
    """Symbol counts of ``sequences`` (lists of consecutive ``(C, H, W)`` integer frames) as
    an encoder skipping changes up to ``skip_threshold`` (:func:`skip_small_changes`) would
    code them: every frame counts in the per-frame model, every frame after the first of its
    sequence in the update map and the temporal model. ``groups`` is clipped to 1..C."""
    frames = [f for seq in sequences for f in seq]
    if not frames:
        raise FeatureCodingError("fitting tables needs at least one frame")
    channels = int(np.asarray(frames[0]).shape[0])
    groups = max(1, min(groups, channels))
    n_temporal = groups * (len(CONTEXT_EDGES) + 1)
    factorized = np.zeros((channels, 2 * SUPPORT + 1), np.int64)
    temporal = np.zeros((n_temporal, 2 * SUPPORT + 1), np.int64)
    updates = np.zeros((MAP_CONTEXTS, 2), np.int64)
    for seq in sequences:
        previous, previous_map = None, None
        for frame in seq:
            q = _check(frame, channels)
            factorized += _histogram(q.ravel(), _channel_index(q.shape), channels)
            if previous is not None:
                q = skip_small_changes(q, previous, skip_threshold)
                updated = update_map(q, previous)
                np.add.at(updates, (map_contexts(previous_map, updated.shape),
                                    updated.ravel().astype(np.int64)), 1)  # fmt: skip
                temporal += _histogram((q - previous)[:, updated].ravel(),
                                       _context_index(previous, groups, updated),
                                       n_temporal)  # fmt: skip
                previous_map = updated
            previous = q
    return SymbolCounts(factorized, temporal, groups, updates)


def tables_from_counts(counts: SymbolCounts) -> FeatureTables:
    """The tables of :func:`count_symbols`' counts (integer arithmetic only: the same tables
    on every machine; stored models keep the counts and rebuild the tables on loading)."""
    factorized = np.asarray(counts.factorized, np.int64)
    temporal = np.asarray(counts.temporal, np.int64)
    updates = np.asarray(counts.updates, np.int64)
    channels, width = factorized.shape
    groups = counts.groups
    if (width != 2 * SUPPORT + 1 or temporal.shape[1:] != (width,) or not 1 <= groups <= channels
            or temporal.shape[0] != groups * (len(CONTEXT_EDGES) + 1)
            or updates.shape != (MAP_CONTEXTS, 2)):
        raise FeatureCodingError(f"symbol counts of shapes {factorized.shape}, {temporal.shape} "
                                 f"and {updates.shape} do not fit {groups} groups")  # fmt: skip
    offsets = lambda n: [-SUPPORT] * n  # noqa: E731
    return FeatureTables(
        channels=channels,
        factorized=CdfTable.from_cdfs(cdfs_from_counts(factorized), offsets(channels)),
        temporal=CdfTable.from_cdfs(cdfs_from_counts(temporal), offsets(len(temporal))),
        groups=groups,
        updates=CdfTable.from_cdfs(cdfs_from_counts(updates), [0] * MAP_CONTEXTS),
    )


def fit_tables(sequences: list[list[np.ndarray]], groups: int = 4,
               skip_threshold: int = 0) -> FeatureTables:  # fmt: skip
    """Tables fitted (by counting, :func:`count_symbols`) to ``sequences``."""
    return tables_from_counts(count_symbols(sequences, groups, skip_threshold))


def encode_features(q: np.ndarray, tables: FeatureTables, previous: np.ndarray | None = None,
                    previous_map: np.ndarray | None = None) -> bytes:  # fmt: skip
    """One frame's ``(C, H, W)`` integer features -> rANS payload: per-frame model without
    ``previous`` (the previous frame's decoded features), else the temporal model, its map
    contexts from ``previous_map`` (the previous temporal unit's :func:`update_map`; ``None``
    after an intra unit). Lossless: apply :func:`skip_small_changes` first to skip."""
    q = _check(q, tables.channels)
    if previous is None:
        return rans_encode(q.ravel(), _channel_index(q.shape), tables.factorized)
    previous = _check(previous, tables.channels, "previous features")
    if previous.shape != q.shape:
        raise FeatureCodingError(f"previous features {previous.shape} differ from {q.shape}")
    updated = update_map(q, previous)
    writer = RansWriter()
    writer.write(updated.ravel().astype(np.int64),
                 map_contexts(_check_map(previous_map, updated.shape), updated.shape),
                 tables.updates)  # fmt: skip
    writer.write((q - previous)[:, updated].ravel(),
                 _context_index(previous, tables.groups, updated), tables.temporal)  # fmt: skip
    return writer.getvalue()


def _check_map(previous_map: np.ndarray | None, shape: tuple[int, int]) -> np.ndarray | None:
    if previous_map is not None and np.shape(previous_map) != tuple(shape):
        raise FeatureCodingError(f"previous update map {np.shape(previous_map)} differs from "
                                 f"the features' positions {tuple(shape)}")  # fmt: skip
    return previous_map


def decode_features(data: bytes, shape: tuple[int, int, int], tables: FeatureTables,
                    previous: np.ndarray | None = None,
                    previous_map: np.ndarray | None = None) -> np.ndarray:  # fmt: skip
    """Inverse of :func:`encode_features`: ``(C, H, W)`` int32 features (the update map of
    a temporal unit is :func:`update_map` of the result and ``previous``).

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
        contexts = map_contexts(_check_map(previous_map, (h, w)), (h, w))
        reader = RansReader(data, max_symbols=h * w * (c + 1))
        flags = reader.read(contexts, tables.updates)
        if flags.min() < 0 or flags.max() > 1:
            raise FeatureCodingError("corrupt feature payload (an update flag is not 0 or 1)")
        updated = flags.reshape(h, w).astype(bool)
        change = reader.read(_context_index(previous, tables.groups, updated), tables.temporal)
        reader.finish()
    except FeatureCodingError:
        raise
    except EntropyCodingError as exc:
        raise FeatureCodingError(f"feature payload: {exc}") from None
    change = change.reshape(c, -1)
    if not change.any(axis=0).all():
        raise FeatureCodingError("corrupt feature payload (an updated position is unchanged)")
    q = previous.copy()
    q[:, updated] += change
    return q.astype(np.int32)
