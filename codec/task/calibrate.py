"""Per-camera set-up of a detect-mode stream, chosen by the edge on its start-up frames.

Two choices depend on the camera and are made here, without ground truth:

1. **The windows.** :func:`choose_layout`: :func:`codec.scaffold.profile.choose_profile`
   picks the layout (one window for large people, 2x2 tiles for small ones) from the full
   detector's boxes, and between the two nearest layouts keeps the height rule's unless the
   other finds significantly more of the people at :data:`REFERENCE_THRESHOLD` (its
   ``by_agreement``; the profile's line says what each found).
2. **The cloud's score threshold.** Decoded features score lower than the real ones, by an
   amount that depends on the bottleneck *and* on the scene, so no fixed threshold suits
   every camera. The edge holds both: on the start-up frames it counts the people the
   uncompressed split detector finds at :data:`REFERENCE_THRESHOLD` and picks the threshold
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

from semcodec.codec.scaffold.detector import PersonDetector
from semcodec.codec.scaffold.profile import CameraProfile, choose_profile, profile_frame_indices
from semcodec.codec.task.bottleneck import TaskBottleneck
from semcodec.codec.task.split import SplitConfig, SplitDetector

#: The uncompressed detector's operating point whose person count the cloud's threshold
#: matches (a property of the detector, like the profile's preferred person height).
REFERENCE_THRESHOLD = 0.4
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
    """

    camera: CameraProfile
    score_threshold: float
    reference_count: float = 0.0
    matched_count: float = 0.0

    def split(self, base: SplitConfig) -> SplitConfig:
        """``base`` (the bottleneck's cut) with this camera's windows and threshold."""
        return dataclasses.replace(base, tiles=self.camera.tiles,
                                   tile_overlap=self.camera.tile_overlap,
                                   include_full_frame=False,
                                   score_threshold=self.score_threshold)  # fmt: skip

    def describe(self) -> str:
        return (f"{self.camera.describe()}; cloud threshold {self.score_threshold:.2f} "
                f"({self.matched_count:.2f} people per start-up frame on decoded features, "
                f"{self.reference_count:.2f} uncompressed at {REFERENCE_THRESHOLD})")

    def to_settings(self) -> dict[str, str]:
        """Header entries of the profile (the layout itself: :func:`layout_settings`)."""
        return {**self.camera.to_settings(),
                "profile_reference_count": f"{self.reference_count:.3f}",
                "profile_matched_count": f"{self.matched_count:.3f}"}  # fmt: skip


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


def profile_detect(frames: Sequence[np.ndarray], bottleneck: TaskBottleneck,
                   model, person_detector: PersonDetector,
                   camera: CameraProfile | None = None) -> DetectProfile:  # fmt: skip
    """Chooses the windows and the cloud's threshold on start-up frames (module docstring).

    Args:
        frames: (H, W, 3) uint8 RGB start-up frames of the camera.
        bottleneck: the stream's bottleneck.
        model: the split detector's network (:func:`codec.task.split.load_split_model`).
        person_detector: the full detector (its session is shared, its config unused).
        camera: the camera's profile when already chosen on these frames (it does not
            depend on the bottleneck: a benchmark of several bottlenecks chooses it once).
    """
    camera = camera or choose_layout(frames, person_detector)
    base = DetectProfile(camera, REFERENCE_THRESHOLD)
    split = dataclasses.replace(base.split(bottleneck.split), score_threshold=0.0)
    detector = SplitDetector(model, split)
    reference, decoded = [], []
    for i in profile_frame_indices(len(frames)):
        frame = frames[i]
        height, width = frame.shape[:2]
        features = detector.edge_features(frame)
        with torch.inference_mode():
            q = bottleneck.model.quantize(features)
            rebuilt = bottleneck.model.reconstruct(q)
        reference.append(detector.cloud_detect(features, height, width).scores)
        decoded.append(detector.cloud_detect(rebuilt, height, width).scores)
    if not reference:
        return base
    threshold, target, matched = match_threshold(reference, decoded)
    return DetectProfile(camera, threshold, target, matched)


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
