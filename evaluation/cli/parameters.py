"""The code's parameters that the README states, read from the code itself.

``semcodec-bench figures --readme README.md`` writes them beside the result sets:
``docs/results/parameters.json`` (every parameter the README's reference sections quote:
levels, rate control, stream limits, the camera profile, references, the benchmark's
defaults, the embedded sample, the shipped weights), ``levels.md`` (the level presets) and
``columns.md`` (the metrics table, :mod:`evaluation.report.columns`). The README's figures
test checks that each number its prose states is in ``docs/results/`` and that these files
equal what the code gives now, so a parameter changed in the code and not in the README
fails the test.
"""

from __future__ import annotations

import dataclasses
import inspect
import json
from fractions import Fraction
from importlib import metadata
from pathlib import Path

from semcodec.codec.core.layout import package_data

#: The files this module writes under the results folder.
CODE_FIGURES = ("parameters.json", "levels.md", "columns.md")

#: The level fields the levels table shows, with what each row says.
LEVEL_ROWS = (
    ("seg_scale", "person label map, fraction of the frame size"),
    ("pose_model", "BlazePose keypoints per person, model"),
    ("pose_step_px", "keypoint step, px"),
    ("flow_scale", "flow grid, fraction of the frame size"),
    ("flow_step_px", "flow step, px"),
    ("plate", "keyframe picture: the frame or the person-free median plate"),
    ("keyframe_scales", "keyframe picture sizes, fractions of the frame (the least error wins)"),
    ("keyframe_quality", "keyframe quality, 0–100"),
    ("keyframe_interval", "frames between keyframes or plate refreshes (0: only at the "
                          "start and on scene cuts)"),
    ("box_step_px", "tracked boxes' step, px"),
    ("box_rate", "fewest box updates a second (a faster camera may leave some frames' "
                 "boxes out: the cloud predicts them)"),
    ("appearance_quality", "appearance references' WebP quality"),
    ("detector_threshold", "the person detector's score threshold"),
    ("track_low_score", "weaker detections may continue a person's track (never start one) "
                        "from"),
    ("target_bpp", "rate target, bits per pixel (a user setting)"),
)


def _defaults(function) -> dict[str, object]:
    """The default values of ``function``'s keyword parameters."""
    return {name: p.default for name, p in inspect.signature(function).parameters.items()
            if p.default is not inspect.Parameter.empty}  # fmt: skip


def _package() -> dict[str, object]:
    """Python and numpy floors, from the installed distribution's metadata."""
    meta = metadata.metadata("semcodec")
    numpy = next(r for r in meta.get_all("Requires-Dist") or [] if r.startswith("numpy"))
    return {"requires_python": meta["Requires-Python"], "numpy": numpy}


def _levels() -> dict[str, dict[str, object]]:
    from semcodec.codec.core.types import NUM_KEYPOINTS
    from semcodec.codec.scaffold.flow import fit_flow_prior_from_video
    from semcodec.codec.scaffold.levels import LEVELS

    levels = {}
    for number, config in LEVELS.items():
        levels[str(number)] = {**dataclasses.asdict(config),
                               "keyframe_scales": list(config.keyframe_scales)}  # fmt: skip
    prior_frames = _defaults(fit_flow_prior_from_video)["frames"]
    return {"presets": levels, "pose_keypoints": NUM_KEYPOINTS,
            "flow_prior_frames": [min(prior_frames), max(prior_frames)]}  # fmt: skip


def _rate() -> dict[str, object]:
    from semcodec.codec.scaffold.encoder import MAX_LOOKAHEAD_FRAMES
    from semcodec.codec.scaffold.plate.encoder import PLATE_WINDOW_S
    from semcodec.codec.scaffold.plate.share import FIRST_PLATE_MAX_SHARE, PERSON_ASPECT
    from semcodec.codec.scaffold.rate import WINDOW_S, RateController

    account = _defaults(RateController.__init__)
    return {"window_s": WINDOW_S, "plate_median_window_s": PLATE_WINDOW_S,
            "first_plate_max_share": FIRST_PLATE_MAX_SHARE, "person_aspect": PERSON_ASPECT,
            **{name: account[name] for name in ("first_keyframe_share", "keyframe_share",
                                                "clip_keyframe_share", "window_wander",
                                                "debt_repay_share")},
            "lookahead_frames": MAX_LOOKAHEAD_FRAMES}  # fmt: skip


