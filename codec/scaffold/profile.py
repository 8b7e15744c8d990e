"""A camera's profile, chosen by the edge from the camera's own frames: no ground truth, no flag.

The person detector (SSDLite-MobileNetV2, 300x300 input) finds people best when they are
about a third of its input tall; much smaller ones are missed, and much larger ones are seen
in pieces when a frame is cut into tiles. So the window layout that suits a camera depends on
how tall its people are *in pixels of the frame*: a far camera with small pedestrians needs
tiles (each window is seen at a higher resolution), a near camera with large people needs the
whole frame as one window.

:func:`choose_profile` measures that from a few start-up frames:

1. Two views of each frame: the whole frame (one window) and a 2x2 grid of tiles.
2. People are the detections (score >= ``min_score``) of either view that the *other* view
   confirms (a box with IoU >= 0.5 there, at a lower score): a head or a torso a tile sees
   inside a large person has no whole-frame counterpart and is left out; a small person
   both views see counts. When no detection is confirmed, every confident detection counts.
3. The median person height ``h`` (fraction of the frame's height) gives, for each candidate
   layout of ``n`` x ``n`` tiles, the height of a person in one window,
   ``h / window_fraction(n)``; the layout whose value is nearest (in ratio)
   :data:`PREFERRED_HEIGHT` wins, fewer windows on a tie. No person seen: 2x2 tiles (people
   too small for the whole frame are the likely reason).
4. Detect mode only (``by_agreement``; level 1 keeps the height rule's choice): the two
   layouts nearest by step 3 are compared on the same frames by the detector's own boxes
   at detect mode's operating score: the people either confirms that only one finds decide,
   by a sign test (:func:`choose_by_agreement`), and the height rule's layout is kept unless
   the other finds significantly more. The profile's line says what each found and why.

:data:`PREFERRED_HEIGHT` is a property of the detector (its input size and anchor scales),
not of a camera; it is the one constant of the choice. Checked with ground truth (never by
the code; the uncompressed detector's MODA per layout, ``detector.json`` of
``semcodec-bench task``): PETS09-S2L1 501-795 (people 0.185 of the frame: 2x2 chosen, the
best layout), TUD-Stadtmitte 91-179 (0.32: one window, as good as 2x2 at a quarter of the
windows) and PETS 501-795 zoomed 2x (0.278: one window, MODA 0.66 against 0.70 for 2x2:
there the choice sits near the boundary, at 0.25, and costs 4 points for a quarter of the
windows).

The profile is recorded in the stream header (the level's settings, or a detect-mode
stream's layout), so a reader sees what the edge chose and on which frames.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from semcodec.codec.scaffold.detector import DetectorConfig, PersonDetector, box_iou

#: The person height, as a fraction of a detector window's height, the detector sees best.
PREFERRED_HEIGHT = 1 / 3
#: Layouts tried (tiles per axis); 1 is the whole frame.
CANDIDATE_TILES = (1, 2)
#: Overlap of neighbouring tiles, fraction of a tile (the detector's default).
TILE_OVERLAP = 0.25
#: Most frames the chooser runs the detector on (spread over those it is given).
PROFILE_FRAMES = 8
#: Seconds of start-up video the chooser looks at (its frames are read ahead).
PROFILE_SECONDS = 4.0
#: Tiles used when no person is seen on the start-up frames.
DEFAULT_TILES = 2
#: Score at which one view's box is a person, and at which the other view confirms it.
PERSON_SCORE, CONFIRM_SCORE = 0.5, 0.3
#: IoU at which the other view's box confirms a person.
CONFIRM_IOU = 0.5
#: Choosing by agreement (detect mode): the other of the two nearest layouts wins when the
#: people only it finds (``b``) outnumber those only the height rule's layout finds (``c``)
#: by a sign test at this many standard deviations, ``b - c >= SIGN_Z * sqrt(b + c)``.
SIGN_Z = 2.0


def window_fraction(tiles: int, overlap: float = TILE_OVERLAP) -> float:
    """Height of one window of an ``tiles`` x ``tiles`` layout, fraction of the frame's."""
    return 1.0 / (tiles - (tiles - 1) * overlap)


