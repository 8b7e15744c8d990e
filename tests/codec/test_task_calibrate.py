"""The cloud's threshold of a detect-mode stream, on synthetic scores with known answers
(issue 40): the threshold whose decoded count matches the uncompressed detector's."""

from __future__ import annotations

import numpy as np
import pytest

from semcodec.codec.task.calibrate import (
    REFERENCE_THRESHOLD,
    match_threshold,
    persistent_threshold,
    reference_threshold_of,
)


def test_the_threshold_whose_decoded_count_matches_the_uncompressed_one():
    # the uncompressed detector finds 3 people per frame at 0.4; the decoded features score
    # lower: 3 per frame only at thresholds in (0.05, 0.22], and the one nearest 0.4 is 0.22
    reference = [np.array([0.9, 0.6, 0.45, 0.2]), np.array([0.8, 0.5, 0.41, 0.1])]
    decoded = [np.array([0.7, 0.4, 0.25, 0.05]), np.array([0.6, 0.3, 0.22, 0.01])]
    threshold, target, matched = match_threshold(reference, decoded)
    assert (threshold, target, matched) == (0.22, 3.0, 3.0)
    # decoded features that score higher than the real ones: the threshold goes up
    higher = [s + 0.3 for s in reference]  # 3 per frame in (0.5, 0.75]: nearest 0.4 is 0.51
    assert match_threshold(reference, higher)[0] == 0.51
    # identical scores: the reference's own operating point
    assert match_threshold(reference, reference)[0] == REFERENCE_THRESHOLD


def test_counts_are_averaged_over_frames_and_the_nearest_count_wins():
    reference = [np.array([0.9, 0.8]), np.array([0.9, 0.8])]  # 2 per frame
    decoded = [np.array([0.35]), np.array([0.3, 0.29, 0.28])]  # 1 + 3: 2 on average at 0.28
    threshold, target, matched = match_threshold(reference, decoded)
    assert target == 2.0 and matched == 2.0 and threshold == 0.28
    # 5 per frame is out of reach: the nearest count (2), at the threshold nearest 0.4
    reference = [np.full(5, 0.9), np.full(5, 0.9)]
    assert match_threshold(reference, decoded) == (0.28, 5.0, 2.0)
    with pytest.raises(ValueError, match="same"):
        match_threshold(reference, decoded[:1])
    with pytest.raises(ValueError):
        match_threshold([], [])


def _walk(frames: int, x: float, score, step: float = 2.0) -> list[tuple[np.ndarray, float]]:
    """A person walking right ``step`` pixels a frame: one ``(box, score)`` per frame."""
    scores = score if isinstance(score, list) else [score] * frames
    return [(np.array([x + step * k, 50.0, x + step * k + 40.0, 150.0]), scores[k])
            for k in range(frames)]  # fmt: skip


def _frames(*tracks, flickers=()) -> tuple[list[np.ndarray], list[np.ndarray]]:
    """Per frame the boxes and scores of ``tracks`` (lists of ``(box, score)`` per frame) and
    of ``flickers``: ``(frame, score)`` one-frame boxes, each at a place of its own."""
    count = len(tracks[0])
    boxes, scores = [[] for _ in range(count)], [[] for _ in range(count)]
    for track in tracks:
        for k, (box, score) in enumerate(track):
            boxes[k].append(box)
            scores[k].append(score)
    for n, (k, score) in enumerate(flickers):
        boxes[k].append(np.array([400.0 + 50 * n, 300.0, 430.0 + 50 * n, 380.0]))
        scores[k].append(score)
    return ([np.array(b).reshape(-1, 4) for b in boxes],
            [np.array(s, dtype=np.float64) for s in scores])  # fmt: skip


