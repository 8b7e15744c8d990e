"""Pose agreement (PCK@0.1 of the box height): known answers with the real pose model on the
embedded sample's people."""

from __future__ import annotations

import numpy as np
import pytest

from semcodec.codec.core.models import ModelNotFoundError
from semcodec.evaluation.metrics.pose_agreement import (
    POSE_MODEL,
    PoseAgreement,
    joints_agree,
    pose_agreement,
)

FRAMES = 6


def test_a_joint_agrees_within_a_tenth_of_the_box_height():
    reference = np.array([[10.0, 10.0], [10.0, 10.0], [10.0, 10.0], [0.0, 0.0]])
    decoded = np.array([[13.0, 14.0], [13.0, 14.01], [10.0, 10.0], [-6.0, 0.0]])
    # distances 5, just over 5, 0 and 6 against a box 50 px high: 5 px is the limit
    assert joints_agree(reference, decoded, 50.0).tolist() == [True, False, True, False]
    assert joints_agree(reference, decoded, 60.0).tolist() == [True, True, True, True]


@pytest.fixture(scope="module")
def sample():
    """The sample's first frames ``(6, 288, 384, 3)`` uint8 and their ground truth."""
    from semcodec.codec.core.sources import sample_path
    from semcodec.evaluation.data.sequences import load_sequence

    frames, _, gt = load_sequence(str(sample_path()), FRAMES, (), 1)
    return frames, gt


@pytest.fixture(scope="module")
def judge() -> PoseAgreement:
    try:
        return PoseAgreement()
    except ModelNotFoundError as exc:
        pytest.skip(f"pose model {POSE_MODEL} not available: {exc}")


def test_a_copy_agrees_everywhere_and_an_empty_plate_nowhere(sample, judge):
    frames, gt = sample
    numbers = range(1, FRAMES + 1)
    copy = judge.scores(frames, frames.copy(), gt, numbers)
    assert copy["pose_pck"] == 1.0 and copy["pose_lost"] == 0.0
    assert copy["pose_people"] >= 2 * FRAMES  # three people a frame, the model finds most
    erased = frames.copy()  # every counted person painted over with the frame's median
    for n in numbers:
        plate = np.median(frames[n - 1].reshape(-1, 3), axis=0).astype(np.uint8)
        for x, y, w, h in gt.boxes[(gt.frame_numbers == n) & gt.counted]:
            erased[n - 1, max(int(y), 0) : int(y + h), max(int(x), 0) : int(x + w)] = plate
    empty = judge.scores(frames, erased, gt, numbers)
    assert empty == {"pose_pck": 0.0, "pose_people": copy["pose_people"], "pose_lost": 1.0}


def test_people_drawn_a_quarter_of_their_height_off_disagree(sample, judge):
    """The people are 38-44 px high: 0.1 of that is about 4 px. Moved by 2 px they agree, by
    10 px (about a quarter of their height) they do not, though the model still finds them."""
    frames, gt = sample
    near = pose_agreement(frames, np.roll(frames, 2, axis=1), gt)
    far = pose_agreement(frames, np.roll(frames, 10, axis=1), gt, every=2)
    assert near["pose_pck"] > 0.95
    assert far["pose_pck"] < 0.1 and far["pose_lost"] < 0.2


def test_the_benchmark_row_has_the_columns(sample, judge):
    from semcodec.codec.core.sources import sample_path
    from semcodec.evaluation.bench.grid import BASE_COLUMNS, CellSpec, measure_quality

    frames, gt = sample
    cell = CellSpec(str(sample_path()), FRAMES, "raw", "", metrics=("pose",), lpips_every=3)
    row = measure_quality(frames, np.roll(frames, 10, axis=1), cell, gt)
    assert set(row) == {"pose_pck", "pose_people", "pose_lost"} <= set(BASE_COLUMNS)
    assert row["pose_pck"] < 0.1 and row["pose_people"] >= 4  # frames 1 and 4
    assert measure_quality(frames, frames, cell, None) == {}  # no ground truth, no column


def test_videos_of_two_shapes_are_refused(sample, judge):
    frames, gt = sample
    with pytest.raises(ValueError, match="differ"):
        judge.scores(frames, frames[:2], gt, [1])
