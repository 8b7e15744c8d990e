"""The registry loads its built-ins once, whichever threads ask first, and a failed load
is not remembered as done."""

from __future__ import annotations

import threading
import time

import pytest

from semcodec.codec.registry import Registry


class Base:
    name = ""


def test_threads_asking_at_once_all_see_the_builtins():
    registry: Registry[Base] = Registry("thing", Base)

    def builtins():
        time.sleep(0.2)  # a slow import: the other threads arrive meanwhile
        registry.register("slow")(type("Slow", (Base,), {}))

    registry._builtins = builtins  # noqa: SLF001 - the loader under test
    seen = []
    threads = [threading.Thread(target=lambda: seen.append(registry.names())) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert seen == [["slow"]] * 8


def test_a_failed_load_is_tried_again():
    calls = []
    registry: Registry[Base] = Registry("thing", Base)

    def builtins():
        calls.append(1)
        if len(calls) == 1:
            raise ImportError("first import fails")
        registry.register("ok")(type("Ok", (Base,), {}))

    registry._builtins = builtins  # noqa: SLF001
    with pytest.raises(ImportError):
        registry.names()
    assert registry.names() == ["ok"]


def test_declared_reconstructor_names_are_the_registered_ones():
    """Help texts list the declared names without importing the reconstructors: they must be
    exactly the names the built-in modules register."""
    from semcodec.codec.reconstruct import RECONSTRUCTORS

    declared = RECONSTRUCTORS.declared_names()
    assert declared == RECONSTRUCTORS.names() == ["diffusion", "restore", "warp"]
