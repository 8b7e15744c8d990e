"""The scaffold codec: frames -> scaffolds -> entropy-coded units, and back, exactly.

:class:`ScaffoldEncoder` (the edge) runs, per frame, keyframe scheduling, person detection and
tracking, segmentation, pose and flow as its :class:`~codec.scaffold.levels.LevelConfig` asks,
quantizes them, entropy-codes them and wraps them in a :class:`~codec.bitstream.Unit`.
:class:`ScaffoldDecoder` (the cloud) parses the units and returns the scaffolds bit for bit
as the edge quantized them, which a :class:`~codec.reconstruct.Reconstructor` turns into
frames. Every temporal context (previous label map, previous poses, adaptive tables) restarts
at each keyframe, so decoding can begin at any keyframe unit.
"""

from __future__ import annotations

import time
from collections import defaultdict
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from fractions import Fraction
from pathlib import Path

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
from semcodec.codec.reconstruct import DecodedFrame
from semcodec.codec.scaffold.levels import LevelConfig
from semcodec.codec.scaffold.types import Flow, FrameScaffold, Segmentation, Tracks

#: Byte-count names of the sub-streams (the benchmark's ``bytes_<name>`` columns).
STREAM_NAMES = {
    SubStreamType.KEYFRAME_IMAGE: "keyframe",
    SubStreamType.SEGMENTATION: "seg",
    SubStreamType.POSE: "pose",
    SubStreamType.FLOW: "flow",
}


class ScaffoldCodecError(RuntimeError):
    """A stream cannot be decoded with this decoder (missing prior, unknown setting)."""


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


@dataclass
class EncoderStats:
    """Bytes and seconds spent, per sub-stream and per stage, over the frames encoded."""

    frames: int = 0
    keyframes: int = 0
    stream_bytes: dict[str, int] = field(default_factory=lambda: defaultdict(int))
    stage_seconds: dict[str, float] = field(default_factory=lambda: defaultdict(float))

    def add_unit(self, unit: Unit) -> None:
        for sub in unit.substreams:
            self.stream_bytes[STREAM_NAMES.get(sub.type, sub.type.name.lower())] += len(sub.payload)
        self.stream_bytes["header"] += unit_overhead_bytes(unit)


class _Timer:
    def __init__(self, stats: EncoderStats, stage: str):
        self.stats, self.stage = stats, stage

    def __enter__(self):
        self.start = time.perf_counter()

    def __exit__(self, *exc):
        self.stats.stage_seconds[self.stage] += time.perf_counter() - self.start


