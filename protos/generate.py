"""Regenerates the Python stubs of the ``.proto`` files in this folder (``make protos``).

``python -m semcodec.protos.generate [OUT_DIR]`` runs ``grpc_tools.protoc`` (the dev
dependency ``grpcio-tools``) on every ``*.proto`` here and writes ``NAME_pb2.py`` and
``NAME_pb2_grpc.py`` to ``OUT_DIR`` (default: this folder). protoc writes the stubs' imports
of each other as top-level modules (``import semcodec_v1_pb2``); they are rewritten to
``from semcodec.protos import semcodec_v1_pb2`` so the stubs work inside the package.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

PROTO_DIR = Path(__file__).resolve().parent


def proto_files() -> list[Path]:
    """The ``.proto`` sources, sorted by name."""
    return sorted(PROTO_DIR.glob("*.proto"))


def _fix_imports(path: Path, names: list[str]) -> None:
    text = path.read_text(encoding="utf-8")
    for name in names:
        text = re.sub(rf"^import {name}_pb2 as ", f"from semcodec.protos import {name}_pb2 as ",
                      text, flags=re.MULTILINE)  # fmt: skip
    path.write_text(text, encoding="utf-8")


def generate(out_dir: Path = PROTO_DIR) -> list[Path]:
    """Writes the stubs of every ``.proto`` to ``out_dir``; returns the files written.

    Raises:
        RuntimeError: protoc failed (its message is included).
    """
    from grpc_tools import protoc

    protos = proto_files()
    out_dir.mkdir(parents=True, exist_ok=True)
    include = str(Path(protoc.__file__).resolve().parent / "_proto")
    args = ["protoc", f"-I{PROTO_DIR}", f"-I{include}", f"--python_out={out_dir}",
            f"--grpc_python_out={out_dir}", *(str(p) for p in protos)]  # fmt: skip
    if protoc.main(args) != 0:
        raise RuntimeError(f"protoc failed on {', '.join(p.name for p in protos)}")
    names = [p.stem for p in protos]
    written = []
    for name in names:
        for suffix in ("_pb2.py", "_pb2_grpc.py"):
            path = out_dir / f"{name}{suffix}"
            _fix_imports(path, names)
            written.append(path)
    return written


def main(argv: list[str] | None = None) -> int:
    """Entry point: ``python -m semcodec.protos.generate [OUT_DIR]``."""
    argv = sys.argv[1:] if argv is None else argv
    out = Path(argv[0]) if argv else PROTO_DIR
    for path in generate(out):
        print(path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
