"""What both ends of a scaffold stream share: the errors a decoder raises, the limits it
applies to a header, the entropy coders with their temporal state (the same on both sides),
the encoder's byte and time accounting, and the sub-streams' byte-count names.

:mod:`codec.scaffold.encoder` (the edge) and :mod:`codec.scaffold.decoder` (the cloud) are
built on it; :mod:`codec.scaffold.codec` gathers the public names of all three.
"""

from __future__ import annotations

import math
import time
from collections import defaultdict
from dataclasses import dataclass, field

import numpy as np

from semcodec.codec.bitstream import StreamHeader, SubStreamType, Unit, unit_overhead_bytes
from semcodec.codec.core.types import BodyPose, Tracks
from semcodec.codec.scaffold.levels import LevelConfig

#: Byte-count names of the sub-streams (the benchmark's ``bytes_<name>`` columns).
STREAM_NAMES = {
    SubStreamType.KEYFRAME_IMAGE: "keyframe",
    SubStreamType.SEGMENTATION: "seg",
    SubStreamType.POSE: "pose",
    SubStreamType.FLOW: "flow",
    SubStreamType.TRACKS: "boxes",
    SubStreamType.APPEARANCE: "appearance",
    SubStreamType.PLATE_TILE: "plate_tiles",
    SubStreamType.SPARSE_POSE: "pose",  # level 1's sparse pose; levels 2-3 send POSE
}


class ScaffoldCodecError(RuntimeError):
    """A stream cannot be decoded with this decoder (missing prior, unknown setting, bad data)."""


class StreamLimitError(ScaffoldCodecError):
    """A header field (frame size, scale, step) is outside :class:`StreamLimits`."""


class StreamStructureError(ScaffoldCodecError):
    """Units out of order, repeated or after END, or a unit with wrong or repeated sub-streams."""


class PayloadError(ScaffoldCodecError):
    """An entropy-coded sub-stream payload does not decode (corrupt or crafted bytes)."""


class IncompleteStreamError(ScaffoldCodecError):
    """The stream ended before the frames it declares (no END unit, or fewer frames).

    Attributes:
        frames_decoded: frames decoded before the end.
        frames_expected: frames the header or the END unit declares (``None``: unknown).
    """

    def __init__(self, message: str, frames_decoded: int, frames_expected: int | None) -> None:
        super().__init__(message)
        self.frames_decoded = frames_decoded
        self.frames_expected = frames_expected


def segmentation_shape(frame_size: tuple[int, int], scale: float) -> tuple[int, int]:
    """``(h, w)`` of the label map of a ``(width, height)`` frame at ``scale``."""
    from semcodec.codec.scaffold.segmentation import label_size

    width, height = label_size(frame_size, scale)
    return height, width


def flow_shape(frame_size: tuple[int, int], scale: float) -> tuple[int, int]:
    """``(h, w)`` of the flow grid of a ``(width, height)`` frame at ``scale``."""
    from semcodec.codec.scaffold.flow import FlowConfig

    width, height = FlowConfig(scale=scale).grid_size(frame_size)
    return height, width


#: The largest frame a decoder accepts by default (4K UHD), width x height in pixels.
UHD_4K = (3840, 2160)


