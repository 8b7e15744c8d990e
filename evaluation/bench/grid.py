"""The benchmark grid: sequences x codecs x settings x metrics, one result row per cell.

:func:`run_grid` plans the cells of a :class:`GridConfig`, skips those already in
``OUT/results.jsonl`` (the run is resumable: a finished cell is never recomputed), runs the
rest on an executor, appends each row to ``results.jsonl`` as soon as it is ready and
rewrites ``results.csv`` after every cell (atomically: a temporary file renamed over the old
one). A cell's key hashes everything that changes its result, the versions of the codec and
of semcodec included, so rows made by other code are recomputed, never reused. Plots,
BD-rates and the Markdown report are made from those files by :mod:`evaluation.report.markdown`.

:func:`validate_grid` checks a grid (codec names, settings, metrics, frame counts) without
touching a model or a frame, so a command line with a typo fails at once.
"""

from __future__ import annotations

import copy
import dataclasses
import datetime as dt
import functools
import hashlib
import inspect
import json
import logging
import os
import platform
import time
from collections import OrderedDict
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Protocol

import numpy as np

from semcodec.codec.core.console import package_version
from semcodec.evaluation.bench.options import (
    ALL_METRICS,
    DEFAULT_METRICS,
    PROTOCOLS,
)
from semcodec.evaluation.codecs.base import (
    Codec,
    Encoded,
    Setting,
    bytes_of_frames,
    create_codec,
)
from semcodec.evaluation.data.sequences import load_sequence
from semcodec.evaluation.metrics.detector import calibration_name
from semcodec.evaluation.report.rows import read_rows

logger = logging.getLogger(__name__)


#: Columns of results.csv, in order; per-stream byte columns ``bytes_*`` follow ``bytes``.
BASE_COLUMNS = [
    "sequence",
    "codec",
    "setting",
    "curve",
    "start",
    "frames",
    "width",
    "height",
    "fps",
    "bytes",
    "bpp",
    "container_bytes",
    "psnr",
    "psnr_y",
    "ms_ssim",
    "st_lpips",
    "person_psnr",
    "person_st_lpips",
    "seam",
    "frozen_blocks",
    "frozen_max_s",
    "person_recall",
    "scaffold_people",
    "ref_share",
    "ref_bytes_per_person_s",
    "flicker",
    "twe",
    "pose_pck",
    "pose_people",
    "pose_lost",
    "fvd",
    "moda",
    "modp",
    "moda_ground",
    "track_moda",
    "track_mota",
    "track_id_switches",
    "enc_fps",
    "dec_fps",
    "dec_flops_per_frame",
    "target_bpp",
    "rate_window_min",
    "rate_window_max",
    "encoder",
    "encoder_version",
    "codec_options",
    "detector",
    "machine",
    "finished",
    "key",
]


class BenchError(RuntimeError):
    """The grid could not be planned or run (bad data, metrics or codec names)."""


#: ``callback(done)``: how many frames of a stage are done.
FrameCallback = Callable[[int], None]


class StageProgress(Protocol):
    """Where a cell reports its stages: ``progress(stage, total)`` starts a stage of ``total``
    frames (``"encode"``, ``"decode"``, ``"metrics: st_lpips"``, ...) and returns the callback
    that stage calls with the number of frames done."""

    def __call__(self, stage: str, total: int) -> FrameCallback: ...


def _no_progress(stage: str, total: int) -> FrameCallback:
    return lambda done: None




