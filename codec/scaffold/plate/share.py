"""How much of the budget the plate takes, against the people.

The first window's budget (the clip's, when shorter) is split between the plate, sent once,
and the people, whose pixels are sent again at every reference refresh, in proportion to
the pixels each sends (:func:`cold_start_plate_share`) -- the allocation that equalises the
marginal return of a byte when every pixel costs alike (bits in proportion to what they
describe). A fixed tenth of a short clip before left the demo's plate 292 bytes of 3,552 and
the whole frame worse than x265's at equal bits; the share is held to at most
:data:`FIRST_PLATE_MAX_SHARE` so that people keep half of the first window.
"""

from __future__ import annotations

import numpy as np

#: Most of the first window's (or a shorter clip's) budget the first plate may take: the
#: rest is the people's (references, boxes, framing). Measured on the embedded sample at
#: 0.004 BPP: 0.5 gives the whole frame ST-LPIPS 0.246 at 0.0044 BPP (x265's static-camera
#: anchor 0.284 at 0.0042); 0.7 overshoots the target by a third, as references of people
#: who have none are sent whatever the account holds.
FIRST_PLATE_MAX_SHARE = 0.5
#: Width of a person's box as a fraction of its height (a pedestrian's; the area the
#: profile's person height stands for).
PERSON_ASPECT = 0.4


def cold_start_plate_share(person_area: float, sends: float,
                           ceiling: float = FIRST_PLATE_MAX_SHARE) -> float:  # fmt: skip
    """The share of the first window's budget the first plate takes.

    Args:
        person_area: fraction of the frame's pixels people cover (0..1), from the camera's
            profile (:func:`person_area_fraction`).
        sends: how many times each person's pixels are sent in that window (the first
            reference and each refresh, >= 1).
        ceiling: the most the plate may take.

    Returns:
        ``(1 - a) / ((1 - a) + a * sends)`` for ``a = person_area``, at most ``ceiling``:
        bits split in proportion to the pixels each part sends.
    """
    a = min(max(float(person_area), 0.0), 1.0)
    plate = 1.0 - a
    if plate + a * max(sends, 1.0) <= 0:
        return 0.0
    return min(ceiling, plate / (plate + a * max(sends, 1.0)))


def person_area_fraction(person_height: float, people_per_frame: float,
                         frame_size: tuple[int, int]) -> float:  # fmt: skip
    """Fraction of a ``(width, height)`` frame that ``people_per_frame`` people of median
    height ``person_height`` (a fraction of the frame's height; NaN: none seen) cover, with
    boxes :data:`PERSON_ASPECT` as wide as tall (at most 1)."""
    if not np.isfinite(person_height) or people_per_frame <= 0:
        return 0.0
    width, height = frame_size
    box = PERSON_ASPECT * (person_height * height) ** 2
    return min(1.0, people_per_frame * box / (width * height))
