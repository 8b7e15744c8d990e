"""Training the learned parts: ``train-flow-prior``, ``train-decoder``, ``score-decoder``,
``train-restorer``, ``train-redraw``, ``train-refiner``, ``train-bottleneck``."""

from __future__ import annotations

import argparse
from pathlib import Path

from semcodec.codec.core.console import (
    DefaultsHelpFormatter,
    add_verbosity,
    non_negative_float,
    non_negative_int,
    positive_float,
    positive_int,
)
from semcodec.evaluation.cli.common import (
    UsageError,
    fraction,
    log,
    step_list,
    webp_quality,
    write_json,
)


def add_parsers(sub: argparse._SubParsersAction) -> None:
    """Adds the parsers of this module's sub-commands, each with its handler."""
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
    train.set_defaults(handler=cmd_train_flow_prior)
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
    decoder.set_defaults(handler=cmd_train_decoder)
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
    restorer.add_argument("--scales", type=fraction, nargs="+", default=[1.0, 0.5, 0.35],
                          metavar="S", help="sizes of the training references, fractions of "
                          "a person's full reference (level 1's refreshes and thumbnails)")
    restorer.add_argument("--qualities", type=webp_quality, nargs="+", default=[30],
                          metavar="Q", help="WebP qualities of the training references "
                          "(level 1's appearance_quality; each example draws one)")
    restorer.add_argument("--data-dir", metavar="DIR", help="where sequence names are looked up")
    restorer.set_defaults(handler=cmd_train_restorer)
    redraw = sub.add_parser(
        "train-redraw",
        help="train the redrawing network of `restore,redraw=...` (issue 54)",
        description="Codes PETS09-S2L1-full 1-300, TUD-Stadtmitte 1-90 and PETS 1-300 zoomed "
        "2x with level 1 at 0.002 and 0.004 BPP, decodes them with the default decoder "
        "(without redrawing), cuts every person's window from the decoded and the original "
        "frames (at the ground-truth boxes and at the boxes the stream carries), fine-tunes "
        "the shipped restorer of --width as drawn -> original (L1 + ST-LPIPS + the person "
        "detector's evidence) and scores it "
        "on the short clips PETS 501-560, TUD 91-179 and zoomed PETS 501-560. Writes "
        "OUT/redraw.pt (pass it as `--decoder restore --redraw FILE`) and OUT/scores.json.",
        formatter_class=DefaultsHelpFormatter,
    )
    add_verbosity(redraw)
    redraw.add_argument("--out", type=Path, required=True, metavar="DIR", help="output folder")
    redraw.add_argument("--width", type=int, choices=(8, 32), default=8,
                        help="channels at full resolution, the compute knob: 8 starts from "
                        "ref_restorer_w8, 32 from ref_restorer_v2")  # fmt: skip
    redraw.add_argument("--steps", type=positive_int, default=600,
                        help="optimizer steps (600 made the shipped files)")  # fmt: skip
    redraw.add_argument("--seed", type=non_negative_int, default=0, help="seed")
    redraw.add_argument("--windows", type=Path, metavar="DIR",
                        help="cache of the training and held-out windows (made when absent; "
                        "the coding and decoding take most of the time)")  # fmt: skip
    redraw.add_argument("--detector-weight", type=non_negative_float, default=0.1,
                        help="weight of the person detector's evidence in the loss (its "
                        "person logits on the redrawn window against the original's; "
                        "0: L1 + ST-LPIPS only; 0.1 made the shipped file)")  # fmt: skip
    redraw.add_argument("--device", default="cpu",
                        help="torch device to train on (cpu, cuda); the windows are made "
                        "on the CPU (or read from --windows)")  # fmt: skip
    redraw.add_argument("--data-dir", metavar="DIR", help="where sequence names are looked up")
    redraw.set_defaults(handler=cmd_train_redraw)
    refiner = sub.add_parser(
        "train-refiner",
        help="train the learned refiner of `decoder=animate` (issue 39)",
        description="Makes examples from the ground-truth tracks of PETS09-S2L1-full 1-500, "
        "TUD-Stadtmitte 1-90 and PETS 1-500 zoomed 2x (an earlier reference as level 1 codes "
        "it, its cloud matte, animated from the sparse pose it was taken in to the pose now; "
        "the limb maps of the pose now; the original crop and the plate under it), trains the "
        "refiner from the shipped restorer of its width (L1 + ST-LPIPS of the refined person "
        "over the plate) and scores it on PETS 501-620 and TUD 91-179. Writes OUT/refiner.pt "
        "(pass it as `decoder=animate,refiner=FILE`) and OUT/scores.json. A larger run on a "
        "GPU: --config docs/train-refiner-gpu.toml --device cuda.",
        formatter_class=DefaultsHelpFormatter,
    )
    add_verbosity(refiner)
    refiner.add_argument("--out", type=Path, required=True, metavar="DIR", help="output folder")
    refiner.add_argument("--config", type=Path, metavar="TOML",
                         help="keys of the training (width, blocks, steps, batch, lr, seed, "
                         "init, max_seconds); the flags below override it")  # fmt: skip
    refiner.add_argument("--width", type=positive_int,
                         help="channels at full resolution: the compute knob (default 8)")
    refiner.add_argument("--blocks", type=positive_int, help="residual blocks (default 4)")
    refiner.add_argument("--steps", type=positive_int, help="optimizer steps (default 400)")
    refiner.add_argument("--batch", type=positive_int, help="examples per step (default 32)")
    refiner.add_argument("--seed", type=non_negative_int, help="seed (default 0)")
    refiner.add_argument("--init", help="a restorer to start from (name or file), 'auto' "
                         "(the shipped one of this width) or '' (from scratch)")  # fmt: skip
    refiner.add_argument("--max-seconds", type=positive_float,
                         help="stop training after this long")  # fmt: skip
    refiner.add_argument("--examples", type=Path, metavar="NPZ",
                         help="cache of the training examples (made when absent)")
    refiner.add_argument("--held-out", type=Path, metavar="NPZ",
                         help="cache of the held-out examples (made when absent)")
    refiner.add_argument("--device", default="cpu", help="torch device to train on")
    refiner.add_argument("--data-dir", metavar="DIR", help="where sequence names are looked up")
    refiner.set_defaults(handler=cmd_train_refiner)
    sr = sub.add_parser(
        "train-sr",
        help="fine-tune a super-resolution network of the cloud's plate",
        description="Codes frames of PETS09-S2L1-full 1-450 and TUD-Stadtmitte 1-80 as "
        "level 1 sends a plate at half size (HEVC intra or WebP, decoded at that size), "
        "fine-tunes the network (L1 + ST-LPIPS on random crops) and validates on PETS "
        "451-500 and TUD 81-90 against bicubic and the network it started from (never the "
        "measured 501-795 / 91-179). Writes OUT/sr.pt and OUT/scores.json.",
        formatter_class=DefaultsHelpFormatter,
    )
    add_verbosity(sr)
    sr.add_argument("--out", type=Path, required=True, metavar="DIR", help="output folder")
    sr.add_argument("--base", default="esrgan-slim", choices=["esrgan-slim", "esrgan-medium"],
                    help="the network to start from")  # fmt: skip
    sr.add_argument("--steps", type=positive_int, default=300, help="optimizer steps")
    sr.add_argument("--batch", type=positive_int, default=8, help="crops per step")
    sr.add_argument("--seed", type=non_negative_int, default=0, help="seed")
    sr.add_argument("--data-dir", metavar="DIR", help="where sequence names are looked up")
    sr.add_argument("--device", default="cpu", help="torch device to train on (cpu, cuda)")
    examples = sr.add_mutually_exclusive_group()
    examples.add_argument("--pairs", type=Path, metavar="FILE",
                          help="train from examples written by --write-pairs (no sequences "
                          "or intra coders needed)")  # fmt: skip
    examples.add_argument("--write-pairs", type=Path, metavar="FILE",
                          help="only make the examples and write them to FILE (.npz)")
    sr.set_defaults(handler=cmd_train_sr)
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
    score.add_argument("--steps", type=step_list, default=[1, 2, 4, 8], metavar="S1,S2",
                       help="sampling steps to score")  # fmt: skip
    score.add_argument("--windows", type=positive_int, metavar="N",
                       help="score N windows drawn at random (default: all)")  # fmt: skip
    score.add_argument("--cache", type=Path, metavar="DIR", help="examples cache folder")
    score.add_argument("--device", default="cpu", help="torch device")
    score.add_argument("--out", type=Path, required=True, metavar="FILE.json",
                       help="JSON file to write")  # fmt: skip
    score.set_defaults(handler=cmd_score_decoder)
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
                       "evaluation/training/bottleneck.py)")  # fmt: skip
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
    bneck.set_defaults(handler=cmd_train_bottleneck)