@dataclass(frozen=True)
class CellSpec:
    """One (sequence, codec, setting) cell; picklable, so any executor can run it.

    ``sequence`` is a path (MOT folder, frame folder or video file); ``frames`` the number of
    frames read from frame ``start`` (1-based; None: to the end). ``detector`` is the
    detector configuration as a dict (chosen per sequence on the uncompressed frames), None
    when MODA is not measured.
    ``versions`` names the code that computes the cell (semcodec's version and the codec's
    ``encoder_version``); it is part of the key, so a row made by other code is not reused.
    ``lpips_every`` / ``moda_every``: ST-LPIPS / MODA on every k-th frame only (frames 1,
    1+k, ...; the other metrics use every frame).
    ``warmup``: frames coded before ``start`` and not measured (the steady-state protocol:
    the codec runs from frame ``start - warmup`` on and is charged only for the bytes of
    the measured frames; 0: it starts cold at ``start``).
    """

    sequence: str
    frames: int | None
    codec: str
    setting: str
    codec_options: tuple[tuple[str, object], ...] = ()
    metrics: tuple[str, ...] = DEFAULT_METRICS
    detector: tuple[tuple[str, object], ...] | None = None
    models_dir: str | None = None
    fvd_weights: str | None = None
    lpips_every: int = 1
    source_options: tuple[tuple[str, object], ...] = ()
    versions: str = ""
    moda_every: int = 1
    start: int = 1
    warmup: int = 0

    def key(self) -> str:
        """Stable id of the cell: the hash of everything that changes its result."""
        payload = dataclasses.asdict(self)
        payload.pop("models_dir")
        if not payload["warmup"]:
            payload.pop("warmup")  # keeps keys of runs made before the field existed
        if payload["start"] == 1:
            payload.pop("start")  # keeps keys of runs made before the field existed
        if not payload["source_options"]:
            payload.pop("source_options")  # keeps keys of runs made before the field existed
        text = json.dumps(payload, sort_keys=True, default=str)
        return hashlib.sha1(text.encode()).hexdigest()[:16]


@dataclass
class GridConfig:
    """What to run. ``codecs`` maps a codec name to its settings (empty list: its defaults)."""

    sequences: list[str]
    codecs: dict[str, list[str]]
    out_dir: Path
    frames: int | None = None
    start: int = 1  # first frame read (1-based): a held-out range is --start K --frames N
    metrics: tuple[str, ...] = DEFAULT_METRICS
    codec_options: dict[str, dict[str, object]] = field(default_factory=dict)
    scales: tuple[float, ...] = (1.0,)
    models_dir: str | None = None
    fvd_weights: str | None = None
    detector: dict | None = None  # None: calibrate per sequence on the uncompressed frames
    lpips_every: int = 1  # ST-LPIPS on every k-th frame (it costs ~1 s per 768x576 frame)
    moda_every: int = 1  # MODA on every k-th frame (the detector runs up to 5 windows a frame)
    source_options: dict = field(default_factory=dict)  # fps/width/height for open_source
    #: ``cold``: every codec starts at ``start``; ``steady``: every codec codes from the
    #: sequence's first frame and is charged for the measured range only (see PROTOCOLS)
    protocol: str = "cold"


# ----------------------------------------------------------------------------- loading


# ----------------------------------------------------------------------------- one cell


