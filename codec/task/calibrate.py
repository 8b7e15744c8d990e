"""Per-camera set-up of a detect-mode stream, chosen by the edge on its start-up frames.

Two choices depend on the camera and are made here, without ground truth:

1. **The windows.** :func:`choose_layout`: :func:`codec.scaffold.profile.choose_profile`
   picks the layout (one window for large people, 2x2 tiles for small ones) from the full
   detector's boxes, and between the two nearest layouts keeps the height rule's unless the
   other finds significantly more of the people at :data:`REFERENCE_THRESHOLD` (its
   ``by_agreement``; the profile's line says what each found).
2. **The reference operating point.** :func:`reference_threshold`: the uncompressed split
   detector's best threshold differs per camera (on the sweep's cameras 0.2 for zoomed PETS in
   one window, 0.3 for PETS in 2x2 tiles, 0.5 for TUD), so it is chosen on the consecutive
   start-up frames by persistence (:func:`persistent_threshold`): the detector's boxes are
   linked frame to frame into tracks; a track that lasts :data:`PERSIST_SECONDS` and reaches
   :data:`REFERENCE_THRESHOLD` once is a person (hysteresis, as a tracker confirms a track),
   any other box a false alarm; the threshold with the fewest errors against those people is
   the reference. It costs the cloud half on every start-up frame, once.
3. **The cloud's score threshold.** Decoded features score lower than the real ones, by an
   amount that depends on the bottleneck *and* on the scene, so no fixed threshold suits
   every camera. The edge holds both: on the start-up frames it counts the people the
   uncompressed split detector finds at the reference threshold and picks the threshold
   at which the detector on the *decoded* features finds as many. The choice costs the edge
   two runs of the cloud half on a few frames, once.

Both go into the stream header (``tiles``, ``tile_overlap``, ``full_frame``,
``score_threshold`` and the ``profile_*`` entries), so the cloud decodes with them and a
reader sees what was chosen on which frames.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import torch

from semcodec.codec.scaffold.detector import PersonDetector, box_iou
from semcodec.codec.scaffold.profile import (
    PROFILE_SECONDS,
    CameraProfile,
    choose_profile,
    profile_frame_indices,
)
from semcodec.codec.task.bottleneck import TaskBottleneck
from semcodec.codec.task.split import SplitConfig, SplitDetector

#: The uncompressed detector's operating point whose person count the cloud's threshold
#: matches (a property of the detector, like the profile's preferred person height).
REFERENCE_THRESHOLD = 0.4
#: How long a track of the detector's boxes must last to be a person, not a false alarm (a
#: flicker): half a second, a step of a walking person, whatever the frame rate.
PERSIST_SECONDS = 0.5
#: The overlap at which a box continues the previous frame's (the matching IoU of MODA).
PERSIST_IOU = 0.5
#: Thresholds the cloud's is chosen among.
CANDIDATE_THRESHOLDS = tuple(round(0.05 + 0.01 * i, 2) for i in range(86))  # 0.05 .. 0.90


@dataclass(frozen=True)
class DetectProfile:
    """What the edge chose for a detect-mode stream.

    Attributes:
        camera: the window layout and the people it rests on.
        score_threshold: the cloud's score threshold on decoded features.
        reference_count: people per start-up frame of the uncompressed detector at
            :data:`REFERENCE_THRESHOLD`.
        matched_count: people per start-up frame on decoded features at ``score_threshold``.
        reference_threshold: the uncompressed detector's operating point whose count the
            cloud's threshold matches (:func:`reference_threshold`).
    """

    camera: CameraProfile
    score_threshold: float
    reference_count: float = 0.0
    matched_count: float = 0.0
    reference_threshold: float = REFERENCE_THRESHOLD

    def split(self, base: SplitConfig) -> SplitConfig:
        """``base`` (the bottleneck's cut) with this camera's windows and threshold."""
        return dataclasses.replace(base, tiles=self.camera.tiles,
                                   tile_overlap=self.camera.tile_overlap,
                                   include_full_frame=False,
                                   score_threshold=self.score_threshold)  # fmt: skip

    def describe(self) -> str:
        return (f"{self.camera.describe()}; cloud threshold {self.score_threshold:.2f} "
                f"({self.matched_count:.2f} people per start-up frame on decoded features, "
                f"{self.reference_count:.2f} uncompressed at {self.reference_threshold:.2f}, "
                "chosen by persistence)")

    def to_settings(self) -> dict[str, str]:
        """Header entries of the profile (the layout itself: :func:`layout_settings`)."""
        return {**self.camera.to_settings(),
                "profile_reference_count": f"{self.reference_count:.3f}",
                "profile_matched_count": f"{self.matched_count:.3f}",
                "profile_reference_threshold": f"{self.reference_threshold:g}"}  # fmt: skip


def layout_settings(split: SplitConfig) -> dict[str, str]:
    """The header entries that name a stream's windows and the cloud's threshold."""
    return {"tiles": str(split.tiles), "tile_overlap": f"{split.tile_overlap:g}",
            "full_frame": str(bool(split.include_full_frame)),
            "score_threshold": f"{split.score_threshold:g}"}  # fmt: skip


def split_from_settings(settings: dict[str, str], base: SplitConfig) -> SplitConfig:
    """The split config a header declares (``base``'s where the header predates layouts).

    Raises:
        ValueError: a layout entry that is not a number or out of range.
    """
    if "tiles" not in settings:
        return base
    tiles = int(settings["tiles"])
    overlap = float(settings.get("tile_overlap", base.tile_overlap))
    threshold = float(settings.get("score_threshold", base.score_threshold))
    full = settings.get("full_frame", "False") == "True"
    if not (1 <= tiles <= 4 and 0.0 <= overlap < 1.0 and 0.0 <= threshold <= 1.0):
        raise ValueError(f"layout tiles={tiles}, tile_overlap={overlap}, "
                         f"score_threshold={threshold} is out of range")  # fmt: skip
    return dataclasses.replace(base, tiles=tiles, tile_overlap=overlap,
                               include_full_frame=full, score_threshold=threshold)  # fmt: skip


def choose_layout(frames: Sequence[np.ndarray], person_detector: PersonDetector) -> CameraProfile:
    """Detect mode's windows on start-up ``frames`` (module docstring, step 1): the height
    rule, then the agreement of the two nearest layouts at :data:`REFERENCE_THRESHOLD`."""
    return choose_profile(frames, person_detector, by_agreement=True,
                          agreement_score=REFERENCE_THRESHOLD)  # fmt: skip


def reference_threshold(frames: Sequence[np.ndarray], model, camera: CameraProfile,
                        base: SplitConfig) -> float:  # fmt: skip
    """The uncompressed split detector's operating point on this camera (module docstring,
    step 2): :func:`persistent_threshold` of its boxes on the consecutive start-up ``frames``
    (the first :data:`~codec.scaffold.profile.PROFILE_SECONDS`) in ``camera``'s windows.

    Args:
        frames: (H, W, 3) uint8 RGB start-up frames, consecutive.
        model: the split detector's network.
        camera: the camera's windows.
        base: the bottleneck's cut (:attr:`TaskBottleneck.split`).
    """
    if len(frames) < 2:
        return REFERENCE_THRESHOLD
    split = dataclasses.replace(DetectProfile(camera, 0.0).split(base), score_threshold=0.0)
    detector = SplitDetector(model, split)
    height, width = frames[0].shape[:2]
    found = [detector.cloud_detect(detector.edge_features(f), height, width) for f in frames]
    return reference_threshold_of([d.boxes for d in found], [d.scores for d in found])


def reference_threshold_of(boxes: Sequence[np.ndarray], scores: Sequence[np.ndarray]) -> float:
    """:func:`persistent_threshold` of the boxes of the consecutive start-up frames, tracks
    of :data:`PERSIST_SECONDS` confirmed at :data:`REFERENCE_THRESHOLD`."""
    persist = max(2, round(len(boxes) * PERSIST_SECONDS / PROFILE_SECONDS))
    return persistent_threshold(boxes, scores, persist, confirm_score=REFERENCE_THRESHOLD)[0]


def profile_detect(frames: Sequence[np.ndarray], bottleneck: TaskBottleneck,
                   model, person_detector: PersonDetector,
                   camera: CameraProfile | None = None,
                   reference: float | None = None) -> DetectProfile:  # fmt: skip
    """Chooses the windows and the cloud's threshold on start-up frames (module docstring).

    Args:
        frames: (H, W, 3) uint8 RGB start-up frames of the camera.
        bottleneck: the stream's bottleneck.
        model: the split detector's network (:func:`codec.task.split.load_split_model`).
        person_detector: the full detector (its session is shared, its config unused).
        camera: the camera's profile when already chosen on these frames (it does not
            depend on the bottleneck: a benchmark of several bottlenecks chooses it once).
        reference: the reference operating point when already chosen on these frames
            (:func:`reference_threshold`; it does not depend on the bottleneck either).
    """
    camera = camera or choose_layout(frames, person_detector)
    if reference is None:
        reference = reference_threshold(frames, model, camera, bottleneck.split)
    base = DetectProfile(camera, reference, reference_threshold=reference)
    split = dataclasses.replace(base.split(bottleneck.split), score_threshold=0.0)
    detector = SplitDetector(model, split)
    reference_scores, decoded = [], []
    for i in profile_frame_indices(len(frames)):
        frame = frames[i]
        height, width = frame.shape[:2]
        features = detector.edge_features(frame)
        with torch.inference_mode():
            q = bottleneck.model.quantize(features)
            rebuilt = bottleneck.model.reconstruct(q)
        reference_scores.append(detector.cloud_detect(features, height, width).scores)
        decoded.append(detector.cloud_detect(rebuilt, height, width).scores)
    if not reference_scores:
        return base
    threshold, target, matched = match_threshold(reference_scores, decoded, reference)
    return DetectProfile(camera, threshold, target, matched, reference)


def persistent_threshold(boxes: Sequence[np.ndarray], scores: Sequence[np.ndarray],
                         persist_frames: int, candidates: Sequence[float] = CANDIDATE_THRESHOLDS,
                         confirm_score: float = 0.0, iou: float = PERSIST_IOU,
                         ) -> tuple[float, float]:  # fmt: skip
    """A reference operating point chosen by persistence on consecutive frames.

    The boxes of each frame at or above the lowest candidate are linked to the next frame's
    (greedily by IoU, one to one, at IoU >= ``iou``) into tracks; a box of a track that
    spans at least ``persist_frames`` frames (and, with ``confirm_score``, holds a box at
    or above it) is a person, any other box a false alarm. The threshold is the candidate
    with the fewest errors (false alarms kept plus people dropped), i.e. the best MODA
    against the persistent people; ties go to the one nearest :data:`REFERENCE_THRESHOLD`.

    Args:
        boxes: per consecutive frame, ``(n, 4)`` boxes of the uncompressed split detector.
        scores: per the same frames, their ``(n,)`` scores.
        persist_frames: frames a track must span to be a person.
        candidates: thresholds to choose among.
        confirm_score: score a track must reach once to be a person (0: none).
        iou: the overlap that links a box to the next frame's.

    Returns:
        ``(threshold, persistent people per frame)``; :data:`REFERENCE_THRESHOLD` when no
        frame holds a person.
    """
    if len(boxes) != len(scores):
        raise ValueError(f"{len(boxes)} frames of boxes and {len(scores)} of scores")
    floor = min(candidates)
    kept = [(np.asarray(b, dtype=np.float64).reshape(-1, 4)[np.asarray(s) >= floor],
             np.asarray(s, dtype=np.float64)[np.asarray(s) >= floor])
            for b, s in zip(boxes, scores, strict=True)]  # fmt: skip
    track_of: list[np.ndarray] = []
    spans: list[int] = []
    best: list[float] = []
    for k, (frame_boxes, frame_scores) in enumerate(kept):
        ids = np.full(len(frame_boxes), -1, dtype=np.int64)
        if k and len(frame_boxes) and len(kept[k - 1][0]):
            overlap = box_iou(kept[k - 1][0], frame_boxes)
            while overlap.size and overlap.max() >= iou:
                a, b = np.unravel_index(int(np.argmax(overlap)), overlap.shape)
                ids[b] = track_of[k - 1][a]
                overlap[a, :] = -1.0
                overlap[:, b] = -1.0
        for b in range(len(frame_boxes)):
            if ids[b] < 0:
                ids[b] = len(spans)
                spans.append(0)
                best.append(0.0)
            spans[ids[b]] += 1
            best[ids[b]] = max(best[ids[b]], float(frame_scores[b]))
        track_of.append(ids)
    person = [np.array([spans[t] >= persist_frames and best[t] >= confirm_score for t in ids],
                       dtype=bool) for ids in track_of]  # fmt: skip
    people = sum(int(p.sum()) for p in person)
    if not people:
        return REFERENCE_THRESHOLD, 0.0

    def errors(threshold: float) -> int:
        return sum(int(np.sum((s >= threshold) & ~p) + np.sum((s < threshold) & p))
                   for (_, s), p in zip(kept, person, strict=True))  # fmt: skip

    chosen = min(candidates, key=lambda t: (errors(t), abs(t - REFERENCE_THRESHOLD)))
    return float(chosen), people / len(kept)


def match_threshold(reference: Sequence[np.ndarray], decoded: Sequence[np.ndarray],
                    reference_threshold: float = REFERENCE_THRESHOLD,
                    candidates: Sequence[float] = CANDIDATE_THRESHOLDS,
                    ) -> tuple[float, float, float]:  # fmt: skip
    """The cloud's threshold: the candidate at which the decoded features find, per frame on
    average, as many people as the uncompressed detector at ``reference_threshold``.

    Args:
        reference: per start-up frame, the ``(n,)`` float scores (0..1) of the uncompressed
            split detector's boxes after NMS.
        decoded: per the same frames, the scores of the detector on the decoded features.
        reference_threshold: the uncompressed detector's operating point.
        candidates: thresholds to choose among.

    Returns:
        ``(threshold, reference people per frame, decoded people per frame at threshold)``;
        among candidates whose counts are equally near, the one nearest
        ``reference_threshold``.
    """
    if len(reference) != len(decoded) or not reference:
        raise ValueError(f"{len(reference)} reference and {len(decoded)} decoded frames: "
                         "need the same, at least one")  # fmt: skip
    target = float(np.mean([np.sum(np.asarray(s) >= reference_threshold) for s in reference]))

    def count(threshold: float) -> float:
        return float(np.mean([np.sum(np.asarray(s) >= threshold) for s in decoded]))

    best = min(candidates, key=lambda t: (abs(count(t) - target), abs(t - reference_threshold)))
    return float(best), target, count(best)
