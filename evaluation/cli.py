"""``semcodec-bench``: measure rate, compute and quality of codecs on real video.

With no arguments it runs the default grid on the sample embedded in the repository.
"""

from __future__ import annotations

import argparse
import shlex
import sys
from pathlib import Path

from semcodec.codec.models import MODELS_DIR_HELP

DEFAULT_CODECS = "x264,x265,scaffold,raw"
DEFAULT_OUT = "runs/bench"
VIDEO_CODECS = ("x264", "x265")
IMAGE_CODECS = ("jpeg", "webp")


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


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="semcodec-bench",
        description="Measure rate (BPP from real bytes), compute and quality of codecs on real "
        "video, and draw the trade-off. With no arguments: `run` on the embedded sample.",
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")

    run = sub.add_parser(
        "run",
        help="run a grid of sequences x codecs x settings x metrics",
        description="Runs the grid and writes OUT/results.csv, OUT/results.jsonl (one row per "
        "sequence, codec and setting), rate-quality plots, a rate-compute-quality plot, "
        "BD-rates against x265 and OUT/report.md. Resumable: cells already in "
        "OUT/results.jsonl are not recomputed.",
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
    )
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
        "--fps", type=float, help="frame rate of frame folders and raw .yuv (else their own)"
    )
    data.add_argument("--width", type=int, help="frame width of a raw .yuv")
    data.add_argument("--height", type=int, help="frame height of a raw .yuv")
    data.add_argument(
        "--frames",
        type=int,
        metavar="N",
        help="frames from the start of each sequence (default: all)",
    )
    codecs = run.add_argument_group("codecs and settings")
    codecs.add_argument(
        "--codecs",
        default=DEFAULT_CODECS,
        type=_csv_list,
        metavar="NAME,...",
        help="codecs by registry name (see `semcodec-bench codecs`)",
    )
    codecs.add_argument(
        "--crf",
        type=_numbers,
        metavar="N,...",
        help="CRF values for x264/x265 (default 23,28,33,38)",
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
        help="quality values 1..100 for jpeg/webp (default 30,50,70,90)",
    )
    codecs.add_argument(
        "--scales",
        type=_numbers,
        default=["1"],
        metavar="F,...",
        help="encode at these fractions of the size and upscale after decoding (e.g. 1,0.5)",
    )
    codecs.add_argument(
        "--settings",
        action="append",
        default=[],
        metavar="CODEC:S1;S2",
        help="explicit settings for one codec, e.g. 'x264:crf=30;qp=40'",
    )
    codecs.add_argument("--preset", default="medium", help="x264/x265 preset")
    codecs.add_argument(
        "--gop",
        type=int,
        default=0,
        help="x264/x265 frames between intra frames (0: first frame only)",
    )
    meas = run.add_argument_group("metrics")
    meas.add_argument(
        "--metrics",
        default="psnr,ms_ssim,st_lpips,moda",
        type=_csv_list,
        metavar="NAME,...",
        help="of psnr, ms_ssim, st_lpips, moda, fvd",
    )
    meas.add_argument(
        "--models-dir",
        metavar="DIR",
        help=MODELS_DIR_HELP,
    )
    meas.add_argument(
        "--lpips-every",
        type=int,
        default=1,
        metavar="K",
        help="compute ST-LPIPS on every K-th frame only (it is the slowest metric: "
        "about 1 s per 768x576 frame on 2 cores)",
    )
    meas.add_argument("--fvd-weights", metavar="PATH", help="TorchScript I3D for FVD")
    meas.add_argument(
        "--detector-threshold",
        type=float,
        metavar="F",
        help="fix the person detector's score threshold (default: chosen per "
        "sequence on the uncompressed frames, with the tiling)",
    )
    meas.add_argument(
        "--detector-tiles",
        type=int,
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
        help="where cells run (timings are only comparable under `local`)",
    )
    exe.add_argument("--workers", type=int, default=2, help="processes for --executor process")
    exe.add_argument("--no-progress", action="store_true", help="no progress bars")

    rep = sub.add_parser("report", help="redraw plots, BD-rates and report.md of a finished run")
    rep.add_argument("out", type=Path, nargs="?", default=Path(DEFAULT_OUT), metavar="DIR")

    sub.add_parser("codecs", help="list the registered codecs and their default settings")

    models = sub.add_parser("models", help="list or download the pretrained models")
    models.add_argument("action", choices=("list", "download"))
    models.add_argument("name", nargs="?", help="model to download")
    models.add_argument("--models-dir", metavar="DIR", help=MODELS_DIR_HELP)

    train = sub.add_parser(
        "train-flow-prior",
        help="fit the learned flow prior of the scaffold codec on DIS flow of a video",
        description="Counts quantized DIS flow residuals over training frames and writes the "
        "prior as JSON (pass it to `edge-agent encode --flow-prior` and `cloud-decoder decode "
        "--flow-prior`). The shipped priors were made with `--data "
        "PETS09-S2L1-full/PETS09-S2L1.avi --first 1 --last 500` and the levels' grid/step "
        "(1/16 and 1.0; 1/8 and 0.5; 1/8 and 0.25).",
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
    )
    train.add_argument("--data", required=True, help="a video file (path or name under "
                       "--data-dir / $SEMCODEC_DATA_DIR / ../shared/data)")  # fmt: skip
    train.add_argument("--data-dir", metavar="DIR")
    train.add_argument("--first", type=int, default=1, help="first training frame (1-based)")
    train.add_argument("--last", type=int, default=500, help="last training frame")
    train.add_argument("--scale", type=float, default=0.0625, help="flow grid / frame size")
    train.add_argument("--step", type=float, default=1.0, help="quantization step (pixels)")
    train.add_argument("-o", "--output", type=Path, required=True, help="JSON file to write")

    datasets = sub.add_parser("data", help="list the dataset recipes, or verify local copies")
    datasets.add_argument("action", choices=("list", "verify"))
    datasets.add_argument(
        "--data-dir",
        metavar="DIR",
        help="root holding the sequences (default: $SEMCODEC_DATA_DIR or ../shared/data)",
    )
    return parser


