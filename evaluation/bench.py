"""The benchmark grid: sequences x codecs x settings x metrics, one result row per cell.

:func:`run_grid` plans the cells of a :class:`GridConfig`, skips those already in
``OUT/results.jsonl`` (the run is resumable: a finished cell is never recomputed), runs the
rest on an executor, appends each row to ``results.jsonl`` as soon as it is ready, and then
rewrites ``results.csv``. Plots, BD-rates and the Markdown report are made from those files
by :mod:`evaluation.report`.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import hashlib
import json
import platform
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path

import numpy as np
from semcodec.evaluation.codecs import Setting, create_codec

ALL_METRICS = ("psnr", "ms_ssim", "st_lpips", "moda", "fvd")
DEFAULT_METRICS = ("psnr", "ms_ssim", "st_lpips", "moda")

#: Columns of results.csv, in order; per-stream byte columns ``bytes_*`` follow ``bytes``.
BASE_COLUMNS = [
    "sequence",
    "codec",
    "setting",
    "curve",
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
    "fvd",
    "moda",
    "modp",
    "moda_ground",
    "enc_fps",
    "dec_fps",
    "dec_flops_per_frame",
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


@dataclass(frozen=True)
class CellSpec:
    """One (sequence, codec, setting) cell; picklable, so any executor can run it.

    ``sequence`` is a path (MOT folder, frame folder or video file); ``frames`` the number of
    frames read from its start (None: all). ``detector`` is the detector configuration as a
    dict (chosen per sequence on the uncompressed frames), None when MODA is not measured.
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

    def key(self) -> str:
        """Stable id of the cell: the hash of everything that changes its result."""
        payload = dataclasses.asdict(self)
        payload.pop("models_dir")
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
    metrics: tuple[str, ...] = DEFAULT_METRICS
    codec_options: dict[str, dict[str, object]] = field(default_factory=dict)
    scales: tuple[float, ...] = (1.0,)
    models_dir: str | None = None
    fvd_weights: str | None = None
    detector: dict | None = None  # None: calibrate per sequence on the uncompressed frames
    lpips_every: int = 1  # ST-LPIPS on every k-th frame (it costs ~1 s per 768x576 frame)
    source_options: dict = field(default_factory=dict)  # fps/width/height for open_source


# ----------------------------------------------------------------------------- loading


@lru_cache(maxsize=2)
def load_sequence(path: str, frames: int | None, source_options: tuple = ()):
    """``(frames (T,H,W,3) uint8 RGB, SourceInfo, GroundTruth | None)`` for a sequence.

    ``source_options`` are ``(key, value)`` pairs for :func:`edge.sources.open_source`
    (``fps``, ``width``, ``height``: what a raw ``.yuv`` needs). Cached per process, so the
    cells of one sequence read it once.
    """
    from semcodec.edge.sources import open_source
    from semcodec.evaluation.groundtruth import load_mot_groundtruth

    source = open_source(path, **dict(source_options))
    pixels = source.read(start=1, count=frames)
    if len(pixels) == 0:
        raise BenchError(f"{path}: no frames could be read")
    gt = None
    if source.info.groundtruth is not None:
        gt = load_mot_groundtruth(source.info.groundtruth).restrict(1, len(pixels))
    return pixels, source.info, gt


def sequence_name(path: str) -> str:
    """The display name of a sequence (``seqinfo.ini`` name, else the file or folder name)."""
    from semcodec.edge.sources import open_source

    return open_source(path).info.name


# ----------------------------------------------------------------------------- one cell


def run_cell(cell: CellSpec) -> dict:
    """Encodes, decodes and measures one cell; returns its result row."""
    pixels, info, gt = load_sequence(cell.sequence, cell.frames, cell.source_options)
    codec = create_codec(cell.codec, **dict(cell.codec_options))
    setting = Setting.parse(cell.setting)
    encoded = codec.encode(pixels, setting, fps=info.fps)
    start = time.perf_counter()
    decoded = codec.decode(encoded)
    decode_seconds = time.perf_counter() - start
    if decoded.shape != pixels.shape:
        raise BenchError(
            f"{cell.codec} {setting}: decoded shape {decoded.shape}, expected {pixels.shape}"
        )
    t, h, w, _ = pixels.shape
    from semcodec.evaluation.metrics import bits_per_pixel

    row: dict = {
        "sequence": info.name,
        "codec": cell.codec,
        "setting": str(setting),
        "curve": codec.curve_of(setting),
        "frames": t,
        "width": w,
        "height": h,
        "fps": info.fps,
        "bytes": encoded.num_bytes,
        "bpp": bits_per_pixel(encoded.num_bytes, w, h, t),
        "container_bytes": encoded.container_bytes,
        "enc_fps": t / encoded.encode_seconds if encoded.encode_seconds > 0 else None,
        "dec_fps": t / decode_seconds if decode_seconds > 0 else None,
        "dec_flops_per_frame": encoded.metadata.get("dec_flops_per_frame"),
        **codec.describe(),
        "codec_options": json.dumps(dict(cell.codec_options), sort_keys=True),
        "detector": json.dumps(dict(cell.detector)) if cell.detector else "",
        "machine": machine_description(),
        "key": cell.key(),
    }
    for stream, n in encoded.stream_bytes.items():
        row[f"bytes_{stream}"] = n
    row.update(measure_quality(pixels, decoded, cell, gt))
    row["finished"] = dt.datetime.now(dt.UTC).isoformat(timespec="seconds")
    return {k: _finite_or_none(v) for k, v in row.items()}


