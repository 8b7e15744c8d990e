"""Frames -> task-feature units -> detections (the ``features`` codec of issue 14).

A frame's unit is one byte of flags, then one rANS payload of the rounded latents of all its
windows, stacked as ``(latent, W * S, S)`` (window after window along the height):

* flag bit 0 clear: an *intra* unit, coded with the per-frame (factorized) tables; decodable
  on its own. The first frame and every ``intra_period``-th frame after it are intra.
* flag bit 0 set: a *temporal* unit, the change from the previous frame's decoded latents:
  the update map, then the changes at updated positions (contexts from the previous latents
  and the previous update map; no side information). The encoder skips positions whose
  change is at most ``skip_threshold`` (L1 over the latent channels): the cloud keeps their
  previous latents.
* flag bit 1 set (intra units only): a *switch* of bottleneck. One byte follows the flags:
  the index of the bottleneck that codes this unit and the ones after it, among those the
  stream header lists (0: the first). The rate control of detect mode changes β this way
  (:mod:`codec.task.ratecontrol`), only at an intra unit, so no unit is ever predicted across
  two bottlenecks.
* flag bits 2-3: the edge's rate status when the unit was coded (:data:`RATE_STATUSES`: 0
  nothing to report, 1 the budget cannot reach the agreement floor, 2 no setting reaches the
  floor), so that the cloud knows it frame by frame at no cost in bytes.

Latents are integers, so the decoder's prediction equals the encoder's exactly: there is no
drift, and a test decodes in another process. :class:`TaskEncoder` holds the edge's state and
:class:`TaskDecoder` the cloud's.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import numpy as np

from semcodec.codec.entropy.features import (
    FeatureCodingError,
    decode_features,
    encode_features,
    skip_small_changes,
    update_map,
)
from semcodec.codec.scaffold.detector import Detections
from semcodec.codec.task.bottleneck import TaskBottleneck
from semcodec.codec.task.split import SplitDetector

TEMPORAL_FLAG = 0x01
SWITCH_FLAG = 0x02
STATUS_SHIFT, STATUS_MASK = 2, 0x0C
#: The rate statuses a unit's flags carry (bits 2-3), by code.
RATE_STATUSES = ("ok", "over_budget", "below_floor")
#: Default frames between intra units (the first frame is always intra).
DEFAULT_INTRA_PERIOD = 64


@dataclass(frozen=True)
class UnitShape:
    """What the decoder must know of every unit (from the stream header).

    Attributes:
        windows: windows per frame.
        latent: latent channels.
        side: the latents' spatial side (19 after ``expanded_conv_6``).
    """

    windows: int
    latent: int
    side: int

    @property
    def stacked(self) -> tuple[int, int, int]:
        """Shape of the coded tensor: ``(latent, windows * side, side)``."""
        return (self.latent, self.windows * self.side, self.side)


def stack_latents(q: np.ndarray) -> np.ndarray:
    """``(W, N, S, S)`` int latents of W windows -> ``(N, W*S, S)``, as units code them."""
    w, n, s, _ = q.shape
    return np.ascontiguousarray(q.transpose(1, 0, 2, 3).reshape(n, w * s, s))


def unstack_latents(q: np.ndarray, shape: UnitShape) -> np.ndarray:
    """Inverse of :func:`stack_latents`: ``(N, W*S, S)`` -> ``(W, N, S, S)``."""
    n, ws, s = q.shape
    return np.ascontiguousarray(q.reshape(n, shape.windows, s, s).transpose(1, 0, 2, 3))


class TaskEncoder:
    """The edge: frames -> units.

    Args:
        bottleneck: the trained bottleneck.
        detector: the split detector's edge half: cut where the bottleneck was trained
            (``after``); its windows are the camera's (any layout).
        intra_period: frames between intra units; 0: only the first frame.
        skip_threshold: positions whose latents change by at most this much (L1 over the
            channels) are not updated; default: the bottleneck's (the threshold its tables
            were fitted for, chosen on its training frames).
    """

    def __init__(self, bottleneck: TaskBottleneck, detector: SplitDetector,
                 intra_period: int = DEFAULT_INTRA_PERIOD,
                 skip_threshold: int | None = None) -> None:  # fmt: skip
        if detector.config.after != bottleneck.split.after:
            raise ValueError(f"the detector is cut after expanded_conv_{detector.config.after}, "
                             f"the bottleneck was trained after "
                             f"expanded_conv_{bottleneck.split.after}")  # fmt: skip
        if intra_period < 0:
            raise ValueError(f"intra_period must be >= 0, got {intra_period}")
        if skip_threshold is None:
            skip_threshold = bottleneck.skip_threshold
        if skip_threshold < 0:
            raise ValueError(f"skip_threshold must be >= 0, got {skip_threshold}")
        self.bottleneck, self.detector, self.intra_period = bottleneck, detector, intra_period
        self.skip_threshold = int(skip_threshold)
        #: the rate status the next units carry (:data:`RATE_STATUSES`)
        self.status = "ok"
        self._previous: np.ndarray | None = None
        self._map: np.ndarray | None = None
        self._since_intra = 0
        self._switch: int | None = None

    @property
    def decoded(self) -> np.ndarray | None:
        """The last unit's latents as the cloud decodes them, ``(latent, windows * side,
        side)`` int32 (None before the first unit)."""
        return self._previous

    def switch(self, bottleneck: TaskBottleneck, index: int) -> None:
        """Codes the next unit and those after it with ``bottleneck``, the ``index``-th
        (0..255) of those the stream header lists: the next unit is an intra unit that says
        so. The new bottleneck must give latents of the same shape."""
        if not 0 <= index <= 255:
            raise ValueError(f"bottleneck index {index} is not in 0..255")
        if bottleneck.model.config.latent != self.bottleneck.model.config.latent:
            raise ValueError(f"cannot switch from {self.bottleneck.model.config.latent} to "
                             f"{bottleneck.model.config.latent} latent channels mid-stream")
        self.bottleneck, self._switch = bottleneck, int(index)

    def latents(self, frame: np.ndarray) -> np.ndarray:
        """``(H, W, 3)`` uint8 RGB -> ``(latent, windows * side, side)`` int32 latents."""
        return stack_latents(self.bottleneck.model.quantize(self.detector.edge_features(frame)))

    def shape(self, height: int, width: int) -> UnitShape:
        """The unit shape of ``height`` x ``width`` frames."""
        side = 19 if self.detector.config.after >= 6 else None
        if side is None:
            raise ValueError("only cuts at expanded_conv_6..12 (19x19 features) are supported")
        windows = len(self.detector.config.windows(height, width))
        return UnitShape(windows, self.bottleneck.model.config.latent, side)

    def encode(self, frame: np.ndarray) -> bytes:
        """The next frame's unit."""
        return self.encode_latents(self.latents(frame))

    def encode_latents(self, q: np.ndarray) -> bytes:
        """The next frame's unit from its latents (:meth:`latents`, by the current
        bottleneck). ``intra_period`` and ``skip_threshold`` may change between frames (the
        cloud needs neither): the next intra unit comes ``intra_period`` frames after the last
        one, or at once after :meth:`switch`."""
        intra = self._previous is None or self._switch is not None or (
            self.intra_period > 0 and self._since_intra >= self.intra_period)  # fmt: skip
        tables = self.bottleneck.tables
        status = RATE_STATUSES.index(self.status) << STATUS_SHIFT
        if intra:
            lead = bytes([status]) if self._switch is None else bytes(
                [status | SWITCH_FLAG, self._switch])  # fmt: skip
            unit = lead + encode_features(q, tables)
            self._map, self._switch = None, None
        else:
            q = skip_small_changes(q, self._previous, self.skip_threshold)
            unit = bytes([status | TEMPORAL_FLAG]) + encode_features(q, tables, self._previous,
                                                                     self._map)  # fmt: skip
            self._map = update_map(q, self._previous)
        self._previous = q
        self._since_intra = 1 if intra else self._since_intra + 1
        return unit


