"""The plate check (issue 51): the person-free median of a clip from its ground truth, and a
kept person found as a blob while coding noise is not."""

from __future__ import annotations

import numpy as np
import pytest

from semcodec.evaluation.metrics.plate import person_free_median, plate_check


def _clip() -> tuple[np.ndarray, list[np.ndarray]]:
    """Ten 60x80 frames of a textured ground; a dark person walks left to right."""
    rng = np.random.default_rng(0)
    ground = rng.integers(80, 120, size=(60, 80, 3), dtype=np.uint8)
    frames, boxes = [], []
    for t in range(10):
        frame = ground.copy()
        x = 5 + 7 * t
        frame[10:50, x : x + 8] = 15
        frames.append(frame)
        boxes.append(np.array([[x, 10, x + 8, 50]], np.float64))
    return np.stack(frames), boxes


def test_the_person_free_median_is_the_ground_and_every_pixel_is_shown():
    frames, boxes = _clip()
    reference, shown = person_free_median(frames, boxes)
    np.testing.assert_array_equal(reference, frames[0] * 0 + np.median(frames, axis=0))
    assert shown.all()
    # a person who never moves: their pixels are not shown
    still = [np.array([[20, 10, 28, 50]], np.float64)] * 10
    _, shown = person_free_median(frames, still)
    assert not shown[30, 24] and shown[30, 60]


def test_a_kept_person_is_a_blob_and_noise_is_not():
    frames, boxes = _clip()
    reference, shown = person_free_median(frames, boxes)
    noisy = np.clip(reference.astype(int) + np.random.default_rng(1).integers(-6, 7,
                    reference.shape), 0, 255).astype(np.uint8)  # fmt: skip
    clean = plate_check(noisy, reference, shown)
    assert clean.blobs == 0 and clean.blob_share == 0 and 0 < clean.luma_error < 6
    ghost = reference.copy()
    ghost[10:50, 30:38] = 15  # the person frozen in the plate
    check = plate_check(ghost, reference, shown)
    assert check.blobs == 1
    assert check.blob_share == pytest.approx(40 * 8 / shown.sum())
    with pytest.raises(ValueError, match="differ in size"):
        plate_check(ghost[:10], reference, shown)


def test_the_plate_command_checks_a_streams_plates_and_writes_the_picture(
        sample_dir, tmp_path, capsys):  # fmt: skip
    from semcodec.evaluation.cli import main

    out = tmp_path / "plate.png"
    assert main(["plate", "--data", str(sample_dir), "--frames", "12", "-o", str(out)]) == 0
    printed = capsys.readouterr().out
    assert printed.startswith("frame 1: luma error ") and "blobs" in printed
    assert "first plate 0.50 of the first" in printed  # the profile line: the pixels' share
    assert out.stat().st_size > 1000
    assert main(["plate", "--data", str(sample_dir), "--frames", "12", "--setting",
                 "level=2,priority=scene"]) == 2  # fmt: skip
    assert "priority=scene needs a budget" in capsys.readouterr().err