def run_cell(cell: CellSpec, progress: StageProgress | None = None) -> dict:
    """Encodes, decodes and measures one cell; returns its result row.

    ``progress`` (optional) is told each stage and its frames (see :class:`StageProgress`).
    """
    from semcodec.evaluation.metrics.image import bits_per_pixel

    progress = progress or _no_progress
    warm = cell.warmup
    frames = None if cell.frames is None else cell.frames + warm
    pixels, info, gt = load_sequence(cell.sequence, frames, cell.source_options,
                                     cell.start - warm)  # fmt: skip
    codec = create_codec(cell.codec, **dict(cell.codec_options))
    setting = Setting.parse(cell.setting)
    coded, h, w, _ = pixels.shape
    encoded = _shared_encoding(cell, codec, setting, lambda: encode_measured(
        codec, pixels, setting, info.fps, warm, progress("encode", coded)))
    start = time.perf_counter()
    decoded = _with_progress(codec.decode, progress("decode", coded), encoded)
    decode_seconds = time.perf_counter() - start
    if decoded.shape != pixels.shape:
        raise BenchError(
            f"{cell.codec} {setting}: decoded shape {decoded.shape}, expected {pixels.shape}"
        )
    stream_bytes = encoded.stream_bytes
    if warm:
        if coded <= warm:
            raise BenchError(f"{cell.sequence}: no frame after the {warm} warm-up frames")
        stream_bytes = bytes_of_frames(encoded, warm)
        pixels, decoded = pixels[warm:], decoded[warm:]
        if gt is not None:
            gt = gt.restrict(warm + 1, coded).renumbered(warm + 1)
    t = len(pixels)
    size = sum(stream_bytes.values())
    row: dict = {
        "sequence": info.name,
        "codec": cell.codec,
        "setting": str(setting),
        "curve": codec.curve_of(setting),
        "start": cell.start,
        "frames": t,
        "protocol": "steady" if warm else "cold",
        "warmup_frames": warm,
        "width": w,
        "height": h,
        "fps": info.fps,
        "bytes": size,
        "bpp": bits_per_pixel(size, w, h, t),
        "container_bytes": encoded.container_bytes,
        **_speeds(codec, coded, encoded.encode_seconds, decode_seconds),
        "dec_flops_per_frame": encoded.metadata.get("dec_flops_per_frame"),
        **codec.describe(),
        "codec_options": json.dumps(dict(cell.codec_options), sort_keys=True),
        "detector": json.dumps(dict(cell.detector)) if cell.detector else "",
        "machine": machine_description(),
        "semcodec_version": package_version(),
        "key": cell.key(),
    }
    for stream, n in stream_bytes.items():
        row[f"bytes_{stream}"] = n
    row.update(encoded.metadata.get("rate", {}))  # a rate-controlled codec's target and windows
    row.update(encoded.metadata.get("counts", {}))  # e.g. the scaffold's silhouettes
    row.update(measure_quality(pixels, decoded, cell, gt, progress, fps=info.fps))
    if "person" in cell.metrics and gt is not None and "person_boxes" in encoded.metadata:
        row.update(scaffold_person_recall(encoded.metadata["person_boxes"][warm:], gt))
    if "moda" in cell.metrics and gt is not None and "person_ids" in encoded.metadata:
        from semcodec.evaluation.metrics.mota import transmitted_box_scores

        row.update(transmitted_box_scores(encoded.metadata["person_boxes"][warm:],
                                          encoded.metadata["person_ids"][warm:], gt))  # fmt: skip
    row["finished"] = dt.datetime.now(dt.UTC).isoformat(timespec="seconds")
    return {k: _finite_or_none(v) for k, v in row.items()}


def _speeds(codec: Codec, frames: int, encode_s: float, decode_s: float) -> dict:
    """``enc_fps`` and ``dec_fps`` (frames per wall second); None where they mean nothing."""
    if not codec.has_speed:
        return {"enc_fps": None, "dec_fps": None}
    return {
        "enc_fps": frames / encode_s if encode_s > 0 else None,
        "dec_fps": frames / decode_s if decode_s > 0 else None,
    }


#: The latest encodings of this process, by the cell and stream setting that made them: cells
#: that differ only in their decoder (a decoder ladder) decode the same bytes, encoded once.
_ENCODINGS: OrderedDict[str, Encoded] = OrderedDict()
#: Encodings kept (a ladder's cells follow one another in a grid).
SHARED_ENCODINGS = 2


def _shared_encoding(cell: CellSpec, codec: Codec, setting: Setting,
                     encode: Callable[[], Encoded]) -> Encoded:  # fmt: skip
    """``encode()``, or the encoding of an earlier cell of the same codec, options, frames and
    stream setting (:meth:`~evaluation.codecs.base.Codec.stream_setting`), given ``setting``
    and a metadata of its own (the row reports that encoding's bytes and encode time)."""
    key = json.dumps([cell.codec, sorted(cell.codec_options), cell.sequence, cell.start,
                      cell.frames, cell.warmup, sorted(cell.source_options),
                      str(codec.stream_setting(setting))], default=str)  # fmt: skip
    if key not in _ENCODINGS:
        _ENCODINGS[key] = encode()
        while len(_ENCODINGS) > SHARED_ENCODINGS:
            _ENCODINGS.popitem(last=False)
    _ENCODINGS.move_to_end(key)
    earlier = _ENCODINGS[key]
    return dataclasses.replace(earlier, setting=setting, metadata=copy.deepcopy(earlier.metadata))