@dataclass(frozen=True)
class CameraProfile:
    """What the edge chose for one camera, and why.

    Attributes:
        tiles: detector windows per axis (1: the whole frame; 2: 2x2 overlapping tiles).
        tile_overlap: overlap of neighbouring tiles, fraction of a tile.
        person_height: median height of the people seen, fraction of the frame height
            (NaN when nobody was seen).
        people: how many person boxes the choice rests on.
        frames: the 0-based indices (among the frames given) the detector ran on.
        confirmed: whether the boxes were confirmed by both views (else: all confident ones).
        height_tiles: the height rule's layout when the choice was made by agreement
            (:func:`choose_profile` with ``by_agreement``; 0: by the height rule alone).
        union: with ``height_tiles``, the people the two nearest layouts confirm.
        found: with ``height_tiles``, ``(tiles, people of union found)`` of both layouts.
        samples: ``(frame index, (4,) float box)`` of the people the profile rests on, one
            box per person and frame (the start-up frames' people, for what the edge
            estimates of their cost: :mod:`codec.scaffold.plate.share`; not in the header).
    """

    tiles: int
    tile_overlap: float = TILE_OVERLAP
    person_height: float = float("nan")
    people: int = 0
    frames: tuple[int, ...] = ()
    confirmed: bool = False
    height_tiles: int = 0
    union: int = 0
    found: tuple[tuple[int, int], ...] = ()
    samples: tuple = dataclasses.field(default=(), compare=False, repr=False)

    @property
    def people_per_frame(self) -> float:
        """People a start-up frame holds: the distinct people of :attr:`samples`, else half
        of :attr:`people` (each person is a box of both views)."""
        if not self.frames:
            return 0.0
        if self.samples:
            return len(self.samples) / len(self.frames)
        return self.people / 2 / len(self.frames)

    def window_height(self) -> float:
        """The median person's height in one window, fraction of the window (NaN: none)."""
        return self.person_height / window_fraction(self.tiles, self.tile_overlap)

    def describe(self) -> str:
        """One line for logs and reports."""
        layout = _layout_name(self.tiles)
        if not self.people:
            return (f"{layout} (nobody seen on {len(self.frames)} start-up frames: the "
                    "default)")  # fmt: skip
        how = "confirmed by both views" if self.confirmed else "unconfirmed"
        return (f"{layout}: people {self.person_height:.3f} of the frame tall (median of "
                f"{self.people} boxes, {how}, on {len(self.frames)} start-up frames), "
                f"{self.window_height():.2f} of a window{self._agreement_text()}")  # fmt: skip

    def _agreement_text(self) -> str:
        if not self.height_tiles:
            return ""
        found = ", ".join(f"{_layout_name(t)} {n}" for t, n in self.found)
        why = ("as the height rule" if self.tiles == self.height_tiles else
               f"over the height rule's {_layout_name(self.height_tiles)}, by a sign test")
        return (f"; by agreement: of {self.union} people the two nearest layouts confirm, "
                f"found by {found}: {why}")  # fmt: skip

    def to_settings(self) -> dict[str, str]:
        """Stream-header entries (``profile_*``; the layout itself goes in the codec's own
        settings)."""
        height = "nan" if not np.isfinite(self.person_height) else f"{self.person_height:.4f}"
        entries = {"profile_person_height": height, "profile_people": str(self.people),
                   "profile_frames": frames_text(self.frames),
                   "profile_confirmed": str(self.confirmed)}  # fmt: skip
        if self.height_tiles:
            entries["profile_height_tiles"] = str(self.height_tiles)
            entries["profile_found"] = " ".join(f"{t}:{n}/{self.union}" for t, n in self.found)
        return entries


def _layout_name(tiles: int) -> str:
    return "whole frame" if tiles == 1 else f"{tiles}x{tiles} tiles"


