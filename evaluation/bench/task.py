"""The task-feature benchmark (issue 14): bytes against detection accuracy.

One run, on one frame range of one sequence:

* ``raw``: the unsplit detector on the uncompressed frames, at the configuration (tiles,
  whole frame or not, score threshold) with the best MODA on them; the reference;
* baselines: every ``(codec, setting)`` of :data:`DEFAULT_BASELINES` (x264 and x265 CRF,
  x265 static-camera with a boosted first frame -- constant QP with ``ipratio=8``: x265's CRF
  mode ignores ``ipratio`` --, x265 at half size, JPEG and WebP) decoded and fed to that same
  detector;
* ``features``: each trained bottleneck's units (real rANS bytes, intra first frame and every
  ``intra_period`` frames, temporal units between) decoded by the cloud half.

Every row: bytes per frame, BPP, MODA, MODP; each ``features`` row also its bytes with the
per-frame model alone (the temporal model's gain) and the saving factor at equal MODA against
every baseline curve (:func:`evaluation.report.saving.saving_for`). Compute of the edge and cloud
halves: FLOPs per frame, frames per second, and the edge process' peak RSS.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

log = logging.getLogger(__name__)

#: ``(codec, setting)`` pairs of the baselines.
DEFAULT_BASELINES: tuple[tuple[str, str], ...] = (
    *(("x264", f"crf={c}") for c in (23, 28, 33, 38, 43, 48, 51)),
    *(("x265", f"crf={c}") for c in (23, 28, 33, 38, 43, 48, 51)),
    *(("x265", f"qp={q},ipratio=8") for q in (36, 40, 44, 48, 51)),
    *(("x265", f"crf={c},scale=0.5") for c in (18, 23, 28, 33)),
    *(("jpeg", f"q={q}") for q in (10, 30, 50, 70, 90)),
    *(("webp", f"q={q}") for q in (10, 30, 50, 70, 90)),
)  # fmt: skip
#: Codecs whose curves a ``features`` row is compared with.
TASK_BASELINE_CODECS = ("x264", "x265", "jpeg", "webp")


@dataclass(frozen=True)
class TaskBenchConfig:
    """One benchmark run.

    Attributes:
        sequence: a sequence name or path.
        start: first frame (1-based); frames: how many.
        bottlenecks: bottleneck files (one ``features`` row each).
        out_dir: where ``rows.json``, ``rows.csv``, ``report.md`` and the plot go.
        baselines: ``(codec, setting)`` pairs.
        moda_every: MODA on every k-th frame.
        intra_period: frames between intra units of the ``features`` codec (0: first only).
        features_threshold: the cloud half's score threshold for ``features`` rows (default:
            the bottleneck's, 0.3); choose it on the camera's training frames.
        skip_threshold: the ``features`` encoder's skip threshold (default: each
            bottleneck's own).
        camera_transform: a new camera made from the sequence
            (:mod:`evaluation.data.camera`: ``zoom=2,x=0.5,y=0.55``, ``scale=0.5``; ``none``).
        targets_kbps: link budgets (kbit/s) for detect mode's rate control: one
            ``features`` row each, curve ``features-target`` (:func:`target_row`).
        min_agreement: the rate control's floor (default: the edge's).
        command: the command line that made the run (in ``report.md``, read by
            ``semcodec-bench figures``).
    """

    sequence: str
    start: int
    frames: int
    bottlenecks: tuple[str, ...]
    out_dir: Path
    baselines: tuple[tuple[str, str], ...] = DEFAULT_BASELINES
    moda_every: int = 1
    intra_period: int = 64
    features_threshold: float | None = None
    skip_threshold: int | None = None
    camera_transform: str = "none"
    data_dir: str | None = None
    models_dir: str | None = None
    threads: int | None = None
    targets_kbps: tuple[float, ...] = ()
    min_agreement: float | None = None
    command: str = ""
    extra: dict = field(default_factory=dict)


def _moda_row(detections: dict, gt, frames: list[int]) -> dict:
    from semcodec.evaluation.metrics.moda import clear_mod

    result = clear_mod(detections, gt, frames=frames)
    return {"moda": result.moda, "modp": result.modp}


def best_unsplit_detector(pixels: np.ndarray, gt, frames: list[int], models_dir, threads):
    """The unsplit detector at its best configuration on the uncompressed ``pixels`` (tiles 1
    or 2, with or without the whole frame, threshold 0.3-0.6) and its calibration rows."""
    from semcodec.evaluation.metrics.detector import (
        DetectorConfig,
        PersonDetector,
        calibrate_detector,
    )

    best, table = None, []
    for whole in (True, False):
        config, rows = calibrate_detector(
            pixels[[n - 1 for n in frames]], gt, frames, tilings=(1, 2) if whole else (2,),
            models_dir=models_dir, threads=threads,
            base_config=DetectorConfig(include_full_frame=whole))  # fmt: skip
        table += [dict(r, include_full_frame=whole) for r in rows]
        score = max(r["moda"] for r in rows)
        if best is None or score > best[0]:
            best = (score, config)
    return PersonDetector(best[1], models_dir, threads), table


def baseline_row(codec_name: str, setting: str, pixels: np.ndarray, fps: float, detector,
                 gt, frames: list[int]) -> dict:  # fmt: skip
    """Encodes, decodes and detects one baseline operating point."""
    from semcodec.evaluation.codecs.base import Setting, create_codec

    codec = create_codec(codec_name)
    parsed = Setting.parse(setting)
    encoded = codec.encode(pixels, parsed, fps=fps)
    decoded = codec.decode(encoded)
    found = {n: detector.detect(decoded[n - 1]) for n in frames}
    t, h, w, _ = pixels.shape
    size = len(encoded.payload)
    return {"codec": codec_name, "setting": str(parsed), "curve": codec.curve_of(parsed),
            "bytes_per_frame": size / t, "bpp": 8.0 * size / (t * h * w),
            **_moda_row(found, gt, frames)}  # fmt: skip


def features_row(path: str, pixels: np.ndarray, gt, frames: list[int], intra_period: int,
                 model, threads, threshold: float | None = None,
                 skip_threshold: int | None = None, fps: float = 25.0,
                 person_detector=None, camera=None, references: dict | None = None,
                 ) -> dict:  # fmt: skip
    """Codes the frames with one bottleneck; bytes, MODA and compute of both halves.

    As the edge does: the windows and the cloud's threshold are chosen on the first
    :data:`~codec.scaffold.profile.PROFILE_SECONDS` of ``pixels`` without ground truth
    (:func:`codec.task.calibrate.profile_detect`, with ``person_detector``, the full
    detector; ``camera``: the profile when already chosen on those frames; ``references``:
    the reference operating points already chosen on them in that profile, by bottleneck cut,
    filled as they are chosen); ``threshold`` replaces the chosen threshold."""
    import torch

    from semcodec.codec.entropy.features import encode_features
    from semcodec.codec.scaffold.profile import PROFILE_SECONDS
    from semcodec.codec.task.bottleneck import load_bottleneck
    from semcodec.codec.task.calibrate import profile_detect
    from semcodec.codec.task.coder import TaskDecoder, TaskEncoder
    from semcodec.codec.task.split import SplitDetector

    bottleneck = load_bottleneck(path)
    startup = pixels[: max(1, round(PROFILE_SECONDS * fps))]
    memo = references if camera is not None and references is not None else {}
    profile = profile_detect(startup, bottleneck, model, person_detector, camera,
                             memo.get(bottleneck.split))  # fmt: skip
    memo[bottleneck.split] = profile.reference_threshold
    split = profile.split(bottleneck.split)
    if threshold is not None:
        split = dataclasses.replace(split, score_threshold=threshold)
    detector = cloud = SplitDetector(model, split)
    t, h, w, _ = pixels.shape
    encoder = TaskEncoder(bottleneck, detector, intra_period, skip_threshold)
    decoder = TaskDecoder(bottleneck, cloud, encoder.shape(h, w), h, w)
    sizes, intra_sizes, found = [], [], {}
    edge_s = cloud_s = 0.0
    wanted = set(frames)
    for i, frame in enumerate(pixels):
        start = time.perf_counter()
        unit = encoder.encode(frame)
        edge_s += time.perf_counter() - start
        sizes.append(len(unit))
        start = time.perf_counter()
        detections = decoder.decode(unit)
        cloud_s += time.perf_counter() - start
        intra_sizes.append(1 + len(encode_features(decoder.previous, bottleneck.tables)))
        if i + 1 in wanted:
            found[i + 1] = detections
    edge_flops, cloud_flops = task_flops(bottleneck, detector, h, w)
    return {
        "codec": "features",
        "setting": f"beta={bottleneck.metadata.get('beta', 0):g},skip={encoder.skip_threshold}"
                   + (",trained=mixed" if _mixed(bottleneck) else ""),
        "skip_threshold": encoder.skip_threshold,
        "score_threshold": cloud.config.score_threshold, "tiles": split.tiles,
        "profile": profile.describe(),
        "curve": "features", "file": str(path), "sha256": bottleneck.sha256(),
        "bytes_per_frame": float(np.mean(sizes)), "bpp": 8.0 * sum(sizes) / (t * h * w),
        "bytes_per_frame_median": float(np.median(sizes)), "first_unit_bytes": sizes[0],
        "per_frame_model_bytes_per_frame": float(np.mean(intra_sizes)),
        "temporal_gain": float(np.mean(intra_sizes) / np.mean(sizes)),
        "edge_mflop_per_frame": edge_flops / 1e6, "cloud_mflop_per_frame": cloud_flops / 1e6,
        "edge_fps": t / edge_s, "cloud_fps": t / cloud_s,
        "threads": torch.get_num_threads() if threads is None else threads,
        **_moda_row(found, gt, frames),
    }  # fmt: skip


def target_row(target_kbps: float, pixels: np.ndarray, gt, frames: list[int], model,
               fps: float, person_detector, min_agreement: float | None = None,
               models_dir: str | None = None, table=None) -> dict:  # fmt: skip
    """Detect mode at a budget, as ``edge-agent encode --mode detect --target-kbps`` codes
    it: the rate control chooses among the shipped bottlenecks on the start-up frames and
    holds the target (:mod:`codec.task.ratecontrol`); the cloud decodes the real stream.
    ``table``: the start-up frames' rate table when measured already (it does not depend
    on the target: :func:`codec.task.stream.rate_table`).

    Returns the row: bytes (header and unit framing included), the rate reached against the
    target (``rate_ratio``), MODA, what was chosen (``rate_choice``), how often it moved
    (``rate_moves``, and each move in ``rate_switches``: frame from 1, β, skip threshold,
    intra period, why; ``beta_switches``: how many changed bottleneck, ``betas_used``), what
    the self-check measured, and the status at the start (``rate_status``) and the end
    (``rate_status_end``)."""
    from semcodec.codec.task import DEFAULT_MIN_AGREEMENT
    from semcodec.codec.task.split import SplitDetector
    from semcodec.codec.task.stream import (
        DetectRateRequest,
        decode_detect,
        encode_detect,
        open_detect_decoder,
        shipped_candidates,
    )

    candidates = shipped_candidates()
    floor = DEFAULT_MIN_AGREEMENT if min_agreement is None else min_agreement
    request = DetectRateRequest(target_kbps * 1000, candidates, floor, table)
    t, h, w, _ = pixels.shape
    base = next(iter(candidates.values())).split
    header, units, stats = encode_detect(iter(pixels), None, SplitDetector(model, base), fps,
                                         (w, h), t, person_detector=person_detector,
                                         rate=request)  # fmt: skip
    units = list(units)
    size = len(header.to_bytes()) + sum(len(u.to_bytes()) for u in units)
    decoder = open_detect_decoder(header, models_dir=models_dir)
    wanted = set(frames)
    found = {n: d for n, d in decode_detect(units, decoder) if n in wanted}
    kbps = 8.0 * size * fps / t / 1000
    checks = [a for _, a in stats.agreements]
    settings = header.settings
    return {
        "codec": "features", "curve": "features-target",
        "setting": f"target={target_kbps:g}kbps", "target_kbps": target_kbps,
        "kbps": kbps, "rate_ratio": kbps / target_kbps, "rate_status": settings["rate_status"],
        "rate_choice": stats.rate, "beta": float(settings["beta"]),
        "min_agreement": floor, "start_agreement": float(settings["profile_agreement"]),
        "start_quality": float(settings.get("profile_quality", "nan")),
        "check_agreement_min": min(checks) if checks else None,
        "check_agreement_mean": float(np.mean(checks)) if checks else None,
        "rate_moves": len(stats.switches) - 1,
        "rate_switches": json.dumps([[s.frame + 1, s.setting.beta, s.setting.skip_threshold,
                                      s.setting.intra_period, s.reason]
                                     for s in stats.switches]),
        "beta_switches": len(stats.beta_switches),
        "betas_used": ",".join(dict.fromkeys(f"{s.setting.beta:g}" for s in stats.switches)),
        "rate_status_end": stats.status,
        "score_threshold": float(settings["score_threshold"]), "profile": stats.profile,
        "intra_units": stats.intra_units,
        "bytes_per_frame": size / t, "bpp": 8.0 * size / (t * h * w),
        **_moda_row(found, gt, frames),
    }  # fmt: skip


def _mixed(bottleneck) -> bool:
    """Whether the bottleneck was trained on ranges with their own layouts."""
    return any(len(d) > 3 for d in bottleneck.metadata.get("data", []))


def task_flops(bottleneck, detector, height: int, width: int) -> tuple[int, int]:
    """FLOPs per frame (a multiply-add is 2) of the edge half (backbone to the cut and the
    analysis transform) and of the cloud half (synthesis and the rest of the detector), over
    all windows; resizing, entropy coding and NMS are not counted."""
    import torch
    from torch.utils.flop_counter import FlopCounterMode

    windows = len(detector.config.windows(height, width))
    x = torch.zeros(windows, 3, 300, 300).contiguous(memory_format=torch.channels_last)
    model = detector.model
    with torch.inference_mode(), FlopCounterMode(display=False) as edge:
        f = model.features(x, upto=detector.config.after)
        y = bottleneck.model.analysis(f)
    with torch.inference_mode(), FlopCounterMode(display=False) as cloud:
        detector.raw_outputs(bottleneck.model.synthesis(y))
    return int(edge.get_total_flops()), int(cloud.get_total_flops())


def run_task_bench(config: TaskBenchConfig) -> list[dict]:
    """Runs the benchmark; writes ``rows.json``/``rows.csv``/``report.md``/``rate_moda.png``
    under ``config.out_dir`` and returns the rows. Baseline rows are kept in
    ``out_dir/baselines/`` and reused by a later run of the same range and detector (running
    the same command again resumes; other bottlenecks can be added then)."""
    import torch

    from semcodec.codec.core.sources import resolve_data_path
    from semcodec.codec.scaffold.profile import PROFILE_SECONDS
    from semcodec.codec.task.calibrate import choose_layout
    from semcodec.codec.task.split import load_split_model
    from semcodec.evaluation.data.camera import parse_camera_transform
    from semcodec.evaluation.data.sequences import load_sequence
    from semcodec.evaluation.report.markdown import write_text_atomic

    if config.threads:
        torch.set_num_threads(config.threads)
    path = str(resolve_data_path(config.sequence, config.data_dir))
    pixels, info, gt = load_sequence(path, config.frames, (), config.start)
    if gt is None:
        raise ValueError(f"{config.sequence}: MODA needs ground truth (gt/gt.txt)")
    camera = parse_camera_transform(config.camera_transform)
    gt = camera.groundtruth(gt, pixels.shape[2], pixels.shape[1])
    pixels = camera.frames(pixels)
    t, h, w, _ = pixels.shape
    frames = list(range(1, t + 1, config.moda_every))
    name = info.name if camera.is_identity else f"{info.name}[{camera.describe()}]"
    common = {"sequence": name, "start": config.start, "frames": t, "width": w, "height": h,
              "camera_transform": camera.describe()}  # fmt: skip
    detector, calibration = best_unsplit_detector(pixels, gt, frames, config.models_dir,
                                                  config.threads)  # fmt: skip
    found = {n: detector.detect(pixels[n - 1]) for n in frames}
    rows = [{**common, "codec": "raw", "setting": json.dumps(dataclasses.asdict(detector.config)),
             "curve": "raw", "bytes_per_frame": 3.0 * h * w, "bpp": 24.0,
             **_moda_row(found, gt, frames)}]  # fmt: skip
    out = config.out_dir
    out.mkdir(parents=True, exist_ok=True)
    (out / "detector.json").write_text(json.dumps(calibration, indent=1) + "\n")
    key = {**common, "moda_every": config.moda_every,
           "detector": dataclasses.asdict(detector.config)}  # fmt: skip
    for codec_name, setting in config.baselines:
        cell = out / "baselines" / f"{codec_name}-{setting.replace(',', '_')}.json"
        row = _cached_row(cell, key)
        if row is None:
            log.info("baseline %s %s", codec_name, setting)
            row = {**common, **baseline_row(codec_name, setting, pixels, info.fps, detector,
                                            gt, frames)}  # fmt: skip
            write_text_atomic(cell, json.dumps({"key": key, "row": row}) + "\n")
        rows.append(row)
    model = load_split_model(config.models_dir)
    profile, references = None, {}
    if config.bottlenecks:  # the windows do not depend on the bottleneck: chosen once
        startup = pixels[: max(1, round(PROFILE_SECONDS * info.fps))]
        profile = choose_layout(startup, detector)
    for name in config.bottlenecks:
        log.info("features %s", name)
        rows.append({**common, **features_row(name, pixels, gt, frames, config.intra_period,
                                              model, config.threads,
                                              config.features_threshold,
                                              config.skip_threshold, info.fps,
                                              detector, profile, references)})  # fmt: skip
        _write(out, rows)
    table = None
    if config.targets_kbps:  # the same start-up frames for every target: measured once
        from semcodec.codec.task.stream import rate_table, shipped_candidates

        log.info("the rate table of the start-up frames")
        startup = list(pixels[: max(2, round(PROFILE_SECONDS * info.fps))])
        table = rate_table(startup, shipped_candidates(), model, detector)
    for target in config.targets_kbps:
        log.info("features at a target of %g kbit/s", target)
        rows.append({**common, **target_row(target, pixels, gt, frames, model, info.fps,
                                            detector, config.min_agreement,
                                            config.models_dir, table)})  # fmt: skip
        _write(out, rows)
    rows = add_savings(rows)
    if config.bottlenecks and camera.is_identity:  # the child reads the sequence as it is
        rows[0].update(edge_process(config.bottlenecks[0], path, config.start,
                                    min(config.frames, 60), out, config.models_dir))  # fmt: skip
    _write(out, rows, final=True, command=config.command)
    return rows


def edge_process(bottleneck: str, sequence: str, start: int, frames: int, out: Path,
                 models_dir: str | None = None) -> dict:  # fmt: skip
    """Runs ``edge-agent encode --mode detect`` (one thread) on ``frames`` frames in a child
    process: its peak RSS (MiB, from ``/proc``; 0 where there is none) and frames per second,
    wall time including start-up."""
    import subprocess
    import sys

    semc = out / "edge-process.semc"
    command = [sys.executable, "-m", "semcodec.edge.cli", "encode", sequence, "-o", str(semc),
               "--mode", "detect", "--bottleneck", str(bottleneck), "--start", str(start),
               "--frames", str(frames), "--threads", "1", "-q", "--no-progress"]  # fmt: skip
    if models_dir:
        command += ["--models-dir", str(models_dir)]
    started = time.perf_counter()
    child = subprocess.Popen(command)
    peak_kib = 0
    while child.poll() is None:
        # VmHWM of the child's own image (not RUSAGE_CHILDREN: a forked child counts the
        # parent's pages it shared before exec), read until it exits
        peak_kib = max(peak_kib, _vm_hwm_kib(child.pid))
        time.sleep(0.05)
    seconds = time.perf_counter() - started
    if child.returncode != 0:
        raise subprocess.CalledProcessError(child.returncode, command)
    semc.unlink(missing_ok=True)
    return {"edge_process_frames": frames, "edge_process_fps": frames / seconds,
            "edge_process_peak_rss_mib": peak_kib / 1024}  # fmt: skip


def _vm_hwm_kib(pid: int) -> int:
    """The peak resident set of process ``pid`` so far (``VmHWM``, KiB; 0 if unknown)."""
    try:
        with open(f"/proc/{pid}/status", encoding="ascii") as fh:
            for line in fh:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1])
    except (OSError, ValueError):
        pass
    return 0


def add_savings(rows: list[dict]) -> list[dict]:
    """Adds ``saving`` (best baseline bytes / row bytes at equal MODA), its ``bound`` and
    ``baseline`` to every ``features`` row."""
    from semcodec.evaluation.report.saving import bpp_for_quality

    curves: dict[str, list] = {}
    for row in rows:
        if row["codec"] in TASK_BASELINE_CODECS and np.isfinite(row["moda"]):
            curves.setdefault(row["curve"], []).append((row["bpp"], row["moda"]))
    for row in rows:
        if row["codec"] != "features" or not curves:
            continue
        answers = {c: bpp_for_quality(p, row["moda"], True) for c, p in curves.items()}
        exact = {c: b for c, (b, bound) in answers.items() if bound == "="}
        at_most = {c: b for c, (b, bound) in answers.items() if bound == "<="}
        if at_most and (not exact or min(at_most.values()) <= min(exact.values())):
            name, bound = min(at_most, key=at_most.get), "<="
        elif exact:
            name, bound = min(exact, key=exact.get), "="
        else:
            name, bound = max(answers, key=lambda c: answers[c][0]), ">="
        row.update(saving=answers[name][0] / row["bpp"], saving_bound=bound,
                   saving_baseline=name)  # fmt: skip
    return rows


def format_table(rows: Sequence[dict]) -> str:
    """A Markdown table of the rows: codec, setting, bytes per frame, BPP, MODA, MODP,
    saving factor."""
    lines = ["| codec | setting | bytes/frame | BPP | MODA | MODP | saving at equal MODA |",
             "|---|---|---|---|---|---|---|"]  # fmt: skip
    for r in sorted(rows, key=lambda r: (r["codec"] != "raw", r["codec"] != "features",
                                         r.get("curve", ""), r["bpp"])):  # fmt: skip
        saving = ""
        if "saving" in r:
            bound = "" if r["saving_bound"] == "=" else r["saving_bound"] + " "
            saving = f"{bound}{r['saving']:.2f}x ({r['saving_baseline']})"
        setting = "best on uncompressed frames" if r["codec"] == "raw" else r["setting"]
        lines.append(f"| {r['curve'] if r['codec'] != 'raw' else 'raw'} | {setting} | "
                     f"{r['bytes_per_frame']:,.0f} | {r['bpp']:.4f} | {r['moda']:.3f} | "
                     f"{r['modp']:.3f} | {saving} |")  # fmt: skip
    return "\n".join(lines)


def _cached_row(path: Path, key: dict) -> dict | None:
    """A baseline row measured by an earlier run of the same range and detector (a run
    stopped half-way resumes), else None."""
    try:
        cached = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    if not isinstance(cached, dict) or cached.get("key") != json.loads(json.dumps(key)):
        return None
    return cached.get("row")


def _write(out: Path, rows: list[dict], final: bool = False, command: str = "") -> None:
    """``rows.json``, ``rows.csv``; at the end also ``report.md`` (the table, what the edge
    chose, the command), the plot and ``results.jsonl``, what ``semcodec-bench figures``
    reads of a run: the ``raw`` and ``features`` rows, each ``features`` row with its
    saving against the baselines (their rows stay in ``rows.json``)."""
    import csv
    import io

    from semcodec.evaluation.report.figures import record_command
    from semcodec.evaluation.report.markdown import plot_rate_quality, write_text_atomic

    write_text_atomic(out / "rows.json", json.dumps(rows, indent=1) + "\n")
    table = io.StringIO()
    writer = csv.DictWriter(table, sorted({k for r in rows for k in r}))
    writer.writeheader()
    writer.writerows(rows)
    write_text_atomic(out / "rows.csv", table.getvalue())
    if final:
        chosen = [f"- {r['setting']}: {r['profile']}" for r in rows if r.get("profile")]
        camera = rows[0].get("camera_transform", "none") if rows else "none"
        notes = [f"Camera transform: {camera}.", "",
                 "Chosen by the edge on the camera's start-up frames (no ground truth):",
                 *chosen] if chosen else []  # fmt: skip
        said = [f"Command: `{command}`"] if command else []
        if command:  # a folder filled by several invocations names them all
            record_command(out, command)
        write_text_atomic(out / "report.md",
                          "\n".join([format_table(rows), "", *notes, "", *said]) + "\n")
        shown = [r for r in rows if r["codec"] in ("raw", "features")]
        write_text_atomic(out / "results.jsonl", "".join(json.dumps(r) + "\n" for r in shown))
        plot_rate_quality(rows, "moda", out / "rate_moda.png")
