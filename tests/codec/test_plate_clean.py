"""The plate is built from person-free pixels (issue 51): a person standing for most of the
window leaves no blob when the edge's boxes are known, and what no frame shows free keeps
the plain median."""

from __future__ import annotations

import numpy as np

from semcodec.codec.scaffold.plate.background import BackgroundModel

BACKGROUND = 90
PERSON = 20  # a dark coat


def _scene(t: int, stands_until: int) -> tuple[np.ndarray, np.ndarray]:
    """A 40x30 frame: a flat background, a dark person standing at x 10-16 for frames
    before ``stands_until``, then walking off to the right; and their box."""
    frame = np.full((30, 40, 3), BACKGROUND, np.uint8)
    x = 10 if t < stands_until else 10 + 5 * (t - stands_until + 1)
    frame[5:25, x : x + 6] = PERSON
    return frame, np.array([[x, 5, x + 6, 25]], np.float64)


def test_a_person_standing_most_of_the_window_stays_in_a_plain_median():
    model = BackgroundModel((40, 30), window=9, stride=1)
    for t in range(9):
        model.update(_scene(t, stands_until=6)[0])
    assert model.plate()[15, 12, 0] == PERSON  # the dark blob where they stood


def test_the_boxes_leave_the_person_out_of_the_vote():
    model = BackgroundModel((40, 30), window=9, stride=1)
    for t in range(9):
        model.update(*_scene(t, stands_until=6))
    np.testing.assert_array_equal(model.plate(), np.full((30, 40, 3), BACKGROUND, np.uint8))


def test_pixels_no_frame_shows_free_keep_the_plain_median():
    model = BackgroundModel((40, 30), window=4, stride=1)
    for t in range(4):
        model.update(*_scene(t, stands_until=10))  # never moves
    plate = model.plate()
    assert plate[15, 12, 0] == PERSON  # what the clip shows there, not a smear
    assert (plate[:, 30:] == BACKGROUND).all()


def test_prime_keeps_evenly_spaced_frames_first_included():
    model = BackgroundModel((40, 30), window=4, stride=1)
    assert model.prime_indices(3) == [0, 1, 2]
    assert model.prime_indices(9) == [0, 3, 6]
    assert model.prime_indices(16) == [0, 4, 8, 12]
    assert model.prime_indices(0) == []


def test_primed_frames_use_the_people_known_on_them():
    frames, boxes = zip(*(_scene(t, stands_until=6) for t in range(9)), strict=True)
    model = BackgroundModel((40, 30), window=9, stride=1)
    model.prime(frames, {t: boxes[t] for t in (0, 1, 2, 3, 4, 6, 7)})
    # every frame votes, the known people left out: where they stood, frame 5 (not known)
    # against the free pixels of 7 and 8 (and of 6 beside them): the plate is clean
    np.testing.assert_array_equal(model.plate(), np.full((30, 40, 3), BACKGROUND, np.uint8))
    fewer = BackgroundModel((40, 30), window=9, stride=1)
    fewer.prime(frames, {0: boxes[0]})  # one known: 1-5 still outvote 6-8
    assert fewer.plate()[15, 12, 0] == PERSON
    model.update(*_scene(9, stands_until=6))  # a new frame: the plate is computed again
    assert model.plate().shape == (30, 40, 3)
