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

from collections.abc import Sequence
from dataclasses import dataclass

import cv2
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


# ----------------------------------------------------------------------------- the split

#: The share of a viewer's attention the people get, by the stream's priority
#: (``LevelConfig.priority``), where the split is chosen by error per byte: the weight of the
#: people's squared error in the distortion it minimises, the plate's being the rest.
#: ``people``: half, whatever their area (a viewer of a camera that watches people watches
#: them; at least their area); ``scene``: a quarter of their area. ``balanced`` (the default)
#: is not an error-per-byte choice: the plate takes the pixels' share
#: (:func:`cold_start_plate_share`) and the references the level's quality.
PRIORITY_ATTENTION = {"people": 0.5, "scene": 0.25}


def people_attention(priority: str, person_area: float) -> float:
    """The people's share (0..1) of the split's distortion for ``priority`` (``people`` or
    ``scene``), people covering ``person_area`` of the frame (:data:`PRIORITY_ATTENTION`)."""
    a = min(max(float(person_area), 0.0), 1.0)
    if priority == "people":
        return max(PRIORITY_ATTENTION["people"], a)
    return PRIORITY_ATTENTION[priority] * a


#: WebP qualities the split chooses the references' among.
REFERENCE_QUALITIES = (10, 20, 30, 45, 60, 75, 90)
#: Shares of the first window the split chooses the first plate's among.
PLATE_SHARES = (0.03, 0.05, 0.08, 0.12, 0.17, 0.25, 0.35, 0.5)
#: Most sampled people whose references are coded to estimate the references' cost.
MAX_SAMPLES = 12
#: Bytes the split sets aside per person and frame for the box stream, and per frame for a
#: unit's framing (a coder's cost, not a camera's: about what both took on PETS and TUD).
BOX_BYTES_PER_PERSON = 3.0
UNIT_FRAMING_BYTES = 2.0


@dataclass(frozen=True)
class Split:
    """The first window's budget split between the plate and the people.

    Attributes:
        plate_share: the first plate's share of the first window's budget.
        quality: the references' WebP quality.
        plate_bytes, reference_bytes: what the plate and one reference are expected to take.
        plate_error, reference_error: their mean squared errors (8-bit RGB levels^2).
    """

    plate_share: float
    quality: int
    plate_bytes: int = 0
    reference_bytes: float = 0.0
    plate_error: float = float("nan")
    reference_error: float = float("nan")

    def describe(self, priority: str, references: float) -> str:
        """The profile line's words for it."""
        return (f"priority {priority}: first plate {self.plate_share:.2f} of the first window "
                f"({self.plate_bytes} B, error {self.plate_error:.0f}), references at WebP "
                f"quality {self.quality} (~{self.reference_bytes:.0f} B each, error "
                f"{self.reference_error:.0f}, {references:.3g} of them)")  # fmt: skip


def reference_points(frames: Sequence[np.ndarray], samples: Sequence,
                     qualities: Sequence[int] = REFERENCE_QUALITIES,
                     ) -> list[tuple[int, float, float]]:  # fmt: skip
    """What a reference costs at each WebP quality, on sampled people.

    Args:
        frames: ``(H, W, 3)`` uint8 RGB start-up frames.
        samples: ``(frame index, (4,) box)`` people on them (at most :data:`MAX_SAMPLES`
            are used, spread evenly).
        qualities: the qualities to try.

    Returns:
        ``(quality, mean bytes, mean squared error)`` per quality: the reference as the
        selector codes it (:func:`~codec.scaffold.appearance.ref_size`), decoded and drawn
        back at the box's size on the frame, against the frame's pixels there.
    """
    from semcodec.codec.scaffold.appearance import (
        crop_box,
        decode_ref,
        encode_ref,
        ref_region,
        ref_size,
    )

    step = max(1, -(-len(samples) // MAX_SAMPLES))
    people = []
    for index, box in list(samples)[::step]:
        region = ref_region(box)
        shown = (max(2, round(region[2] - region[0])), max(2, round(region[3] - region[1])))
        truth = crop_box(frames[index], region, shown).astype(np.float32)
        people.append((crop_box(frames[index], region, ref_size(region)), shown, truth))
    points = []
    for quality in qualities:
        sizes, errors = [], []
        for picture, shown, truth in people:
            data = encode_ref(picture, quality)
            drawn = cv2.resize(decode_ref(data), shown, interpolation=cv2.INTER_LINEAR)
            sizes.append(len(data))
            errors.append(float(np.mean((drawn.astype(np.float32) - truth) ** 2)))
        points.append((int(quality), float(np.mean(sizes)), float(np.mean(errors))))
    return points


def choose_split(plate_points: Sequence[tuple[float, int, float]],
                 reference_points: Sequence[tuple[int, float, float]], attention: float,
                 references: float, budget: float) -> Split:  # fmt: skip
    """The split that minimises the first window's weighted distortion within its budget.

    The distortion is ``(1 - w) * D_plate + w * D_ref`` (mean squared errors over the
    plate's and the people's pixels, ``w = attention``), under
    ``plate bytes + references * reference bytes <= budget``: the choice a rate-distortion
    optimiser makes from each part's own distortion per byte, with the people weighed by
    the viewer's attention (:func:`people_attention`).

    Args:
        plate_points: ``(share, bytes, error)`` of the first plate coded within each share
            of the window.
        reference_points: ``(quality, bytes, error)`` of a reference
            (:func:`reference_points`).
        attention: the people's share (0..1) of the distortion.
        references: how many references the first window sends (people x sends).
        budget: the first window's bytes for the plate and the references.

    Returns:
        The best :class:`Split`; when nothing fits, the smallest plate and quality.
    """
    w = min(max(float(attention), 0.0), 1.0)
    best, best_cost = None, np.inf
    for share, plate_bytes, plate_error in plate_points:
        for quality, ref_bytes, ref_error in reference_points:
            if plate_bytes + references * ref_bytes > budget:
                continue
            cost = (1 - w) * plate_error + w * ref_error
            if cost < best_cost:
                best_cost = cost
                best = Split(share, quality, plate_bytes, ref_bytes, plate_error, ref_error)
    if best is None:
        share, plate_bytes, plate_error = min(plate_points)
        quality, ref_bytes, ref_error = min(reference_points)
        best = Split(share, quality, plate_bytes, ref_bytes, plate_error, ref_error)
    return best
