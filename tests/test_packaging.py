"""The distribution as a user installs it: a real wheel in a throwaway virtualenv.

The wheel is built from this checkout (``pip wheel``), installed without its dependencies
into a new virtualenv whose ``sys.path`` also reaches this environment's packages (torch,
av, ... are not installed twice: a ``.pth`` line names this environment's site-packages, and
the checkout's editable finder is not loaded there), and run from an empty folder.
"""

from __future__ import annotations

import ast
import os
import shutil
import subprocess
import sys
import sysconfig
import tomllib
import venv
import zipfile
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
TOP_LEVEL = ("codec", "edge", "cloud", "evaluation", "protos")


def _declared_packages() -> list[str]:
    config = tomllib.loads((REPO / "pyproject.toml").read_text())
    return config["tool"]["setuptools"]["packages"]


def test_every_package_folder_is_declared():
    folders = sorted(
        "semcodec." + ".".join(p.parent.relative_to(REPO).parts)
        for top in TOP_LEVEL
        for p in (REPO / top).rglob("__init__.py")
    )
    assert sorted(set(folders) - set(_declared_packages())) == []


def test_no_module_imports_a_bare_top_level_name():
    """Everything imports through ``semcodec.``: a bare ``codec``/``edge``... could be
    another distribution's module of that name."""
    offenders = []
    for path in REPO.glob("*/**/*.py"):
        if path.parts[len(REPO.parts)] in (".venv", "build", "dist", ".cache", "runs"):
            continue
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            names = []
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names = [node.module]
            offenders += [f"{path}: {n}" for n in names if n.split(".")[0] in TOP_LEVEL]
    assert offenders == []


#: Clients for testing the service (the load test, its load generator, the attacks): they
#: live in tools/loadtest/ and must not ship.
TEST_CLIENTS = ("abuse", "loadgen", "loadtest")


@pytest.fixture(scope="module")
def built_wheel(tmp_path_factory) -> Path:
    """The wheel built from a copy of the checkout's files as git sees them (tracked, and
    untracked ones it does not ignore): setuptools' ``build/`` folder keeps modules that
    were moved or deleted and would ship them in a wheel built in place."""
    root = tmp_path_factory.mktemp("wheel")
    listed = subprocess.run(["git", "ls-files", "-z", "--cached", "--others",
                             "--exclude-standard"], cwd=REPO, capture_output=True,
                            check=True).stdout.decode().split("\0")  # fmt: skip
    src = root / "src"
    for rel in filter(None, listed):
        if (REPO / rel).is_file():
            (src / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(REPO / rel, src / rel)
    subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--quiet",
                    "--disable-pip-version-check", "-w", str(root / "dist"), str(src)],
                   check=True, stdin=subprocess.DEVNULL, capture_output=True)  # fmt: skip
    (wheel,) = (root / "dist").glob("semcodec-*.whl")
    return wheel


def test_wheel_modules_hold_no_attack_or_load_client(built_wheel):
    """The wheel's modules are the declared packages' and none of them is a test client."""
    names = zipfile.ZipFile(built_wheel).namelist()
    modules = sorted(n.removesuffix(".py").replace("/", ".") for n in names if n.endswith(".py"))
    assert "semcodec.codec.core.sources" in modules and "semcodec.edge.cli" in modules
    clients = [m for m in modules if set(m.split(".")) & set(TEST_CLIENTS)]
    assert clients == [], f"test clients in the wheel: {clients}"
    assert "semcodec.edge.sources" not in modules  # moved to codec.core
    packages = set(_declared_packages())
    assert [m for m in modules if m.rpartition(".")[0] not in packages
            and m != "semcodec.__init__"] == []  # fmt: skip


