"""Data recipes: what a sequence or dataset is, where it comes from, and how to check a copy.

One TOML file per sequence or dataset lives in ``datasets/recipes/``. :func:`load_recipes`
reads them into :class:`Recipe` objects, :func:`verify_recipe` checks a local copy against
the recorded sha256 checksums. The schema (every string field is required, numbers may be
left out when a ``[notes]`` entry of the same name says why)::

    name = "PETS09-S2L1"             # unique; the --data name of a local copy
    title = "..."
    kind = "sequence"                # "sequence" (one clip) or "dataset" (a collection)
    summary = "..."
    official_url = "https://..."     # "unknown" when there is no stable official copy
    licence = "..."
    citation = "..."
    storage = "..."                  # container, codec, pixel format
    ground_truth = "..."             # format of the annotations, or "none"
    local = "PETS09-S2L1"            # optional: folder under the data root when shipped
    usage = "..."                    # optional: how to open it with semcodec
    frame_rate = 7                   # optional number (frames per second)
    width = 768                      # optional, pixels
    height = 576                     # optional, pixels
    frame_count = 300                # optional
    [notes]                          # free text per field, required for absent numbers
    frame_rate = "varies per sequence"
    [[files]]                        # paths relative to the data root
    path = "PETS09-S2L1/gt/gt.txt"
    sha256 = "c699..."               # "" when not known: existence is checked only
    [[folder_digests]]               # many files summarised by one digest
    folder = "PETS09-S2L1/img1"
    pattern = "*.jpg"
    count = 300
    sha256 = "334b..."               # sha256 of the sha256sum lines, see folder_digest()
"""

from __future__ import annotations

import hashlib
import re
import tomllib
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Any

from semcodec.codec.core.layout import package_data

RECIPE_KINDS = ("sequence", "dataset")
_REQUIRED_TEXT = (
    "name", "title", "kind", "summary", "official_url", "licence", "citation", "storage",
    "ground_truth",
)  # fmt: skip
_NUMBERS = {"frame_rate": float, "width": int, "height": int, "frame_count": int}
_SHA256 = re.compile(r"^([0-9a-f]{64})?$")


class RecipeError(ValueError):
    """A recipe file is missing or malformed; the message names the file and the field."""


@dataclass(frozen=True)
class RecipeFile:
    """One file of a recipe: ``path`` relative to the data root, hex ``sha256`` ("" = unknown)."""

    path: str
    sha256: str


@dataclass(frozen=True)
class FolderDigest:
    """Files ``folder/pattern`` (relative to the data root) summarised by one digest.

    ``sha256`` is the sha256 of the ``sha256sum`` lines of those files, sorted by path,
    each ``"<hex>  ./<folder>/<name>\\n"`` (the form of ``../shared/data/SHA256SUMS``).
    """

    folder: str
    pattern: str
    count: int
    sha256: str


@dataclass(frozen=True)
class Recipe:
    """A sequence or dataset description loaded from ``datasets/recipes/<file>.toml``.

    Numeric fields are None where unknown or varying; ``notes[field]`` then says why.
    ``frame_rate`` is in frames per second, ``width``/``height`` in pixels.
    """

    name: str
    title: str
    kind: str
    summary: str
    official_url: str
    licence: str
    citation: str
    storage: str
    ground_truth: str
    source_file: Path
    local: str | None = None
    usage: str = ""
    frame_rate: float | None = None
    width: int | None = None
    height: int | None = None
    frame_count: int | None = None
    notes: dict[str, str] = field(default_factory=dict)
    files: tuple[RecipeFile, ...] = ()
    folder_digests: tuple[FolderDigest, ...] = ()

    @property
    def has_checksums(self) -> bool:
        """True when :func:`verify_recipe` has any sha256 to compare."""
        return any(f.sha256 for f in self.files) or bool(self.folder_digests)

    def local_copy(self, roots: Sequence[Path]) -> Path | None:
        """The first ``root/local`` folder that exists (None: no copy here, or no ``local``)."""
        if self.local is None:
            return None
        return next((root / self.local for root in roots if (root / self.local).is_dir()), None)

    def summary_line(self, here: str) -> str:
        """One line for listings (:func:`listing_line`); ``here``: where a copy is, or
        "not here"."""
        return listing_line(self.kind, self.width, self.height, self.frame_rate,
                            self.frame_count, here, self.title)  # fmt: skip


