"""Levels 0–3: named presets of what the scaffold codec sends, at which resolution and precision.

=====  ==============================================================================
level  content
=====  ==============================================================================
0      coarse person segmentation (1/16 of the frame size, e.g. 48x36 at 768x576),
       one keyframe at the start (and on scene change), half-size HEVC intra at low
       quality. No pose, no flow. The fewest bits: who is where.
1      who is where and what they look like: a person-free background plate (the
       temporal median of 10 s, half-size HEVC intra) every 300 frames and on scene
       change, tracked boxes in 2-px steps every frame, and a small appearance reference
       (crop and mask, WebP) of each person when they appear and when they change;
       rate-controlled to 0.004 bits per pixel by default.
2      person segmentation at 1/8 plus BlazePose keypoints (lite model, 2-px steps), flow at 1/8 in
       0.5-px steps, a keyframe every 75 frames at full size.
3      everything finer: segmentation at 1/4, pose with the full model in 1-px steps,
       flow at 1/8 in 0.25-px steps, a keyframe every 30 frames at higher quality.
=====  ==============================================================================

Every number is a field of :class:`LevelConfig`; ``LEVELS[n]`` are the presets and
``level_config(n, **overrides)`` derives a variant (the stream header records the choices,
so a decoder never needs to know the preset table).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass


@dataclass(frozen=True)
class LevelConfig:
    """What one level sends. Scales are fractions of the frame size; steps are frame pixels.

    Attributes:
        level: the preset number 0–3 this config derives from.
        seg_scale: label-map size as a fraction of the frame (0: no segmentation).
        pose_model: ``"pose_landmark_lite"`` / ``"pose_landmark_full"``, or ``""`` for no pose.
        pose_step_px: keypoint quantization step.
        flow_scale: flow-grid size as a fraction of the frame (0: no flow).
        flow_step_px: flow quantization step.
        keyframe_interval: frames between keyframes (0: only the first frame and scene cuts).
            With a median plate and appearance references (level 1) a periodic keyframe
            sends the plate again in a frame unit and keeps the references (a plate refresh);
            only the first frame and scene cuts reset them.
        keyframe_coder: intra coder name (``hevc``, ``av1``, ``webp``).
        keyframe_quality: 0–100, higher is better (the coder maps it to its own scale).
        keyframe_scale: keyframes are coded at this fraction of the size, upscaled on decode.
        plate_scales: with a rate target, other fractions of the size a keyframe or plate
            refresh may be coded at, comma-separated (``"0.5,0.75,1"``): each picture takes the
            one that leaves the least squared error within its byte cap. ``""``: only
            ``keyframe_scale``.
        plate_refine: with a rate target and a median plate, the share of the target spent
            refining the plate the decoder holds, one tile of a
            :data:`~codec.scaffold.plate.coding.PLATE_TILE_GRID` x ``PLATE_TILE_GRID`` grid at a
            time (the tile whose picture is furthest from the edge's background model, at
            the best quality the bytes set aside so far buy), so that a static camera's
            background converges over minutes without a burst of bytes; tiles start once
            the stream's first 10-second window has passed (its first plate and references
            are paid first). 0: off. :data:`PLATE_REFINE_PER_CAMERA` (level 1's preset):
            chosen per stream by the edge: a stream whose camera has a tiled layout
            (small people: most of the picture is background, and references are cheap)
            refines with :data:`SMALL_PEOPLE_PLATE_REFINE`; one window (large people, who
            need the bytes for references) or a clip of known length shorter than its first
            10-s window plus one plate period (it ends before the tiles pay back) does not.
            The header records the share chosen (README "What a viewer sees in steady
            state").
        scene_change: also send a keyframe when the scene changes.
        detect_every: run the person detector on every k-th frame, track in between.
        detector_tiles: 0: chosen per camera by the edge from its start-up frames
            (:func:`codec.scaffold.profile.choose_profile`; the header records the choice);
            1: the whole frame; 2: 2x2 tiles (plus the whole frame with
            ``detector_full_frame``).
        detector_threshold: the person detector's score threshold (and the tracker's).
        detector_full_frame: with ``detector_tiles > 1``, also detect on the whole frame.
        box_step_px: quantization step of the tracked boxes sent as their own stream
            (0: no box stream; the boxes then come from the label map).
        appearance_quality: WebP quality 1..100 of the per-track appearance references
            (0: no appearance stream).
        appearance_refresh_s: a person's reference is refreshed after this many seconds.
        appearance_scale: a refreshed reference is this fraction (0..1] of the person's full
            reference size (the box, at most :data:`codec.scaffold.appearance.MAX_REF_HEIGHT`
            high); a person's first reference stays full size. Below 1: cheaper refreshes, so
            more of them for the same bytes, for a decoder that keeps the detail it had
            (``restore``, issue 24; README "Cheaper references").
        check_refs: send a reference only where the person detector, run again on the
            box's surroundings, finds a whole person there
            (:class:`codec.scaffold.appearance.WholePersonCheck`; the edge's choice, the
            cloud does not depend on it). Off by default: measured at level 1, MODA
            +3.8 points on TUD-Stadtmitte 91-179, 0 on TUD 1-90 and zoomed PETS 501-795,
            -1.7 on PETS 201-500 and -4.8 on PETS 501-795 (README "Any camera").
        plate: ``"frame"``: the keyframe picture is the frame itself; ``"median"``: it is the
            person-free background plate the edge builds from many frames
            (:mod:`codec.scaffold.plate.background`).
        target_bpp: the rate controller's target in bits per pixel (0: no rate control).
        pose_every: with the box stream, send each tracked person's sparse body pose (13
            joints relative to the decoded box, :mod:`codec.entropy.sparse_pose`; the pose
            model ``pose_landmark_lite`` on the decoded boxes) every ``pose_every``-th frame,
            and on the first frame a person is seen (0: no sparse pose). The cloud holds a
            person's last pose on the frames between.
        pose_steps: the sparse pose's quantization steps per box height (4..256).
        pose_refresh: with ``pose_every``, the edge refreshes a person's reference by the
            poses a cloud that remembers every reference has of them
            (:class:`codec.scaffold.appearance.AppearanceSelector`: not while one is near the
            pose now, soon when none is; for ``decoder=animate``); 0: by time alone.
        track_low_score: detections scoring from this up to ``detector_threshold`` may
            continue a confirmed track, never start one (two-threshold association, as in
            ByteTrack, Zhang et al. 2022: a person whose score dips for a few frames keeps
            their track; a weak false alarm cannot start one). 0: off, every detection
            below ``detector_threshold`` is dropped.
        priority: how the edge splits a rate target between the plate and the people
            (:data:`PRIORITIES`). ``balanced`` (the default): the first plate takes the
            pixels' share of the first window (each person's pixels counted at every
            refresh) and the references the level's quality. ``people`` and ``scene``: the
            split is chosen per camera from its start-up frames by each part's error per
            byte (``codec.scaffold.plate.share.choose_split``), the people's error weighed
            by half of a viewer's attention (``people``) or a quarter of their area
            (``scene``); it sets the first plate's share and the references' quality
            (``appearance_quality`` in the header). Measured on the short-clip protocol
            (docs/journal.md, issue 51): ``people`` gives more MODA on most cameras and a
            worse whole frame on all, and loses everything on the demo's small people, so it
            is not the default. Only a level that splits a budget (:attr:`splits_budget`)
            takes another than the default.

        appearance_inter: a refresh of a person's reference may be coded against their
            previous one (an HEVC P-picture, :mod:`codec.scaffold.interref`) where that is
            fewer bytes than a whole WebP at its PSNR; the APPEARANCE payload then holds a
            code per reference (:mod:`codec.scaffold.appearance`). False: whole WebPs, the
            payload as streams before issue 51 have it. On at level 1: on the short clips
            (four cameras at 0.002 and 0.004 BPP) MODA +23.6 points summed over the eight
            (zoomed PETS +15.9 and +10.1, others within 2), person-region ST-LPIPS better by
            0.013 summed; PETS09-S2L1-full 501-795 MODA 0.382 -> 0.385 and 0.464 -> 0.433,
            person region 0.272 -> 0.271 and 0.230 -> 0.224; the edge's live encode of
            PETS 501-700 1.22x the time (median of three pairs, 0.97-1.43)
            (docs/journal.md, issue 51, fifth session). Two encodes of the same frames once
            gave different references (libx265 read memory it had not written in pictures
            one CTU wide, which :data:`codec.scaffold.interref.MIN_SIDE` now avoids).
        appearance_vp8: each appearance reference's WebP is sent without its container (the
            VP8 frame alone, 20 bytes fewer; :func:`codec.scaffold.appearance.strip_container`),
            which the decoder puts back: the same pictures for fewer bytes. On at level 1.
        appearance_plate: with ``appearance_inter``, a reference that would be coded whole
            (a new person's first, one replacing a reference of another shape) may be coded
            instead as a P-picture predicted from the plate under the person's box
            (:func:`codec.scaffold.interref.plate_region`), where that costs fewer bytes at
            the WebP's PSNR: the background around the person comes from the plate the
            decoder holds. On at level 1: the pictures a level-1 encode codes whole take
            1.35x (the demo's sample) to 1.63x (TUD-Stadtmitte 91-179) fewer bytes at the
            WebP's PSNR or better; on the short clips person-region ST-LPIPS better on seven
            of eight cells (0.137 summed), MODA +19.6 points summed (TUD +5.7 to +12.1, PETS
            -1.5 to -6.4), TUD at half size's rate 2.07 -> 1.87 and 1.37 -> 1.26 of the
            target; PETS09-S2L1-full 501-795 MODA 0.336 -> 0.312 and 0.400 -> 0.371, person
            region equal; the demo's stream 1.13 -> 1.07 of its target (docs/journal.md,
            issue 51, sixth session).
        box_tolerance: the edge may send a tracked box up to this fraction of its height
            away from the detected one, toward the decoder's constant-velocity prediction
            (a dead zone on the box residuals, :meth:`codec.entropy.boxes.BoxCoder.snap`):
            the detector's jitter costs no bytes. The edge's choice; the cloud does not
            depend on it. A corner moves at most
            :data:`codec.entropy.boxes.MAX_ZONE_STEPS` steps. 0 (every box as detected, to
            the step) at every level: a one-step zone cut the boxes by 10-26 % and lifted MODA
            on PETS 501-560, zoomed PETS and TUD at half size, but cost TUD-Stadtmitte 91-179
            3.4 and 8.7 points and the demo's small people 0.044 of person-region ST-LPIPS
            (docs/journal.md, issue 51, fourth session).
        box_rate: about the fewest box updates a second the edge sends (0: boxes on every
            frame; more are sent where people come, leave or stray from their prediction).
            On a faster camera a frame may leave its boxes out: the cloud draws every person
            at the constant-velocity prediction of their last sent boxes
            (:meth:`codec.entropy.boxes.BoxCoder.predicted`). The edge sends them anyway when
            a person appears or leaves, or when a box strays from its prediction by more than
            :data:`codec.scaffold.encoder.BOX_PREDICTION_TOLERANCE` of its height; at most
            ``round(fps / box_rate) - 1`` frames in a row go without (a decoder refuses a
            stream that leaves out more: :meth:`box_every`). 12 at level 1: a
            camera of 18 fps or more (25, 30) may send boxes on every 2nd frame only (one
            under 18 fps, such as PETS's 7, on every frame: its stream is unchanged). On
            TUD-Stadtmitte 91-179 (25 fps) and at half size, 0.002 and 0.004 BPP cold: the
            boxes 1,363 -> 895 bytes (1,175 -> 771 at half size), half size's rate 1.87 ->
            1.64 and 1.26 -> 1.15 of the target, MODA +2.3 points summed over the four,
            person-region ST-LPIPS equal (0.919 and 0.920 summed); 8 (every 3rd frame) sent
            fewer bytes again (half size 1.57 and 1.11) for 3.9 points less MODA than none
            (docs/journal.md, issue 51, seventh session).

    ``pose_every``, ``pose_steps``, ``pose_refresh``, ``track_low_score``, ``priority``,
    ``appearance_inter``, ``box_tolerance``, ``appearance_vp8``, ``appearance_plate`` and
    ``box_rate`` are left out of :meth:`to_dict` (and so of a stream header) at their
    defaults: streams written before they existed read as without them, so their defaults
    never change.
    """

    level: int
    seg_scale: float
    pose_model: str
    pose_step_px: float
    flow_scale: float
    flow_step_px: float
    keyframe_interval: int
    keyframe_coder: str = "hevc"
    keyframe_quality: int = 40
    keyframe_scale: float = 1.0
    plate_scales: str = ""
    plate_refine: float = 0.0
    scene_change: bool = True
    detect_every: int = 1
    detector_tiles: int = 0
    detector_threshold: float = 0.5
    detector_full_frame: bool = True
    box_step_px: float = 0.0
    appearance_quality: int = 0
    appearance_refresh_s: float = 4.0
    appearance_scale: float = 1.0
    check_refs: bool = False
    plate: str = "frame"
    target_bpp: float = 0.0
    pose_every: int = 0
    pose_steps: int = 16
    pose_refresh: bool = True
    track_low_score: float = 0.0
    priority: str = "balanced"
    appearance_inter: bool = False
    box_tolerance: float = 0.0
    appearance_vp8: bool = False
    appearance_plate: bool = False
    box_rate: float = 0.0

    def __post_init__(self) -> None:
        if self.level not in LEVEL_NUMBERS:
            raise ValueError(f"level must be one of {LEVEL_NUMBERS}, got {self.level}")
        for name in ("seg_scale", "flow_scale"):
            value = getattr(self, name)
            if not 0 <= value <= 1:
                raise ValueError(f"{name} must be in [0, 1], got {value}")
        for name in ("keyframe_scale", "appearance_scale"):
            if not 0 < getattr(self, name) <= 1:
                raise ValueError(f"{name} must be in (0, 1], got {getattr(self, name)}")
        try:
            scales = self.keyframe_scales
        except ValueError:
            raise ValueError(f"plate_scales must be numbers separated by commas, got "
                             f"{self.plate_scales!r}") from None  # fmt: skip
        if not all(0 < v <= 1 for v in scales) or len(scales) > 4:
            raise ValueError(f"plate_scales must be at most 4 numbers in (0, 1], got "
                             f"{self.plate_scales!r}")  # fmt: skip
        if not (0 <= self.plate_refine < 1 or self.plate_refine == PLATE_REFINE_PER_CAMERA):
            raise ValueError(f"plate_refine must be in [0, 1) or {PLATE_REFINE_PER_CAMERA} "
                             f"(per camera), got {self.plate_refine}")  # fmt: skip
        if not 0 <= self.keyframe_quality <= 100:
            raise ValueError(f"keyframe_quality must be 0..100, got {self.keyframe_quality}")
        if self.keyframe_interval < 0 or self.detect_every < 1:
            raise ValueError("keyframe_interval must be >= 0 and detect_every >= 1")
        if self.pose_model and self.pose_step_px <= 0 or self.flow_scale and self.flow_step_px <= 0:
            raise ValueError("quantization steps must be > 0")
        if self.appearance_plate and not self.appearance_inter:
            raise ValueError("appearance_plate codes references as HEVC P-pictures: it needs "
                             "appearance_inter (to turn inter coding off at level 1, set "
                             "appearance_plate=False too)")  # fmt: skip
        if not 0 <= self.box_tolerance < 0.5:
            raise ValueError(f"box_tolerance must be in [0, 0.5), got {self.box_tolerance}")
        if not (self.box_step_px >= 0 and 0 <= self.appearance_quality <= 100):
            raise ValueError("box_step_px must be >= 0 and appearance_quality 0..100")
        if self.appearance_quality and not self.box_step_px:
            raise ValueError("appearance references need the box stream (box_step_px > 0)")
        if not 0 <= self.detector_tiles <= 4:
            raise ValueError(f"detector_tiles must be 0 (per camera) .. 4, got "
                             f"{self.detector_tiles}")  # fmt: skip
        if not 0 <= self.detector_threshold <= 1:
            raise ValueError(f"detector_threshold must be in [0, 1], got {self.detector_threshold}")
        if not self.appearance_refresh_s > 0 or not self.target_bpp >= 0:
            raise ValueError("appearance_refresh_s must be > 0 and target_bpp >= 0")
        if self.plate not in PLATES:
            raise ValueError(f"plate must be one of {PLATES}, got {self.plate!r}")
        if not 0 <= self.pose_every <= MAX_POSE_EVERY or not 4 <= self.pose_steps <= 256:
            raise ValueError(f"pose_every must be 0..{MAX_POSE_EVERY} frames and pose_steps "
                             f"4..256, got {self.pose_every}, {self.pose_steps}")  # fmt: skip
        if not 0 <= self.track_low_score <= self.detector_threshold:
            raise ValueError(f"track_low_score must be in [0, detector_threshold "
                             f"{self.detector_threshold}], got {self.track_low_score}")
        if self.pose_every and not self.box_step_px:
            raise ValueError("the sparse pose (pose_every > 0) needs the box stream "
                             "(box_step_px > 0): its joints are relative to the boxes")
        if self.priority not in PRIORITIES:
            raise ValueError(f"priority must be one of {', '.join(PRIORITIES)}, got "
                             f"{self.priority!r}")  # fmt: skip
        if self.priority != DEFAULT_PRIORITY and not self.splits_budget:
            raise ValueError(f"priority={self.priority} needs a budget to split between a "
                             "plate and people: a median plate, appearance references and a "
                             "rate target (level 1)")  # fmt: skip
        if not 0 <= self.box_rate < float("inf"):
            raise ValueError(f"box_rate must be a number of updates a second >= 0, got "
                             f"{self.box_rate}")  # fmt: skip
        if self.box_rate and not self.box_step_px:
            raise ValueError("box_rate paces the box stream: it needs box_step_px > 0 (at "
                             "level 1 with box_step_px=0, set box_rate=0 too)")  # fmt: skip

    @property
    def splits_budget(self) -> bool:
        """Whether the edge splits a rate target between a plate and the people's
        references (what ``priority`` weighs)."""
        return self.plate == "median" and self.sends_appearance and self.target_bpp > 0

    @property
    def keyframe_scales(self) -> tuple[float, ...]:
        """Every fraction of the size a keyframe picture may be coded at, ascending:
        ``keyframe_scale`` and the ``plate_scales``."""
        extra = [float(v) for v in self.plate_scales.split(",") if v.strip()]
        return tuple(sorted({self.keyframe_scale, *extra}))

    @property
    def sends_pose(self) -> bool:
        return bool(self.pose_model)

    @property
    def sends_sparse_pose(self) -> bool:
        return self.pose_every > 0

    @property
    def sends_flow(self) -> bool:
        return self.flow_scale > 0

    @property
    def sends_segmentation(self) -> bool:
        return self.seg_scale > 0

    @property
    def sends_boxes(self) -> bool:
        return self.box_step_px > 0

    def box_every(self, fps: float) -> int:
        """Most frames from one that sends boxes to the next at ``fps`` frames a second
        (``box_rate``): ``round(fps / box_rate)``, 1 (every frame) without a box rate."""
        return max(1, round(float(fps) / self.box_rate)) if self.box_rate else 1

    @property
    def sends_appearance(self) -> bool:
        return self.appearance_quality > 0

    def to_dict(self) -> dict[str, str]:
        """String form for the stream header's key/value dict (the fields of
        :data:`OMITTED_AT_DEFAULT` only when they differ from their default)."""
        return {f.name: str(getattr(self, f.name)) for f in dataclasses.fields(self)
                if f.name not in OMITTED_AT_DEFAULT or getattr(self, f.name) != f.default}

    @classmethod
    def from_dict(cls, values: dict[str, str]) -> LevelConfig:
        """Inverse of :meth:`to_dict` (unknown keys are ignored, missing ones are an error)."""
        kwargs = {}
        for f in dataclasses.fields(cls):
            if f.name not in values:
                if f.default is dataclasses.MISSING:
                    raise ValueError(f"level config lacks {f.name!r}")
                continue
            raw = values[f.name]
            if f.type in ("bool", bool):
                kwargs[f.name] = raw == "True"
            elif f.type in ("int", int):
                kwargs[f.name] = int(raw)
            elif f.type in ("float", float):
                kwargs[f.name] = float(raw)
            else:
                kwargs[f.name] = raw
        return cls(**kwargs)


LEVEL_NUMBERS = (0, 1, 2, 3)
#: Fields added after streams were written without them: a header holds them only when they
#: differ from their default (which therefore never changes).
OMITTED_AT_DEFAULT = ("pose_every", "pose_steps", "pose_refresh", "track_low_score",
                      "priority", "appearance_inter", "box_tolerance", "appearance_vp8",
                      "appearance_plate", "box_rate")
#: Most frames between two sparse poses of a person.
MAX_POSE_EVERY = 64
#: ``plate_refine`` value that leaves the share to the camera's layout (resolved by the edge).
PLATE_REFINE_PER_CAMERA = -1.0
#: The share a tiled layout (small people) refines with when the camera's profile has not
#: measured its people (a layout given in the settings); with a profile the share is the
#: first plate's rule over a plate period (``PlateEncoder.resolve_refine``).
SMALL_PEOPLE_PLATE_REFINE = 0.25
#: Level 1's weak-detection threshold (:attr:`LevelConfig.track_low_score`): half its
#: detector threshold. Chosen on the tuning ranges, MODA of the sent tracks at off / 0.3 /
#: 0.2 / 0.1: PETS09-S2L1-full 1-300 0.578 / 0.620 / 0.645 / 0.620, TUD-Stadtmitte 1-90
#: 0.581 / 0.585 / 0.588 / 0.559, PETS 1-300 zoomed 2x 0.560 / 0.575 / 0.581 / 0.612 (0.1
#: loses on TUD); docs/journal.md, issue 40, fifth session.
LEVEL1_TRACK_LOW_SCORE = 0.2
#: What the edge favours when it splits a rate target between the plate and the people
#: (:attr:`LevelConfig.priority`; the weights: ``codec.scaffold.plate.share.PRIORITY_ATTENTION``).
PRIORITIES = ("people", "balanced", "scene")
DEFAULT_PRIORITY = "balanced"
#: What a keyframe picture can be (see :attr:`LevelConfig.plate`).
PLATES = ("frame", "median")

LEVELS: dict[int, LevelConfig] = {
    0: LevelConfig(level=0, seg_scale=1 / 16, pose_model="", pose_step_px=2.0, flow_scale=0.0,
                   flow_step_px=1.0, keyframe_interval=0, keyframe_quality=30,
                   keyframe_scale=0.5),
    1: LevelConfig(level=1, seg_scale=0.0, pose_model="", pose_step_px=2.0, flow_scale=0.0,
                   flow_step_px=1.0, keyframe_interval=300, keyframe_quality=35,
                   keyframe_scale=0.5, plate_scales="0.75,1", detector_threshold=0.4,
                   detector_full_frame=False, box_step_px=2.0, appearance_quality=30,
                   plate="median", target_bpp=0.004, plate_refine=PLATE_REFINE_PER_CAMERA,
                   track_low_score=LEVEL1_TRACK_LOW_SCORE, appearance_vp8=True,
                   appearance_inter=True, appearance_plate=True, box_rate=12.0),
    2: LevelConfig(level=2, seg_scale=1 / 8, pose_model="pose_landmark_lite", pose_step_px=2.0,
                   flow_scale=1 / 8, flow_step_px=0.5, keyframe_interval=75,
                   keyframe_quality=40),
    3: LevelConfig(level=3, seg_scale=1 / 4, pose_model="pose_landmark_full", pose_step_px=1.0,
                   flow_scale=1 / 8, flow_step_px=0.25, keyframe_interval=30,
                   keyframe_quality=55),
}  # fmt: skip


def level_config(level: int, **overrides: object) -> LevelConfig:
    """The preset of ``level`` with ``overrides`` applied (``level_config(1, seg_scale=0.25)``)."""
    if level not in LEVELS:
        raise ValueError(f"unknown level {level!r}; levels are {', '.join(map(str, LEVELS))}")
    return dataclasses.replace(LEVELS[level], **overrides)