def encode_measured(codec: Codec, pixels: np.ndarray, setting: Setting, fps: float,
                    warmup: int = 0, progress: FrameCallback | None = None):  # fmt: skip
    """``codec``'s encoding of ``pixels`` ``(T, H, W, 3)`` whose first ``warmup`` frames are
    coded but not measured (the steady-state protocol: a codec that can, such as the
    scaffold, is told where the measured range starts)."""
    extra = {"measured_from": warmup} if warmup and _takes(codec.encode, "measured_from") else {}
    return _with_progress(codec.encode, progress or (lambda done: None), pixels, setting,
                          fps=fps, **extra)  # fmt: skip


def _with_progress(method: Callable, callback: FrameCallback, *args, **kwargs):
    """Calls a codec's ``encode``/``decode``, passing ``progress=callback`` if it takes one."""
    if _takes(method, "progress"):
        kwargs["progress"] = callback
    return method(*args, **kwargs)


def _takes(method: Callable, keyword: str) -> bool:
    """Whether ``method`` has a parameter named ``keyword``."""
    try:
        return keyword in inspect.signature(method).parameters
    except (TypeError, ValueError):  # builtins without a signature
        return False


def _finite_or_none(value):
    """NaN/inf (e.g. MODP with no match) become None: empty in CSV, null in JSON."""
    if isinstance(value, float | np.floating) and not np.isfinite(value):
        return None
    return value


def measure_quality(
    reference: np.ndarray,
    decoded: np.ndarray,
    cell: CellSpec,
    gt,
    progress: StageProgress | None = None,
    fps: float | None = None,
) -> dict:
    """The quality columns that ``cell.metrics`` asks for (others stay absent).

    ``reference`` and ``decoded`` are ``(T, H, W, 3) uint8 RGB``; ``gt`` the ground truth of
    the reference frames (or None). Identical videos (``raw``) get the exact values of the
    full-reference metrics (PSNR 100, MS-SSIM 1, ST-LPIPS 0) without computing them.
    """
    from semcodec.evaluation.metrics import image as metrics

    progress = progress or _no_progress
    t = len(reference)
    out: dict = {}
    if np.array_equal(reference, decoded):
        out.update(_identical_scores(cell, reference.shape))
    elif "psnr" in cell.metrics:
        progress("metrics: psnr", t)
        out["psnr"] = metrics.psnr(reference, decoded)
        out["psnr_y"] = metrics.psnr(reference, decoded, space="y")
    if "ms_ssim" in cell.metrics and "ms_ssim" not in out:
        progress("metrics: ms_ssim", t)
        out["ms_ssim"] = metrics.ms_ssim(reference, decoded)
    if "st_lpips" in cell.metrics and "st_lpips" not in out:
        k = cell.lpips_every
        scorer = lpips_reference(cell.sequence, cell.frames, cell.source_options, k,
                                 cell.models_dir, cell.start)  # fmt: skip
        sample = decoded[::k]
        callback = progress(f"metrics: st_lpips (every {k})", len(sample))
        out["st_lpips"] = float(scorer.distances(sample, callback).mean())
        out["st_lpips_frames"] = len(sample)
    if "person" in cell.metrics and gt is not None:
        from semcodec.evaluation.metrics.person_region import (
            frozen_person_blocks,
            person_region_scores,
            seam_score,
        )

        progress(f"metrics: person regions (every {cell.lpips_every})", 1)
        out.update(person_region_scores(reference, decoded, gt, cell.lpips_every,
                                        cell.models_dir))  # fmt: skip
        out.update(seam_score(reference, decoded, gt, cell.lpips_every))
        if fps:
            out.update(frozen_person_blocks(decoded, gt, fps))
    if "temporal" in cell.metrics:
        from semcodec.evaluation.metrics.temporal import temporal_consistency

        progress("metrics: temporal", 1)
        out.update(temporal_consistency(reference, decoded))
    if "pose" in cell.metrics and gt is not None:
        from semcodec.evaluation.metrics.pose_agreement import pose_agreement

        progress(f"metrics: pose agreement (every {cell.lpips_every})", 1)
        out.update(pose_agreement(reference, decoded, gt, cell.lpips_every, cell.models_dir))
    if "moda" in cell.metrics and gt is not None and cell.detector is not None:
        k = cell.moda_every
        callback = progress(f"metrics: moda (every {k})", len(range(0, t, k)))
        out.update(detection_scores(decoded, gt, dict(cell.detector), cell.models_dir, callback,
                                    every=k))  # fmt: skip
    if "fvd" in cell.metrics:
        from semcodec.evaluation.metrics.fvd import FVDUnavailableError, fvd

        progress("metrics: fvd", t)
        try:
            out["fvd"] = fvd(
                reference, decoded, weights_path=cell.fvd_weights, models_dir=cell.models_dir
            )
        except FVDUnavailableError:
            out["fvd"] = None  # announced once by run_grid, not per cell
    return out