def grid_from_args(args: argparse.Namespace):
    """The :class:`~evaluation.bench.GridConfig` that ``run``'s arguments describe."""
    from semcodec.edge.sources import resolve_data_path, sample_path
    from semcodec.evaluation.bench import GridConfig

    sequences = [str(resolve_data_path(p, args.data_dir)) for p in (args.data or [])]
    sequences = sequences or [str(sample_path())]
    explicit: dict[str, list[str]] = {}
    for item in args.settings:
        name, sep, rest = item.partition(":")
        if not sep or not rest:
            raise SystemExit(f"--settings {item!r}: expected CODEC:SETTING[;SETTING...]")
        explicit.setdefault(name, []).extend(s for s in rest.split(";") if s)
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
    options = {name: {"preset": args.preset, "gop": args.gop} for name in VIDEO_CODECS}
    detector = None
    if args.detector_threshold is not None:
        detector = {"score_threshold": args.detector_threshold, "tiles": args.detector_tiles}
    return GridConfig(
        sequences=sequences,
        codecs=codecs,
        out_dir=args.out,
        frames=args.frames,
        metrics=tuple(args.metrics),
        codec_options=options,
        scales=tuple(float(s) for s in args.scales),
        models_dir=args.models_dir,
        fvd_weights=args.fvd_weights,
        lpips_every=args.lpips_every,
        source_options={"fps": args.fps, "width": args.width, "height": args.height},
        detector=detector,
    )


def cmd_run(args: argparse.Namespace, argv: list[str]) -> int:
    from semcodec.evaluation.bench import run_grid
    from semcodec.evaluation.executors import create_executor
    from semcodec.evaluation.report import write_report

    config = grid_from_args(args)
    executor = create_executor(args.executor, args.workers)
    rows = run_grid(config, executor, progress=not args.no_progress)
    command = "semcodec-bench " + shlex.join(argv)
    report = write_report(rows, config.out_dir, command=command)
    print(f"{len(rows)} rows: {config.out_dir / 'results.csv'}; report: {report}")
    return 0


def cmd_report(args: argparse.Namespace) -> int:
    from semcodec.evaluation.bench import latest_rows, read_rows
    from semcodec.evaluation.report import write_report

    rows = latest_rows(read_rows(args.out / "results.jsonl"))
    if not rows:
        print(
            f"no results in {args.out / 'results.jsonl'}: run `semcodec-bench run` first",
            file=sys.stderr,
        )
        return 2
    print(write_report(rows, args.out))
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
    from semcodec.codec.models import ModelError, download_model, list_models, resolve_model

    if args.action == "list":
        for spec in list_models():
            try:
                where = str(resolve_model(spec.name, args.models_dir))
            except ModelError as exc:
                where = f"MISSING ({type(exc).__name__})"
            print(f"{spec.name:30s} {spec.licence:13s} {where}")
        return 0
    if not args.name:
        print("models download: name the model (see `semcodec-bench models list`)", file=sys.stderr)
        return 2
    try:
        print(download_model(args.name, args.models_dir))
    except ModelError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    return 0


def cmd_train_flow_prior(args: argparse.Namespace) -> int:
    from semcodec.codec.entropy.flow import fit_flow_prior_from_video
    from semcodec.edge.sources import resolve_data_path
    from tqdm import tqdm

    path = resolve_data_path(args.data, args.data_dir)
    if path.is_dir():
        raise SystemExit(f"train-flow-prior: {path} is a folder; give the video file in it")
    with tqdm(total=args.last, desc="frames", unit="frame") as bar:

        def progress(done: int, total: int) -> None:
            bar.n = done
            bar.refresh()

        prior = fit_flow_prior_from_video(path, range(args.first, args.last + 1),
                                          scale=args.scale, step=args.step,
                                          progress=progress)  # fmt: skip
    prior.save(args.output)
    print(f"{args.output}: flow prior, step {prior.step}, sha256 {prior.sha256}")
    return 0


def cmd_data(args: argparse.Namespace) -> int:
    import os

    from semcodec.edge.sources import DATA_DIR_ENV
    from semcodec.evaluation.recipes import load_recipes, verify_recipe

    recipes = load_recipes()
    if args.action == "list":
        for name, recipe in sorted(recipes.items()):
            print(f"{name:28s} {recipe.summary_line()}")
        return 0
    root = Path(
        args.data_dir
        or os.environ.get(DATA_DIR_ENV)
        or Path(__file__).resolve().parents[1].parent / "shared" / "data"
    )
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
    if not argv:
        argv = ["run"]
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        return _dispatch(parser, args, argv)
    except _user_errors() as exc:
        print(f"semcodec-bench: error: {exc}", file=sys.stderr)
        return 2


def _user_errors() -> tuple[type[BaseException], ...]:
    from semcodec.codec.models import ModelError
    from semcodec.edge.sources import SourceError
    from semcodec.evaluation.bench import BenchError
    from semcodec.evaluation.codecs import CodecError, SettingError

    return (ModelError, SourceError, BenchError, CodecError, SettingError)


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
    if args.command == "train-flow-prior":
        return cmd_train_flow_prior(args)
    parser.print_help()
    return 2


if __name__ == "__main__":
    sys.exit(main())
