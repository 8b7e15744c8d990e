"""The grid and its outputs: ``run`` (measure), ``report`` (redraw a finished run),
``sidebyside`` (pictures)."""

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
from semcodec.codec.core.models import MODELS_DIR_HELP
from semcodec.evaluation.cli.common import (
    CAMERA_TRANSFORM_HELP,
    DEFAULT_CODECS,
    DEFAULT_OUT,
    DEMO_LPIPS_EVERY,
    DEMO_MODA_EVERY,
    DEMO_X265_AT_LEVEL1_RATE,
    IMAGE_CODECS,
    PROG,
    STATIC_CAMERA_SETTINGS,
    UsageError,
    accepted_names,
    camera_transform,
    csv_list,
    log,
    numbers,
    probability,
    step_list,
)


def add_parsers(sub: argparse._SubParsersAction) -> None:
    """Adds the ``run``, ``report``, ``figures``, ``sidebyside``, ``plate`` parsers."""
    from semcodec.evaluation.bench.options import PROTOCOLS, STEADY_INTRA_PERIOD

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
    data.add_argument("--camera-transform", type=camera_transform, default="none",
                      metavar="SPEC", help=CAMERA_TRANSFORM_HELP)  # fmt: skip
    codecs = run.add_argument_group("codecs and settings")
    codecs.add_argument(
        "--codecs",
        default=DEFAULT_CODECS,
        type=csv_list,
        metavar="NAME,...",
        help=f"codecs by registry name, of {accepted_names('codecs')} (see `semcodec-bench "
        "codecs`)",
    )
    codecs.add_argument(
        "--crf",
        type=numbers,
        metavar="N,...",
        help="CRF values 0..51 for x264/x265 (default: 23,28,33,38)",
    )
    codecs.add_argument(
        "--qp",
        type=numbers,
        metavar="N,...",
        help="constant QP values for x264/x265, instead of CRF",
    )
    codecs.add_argument(
        "--quality",
        type=numbers,
        metavar="Q,...",
        help="quality values 1..100 for jpeg/webp (default: 30,50,70,90)",
    )
    codecs.add_argument(
        "--scales",
        type=numbers,
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
        type=csv_list,
        default=[],
        metavar="NAMES",
        help="scaffold: rebuild every level with each of these reconstructors (warp, restore, "
        "animate, diffusion) besides none: its settings as given, decoded by the default "
        "decoder; rows are named level=N[,decoder=NAME[,steps=S]]",
    )
    codecs.add_argument(
        "--steps",
        type=step_list,
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
        type=csv_list,
        metavar="NAME,...",
        help=f"quality metrics, of {accepted_names('metrics')}",
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
        type=probability,
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
        help=f"where cells run, of {accepted_names('executors')} (only local gives timings to "
        "quote)",
    )
    exe.add_argument(
        "--workers", type=positive_int, default=2, help="processes for --executor process"
    )
    exe.add_argument(
        "--no-progress",
        action="store_true",
        help="no progress bars (they are drawn on stderr when it is a terminal, unless -q)",
    )
    run.set_defaults(handler=cmd_run)
    rep = sub.add_parser("report", help="redraw plots, BD-rates and report.md of a finished run")
    add_verbosity(rep)
    rep.add_argument("out", type=Path, nargs="?", default=Path(DEFAULT_OUT), metavar="DIR",
                     help=f"the run's output folder (default: {DEFAULT_OUT})")  # fmt: skip
    rep.set_defaults(handler=cmd_report)
    figures = sub.add_parser(
        "figures",
        help="write a named result set of finished runs under docs/results/, or refresh the "
        "README's generated tables from those sets",
        description="With --name NAME RUN_DIR...: writes RESULTS/NAME.json (the runs' commands, "
        "every row's figures, saving factors) and RESULTS/NAME.md (the tables). With --readme "
        "FILE...: replaces each block between <!-- figures:NAME --> and <!-- /figures:NAME --> "
        "in each FILE with RESULTS/NAME.md. `make readme-figures` runs the README's measurements "
        "and both steps.",
    )
    add_verbosity(figures)
    figures.add_argument("runs", type=Path, nargs="*", metavar="RUN_DIR",
                         help="finished runs (their results.jsonl; a later run's row of the same "
                         "cell wins)")  # fmt: skip
    figures.add_argument("--name", help="the result set's name (NAME.json, NAME.md)")
    figures.add_argument("--against", metavar="CODEC:SETTING",
                         help="with --name: also how many times fewer bits each curve of that "
                         "codec (its settings over their target_bpp) needs to reach this row's "
                         "quality, e.g. scaffold:level=1 (today's level-1 default)")  # fmt: skip
    figures.add_argument("--results", type=Path, default=Path("docs/results"), metavar="DIR",
                         help="where result sets live")  # fmt: skip
    figures.add_argument("--readme", type=Path, nargs="+", metavar="FILE",
                         help="refresh the generated blocks of these pages (README.md "
                         "docs/results.md ...) and write the tables they quote that are made "
                         "of other files: the code's parameters (RESULTS/parameters.json, "
                         "levels.md, columns.md), quick.md, headline.md")  # fmt: skip
    figures.set_defaults(handler=cmd_figures)
    side = sub.add_parser(
        "sidebyside",
        help="a picture of chosen frames: the original beside codecs' reconstructions",
        description="Encodes the clip with each --show CODEC:SETTING (as `run` does), decodes "
        "it and writes one row per --at frame: the original, then each reconstruction, "
        "labelled with the codec, setting and the clip's BPP.",
        formatter_class=DefaultsHelpFormatter,
    )
    add_verbosity(side)
    _add_clip_arguments(side, "the sequence (as for `run --data`)")
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
    side.set_defaults(handler=cmd_sidebyside)
    plate = sub.add_parser(
        "plate",
        help="is the plate clean? a level-1 stream's plates against the clip's person-free "
        "median",
        description="Encodes the clip with the scaffold --setting, decodes it and checks each "
        "plate the decoder holds against the median of the clip's frames where no "
        "ground-truth person stands: the mean luma difference, and the blobs (regions whose "
        "luma is off by more than 40 levels: a person or their ghost kept in the plate). "
        "Writes the last plate, the reference and the blobs in red to -o.",
        formatter_class=DefaultsHelpFormatter,
    )
    add_verbosity(plate)
    _add_clip_arguments(plate, "the sequence (with ground truth)")
    plate.add_argument("--setting", default="level=1", help="the scaffold setting to check")
    plate.add_argument("-o", "--output", type=Path, help="the PNG of the last plate")
    plate.set_defaults(handler=cmd_plate)