def _identical_scores(cell: CellSpec, shape: tuple[int, ...]) -> dict:
    """PSNR, MS-SSIM and ST-LPIPS of a ``(T, H, W, 3)`` video against itself (those asked
    for, and only where the metric accepts the size: too small frames still raise)."""
    from semcodec.evaluation.metrics.image import MAX_PSNR_DB, MS_SSIM_MIN_SIDE
    from semcodec.evaluation.metrics.perceptual import STLPIPS_MIN_SIDE

    out: dict = {}
    t, h, w = shape[:3]
    if "psnr" in cell.metrics:
        out["psnr"] = out["psnr_y"] = MAX_PSNR_DB
    if "ms_ssim" in cell.metrics and min(h, w) >= MS_SSIM_MIN_SIDE:
        out["ms_ssim"] = 1.0
    if "st_lpips" in cell.metrics and min(h, w) >= STLPIPS_MIN_SIDE:
        out["st_lpips"] = 0.0
        out["st_lpips_frames"] = len(range(0, t, cell.lpips_every))
    return out


@lru_cache(maxsize=1)
def lpips_reference(sequence: str, frames: int | None, source_options: tuple, every: int,
                    models_dir: str | None, start: int = 1):  # fmt: skip
    """The ST-LPIPS scorer of a sequence's every ``every``-th frame, reference features cached.

    The cells of one sequence share it, so the reference half of ST-LPIPS runs once per
    sequence instead of once per cell.
    """
    from semcodec.evaluation.metrics.perceptual import STLPIPSReference

    pixels, _, _ = load_sequence(sequence, frames, source_options, start)
    return STLPIPSReference(pixels[::every], models_dir=models_dir)


@lru_cache(maxsize=4)
def _detector(config_items: tuple, models_dir: str | None):
    from semcodec.evaluation.metrics.detector import DetectorConfig, PersonDetector

    return PersonDetector(DetectorConfig(**dict(config_items)), models_dir=models_dir)


def detection_scores(frames: np.ndarray, gt, config: dict, models_dir: str | None,
                     progress: FrameCallback | None = None, every: int = 1) -> dict:  # fmt: skip
    """MODA and MODP of the person detector on ``frames`` (and MODA on the ground plane when
    the ground truth has world coordinates), on frames 1, 1+every, ... (``frames[0]`` is
    frame 1); ``progress(n)`` after each evaluated frame. ``moda_frames``: how many."""
    from semcodec.evaluation.metrics.moda import clear_mod, clear_mod_ground, fit_ground_homography

    detector = _detector(tuple(sorted(config.items())), models_dir)
    numbers = evaluated_frames(len(frames), every)
    boxes = {}
    for done, number in enumerate(numbers, 1):
        boxes[number] = detector.detect(frames[number - 1]).boxes
        if progress is not None:
            progress(done)
    image = clear_mod(boxes, gt, numbers)
    out = {"moda": image.moda, "modp": image.modp, "moda_frames": len(numbers)}
    if gt.has_world:
        ground = clear_mod_ground(boxes, gt, fit_ground_homography(gt), numbers)
        out["moda_ground"] = ground.moda
    return out


