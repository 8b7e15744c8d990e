"""The edge's scaffold encoder: frames -> scaffolds -> entropy-coded units.

:class:`ScaffoldEncoder` runs, per frame, keyframe scheduling, person detection and
tracking, segmentation, pose and flow as its :class:`~codec.scaffold.levels.LevelConfig`
asks, quantizes them, entropy-codes them and wraps them in a :class:`~codec.bitstream.Unit`;
the keyframe pictures and the plate are :class:`~codec.scaffold.plate.PlateEncoder`'s, the
people's references :class:`~codec.scaffold.appearance.AppearanceSelector`'s, the budget
:class:`~codec.scaffold.rate.RateController`'s. Every temporal context (previous label map,
previous poses, adaptive tables) restarts at each keyframe, as the decoder's
(:mod:`codec.scaffold.decoder`) does.
"""

from __future__ import annotations

import dataclasses
import itertools
from collections.abc import Iterable, Iterator, Sequence
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
    unit_overhead_bytes,
    write_stream,
)
from semcodec.codec.bitstream.tables import level_defaults_id
from semcodec.codec.core.types import Flow, FrameScaffold, Tracks
from semcodec.codec.scaffold.levels import LevelConfig
from semcodec.codec.scaffold.plate.encoder import PlateEncoder
from semcodec.codec.scaffold.streams import (
    EncoderStats,
    StageTimer,
    StreamCoders,
    default_flow_prior,
)

