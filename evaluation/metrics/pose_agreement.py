"""Pose agreement: do the decoded people stand, walk and swing their arms as the originals do?

Person-region ST-LPIPS scores a pasted picture of the right person in the wrong pose almost
as well as the right pose; this metric asks the pose model instead. For each counted
ground-truth person of an evaluated frame, the pose model runs top-down on the **ground-truth
box** (the same box in the original and in the decoded frame, so the metric judges the
pictures, not the tracker or the boxes a stream transmits): BlazePose
(:class:`~codec.scaffold.pose.PoseEstimator`, by default ``pose_landmark_full``, the model of
the edge's level 3) on the square crop around the box.

The 13 body joints (:data:`~codec.scaffold.pose.BODY_JOINTS`: nose, shoulders, elbows,
wrists, hips, knees, ankles) of the original's pose are the answer. A person counts when the
model finds them in the original (pose presence >= :data:`MIN_PRESENCE`); a joint counts
when the original shows it (visibility >= :data:`MIN_VISIBILITY`). A counted joint agrees
when the decoded frame's joint lies within :data:`PCK_FRACTION` x the box height of the
original's (PCK@0.1 of the box height); a person the model does not find in the decoded
frame (presence below :data:`MIN_PRESENCE`: a grey blob, an empty plate) disagrees on
every joint. ``pose_pck`` is the share of all counted joints that agree (1 for a copy of the
original).
"""

from __future__ import annotations

import os
from collections.abc import Sequence

import numpy as np

from semcodec.evaluation.data.groundtruth import GroundTruth

#: A decoded joint agrees within this fraction of the ground-truth box height (PCK@0.1).
PCK_FRACTION = 0.1
#: People whose pose presence (0..1) in the original is below this are not counted; in the
#: decoded frame, below this the person is lost (every joint disagrees).
MIN_PRESENCE = 0.5
#: Joints of the original's pose whose visibility (0..1) is below this are not counted.
MIN_VISIBILITY = 0.5
#: The pose model that judges (the edge's level-3 model).
POSE_MODEL = "pose_landmark_full"
#: Boxes lower than this (pixels) are left out: the model sees nothing in them.
MIN_BOX_HEIGHT = 8.0


def joints_agree(reference: np.ndarray, decoded: np.ndarray, box_height: float,
                 fraction: float = PCK_FRACTION) -> np.ndarray:  # fmt: skip
    """``(J,)`` bool: decoded joints within ``fraction`` x ``box_height`` of the reference's.

    Args:
        reference, decoded: ``(J, 2)`` float joint positions in frame pixels.
        box_height: the person's box height, pixels (> 0).
    """
    distance = np.linalg.norm(np.asarray(decoded, np.float64) - np.asarray(reference, np.float64),
                              axis=1)  # fmt: skip
    return distance <= fraction * float(box_height)


class PoseAgreement:
    """The pose model that :func:`pose_agreement` runs (load it once, score many videos).

    Args:
        model: ``"pose_landmark_full"`` (default) or ``"pose_landmark_lite"``.
        models_dir: where to look for the model first.

    Raises:
        codec.core.models.ModelNotFoundError: the model file is missing (the message says how
            to supply it).
    """

    def __init__(self, model: str = POSE_MODEL,
                 models_dir: str | os.PathLike | None = None) -> None:  # fmt: skip
        from semcodec.codec.scaffold.pose import BODY_JOINTS, PoseConfig, PoseEstimator

        self.model = model
        self.joints = np.array(BODY_JOINTS)
        self._estimator = PoseEstimator(PoseConfig(model=model, min_presence=0.0), models_dir)

    def poses(self, frame: np.ndarray, boxes: np.ndarray) -> list:
        """One :class:`~codec.core.types.Pose` per box ``(N, 4)`` ``x1, y1, x2, y2`` of
        ``frame`` ``(H, W, 3)`` uint8 RGB, whatever its presence, in box order."""
        from semcodec.codec.core.types import Tracks

        n = len(boxes)
        tracks = Tracks(boxes=np.asarray(boxes, np.float32).reshape(n, 4),
                        scores=np.ones(n, np.float32),
                        ids=np.arange(1, n + 1, dtype=np.int32))  # fmt: skip
        return self._estimator.estimate(frame, tracks)

    def scores(self, reference: np.ndarray, decoded: np.ndarray, gt: GroundTruth,
               numbers: Sequence[int]) -> dict[str, float | int | None]:  # fmt: skip
        """``pose_pck``, ``pose_people``, ``pose_lost`` over frames ``numbers`` (1-based:
        ``reference[0]`` is frame 1) of ``reference`` and ``decoded``, each
        ``(T, H, W, 3)`` uint8 RGB of the same shape (module text).

        Returns:
            ``pose_pck``: share of counted joints that agree, None without counted joints;
            ``pose_people``: people counted (found in the original); ``pose_lost``: the share
            of them the model does not find in the decoded frame (None without people).

        Raises:
            ValueError: the two videos differ in shape.
        """
        if reference.shape != decoded.shape:
            raise ValueError(f"reference {reference.shape} and decoded {decoded.shape} differ")
        agree = counted = people = lost = 0
        for number in numbers:
            rows = (gt.frame_numbers == number) & gt.counted
            xywh = gt.boxes[rows]
            xywh = xywh[xywh[:, 3] >= MIN_BOX_HEIGHT]
            if not len(xywh):
                continue
            boxes = np.concatenate([xywh[:, :2], xywh[:, :2] + xywh[:, 2:]], axis=1)
            originals = self.poses(reference[number - 1], boxes)
            found = [k for k, p in enumerate(originals) if p.score >= MIN_PRESENCE]
            if not found:
                continue
            redrawn = self.poses(decoded[number - 1], boxes[found])
            for k, theirs in zip(found, redrawn, strict=True):
                mine = originals[k]
                shown = mine.visibility[self.joints] >= MIN_VISIBILITY
                if not shown.any():
                    continue
                people += 1
                counted += int(shown.sum())
                if theirs.score < MIN_PRESENCE:
                    lost += 1
                    continue
                ok = joints_agree(mine.keypoints[self.joints], theirs.keypoints[self.joints],
                                  xywh[k, 3])  # fmt: skip
                agree += int((ok & shown).sum())
        return {"pose_pck": agree / counted if counted else None, "pose_people": people,
                "pose_lost": lost / people if people else None}  # fmt: skip


def pose_agreement(reference: np.ndarray, decoded: np.ndarray, gt: GroundTruth, every: int = 1,
                   models_dir: str | os.PathLike | None = None,
                   model: str = POSE_MODEL) -> dict[str, float | int | None]:  # fmt: skip
    """:meth:`PoseAgreement.scores` on frames 1, 1+every, ... (module text)."""
    return PoseAgreement(model, models_dir).scores(reference, decoded, gt,
                                                   range(1, len(reference) + 1, every))  # fmt: skip