def scaffold_person_recall(boxes: Sequence[np.ndarray], gt) -> dict:
    """How many of the counted ground-truth people the scaffolds carry.

    Args:
        boxes: per frame (``boxes[0]`` is frame 1), ``(N, 4)`` ``x1, y1, x2, y2`` boxes of the
            people in the decoded scaffolds.

    Returns:
        ``person_recall``: matched ground-truth people (IoU >= 0.5, as CLEAR MOD matches) /
        counted ground-truth people; ``scaffold_people``: mean people per frame sent.
    """
    from semcodec.evaluation.metrics.moda import clear_mod

    numbers = list(range(1, len(boxes) + 1))
    result = clear_mod(dict(zip(numbers, boxes, strict=True)), gt, numbers)
    recall = result.true_positives / result.gt_objects if result.gt_objects else None
    return {"person_recall": recall,
            "scaffold_people": float(np.mean([len(b) for b in boxes])) if boxes else 0.0}


def evaluated_frames(frames: int, every: int) -> list[int]:
    """Frame numbers 1, 1+every, ... up to ``frames`` (1-based, as in the ground truth)."""
    return list(range(1, frames + 1, every))


def machine_description() -> str:
    """``"x86_64, 2 CPUs, Linux"``: where a row's timings were taken."""
    return f"{platform.machine()}, {os.cpu_count()} CPUs, {platform.system()}"


# ----------------------------------------------------------------------------- the grid


def validate_grid(config: GridConfig) -> None:
    """Checks what can be checked without data or models: metrics, frame counts, codec names,
    options and every setting (with :meth:`Codec.check_setting`).

    Raises:
        BenchError: unknown metrics, a frame count or ``*_every`` below 1, no codec.
        codecs.UnknownCodecError: a codec name is not registered (the message lists them).
        codecs.SettingError: a setting does not parse or does not fit its codec.
    """
    unknown = [m for m in config.metrics if m not in ALL_METRICS]
    if unknown:
        raise BenchError(
            f"unknown metric(s) {', '.join(unknown)}; choose from {', '.join(ALL_METRICS)}"
        )
    if config.frames is not None and config.frames < 1:
        raise BenchError(f"frames must be >= 1, got {config.frames}")
    if config.start < 1:
        raise BenchError(f"start must be >= 1, got {config.start}")
    if config.protocol not in PROTOCOLS:
        raise BenchError(f"protocol must be one of {', '.join(PROTOCOLS)}, got "
                         f"{config.protocol!r}")  # fmt: skip
    for name in ("lpips_every", "moda_every"):
        if getattr(config, name) < 1:
            raise BenchError(f"{name} must be >= 1, got {getattr(config, name)}")
    if not config.codecs:
        raise BenchError("no codec to run; name at least one (see `semcodec-bench codecs`)")
    for name, settings in config.codecs.items():
        codec = create_codec(name, **config.codec_options.get(name, {}))
        for setting in expand_settings(codec, settings, config.scales):
            codec.check_setting(setting)


def plan_cells(config: GridConfig, detectors: dict[str, dict | None]) -> list[CellSpec]:
    """Every cell of the grid, in a stable order (the grid is validated first)."""
    validate_grid(config)
    cells = []
    for sequence in config.sequences:
        detector = detectors.get(sequence)
        for name, settings in config.codecs.items():
            options = config.codec_options.get(name, {})
            codec = create_codec(name, **options)
            versions = f"semcodec {package_version()}; {codec.describe()['encoder_version']}"
            for setting in expand_settings(codec, settings, config.scales):
                cells.append(
                    CellSpec(
                        sequence=sequence,
                        frames=config.frames,
                        codec=name,
                        setting=str(setting),
                        codec_options=tuple(sorted(options.items())),
                        metrics=tuple(config.metrics),
                        detector=tuple(sorted(detector.items())) if detector else None,
                        models_dir=config.models_dir,
                        fvd_weights=config.fvd_weights,
                        lpips_every=config.lpips_every,
                        moda_every=config.moda_every,
                        source_options=_source_options(config),
                        versions=versions,
                        start=config.start,
                        warmup=config.start - 1 if config.protocol == "steady" else 0,
                    )
                )
    return cells


