"""Top-down BlazePose keypoints on tracked boxes: the embedded sample and PETS09-S2L1 frame 150."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from semcodec.codec.core import models
from semcodec.codec.core.models import ModelNotFoundError, resolve_model
from semcodec.codec.core.types import NUM_KEYPOINTS, Tracks
from semcodec.codec.scaffold.pose import PoseConfig, PoseEstimator
from semcodec.codec.scaffold.segmentation import CropMask

PETS = Path(__file__).resolve().parents[2].parent / "shared" / "data" / "PETS09-S2L1"
SHOULDERS, HIPS, ANKLES = [11, 12], [23, 24], [27, 28]


def need_model(name: str) -> None:
    try:
        resolve_model(name)
    except ModelNotFoundError as exc:
        pytest.skip(f"model {name} not available: {str(exc).splitlines()[0]}")


def test_config_is_validated():
    for bad in (
        dict(model="pose_detection"),
        dict(crop_margin=0.5),
        dict(min_presence=1.5),
        dict(threads=0),
    ):
        with pytest.raises(ValueError):
            PoseConfig(**bad)


def test_missing_model_is_reported(monkeypatch):
    def missing(name, models_dir=None):
        raise ModelNotFoundError(f"model {name!r} was not found")

    monkeypatch.setattr(models, "resolve_model", missing)
    with pytest.raises(ModelNotFoundError):
        PoseEstimator()


@pytest.fixture(scope="module", params=["pose_landmark_lite", "pose_landmark_full"])
def estimator(request) -> PoseEstimator:
    need_model(request.param)
    return PoseEstimator(PoseConfig(model=request.param))


def check_poses(poses, tracks, min_presence=0.5):
    by_id = {int(t): b for t, b in zip(tracks.ids, tracks.boxes, strict=True)}
    for pose in poses:
        assert pose.track_id in by_id
        assert pose.keypoints.shape == (NUM_KEYPOINTS, 2) and pose.keypoints.dtype == np.float32
        assert pose.visibility.shape == (NUM_KEYPOINTS,) and pose.visibility.dtype == np.float32
        assert ((pose.visibility >= 0) & (pose.visibility <= 1)).all()
        assert min_presence <= pose.score <= 1
        x1, y1, x2, y2 = by_id[pose.track_id]
        w, h = x2 - x1, y2 - y1
        x, y = pose.keypoints[:, 0], pose.keypoints[:, 1]
        inside = (x > x1 - 0.25 * w) & (x < x2 + 0.25 * w) & (y > y1 - 0.1 * h) & (y < y2 + 0.1 * h)
        assert inside.mean() >= 0.9, pose.track_id
        shoulders, hips, ankles = (y[j].mean() for j in (SHOULDERS, HIPS, ANKLES))
        assert shoulders + 0.15 * h < hips < ankles - 0.15 * h, pose.track_id
        assert y[0] < shoulders  # the nose above the shoulders


@pytest.mark.shared
def test_poses_on_sample(gt_tracks, estimator, sample_dir, sample_frames):
    tracks = gt_tracks(sample_dir / "gt" / "gt.txt", 1)
    poses = estimator.estimate(sample_frames[0], tracks)
    assert [p.track_id for p in poses] == tracks.ids.tolist()  # all three, in track order
    assert min(p.score for p in poses) > 0.9
    check_poses(poses, tracks)
    assert estimator.estimate(sample_frames[0], Tracks.empty()) == []


@pytest.mark.shared
def test_presence_threshold_and_masks(gt_tracks, sample_dir, sample_frames):
    need_model("pose_landmark_lite")
    tracks = gt_tracks(sample_dir / "gt" / "gt.txt", 1)
    everyone = PoseEstimator(PoseConfig(min_presence=0.0))
    poses, masks = everyone.estimate_with_masks(sample_frames[0], tracks)
    assert len(poses) == len(masks) == 3
    assert all(isinstance(m, CropMask) and m.prob.shape == (256, 256) for m in masks)
    assert all(m.prob.min() >= 0 and m.prob.max() <= 1 for m in masks)
    assert all(m.prob.mean() > 0.05 for m in masks)  # a person in every crop
    cut = float(np.median([p.score for p in poses]))
    strict = PoseEstimator(PoseConfig(min_presence=cut)).estimate(sample_frames[0], tracks)
    assert [p.track_id for p in strict] == [p.track_id for p in poses if p.score >= cut]


@pytest.mark.shared
def test_poses_on_full_size_frame(pets_frame, gt_tracks, estimator):
    frame = pets_frame(150)
    tracks = gt_tracks(PETS / "gt" / "gt.txt", 150)
    poses = estimator.estimate(frame, tracks)
    # lite misses the two people whose boxes overlap by half; full finds all six
    assert len(poses) >= 4
    check_poses(poses, tracks)


@pytest.mark.shared
def test_bad_frames_raise(sample_frames):
    need_model("pose_landmark_lite")
    est = PoseEstimator()
    for frame in (sample_frames[0][..., 0], sample_frames[0].astype(np.float32), None):
        with pytest.raises(ValueError):
            est.estimate(frame, Tracks.empty())