def _add_clip_arguments(parser: argparse.ArgumentParser, data_help: str) -> None:
    """The clip a picture command reads: --data, --data-dir, --start, --frames and
    --camera-transform (read by :func:`_load_clip`)."""
    parser.add_argument("--data", required=True, help=data_help)
    parser.add_argument("--data-dir", metavar="DIR", help="where sequence names are looked up")
    parser.add_argument("--start", type=positive_int, default=1,
                        help="first frame read (1-based)")  # fmt: skip
    parser.add_argument("--frames", type=positive_int, metavar="N", help="frames read")
    parser.add_argument("--camera-transform", type=camera_transform, default="none",
                        metavar="SPEC", help=CAMERA_TRANSFORM_HELP)  # fmt: skip


def _load_clip(args: argparse.Namespace, warmup: int = 0):
    """``(frames, info, ground truth)`` of :func:`_add_clip_arguments`' clip, with
    ``warmup`` frames before ``--start`` (read, not shown)."""
    from semcodec.codec.core.sources import resolve_data_path
    from semcodec.evaluation.data.sequences import load_sequence

    path = str(resolve_data_path(args.data, args.data_dir))
    options = () if args.camera_transform == "none" else (("camera_transform",
                                                             args.camera_transform),)
    frames = None if args.frames is None else args.frames + warmup
    return load_sequence(path, frames, options, start=args.start - warmup)


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
    from semcodec.evaluation.codecs.base import create_codec

    unknown = sorted(set(decoders) - set(available_reconstructors()))
    if unknown:
        raise UsageError(f"--decoders {','.join(decoders)}: expected names among "
                         f"{', '.join(available_reconstructors())}")  # fmt: skip
    if steps and "diffusion" not in decoders:
        raise UsageError("--steps is the diffusion decoder's: add diffusion to --decoders")
    base = settings or [str(s) for s in create_codec("scaffold").default_settings()]
    out = []
    for setting in base:
        for decoder in decoders or [None]:
            if decoder is None:  # the setting as given: the default decoder, or its own
                out.append(setting)
            elif decoder == "diffusion" and steps:
                out.extend(f"{setting},decoder=diffusion,steps={n}" for n in steps)
            else:
                out.append(f"{setting},decoder={decoder}")
    return out


