"""``edge-agent``: the edge side of semcodec.

``edge-agent encode INPUT -o FILE.semc --level N`` extracts the scaffolds of a video (a MOT
sequence folder, a frame folder, a video file, ``.y4m`` or ``.yuv``) and writes the
entropy-coded bitstream to a file.

Exit status: 0 success; 2 a user error (bad argument, missing input or model, unusable
output; one line ``edge-agent: error: ...`` on stderr, checked before any model loads);
130 interrupted (Ctrl-C: nothing is written, run the command again).

:class:`OneLineErrorParser` and :class:`DefaultsHelpFormatter` are also used by
``semcodec-bench``.
"""

from __future__ import annotations

import argparse
import logging
import sys
import time
from pathlib import Path

from semcodec.codec.console import (
    DefaultsHelpFormatter,
    OneLineErrorParser,
    add_common_arguments,
    add_verbosity,
    configure_logging,
    frame_progress,
    one_line,
    positive_float,
    positive_int,
)
from semcodec.codec.models import MODELS_DIR_HELP

PROG = "edge-agent"
log = logging.getLogger(__name__)


def build_parser() -> argparse.ArgumentParser:
    parser = OneLineErrorParser(
        prog=PROG,
        description="The edge side of semcodec: extracts scaffolds (segmentation, pose, flow, "
        "rare keyframes) from video and entropy-codes them.",
    )
    add_common_arguments(parser, PROG)
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    enc = sub.add_parser(
        "encode",
        help="encode a video to a .semc bitstream file",
        description="Encodes INPUT to FILE.semc at a level (0: fewest bits ... 3: everything "
        "finer). The file is written atomically: nothing is left behind on error or Ctrl-C.",
        formatter_class=DefaultsHelpFormatter,
    )
    add_verbosity(enc)
    enc.add_argument("input", help="MOT sequence folder, frame folder, video file, .y4m or .yuv "
                     "(or a sequence name under --data-dir / $SEMCODEC_DATA_DIR)")  # fmt: skip
    enc.add_argument("-o", "--output", required=True, type=Path, help="the .semc file to write")
    enc.add_argument("--level", type=int, choices=(0, 1, 2, 3), default=1,
                     help="scaffold level: 0 fewest bits ... 3 most detail")  # fmt: skip
    enc.add_argument("--frames", type=positive_int, metavar="N",
                     help="encode N frames from --start (default: to the end)")  # fmt: skip
    enc.add_argument("--start", type=positive_int, default=1, metavar="K",
                     help="first frame (1-based)")  # fmt: skip
    enc.add_argument("--models-dir", metavar="DIR", help=MODELS_DIR_HELP)
    enc.add_argument("--data-dir", metavar="DIR",
                     help="where sequence names are looked up (else $SEMCODEC_DATA_DIR, "
                     "then ../shared/data)")  # fmt: skip
    enc.add_argument("--fps", type=positive_float,
                     help="frame rate of frame folders and raw .yuv (else their own)")  # fmt: skip
    enc.add_argument("--width", type=positive_int, help="frame width of a raw .yuv")
    enc.add_argument("--height", type=positive_int, help="frame height of a raw .yuv")
    rate = enc.add_mutually_exclusive_group()
    rate.add_argument("--target-bpp", type=positive_float, metavar="B",
                      help="hold the stream to B bits per pixel (default: the level's own "
                      "target, 0.004 at level 1; levels 0, 2, 3 have none)")  # fmt: skip
    rate.add_argument("--target-kbps", type=positive_float, metavar="R",
                      help="hold the stream to R kilobits per second (1000 bits)")  # fmt: skip
    enc.add_argument("--threads", type=positive_int, default=1, help="CPU threads per model")
    enc.add_argument("--flow-prior", type=Path, metavar="FILE",
                     help="learned flow prior (JSON from `semcodec-bench train-flow-prior`; "
                     "else the one shipped for the level's flow step)")  # fmt: skip
    enc.add_argument("--no-progress", action="store_true", help="no progress bar")
    return parser


