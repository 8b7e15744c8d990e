"""``cloud-decoder``: the cloud side of semcodec.

``cloud-decoder decode FILE.semc -o DIR`` decodes a bitstream exactly and rebuilds the
video with a reconstructor (``warp`` by default).
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from semcodec.codec.models import MODELS_DIR_HELP


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="cloud-decoder",
        description="The cloud side of semcodec: decodes scaffold bitstreams exactly and "
        "reconstructs the video.",
    )
    parser.add_argument("--version", action="version", version="semcodec cloud-decoder 0.1.0")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    dec = sub.add_parser(
        "decode",
        help="decode a .semc file to frames, scaffolds and an overview video",
        description="Writes DIR/frames/000001.png..., DIR/scaffolds.npz (the decoded "
        "scaffolds), DIR/stream.json and DIR/overview.mp4.",
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
    )
    dec.add_argument("input", type=Path, help="the .semc file")
    dec.add_argument("-o", "--output", required=True, type=Path, help="output folder")
    dec.add_argument("--decoder", default="warp", help="reconstructor by name")
    dec.add_argument("--models-dir", metavar="DIR", help=MODELS_DIR_HELP)
    dec.add_argument("--no-overview", action="store_true", help="skip overview.mp4")
    dec.add_argument("--flow-prior", type=Path, metavar="FILE",
                     help="the flow prior the edge used, when not the shipped one")  # fmt: skip
    return parser


def cmd_decode(args: argparse.Namespace) -> int:
    from semcodec.cloud.outputs import DecodeOutputs
    from semcodec.codec.bitstream import read_stream
    from semcodec.codec.reconstruct import create_reconstructor
    from semcodec.codec.scaffold.codec import ScaffoldDecoder

    if not args.input.is_file():
        raise FileNotFoundError(f"{args.input}: no such file")
    reconstructor = create_reconstructor(args.decoder)
    header, units = read_stream(args.input)
    prior = None
    if args.flow_prior:
        from semcodec.codec.entropy.flow import FlowPrior

        prior = FlowPrior.load(args.flow_prior)
    decoder = ScaffoldDecoder(header, flow_prior=prior)
    start = time.perf_counter()
    with DecodeOutputs(args.output, header, overview=not args.no_overview) as outputs:
        for unit in units:
            decoded = decoder.decode_unit(unit)
            if decoded is None:
                break
            outputs.add(decoded, reconstructor.reconstruct(decoded))
    seconds = time.perf_counter() - start
    print(f"{args.output}: {outputs.count} frames ({outputs.count / max(seconds, 1e-9):.1f} fps "
          f"with outputs), decoder {args.decoder}")  # fmt: skip
    return 0


def main(argv: list[str] | None = None) -> int:
    """Entry point of ``cloud-decoder``; returns the exit status."""
    from semcodec.codec.bitstream import BitstreamError
    from semcodec.codec.keyframes import KeyframeError
    from semcodec.codec.reconstruct import ReconstructionError
    from semcodec.codec.scaffold.codec import ScaffoldCodecError

    parser = build_parser()
    args = parser.parse_args(sys.argv[1:] if argv is None else argv)
    if args.command is None:
        parser.print_help()
        return 0
    try:
        return cmd_decode(args)
    except (BitstreamError, KeyframeError, ReconstructionError, ScaffoldCodecError,
            FileNotFoundError, ValueError) as exc:  # fmt: skip
        print(f"cloud-decoder: error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