def _finite_or_none(value):
    """NaN/inf (e.g. MODP with no match) become None: empty in CSV, null in JSON."""
    if isinstance(value, float | np.floating) and not np.isfinite(value):
        return None
    return value


def measure_quality(reference: np.ndarray, decoded: np.ndarray, cell: CellSpec, gt) -> dict:
    """The quality columns that ``cell.metrics`` asks for (others stay absent)."""
    from semcodec.evaluation import metrics

    out: dict = {}
    if "psnr" in cell.metrics:
        out["psnr"] = metrics.psnr(reference, decoded)
        out["psnr_y"] = metrics.psnr(reference, decoded, space="y")
    if "ms_ssim" in cell.metrics:
        out["ms_ssim"] = metrics.ms_ssim(reference, decoded)
    if "st_lpips" in cell.metrics:
        from semcodec.evaluation.perceptual import st_lpips

        k = cell.lpips_every
        out["st_lpips"] = st_lpips(reference[::k], decoded[::k], models_dir=cell.models_dir)
        out["st_lpips_frames"] = len(reference[::k])
    if "moda" in cell.metrics and gt is not None and cell.detector is not None:
        out.update(detection_scores(decoded, gt, dict(cell.detector), cell.models_dir))
    if "fvd" in cell.metrics:
        from semcodec.evaluation.fvd import FVDUnavailableError, fvd

        try:
            out["fvd"] = fvd(
                reference, decoded, weights_path=cell.fvd_weights, models_dir=cell.models_dir
            )
        except FVDUnavailableError:
            out["fvd"] = None  # announced once by run_grid, not per cell
    return out


@lru_cache(maxsize=4)
def _detector(config_items: tuple, models_dir: str | None):
    from semcodec.evaluation.detector import DetectorConfig, PersonDetector

    return PersonDetector(DetectorConfig(**dict(config_items)), models_dir=models_dir)


def detection_scores(frames: np.ndarray, gt, config: dict, models_dir: str | None) -> dict:
    """MODA and MODP of the person detector on ``frames`` (and MODA on the ground plane when
    the ground truth has world coordinates)."""
    from semcodec.evaluation.moda import clear_mod, clear_mod_ground, fit_ground_homography

    detector = _detector(tuple(sorted(config.items())), models_dir)
    boxes = {i + 1: detector.detect(frame).boxes for i, frame in enumerate(frames)}
    numbers = list(range(1, len(frames) + 1))
    image = clear_mod(boxes, gt, numbers)
    out = {"moda": image.moda, "modp": image.modp}
    if gt.has_world:
        ground = clear_mod_ground(boxes, gt, fit_ground_homography(gt), numbers, distance_m=1.0)
        out["moda_ground"] = ground.moda
    return out


def machine_description() -> str:
    """``"x86_64, 2 CPUs, Linux"``: where a row's timings were taken."""
    import os

    return f"{platform.machine()}, {os.cpu_count()} CPUs, {platform.system()}"


# ----------------------------------------------------------------------------- the grid


def plan_cells(config: GridConfig, detectors: dict[str, dict | None]) -> list[CellSpec]:
    """Every cell of the grid, in a stable order."""
    if config.lpips_every < 1:
        raise BenchError(f"lpips_every must be >= 1, got {config.lpips_every}")
    unknown = set(config.metrics) - set(ALL_METRICS)
    if unknown:
        raise BenchError(
            f"unknown metric(s) {sorted(unknown)}; choose from {', '.join(ALL_METRICS)}"
        )
    cells = []
    for sequence in config.sequences:
        for name, settings in config.codecs.items():
            options = config.codec_options.get(name, {})
            codec = create_codec(name, **options)
            for setting in expand_settings(codec, settings, config.scales):
                detector = detectors.get(sequence)
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
                        source_options=_source_options(config),
                    )
                )
    return cells


def _source_options(config: GridConfig) -> tuple[tuple[str, object], ...]:
    return tuple(sorted((k, v) for k, v in config.source_options.items() if v is not None))


def expand_settings(codec, settings: Sequence[str], scales: Sequence[float]) -> list[Setting]:
    """The codec's settings (or its defaults) crossed with the scales (not for ``raw``)."""
    base = [Setting.parse(s) for s in settings] or codec.default_settings()
    if codec.name == "raw":
        return base
    out = []
    for scale in scales:
        for setting in base:
            if scale == 1 or setting.get("scale") is not None:
                out.append(setting)
            else:
                out.append(Setting(setting.params + (("scale", Setting.of(s=scale).get("s")),)))
    return list(dict.fromkeys(out))