class _Coders:
    """The entropy coders of one stream, with their temporal state (same on both sides)."""

    def __init__(self, config: LevelConfig, flow_prior):
        from semcodec.codec.entropy.flow import FlowCoder
        from semcodec.codec.entropy.pose import PoseCoder
        from semcodec.codec.entropy.segmentation import SegmentationCoder

        self.seg = SegmentationCoder()
        self.pose = PoseCoder(step_px=config.pose_step_px)
        self.flow = FlowCoder(flow_prior, step=config.flow_step_px) if config.sends_flow else None
        self.reset()

    def reset(self) -> None:
        self.seg.reset()
        self.previous_labels: np.ndarray | None = None
        self.previous_poses: dict[int, np.ndarray] = {}


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
        models_dir: where models are looked up first (see :mod:`codec.models`).
        threads: CPU threads for each model runner.
        flow_prior: a :class:`codec.entropy.flow.FlowPrior`; default: the shipped one.
    """

    def __init__(self, config: LevelConfig, frame_size: tuple[int, int], fps: float,
                 models_dir=None, threads: int = 1, flow_prior=None):  # fmt: skip
        from semcodec.codec.keyframes import create_intra_coder
        from semcodec.codec.scaffold.detector import DetectorConfig, PersonDetector
        from semcodec.codec.scaffold.flow import FlowConfig, FlowEstimator
        from semcodec.codec.scaffold.scene import KeyframeSchedule
        from semcodec.codec.scaffold.tracker import ScaffoldDetector

        width, height = frame_size
        if width < 16 or height < 16:
            raise ValueError(f"frames must be at least 16x16, got {width}x{height}")
        self.config, self.frame_size, self.fps = config, (int(width), int(height)), float(fps)
        self.stats = EncoderStats()
        self.flow_prior = flow_prior or default_flow_prior(config)
        self._schedule = KeyframeSchedule(config.keyframe_interval, config.scene_change)
        self._intra = create_intra_coder(config.keyframe_coder, downscale=config.keyframe_scale)
        detector = PersonDetector(DetectorConfig(tiles=config.detector_tiles), models_dir,
                                  threads=threads)  # fmt: skip
        self._people = ScaffoldDetector(detector, detect_every=config.detect_every)
        self._segmenter = self._pose = self._flow = None
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
        self._coders = _Coders(config, self.flow_prior)
        self._previous_frame: np.ndarray | None = None
        self._index = 0
        self._models = self._model_entries(models_dir)

    def _model_entries(self, models_dir) -> tuple[ModelEntry, ...]:
        from semcodec.codec.models import model_spec

        names = ["ssdlite_person"]
        if self.config.sends_segmentation:
            names.append("selfie_segmentation")
        if self.config.sends_pose:
            names.append(self.config.pose_model)
        entries = [ModelEntry(name, model_spec(name).sha256) for name in names]
        if self.config.sends_flow:
            entries.append(ModelEntry("flow_prior", self.flow_prior.sha256))
        return tuple(entries)

    def header(self, num_frames: int = 0) -> StreamHeader:
        """The stream header: size, rate, level, models (with hashes) and every setting."""
        rate = Fraction(self.fps).limit_denominator(1001)
        return StreamHeader(
            width=self.frame_size[0], height=self.frame_size[1], fps_num=rate.numerator,
            fps_den=rate.denominator, level=self.config.level, num_frames=num_frames,
            models=self._models, settings=self.config.to_dict(),
        )  # fmt: skip

    def encode_frame(self, frame: np.ndarray) -> tuple[Unit, FrameScaffold]:
        """Encodes the next ``(H, W, 3)`` uint8 RGB frame.

        Returns:
            the unit to send, and the scaffold exactly as the decoder will reconstruct it.
        """
        if frame.shape != (self.frame_size[1], self.frame_size[0], 3) or frame.dtype != np.uint8:
            raise ValueError(f"expected a {self.frame_size[0]}x{self.frame_size[1]} uint8 RGB "
                             f"frame, got {frame.dtype} {frame.shape}")  # fmt: skip
        number = self._index + 1
        stats, cfg = self.stats, self.config
        with _Timer(stats, "schedule"):
            is_key = self._schedule.is_keyframe(self._index, frame)
        substreams: list[SubStream] = []
        scaffold = FrameScaffold(number=number)
        if is_key:
            self._coders.reset()
            with _Timer(stats, "keyframe"):
                data = self._intra.encode(frame, cfg.keyframe_quality)
            substreams.append(SubStream(SubStreamType.KEYFRAME_IMAGE, data))
            scaffold.keyframe = data
        with _Timer(stats, "detect"):
            tracks = self._people(frame, number)
        scaffold.tracks = tracks
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
        self._previous_frame = frame
        kind = UnitKind.KEYFRAME if is_key else UnitKind.FRAME
        unit = Unit(kind, self._index, tuple(substreams))
        self._index += 1
        stats.frames += 1
        stats.keyframes += int(is_key)
        stats.add_unit(unit)
        return unit, scaffold

    def end(self) -> Unit:
        """The END unit (its ``seq`` is the number of frames encoded)."""
        unit = Unit(UnitKind.END, self._index)
        self.stats.add_unit(unit)
        return unit


class ScaffoldDecoder:
    """The cloud's decoder for one stream: units -> :class:`DecodedFrame` (exact scaffolds).

    Args:
        header: the stream's header (it carries every setting the encoder used).
        flow_prior: the flow prior whose sha256 the header names; default: the shipped one.
    """

    def __init__(self, header: StreamHeader, flow_prior=None):
        from semcodec.codec.keyframes import create_intra_coder

        self.header = header
        try:
            self.config = LevelConfig.from_dict(dict(header.settings))
        except (ValueError, TypeError) as exc:
            raise ScaffoldCodecError(f"stream settings are not a level config: {exc}") from exc
        self.frame_size = (header.width, header.height)
        self.flow_prior = flow_prior or default_flow_prior(self.config)
        self._check_prior()
        self._intra = create_intra_coder(self.config.keyframe_coder,
                                         downscale=self.config.keyframe_scale)  # fmt: skip
        self._coders = _Coders(self.config, self.flow_prior)
        self._started = False

    def _check_prior(self) -> None:
        wanted = {m.name: m.sha256 for m in self.header.models}.get("flow_prior")
        if wanted and wanted != self.flow_prior.sha256:
            raise ScaffoldCodecError(
                f"the stream was coded with flow prior sha256 {wanted}, this decoder has "
                f"{self.flow_prior.sha256}: pass the prior file the edge used"
            )

    def decode_unit(self, unit: Unit) -> DecodedFrame | None:
        """The decoded frame of a KEYFRAME/FRAME unit; None for END."""
        if unit.kind == UnitKind.END:
            return None
        parts = {sub.type: sub.payload for sub in unit.substreams}
        is_key = unit.kind == UnitKind.KEYFRAME
        if is_key:
            self._coders.reset()
            self._started = True
        elif not self._started:
            raise ScaffoldCodecError(f"unit {unit.seq}: decoding must start at a keyframe unit")
        scaffold = FrameScaffold(number=unit.seq + 1)
        image = None
        if SubStreamType.KEYFRAME_IMAGE in parts:
            scaffold.keyframe = parts[SubStreamType.KEYFRAME_IMAGE]
            image = self._intra.decode(scaffold.keyframe, self.frame_size)
        if SubStreamType.POSE in parts:
            poses = self._coders.pose.decode(parts[SubStreamType.POSE],
                                             self._coders.previous_poses)  # fmt: skip
            self._coders.previous_poses = self._coders.pose.state(poses)
            scaffold.poses = poses
        if SubStreamType.SEGMENTATION in parts:
            shape = segmentation_shape(self.frame_size, self.config.seg_scale)
            labels = self._coders.seg.decode(parts[SubStreamType.SEGMENTATION],
                                             self._coders.previous_labels, shape)  # fmt: skip
            self._coders.previous_labels = labels
            scaffold.segmentation = Segmentation(labels, self.frame_size)
            scaffold.tracks = tracks_from_labels(labels, self.frame_size)
        if SubStreamType.FLOW in parts:
            shape = flow_shape(self.frame_size, self.config.flow_scale)
            field_q = self._coders.flow.decode(parts[SubStreamType.FLOW], shape)
            scaffold.flow = Flow(field_q, self.frame_size)
        return DecodedFrame(scaffold, self.frame_size, image)


def tracks_from_labels(labels: np.ndarray, frame_size: tuple[int, int]) -> Tracks:
    """People boxes (frame pixels) and ids recovered from a label map."""
    ids = np.unique(labels[labels > 0])
    if len(ids) == 0:
        return Tracks.empty()
    h, w = labels.shape
    sx, sy = frame_size[0] / w, frame_size[1] / h
    boxes = []
    for track_id in ids:
        ys, xs = np.nonzero(labels == track_id)
        boxes.append([xs.min() * sx, ys.min() * sy, (xs.max() + 1) * sx, (ys.max() + 1) * sy])
    return Tracks(np.asarray(boxes, np.float32), np.ones(len(ids), np.float32),
                  ids.astype(np.int32))  # fmt: skip


# ----------------------------------------------------------------------------- files


def encode_frames(frames: Iterable[np.ndarray], config: LevelConfig, fps: float,
                  frame_size: tuple[int, int], num_frames: int = 0, models_dir=None,
                  threads: int = 1, flow_prior=None,
                  ) -> tuple[StreamHeader, list[Unit], EncoderStats]:  # fmt: skip
    """Encodes frames in memory: ``(header, units incl. END, stats)``."""
    encoder = ScaffoldEncoder(config, frame_size, fps, models_dir=models_dir, threads=threads,
                              flow_prior=flow_prior)  # fmt: skip
    units = [encoder.encode_frame(frame)[0] for frame in frames]
    units.append(encoder.end())
    header = encoder.header(num_frames or len(units) - 1)
    encoder.stats.stream_bytes["header"] += len(header.to_bytes())
    return header, units, encoder.stats


def encode_to_file(path: str | Path, frames: Iterable[np.ndarray], config: LevelConfig,
                   fps: float, frame_size: tuple[int, int], num_frames: int = 0,
                   models_dir=None, threads: int = 1, flow_prior=None) -> EncoderStats:  # fmt: skip
    """Encodes frames to a ``.semc`` file (written atomically: no partial file on error)."""
    header, units, stats = encode_frames(frames, config, fps, frame_size, num_frames,
                                         models_dir, threads, flow_prior)  # fmt: skip
    write_stream(path, header, units)
    return stats


def decode_stream(source, reconstructor=None, flow_prior=None,
                  ) -> Iterator[tuple[DecodedFrame, np.ndarray | None]]:  # fmt: skip
    """Decodes a ``.semc`` file (path, bytes or binary file): yields ``(decoded, frame)``.

    ``frame`` is the reconstruction when a :class:`~codec.reconstruct.Reconstructor` is given;
    ``flow_prior`` must be the prior the edge used when it was not the shipped one.
    """
    header, units = read_stream(source)
    decoder = ScaffoldDecoder(header, flow_prior=flow_prior)
    if reconstructor is not None:
        reconstructor.reset()
    for unit in units:
        decoded = decoder.decode_unit(unit)
        if decoded is None:
            return
        image = reconstructor.reconstruct(decoded) if reconstructor is not None else None
        yield decoded, image