@dataclass(frozen=True)
class StreamLimits:
    """What a decoder accepts from a stream header; checked before anything is allocated.

    A header outside these limits raises :class:`StreamLimitError`, so a few hostile header
    bytes can never make the decoder allocate more than a frame of the largest accepted size
    (about 25 MB of RGB for 3840x2160) and a few times that in work arrays.

    Attributes:
        min_side: smallest frame width/height in pixels (the edge encoder's own minimum).
        max_side: largest frame width/height in pixels.
        max_pixels: largest ``width * height`` (default 3840x2160, 4K UHD).
        min_scale: smallest non-zero ``seg_scale``/``flow_scale``/``keyframe_scale``
            (fractions of the frame size; the largest is 1).
        max_label_cells: largest segmentation label map, ``h * w`` cells (1 MiB cells: e.g.
            1/4 of 4K, or 1/2 of 2048x2048).
        max_flow_cells: largest flow grid, ``h * w`` cells.
        min_step_px, max_step_px: range of ``pose_step_px`` and ``flow_step_px`` (frame
            pixels) when pose / flow is sent.
        min_fps, max_fps: range of the frame rate ``fps_num / fps_den`` (frames per second);
            both terms must also be below 2**31 (what video containers store).
    """

    min_side: int = 16
    max_side: int = 8192
    max_pixels: int = UHD_4K[0] * UHD_4K[1]
    min_scale: float = 1 / 64
    max_label_cells: int = 1 << 20
    max_flow_cells: int = 1 << 18
    min_step_px: float = 1 / 64
    max_step_px: float = 64.0
    min_fps: float = 1 / 3600
    max_fps: float = 1000.0

    def check(self, header: StreamHeader, config: LevelConfig) -> None:
        """Raises :class:`StreamLimitError` naming the first field out of its limits."""
        width, height = header.width, header.height
        for name, side in (("width", width), ("height", height)):
            if not self.min_side <= side <= self.max_side:
                raise StreamLimitError(
                    f"frame {name} {side} is outside the decoder's limits "
                    f"{self.min_side}..{self.max_side} pixels"
                )
        if width * height > self.max_pixels:
            raise StreamLimitError(
                f"frame size {width}x{height} ({width * height} pixels) is over the decoder's "
                f"limit of {self.max_pixels} pixels"
            )
        self._check_rate(header.fps_num, header.fps_den)
        self._check_scale("keyframe_scale", config.keyframe_scale, optional=False)
        self._check_scale("seg_scale", config.seg_scale, optional=True)
        self._check_scale("flow_scale", config.flow_scale, optional=True)
        if config.sends_pose:
            self._check_step("pose_step_px", config.pose_step_px)
        if config.sends_flow:
            self._check_step("flow_step_px", config.flow_step_px)
        frame = (width, height)
        if config.sends_segmentation:
            self._check_cells("label map", segmentation_shape(frame, config.seg_scale),
                              self.max_label_cells, "seg_scale")  # fmt: skip
        if config.sends_flow:
            self._check_cells("flow grid", flow_shape(frame, config.flow_scale),
                              self.max_flow_cells, "flow_scale")  # fmt: skip

    def _check_rate(self, num: int, den: int) -> None:
        if max(num, den) >= 1 << 31 or not self.min_fps <= num / den <= self.max_fps:
            raise StreamLimitError(
                f"frame rate {num}/{den} is outside the decoder's limits "
                f"{self.min_fps:g}..{self.max_fps:g} fps (terms below 2**31)"
            )

    def _check_scale(self, name: str, value: float, optional: bool) -> None:
        if optional and value == 0:
            return
        if not (math.isfinite(value) and self.min_scale <= value <= 1):
            allowed = f"0 or {self.min_scale:g}..1" if optional else f"{self.min_scale:g}..1"
            raise StreamLimitError(f"header setting {name}={value!r} is outside {allowed}")

    def _check_step(self, name: str, value: float) -> None:
        if not (math.isfinite(value) and self.min_step_px <= value <= self.max_step_px):
            raise StreamLimitError(
                f"header setting {name}={value!r} is outside "
                f"{self.min_step_px:g}..{self.max_step_px:g} pixels"
            )

    @staticmethod
    def _check_cells(what: str, shape: tuple[int, int], limit: int, setting: str) -> None:
        if shape[0] * shape[1] > limit:
            raise StreamLimitError(
                f"the {what} would be {shape[1]}x{shape[0]} cells, over the decoder's limit "
                f"of {limit}: the stream's {setting} is too large for its frame size"
            )


#: The limits :class:`ScaffoldDecoder` applies unless given others.
DEFAULT_LIMITS = StreamLimits()


@dataclass
class EncoderStats:
    """Bytes and seconds spent, per sub-stream and per stage, over the frames encoded."""

    frames: int = 0
    keyframes: int = 0
    stream_bytes: dict[str, int] = field(default_factory=lambda: defaultdict(int))
    stage_seconds: dict[str, float] = field(default_factory=lambda: defaultdict(float))
    #: what the camera's profile chose (empty when the level fixes the detector's layout)
    profile: str = ""
    #: plates sent again in frame units at a better quality (see ``_plate_refresh``)
    plate_refreshes: int = 0
    #: plate tiles sent to refine the plate the decoder holds (see ``_plate_tile``)
    plate_tiles: int = 0
    #: periodic plates not sent: the plate the decoder held was closer to the background
    #: model than the one the cap bought (see ``_periodic_plate``)
    plate_periods_kept: int = 0

    def add_unit(self, unit: Unit) -> None:
        for name, n in unit_stream_bytes(unit).items():
            self.stream_bytes[name] += n


def unit_stream_bytes(unit: Unit) -> dict[str, int]:
    """A unit's bytes by sub-stream name (:data:`STREAM_NAMES`), its framing as
    ``header``; the values sum to the unit's encoded size."""
    out: dict[str, int] = {"header": unit_overhead_bytes(unit)}
    for sub in unit.substreams:
        name = STREAM_NAMES.get(sub.type, sub.type.name.lower())
        out[name] = out.get(name, 0) + len(sub.payload)
    return out