def _container() -> dict[str, object]:
    from semcodec.codec.bitstream import FORMAT_VERSION, SUPPORTED_VERSIONS
    from semcodec.codec.bitstream.tables import DIGEST_PREFIX_BYTES
    from semcodec.codec.bitstream.units import SHORT_UNIT_BYTES

    return {"format_version": FORMAT_VERSION, "versions_read": list(SUPPORTED_VERSIONS),
            "digest_prefix_bytes": DIGEST_PREFIX_BYTES,
            "crc8_below_unit_bytes": SHORT_UNIT_BYTES}  # fmt: skip


def _stream_limits() -> dict[str, object]:
    from semcodec.codec.scaffold.codec import DEFAULT_LIMITS, UHD_4K

    limits = dataclasses.asdict(DEFAULT_LIMITS)
    limits["max_frame"] = f"{UHD_4K[0]}x{UHD_4K[1]}"
    limits["min_fps"] = f"1/{round(1 / DEFAULT_LIMITS.min_fps)}"
    for name in ("min_scale", "min_step_px"):
        limits[name] = str(Fraction(limits[name]).limit_denominator(1 << 16))
    for name in ("max_label_cells", "max_flow_cells"):
        limits[name] = f"2^{limits[name].bit_length() - 1}"
    return limits


def _camera() -> dict[str, object]:
    from semcodec.codec.scaffold import appearance, profile
    from semcodec.codec.scaffold.detector import PART_HEIGHT_RATIO, DetectorConfig
    from semcodec.codec.scaffold.encoder import OVERDUE_S
    from semcodec.codec.task.calibrate import REFERENCE_THRESHOLD

    return {
        "profile_frames": profile.PROFILE_FRAMES, "profile_seconds": profile.PROFILE_SECONDS,
        "person_score": profile.PERSON_SCORE, "confirm_score": profile.CONFIRM_SCORE,
        "confirm_iou": profile.CONFIRM_IOU, "candidate_tiles": list(profile.CANDIDATE_TILES),
        "preferred_height": round(profile.PREFERRED_HEIGHT, 4),
        "part_inside": DetectorConfig().contained_cover, "part_height_ratio": PART_HEIGHT_RATIO,
        "task_reference_score": REFERENCE_THRESHOLD,
        "smallest_thumbnail_px": appearance.MIN_THUMB_HEIGHT,
        "largest_reference_px": appearance.MAX_REF_HEIGHT,
        "reference_overdue_s": OVERDUE_S, "shape_change": appearance.MAX_ASPECT_CHANGE,
        "refresh_crowd_cover": appearance.CROWD_COVER,
    }  # fmt: skip


def _benchmark() -> dict[str, object]:
    from semcodec.codec.core.console import EXIT_ERROR, EXIT_INTERRUPTED
    from semcodec.evaluation.bench.options import STEADY_INTRA_PERIOD
    from semcodec.evaluation.cli import common
    from semcodec.evaluation.data.groundtruth import COLUMNS_BY_FORMAT
    from semcodec.evaluation.metrics.detector import calibrate_detector
    from semcodec.evaluation.report.markdown import MIN_OVERLAP

    calibration = _defaults(calibrate_detector)
    return {
        "demo_lpips_every": common.DEMO_LPIPS_EVERY, "demo_moda_every": common.DEMO_MODA_EVERY,
        "steady_intra_period": STEADY_INTRA_PERIOD,
        "bd_rate_min_overlap_percent": round(100 * MIN_OVERLAP),
        "static_camera_qps": list(common.STATIC_CAMERA_QPS),
        "static_camera_ipratios": list(common.STATIC_CAMERA_IPRATIOS),
        "detector_thresholds": list(calibration["thresholds"]),
        "detector_tilings": list(calibration["tilings"]),
        "ground_truth_columns": {k: list(v) for k, v in COLUMNS_BY_FORMAT.items()},
        "exit_error": EXIT_ERROR, "exit_interrupted": EXIT_INTERRUPTED,
    }  # fmt: skip


