"""``edge-agent``: the edge side of semcodec.

``edge-agent encode INPUT -o FILE.semc --level N`` extracts the scaffolds of a video (a MOT
sequence folder, a frame folder, a video file, ``.y4m`` or ``.yuv``) and writes the
entropy-coded bitstream to a file.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from semcodec.codec.models import MODELS_DIR_HELP


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="edge-agent",
        description="The edge side of semcodec: extracts scaffolds (segmentation, pose, flow, "
        "rare keyframes) from video and entropy-codes them.",
    )
    parser.add_argument("--version", action="version", version="semcodec edge-agent 0.1.0")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    enc = sub.add_parser(
        "encode",
        help="encode a video to a .semc bitstream file",
        description="Encodes INPUT to FILE.semc at a level (0: fewest bits ... 3: everything "
        "finer). The file is written atomically: nothing is left behind on error.",
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
    )
    enc.add_argument("input", help="MOT sequence folder, frame folder, video file, .y4m or .yuv "
                     "(or a sequence name under --data-dir / $SEMCODEC_DATA_DIR)")  # fmt: skip
    enc.add_argument("-o", "--output", required=True, type=Path, help="the .semc file to write")
    enc.add_argument("--level", type=int, choices=(0, 1, 2, 3), default=1, help="scaffold level")
    enc.add_argument("--frames", type=int, metavar="N", help="encode the first N frames only")
    enc.add_argument("--start", type=int, default=1, metavar="K", help="first frame (1-based)")
    enc.add_argument("--models-dir", metavar="DIR", help=MODELS_DIR_HELP)
    enc.add_argument("--data-dir", metavar="DIR", help="where sequence names are looked up")
    enc.add_argument("--fps", type=float, help="frame rate of frame folders and raw .yuv")
    enc.add_argument("--width", type=int, help="frame width of a raw .yuv")
    enc.add_argument("--height", type=int, help="frame height of a raw .yuv")
    enc.add_argument("--threads", type=int, default=1, help="CPU threads per model")
    enc.add_argument("--flow-prior", type=Path, metavar="FILE",
                     help="learned flow prior (JSON from `semcodec-bench train-flow-prior`; "
                     "default: the one shipped for the level's flow step)")  # fmt: skip
    return parser


def cmd_encode(args: argparse.Namespace) -> int:
    from semcodec.codec.scaffold.codec import encode_to_file
    from semcodec.codec.scaffold.levels import LEVELS
    from semcodec.edge.sources import open_source, resolve_data_path

    prior = None
    if args.flow_prior:
        from semcodec.codec.entropy.flow import FlowPrior

        prior = FlowPrior.load(args.flow_prior)
    source = open_source(resolve_data_path(args.input, args.data_dir), fps=args.fps,
                         width=args.width, height=args.height)  # fmt: skip
    info = source.info
    total = args.frames or (info.num_frames - args.start + 1 if info.num_frames else 0)
    frames = (f.rgb for f in source.frames(start=args.start, count=args.frames))
    start = time.perf_counter()
    stats = encode_to_file(args.output, frames, LEVELS[args.level], info.fps,
                           (info.width, info.height), total, args.models_dir,
                           args.threads, prior)  # fmt: skip
    seconds = time.perf_counter() - start
    size = args.output.stat().st_size
    bpp = 8 * size / (info.width * info.height * max(stats.frames, 1))
    parts = ", ".join(f"{k} {v}" for k, v in sorted(stats.stream_bytes.items()))
    print(f"{args.output}: {stats.frames} frames ({stats.keyframes} keyframes), {size} bytes, "
          f"{bpp:.5f} bpp [{parts}], {stats.frames / seconds:.1f} fps")  # fmt: skip
    return 0


def main(argv: list[str] | None = None) -> int:
    """Entry point of ``edge-agent``; returns the exit status."""
    from semcodec.codec.bitstream import BitstreamError
    from semcodec.codec.models import ModelError
    from semcodec.edge.sources import SourceError

    parser = build_parser()
    args = parser.parse_args(sys.argv[1:] if argv is None else argv)
    if args.command is None:
        parser.print_help()
        return 0
    try:
        return cmd_encode(args)
    except (SourceError, ModelError, BitstreamError, ValueError) as exc:
        print(f"edge-agent: error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