#: The pose model the edge runs for level 1's sparse pose (``LevelConfig.pose_every``).
SPARSE_POSE_MODEL = "pose_landmark_lite"
#: Seconds a tracked person may wait for a reference in the rate's budget before the
#: smallest thumbnail is sent whatever it costs: none, so a person is drawn from a picture of
#: them from their second frame on, never as a grey silhouette (0.75 s left TUD-Stadtmitte
#: 91-179 at 0.002 with 108 silhouette person-frames, at half size with 141-160, the demo's
#: clip with 29 of 272; docs/journal.md, issue 51).
OVERDUE_S = 0.0
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
#: With ``box_rate``, a frame's boxes are left out only while each corner of every box lies
#: within this fraction of the box's height of its constant-velocity prediction.
BOX_PREDICTION_TOLERANCE = 0.1


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
        self._coders = StreamCoders(config, self.flow_prior, self.frame_size)
        #: most frames between two that send boxes (``box_rate``; 1: every frame, and the
        #: header then says no box rate: the stream is one that sends boxes on every frame)
        self.box_every = config.box_every(Fraction(self.fps).limit_denominator(1001))
        if self.box_every == 1 and config.box_rate:
            self.config = dataclasses.replace(self.config, box_rate=0.0)
        self._appearance = self._rate = None
        self.plate = PlateEncoder(config, self.frame_size, self.fps, self.stats,
                                  expected_frames=expected_frames)  # fmt: skip
        if config.sends_appearance:
            from semcodec.codec.scaffold.appearance import AppearanceSelector, WholePersonCheck

            refresh = max(1, round(config.appearance_refresh_s * self.fps))
            overdue = max(1, round(OVERDUE_S * self.fps))
            check = WholePersonCheck(detector) if config.check_refs else None
            self._appearance = AppearanceSelector(config.appearance_quality, refresh,
                                                  overdue_frames=overdue, check=check,
                                                  scale=config.appearance_scale,
                                                  inter=config.appearance_inter,
                                                  bare=config.appearance_vp8,
                                                  from_plate=config.appearance_plate)  # fmt: skip
        self._previous_frame: np.ndarray | None = None
        self._primed = False
        if config.detector_tiles:  # the layout is the level's: so is the refinement share
            self._resolve_plate_refine()
        self._sizes: dict[int, np.ndarray] = {}
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
            self.plate.rate = self._rate

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
        with StageTimer(stats, "schedule"):
            is_key = self._schedule.is_keyframe(self._index, frame)
        # a periodic keyframe of a stream with a plate and references renews the plate only
        scheduled_plate = is_key and self._index > 0 and not self._schedule.last_was_cut \
            and self.plate.background is not None and self._appearance is not None
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
            if self._appearance is not None:
                self._appearance.reset()
            with StageTimer(stats, "keyframe"):
                data = self.plate.keyframe(frame, self._schedule.last_was_cut)
            substreams.append(SubStream(SubStreamType.KEYFRAME_IMAGE, data))
            spread = len(data) if self._index > 0 else 0
            scaffold.keyframe = data
        with StageTimer(stats, "detect"):
            tracks = self._people(frame, number)
        if not is_key:  # the background model votes with the pixels free of people
            self.plate.feed(frame, tracks.boxes)
        if self._coders.boxes is not None:
            tracks = self._smooth(tracks)
        scaffold.tracks = tracks
        if self._coders.boxes is not None:
            with StageTimer(stats, "code_boxes"):
                sub = self._code_boxes(scaffold, is_key)
            if sub is not None:
                substreams.append(sub)
        masks = None
        if self._pose is not None:
            with StageTimer(stats, "pose"):
                poses, masks = self._pose.estimate_with_masks(frame, tracks)
            with StageTimer(stats, "code_pose"):
                data = self._coders.pose.encode(poses, self._coders.previous_poses)
                scaffold.poses = self._coders.pose.quantize(poses)
                self._coders.previous_poses = self._coders.pose.state(scaffold.poses)
            substreams.append(SubStream(SubStreamType.POSE, data))
        if self._segmenter is not None:
            with StageTimer(stats, "segment"):
                seg = self._segmenter.segment(frame, tracks, masks=masks)
            with StageTimer(stats, "code_seg"):
                data = self._coders.seg.encode(seg.labels, self._coders.previous_labels)
            self._coders.previous_labels = seg.labels
            scaffold.segmentation = seg
            substreams.append(SubStream(SubStreamType.SEGMENTATION, data))
        if self._flow is not None and not is_key and self._previous_frame is not None:
            with StageTimer(stats, "flow"):
                flow = self._flow.estimate(self._previous_frame, frame)
            with StageTimer(stats, "code_flow"):
                data = self._coders.flow.encode(flow.field)
                scaffold.flow = Flow(self._coders.flow.quantize(flow.field), self.frame_size)
            substreams.append(SubStream(SubStreamType.FLOW, data))
        sparse = self._sparse_poses(frame, scaffold) if self._body is not None else None
        if self._appearance is not None:
            mirror = None
            if sparse is not None and self.config.pose_refresh:
                mirror = self._coders.cloud_poses(scaffold.tracks, sparse)
            with StageTimer(stats, "appearance"):
                refs = self._select_refs(frame, number, scaffold, mirror)
            if refs:
                substreams.append(SubStream(SubStreamType.APPEARANCE, refs))
        if sparse is not None:  # after the references: each is sent with its pose
            pending = sum(len(sub.payload) for sub in substreams)
            sub = self._code_sparse_poses(frame, scaffold, sparse, pending)
            if sub is not None:
                substreams.append(sub)
        if scheduled_plate or (not is_key and self.plate.background is not None
                               and self._rate is not None):  # fmt: skip
            pending = sum(len(sub.payload) for sub in substreams)
            sub = self.plate.update(self._index, scheduled_plate, pending)
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
            frames = self.plate.spread_frames(self._index)
            if spread and frames:
                self._rate.spread_plate(spread, frames)
        return unit, scaffold


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
            with StageTimer(self.stats, "profile"):
                self.profile = choose_profile(startup, detector)
            self.stats.profile = self.profile.describe()
            self.config = dataclasses.replace(self.config, detector_tiles=self.profile.tiles)
            self._people.detector = detector.with_config(
                dataclasses.replace(detector.config, tiles=self.profile.tiles))
        self.plate.prime(frames, self._lookahead_people)
        if self.profile is not None:
            self._split_budget(frames)
        self._resolve_plate_refine()
        if self.box_every > 1:
            self.stats.profile += (f"; boxes at least every {self.box_every} frames "
                                   f"({self.fps:g} fps, box_rate {self.config.box_rate:g})")

    def _lookahead_people(self, index: int, frame: np.ndarray) -> np.ndarray:
        """``(N, 4)`` float32 boxes (frame pixels) of the people the detector finds (score
        >= the tracker's) on look-ahead frame ``index`` (0-based), for the first plate; the
        detections are kept for the tracker, which would run the same detector on that
        frame when it is coded."""
        detections = self._people.detector.detect(frame)
        self._people.prefetch(index + 1, detections)
        return detections.above(self.config.detector_threshold).boxes

    def _split_budget(self, frames: Sequence[np.ndarray]) -> None:
        """The first window's budget split between the plate and the people by the stream's
        priority (:meth:`~codec.scaffold.plate.encoder.PlateEncoder.choose_split`); the
        references' quality it chose goes in the header's config."""
        with StageTimer(self.stats, "split"):
            split = self.plate.choose_split(frames, self.profile, self.config.priority,
                                            self._appearance is not None)  # fmt: skip
        if split is not None:
            self._appearance.quality = split.quality
            self.config = dataclasses.replace(self.config, appearance_quality=split.quality)

    def _resolve_plate_refine(self) -> None:
        """Records in the header's config the refinement share the plate chose for the
        camera (:meth:`~codec.scaffold.plate.encoder.PlateEncoder.resolve_refine`)."""
        from semcodec.codec.scaffold.profile import DEFAULT_TILES

        share = self.plate.resolve_refine(self.config.detector_tiles or DEFAULT_TILES,
                                          profiled=self.profile is not None)  # fmt: skip
        self.config = dataclasses.replace(self.config, plate_refine=share)

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
        with StageTimer(self.stats, "profile"):
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

        frames = self.plate.lookahead_frames
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

    def _code_boxes(self, scaffold: FrameScaffold, is_key: bool) -> SubStream | None:
        """The frame's boxes as the decoder will have them (into ``scaffold.tracks``) and
        their sub-stream; None when they are left out (``box_rate``: the same people, each
        near their prediction, fewer than :attr:`box_every` frames after the last sent)."""
        coders = self._coders
        coder, previous, ahead = coders.boxes, coders.previous_boxes, coders.boxes_ahead
        tracks = coder.snap(scaffold.tracks, previous, self.config.box_tolerance, ahead)
        if not is_key and ahead[0] < self.box_every:
            predicted = coder.stand_in(tracks, previous, ahead, BOX_PREDICTION_TOLERANCE)
            if predicted is not None:
                scaffold.tracks = predicted
                coders.advance_boxes(None)
                return None
        scaffold.tracks = tracks
        data = coder.encode(tracks, previous, ahead)
        coders.advance_boxes(tracks)
        return SubStream(SubStreamType.TRACKS, data)

    def _estimate_poses(self, frame: np.ndarray, tracks: Tracks, wanted: np.ndarray) -> list:
        """The sparse poses (quantized on their decoded boxes) of the people of ``tracks``
        where ``wanted``; the pose model's people of presence under 0.5 are left out."""
        if not wanted.any():
            return []
        subset = Tracks(tracks.boxes[wanted], tracks.scores[wanted], tracks.ids[wanted])
        with StageTimer(self.stats, "pose"):
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
            with StageTimer(self.stats, "code_pose"):
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
            with StageTimer(self.stats, "code_pose"):
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
        plate = self.plate.held_picture() if self.config.appearance_plate else None
        refs = self._appearance.select(frame, number, scaffold.tracks, budget, new_budget,
                                       min_age, poses, plate)  # fmt: skip
        scaffold.appearances = refs
        return pack_refs(refs) if refs else b""

    def end(self) -> Unit:
        """The END unit (its ``seq`` is the number of frames encoded)."""
        unit = Unit(UnitKind.END, self._index)
        self.stats.add_unit(unit)
        return unit


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
