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
from typing import NoReturn

#: Logger name of the whole package; modules log to ``logging.getLogger(__name__)``.
LOGGER_NAME = "semcodec"
#: Exit statuses of the three programs: a user error (one line says what), Ctrl-C.
EXIT_ERROR = 2
EXIT_INTERRUPTED = 130


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


class OneLineErrorParser(argparse.ArgumentParser):
    """An ArgumentParser whose usage errors are one line, ``PROG: error: ...`` (exit 2).

    The line names the subcommand's ``--help`` instead of printing the whole usage.
    """

    def error(self, message: str) -> NoReturn:
        root = self.prog.split()[0]
        self.exit(2, f"{root}: error: {message} (see `{self.prog} --help`)\n")


class DefaultsHelpFormatter(argparse.ArgumentDefaultsHelpFormatter):
    """Adds ``(default: X)`` to option help, but not for None, boolean or empty defaults (the
    help text says what happens then) nor where the help already names its default; lists
    print as ``a,b``."""

    def _get_help_string(self, action: argparse.Action) -> str | None:
        text = action.help or ""
        default = action.default
        if (default is None or default is argparse.SUPPRESS or isinstance(default, bool)
                or "default" in text or not action.option_strings):  # fmt: skip
            return text
        if isinstance(default, list | tuple):
            if not default:
                return text
            default = ",".join(str(v) for v in default)
        return f"{text} (default: {str(default).replace('%', '%%')})"


def add_verbosity(parser: argparse.ArgumentParser) -> None:
    """``-v``/``-q`` on a subcommand too (``edge-agent encode ... -q``), adding to the
    top-level counts instead of resetting them."""
    parser.add_argument("-v", "--verbose", action="count", default=argparse.SUPPRESS,
                        help="more messages (-vv: debug)")  # fmt: skip
    parser.add_argument("-q", "--quiet", action="count", default=argparse.SUPPRESS,
                        help="only warnings, no progress bar (-qq: only errors)")  # fmt: skip


def positive_int(text: str) -> int:
    """argparse type: an integer >= 1."""
    return _bounded(text, int, 1, None, "an integer >= 1")


def non_negative_int(text: str) -> int:
    """argparse type: an integer >= 0."""
    return _bounded(text, int, 0, None, "an integer >= 0")


def positive_float(text: str) -> float:
    """argparse type: a finite number > 0."""
    value = _bounded(text, float, None, None, "a number > 0")
    if not 0 < value < float("inf"):
        raise argparse.ArgumentTypeError(f"expected a number > 0, got {text!r}")
    return value


def non_negative_float(text: str) -> float:
    """argparse type: a finite number >= 0."""
    value = _bounded(text, float, 0.0, None, "a number >= 0")
    if not 0 <= value < float("inf"):
        raise argparse.ArgumentTypeError(f"expected a number >= 0, got {text!r}")
    return value


def _bounded(text: str, kind: type, low, high, expected: str):
    try:
        value = kind(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected {expected}, got {text!r}") from None
    if (low is not None and value < low) or (high is not None and value > high):
        raise argparse.ArgumentTypeError(f"expected {expected}, got {text!r}")
    return value


def count(n: int, noun: str, plural: str | None = None) -> str:
    """``"1 keyframe"``, ``"3 keyframes"``: ``n`` and the noun in the right number."""
    return f"{n} {noun if n == 1 else plural or noun + 's'}"


def one_line(exc: BaseException) -> str:
    """An error as the one line an entry point prints: ``FILE: reason`` for OS errors, else
    the message with its whitespace folded (the class name when it has none)."""
    if isinstance(exc, OSError) and exc.filename is not None and exc.strerror:
        return f"{exc.filename}: {exc.strerror}"
    return " ".join(str(exc).split()) or type(exc).__name__


def frame_progress(desc: str, total: int | None, hidden: bool = False):
    """A tqdm bar over frames on stderr; ``hidden`` (``-q``, ``--no-progress``) turns it off,
    and tqdm leaves it off where stderr is not a terminal."""
    from tqdm import tqdm

    return tqdm(total=total or None, desc=desc, unit="frame", file=sys.stderr,
                disable=True if hidden else None, leave=False, dynamic_ncols=True)  # fmt: skip


class _StderrHandler(logging.StreamHandler):
    """A handler that writes to whatever ``sys.stderr`` is when a record comes, not the one
    it was made with (a caller that swaps stderr and closes its copy, as test runners do,
    would leave a handler bound to a closed file)."""

    @property
    def stream(self):
        return sys.stderr

    @stream.setter
    def stream(self, value) -> None:  # StreamHandler.__init__ sets it; sys.stderr it stays
        pass


def configure_logging(verbose: int = 0, quiet: int = 0, prog: str | None = None) -> None:
    """Sends the package's log records to stderr at the level ``-v``/``-q`` ask for.

    Default INFO; ``-v`` DEBUG; ``-q`` WARNING; ``-qq`` ERROR. Records of other libraries
    stay at WARNING. Called by the entry points, never at import time.
    """
    level = logging.INFO + 10 * (quiet - verbose)
    level = min(max(level, logging.DEBUG), logging.ERROR)
    handler = _StderrHandler()
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
