"""What the three entry points share about talking to a user: version, logging, quiet natives.

``edge-agent``, ``cloud-decoder`` and ``semcodec-bench`` cannot import each other, so the
few helpers they have in common live here, at the bottom of the import graph. Nothing here is
run at import time: a library user who never calls :func:`configure_logging` keeps their own
logging set-up.
"""

from __future__ import annotations

import argparse
import contextlib
import logging
import os
import sys
from collections.abc import Iterator
from importlib.metadata import PackageNotFoundError, version

#: Logger name of the whole package; modules log to ``logging.getLogger(__name__)``.
LOGGER_NAME = "semcodec"


def package_version() -> str:
    """The installed ``semcodec`` distribution's version (``"0+unknown"`` when not installed)."""
    try:
        return version("semcodec")
    except PackageNotFoundError:
        return "0+unknown"


def version_text(prog: str) -> str:
    """The ``--version`` line of an entry point, e.g. ``"edge-agent (semcodec 0.1.0)"``."""
    return f"{prog} (semcodec {package_version()})"


def add_common_arguments(parser: argparse.ArgumentParser, prog: str) -> None:
    """Adds ``--version``, ``-v/--verbose`` and ``-q/--quiet`` to an entry point's parser."""
    parser.add_argument("--version", action="version", version=version_text(prog))
    parser.add_argument(
        "-v", "--verbose", action="count", default=0, help="more messages (-vv: debug)"
    )
    parser.add_argument(
        "-q", "--quiet", action="count", default=0, help="only warnings (-qq: only errors)"
    )


def configure_logging(verbose: int = 0, quiet: int = 0, prog: str | None = None) -> None:
    """Sends the package's log records to stderr at the level ``-v``/``-q`` ask for.

    Default INFO; ``-v`` DEBUG; ``-q`` WARNING; ``-qq`` ERROR. Records of other libraries
    stay at WARNING. Called by the entry points, never at import time.
    """
    level = logging.INFO + 10 * (quiet - verbose)
    level = min(max(level, logging.DEBUG), logging.ERROR)
    handler = logging.StreamHandler(sys.stderr)
    prefix = f"{prog}: " if prog else ""
    handler.setFormatter(logging.Formatter(prefix + "%(message)s"))
    logger = logging.getLogger(LOGGER_NAME)
    logger.handlers[:] = [handler]
    logger.setLevel(level)
    logger.propagate = False
    logging.captureWarnings(True)


@contextlib.contextmanager
def native_stderr_silenced() -> Iterator[None]:
    """Sends file descriptor 2 to ``/dev/null`` for the block.

    For native libraries that print to the C ``stderr`` on their own (LiteRT's "INFO: Created
    TensorFlow Lite XNNPACK delegate for CPU."), which Python cannot filter. Keep the block
    to the one native call: Python's own ``sys.stderr`` output inside it is lost too.
    """
    try:
        sys.stderr.flush()
        saved = os.dup(2)
    except (OSError, ValueError):  # no real fd 2 (embedded interpreters, some test runners)
        yield
        return
    try:
        with open(os.devnull, "wb") as null:
            os.dup2(null.fileno(), 2)
        yield
    finally:
        with contextlib.suppress(OSError, ValueError):
            sys.stderr.flush()
        os.dup2(saved, 2)
        os.close(saved)