def _device(args: argparse.Namespace) -> str:
    """``args.device``, refused (exit 2) when it names CUDA and PyTorch sees none (every
    trainer with ``--device`` asks here, before it spends time on its data)."""
    import torch

    if args.device.startswith("cuda") and not torch.cuda.is_available():
        raise UsageError(f"--device {args.device}: PyTorch sees no CUDA device here")
    return args.device


def cmd_train_flow_prior(args: argparse.Namespace) -> int:
    from tqdm import tqdm

    from semcodec.codec.core.sources import resolve_data_path
    from semcodec.codec.scaffold.flow import fit_flow_prior_from_video

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

    from semcodec.evaluation.training.decoder import DataRange, TrainConfig, train

    config = TrainConfig.from_toml(args.config) if args.config else TrainConfig()
    changes: dict = {}
    if args.data:
        changes["data"] = (DataRange(args.data, args.start, args.frames),)
    for key in ("steps", "init", "seed"):
        if getattr(args, key) is not None:
            changes[key] = getattr(args, key)
    config = dataclasses.replace(config, **changes)
    weights = train(config, args.out, resume=args.resume, data_dir=args.data_dir,
                    show_progress=not args.quiet, device=_device(args))  # fmt: skip
    log.info("wrote %s (loss curve: %s)", weights, args.out / "loss.png")
    return 0


