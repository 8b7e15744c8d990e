"""Shared fixtures: the embedded sample and the ../shared folder beside the repository.

``SEMCODEC_NO_SHARED=1`` runs the suite as on a fresh clone: tests marked ``shared`` skip,
the ``SHARED`` path below points nowhere, and the code itself stops looking in ``../shared``
(models are then fetched from their packages into the user cache on first use).
"""

from __future__ import annotations

import json
import os
import platform
import time
from pathlib import Path

import numpy as np
import pytest

from semcodec.codec.core.layout import NO_SHARED_ENV, shared_hidden

REPO = Path(__file__).resolve().parents[1]
SHARED = REPO.parent / ("shared-hidden-by-" + NO_SHARED_ENV if shared_hidden() else "shared")


def pytest_collection_modifyitems(config, items):
    """Skips the ``shared`` tests, with the reason, when ``../shared`` is hidden or absent."""
    if SHARED.is_dir():
        return
    why = f"{NO_SHARED_ENV} is set" if shared_hidden() else f"{SHARED} is not beside the repo"
    skip = pytest.mark.skip(reason=f"needs ../shared: {why}")
    for item in items:
        if "shared" in item.keywords:
            item.add_marker(skip)


#: Set by ``make test`` (and ``make test-no-shared``) to the file that receives the suite's
#: counts and wall time, quoted by the README.
FIGURES_ENV = "SEMCODEC_TEST_FIGURES"
_STARTED = time.time()


def pytest_terminal_summary(terminalreporter, exitstatus, config):
    """Writes the run's counts and wall time to ``$SEMCODEC_TEST_FIGURES`` when it is set."""
    target = os.environ.get(FIGURES_ENV)
    if not target:
        return
    counts = {kind: len(terminalreporter.stats.get(kind, []))
              for kind in ("passed", "failed", "skipped", "error", "deselected")}  # fmt: skip
    from semcodec.evaluation.bench.grid import machine_description
    from semcodec.evaluation.report.markdown import write_text_atomic

    figures = {**counts, "seconds": round(time.time() - _STARTED),
               "machine": machine_description(),
               "python": platform.python_version(), "exit_status": int(exitstatus),
               "shared_hidden": shared_hidden(), "date": time.strftime("%Y-%m-%d"),
               "load_1min_at_end": round(os.getloadavg()[0], 1)}  # fmt: skip
    write_text_atomic(Path(target), json.dumps(figures, indent=1) + "\n")


@pytest.fixture(scope="session")
def sample_dir() -> Path:
    from semcodec.edge.sources import sample_path

    return sample_path()


@pytest.fixture(scope="session")
def sample_frames(sample_dir) -> np.ndarray:
    """The first 12 frames of the embedded sample, (12, 288, 384, 3) uint8 RGB."""
    from semcodec.edge.sources import open_source

    return open_source(sample_dir).read(start=1, count=12)


@pytest.fixture(scope="session")
def shared_data() -> Path:
    path = SHARED / "data"
    if not path.is_dir():
        pytest.skip("../shared/data is not beside the repository")
    return path


PETS = SHARED / "data" / "PETS09-S2L1"


def _load_pets_frame(number: int) -> np.ndarray:
    import cv2

    image = cv2.imread(str(PETS / "img1" / f"{number:06d}.jpg"))
    if image is None:
        pytest.skip(f"PETS09-S2L1 frame {number} not found under {PETS}")
    return cv2.cvtColor(image, cv2.COLOR_BGR2RGB)


@pytest.fixture(scope="session")
def pets_frame():
    """``pets_frame(k)``: frame k of ../shared/data/PETS09-S2L1, (576, 768, 3) uint8 RGB."""
    return _load_pets_frame


@pytest.fixture(scope="module")
def detector():
    """The person detector at threshold 0.3 (skips when frames or model are absent)."""
    from semcodec.codec.core.models import ModelNotFoundError
    from semcodec.codec.scaffold.detector import DetectorConfig, PersonDetector

    if not (PETS / "img1" / "000001.jpg").is_file():
        pytest.skip(f"PETS09-S2L1 frames not found under {PETS}")
    try:
        return PersonDetector(DetectorConfig(score_threshold=0.3), threads=2)
    except ModelNotFoundError as exc:
        pytest.skip(f"person detector model not available: {exc}")


@pytest.fixture(scope="module")
def pets_gt():
    from semcodec.evaluation.data.groundtruth import load_mot_groundtruth

    return load_mot_groundtruth(PETS)


@pytest.fixture(scope="session")
def gt_tracks():
    """``gt_tracks(gt_file, frame)``: the counted ground-truth people of a frame as Tracks."""
    from semcodec.codec.core.types import Tracks
    from semcodec.evaluation.data.groundtruth import load_mot_groundtruth

    def load(gt_file, frame: int) -> Tracks:
        gt = load_mot_groundtruth(gt_file)
        rows = (gt.frame_numbers == frame) & gt.counted
        xywh = np.asarray(gt.boxes[rows], np.float32)
        boxes = np.c_[xywh[:, :2], xywh[:, :2] + xywh[:, 2:]].astype(np.float32)
        return Tracks(boxes, np.ones(len(boxes), np.float32), gt.ids[rows].astype(np.int32))

    return load
