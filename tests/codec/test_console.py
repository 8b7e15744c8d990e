"""The entry points' console: log records go to the stderr of the moment they are written."""

from __future__ import annotations

import io
import logging
import sys

from semcodec.codec.core.console import LOGGER_NAME, configure_logging


def test_log_records_follow_a_swapped_stderr_and_never_hit_a_closed_one(monkeypatch):
    logger = logging.getLogger(LOGGER_NAME)
    saved = logger.handlers[:], logger.level, logger.propagate
    first, second = io.StringIO(), io.StringIO()
    try:
        monkeypatch.setattr(sys, "stderr", first)
        configure_logging(prog="tool")
        logger.info("one")
        first.close()  # a runner's captured stream, gone after its test
        monkeypatch.setattr(sys, "stderr", second)
        logger.warning("two")
        logger.debug("hidden at the default level")
    finally:
        logger.handlers[:] = saved[0]
        logger.setLevel(saved[1])
        logger.propagate = saved[2]
    assert second.getvalue() == "tool: two\n"
