"""Where the package's own files are, and where the development layout's ``../shared`` is.

An installed wheel has no repository around it: nothing may be looked up in paths derived
from ``site-packages``. Files that ship with the package (the embedded sample, the dataset
recipes, small weights) are package data, found through :mod:`importlib.resources`. The
``../shared`` folder beside a checkout (sequences and models for development and CI) is only
looked at when the package runs from a checkout, and never when ``SEMCODEC_NO_SHARED`` is set
to a non-empty value other than ``0`` (how CI proves that a fresh clone needs nothing from it).
"""

from __future__ import annotations

import os
from importlib.resources import files
from pathlib import Path

#: Set to ``1`` to make the code and the tests behave as on a clone with no ``../shared``.
NO_SHARED_ENV = "SEMCODEC_NO_SHARED"


def package_root() -> Path:
    """The folder of the ``semcodec`` package (the repository root in a checkout)."""
    return Path(str(files("semcodec")))


def package_data(relpath: str) -> Path:
    """A file or folder shipped with the package, e.g. ``"datasets/recipes"``."""
    return package_root() / relpath


def checkout_root() -> Path | None:
    """The repository root when the package runs from a checkout (editable install), else
    ``None`` (an installed wheel: the package folder has no ``pyproject.toml``)."""
    root = package_root()
    return root if (root / "pyproject.toml").is_file() else None


def shared_hidden() -> bool:
    """True when ``SEMCODEC_NO_SHARED`` asks to behave as if ``../shared`` were absent."""
    return os.environ.get(NO_SHARED_ENV, "") not in ("", "0")


def shared_dir() -> Path | None:
    """``../shared`` beside a checkout, or ``None`` (installed package, hidden or absent)."""
    root = checkout_root()
    if root is None or shared_hidden():
        return None
    shared = root.parent / "shared"
    return shared if shared.is_dir() else None