def cmd_train_restorer(args: argparse.Namespace) -> int:
    from semcodec.evaluation.training.restorer import train

    weights = train(args.out, steps=args.steps, seed=args.seed, width=args.width,
                    blocks=args.blocks, scales=tuple(args.scales),
                    qualities=tuple(args.qualities), data_dir=args.data_dir,
                    log=log.info)  # fmt: skip
    log.info("wrote %s (held-out scores: %s)", weights, args.out / "scores.json")
    return 0


def cmd_train_redraw(args: argparse.Namespace) -> int:
    from semcodec.evaluation.training.redraw import train

    device = _device(args)
    weights = train(args.out, width=args.width, steps=args.steps, seed=args.seed,
                    data_dir=args.data_dir, windows=args.windows,
                    detector_weight=args.detector_weight, device=device,
                    log=log.info)  # fmt: skip
    log.info("wrote %s (held-out scores: %s)", weights, args.out / "scores.json")
    return 0


#: The keys ``train-refiner --config`` takes.
REFINER_KEYS = ("width", "blocks", "steps", "batch", "lr", "seed", "init", "max_seconds")


def cmd_train_refiner(args: argparse.Namespace) -> int:
    import tomllib

    from semcodec.evaluation.training.refiner import train

    config: dict = {}
    if args.config is not None:
        try:
            config = tomllib.loads(args.config.read_text())
        except (OSError, tomllib.TOMLDecodeError) as exc:
            raise UsageError(f"--config {args.config}: {exc}") from None
        unknown = sorted(set(config) - set(REFINER_KEYS))
        if unknown:
            raise UsageError(f"--config {args.config}: unknown keys {', '.join(unknown)} "
                             f"(expected {', '.join(REFINER_KEYS)})")  # fmt: skip
    for key in REFINER_KEYS:
        if getattr(args, key, None) is not None:
            config[key] = getattr(args, key)
    weights = train(args.out, examples_file=args.examples, held_out_file=args.held_out,
                    data_dir=args.data_dir, device=_device(args), log=log.info,
                    **config)  # fmt: skip
    log.info("wrote %s (held-out scores: %s)", weights, args.out / "scores.json")
    return 0


def cmd_train_sr(args: argparse.Namespace) -> int:
    from semcodec.evaluation.training.superres import examples, save_pairs, train

    if args.write_pairs is not None:
        path = save_pairs(args.write_pairs, *examples(args.data_dir, args.seed))
        log.info("wrote %s (%.1f MB)", path, path.stat().st_size / 1e6)
        return 0
    weights = train(args.out, base=args.base, steps=args.steps, batch=args.batch,
                    seed=args.seed, data_dir=args.data_dir, log=log.info, device=_device(args),
                    pairs_file=args.pairs)  # fmt: skip
    log.info("wrote %s (validation scores: %s)", weights, args.out / "scores.json")
    return 0


def cmd_score_decoder(args: argparse.Namespace) -> int:
    import dataclasses
    import tempfile

    from semcodec.codec.reconstruct.diffusion import default_weights, load_denoiser
    from semcodec.evaluation.training.decoder import (
        DataRange,
        TrainConfig,
        load_examples,
        score_windows,
    )

    device = _device(args)
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
        scores = score_windows(model, examples, steps, args.windows, device=device)
        results[name] = scores
        for key, value in scores.items():
            if key != "windows":
                print(f"{name}  {key:5s}  window ST-LPIPS {value['st_lpips']:.4f}  "
                      f"box MSE {value['box_mse']:.1f}")
    write_json(args.out, results)
    return 0


def _data_range(text: str) -> tuple:
    """``NAME:FIRST:FRAMES[@tiles=N[,CAMERA-TRANSFORM]]`` -> a training range tuple."""
    from semcodec.codec.task.split import SplitConfig
    from semcodec.evaluation.training.bottleneck import range_layout

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
    from semcodec.evaluation.training.bottleneck import BottleneckTrainConfig, run_refit, run_sweep

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
        from semcodec.evaluation.training.bottleneck import DEFAULT_DATA, run_pack

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
    device = _device(args)
    try:
        rows = run_sweep(args.beta, args.out, cache, base, args.data_dir, device=device,
                         frame_step=args.frame_step, packed=args.packed)  # fmt: skip
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    for row in rows:
        print(f"beta {row['beta']:g}  {row['file']}  {row['seconds']:.0f} s  "
              f"distill {row.get('distill', float('nan')):.4f}  "
              f"kbit/window {row.get('kbit_per_window', float('nan')):.3f}")  # fmt: skip
    return 0
