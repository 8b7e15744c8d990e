"""The scaffold codec: frames -> scaffolds -> entropy-coded units, and back, exactly.

:class:`ScaffoldEncoder` (the edge) runs, per frame, keyframe scheduling, person detection and
tracking, segmentation, pose and flow as its :class:`~codec.scaffold.levels.LevelConfig` asks,
quantizes them, entropy-codes them and wraps them in a :class:`~codec.bitstream.Unit`.
:class:`ScaffoldDecoder` (the cloud) parses the units and returns the scaffolds bit for bit
as the edge quantized them, which a :class:`~codec.reconstruct.Reconstructor` turns into
frames. Every temporal context (previous label map, previous poses, adaptive tables) restarts
at each keyframe.

The decoder trusts nothing in a stream: the header is checked against :class:`StreamLimits`
(frame size, frame rate, scales, quantization steps, label-map and flow-grid sizes) before
anything is allocated; units must be numbered 0, 1, 2, ... from a keyframe, each carrying
exactly the sub-streams its kind and the level send (a frame unit of a plate level may add a
keyframe picture: a plate refresh, which replaces the plate and keeps every other state);
an END unit must close the stream
(:meth:`ScaffoldDecoder.finish`). Every failure is a :class:`ScaffoldCodecError` subclass
(or a ``BitstreamError`` / ``KeyframeError`` from the layers below) saying what is wrong.
"""

from __future__ import annotations

import dataclasses
import itertools
import math
import time
from collections import defaultdict
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from fractions import Fraction
from pathlib import Path

import cv2
import numpy as np

from semcodec.codec.bitstream import (
    ModelEntry,
    StreamHeader,
    SubStream,
    SubStreamType,
    Unit,
    UnitKind,
    read_stream,
    unit_overhead_bytes,
    write_stream,
)
from semcodec.codec.bitstream.tables import level_defaults_id
from semcodec.codec.core.types import (
    BodyPose,
    DecodedFrame,
    Flow,
    FrameScaffold,
    Segmentation,
    Tracks,
)
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
#: The pose model the edge runs for level 1's sparse pose (``LevelConfig.pose_every``).
SPARSE_POSE_MODEL = "pose_landmark_lite"


#: A plate refresh is tried when the rate has saved up this many times the bytes of the
#: plate the decoder holds (or of the last try that bought no better quality).
PLATE_REFRESH_GAIN = 1.5
#: Tiles per side of the grid a plate is refined by (``LevelConfig.plate_refine``).
PLATE_TILE_GRID = 4
#: Fewest bytes set aside before a plate tile is tried (a tile's coding has ~100 bytes of
#: parameter sets); usually more (``ScaffoldEncoder._tile_bytes``).
MIN_TILE_BYTES = 300
#: Frames between recomputations of the background model's plate for tile refinement.
TILE_PLATE_EVERY = 8
#: A tile is sent only when it lowers the tile's mean squared error by this fraction.
TILE_MIN_GAIN = 0.1

#: Seconds a tracked person may wait for a reference in the rate's budget before the
#: smallest thumbnail is sent whatever it costs (a person seen for 1 s is never a silhouette).
OVERDUE_S = 0.75
#: Seconds of video the background plate's median covers (``plate="median"``).
PLATE_WINDOW_S = 10.0
#: Most pixels of the background model's frames (its memory: 64 of them; larger plates are
#: coded from it upscaled).
PLATE_MODEL_PIXELS = 768 * 576
#: Bytes of an END unit (framing only) of a stream of up to 2**21 frames, paid up front by
#: the rate controller.
END_UNIT_BYTES = len(Unit(UnitKind.END, 2**21 - 1).to_bytes())
#: Most frames the edge reads ahead to build the first plate (96 frames of 768x576: 127 MB).
MAX_LOOKAHEAD_FRAMES = 96
#: Weight of the old size when a box stream's box sizes are smoothed over time (the decoder
#: draws a person's reference at the box's height: the detector's jitter would make people
#: pump). On PETS09-S2L1-full 101-200 at level 1, MODA on the reconstruction went from
#: 0.112 (no smoothing) to 0.159 (0.7), 0.192 (0.85) and 0.184 (0.93).
BOX_SIZE_SMOOTHING = 0.85


