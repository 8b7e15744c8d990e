"""``edge-agent``: the edge side of semcodec (encode, stream); commands come later."""

from __future__ import annotations

import argparse
import sys


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="edge-agent",
        description="The edge side of semcodec: extracts scaffolds from video, entropy-codes "
        "them and sends them to a cloud-decoder. Not yet implemented beyond --help: "
        "use `semcodec-bench` to measure the baseline codecs.",
    )
    parser.add_argument("--version", action="version", version="semcodec edge-agent 0.1.0")
    return parser


def main(argv: list[str] | None = None) -> int:
    """Entry point of ``edge-agent``; returns the exit status."""
    parser = build_parser()
    parser.parse_args(sys.argv[1:] if argv is None else argv)
    parser.print_help()
    return 0


if __name__ == "__main__":
    sys.exit(main())