def grid_from_args(args: argparse.Namespace):
    """The :class:`~evaluation.bench.grid.GridConfig` that ``run``'s arguments describe.

    Cheap: resolves sequence paths (without reading frames) and checks the grid with
    :func:`evaluation.bench.validate_grid`; no model is resolved.
    """
    from semcodec.codec.core.sources import resolve_data_path, sample_path
    from semcodec.evaluation.bench.grid import GridConfig, validate_grid
    from semcodec.evaluation.bench.options import VIDEO_CODECS, codec_options_for
    from semcodec.evaluation.codecs.base import create_codec

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
    if not args.data and "x265" in codecs and not codecs["x265"] and not args.crf \
            and not args.qp and not args.static_camera:  # the demo grid: also at level 1's rate
        base = [str(s) for s in create_codec("x265").default_settings()]
        codecs["x265"] = [*base, *DEMO_X265_AT_LEVEL1_RATE]
    if args.static_camera:
        if "x265" not in codecs:
            raise UsageError("--static-camera adds settings to x265: name x265 in --codecs")
        base = codecs["x265"] or [str(s) for s in create_codec("x265").default_settings()]
        codecs["x265"] = [*base, *STATIC_CAMERA_SETTINGS]
    if "scaffold" in codecs:
        codecs["scaffold"] = _with_decoders(codecs["scaffold"], args.decoders, args.steps)
    elif args.decoders or args.steps:
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
    from semcodec.evaluation.bench.options import codec_options_for
    from semcodec.evaluation.bench.sidebyside import side_by_side, write_png

    shows = []
    for item in args.show:
        name, sep, setting = item.partition(":")
        if not sep or not setting:
            raise UsageError(f"--show {item!r}: expected CODEC:SETTING")
        shows.append((name, setting))
    if not args.output.parent.is_dir():
        raise UsageError(f"-o {args.output}: the folder {args.output.parent} does not exist")
    warmup = args.start - 1 if args.protocol == "steady" else 0
    pixels, info, _ = _load_clip(args, warmup)
    try:
        picture = side_by_side(pixels, info.fps, shows, args.at, args.width, warmup,
                               codec_options_for(args.protocol, args.gop))  # fmt: skip
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    log.info("wrote %s", write_png(picture, args.output))
    return 0


def cmd_plate(args: argparse.Namespace) -> int:
    from semcodec.evaluation.bench.plate import check_plates
    from semcodec.evaluation.bench.sidebyside import write_png

    if args.output is not None and not args.output.parent.is_dir():
        raise UsageError(f"-o {args.output}: the folder {args.output.parent} does not exist")
    pixels, info, gt = _load_clip(args)
    if gt is None:
        raise UsageError(f"--data {args.data}: has no ground truth to find its people by")
    try:
        rows = check_plates(pixels, gt, info.fps, args.setting)
    except ValueError as exc:
        raise UsageError(f"--setting {args.setting}: {exc}") from None
    for row in rows:
        print(f"frame {row['frame']}: luma error {row['luma_error']:.2f} levels, blobs "
              f"{row['blobs']} covering {row['blob_share']:.2%} of the judged "
              f"{row['judged']:.0%} of the frame")  # fmt: skip
    if rows:
        print(rows[0]["profile"])
    if rows and args.output is not None:
        log.info("wrote %s", write_png(rows[-1]["picture"], args.output))
    return 0