class UsageError(ValueError):
    """An argument that parses but cannot be used (checked before any model loads)."""


def _check_output(path: Path) -> None:
    if path.is_dir():
        raise UsageError(f"-o {path}: is a folder; give the .semc file to write")
    if not path.parent.is_dir():
        raise UsageError(f"-o {path}: the folder {path.parent} does not exist")


def _frames_to_encode(info, start: int, frames: int | None) -> int:
    """How many frames ``encode`` will read (0 when the source does not know its length)."""
    if not info.num_frames:
        return frames or 0
    if start > info.num_frames:
        raise UsageError(f"--start {start}: the input has only {info.num_frames} frames")
    left = info.num_frames - start + 1
    return min(frames, left) if frames else left


def _counted(frames, bar):
    for frame in frames:
        yield frame
        bar.update(1)


def _level_config(args: argparse.Namespace, info):
    """The level preset with the rate target of ``--target-bpp`` / ``--target-kbps``."""
    import dataclasses

    from semcodec.codec.scaffold.levels import LEVELS

    config = LEVELS[args.level]
    target = args.target_bpp
    if args.target_kbps is not None:
        target = args.target_kbps * 1000 / (info.width * info.height * info.fps)
    return config if target is None else dataclasses.replace(config, target_bpp=target)


def cmd_encode(args: argparse.Namespace) -> int:
    """Encodes ``args.input`` to ``args.output``; returns the exit status."""
    from semcodec.codec.scaffold.codec import encode_to_file
    from semcodec.edge.sources import open_source, resolve_data_path

    _check_output(args.output)
    prior = None
    if args.flow_prior:
        from semcodec.codec.entropy.flow import FlowPrior

        prior = FlowPrior.load(args.flow_prior)
    source = open_source(resolve_data_path(args.input, args.data_dir), fps=args.fps,
                         width=args.width, height=args.height)  # fmt: skip
    info = source.info
    total = _frames_to_encode(info, args.start, args.frames)
    start = time.perf_counter()
    with frame_progress("encode", total, args.no_progress or args.quiet > 0) as bar:
        frames = _counted((f.rgb for f in source.frames(start=args.start, count=args.frames)), bar)
        stats = encode_to_file(args.output, frames, _level_config(args, info), info.fps,
                               (info.width, info.height), total, args.models_dir,
                               args.threads, prior)  # fmt: skip
    seconds = time.perf_counter() - start
    size = args.output.stat().st_size
    bpp = 8 * size / (info.width * info.height * max(stats.frames, 1))
    parts = ", ".join(f"{k} {v}" for k, v in sorted(stats.stream_bytes.items()))
    log.info("%s: %d frames (%d keyframes), %d bytes, %.5f bpp [%s], %.1f fps", args.output,
             stats.frames, stats.keyframes, size, bpp, parts,
             stats.frames / max(seconds, 1e-9))  # fmt: skip
    return 0


def _user_errors() -> tuple[type[BaseException], ...]:
    from semcodec.codec.bitstream import BitstreamError
    from semcodec.codec.entropy.rans import EntropyCodingError
    from semcodec.codec.models import ModelError
    from semcodec.edge.sources import SourceError

    return (UsageError, SourceError, ModelError, BitstreamError, EntropyCodingError, ValueError,
            OSError)  # fmt: skip


def main(argv: list[str] | None = None) -> int:
    """Entry point of ``edge-agent``; returns the exit status."""
    parser = build_parser()
    args = parser.parse_args(sys.argv[1:] if argv is None else argv)
    configure_logging(args.verbose, args.quiet, prog=PROG)
    if args.command is None:
        parser.print_help()
        return 0
    try:
        return cmd_encode(args)
    except KeyboardInterrupt:
        log.error("interrupted; nothing was written to %s (run the command again)", args.output)
        return 130
    except _user_errors() as exc:
        log.error("error: %s", one_line(exc))
        return 2


if __name__ == "__main__":
    sys.exit(main())