def _source_options(config: GridConfig) -> tuple[tuple[str, object], ...]:
    return tuple(sorted((k, v) for k, v in config.source_options.items() if v is not None))


def expand_settings(codec, settings: Sequence[str], scales: Sequence[float]) -> list[Setting]:
    """The codec's settings (or its defaults) crossed with the scales (not for codecs that
    code at their own size: ``raw`` and those with ``supports_scale = False``)."""
    base = [Setting.parse(s) for s in settings] or codec.default_settings()
    if codec.name == "raw" or not codec.supports_scale:
        return base
    out = []
    for scale in scales:
        for setting in base:
            if scale == 1 or setting.get("scale") is not None:
                out.append(setting)
            else:
                out.append(Setting(setting.params + (("scale", Setting.of(s=scale).get("s")),)))
    return list(dict.fromkeys(out))




def write_csv(rows: list[dict], path: Path) -> None:
    """Writes results.csv: rows with :data:`BASE_COLUMNS` first, ``bytes_*`` after ``bytes``
    (atomically, quoted by the csv module: :func:`~evaluation.report.rows.write_rows_csv`)."""
    from semcodec.evaluation.report.rows import write_rows_csv

    stream_cols = sorted({k for r in rows for k in r if k.startswith("bytes_")})
    extra = sorted({k for r in rows for k in r} - set(BASE_COLUMNS) - set(stream_cols))
    at = BASE_COLUMNS.index("bytes") + 1
    write_rows_csv(rows, BASE_COLUMNS[:at] + stream_cols + BASE_COLUMNS[at:] + extra, path)


def calibrate_detectors(config: GridConfig) -> dict[str, dict | None]:
    """Per sequence, the detector settings with the best MODA on the uncompressed frames.

    Cached in ``OUT/detector/`` (:func:`calibration_name`); on the frames MODA is measured
    on (``config.moda_every``); a fixed ``config.detector`` skips the search.
    """
    if "moda" not in config.metrics:
        return {}
    from semcodec.evaluation.metrics.detector import calibrate_detector

    chosen: dict[str, dict | None] = {}
    for sequence in config.sequences:
        pixels, info, gt = load_sequence(sequence, config.frames, _source_options(config),
                                         config.start)  # fmt: skip
        if gt is None:
            logger.warning("%s: no ground truth, MODA is skipped", info.name)
            chosen[sequence] = None
            continue
        if config.detector is not None:
            chosen[sequence] = dict(config.detector)
            continue
        name = calibration_name(info.name, len(pixels), config.moda_every, config.start)
        cache = config.out_dir / "detector" / name
        if cache.exists():
            chosen[sequence] = json.loads(cache.read_text())["config"]
            continue
        logger.info("%s: choosing the detector's threshold and tiling on the uncompressed "
                    "frames", info.name)  # fmt: skip
        numbers = evaluated_frames(len(pixels), config.moda_every)
        best, table = calibrate_detector(
            pixels[:: config.moda_every], gt, numbers, models_dir=config.models_dir
        )
        chosen[sequence] = dataclasses.asdict(best)
        cache.parent.mkdir(parents=True, exist_ok=True)
        cache.write_text(
            json.dumps({"config": chosen[sequence], "table": table}, indent=1, default=float)
        )
    return chosen