def listing_line(kind: str, width: int | None, height: int | None, frame_rate: float | None,
                 frame_count: int | None, here: str, title: str) -> str:
    """``data list``'s line: kind, size, rate, length, availability and title ("?" where
    unknown)."""
    size = f"{width}x{height}" if width and height else "size ?"
    rate = f"{frame_rate:g} fps" if frame_rate else "fps ?"
    count = f"{frame_count} frames" if frame_count else "frames ?"
    return f"{kind:8s} {size:>11s}  {rate:>10s}  {count:>11s}  {here:8s}  {title}"


def default_recipe_dir() -> Path:
    """``datasets/recipes``, shipped with the package (package data)."""
    return package_data("datasets/recipes")


def load_recipes(dir: Path | str | None = None) -> dict[str, Recipe]:  # noqa: A002
    """Load every ``*.toml`` in ``dir`` (default :func:`default_recipe_dir`), keyed by name.

    Raises:
        RecipeError: the folder is missing or empty, a file is malformed, or two
            recipes share a name.
    """
    folder = Path(dir) if dir is not None else default_recipe_dir()
    if not folder.is_dir():
        raise RecipeError(f"{folder}: recipe folder not found (expected datasets/recipes/)")
    recipes: dict[str, Recipe] = {}
    for path in sorted(folder.glob("*.toml")):
        recipe = load_recipe(path)
        if recipe.name in recipes:
            other = recipes[recipe.name].source_file.name
            raise RecipeError(f"{path}: name {recipe.name!r} is already used by {other}")
        recipes[recipe.name] = recipe
    if not recipes:
        raise RecipeError(f"{folder}: no *.toml recipes in this folder")
    return recipes


def load_recipe(path: Path) -> Recipe:
    """Parse and validate one recipe file."""
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except (OSError, tomllib.TOMLDecodeError) as exc:
        raise RecipeError(f"{path}: cannot read TOML ({exc})") from exc
    text = {key: _text(data, key, path) for key in _REQUIRED_TEXT}
    if text["kind"] not in RECIPE_KINDS:
        raise RecipeError(f"{path}: kind must be one of {RECIPE_KINDS}, got {text['kind']!r}")
    url = text["official_url"]
    if url != "unknown" and not url.startswith(("https://", "http://", "ftp://")):
        raise RecipeError(f"{path}: official_url must be a URL or 'unknown', got {url!r}")
    notes = data.get("notes", {})
    if not isinstance(notes, dict) or not all(isinstance(v, str) for v in notes.values()):
        raise RecipeError(f"{path}: [notes] must map field names to strings")
    numbers = {key: _number(data, key, kind, notes, path) for key, kind in _NUMBERS.items()}
    local = data.get("local")
    if local is not None:
        local = _relative(local, "local", path)
    return Recipe(
        **text,
        source_file=path,
        local=local,
        usage=str(data.get("usage", "")),
        notes=dict(notes),
        files=tuple(_file(entry, path) for entry in data.get("files", [])),
        folder_digests=tuple(_digest(entry, path) for entry in data.get("folder_digests", [])),
        **numbers,
    )


def _text(data: dict[str, Any], key: str, path: Path) -> str:
    value = data.get(key)
    if not isinstance(value, str) or not value.strip():
        raise RecipeError(f"{path}: required text field {key!r} is missing or empty")
    return value.strip()


def _number(
    data: dict[str, Any], key: str, kind: type, notes: dict[str, str], path: Path
) -> float | int | None:
    value = data.get(key)
    if value is None:
        if key not in notes:
            raise RecipeError(f"{path}: give {key} or explain its absence in [notes] {key} = ...")
        return None
    if isinstance(value, bool) or not isinstance(value, int | float) or value <= 0:
        raise RecipeError(f"{path}: {key} must be a positive number, got {value!r}")
    if kind is int and not float(value).is_integer():
        raise RecipeError(f"{path}: {key} must be a whole number, got {value!r}")
    return kind(value)


