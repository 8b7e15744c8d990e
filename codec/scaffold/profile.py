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
    """

    tiles: int
    tile_overlap: float = TILE_OVERLAP
    person_height: float = float("nan")
    people: int = 0
    frames: tuple[int, ...] = ()
    confirmed: bool = False

    def window_height(self) -> float:
        """The median person's height in one window, fraction of the window (NaN: none)."""
        return self.person_height / window_fraction(self.tiles, self.tile_overlap)

    def describe(self) -> str:
        """One line for logs and reports."""
        layout = "whole frame" if self.tiles == 1 else f"{self.tiles}x{self.tiles} tiles"
        if not self.people:
            return (f"{layout} (nobody seen on {len(self.frames)} start-up frames: the "
                    "default)")  # fmt: skip
        how = "confirmed by both views" if self.confirmed else "unconfirmed"
        return (f"{layout}: people {self.person_height:.3f} of the frame tall (median of "
                f"{self.people} boxes, {how}, on {len(self.frames)} start-up frames), "
                f"{self.window_height():.2f} of a window")  # fmt: skip

    def to_settings(self) -> dict[str, str]:
        """Stream-header entries (``profile_*``; the layout itself goes in the codec's own
        settings)."""
        height = "nan" if not np.isfinite(self.person_height) else f"{self.person_height:.4f}"
        return {"profile_person_height": height, "profile_people": str(self.people),
                "profile_frames": frames_text(self.frames),
                "profile_confirmed": str(self.confirmed)}  # fmt: skip


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
                   candidates: Sequence[int] = CANDIDATE_TILES) -> CameraProfile:  # fmt: skip
    """The camera's window layout, from its own start-up frames (see the module docstring).

    Args:
        frames: (H, W, 3) uint8 RGB frames of one camera (e.g. its first seconds); at most
            :data:`PROFILE_FRAMES` of them, spread evenly, are run.
        detector: any :class:`PersonDetector` (its session is shared; its config is not used).
        min_score: a detection counts as a person from this score.
        confirm_score: the other view confirms a box with a detection from this score.
        candidates: tiles per axis to choose among.

    Returns:
        The chosen :class:`CameraProfile`.
    """
    indices = profile_frame_indices(len(frames))
    low = min(min_score, confirm_score)
    whole = detector.with_config(DetectorConfig(score_threshold=low, tiles=1))
    tiled = detector.with_config(DetectorConfig(score_threshold=low, tiles=2,
                                                tile_overlap=TILE_OVERLAP,
                                                include_full_frame=False))  # fmt: skip
    confirmed, confident = [], []
    for i in indices:
        frame = frames[i]
        a, b = whole.detect(frame), tiled.detect(frame)
        height = frame.shape[0]
        for mine, other in ((a, b), (b, a)):
            strong = mine.above(min_score).boxes
            confident += list((strong[:, 3] - strong[:, 1]) / height)
            if len(strong) and len(other):
                hit = box_iou(strong, other.above(confirm_score).boxes).max(axis=1) >= CONFIRM_IOU
                confirmed += list((strong[hit, 3] - strong[hit, 1]) / height)
    heights = confirmed or confident
    base = CameraProfile(tiles=DEFAULT_TILES, frames=tuple(indices))
    if not heights:
        return base
    median = float(np.median(heights))

    def distance(tiles: int) -> float:
        return abs(np.log(median / window_fraction(tiles) / PREFERRED_HEIGHT))

    tiles = min(sorted(candidates), key=distance)
    return dataclasses.replace(base, tiles=int(tiles), person_height=median,
                               people=len(heights), confirmed=bool(confirmed))  # fmt: skip