def run_grid(config: GridConfig, executor=None, progress: bool | None = True) -> list[dict]:
    """Runs the cells not yet in ``OUT/results.jsonl``; returns the rows of the grid.

    ``progress``: True draws bars on stderr (cells, and the stage of the running cell under
    the local executor), False none, None only when stderr is a terminal. After every cell
    the row is appended to results.jsonl and results.csv is rewritten with the grid's rows.
    A KeyboardInterrupt leaves both files consistent; rerunning resumes.
    """
    from semcodec.evaluation.bench.executors import LocalExecutor

    executor = executor or LocalExecutor()
    validate_grid(config)
    config.out_dir.mkdir(parents=True, exist_ok=True)
    jsonl = config.out_dir / "results.jsonl"
    if "fvd" in config.metrics:
        _announce_fvd(config)
    cells = plan_cells(config, calibrate_detectors(config))
    keys = {c.key() for c in cells}
    rows = {r["key"]: r for r in read_rows(jsonl) if r.get("key") in keys}
    todo = [c for c in cells if c.key() not in rows]
    if rows:
        logger.info("resuming: %d of %d cells already done", len(cells) - len(todo), len(cells))
    with _Bars(progress, len(todo), executor.name == "local") as bars:
        fn = functools.partial(run_cell, progress=bars.stage) if bars.stages else run_cell
        if todo:
            bars.announce(todo[0])
        with open(jsonl, "a") as out:
            for cell, row in executor.map_unordered(fn, todo):
                out.write(json.dumps(row, default=_json_default) + "\n")
                out.flush()
                rows[row["key"]] = row
                write_csv(_in_grid_order(rows, cells), config.out_dir / "results.csv")
                bars.cell_done(cell, todo)
    ordered = _in_grid_order(rows, cells)
    write_csv(ordered, config.out_dir / "results.csv")
    return ordered


def _in_grid_order(rows: dict[str, dict], cells: list[CellSpec]) -> list[dict]:
    return [rows[c.key()] for c in cells if c.key() in rows]


class _Bars:
    """The progress bars of a run (tqdm, stderr): cells done, and the running cell's stage.

    The stage bar is drawn only for the local executor (the stages of a cell in another
    process are not seen here). Log records go through ``tqdm.write`` while bars are shown.
    """

    def __init__(self, enabled: bool | None, cells: int, stages: bool):
        from tqdm import tqdm

        disable = None if enabled is None else not enabled
        self._cells = tqdm(total=cells, desc="cells", unit="cell", disable=disable,
                           position=0, dynamic_ncols=True)  # fmt: skip
        self.stages = stages and not self._cells.disable
        self._stage = tqdm(total=0, unit="frame", disable=not self.stages, position=1,
                           leave=False, dynamic_ncols=True)  # fmt: skip
        self._label = ""
        self._redirect = None

    def __enter__(self) -> _Bars:
        if not self._cells.disable:
            from tqdm.contrib.logging import logging_redirect_tqdm

            self._redirect = logging_redirect_tqdm([logging.getLogger("semcodec")])
            self._redirect.__enter__()
        return self

    def __exit__(self, *exc) -> None:
        self._stage.close()
        self._cells.close()
        if self._redirect is not None:
            self._redirect.__exit__(*exc)

    def announce(self, cell: CellSpec) -> None:
        """Names the cell that runs now (with the local executor, the next to run)."""
        self._label = f"{cell.codec} {cell.setting}"
        self._cells.set_postfix_str(self._label)

    def stage(self, name: str, total: int) -> FrameCallback:
        """A :class:`StageProgress`: resets the stage bar to ``label: stage``."""
        self._stage.set_description_str(f"{self._label}: {name}", refresh=False)
        self._stage.reset(total=total)
        bar = self._stage

        def callback(done: int) -> None:
            bar.update(done - bar.n)

        return callback

    def cell_done(self, cell: CellSpec, todo: list[CellSpec]) -> None:
        """Counts a finished cell; names the next one (local executor) or the last done."""
        self._cells.update()
        if not self.stages:
            self._cells.set_postfix_str(f"done: {cell.codec} {cell.setting}")
        elif self._cells.n < len(todo):
            self.announce(todo[self._cells.n])




def _json_default(value):
    if isinstance(value, np.generic):
        return value.item()
    raise TypeError(f"not JSON serialisable: {type(value).__name__}")


def _announce_fvd(config: GridConfig) -> None:
    from semcodec.evaluation.metrics.fvd import FVDUnavailableError, load_i3d

    try:
        load_i3d(weights_path=config.fvd_weights, models_dir=config.models_dir)
    except FVDUnavailableError as exc:
        logger.warning("FVD will be left empty: %s", exc)