def _megabytes(paths: list[Path]) -> float:
    return round(sum(p.stat().st_size for p in paths if p.is_file()) / 1e6, 1)


def _sample() -> dict[str, object]:
    from semcodec.codec.core.sources import SAMPLE_NAME, read_seqinfo

    folder = Path(package_data(f"datasets/sample/{SAMPLE_NAME}"))
    info = read_seqinfo(folder / "seqinfo.ini")
    return {"name": SAMPLE_NAME, "frames": info.seq_length, "width": info.width,
            "height": info.height, "megabytes": _megabytes(list(folder.rglob("*")))}  # fmt: skip


def _weights() -> dict[str, float]:
    """Megabytes of each weight file shipped in ``codec/weights/``."""
    folder = Path(package_data("codec/weights"))
    files = sorted(p for p in folder.rglob("*") if p.suffix in (".pt", ".pth"))
    return {str(p.relative_to(folder)): _megabytes([p]) for p in files}


def code_parameters() -> dict[str, object]:
    """Every parameter the README quotes, by topic, as the code has it now."""
    return {"package": _package(), "levels": _levels(), "rate": _rate(),
            "container": _container(), "stream_limits": _stream_limits(),
            "camera": _camera(), "benchmark": _benchmark(), "sample": _sample(),
            "shipped_weights_mb": _weights()}  # fmt: skip


def _cell(config, field: str) -> str:
    """``config.field`` as the levels table writes it: scales as fractions, ``—`` where the
    level does not send it."""
    value = getattr(config, field)
    unused = {"pose_step_px": not config.pose_model, "flow_step_px": not config.flow_scale}
    if unused.get(field) or value in ("", 0, 0.0) and field != "keyframe_interval":
        return "—"
    if field.endswith(("_scale", "_scales")):
        values = value if isinstance(value, tuple) else (value,)
        return ", ".join(str(Fraction(v).limit_denominator(64)) for v in values)
    return f"{value:g}" if isinstance(value, float) else str(value)


def levels_table() -> str:
    """The level presets (Markdown): one row per field of :data:`LEVEL_ROWS`, one column per
    level; ``—`` where a level does not send it."""
    from semcodec.codec.scaffold.levels import LEVELS

    head = "| | " + " | ".join(f"level {n}" for n in LEVELS) + " |"
    lines = [head, "|---" * (len(LEVELS) + 1) + "|"]
    for field, label in LEVEL_ROWS:
        cells = [_cell(config, field) for config in LEVELS.values()]
        lines.append(f"| {label} (`{field}`) | " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def code_figures() -> dict[str, str]:
    """File name -> text of :data:`CODE_FIGURES`, as the code gives them now."""
    from semcodec.evaluation.report.columns import columns_table

    parameters = json.dumps(code_parameters(), indent=1, sort_keys=True) + "\n"
    return {"parameters.json": parameters, "levels.md": levels_table(),
            "columns.md": columns_table()}  # fmt: skip


def write_code_figures(results_dir: Path) -> list[Path]:
    """Writes :data:`CODE_FIGURES` under ``results_dir``; returns the paths written."""
    from semcodec.evaluation.report.markdown import write_text_atomic

    written = []
    for name, text in code_figures().items():
        path = Path(results_dir) / name
        if not path.is_file() or path.read_text() != text:
            write_text_atomic(path, text)
        written.append(path)
    return written
