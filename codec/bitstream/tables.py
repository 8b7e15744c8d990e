"""The static tables of format version 3: what a compact stream header names by number.

These tables are **part of the format**: a version-3 stream refers to their entries by
position, so an entry is never changed, removed or reordered (a reader of today must decode
every stream written before). New entries go at the end; a stream that uses one cannot be
read by an older reader, which refuses it with a clear error (an id past its table).

- :data:`SETTING_KEYS`: header setting keys written as a number (``1 + index``) instead of
  their text; any other key is still written as text.
- :data:`MODEL_NAMES`: model names written as a number the same way.
- :data:`SETTINGS_DEFAULTS`: numbered sets of default settings (``1 + index``). A header
  that names one writes only the settings whose value differs from it; the reader fills the
  rest in, so the header's settings read the same as if every one had been written. The
  scaffold codec names the set of its level (today's presets of levels 0-3); a detect-mode
  stream names none.
"""

from __future__ import annotations

from types import MappingProxyType

#: Digest bytes a version-3 header keeps of a model's sha256: enough to tell a decoder that
#: its file is not the edge's (a 2**-32 chance that two different files agree), not a
#: security check (the model zoo verifies each file's full sha256 when it is fetched).
DIGEST_PREFIX_BYTES = 4

SETTING_KEYS: tuple[str, ...] = (
    # the scaffold codec's level config (codec.scaffold.levels.LevelConfig)
    "level", "seg_scale", "pose_model", "pose_step_px", "flow_scale", "flow_step_px",
    "keyframe_interval", "keyframe_coder", "keyframe_quality", "keyframe_scale",
    "plate_scales", "plate_refine", "scene_change", "detect_every", "detector_tiles",
    "detector_threshold", "detector_full_frame", "box_step_px", "appearance_quality",
    "appearance_refresh_s", "appearance_scale", "check_refs", "plate", "target_bpp",
    # what the camera's profile chose (codec.scaffold.profile, codec.task.calibrate)
    "profile_person_height", "profile_people", "profile_frames", "profile_confirmed",
    "profile_reference_count", "profile_matched_count",
    # detect mode (codec.task.stream, codec.task.calibrate)
    "mode", "split_after", "windows", "latent", "side", "intra_period", "skip_threshold",
    "beta", "tiles", "tile_overlap", "full_frame", "score_threshold",
    # level 1's sparse pose (codec.scaffold.levels: pose_every, pose_steps, pose_refresh)
    "pose_every", "pose_steps", "pose_refresh",
    # level 1's two-threshold tracking (codec.scaffold.levels: track_low_score)
    "track_low_score",
    # the plate/people split's priority (codec.scaffold.levels: priority)
    "priority",
    # inter-coded appearance references (codec.scaffold.levels: appearance_inter)
    "appearance_inter",
    # the edge's dead zone on tracked boxes (codec.scaffold.levels: box_tolerance)
    "box_tolerance",
    # references without their WebP container (codec.scaffold.levels: appearance_vp8)
    "appearance_vp8",
    # boxes paced by the frame rate (codec.scaffold.levels: box_rate)
    "box_rate",
)  # fmt: skip

MODEL_NAMES: tuple[str, ...] = (
    "ssdlite_person", "selfie_segmentation", "pose_landmark_lite", "pose_landmark_full",
    "flow_prior", "ssdlite_person_weights", "task_bottleneck",
)  # fmt: skip


def _level_defaults(level: int, **changes: str) -> MappingProxyType:
    common = {
        "seg_scale": "0.0", "pose_model": "", "pose_step_px": "2.0", "flow_scale": "0.0",
        "flow_step_px": "1.0", "keyframe_interval": "0", "keyframe_coder": "hevc",
        "keyframe_quality": "30", "keyframe_scale": "0.5", "plate_scales": "",
        "plate_refine": "0.0", "scene_change": "True", "detect_every": "1",
        "detector_tiles": "0", "detector_threshold": "0.5", "detector_full_frame": "True",
        "box_step_px": "0.0", "appearance_quality": "0", "appearance_refresh_s": "4.0",
        "appearance_scale": "1.0", "check_refs": "False", "plate": "frame",
        "target_bpp": "0.0",
    }  # fmt: skip
    return MappingProxyType({**common, "level": str(level), **changes})


#: Numbered default settings; id ``k`` is ``SETTINGS_DEFAULTS[k - 1]`` (0: none). Ids 1-4:
#: the scaffold codec's levels 0-3 as their presets stood when format 3 was made.
SETTINGS_DEFAULTS: tuple[MappingProxyType, ...] = (
    _level_defaults(0, seg_scale="0.0625"),
    _level_defaults(1, keyframe_interval="300", keyframe_quality="35", plate_scales="0.75,1",
                    detector_threshold="0.4", detector_full_frame="False", box_step_px="2.0",
                    appearance_quality="30", plate="median", target_bpp="0.004"),
    _level_defaults(2, seg_scale="0.125", pose_model="pose_landmark_lite", flow_scale="0.125",
                    flow_step_px="0.5", keyframe_interval="75", keyframe_quality="40",
                    keyframe_scale="1.0"),
    _level_defaults(3, seg_scale="0.25", pose_model="pose_landmark_full", pose_step_px="1.0",
                    flow_scale="0.125", flow_step_px="0.25", keyframe_interval="30",
                    keyframe_quality="55", keyframe_scale="1.0"),
)  # fmt: skip


def settings_defaults(defaults_id: int) -> MappingProxyType:
    """The default settings that ``defaults_id`` names (0: none, an empty mapping).

    Raises:
        KeyError: an id past the table (a stream written by a newer semcodec).
    """
    if defaults_id == 0:
        return MappingProxyType({})
    if not 1 <= defaults_id <= len(SETTINGS_DEFAULTS):
        raise KeyError(defaults_id)
    return SETTINGS_DEFAULTS[defaults_id - 1]


def level_defaults_id(level: int, settings: dict[str, str]) -> int:
    """The defaults id for a scaffold stream of level ``level`` with ``settings``: its
    level's set, or 0 (none) for a level without one or settings that lack one of its keys
    (a header that names a set holds all of its keys)."""
    if not 0 <= level < len(SETTINGS_DEFAULTS):
        return 0
    return level + 1 if set(SETTINGS_DEFAULTS[level]) <= set(settings) else 0
