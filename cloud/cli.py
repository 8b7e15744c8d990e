"""``cloud-decoder``: the cloud side of semcodec (decode, serve); commands come later."""

from __future__ import annotations

import argparse
import sys


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="cloud-decoder",
        description="The cloud side of semcodec: receives scaffolds, decodes them exactly "
        "and reconstructs the video. Not yet implemented beyond --help: "
        "use `semcodec-bench` to measure the baseline codecs.",
    )
    parser.add_argument("--version", action="version", version="semcodec cloud-decoder 0.1.0")
    return parser


def main(argv: list[str] | None = None) -> int:
    """Entry point of ``cloud-decoder``; returns the exit status."""
    parser = build_parser()
    parser.parse_args(sys.argv[1:] if argv is None else argv)
    parser.print_help()
    return 0


if __name__ == "__main__":
    sys.exit(main())
