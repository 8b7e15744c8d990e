"""The registry imports a built-in's module once, whichever threads ask first; a failed
import is tried again; names are listed without importing anything; every declared built-in
is registered by the module declared for it."""

from __future__ import annotations

import sys
import threading
import types

import pytest

from semcodec.codec.core.registry import Registry


class Base:
    name = ""


@pytest.fixture
def plugin_module(tmp_path, monkeypatch):
    """A module ``_semcodec_test_plugin`` on ``sys.path`` whose body is given by the test; the
    registry under test is reachable from it as ``_semcodec_test_registry.REGISTRY``."""
    holder = types.ModuleType("_semcodec_test_registry")
    monkeypatch.setitem(sys.modules, "_semcodec_test_registry", holder)
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delitem(sys.modules, "_semcodec_test_plugin", raising=False)

    def make(body: str) -> Registry:
        (tmp_path / "_semcodec_test_plugin.py").write_text(
            "from _semcodec_test_registry import REGISTRY, Base\n" + body)
        holder.REGISTRY = Registry("thing", Base, builtins={"slow": "_semcodec_test_plugin"})
        holder.Base = Base
        return holder.REGISTRY

    return make


def test_threads_asking_at_once_all_get_the_builtin(plugin_module):
    registry = plugin_module("import time\ntime.sleep(0.2)  # a slow import: the others arrive\n"
                             "REGISTRY.register('slow')(type('Slow', (Base,), {}))\n")
    seen = []
    threads = [threading.Thread(target=lambda: seen.append(registry.get("slow").__name__))
               for _ in range(8)]  # fmt: skip
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert seen == ["Slow"] * 8


def test_a_failed_import_is_tried_again(plugin_module, tmp_path):
    registry = plugin_module("raise ImportError('first import fails')\n")
    with pytest.raises(ImportError):
        registry.get("slow")
    sys.modules.pop("_semcodec_test_plugin", None)
    (tmp_path / "_semcodec_test_plugin.py").write_text(
        "from _semcodec_test_registry import REGISTRY, Base\n"
        "REGISTRY.register('slow')(type('Slow', (Base,), {}))\n")
    assert registry.get("slow").__name__ == "Slow"


def test_names_import_nothing_and_unknown_names_list_them(plugin_module):
    registry = plugin_module("raise AssertionError('imported')\n")
    assert registry.names() == ["slow"]
    with pytest.raises(ValueError, match="unknown thing 'other'; available: slow"):
        registry.get("other")


def test_a_module_that_does_not_register_its_name_is_reported(plugin_module):
    registry = plugin_module("pass\n")
    with pytest.raises(RuntimeError, match="does not register the thing 'slow'"):
        registry.get("slow")


@pytest.mark.parametrize("where", ["semcodec.codec.reconstruct.RECONSTRUCTORS",
                                   "semcodec.evaluation.codecs.base.CODECS"])  # fmt: skip
def test_every_declared_builtin_is_registered_under_its_name(where):
    module, _, attribute = where.rpartition(".")
    registry = getattr(__import__(module, fromlist=[attribute]), attribute)
    assert registry.builtins
    for name in registry.builtins:
        assert registry.get(name).name == name
    assert registry.names() == sorted(registry.builtins)
