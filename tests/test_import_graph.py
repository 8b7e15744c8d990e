"""Imports flow downward: the layers below, read from every module's source (imports inside
functions included), with no cycle between modules and no import between siblings.

A module may import modules of its own group and of groups in lower layers. Groups in one
layer are siblings and import nothing of each other; the edge and the cloud never import each
other at all, and the evaluation imports nothing of the edge (frame readers are a foundation:
``codec.core.sources``). ``tools/`` is outside the package (clients for testing the service).
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SKIP = {"tests", "docs", "datasets", "build", "runs", "tools"}  # tools/: in no wheel

#: Layers, lowest first: a group's modules may import their own group and lower layers.
LAYERS: list[set[str]] = [
    {"codec.detection"},  # the detector's PyTorch definition: nothing of semcodec
    {"codec.core"},  # types, registries, package data, the model zoo, frame readers, CLI helpers
    {"codec.bitstream", "codec.keyframes"},
    {"codec.entropy"},
    {"codec.scaffold"},
    {"codec.reconstruct", "codec.task"},
    {"protos"},
    {"cloud.outputs"},
    {"edge.stream", "cloud.service"},
    {"edge.cli", "cloud.cli"},
    {"evaluation.data"},  # recipes, ground truth, reading sequences, camera transforms
    {"evaluation.metrics", "evaluation.codecs"},
    {"evaluation.report"},  # reads rows, encodes nothing
    {"evaluation.bench", "evaluation.training"},
    {"evaluation.cli"},
]
RANK = {group: rank for rank, groups in enumerate(LAYERS) for group in groups}
#: Package roots (docstrings, a version) sit with the lowest group of their family.
PACKAGE_ROOTS = {"": "codec.core", "codec": "codec.core", "edge": "edge.stream",
                 "cloud": "cloud.outputs", "evaluation": "evaluation.data"}  # fmt: skip
#: Families that must not meet whatever their layers: the edge and the cloud never import each
#: other, and the evaluation reads frames through ``codec.core.sources``, never the edge.
APART = [("edge", "cloud"), ("evaluation", "edge")]


def _modules() -> dict[str, Path]:
    found = {}
    for path in ROOT.rglob("*.py"):
        rel = path.relative_to(ROOT)
        if rel.parts[0] in SKIP or rel.parts[0].startswith(".") or "_pb2" in path.name:
            continue
        dotted = ".".join(rel.with_suffix("").parts).removesuffix(".__init__")
        found["semcodec" if dotted == "__init__" else f"semcodec.{dotted}"] = path
    return found


MODULES = _modules()


def _imports(name: str, path: Path) -> set[str]:
    """The semcodec modules ``name`` imports anywhere in its source."""
    out = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            for alias in node.names:  # ``from pkg import module`` names the module
                full = f"{node.module}.{alias.name}"
                out.add(full if full in MODULES else node.module)
        elif isinstance(node, ast.Import):
            out.update(alias.name for alias in node.names)
    return {m for m in out if m in MODULES and m != name}


GRAPH = {name: _imports(name, path) for name, path in MODULES.items()}


def group_of(module: str) -> str | None:
    """The longest :data:`RANK` key that prefixes ``module`` (without ``semcodec.``)."""
    name = module.removeprefix("semcodec").lstrip(".")
    if name in PACKAGE_ROOTS:
        return PACKAGE_ROOTS[name]
    parts = name.split(".")
    for n in range(len(parts), 0, -1):
        if ".".join(parts[:n]) in RANK:
            return ".".join(parts[:n])
    return None


def test_every_module_has_a_layer():
    assert [m for m in MODULES if group_of(m) is None] == []


def test_imports_go_to_the_same_group_or_a_lower_layer():
    wrong = []
    for module, targets in GRAPH.items():
        mine = group_of(module)
        for target in targets:
            theirs = group_of(target)
            if theirs == mine:
                continue
            apart = any({mine.split(".")[0], theirs.split(".")[0]} == set(pair) for pair in APART)
            if RANK[theirs] >= RANK[mine] or apart:
                wrong.append(f"{module} ({mine}) imports {target} ({theirs})")
    assert wrong == []


def test_no_evaluation_to_edge_arrow():
    """The benchmark reads frames with ``codec.core.sources`` and runs the edge as a program."""
    arrows = [f"{m} imports {t}" for m, targets in GRAPH.items() for t in targets
              if m.startswith("semcodec.evaluation") and t.startswith("semcodec.edge")]  # fmt: skip
    assert arrows == []
    assert "semcodec.codec.core.sources" in MODULES
    assert not any(m.startswith("semcodec.edge.sources") for m in MODULES)


def test_no_import_cycle():
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    cycles = []

    def visit(node: str) -> None:  # Tarjan's strongly connected components
        index[node] = low[node] = len(index)
        stack.append(node)
        for nxt in GRAPH[node]:
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                cycles.append(sorted(component))

    for module in sorted(GRAPH):
        if module not in index:
            visit(module)
    assert cycles == []


@pytest.mark.parametrize("module", ["semcodec.codec.detection.ssdlite", "semcodec.protos"])
def test_bottom_modules_import_nothing_of_semcodec_above_them(module):
    assert all(group_of(t) == group_of(module) for t in GRAPH[module])
