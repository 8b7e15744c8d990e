"""Shared fixtures: the embedded sample and the ../shared folder beside the repository."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

REPO = Path(__file__).resolve().parents[1]
SHARED = REPO.parent / "shared"


@pytest.fixture(scope="session")
def sample_dir() -> Path:
    from edge.sources import sample_path

    return sample_path()


@pytest.fixture(scope="session")
def sample_frames(sample_dir) -> np.ndarray:
    """The first 12 frames of the embedded sample, (12, 288, 384, 3) uint8 RGB."""
    from edge.sources import open_source

    return open_source(sample_dir).read(start=1, count=12)


@pytest.fixture(scope="session")
def shared_data() -> Path:
    path = SHARED / "data"
    if not path.is_dir():
        pytest.skip("../shared/data is not beside the repository")
    return path