def plate_tiles(size: tuple[int, int],
                grid: int = PLATE_TILE_GRID) -> list[tuple[int, int, int, int]]:  # fmt: skip
    """The ``grid`` x ``grid`` tiles of a plate of ``size = (width, height)``, row by row:
    ``(x0, y0, x1, y1)`` pixel bounds (end exclusive), covering the plate exactly."""
    width, height = size
    xs = [width * k // grid for k in range(grid + 1)]
    ys = [height * k // grid for k in range(grid + 1)]
    return [(xs[c], ys[r], xs[c + 1], ys[r + 1]) for r in range(grid) for c in range(grid)]


def _plate_coders(config):
    """An intra coder per :attr:`LevelConfig.keyframe_scales`, smallest first."""
    from semcodec.codec.keyframes import create_intra_coder

    return [create_intra_coder(config.keyframe_coder, downscale=scale)
            for scale in config.keyframe_scales]  # fmt: skip


def _tile_coder(config):
    """The intra coder of plate tiles: the keyframe coder at full size."""
    from semcodec.codec.keyframes import create_intra_coder

    return create_intra_coder(config.keyframe_coder)


def _background_size(size: tuple[int, int]) -> tuple[int, int]:
    """``size`` shrunk (aspect kept) to at most :data:`PLATE_MODEL_PIXELS`."""
    width, height = size
    shrink = min(1.0, math.sqrt(PLATE_MODEL_PIXELS / (width * height)))
    return max(1, round(width * shrink)), max(1, round(height * shrink))


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


class _Timer:
    def __init__(self, stats: EncoderStats, stage: str):
        self.stats, self.stage = stats, stage

    def __enter__(self):
        self.start = time.perf_counter()

    def __exit__(self, *exc):
        self.stats.stage_seconds[self.stage] += time.perf_counter() - self.start


class _Coders:
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
        #: track id -> (the person's last decoded sparse pose, the frame number it came with)
        self.previous_sparse: dict[int, tuple] = {}

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


class ScaffoldEncoder:
    """The edge's scaffold encoder for one stream.

    Args:
        config: what to send (a level preset or a variant).
        frame_size: ``(width, height)`` of the input frames.
        fps: their frame rate (frames per second).
        models_dir: where models are looked up first (see :mod:`codec.core.models`).
        threads: CPU threads for each model runner.
        flow_prior: a :class:`codec.entropy.flow.FlowPrior`; default: the shipped one.
        expected_frames: how many frames will be coded, when known (0: unknown, a live
            stream); the rate controller budgets short clips by it.
    """

    def __init__(self, config: LevelConfig, frame_size: tuple[int, int], fps: float,
                 models_dir=None, threads: int = 1, flow_prior=None,
                 expected_frames: int = 0):  # fmt: skip
        from semcodec.codec.keyframes import create_intra_coder
        from semcodec.codec.scaffold.detector import DetectorConfig, PersonDetector
        from semcodec.codec.scaffold.flow import FlowConfig, FlowEstimator
        from semcodec.codec.scaffold.scene import KeyframeSchedule
        from semcodec.codec.scaffold.tracker import ScaffoldDetector, TrackerConfig

        width, height = frame_size
        if width < 16 or height < 16:
            raise ValueError(f"frames must be at least 16x16, got {width}x{height}")
        self.config, self.frame_size, self.fps = config, (int(width), int(height)), float(fps)
        self.stats = EncoderStats()
        self.flow_prior = flow_prior or default_flow_prior(config)
        self._schedule = KeyframeSchedule(config.keyframe_interval, config.scene_change)
        self._intra = create_intra_coder(config.keyframe_coder, downscale=config.keyframe_scale)
        self._tile_coder = _tile_coder(config)
        # with a byte cap per plate, its size is chosen among the stream's scales
        self._plate_coders = _plate_coders(config) if config.target_bpp > 0 else [self._intra]
        from semcodec.codec.scaffold.profile import DEFAULT_TILES

        # tiles 0: the camera's profile chooses them on the look-ahead frames (prime)
        self.profile = None
        detector = PersonDetector(
            DetectorConfig(tiles=config.detector_tiles or DEFAULT_TILES,
                           score_threshold=config.track_low_score or config.detector_threshold,
                           include_full_frame=config.detector_full_frame),
            models_dir, threads=threads,
        )  # fmt: skip
        # with a box stream, a person the detector misses for a frame or two keeps their box
        tracking = TrackerConfig(min_score=config.detector_threshold,
                                 low_score=config.track_low_score or None,
                                 output_predicted=config.sends_boxes, max_coast=3)  # fmt: skip
        self._people = ScaffoldDetector(detector, tracking, detect_every=config.detect_every)
        self._segmenter = self._pose = self._flow = self._body = None
        if config.sends_sparse_pose:
            from semcodec.codec.scaffold.pose import PoseConfig, PoseEstimator

            self._body = PoseEstimator(PoseConfig(model=SPARSE_POSE_MODEL, threads=threads),
                                       models_dir)  # fmt: skip
        if config.sends_pose:
            from semcodec.codec.scaffold.pose import PoseConfig, PoseEstimator

            self._pose = PoseEstimator(PoseConfig(model=config.pose_model, threads=threads),
                                       models_dir)  # fmt: skip
        if config.sends_segmentation:
            from semcodec.codec.scaffold.segmentation import PersonSegmenter, SegmenterConfig

            self._segmenter = PersonSegmenter(
                SegmenterConfig(scale=config.seg_scale, threads=threads), models_dir
            )
        if config.sends_flow:
            self._flow = FlowEstimator(FlowConfig(scale=config.flow_scale))
        self._coders = _Coders(config, self.flow_prior, self.frame_size)
        self._background = self._appearance = self._rate = None
        if config.plate == "median":
            from semcodec.codec.scaffold.background import BackgroundModel

            window = 64
            stride = max(1, round(PLATE_WINDOW_S * self.fps / window))
            plate_size = _background_size(self._plate_coders[-1].coded_size(self.frame_size))
            self._background = BackgroundModel(plate_size, window=window, stride=stride)
        if config.sends_appearance:
            from semcodec.codec.scaffold.appearance import AppearanceSelector, WholePersonCheck

            refresh = max(1, round(config.appearance_refresh_s * self.fps))
            overdue = max(1, round(OVERDUE_S * self.fps))
            check = WholePersonCheck(detector) if config.check_refs else None
            self._appearance = AppearanceSelector(config.appearance_quality, refresh,
                                                  overdue_frames=overdue, check=check,
                                                  scale=config.appearance_scale)  # fmt: skip
        self._previous_frame: np.ndarray | None = None
        self._primed = False
        self._expected_frames = int(expected_frames)  # 0: a live stream, its end unknown
        self._person_area: float | None = None  # of the frame, from the camera's profile
        if config.detector_tiles:  # the layout is the level's: so is the refinement share
            self._resolve_plate_refine()
        self._sizes: dict[int, np.ndarray] = {}
        self._plate_error, self._plate_retry = math.inf, math.inf  # the decoder's plate
        self._cloud_plate: np.ndarray | None = None  # (H, W, 3) float32: what the decoder holds
        self._tile_credit = 0.0  # bytes set aside for plate tiles
        # tiles: (frame index, background plate, each tile's squared error against the plate
        # held) and the errors no tile coding beat
        self._tile_target: tuple[int, np.ndarray, np.ndarray] | None = None
        self._tile_floor = np.zeros(PLATE_TILE_GRID**2)
        self._scene: tuple[int, set[int], list[np.ndarray]] | None = None  # see _follow_scene
        self._index = 0
        self._models = self._model_entries(models_dir)
        if config.target_bpp > 0:
            from semcodec.codec.scaffold.rate import RateController

            # the stream header and the END unit are paid up front
            fixed = len(self.header(expected_frames).to_bytes()) + END_UNIT_BYTES
            self._rate = RateController(config.target_bpp, self.frame_size, self.fps,
                                        expected_frames=expected_frames,
                                        fixed_bytes=fixed,
                                        keyframe_period=config.keyframe_interval)  # fmt: skip

    def set_target_bps(self, bits_per_s: float) -> None:
        """Changes the rate target (bits per second of video, > 0) from the next frame on.

        The stream header keeps the target the stream started with (decoding never reads
        it); the units that follow cost what the new target allows.

        Raises:
            ValueError: the stream has no rate control (its level's ``target_bpp`` is 0:
                start it with a target), or ``bits_per_s`` is not > 0.
        """
        if self._rate is None:
            raise ValueError("this stream has no rate control (level without a target): "
                             "start it with a target to change it")  # fmt: skip
        self._rate.set_target_bps(bits_per_s)

    def _model_entries(self, models_dir) -> tuple[ModelEntry, ...]:
        from semcodec.codec.core.models import resolve_model_spec

        names = ["ssdlite_person"]
        if self.config.sends_segmentation:
            names.append("selfie_segmentation")
        if self.config.sends_pose:
            names.append(self.config.pose_model)
        if self.config.sends_sparse_pose and SPARSE_POSE_MODEL not in names:
            names.append(SPARSE_POSE_MODEL)
        # the models actually used: a fallback that stood in is named as itself
        specs = [resolve_model_spec(name, models_dir)[0] for name in names]
        entries = [ModelEntry(spec.name, spec.sha256) for spec in specs]
        if self.config.sends_flow:
            entries.append(ModelEntry("flow_prior", self.flow_prior.sha256))
        return tuple(entries)

    def header(self, num_frames: int = 0) -> StreamHeader:
        """The stream header: size, rate, level, models (with hashes) and every setting."""
        rate = Fraction(self.fps).limit_denominator(1001)
        settings = self.config.to_dict()
        if self.profile is not None:
            settings.update(self.profile.to_settings())
        return StreamHeader(
            width=self.frame_size[0], height=self.frame_size[1], fps_num=rate.numerator,
            fps_den=rate.denominator, level=self.config.level, num_frames=num_frames,
            models=self._models, settings=settings,
            defaults=level_defaults_id(self.config.level, settings),
        )  # fmt: skip

    def encode_frame(self, frame: np.ndarray) -> tuple[Unit, FrameScaffold]:
        """Encodes the next ``(H, W, 3)`` uint8 RGB frame.

        Returns:
            the unit to send, and the scaffold exactly as the decoder will reconstruct it.
        """
        if frame.shape != (self.frame_size[1], self.frame_size[0], 3) or frame.dtype != np.uint8:
            raise ValueError(f"expected a {self.frame_size[0]}x{self.frame_size[1]} uint8 RGB "
                             f"frame, got {frame.dtype} {frame.shape}")  # fmt: skip
        if not self._primed:
            self.prime([frame])
        number = self._index + 1
        stats = self.stats
        with _Timer(stats, "schedule"):
            is_key = self._schedule.is_keyframe(self._index, frame)
        # a periodic keyframe of a stream with a plate and references renews the plate only
        scheduled_plate = is_key and self._index > 0 and not self._schedule.last_was_cut \
            and self._background is not None and self._appearance is not None
        is_key = is_key and not scheduled_plate
        if self.profile is not None:  # the layout is the camera's: follow a new scene
            self._follow_scene(frame, is_key and self._schedule.last_was_cut)
        if self._rate is not None:
            self._rate.start_frame()
        substreams: list[SubStream] = []
        spread = 0  # bytes of a later keyframe or periodic plate: repaid over a period
        scaffold = FrameScaffold(number=number)
        if is_key:
            self._coders.reset()
            self._tile_credit = 0.0
            if self._appearance is not None:
                self._appearance.reset()
            with _Timer(stats, "keyframe"):
                data = self._keyframe_picture(frame)
            substreams.append(SubStream(SubStreamType.KEYFRAME_IMAGE, data))
            spread = len(data) if self._index > 0 else 0
            scaffold.keyframe = data
        elif self._background is not None:
            self._background.update(frame)
        with _Timer(stats, "detect"):
            tracks = self._people(frame, number)
        if self._coders.boxes is not None:
            tracks = self._smooth(tracks)
        scaffold.tracks = tracks
        if self._coders.boxes is not None:
            with _Timer(stats, "code_boxes"):
                substreams.append(self._code_boxes(scaffold))
        masks = None
        if self._pose is not None:
            with _Timer(stats, "pose"):
                poses, masks = self._pose.estimate_with_masks(frame, tracks)
            with _Timer(stats, "code_pose"):
                data = self._coders.pose.encode(poses, self._coders.previous_poses)
                scaffold.poses = self._coders.pose.quantize(poses)
                self._coders.previous_poses = self._coders.pose.state(scaffold.poses)
            substreams.append(SubStream(SubStreamType.POSE, data))
        if self._segmenter is not None:
            with _Timer(stats, "segment"):
                seg = self._segmenter.segment(frame, tracks, masks=masks)
            with _Timer(stats, "code_seg"):
                data = self._coders.seg.encode(seg.labels, self._coders.previous_labels)
            self._coders.previous_labels = seg.labels
            scaffold.segmentation = seg
            substreams.append(SubStream(SubStreamType.SEGMENTATION, data))
        if self._flow is not None and not is_key and self._previous_frame is not None:
            with _Timer(stats, "flow"):
                flow = self._flow.estimate(self._previous_frame, frame)
            with _Timer(stats, "code_flow"):
                data = self._coders.flow.encode(flow.field)
                scaffold.flow = Flow(self._coders.flow.quantize(flow.field), self.frame_size)
            substreams.append(SubStream(SubStreamType.FLOW, data))
        sparse = self._sparse_poses(frame, scaffold) if self._body is not None else None
        if self._appearance is not None:
            mirror = None
            if sparse is not None and self.config.pose_refresh:
                mirror = self._coders.cloud_poses(scaffold.tracks, sparse)
            with _Timer(stats, "appearance"):
                refs = self._select_refs(frame, number, scaffold, mirror)
            if refs:
                substreams.append(SubStream(SubStreamType.APPEARANCE, refs))
        if sparse is not None:  # after the references: each is sent with its pose
            pending = sum(len(sub.payload) for sub in substreams)
            sub = self._code_sparse_poses(frame, scaffold, sparse, pending)
            if sub is not None:
                substreams.append(sub)
        if scheduled_plate or (not is_key and self._background is not None
                               and self._rate is not None):  # fmt: skip
            pending = sum(len(sub.payload) for sub in substreams)
            sub = self._plate_update(scheduled_plate, pending)
            if sub is not None:
                substreams.append(sub)
                if sub.type == SubStreamType.KEYFRAME_IMAGE:
                    scaffold.keyframe = sub.payload
                    spread = len(sub.payload) if scheduled_plate else 0
        self._previous_frame = frame
        kind = UnitKind.KEYFRAME if is_key else UnitKind.FRAME
        unit = Unit(kind, self._index, tuple(substreams))
        self._index += 1
        stats.frames += 1
        stats.keyframes += int(is_key)
        stats.add_unit(unit)
        if self._rate is not None:
            sizes = unit.payload_sizes()
            total = unit.payload_bytes + unit_overhead_bytes(unit)
            plate = sum(sizes.get(t, 0) for t in (SubStreamType.KEYFRAME_IMAGE,
                                                   SubStreamType.PLATE_TILE))  # fmt: skip
            self._rate.spend(total, sizes.get(SubStreamType.APPEARANCE, 0), plate)
            frames = self._plate_spread_frames()
            if spread and frames:
                self._rate.spread_plate(spread, frames)
        return unit, scaffold

    def _plate_spread_frames(self) -> int:
        """Frames a later keyframe or periodic plate is repaid over (after this one): the
        plate period (else a window), no more than a clip of known length has left."""
        rate = self._rate
        frames = self.config.keyframe_interval or rate.window_frames
        if rate.expected_frames:
            frames = min(frames, rate.expected_frames - self._index)
        return max(0, frames)

    def prime(self, frames: Sequence[np.ndarray]) -> None:
        """Looks at the frames before the first one is coded (the frames are not coded):
        chooses the camera's profile when the level leaves the detector's layout to it
        (``detector_tiles=0``; the header records it from then on) and feeds the background
        model (``plate="median"``). Called once, by :func:`with_lookahead` or by the first
        :meth:`encode_frame` with that frame alone."""
        from semcodec.codec.scaffold.profile import PROFILE_SECONDS, choose_profile

        if self._primed:
            raise RuntimeError("prime() is called once, before the first frame is encoded")
        self._primed = True
        frames = list(frames)
        if self.config.detector_tiles == 0 and frames:
            startup = frames[: max(1, round(PROFILE_SECONDS * self.fps))]
            detector = self._people.detector
            with _Timer(self.stats, "profile"):
                self.profile = choose_profile(startup, detector)
            self.stats.profile = self.profile.describe()
            self.config = dataclasses.replace(self.config, detector_tiles=self.profile.tiles)
            self._people.detector = detector.with_config(
                dataclasses.replace(detector.config, tiles=self.profile.tiles))
            self._choose_first_plate_share()
        self._resolve_plate_refine()
        if self._background is not None:
            self._background.prime(frames)

    def _choose_first_plate_share(self) -> None:
        """The first plate's share of the first window, from the people the profile saw
        (:func:`~codec.scaffold.rate.cold_start_plate_share`); said in ``stats.profile``."""
        from semcodec.codec.scaffold.rate import (
            WINDOW_S,
            person_area_fraction,
        )

        if self._rate is None or self._background is None or self._appearance is None:
            return
        profile = self.profile
        seconds = self._rate.window_frames / self.fps  # the clip's when shorter
        area = person_area_fraction(profile.person_height,
                                    profile.people / max(1, len(profile.frames)),
                                    self.frame_size)  # fmt: skip
        self._person_area = area
        share, sends = self._plate_share_over(min(seconds, WINDOW_S))
        self._rate.first_plate_share = share
        self.stats.profile += (f"; first plate {share:.2f} of the first {seconds:.3g} s "
                               f"(people cover {area:.1%} of the frame, each sent "
                               f"{sends:.2g} times)")  # fmt: skip

    def _plate_share_over(self, seconds: float) -> tuple[float, float]:
        """The plate's share of ``seconds`` of budget, sent once, against the people's
        (covering the profile's ``_person_area``), each sent once and again every
        ``appearance_refresh_s``: ``(share, times each person is sent)``
        (:func:`~codec.scaffold.rate.cold_start_plate_share`)."""
        from semcodec.codec.scaffold.rate import cold_start_plate_share

        sends = 1.0 + seconds / self.config.appearance_refresh_s
        return cold_start_plate_share(self._person_area, sends), sends

    def _resolve_plate_refine(self) -> None:
        """Replaces a per-camera ``plate_refine`` by the share the camera calls for, in the
        config the header records: with a tiled layout (small people) the share the first
        plate's rule gives over a plate period
        (:func:`~codec.scaffold.rate.cold_start_plate_share` of the people's area, each sent
        once per ``appearance_refresh_s`` of the period; 0.5 on PETS09-S2L1-full, where 0.25,
        0.4 and 0.5 gave whole-frame ST-LPIPS 0.152 / 0.133 / 0.120 and MODA 0.417 / 0.386 /
        0.389 in steady state) or, without a profile,
        :data:`~codec.scaffold.levels.SMALL_PEOPLE_PLATE_REFINE`; else 0 -- and 0 for a clip
        of known length that
        ends before a plate period has passed after its first rate window (tiles start
        after that window and pay back over the period they are shown in; on 42-second
        clips refinement cost MODA: README "What a viewer sees in steady state"). The share
        stays after a scene cut (the header is sent)."""
        from semcodec.codec.scaffold.levels import (
            PLATE_REFINE_PER_CAMERA,
            SMALL_PEOPLE_PLATE_REFINE,
        )
        from semcodec.codec.scaffold.profile import DEFAULT_TILES
        from semcodec.codec.scaffold.rate import window_frames

        if self.config.plate_refine != PLATE_REFINE_PER_CAMERA:
            return
        tiles = self.config.detector_tiles or DEFAULT_TILES
        window = window_frames(self.fps)
        period = self.config.keyframe_interval or window  # no plate period: one more window
        short = 0 < self._expected_frames < window + period
        share = SMALL_PEOPLE_PLATE_REFINE if tiles > 1 and not short else 0.0
        if share and self._person_area is not None and self.config.keyframe_interval:
            # the plate's share of a period by the first plate's rule: pixels sent once
            # against the people's, sent at every refresh of the period
            share, _ = self._plate_share_over(self.config.keyframe_interval / self.fps)
        self.config = dataclasses.replace(self.config, plate_refine=share)
        if self.profile is not None:
            self.stats.profile += f"; plate refinement {share:g} of the target"

    def _follow_scene(self, frame: np.ndarray, cut: bool) -> None:
        """After a scene cut, chooses the camera's profile again on the first
        :data:`~codec.scaffold.profile.PROFILE_SECONDS` of the new scene (the frames
        :func:`~codec.scaffold.profile.profile_frame_indices` picks, kept as they come) and
        moves the tracker's detector to its layout. The layout is the edge's own: the cloud
        draws the boxes it is sent, so the stream header keeps the start-up choice and
        :attr:`EncoderStats.profile` says what was chosen after each cut."""
        from semcodec.codec.scaffold.profile import (
            PROFILE_SECONDS,
            choose_profile,
            profile_frame_indices,
        )

        span = max(1, round(PROFILE_SECONDS * self.fps))
        if cut:
            self._scene = (self._index, set(profile_frame_indices(span)), [])
        if self._scene is None:
            return
        start, wanted, kept = self._scene
        if self._index - start in wanted:
            kept.append(frame)
        if self._index - start < span - 1:
            return
        self._scene = None
        detector = self._people.detector
        with _Timer(self.stats, "profile"):
            self.profile = choose_profile(kept, detector)
        self.stats.profile += (f"; after the scene cut at frame {start + 1}: "
                               f"{self.profile.describe()}")  # fmt: skip
        self._people.detector = detector.with_config(
            dataclasses.replace(detector.config, tiles=self.profile.tiles))

    @property
    def lookahead_frames(self) -> int:
        """How many frames to read ahead for :meth:`prime`: the plate's window in time
        (``plate="median"``) and the start-up seconds of the camera's profile (tiles chosen
        per camera), at most :data:`MAX_LOOKAHEAD_FRAMES` (the frames are held in memory
        until coded); 0 when the level needs neither."""
        from semcodec.codec.scaffold.profile import PROFILE_SECONDS

        frames = 0
        if self._background is not None:
            frames = self._background.window * self._background.stride
        if self.config.detector_tiles == 0 and not self._primed:
            frames = max(frames, round(PROFILE_SECONDS * self.fps))
        return min(frames, MAX_LOOKAHEAD_FRAMES)

    @property
    def primed(self) -> bool:
        """Whether :meth:`prime` has run (the header then holds the camera's profile)."""
        return self._primed

    def start(self, frames: Iterable[np.ndarray]) -> Iterator[np.ndarray]:
        """Reads the look-ahead frames now and primes the encoder with them (so that
        :meth:`header` names the chosen layout before any unit is sent); returns all
        ``frames``, the look-ahead ones first."""
        return _primed_frames(self, frames)

    def _keyframe_picture(self, frame: np.ndarray) -> bytes:
        """The intra-coded keyframe picture: the frame, or the background plate."""
        picture = frame
        if self._background is not None:
            if self._schedule.last_was_cut:  # the old background is gone
                self._background.reset()
            if not len(self._background):
                self._background.update(frame)
            picture = self._plate_picture()
        return self._code_plate(picture)

    def _code_plate(self, picture: np.ndarray) -> bytes:
        """A keyframe picture or a periodic plate: at the level's quality without a rate
        target, else within the keyframe's byte cap at the size and quality that leave the
        least error (then held as the decoder's plate).

        A periodic keyframe of a stream that keeps its references across it sends the
        background model's plate this way in a frame unit (a plate refresh), so that people
        keep their references and box state -- which renew themselves within
        ``appearance_refresh_s`` anyway, the gradual refresh a decoder that joins late
        needs -- and no burst of new references follows. A scene cut still starts a
        keyframe that resets everything."""
        if self._rate is None:
            return self._intra.encode(picture, self.config.keyframe_quality)
        return self._hold_plate(*self._fit_plate(picture, self._rate.keyframe_cap()))

    def _plate_update(self, scheduled: bool, pending: int) -> SubStream | None:
        """What a frame unit sends of the plate, after ``pending`` bytes of its other
        streams: the periodic plate when ``scheduled``, else a refresh when the savings buy
        a better plate, else a refinement tile; None: nothing."""
        stats = self.stats
        with _Timer(stats, "plate_refresh"):
            data = self._periodic_plate() if scheduled else self._plate_refresh(pending)
        if data:
            stats.plate_refreshes += 1
            return SubStream(SubStreamType.KEYFRAME_IMAGE, data)
        if self.config.plate_refine <= 0:
            return None
        with _Timer(stats, "plate_tile"):
            data = self._plate_tile()
        if not data:
            return None
        stats.plate_tiles += 1
        return SubStream(SubStreamType.PLATE_TILE, data)

    def _periodic_plate(self) -> bytes:
        """The plate of a plate period: the background model's plate within the keyframe's
        cap, unless the plate the decoder holds (refined by tiles, or refreshed from
        savings) is already as close to the model: then ``b""``, and what was saved up for
        it goes to references. A periodic plate in a frame unit is no random-access point
        (a decoder needs the references and box state before it), so renewing the
        background is its only job."""
        picture = self._plate_picture()
        if self._rate is None or self._cloud_plate is None:
            return self._code_plate(picture)
        error, data, decoded = self._fit_plate(picture, self._rate.keyframe_cap())
        if error >= float(np.mean((self._cloud_plate - picture) ** 2)):
            self.stats.plate_periods_kept += 1
            return b""
        return self._hold_plate(error, data, decoded)

    def _plate_picture(self) -> np.ndarray:
        """The background model's plate at the frame size, ``(H, W, 3)`` uint8 RGB."""
        return cv2.resize(self._background.plate(), self.frame_size,
                          interpolation=cv2.INTER_LINEAR)  # fmt: skip

    def _fit_plate(self, picture: np.ndarray, cap: int) -> tuple[float, bytes]:
        """``picture`` coded within ``cap`` bytes at the size (one of the stream's
        :attr:`LevelConfig.keyframe_scales`) and quality that leave the least mean squared
        error against it: ``(error, bytes)``. When no size fits, the smallest coding."""
        from semcodec.codec.scaffold.rate import choose_coding, fit_quality

        options = []
        for coder in self._plate_coders:
            _, data = fit_quality(lambda q, c=coder: c.encode(picture, q), cap)
            decoded = coder.decode(data, self.frame_size).astype(np.float32)
            options.append((float(np.mean((decoded - picture) ** 2)), data, decoded))
        best = choose_coding([len(o[1]) for o in options], [o[0] for o in options], cap)
        return options[best]

    def _hold_plate(self, error: float, data: bytes, decoded: np.ndarray) -> bytes:
        """Records ``data`` as the plate the decoder holds (a refresh must beat its mean
        squared ``error``; ``decoded``, float32, is the picture it decodes to) and returns
        it."""
        self._plate_error, self._plate_retry = error, PLATE_REFRESH_GAIN * len(data)
        self._cloud_plate = decoded
        self._tile_floor[:] = 0.0
        self._tile_target = None  # the errors are against another plate now
        return data

    def _plate_tile(self) -> bytes:
        """One tile of the plate coded again where the edge's background model is furthest
        from what the decoder holds, when the bytes set aside for refinement (a
        ``plate_refine`` share of every frame's budget, less what a periodic plate is being
        repaid from it) buy a better one: the payload is the
        tile's index (one byte) and its intra-coded picture; ``b""`` when none is sent."""
        from semcodec.codec.scaffold.rate import fit_quality

        rate, held = self._rate, self._cloud_plate
        if self._index < rate.window_frames:  # the first plate and references come first
            return b""
        # the plate's share of every frame, less what a periodic plate repays of it now
        share = max(0.0, self.config.plate_refine * rate.frame_bytes - rate.plate_repayment)
        cap = float(rate.keyframe_cap())
        self._tile_credit = min(self._tile_credit + share, cap)
        if held is None or self._tile_credit < min(self._tile_bytes(), cap) \
                or not len(self._background):  # fmt: skip
            return b""
        tiles = plate_tiles(self.frame_size)
        if self._tile_target is None or self._index - self._tile_target[0] >= TILE_PLATE_EVERY:
            target = self._plate_picture().astype(np.float32)
            errors = np.array([np.mean((held[y0:y1, x0:x1] - target[y0:y1, x0:x1]) ** 2)
                               for x0, y0, x1, y1 in tiles])  # fmt: skip
            self._tile_target = (self._index, target, errors)
        _, target, errors = self._tile_target
        open_errors = np.where(errors > self._tile_floor, errors, 0.0)  # none beaten there yet
        index = int(np.argmax(open_errors))
        if open_errors[index] <= 0:
            return b""
        x0, y0, x1, y1 = tiles[index]
        picture = np.clip(target[y0:y1, x0:x1] + 0.5, 0, 255).astype(np.uint8)
        cap = int(self._tile_credit) - 1
        _, data = fit_quality(lambda q: self._tile_coder.encode(picture, q), cap)
        decoded = self._tile_coder.decode(data, (x1 - x0, y1 - y0)).astype(np.float32)
        error = float(np.mean((decoded - target[y0:y1, x0:x1]) ** 2))
        if len(data) > cap or error > (1 - TILE_MIN_GAIN) * errors[index]:
            self._tile_floor[index] = errors[index]  # try elsewhere until the model moves
            return b""
        held[y0:y1, x0:x1] = decoded
        errors[index] = error
        self._tile_credit -= len(data) + 1
        return bytes([index]) + data

    def _tile_bytes(self) -> float:
        """Bytes a refinement tile waits for: the refinement's share of a plate period (of
        a window, without periodic plates) over the grid's tiles, so that each tile is coded
        about once a period at the quality that share buys (tiles coded as soon as
        :data:`MIN_TILE_BYTES` were saved up never got better than those few bytes: on
        PETS09-S2L1-full in steady state, 16 KB of such tiles left the plate's part of the
        whole-frame ST-LPIPS at 0.16, where one 34-KB plate gives 0.03)."""
        rate = self._rate
        period = self.config.keyframe_interval or rate.window_frames
        share = self.config.plate_refine * rate.frame_bytes * period / PLATE_TILE_GRID**2
        return max(float(MIN_TILE_BYTES), share)

    def _plate_refresh(self, pending: int) -> bytes:
        """The plate coded again at a better quality than the decoder holds, when the rate
        has saved up enough for it beyond this frame's ``pending`` bytes (else ``b""``).
        After a try that bought no better quality, the next waits for
        :data:`PLATE_REFRESH_GAIN` times the bytes of that try."""
        budget = self._rate.plate_budget(pending)
        if budget < self._plate_retry or not len(self._background):
            return b""
        error, data, decoded = self._fit_plate(self._plate_picture(), budget)
        if error >= self._plate_error or len(data) > budget:
            self._plate_retry = PLATE_REFRESH_GAIN * budget
            return b""
        return self._hold_plate(error, data, decoded)

    def _smooth(self, tracks):
        """Boxes with their size smoothed over time per track (exponentially, weight
        ``1 - a`` on the new size) and their centre as detected: a person's drawn size
        does not jitter with the detector's."""
        from semcodec.codec.core.types import Tracks

        a = BOX_SIZE_SMOOTHING
        boxes = np.asarray(tracks.boxes, np.float64).copy()
        sizes = {}
        for k, tid in enumerate(tracks.ids.tolist()):
            x1, y1, x2, y2 = boxes[k]
            size = np.array([x2 - x1, y2 - y1])
            old = self._sizes.get(tid)
            if old is not None:
                size = a * old + (1 - a) * size
            sizes[tid] = size
            cx, cy = (x1 + x2) / 2, (y1 + y2) / 2
            boxes[k] = [cx - size[0] / 2, cy - size[1] / 2, cx + size[0] / 2, cy + size[1] / 2]
        self._sizes = sizes
        return Tracks(boxes.astype(np.float32), tracks.scores, tracks.ids)

    def _code_boxes(self, scaffold: FrameScaffold) -> SubStream:
        coder = self._coders.boxes
        data = coder.encode(scaffold.tracks, self._coders.previous_boxes)
        scaffold.tracks = coder.quantize(scaffold.tracks)
        self._coders.previous_boxes = coder.update_state(self._coders.previous_boxes,
                                                         scaffold.tracks)  # fmt: skip
        return SubStream(SubStreamType.TRACKS, data)

    def _estimate_poses(self, frame: np.ndarray, tracks: Tracks, wanted: np.ndarray) -> list:
        """The sparse poses (quantized on their decoded boxes) of the people of ``tracks``
        where ``wanted``; the pose model's people of presence under 0.5 are left out."""
        if not wanted.any():
            return []
        subset = Tracks(tracks.boxes[wanted], tracks.scores[wanted], tracks.ids[wanted])
        with _Timer(self.stats, "pose"):
            poses = self._body.estimate(frame, subset)
        box = dict(zip(tracks.ids.tolist(), np.asarray(tracks.boxes), strict=True))
        return [self._coders.sparse.quantize(p.track_id, p.keypoints, p.visibility,
                                             box[p.track_id]) for p in poses]  # fmt: skip

    def _sparse_poses(self, frame: np.ndarray, scaffold: FrameScaffold) -> list:
        """This frame's sparse poses before the references are chosen: everyone's on every
        ``pose_every``-th frame, else those of the people without one yet."""
        coders, ids = self._coders, scaffold.tracks.ids.tolist()
        due = self._index % self.config.pose_every == 0
        wanted = np.array([due or tid not in coders.previous_sparse for tid in ids], bool)
        return self._estimate_poses(frame, scaffold.tracks, wanted)

    def _code_sparse_poses(self, frame: np.ndarray, scaffold: FrameScaffold,
                           sent: list, pending: int = 0) -> SubStream | None:  # fmt: skip
        """Codes ``sent`` and the poses of the people given a reference in this frame
        without one (the cloud keeps a reference with its pose; the edge's mirror of that
        memory is told the pose each was sent with); sets ``scaffold.body_poses`` as the
        decoder will. None: no pose sent.

        References come first, the pose is paid from what they leave: with a rate target,
        when the account cannot pay this frame's poses after the ``pending`` bytes already
        chosen for it (the boxes, the references), only the poses the cloud cannot do
        without are sent (people without one yet, people given a reference now) and the
        others are held. Paid first, the pose had taken the references' bytes: on
        PETS09-S2L1-full 501-620 in steady state at 0.002 BPP every person was lost
        (journal, issue 39)."""
        coders, tracks = self._coders, scaffold.tracks
        ids, previous = tracks.ids.tolist(), coders.sparse_previous()
        data = None  # the payload of ``sent`` once coded (the coder is order-independent)
        if self._rate is not None and sent:
            with _Timer(self.stats, "code_pose"):
                data = coders.sparse.encode(sent, ids, previous)
            if len(data) > self._rate.balance - pending:
                sent = [p for p in sent if p.track_id not in coders.previous_sparse
                        or p.track_id in scaffold.appearances]  # fmt: skip
                data = None
        have = {p.track_id for p in sent}
        extra = np.array([tid in scaffold.appearances and tid not in have for tid in ids], bool)
        if extra.any():
            sent, data = [*sent, *self._estimate_poses(frame, tracks, extra)], None
        sent = sorted(sent, key=lambda p: p.track_id)
        if self.config.pose_refresh and self._appearance is not None:
            by_id = {p.track_id: p for p in sent}
            for tid in scaffold.appearances:
                pose = by_id.get(tid)
                self._appearance.note_pose(tid, None if pose is None else pose.q / pose.steps,
                                           None if pose is None else pose.visible)  # fmt: skip
        if sent and data is None:
            with _Timer(self.stats, "code_pose"):
                data = coders.sparse.encode(sent, ids, previous)
        scaffold.body_poses = coders.advance_sparse(tracks, sent, scaffold.number)
        return SubStream(SubStreamType.SPARSE_POSE, data) if sent else None

    def _select_refs(self, frame: np.ndarray, number: int, scaffold: FrameScaffold,
                     poses: dict | None = None) -> bytes:  # fmt: skip
        from semcodec.codec.scaffold.appearance import pack_refs

        budget = min_age = new_budget = None
        if self._rate is not None:
            budget = self._rate.appearance_budget()
            new_budget = self._rate.new_reference_budget()
            if self._rate.spare():  # bytes saved up: refresh anyone, stalest first
                min_age = 1
        refs = self._appearance.select(frame, number, scaffold.tracks, budget, new_budget,
                                       min_age, poses)  # fmt: skip
        scaffold.appearances = refs
        return pack_refs(refs) if refs else b""

    def end(self) -> Unit:
        """The END unit (its ``seq`` is the number of frames encoded)."""
        unit = Unit(UnitKind.END, self._index)
        self.stats.add_unit(unit)
        return unit


_SCAFFOLD_NAMES = {
    SubStreamType.KEYFRAME_IMAGE: "keyframe picture",
    SubStreamType.SEGMENTATION: "segmentation",
    SubStreamType.POSE: "pose",
    SubStreamType.FLOW: "flow",
    SubStreamType.TRACKS: "box",
    SubStreamType.SPARSE_POSE: "sparse pose",
}


class ScaffoldDecoder:
    """The cloud's decoder for one stream: units -> :class:`DecodedFrame` (exact scaffolds).

    Units must come in stream order: the first a KEYFRAME with seq 0, then seq 1, 2, ...
    without gaps or repeats, then at most one END whose seq is the number of frames. Each
    unit must carry exactly the sub-streams its kind and the header's level config send (each
    once; a METADATA sub-stream is allowed and ignored). Call :meth:`finish` after the last
    unit to check that the stream was complete.

    Args:
        header: the stream's header (it carries every setting the encoder used).
        flow_prior: the flow prior whose sha256 the header names; default: the shipped one.
        limits: what the header may ask for (checked here, before anything is allocated).
        upscale: ``(picture, (width, height)) -> picture``, brings a plate coded smaller to
            the frame size (default: bicubic; the cloud's super-resolution passes its own).

    Raises:
        ScaffoldCodecError (or a subclass): settings that are not a level config
            (:class:`ScaffoldCodecError`), outside ``limits`` (:class:`StreamLimitError`), or a
            flow prior that is not the edge's; :class:`~codec.keyframes.KeyframeError` for an
            unknown keyframe coder.
    """

    def __init__(self, header: StreamHeader, flow_prior=None,
                 limits: StreamLimits = DEFAULT_LIMITS, upscale=None):  # fmt: skip
        from semcodec.codec.entropy.rans import EntropyCodingError

        self.header = header
        self.upscale = upscale  # (picture, (w, h)) -> picture: the plate to the frame size
        try:
            self.config = LevelConfig.from_dict(dict(header.settings))
        except (ValueError, TypeError) as exc:
            raise ScaffoldCodecError(f"stream settings are not a level config: {exc}") from exc
        limits.check(header, self.config)
        self.limits = limits
        self.frame_size = (header.width, header.height)
        try:
            self.flow_prior = flow_prior or default_flow_prior(self.config)
            self._check_prior()
            self._coders = _Coders(self.config, self.flow_prior, self.frame_size)
        except EntropyCodingError as exc:
            raise ScaffoldCodecError(
                f"the stream's entropy coders cannot be set up: {exc}"
            ) from exc
        self._plate_coders = _plate_coders(self.config)
        self._plate: np.ndarray | None = None  # the plate held, refined tile by tile
        self._tile_coder = _tile_coder(self.config)
        self._started = False
        self._next_seq = 0
        self._end_seq: int | None = None

    @property
    def frames_decoded(self) -> int:
        """Frames decoded so far."""
        return self._next_seq

    @property
    def ended(self) -> bool:
        """Whether the END unit was decoded."""
        return self._end_seq is not None

    def _check_prior(self) -> None:
        entry = {m.name: m for m in self.header.models}.get("flow_prior")
        if entry is not None and entry.sha256 and not entry.matches(self.flow_prior.sha256):
            wanted = entry.sha256
            raise ScaffoldCodecError(
                f"the stream was coded with flow prior sha256 {wanted}, this decoder has "
                f"{self.flow_prior.sha256}: pass the prior file the edge used"
            )

    def decode_unit(self, unit: Unit) -> DecodedFrame | None:
        """The decoded frame of a KEYFRAME/FRAME unit; None for END.

        Raises:
            StreamStructureError: the unit is out of order or carries the wrong sub-streams.
            PayloadError: a sub-stream payload does not decode.
            KeyframeError: the keyframe picture does not decode to the frame size.
        """
        self._check_order(unit)
        if unit.kind == UnitKind.END:
            self._end_seq = unit.seq
            return None
        parts = self._parts(unit)
        is_key = unit.kind == UnitKind.KEYFRAME
        if is_key:
            self._coders.reset()
            self._started = True
        scaffold = FrameScaffold(number=unit.seq + 1)
        image = None
        if SubStreamType.KEYFRAME_IMAGE in parts:
            scaffold.keyframe = parts[SubStreamType.KEYFRAME_IMAGE]
            image = self._plate = self._decode_plate(scaffold.keyframe)
        elif SubStreamType.PLATE_TILE in parts:
            image = self._refine_plate(parts[SubStreamType.PLATE_TILE], scaffold.number)
        self._decode_scaffolds(parts, scaffold)
        refs = self._decode_appearance(parts.get(SubStreamType.APPEARANCE), scaffold)
        self._next_seq += 1
        return DecodedFrame(scaffold, self.frame_size, image, refs,
                            plate=self.config.plate != "frame",
                            plate_refresh=image is not None and not is_key,
                            fps=float(self.header.frame_rate))  # fmt: skip

    def _decode_plate(self, data: bytes) -> np.ndarray:
        """The keyframe picture at the frame size, from whichever of the stream's scales it
        was coded at (each size is checked before decoding)."""
        from semcodec.codec.keyframes import KeyframeError, KeyframeSizeError

        for coder in self._plate_coders:
            try:
                return coder.decode(data, self.frame_size, self.upscale)
            except KeyframeSizeError:
                continue
        sizes = ", ".join("x".join(map(str, c.coded_size(self.frame_size)))
                          for c in self._plate_coders)  # fmt: skip
        raise KeyframeError(f"the keyframe picture is none of the stream's sizes ({sizes})")

    def _refine_plate(self, payload: bytes, number: int) -> np.ndarray:
        """The plate held with one tile replaced (``payload``: the tile's index, one byte,
        then its intra-coded picture at the tile's size); a new array, the held one kept
        for the next tile.

        Raises:
            PayloadError: no plate held yet, an index outside the grid, or a picture that
                does not decode to the tile's size.
        """
        from semcodec.codec.keyframes import KeyframeError

        tiles = plate_tiles(self.frame_size)
        if self._plate is None or len(payload) < 2 or payload[0] >= len(tiles):
            raise PayloadError(f"frame {number}: a plate tile needs a plate held and an index "
                               f"below {len(tiles)} followed by a picture")  # fmt: skip
        x0, y0, x1, y1 = tiles[payload[0]]
        try:
            picture = self._tile_coder.decode(payload[1:], (x1 - x0, y1 - y0))
        except KeyframeError as exc:
            raise PayloadError(f"frame {number}: plate tile {payload[0]}: {exc}") from exc
        plate = self._plate.copy()
        plate[y0:y1, x0:x1] = picture
        self._plate = plate
        return plate

    def _decode_appearance(self, payload: bytes | None, scaffold: FrameScaffold) -> dict:
        if payload is None:
            return {}
        from semcodec.codec.scaffold.appearance import AppearanceError, unpack_refs

        try:
            return unpack_refs(payload, scaffold.tracks.ids)
        except AppearanceError as exc:
            raise PayloadError(f"frame {scaffold.number}: {exc}") from exc

    def finish(self) -> None:
        """Checks that the stream was complete: an END unit came, and as many frames as the
        header declares (when it declares a number).

        Raises:
            IncompleteStreamError: the stream ended early.
        """
        declared = self.header.num_frames or None
        got = self._next_seq
        if self._end_seq is None:
            expected = f" of the {declared} the header declares" if declared else ""
            raise IncompleteStreamError(
                f"the stream ends after {got} frame(s){expected} without an END unit "
                "(cut short?)", got, declared)  # fmt: skip
        if declared is not None and got != declared:
            raise IncompleteStreamError(
                f"the stream has {got} frame(s) but its header declares {declared}",
                got, declared)  # fmt: skip

    def _check_order(self, unit: Unit) -> None:
        where = f"unit {unit.kind.name} seq {unit.seq}"
        if self._end_seq is not None:
            raise StreamStructureError(f"{where}: follows the END unit")
        if unit.kind == UnitKind.END:
            if unit.seq != self._next_seq:
                raise StreamStructureError(
                    f"END unit says {unit.seq} frames, {self._next_seq} came before it"
                )
            return  # fmt: skip
        if not self._started and unit.kind != UnitKind.KEYFRAME:
            raise ScaffoldCodecError(f"unit {unit.seq}: decoding must start at a keyframe unit")
        if unit.seq != self._next_seq:
            problem = "repeats an earlier frame" if unit.seq < self._next_seq else "skips frames"
            raise StreamStructureError(
                f"{where}: {problem} (expected seq {self._next_seq}; units must be numbered "
                "0, 1, 2, ... in order)"
            )
        declared = self.header.num_frames
        if declared and unit.seq >= declared:
            raise StreamStructureError(
                f"{where}: the header declares only {declared} frame(s)")  # fmt: skip

    def _expected(self, kind: UnitKind) -> set[SubStreamType]:
        cfg = self.config
        wanted = {SubStreamType.KEYFRAME_IMAGE} if kind == UnitKind.KEYFRAME else set()
        if cfg.sends_segmentation:
            wanted.add(SubStreamType.SEGMENTATION)
        if cfg.sends_pose:
            wanted.add(SubStreamType.POSE)
        if cfg.sends_flow and kind == UnitKind.FRAME:
            wanted.add(SubStreamType.FLOW)
        if cfg.sends_boxes:
            wanted.add(SubStreamType.TRACKS)
        return wanted

    def _parts(self, unit: Unit) -> dict[SubStreamType, bytes]:
        """The unit's payloads by type, checked against what its kind and the level send."""
        where = f"unit {unit.kind.name} seq {unit.seq}"
        parts: dict[SubStreamType, bytes] = {}
        for sub in unit.substreams:
            if sub.type in parts:
                raise StreamStructureError(f"{where}: sub-stream {sub.type.name} appears twice")
            parts[sub.type] = sub.payload
        parts.pop(SubStreamType.METADATA, None)
        wanted = self._expected(unit.kind)
        if self.config.sends_appearance and SubStreamType.APPEARANCE in parts:
            wanted.add(SubStreamType.APPEARANCE)  # optional: only when a reference is sent
        if self.config.sends_sparse_pose and SubStreamType.SPARSE_POSE in parts:
            wanted.add(SubStreamType.SPARSE_POSE)  # optional: only when a pose is sent
        if self.config.plate != "frame" and SubStreamType.KEYFRAME_IMAGE in parts:
            wanted.add(SubStreamType.KEYFRAME_IMAGE)  # optional in a frame: a plate refresh
        if (self.config.plate_refine > 0 and unit.kind == UnitKind.FRAME
                and SubStreamType.PLATE_TILE in parts
                and SubStreamType.KEYFRAME_IMAGE not in parts):  # fmt: skip
            wanted.add(SubStreamType.PLATE_TILE)  # optional in a frame: a plate tile
        extra = sorted(t.name for t in set(parts) - wanted)
        missing = sorted(t.name for t in wanted - set(parts))
        if extra or missing:
            raise StreamStructureError(
                f"{where}: level {self.config.level} settings send "
                f"{sorted(t.name for t in wanted)}; "
                + "; ".join(
                    f"{label} {names}"
                    for label, names in (("unexpected", extra), ("missing", missing))
                    if names
                )  # fmt: skip
            )
        return parts

    def _decode_scaffolds(self, parts: dict[SubStreamType, bytes],
                          scaffold: FrameScaffold) -> None:  # fmt: skip
        from semcodec.codec.entropy.rans import EntropyCodingError

        kind = None
        try:
            if SubStreamType.TRACKS in parts:
                kind = SubStreamType.TRACKS
                boxes = self._coders.boxes
                scaffold.tracks = boxes.decode(parts[kind], self._coders.previous_boxes)
                self._coders.previous_boxes = boxes.update_state(self._coders.previous_boxes,
                                                                 scaffold.tracks)  # fmt: skip
            if self._coders.sparse is not None:
                kind = SubStreamType.SPARSE_POSE
                self._decode_sparse_pose(parts.get(kind), scaffold)
            if SubStreamType.POSE in parts:
                kind = SubStreamType.POSE
                self._decode_pose(parts[kind], scaffold)
            if SubStreamType.SEGMENTATION in parts:
                kind = SubStreamType.SEGMENTATION
                self._decode_segmentation(parts[kind], scaffold)
            if SubStreamType.FLOW in parts:
                kind = SubStreamType.FLOW
                shape = flow_shape(self.frame_size, self.config.flow_scale)
                field_q = self._coders.flow.decode(parts[kind], shape)
                scaffold.flow = Flow(field_q, self.frame_size)
        except EntropyCodingError as exc:
            raise PayloadError(
                f"frame {scaffold.number}: the {_SCAFFOLD_NAMES[kind]} payload does not "
                f"decode ({exc}); the stream is damaged or was not made by a matching encoder"
            ) from exc

    def _decode_sparse_pose(self, payload: bytes | None, scaffold: FrameScaffold) -> None:
        """The frame's sparse poses (``payload`` None: none sent) into the held state and
        ``scaffold.body_poses``."""
        coders, ids = self._coders, scaffold.tracks.ids.tolist()
        sent = []
        if payload is not None:
            sent = coders.sparse.decode(payload, ids, coders.sparse_previous())
            if not sent:
                raise PayloadError(f"frame {scaffold.number}: a sparse pose sub-stream that "
                                   "carries no pose (the edge leaves it out)")  # fmt: skip
        scaffold.body_poses = coders.advance_sparse(scaffold.tracks, sent, scaffold.number)

    def _decode_pose(self, payload: bytes, scaffold: FrameScaffold) -> None:
        poses = self._coders.pose.decode(payload, self._coders.previous_poses)
        self._coders.previous_poses = self._coders.pose.state(poses)
        scaffold.poses = poses

    def _decode_segmentation(self, payload: bytes, scaffold: FrameScaffold) -> None:
        shape = segmentation_shape(self.frame_size, self.config.seg_scale)
        labels = self._coders.seg.decode(payload, self._coders.previous_labels, shape)
        self._coders.previous_labels = labels
        scaffold.segmentation = Segmentation(labels, self.frame_size)
        if not self.config.sends_boxes:
            scaffold.tracks = tracks_from_labels(labels, self.frame_size)


def tracks_from_labels(labels: np.ndarray, frame_size: tuple[int, int]) -> Tracks:
    """People boxes (frame pixels) and ids recovered from a label map.

    Args:
        labels: ``(h, w)`` uint16 label map (0 background).
        frame_size: ``(width, height)`` of the frame the map covers.

    Returns:
        :class:`Tracks`, one box per id in ascending id order, ``x1, y1, x2, y2`` float32 frame
        pixels of the cells the id covers. One pass over the map, whatever the number of ids.
    """
    flat = labels.reshape(-1)
    ids, inverse = np.unique(flat, return_inverse=True)
    if ids.size == 0 or ids[-1] == 0:
        return Tracks.empty()
    h, w = labels.shape
    ys, xs = np.divmod(np.arange(flat.size), w)
    n = ids.size
    x0, y0 = np.full(n, w), np.full(n, h)
    x1, y1 = np.full(n, -1), np.full(n, -1)
    np.minimum.at(x0, inverse, xs)
    np.minimum.at(y0, inverse, ys)
    np.maximum.at(x1, inverse, xs)
    np.maximum.at(y1, inverse, ys)
    keep = ids > 0
    sx, sy = frame_size[0] / w, frame_size[1] / h
    boxes = np.stack([x0[keep] * sx, y0[keep] * sy, (x1[keep] + 1) * sx, (y1[keep] + 1) * sy], 1)
    return Tracks(np.asarray(boxes, np.float32), np.ones(int(keep.sum()), np.float32),
                  ids[keep].astype(np.int32))  # fmt: skip


# ----------------------------------------------------------------------------- files


def encode_frames(frames: Iterable[np.ndarray], config: LevelConfig, fps: float,
                  frame_size: tuple[int, int], num_frames: int = 0, models_dir=None,
                  threads: int = 1, flow_prior=None,
                  ) -> tuple[StreamHeader, list[Unit], EncoderStats]:  # fmt: skip
    """Encodes frames in memory: ``(header, units incl. END, stats)``."""
    encoder = ScaffoldEncoder(config, frame_size, fps, models_dir=models_dir, threads=threads,
                              flow_prior=flow_prior, expected_frames=num_frames)  # fmt: skip
    units = [encoder.encode_frame(frame)[0] for frame in with_lookahead(encoder, frames)]
    units.append(encoder.end())
    header = encoder.header(num_frames or len(units) - 1)
    encoder.stats.stream_bytes["header"] += len(header.to_bytes())
    return header, units, encoder.stats


def with_lookahead(encoder: ScaffoldEncoder, frames: Iterable[np.ndarray]) -> Iterator[np.ndarray]:
    """``frames`` unchanged, after the encoder was primed with the first
    ``encoder.lookahead_frames`` of them (read ahead once and held in memory)."""
    primed = getattr(encoder, "primed", False)  # ScaffoldEncoder.start read ahead already
    yield from (frames if primed else _primed_frames(encoder, frames))


def _primed_frames(encoder, frames: Iterable[np.ndarray]) -> Iterator[np.ndarray]:
    """Reads ``encoder.lookahead_frames`` of ``frames`` now, primes the encoder with them
    and returns all the frames, the look-ahead ones first."""
    frames = iter(frames)
    ahead = list(itertools.islice(frames, encoder.lookahead_frames))
    encoder.prime(ahead)
    return itertools.chain(ahead, frames)


def encode_to_file(path: str | Path, frames: Iterable[np.ndarray], config: LevelConfig,
                   fps: float, frame_size: tuple[int, int], num_frames: int = 0,
                   models_dir=None, threads: int = 1, flow_prior=None) -> EncoderStats:  # fmt: skip
    """Encodes frames to a ``.semc`` file (written atomically: no partial file on error)."""
    header, units, stats = encode_frames(frames, config, fps, frame_size, num_frames,
                                         models_dir, threads, flow_prior)  # fmt: skip
    write_stream(path, header, units)
    return stats


def decode_stream(source, reconstructor=None, flow_prior=None, upscale=None,
                  ) -> Iterator[tuple[DecodedFrame, np.ndarray | None]]:  # fmt: skip
    """Decodes a ``.semc`` file (path, bytes or binary file): yields ``(decoded, frame)``.

    ``frame`` is the reconstruction when a :class:`~codec.reconstruct.Reconstructor` is given;
    ``flow_prior`` must be the prior the edge used when it was not the shipped one;
    ``upscale`` brings the plate from its coded size to the frame's (default bicubic; e.g. a
    :func:`~codec.reconstruct.superres.create_upscaler`).
    """
    header, units = read_stream(source)
    decoder = ScaffoldDecoder(header, flow_prior=flow_prior, upscale=upscale)
    if reconstructor is not None:
        reconstructor.reset()
    for unit in units:
        decoded = decoder.decode_unit(unit)
        if decoded is None:
            break
        image = reconstructor.reconstruct(decoded) if reconstructor is not None else None
        yield decoded, image
    decoder.finish()
