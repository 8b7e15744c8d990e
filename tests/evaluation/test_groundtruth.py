"""Tests of evaluation.data.groundtruth: MOT15 / MOT16 parsing and GroundTruth helpers."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from semcodec.evaluation.data.groundtruth import (
    GroundTruth,
    GroundTruthError,
    load_mot_groundtruth,
    parse_mot_groundtruth,
)

PETS = Path(__file__).resolve().parents[2].parent / "shared" / "data" / "PETS09-S2L1"

MOT15_TEXT = """\
1,1,10,20,30,60,1,2.5,-3.0,0
1,2,100,50,20,40,0,-1,-1,-1

2,1,12,21,30,60,1,2.6,-3.1,0
2,3,200,80,25,50,1,-1,-1,-1
"""

MOT16_TEXT = """\
1 1 10 20 30 60 1 1 0.9
1 2 50 20 30 60 0 1 0.2
1 3 90 20 30 60 1 7 1.0
1 4 130 20 30 60 1 3 1.0
1 5 170 20 30 60 1 12 0.5
2 1 11 20 30 60 1 1 1.0
"""


def write(tmp_path: Path, text: str, name: str = "gt.txt") -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


def test_mot15_counted_ignore_and_world(tmp_path: Path) -> None:
    gt = load_mot_groundtruth(write(tmp_path, MOT15_TEXT))
    assert gt.format == "mot15" and len(gt) == 4 and gt.num_counted == 3
    assert gt.frames() == [1, 2]
    np.testing.assert_allclose(gt.boxes_xyxy(1), [[10, 20, 40, 80]])
    np.testing.assert_allclose(gt.ignore_xyxy(1), [[100, 50, 120, 90]])
    np.testing.assert_allclose(gt.world(1), [[2.5, -3.0]])
    world2 = gt.world(2)
    np.testing.assert_allclose(world2[0], [2.6, -3.1])
    assert np.isnan(world2[1]).all()
    assert gt.has_world
    assert gt.boxes_xyxy(5).shape == (0, 4) and gt.world(5).shape == (0, 2)


def test_mot16_class_filter_and_flags(tmp_path: Path) -> None:
    gt = load_mot_groundtruth(write(tmp_path, MOT16_TEXT))
    assert gt.format == "mot16" and not gt.has_world
    np.testing.assert_allclose(gt.boxes_xyxy(1), [[10, 20, 40, 80]])
    # flag-0 pedestrian, static person (7) and reflection (12) are ignore regions; the car
    # (class 3) is dropped altogether.
    np.testing.assert_allclose(gt.ignore_xyxy(1)[:, 0], [50, 90, 170])
    assert sorted(gt.ids.tolist()) == [1, 1, 2, 3, 5]


@pytest.mark.parametrize(
    ("text", "counted"),
    [("1,1,10,20,30,60,1\n1,2,5,5,5,5,0\n", 1), ("1,1,10,20,30,60,1,1\n1,2,5,5,5,5,1,8\n", 1)],
)
def test_mot16_short_rows(tmp_path: Path, text: str, counted: int) -> None:
    gt = load_mot_groundtruth(write(tmp_path, text))
    assert gt.format == "mot16" and gt.num_counted == counted and len(gt) == 2


@pytest.mark.parametrize(
    ("text", "line", "what"),
    [
        ("1,1,10,20,30,60,1,-1,-1,-1\n\n1,2,10,20,30,60,1,-1,-1\n", 3, "columns"),
        ("1,1,10,20,30,60,1,-1,-1,-1\n1,2,10,abc,30,60,1,-1,-1,-1\n", 2, "not a number"),
        ("1,1,10,20,0,60,1,-1,-1,-1\n", 1, "width"),
        ("1,1,10,20,30,-2,1,-1,-1,-1\n", 1, "height"),
        ("1,1,10,20,30,60,1,-1,-1,-1\n0,1,10,20,30,60,1,-1,-1,-1\n", 2, "frame < 1"),
        ("1,1,10,20,30,60\n", 1, "6 columns"),
    ],
)
def test_malformed_rows_name_the_line(tmp_path: Path, text: str, line: int, what: str) -> None:
    path = write(tmp_path, text)
    with pytest.raises(GroundTruthError, match=f"gt.txt:{line}: .*") as info:
        load_mot_groundtruth(path)
    assert what in str(info.value)


def test_wrong_explicit_format_and_missing_file(tmp_path: Path) -> None:
    with pytest.raises(GroundTruthError, match="needs 7 or 8 or 9"):
        load_mot_groundtruth(write(tmp_path, MOT15_TEXT), format="mot16")
    with pytest.raises(GroundTruthError, match="does not exist"):
        load_mot_groundtruth(tmp_path / "nope.txt")
    (tmp_path / "empty_seq").mkdir()
    with pytest.raises(GroundTruthError, match="without gt/gt.txt"):
        load_mot_groundtruth(tmp_path / "empty_seq")


def test_sequence_folder_scaled_restrict_and_roundtrip(tmp_path: Path) -> None:
    (tmp_path / "gt").mkdir()
    write(tmp_path / "gt", MOT15_TEXT)
    gt = load_mot_groundtruth(tmp_path)
    half = gt.scaled(0.5, 0.25)
    np.testing.assert_allclose(half.boxes_xyxy(1), [[5, 5, 20, 20]])
    np.testing.assert_array_equal(half.world_xy, gt.world_xy)
    only2 = gt.restrict(2, 2)
    assert only2.frames() == [2] and only2.num_counted == 2
    back = parse_mot_groundtruth(gt.to_mot15_text())
    for name in ("frame_numbers", "ids", "boxes", "counted", "world_xy"):
        np.testing.assert_array_equal(getattr(back, name), getattr(gt, name))
    with pytest.raises(GroundTruthError):
        gt.scaled(0, 1)


def test_empty_and_inconsistent_arrays() -> None:
    empty = parse_mot_groundtruth("\n\n")
    assert len(empty) == 0 and empty.frames() == [] and not empty.has_world
    assert empty.to_mot15_text() == ""
    with pytest.raises(GroundTruthError, match="rows"):
        GroundTruth(np.ones(2), np.ones(1), np.ones((2, 4)), np.ones(2), np.ones((2, 2)))


@pytest.mark.shared
def test_pets09_s2l1_counts() -> None:
    if not (PETS / "gt" / "gt.txt").is_file():
        pytest.skip(f"PETS09-S2L1 ground truth not found under {PETS}")
    gt = load_mot_groundtruth(PETS)
    # Counted once with awk: 1874 rows, 1700 with conf 1, 174 ignore rows (ids 11, 12, 16),
    # frames 1-300, all with world coordinates.
    assert gt.format == "mot15" and len(gt) == 1874 and gt.num_counted == 1700
    assert gt.frames() == list(range(1, 301))
    assert len(np.unique(gt.ids)) == 10
    assert np.isfinite(gt.world_xy).all()
    assert len(gt.boxes_xyxy(1)) == 3 and len(gt.boxes_xyxy(150)) == 6
    assert len(gt.ignore_xyxy(147)) == 1
    assert sum(len(gt.boxes_xyxy(f)) for f in range(1, 151, 5)) == 173