def frames_text(frames: Sequence[int]) -> str:
    """``frames`` as a header writes them: ``"A-B/K"`` when they are the ``K`` frames
    :func:`profile_frame_indices` spreads over ``A..B`` (``A`` = 0), else the indices
    separated by spaces."""
    frames = list(frames)
    if frames and frames[0] == 0 and frames == profile_frame_indices(frames[-1] + 1,
                                                                     len(frames)):
        return f"0-{frames[-1]}/{len(frames)}"
    return " ".join(map(str, frames))


def profile_frame_indices(count: int, limit: int = PROFILE_FRAMES) -> list[int]:
    """At most ``limit`` indices spread evenly over ``range(count)``, first and last included."""
    if count <= 0:
        return []
    return sorted({int(round(i)) for i in np.linspace(0, count - 1, min(limit, count))})


def choose_profile(frames: Sequence[np.ndarray], detector: PersonDetector,
                   min_score: float = PERSON_SCORE, confirm_score: float = CONFIRM_SCORE,
                   candidates: Sequence[int] = CANDIDATE_TILES,
                   by_agreement: bool = False,
                   agreement_score: float = PERSON_SCORE) -> CameraProfile:  # fmt: skip
    """The camera's window layout, from its own start-up frames (see the module docstring).

    Args:
        frames: (H, W, 3) uint8 RGB frames of one camera (e.g. its first seconds); at most
            :data:`PROFILE_FRAMES` of them, spread evenly, are run.
        detector: any :class:`PersonDetector` (its session is shared; its config is not used).
        min_score: a detection counts as a person from this score.
        confirm_score: the other view confirms a box with a detection from this score.
        candidates: tiles per axis to choose among.
        by_agreement: choose between the two layouts nearest by the height rule by which
            finds more of the people both confirm (:func:`choose_by_agreement`; detect mode);
            False: the height rule alone (level 1).
        agreement_score: with ``by_agreement``, the score from which a layout's box finds a
            person (the operating point of the detector the layout is chosen for).

    Returns:
        The chosen :class:`CameraProfile`.
    """
    indices = profile_frame_indices(len(frames))
    low = min(min_score, confirm_score, *((agreement_score,) if by_agreement else ()))
    views: dict[int, list] = {}

    def seen(tiles: int) -> list:
        """The detections (score >= ``low``) of the ``tiles`` layout on each profile frame."""
        if tiles not in views:
            config = DetectorConfig(score_threshold=low, tiles=tiles, tile_overlap=TILE_OVERLAP,
                                    include_full_frame=False)  # fmt: skip
            view = detector.with_config(config)
            views[tiles] = [view.detect(frames[i]) for i in indices]
        return views[tiles]

    confirmed, confident, samples = [], [], []
    for k, i in enumerate(indices):
        a, b = seen(1)[k], seen(2)[k]
        height = frames[i].shape[0]
        for mine, other in ((a, b), (b, a)):
            strong = mine.above(min_score).boxes
            confident += list((strong[:, 3] - strong[:, 1]) / height)
            if len(strong) and len(other):
                hit = box_iou(strong, other.above(confirm_score).boxes).max(axis=1) >= CONFIRM_IOU
                confirmed += list((strong[hit, 3] - strong[hit, 1]) / height)
                samples += _new_people(i, strong[hit], samples)
    heights = confirmed or confident
    base = CameraProfile(tiles=DEFAULT_TILES, frames=tuple(indices), samples=tuple(samples))
    if not heights:
        return base
    median = float(np.median(heights))

    def distance(tiles: int) -> float:
        return abs(np.log(median / window_fraction(tiles) / PREFERRED_HEIGHT))

    nearest = sorted(sorted(candidates), key=distance)
    chosen = dataclasses.replace(base, tiles=int(nearest[0]), person_height=median,
                                 people=len(heights), confirmed=bool(confirmed))  # fmt: skip
    if not by_agreement or len(nearest) < 2:
        return chosen
    first, second = int(nearest[0]), int(nearest[1])
    tiles, union, found = choose_by_agreement(first, seen(first), second, seen(second),
                                              agreement_score, confirm_score)  # fmt: skip
    return dataclasses.replace(chosen, tiles=tiles, height_tiles=first, union=union,
                               found=((first, found[0]), (second, found[1])))  # fmt: skip