@pytest.fixture(scope="module")
def installed_wheel(built_wheel, tmp_path_factory) -> Path:
    """A virtualenv with the semcodec wheel installed; returns its ``bin`` folder."""
    root = tmp_path_factory.mktemp("venv")
    wheel = built_wheel
    names = zipfile.ZipFile(wheel).namelist()
    assert "semcodec/datasets/recipes/pets09-s2l1.toml" in names
    assert "semcodec/datasets/sample/PETS09-S2L1-384x288/img1/000060.jpg" in names
    assert "semcodec/codec/weights/taef2_decoder.pth" in names
    assert not [n for n in names if n.split("/")[0] in TOP_LEVEL]  # nothing outside semcodec/
    env = root / "venv"
    venv.EnvBuilder(with_pip=False).create(env)
    env_python = env / "bin" / "python"
    site = subprocess.run([env_python, "-c", "import sysconfig; print(sysconfig.get_paths()"
                           "['purelib'])"], capture_output=True, text=True, check=True)  # fmt: skip
    # every site folder of this interpreter, in its order (an environment layered on
    # another, as `make test-numpy2` makes, has two)
    folders = [p for p in sys.path if p.endswith("-packages")] or [sysconfig.get_paths()["purelib"]]
    Path(site.stdout.strip(), "reuse-dependencies.pth").write_text("\n".join(folders) + "\n")
    subprocess.run([sys.executable, "-m", "pip", "--python", str(env_python), "install",
                    "--no-deps", "--quiet", "--disable-pip-version-check", str(wheel)],
                   check=True, stdin=subprocess.DEVNULL)  # fmt: skip
    return env / "bin"


def _run(bin_dir: Path, cwd: Path, *argv: str) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if not k.startswith("SEMCODEC_")}
    return subprocess.run([str(bin_dir / argv[0]), *argv[1:]], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=900,
                          stdin=subprocess.DEVNULL)  # fmt: skip


@pytest.mark.slow
def test_installed_wheel_imports_from_site_packages(installed_wheel, tmp_path):
    code = ("import semcodec, semcodec.codec.core.layout as l; "
            "print(semcodec.__file__); print(l.checkout_root()); print(l.shared_dir())")
    done = _run(installed_wheel, tmp_path, "python", "-c", code)
    assert done.returncode == 0, done.stderr
    where, checkout, shared = done.stdout.split()
    assert "site-packages" in where and str(REPO) not in where
    assert checkout == "None" and shared == "None"  # no ../shared derived from site-packages


@pytest.mark.slow
def test_installed_wheel_lists_data_and_runs_the_default_benchmark(installed_wheel, tmp_path):
    listing = _run(installed_wheel, tmp_path, "semcodec-bench", "data", "list")
    assert listing.returncode == 0, listing.stderr
    assert "PETS09-S2L1" in listing.stdout
    for prog in ("semcodec-bench", "edge-agent", "cloud-decoder"):
        version = _run(installed_wheel, tmp_path, prog, "--version")
        assert version.returncode == 0 and "semcodec" in version.stdout, prog
    load = _run(installed_wheel, tmp_path, "cloud-decoder", "loadtest", "--out", "load")
    assert load.returncode == 2 and "not installed" in load.stderr, load.stderr  # tools/ only
    run = _run(installed_wheel, tmp_path, "semcodec-bench", "run", "--frames", "4",
               "--codecs", "x264", "--out", "out")  # fmt: skip
    assert run.returncode == 0, run.stderr[-3000:]
    assert (tmp_path / "out" / "results.csv").is_file()
    assert (tmp_path / "out" / "report.md").is_file()


def test_shipped_weights_are_small_and_each_has_a_model_card():
    """Weights ship only when small (at most 10 MB each) and each file is described in
    codec/weights/MODEL_CARD.md."""
    weights = REPO / "codec" / "weights"
    card = (weights / "MODEL_CARD.md").read_text()
    files = [p for p in weights.rglob("*") if p.suffix in (".pt", ".pth", ".onnx", ".npz")]
    assert files
    for path in files:
        assert path.stat().st_size <= 10 * 1024 * 1024, f"{path.name}: over 10 MB"
        named = path.name in card or (path.parent.name == "task" and "bottleneck-beta" in card)
        assert named, f"{path.name} is not in MODEL_CARD.md"