def cmd_run(args: argparse.Namespace) -> int:
    from semcodec.evaluation.bench.executors import create_executor
    from semcodec.evaluation.bench.grid import run_grid
    from semcodec.evaluation.report.figures import record_command
    from semcodec.evaluation.report.markdown import write_report

    config = grid_from_args(args)
    executor = create_executor(args.executor, args.workers)
    if args.out.exists() and not args.out.is_dir():
        raise UsageError(f"--out {args.out}: exists and is not a folder")
    progress = False if (args.no_progress or args.quiet) else None
    rows = run_grid(config, executor, progress=progress)
    command = f"{PROG} " + shlex.join(args.argv)
    record_command(config.out_dir, command)
    report = write_report(rows, config.out_dir, command=command)
    log.info("%d rows: %s; report: %s", len(rows), config.out_dir / "results.csv", report)
    if not args.data and "scaffold" in config.codecs and "x265" in config.codecs:
        picture = _equal_rate_picture(config, rows)
        if picture is not None:
            log.info("level 1 beside x265 at its rate: %s", picture)
    return 0


#: What the demo's picture shows beside the original: this scaffold setting, and x265 at its
#: rate (:func:`~evaluation.bench.sidebyside.equal_rate_baseline`).
DEMO_PICTURE_SETTING = "level=1"


def _equal_rate_picture(config, rows: list[dict]) -> Path | None:
    """``OUT/sidebyside.png``: the first, middle and last frame of the clip, original, x265
    at level 1's rate and level 1 with the default decoder (None without those rows)."""
    from semcodec.evaluation.bench.sidebyside import (
        equal_rate_baseline,
        side_by_side,
        write_png,
    )
    from semcodec.evaluation.data.sequences import load_sequence

    x265 = equal_rate_baseline(rows, "scaffold", DEMO_PICTURE_SETTING)
    if x265 is None:
        return None
    pixels, info, _ = load_sequence(config.sequences[0], config.frames, (), start=config.start)
    shows = [("x265", str(x265["setting"])), ("scaffold", DEMO_PICTURE_SETTING)]
    count = len(pixels)
    picture = side_by_side(pixels, info.fps, shows, sorted({1, (count + 1) // 2, count}),
                           width=pixels.shape[2], options=config.codec_options)  # fmt: skip
    return write_png(picture, config.out_dir / "sidebyside.png")


def cmd_report(args: argparse.Namespace) -> int:
    from semcodec.evaluation.report.markdown import write_report
    from semcodec.evaluation.report.rows import latest_rows, read_rows

    rows = latest_rows(read_rows(args.out / "results.jsonl"))
    if not rows:
        raise UsageError(f"no results in {args.out / 'results.jsonl'}: run `{PROG} run` first")
    log.info("report: %s", write_report(rows, args.out))
    return 0


def cmd_figures(args: argparse.Namespace) -> int:
    from semcodec.evaluation.report.figures import splice_readme, write_result_set

    if bool(args.name) != bool(args.runs):
        raise UsageError("figures: give --name NAME with the RUN_DIRs it is made of")
    if not args.name and not args.readme:
        raise UsageError("figures: give --name NAME RUN_DIR..., or --readme FILE, or both")
    if args.against and not args.name:
        raise UsageError("figures: --against applies to a result set: give --name NAME RUN_DIR...")
    if args.name:
        for path in write_result_set(args.name, args.runs, args.results, args.against):
            log.info("wrote %s", path)
    if args.readme:
        from semcodec.evaluation.cli.parameters import write_code_figures

        write_code_figures(args.results)
        for page in args.readme:
            changed = splice_readme(page, args.results)
            log.info("%s: %s", page, "tables refreshed" if changed else "already current")
    return 0