class StageTimer:
    """Adds the seconds of a ``with`` block to ``stats.stage_seconds[stage]``."""

    def __init__(self, stats: EncoderStats, stage: str):
        self.stats, self.stage = stats, stage

    def __enter__(self):
        self.start = time.perf_counter()

    def __exit__(self, *exc):
        self.stats.stage_seconds[self.stage] += time.perf_counter() - self.start


class StreamCoders:
    """The entropy coders of one stream, with their temporal state (same on both sides)."""

    def __init__(self, config: LevelConfig, flow_prior, frame_size: tuple[int, int]):
        from semcodec.codec.entropy.boxes import BoxCoder
        from semcodec.codec.entropy.flow import FlowCoder
        from semcodec.codec.entropy.pose import PoseCoder
        from semcodec.codec.entropy.segmentation import SegmentationCoder
        from semcodec.codec.entropy.sparse_pose import SparsePoseCoder

        self.seg = SegmentationCoder()
        self.sparse = SparsePoseCoder(config.pose_steps) if config.sends_sparse_pose else None
        self.pose = PoseCoder(step_px=config.pose_step_px)
        self.flow = FlowCoder(flow_prior, step=config.flow_step_px) if config.sends_flow else None
        self.boxes = BoxCoder(config.box_step_px, frame_size) if config.sends_boxes else None
        self.reset()

    def reset(self) -> None:
        self.seg.reset()
        self.previous_labels: np.ndarray | None = None
        self.previous_poses: dict[int, np.ndarray] = {}
        self.previous_boxes: dict[int, np.ndarray] = {}
        #: ``(age, gap)``: frames since the last frame that sent boxes (counting the next one)
        #: and between it and the one before (:mod:`codec.entropy.boxes`, ``ahead``)
        self.boxes_ahead = (1, 1)
        #: track id -> (the person's last decoded sparse pose, the frame number it came with)
        self.previous_sparse: dict[int, tuple] = {}

    def advance_boxes(self, sent: Tracks | None) -> None:
        """Takes a frame's decoded boxes ``sent`` into the state, or ``None`` for a frame
        that sent none (drawn at their prediction). Encoder and decoder call it alike."""
        age, gap = self.boxes_ahead
        if sent is None:
            self.boxes_ahead = (age + 1, gap)
            return
        self.previous_boxes = self.boxes.update_state(self.previous_boxes, sent)
        self.boxes_ahead = (1, age)

    def sparse_previous(self) -> dict:
        """The sparse poses the next frame's are predicted from (track id -> SparsePose)."""
        return {tid: pose for tid, (pose, _) in self.previous_sparse.items()}

    def cloud_poses(self, tracks: Tracks, sent) -> dict[int, tuple[np.ndarray, np.ndarray]]:
        """Each person's pose as the cloud will have it this frame if ``sent`` (a list of
        SparsePose) are sent: ``track id -> (uv (13, 2) box heights, visible (13,))``."""
        state = {tid: pose for tid, (pose, _) in self.previous_sparse.items()}
        state.update({int(p.track_id): p for p in sent})
        return {tid: (state[tid].q / state[tid].steps, np.asarray(state[tid].visible, bool))
                for tid in tracks.ids.tolist() if tid in state}  # fmt: skip

    def advance_sparse(self, tracks: Tracks, sent, number: int) -> dict[int, BodyPose]:
        """Takes frame ``number``'s decoded sparse poses ``sent`` (a list of
        :class:`~codec.entropy.sparse_pose.SparsePose`) into the state, which keeps only the
        people of ``tracks`` (the frame's decoded boxes), and returns every person's pose on
        this frame's box: sent now, or held from the last frame that sent it. Encoder and
        decoder call it alike."""
        state = {int(p.track_id): (p, number) for p in sent}
        for tid in tracks.ids.tolist():
            if tid not in state and tid in self.previous_sparse:
                state[tid] = self.previous_sparse[tid]
        self.previous_sparse = state
        out = {}
        for tid, box in zip(tracks.ids.tolist(), np.asarray(tracks.boxes), strict=True):
            if tid in state:
                pose, when = state[tid]
                uv = (pose.q.astype(np.float64) / pose.steps).astype(np.float32)
                out[tid] = BodyPose(tid, uv, np.asarray(pose.visible, bool), pose.joints(box),
                                    age=number - when)  # fmt: skip
        return out


def default_flow_prior(config: LevelConfig):
    """The learned flow prior shipped for ``config.flow_step_px``, else the built-in one."""
    from semcodec.codec.entropy.flow import load_default_prior

    return load_default_prior(config.flow_step_px)