def test_the_reference_threshold_keeps_the_persistent_people_and_drops_the_flickers():
    # a sure person (0.9) and a faint one (0.25, once 0.45: the detector confirms it) walk
    # through 20 frames; a false alarm at 0.2 flickers for one frame in every other frame.
    # Only thresholds in (0.20, 0.25] keep both people and drop every flicker: the one
    # nearest 0.4 is 0.25
    faint = [0.25] * 20
    faint[7] = 0.45
    boxes, scores = _frames(_walk(20, 10.0, 0.9), _walk(20, 200.0, faint),
                            flickers=[(k, 0.2) for k in range(0, 20, 2)])  # fmt: skip
    threshold, people = persistent_threshold(boxes, scores, 4, confirm_score=0.4)
    assert threshold == 0.25 and people == 2.0
    # flickers that score high (0.5) and a sure person: the threshold rises above them
    boxes, scores = _frames(_walk(20, 10.0, 0.9), flickers=[(k, 0.5) for k in range(0, 20, 2)])
    assert persistent_threshold(boxes, scores, 4, confirm_score=0.4) == (0.51, 1.0)


def test_a_track_is_a_person_only_if_it_lasts_and_the_detector_is_sure_of_it_once():
    # a steady box that never reaches 0.4 (a post at 0.35) is not a person: it is dropped
    # (any threshold in (0.35, 0.9] does; the one nearest 0.4)
    boxes, scores = _frames(_walk(20, 10.0, 0.9), _walk(20, 200.0, 0.35, step=0.0))
    assert persistent_threshold(boxes, scores, 4, confirm_score=0.4) == (0.4, 1.0)
    # without the confirmation it is: the threshold comes down to keep it
    assert persistent_threshold(boxes, scores, 4)[0] == 0.35
    # a faint person seen for 3 frames only (shorter than 4) is a flicker too
    short = [(b, s if k < 3 else 0.0) for k, (b, s) in enumerate(_walk(20, 200.0, 0.45))]
    boxes, scores = _frames(_walk(20, 10.0, 0.9), short)
    assert persistent_threshold(boxes, scores, 4, confirm_score=0.4)[0] == 0.46
    # a box that jumps further than IoU 0.5 each frame starts a new track each time
    boxes, scores = _frames(_walk(20, 10.0, 0.9), _walk(20, 200.0, 0.45, step=30.0))
    assert persistent_threshold(boxes, scores, 4, confirm_score=0.4)[0] == 0.46
    # no person at all: the detector's reference operating point
    empty = [np.zeros((0, 4))] * 5
    assert persistent_threshold(empty, [np.zeros(0)] * 5, 2) == (REFERENCE_THRESHOLD, 0.0)
    with pytest.raises(ValueError):
        persistent_threshold(empty, [np.zeros(0)] * 4, 2)


def test_the_persistence_lasts_half_a_second_at_any_frame_rate():
    # 4 s of start-up frames at 7 fps (28) want 4 frames (0.5 s); at 25 fps (100), 12.
    # A faint person confirmed once and seen for 6 frames: a person at 7 fps, not at 25
    for count, expected in ((28, 0.25), (100, 0.81)):
        faint = [0.25 if k < 6 else 0.0 for k in range(count)]
        faint[2] = 0.45
        boxes, scores = _frames(_walk(count, 10.0, 0.95, step=0.5),
                                _walk(count, 300.0, faint, step=0.5),
                                flickers=[(k, 0.8) for k in range(10, count, 10)])  # fmt: skip
        # the flickers at 0.8 put the threshold above them unless the faint person counts
        assert reference_threshold_of(boxes, scores) == expected


def test_the_cloud_threshold_matches_the_count_at_the_chosen_reference():
    reference = [np.array([0.9, 0.6, 0.3, 0.1]), np.array([0.8, 0.5, 0.32, 0.1])]
    decoded = [np.array([0.7, 0.4, 0.15, 0.05]), np.array([0.6, 0.3, 0.16, 0.01])]
    # 3 people per frame at a reference of 0.3 -> the decoded count is 3 in (0.05, 0.15]
    assert match_threshold(reference, decoded, 0.3) == (0.15, 3.0, 3.0)
    # 2 at the fixed 0.4 -> 2 in (0.16, 0.3], nearest 0.4: 0.3
    assert match_threshold(reference, decoded, 0.4) == (0.3, 2.0, 2.0)