def _relative(value: Any, key: str, path: Path) -> str:
    """Check that ``value`` is a relative POSIX path without ``..``."""
    if not isinstance(value, str) or not value:
        raise RecipeError(f"{path}: {key} must be a non-empty path string")
    pure = PurePosixPath(value)
    if pure.is_absolute() or ".." in pure.parts:
        raise RecipeError(f"{path}: {key} {value!r} must be relative to the data root")
    return value


def _sha(value: Any, key: str, path: Path) -> str:
    if not isinstance(value, str) or not _SHA256.match(value):
        raise RecipeError(f"{path}: {key} must be 64 lowercase hex digits or '', got {value!r}")
    return value


def _file(entry: Any, path: Path) -> RecipeFile:
    if not isinstance(entry, dict):
        raise RecipeError(f"{path}: each [[files]] entry needs path and sha256")
    return RecipeFile(
        path=_relative(entry.get("path"), "files.path", path),
        sha256=_sha(entry.get("sha256", ""), "files.sha256", path),
    )


def _digest(entry: Any, path: Path) -> FolderDigest:
    if not isinstance(entry, dict):
        raise RecipeError(f"{path}: each [[folder_digests]] entry needs folder, pattern, count")
    count = entry.get("count")
    if not isinstance(count, int) or isinstance(count, bool) or count < 1:
        raise RecipeError(f"{path}: folder_digests.count must be a positive integer")
    return FolderDigest(
        folder=_relative(entry.get("folder"), "folder_digests.folder", path),
        pattern=str(entry.get("pattern", "*")),
        count=count,
        sha256=_sha(entry.get("sha256"), "folder_digests.sha256", path),
    )


# --------------------------------------------------------------------------- verification


def sha256_file(path: Path) -> str:
    """Hex sha256 of a file's bytes (read in 1 MiB blocks)."""
    digest = hashlib.sha256()
    with path.open("rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def folder_digest(data_root: Path, folder: str, pattern: str) -> tuple[int, str]:
    """Number of files matching ``folder/pattern`` and the digest of their sha256sum lines.

    Equals ``grep ' ./<folder>/' SHA256SUMS | LC_ALL=C sort -k2 | sha256sum`` on a
    ``SHA256SUMS`` written from ``data_root`` with ``./`` paths.
    """
    files = sorted((data_root / folder).glob(pattern), key=lambda p: p.name)
    lines = [f"{sha256_file(p)}  ./{folder}/{p.name}\n" for p in files if p.is_file()]
    return len(lines), hashlib.sha256("".join(lines).encode()).hexdigest()


def verify_recipe(recipe: Recipe, data_root: Path | str) -> list[str]:
    """Check a local copy under ``data_root``; returns problems, empty when all is well.

    Reports a missing ``local`` folder, missing files, sha256 mismatches and folder
    digests whose file count or digest differ. A recipe without files has nothing to
    check and returns ``[]`` (see :attr:`Recipe.has_checksums`).
    """
    root = Path(data_root)
    problems: list[str] = []
    if recipe.local is not None and not (root / recipe.local).is_dir():
        problems.append(f"{recipe.name}: folder {root / recipe.local} is missing")
    for entry in recipe.files:
        problems.extend(_verify_file(recipe.name, root, entry))
    for digest in recipe.folder_digests:
        problems.extend(_verify_digest(recipe.name, root, digest))
    return problems


def _verify_file(name: str, root: Path, entry: RecipeFile) -> list[str]:
    path = root / entry.path
    if not path.is_file():
        return [f"{name}: file {path} is missing"]
    if entry.sha256 and (actual := sha256_file(path)) != entry.sha256:
        return [f"{name}: sha256 mismatch for {path}: expected {entry.sha256}, got {actual}"]
    return []


def _verify_digest(name: str, root: Path, digest: FolderDigest) -> list[str]:
    if not (root / digest.folder).is_dir():
        return [f"{name}: folder {root / digest.folder} is missing"]
    count, actual = folder_digest(root, digest.folder, digest.pattern)
    if count != digest.count:
        where = f"{root / digest.folder}/{digest.pattern}"
        return [f"{name}: {where} has {count} files, expected {digest.count}"]
    if actual != digest.sha256:
        return [
            f"{name}: folder digest mismatch for {root / digest.folder}: expected "
            f"{digest.sha256}, got {actual} (a file changed; sha256sum -c SHA256SUMS finds it)"
        ]
    return []