def read_rows(path: Path) -> list[dict]:
    """Rows of a results.jsonl (an incomplete last line, from a killed run, is skipped)."""
    if not path.exists():
        return []
    rows = []
    for line in path.read_text().splitlines():
        try:
            rows.append(json.loads(line))
        except json.JSONDecodeError:
            continue
    return rows


def write_csv(rows: list[dict], path: Path) -> None:
    """Writes rows with :data:`BASE_COLUMNS` first, ``bytes_*`` after ``bytes``."""
    import csv

    stream_cols = sorted({k for r in rows for k in r if k.startswith("bytes_")})
    extra = sorted({k for r in rows for k in r} - set(BASE_COLUMNS) - set(stream_cols))
    at = BASE_COLUMNS.index("bytes") + 1
    columns = BASE_COLUMNS[:at] + stream_cols + BASE_COLUMNS[at:] + extra
    tmp = path.with_suffix(".csv.tmp")
    with open(tmp, "w", newline="") as fh:
        writer = csv.DictWriter(fh, columns, extrasaction="ignore")
        writer.writeheader()
        for row in rows:
            writer.writerow({k: _csv_value(row.get(k)) for k in columns})
    tmp.replace(path)


def _csv_value(value):
    if value is None:
        return ""
    if isinstance(value, float):
        return f"{value:.8g}"
    return value


def calibrate_detectors(config: GridConfig, log: Callable[[str], None]) -> dict[str, dict | None]:
    """Per sequence, the detector settings with the best MODA on the uncompressed frames.

    Cached in ``OUT/detector/<sequence>.json``; a fixed ``config.detector`` skips the search.
    """
    if "moda" not in config.metrics:
        return {}
    from semcodec.evaluation.detector import calibrate_detector

    chosen: dict[str, dict | None] = {}
    for sequence in config.sequences:
        pixels, info, gt = load_sequence(sequence, config.frames, _source_options(config))
        if gt is None:
            log(f"{info.name}: no ground truth, MODA is skipped")
            chosen[sequence] = None
            continue
        if config.detector is not None:
            chosen[sequence] = dict(config.detector)
            continue
        cache = config.out_dir / "detector" / f"{info.name}-{len(pixels)}f.json"
        if cache.exists():
            chosen[sequence] = json.loads(cache.read_text())["config"]
            continue
        log(f"{info.name}: choosing detector threshold and tiling on the uncompressed frames")
        best, table = calibrate_detector(
            pixels, gt, list(range(1, len(pixels) + 1)), models_dir=config.models_dir
        )
        chosen[sequence] = dataclasses.asdict(best)
        cache.parent.mkdir(parents=True, exist_ok=True)
        cache.write_text(
            json.dumps({"config": chosen[sequence], "table": table}, indent=1, default=float)
        )
    return chosen


def run_grid(
    config: GridConfig, executor=None, progress: bool = True, log: Callable[[str], None] = print
) -> list[dict]:
    """Runs the cells not yet in ``OUT/results.jsonl``; returns all rows of the grid."""
    from semcodec.evaluation.executors import LocalExecutor
    from tqdm import tqdm

    executor = executor or LocalExecutor()
    config.out_dir.mkdir(parents=True, exist_ok=True)
    jsonl = config.out_dir / "results.jsonl"
    if "fvd" in config.metrics:
        _announce_fvd(config, log)
    detectors = calibrate_detectors(config, log)
    cells = plan_cells(config, detectors)
    done = {row.get("key") for row in read_rows(jsonl)}
    todo = [c for c in cells if c.key() not in done]
    if len(todo) < len(cells):
        log(f"resuming: {len(cells) - len(todo)} of {len(cells)} cells already done")
    with (
        open(jsonl, "a") as out,
        tqdm(total=len(todo), disable=not progress, desc="cells", unit="cell") as bar,
    ):
        for cell, row in executor.map_unordered(run_cell, todo):
            out.write(json.dumps(row, default=_json_default) + "\n")
            out.flush()
            bar.set_postfix_str(f"{cell.codec} {cell.setting}")
            bar.update()
    keys = {c.key() for c in cells}
    rows = [r for r in read_rows(jsonl) if r.get("key") in keys]
    write_csv(latest_rows(read_rows(jsonl)), config.out_dir / "results.csv")
    return rows


def latest_rows(rows: list[dict]) -> list[dict]:
    """One row per key (the last one written)."""
    return list({row.get("key"): row for row in rows}.values())


def _json_default(value):
    if isinstance(value, np.generic):
        return value.item()
    raise TypeError(f"not JSON serialisable: {type(value).__name__}")


def _announce_fvd(config: GridConfig, log: Callable[[str], None]) -> None:
    from semcodec.evaluation.fvd import FVDUnavailableError, load_i3d

    try:
        load_i3d(weights_path=config.fvd_weights, models_dir=config.models_dir)
    except FVDUnavailableError as exc:
        log(f"FVD will be left empty: {exc}")