def _new_people(index: int, boxes: np.ndarray, samples: list) -> list:
    """``(index, box)`` for each of ``boxes`` (frame ``index``'s) that no box of ``samples``
    on that frame already covers (IoU >= :data:`CONFIRM_IOU`: the other view's box of the
    same person)."""
    out: list = []
    for box in np.asarray(boxes, np.float64):
        held = [b for j, b in (*samples, *out) if j == index]
        if not held or box_iou(box[None], np.array(held)).max() < CONFIRM_IOU:
            out.append((index, box))
    return out


def choose_by_agreement(first: int, first_seen: Sequence, second: int, second_seen: Sequence,
                        find_score: float = PERSON_SCORE, confirm_score: float = CONFIRM_SCORE,
                        ) -> tuple[int, int, tuple[int, int]]:  # fmt: skip
    """Which of two layouts finds more of the camera's people, without ground truth.

    The people are the union, over the frames, of either layout's confident boxes (score >=
    ``find_score``) that the other confirms (a box at >= ``confirm_score`` with IoU >=
    :data:`CONFIRM_IOU`), a box both layouts hold counted once. A layout finds a person when
    one of its confident boxes overlaps it at IoU >= :data:`CONFIRM_IOU`. ``first`` (the
    height rule's choice, the prior) is kept unless the people only ``second`` finds, ``b``,
    outnumber those only ``first`` finds, ``c``, by a sign test:
    ``b - c >= SIGN_Z * sqrt(b + c)``.

    Args:
        first, second: the two layouts (tiles per axis), the height rule's choice first.
        first_seen, second_seen: per frame, each layout's :class:`Detections` (any score
            >= ``confirm_score``), the same frames in the same order.
        find_score: a layout's box from this score finds a person.
        confirm_score: the other layout's box from this score confirms one.

    Returns:
        ``(tiles chosen, people in the union, (people first finds, people second finds))``.

    Raises:
        ValueError: the two lists cover different numbers of frames.
    """
    if len(first_seen) != len(second_seen):
        raise ValueError(f"{len(first_seen)} and {len(second_seen)} frames: need the same")
    union = found_first = found_second = only_first = only_second = 0
    for a, b in zip(first_seen, second_seen, strict=True):
        strong_a, strong_b = a.above(find_score).boxes, b.above(find_score).boxes
        people = [box for strong, other in ((strong_a, b), (strong_b, a))
                  for box in _confirmed(strong, other.above(confirm_score).boxes)]  # fmt: skip
        kept: list[np.ndarray] = []
        for box in people:  # a box both layouts hold is one person
            if not kept or box_iou(box[None], np.array(kept)).max() < CONFIRM_IOU:
                kept.append(box)
        for box in kept:
            in_a = bool(len(strong_a)) and box_iou(box[None], strong_a).max() >= CONFIRM_IOU
            in_b = bool(len(strong_b)) and box_iou(box[None], strong_b).max() >= CONFIRM_IOU
            found_first, found_second = found_first + in_a, found_second + in_b
            only_first += in_a and not in_b
            only_second += in_b and not in_a
        union += len(kept)
    b, c = only_second, only_first
    tiles = second if b > c and b - c >= SIGN_Z * np.sqrt(b + c) else first
    return tiles, union, (found_first, found_second)


def _confirmed(strong: np.ndarray, other: np.ndarray) -> list[np.ndarray]:
    """The boxes of ``strong`` that a box of ``other`` overlaps at IoU >= :data:`CONFIRM_IOU`."""
    if not len(strong) or not len(other):
        return []
    hit = box_iou(strong, other).max(axis=1) >= CONFIRM_IOU
    return list(np.asarray(strong, np.float64)[hit])
