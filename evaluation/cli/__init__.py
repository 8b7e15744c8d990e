"""``semcodec-bench``: measure rate, compute and quality of codecs on real video.

With no arguments it runs the default grid (the demo) on the sample embedded in the
repository: every codec family, ST-LPIPS on every
:data:`~evaluation.cli.common.DEMO_LPIPS_EVERY`-th frame. One module per group of
sub-commands (:mod:`.run`, :mod:`.catalog`, :mod:`.train`, :mod:`.task`), each adding its
parsers with their handlers; :mod:`.common` holds what they share.

Exit status: 0 success; 2 a user error (one line ``semcodec-bench: error: ...``; a grid's
codec names, settings, metrics and frame counts are checked before any data is read or any
model is resolved); 130 interrupted (Ctrl-C: finished cells are kept, rerun to resume).
"""

from __future__ import annotations

import argparse
import os
import sys

from semcodec.codec.core.console import (
    EXIT_INTERRUPTED,
    OneLineErrorParser,
    add_common_arguments,
    configure_logging,
    one_line,
)
from semcodec.evaluation.cli import catalog, run, task, train
from semcodec.evaluation.cli.common import PROG, UsageError, log


def build_parser() -> argparse.ArgumentParser:
    parser = OneLineErrorParser(
        prog=PROG,
        description="Measure rate (BPP from real bytes), compute and quality of codecs on real "
        "video, and draw the trade-off. With no arguments: `run` on the embedded sample.",
    )
    add_common_arguments(parser, PROG)
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for commands in (run, catalog, train, task):
        commands.add_parsers(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    """Entry point of ``semcodec-bench``; returns the exit status."""
    argv = list(sys.argv[1:] if argv is None else argv)
    if not [a for a in argv if a not in ("-v", "-vv", "-q", "-qq", "--verbose", "--quiet")]:
        argv = [*argv, "run"]
    parser = build_parser()
    args = parser.parse_args(argv)
    configure_logging(args.verbose, args.quiet, prog=PROG)
    if args.command is None:
        parser.print_help()
        return 2
    args.argv = argv  # recorded in the report of `run`
    try:
        return args.handler(args)
    except KeyboardInterrupt:
        log.error("interrupted; finished cells are kept: run the same command again to resume")
        return EXIT_INTERRUPTED
    except _user_errors() as exc:
        log.error("error: %s", one_line(exc))
        return 2
    except BrokenPipeError:  # `semcodec-bench models list | head`: the reader left
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 141


def _user_errors() -> tuple[type[BaseException], ...]:
    from semcodec.codec.core.models import ModelError
    from semcodec.codec.core.sources import SourceError
    from semcodec.codec.entropy.rans import EntropyCodingError
    from semcodec.codec.reconstruct import ReconstructionError
    from semcodec.codec.task.bottleneck import BottleneckFileError
    from semcodec.evaluation.bench.executors import ExecutorError
    from semcodec.evaluation.bench.grid import BenchError
    from semcodec.evaluation.codecs.base import CodecError, SettingError
    from semcodec.evaluation.data.recipes import RecipeError
    from semcodec.evaluation.report.figures import FiguresError
    from semcodec.evaluation.training.decoder import TrainConfigError

    return (EntropyCodingError, BottleneckFileError, ModelError, SourceError, BenchError,
            CodecError, SettingError, RecipeError, UsageError, ExecutorError, TrainConfigError,
            ReconstructionError, FiguresError)  # fmt: skip


if __name__ == "__main__":
    sys.exit(main())
