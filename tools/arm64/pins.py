"""The pinned runtime closure of semcodec's dependencies as this environment has them
(``name==version``, one a line), the CUDA libraries included (torch's extras among them):
the versions ``make arm64-check`` installs for aarch64, so that both machines run the same."""

from __future__ import annotations

import re
from importlib.metadata import PackageNotFoundError, distribution, distributions

from packaging.requirements import Requirement


def _name(text: str) -> str:
    return re.sub(r"[-_.]+", "-", text).lower()


def closure() -> dict[str, str]:
    seen: dict[str, str] = {}
    todo = [Requirement(r) for r in distribution("semcodec").requires or []]
    while todo:
        req = todo.pop()
        if req.marker and not req.marker.evaluate({"extra": ""}):
            continue
        if _name(req.name) in seen:
            continue
        try:
            dist = distribution(req.name)
        except PackageNotFoundError:
            continue
        seen[_name(req.name)] = dist.version
        todo += [Requirement(r) for r in dist.requires or []]
    # torch's CUDA libraries come through cuda-toolkit's extras: all that is installed
    for dist in distributions():
        name = _name(dist.metadata["Name"])
        if re.match(r"(nvidia|cuda)-", name):
            seen.setdefault(name, dist.version)
    return seen


if __name__ == "__main__":
    for name, version in sorted(closure().items()):
        print(f"{name}=={version}")