def is_intra(unit: bytes) -> bool:
    """Whether a task-feature unit is an intra unit (its flags' bit 0 clear)."""
    return not unit[0] & TEMPORAL_FLAG


class TaskDecoder:
    """The cloud: units -> detections.

    Args:
        bottleneck: the bottleneck the stream was coded with (its first, when it switches).
        detector: the split detector's cloud half (same cut).
        shape: the units' shape; ``height``, ``width``: the frames' size in pixels.
        alternatives: the bottlenecks a switch may name, in the header's order (index 0 is
            ``bottleneck``), each with the cloud's score threshold for it (None: the
            detector's); empty: the stream never switches.
    """

    def __init__(self, bottleneck: TaskBottleneck, detector: SplitDetector, shape: UnitShape,
                 height: int, width: int,
                 alternatives: tuple[tuple[TaskBottleneck, float | None], ...] = (),
                 ) -> None:  # fmt: skip
        self.bottleneck, self.detector, self.shape = bottleneck, detector, shape
        self.height, self.width = height, width
        self.alternatives = tuple(alternatives)
        #: the index of the bottleneck in use among ``alternatives`` (0 at the start)
        self.index = 0
        #: the rate status the last unit carried (:data:`RATE_STATUSES`)
        self.status = "ok"
        #: what the stream header calls each of ``alternatives`` (their β), when it does
        self.betas: tuple[str, ...] = ()
        self._previous: np.ndarray | None = None
        self._map: np.ndarray | None = None

    @property
    def previous(self) -> np.ndarray | None:
        """The last decoded unit's latents (what the next temporal unit is coded against)."""
        return self._previous

    def latents(self, unit: bytes) -> np.ndarray:
        """The unit's ``(latent, windows * side, side)`` int32 latents.

        Raises:
            FeatureCodingError: an empty or corrupt unit, unknown flags, a temporal unit with
                no decoded frame before it, or a switch to a bottleneck the header does not
                list.
        """
        flags = unit[0] if len(unit) else 0xFF
        if not len(unit) or flags & ~(TEMPORAL_FLAG | SWITCH_FLAG | STATUS_MASK) or (
                flags & TEMPORAL_FLAG and flags & SWITCH_FLAG) or (
                (flags & STATUS_MASK) >> STATUS_SHIFT >= len(RATE_STATUSES)):  # fmt: skip
            raise FeatureCodingError("a task-feature unit must start with a known flags byte "
                                     "(temporal, or intra with or without a bottleneck switch, "
                                     "and a rate status 0-2)")  # fmt: skip
        start = 1
        if flags & SWITCH_FLAG:
            if len(unit) < 2 or unit[1] >= max(1, len(self.alternatives)):
                which = unit[1] if len(unit) > 1 else "no index"
                raise FeatureCodingError(f"a unit switches to bottleneck {which}, but the "
                                         f"stream header lists {max(1, len(self.alternatives))}")
            self._use(unit[1])
            start = 2
        tables, data = self.bottleneck.tables, bytes(unit[start:])
        if not flags & TEMPORAL_FLAG:
            q, updated = decode_features(data, self.shape.stacked, tables), None
        elif self._previous is None:
            raise FeatureCodingError("a temporal unit needs the previous frame's latents; "
                                     "the stream must start with an intra unit")
        else:
            q = decode_features(data, self.shape.stacked, tables, self._previous, self._map)
            updated = update_map(q, self._previous)
        self._previous, self._map = q, updated
        self.status = RATE_STATUSES[(flags & STATUS_MASK) >> STATUS_SHIFT]
        return q

    def _use(self, index: int) -> None:
        if not self.alternatives or index == self.index:
            return
        bottleneck, threshold = self.alternatives[index]
        self.bottleneck, self.index = bottleneck, index
        if threshold is not None:
            self.detector = SplitDetector(self.detector.model, dataclasses.replace(
                self.detector.config, score_threshold=float(threshold)))  # fmt: skip

    def decode(self, unit: bytes) -> Detections:
        """The next unit's person detections, ``x1, y1, x2, y2`` in frame pixels."""
        q = unstack_latents(self.latents(unit), self.shape)
        features = self.bottleneck.model.reconstruct(q)
        return self.detector.cloud_detect(features, self.height, self.width)
