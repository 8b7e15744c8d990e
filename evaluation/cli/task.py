"""The task-feature codec measured: ``task`` (bottlenecks against x264/x265 by MODA) and
``split-points``."""

from __future__ import annotations

import argparse
import shlex
from pathlib import Path

from semcodec.codec.core.console import (
    DefaultsHelpFormatter,
    add_verbosity,
    non_negative_int,
    positive_float,
    positive_int,
)
from semcodec.evaluation.cli.common import (
    CAMERA_TRANSFORM_HELP,
    UsageError,
    camera_transform,
    write_json,
)


def add_parsers(sub: argparse._SubParsersAction) -> None:
    """Adds the ``task``, ``split-points`` parsers."""
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
    task.add_argument("--camera-transform", type=camera_transform, default="none",
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
    task.add_argument("--targets-kbps", nargs="+", type=positive_float, default=(),
                      metavar="K",
                      help="detect mode at these link budgets (kbit/s), as `edge-agent encode "
                      "--mode detect --target-kbps K` codes it: one row each (curve "
                      "features-target) with the rate reached and what the edge chose; without "
                      "--bottlenecks, no fixed-bottleneck rows then")  # fmt: skip
    task.add_argument("--min-agreement", type=float, metavar="F",
                      help="--targets-kbps: the edge's agreement floor (default: the edge's)")
    task.add_argument("--threads", type=positive_int, help="torch/onnxruntime threads")
    task.add_argument("--models-dir", metavar="DIR", help="searched first for models")
    task.add_argument("--out", type=Path, required=True, metavar="DIR", help="output folder")
    task.set_defaults(handler=cmd_task)
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
    split.set_defaults(handler=cmd_split_points)


def cmd_task(args: argparse.Namespace) -> int:
    from semcodec.evaluation.bench.task import (
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
    if args.min_agreement is not None and not (args.targets_kbps
                                               and 0.0 <= args.min_agreement <= 1.0):  # fmt: skip
        raise UsageError("--min-agreement is a number in [0, 1] and goes with --targets-kbps")
    bottlenecks = args.bottlenecks or ([] if args.targets_kbps else _shipped_bottlenecks())
    config = TaskBenchConfig(
        sequence=args.data, start=args.start, frames=args.frames,
        bottlenecks=tuple(bottlenecks), out_dir=args.out,
        baselines=tuple(baselines),
        moda_every=args.moda_every, intra_period=args.intra_period,
        features_threshold=args.features_threshold, skip_threshold=args.skip_threshold,
        camera_transform=args.camera_transform, data_dir=args.data_dir,
        models_dir=args.models_dir, threads=args.threads,
        targets_kbps=tuple(args.targets_kbps), min_agreement=args.min_agreement,
        command="semcodec-bench " + shlex.join(args.argv),
    )  # fmt: skip
    print(format_table(run_task_bench(config)))
    return 0


def _shipped_bottlenecks() -> list[str]:
    from semcodec.codec.task.stream import shipped_bottlenecks, verify_shipped

    return [str(verify_shipped(p)) for _, p in sorted(shipped_bottlenecks().items())]




def cmd_split_points(args: argparse.Namespace) -> int:
    from semcodec.evaluation.bench.split_points import format_table, split_costs

    costs = split_costs()
    print(format_table(costs))
    if args.json:
        write_json(args.json, [c.to_dict() for c in costs])
    return 0
