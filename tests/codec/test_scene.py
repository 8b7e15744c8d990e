"""Scene-change detection and the keyframe schedule."""

from __future__ import annotations

import numpy as np
import pytest

from semcodec.codec.core.frames import resize_to
from semcodec.codec.scaffold.scene import KeyframeSchedule, SceneChangeDetector


@pytest.fixture(scope="module")
def sample_video() -> np.ndarray:
    """All 60 frames of the embedded PETS09-S2L1 sample, (60, 288, 384, 3) uint8."""
    from semcodec.codec.core.sources import open_source, sample_path

    return open_source(sample_path()).read()


def synthetic_scene(height: int, width: int) -> np.ndarray:
    """A different 'scene': a bright diagonal gradient with a dark square."""
    y, x = np.mgrid[0:height, 0:width]
    gray = (255 * (x + y) / (width + height)).astype(np.uint8)
    gray[height // 4 : height // 2, width // 4 : width // 2] = 10
    return np.repeat(gray[..., None], 3, axis=2)


def test_static_camera_sample_never_triggers(sample_video):
    detector = SceneChangeDetector()
    fired = [detector.update(frame) for frame in sample_video]
    assert not any(fired)
    assert detector.last_difference < detector.threshold / 3

    schedule = KeyframeSchedule(interval=0, scene_change=True)
    keys = [i for i, f in enumerate(sample_video) if schedule.is_keyframe(i, f)]
    assert keys == [0]


def test_synthetic_cut_triggers_once(sample_video):
    other = synthetic_scene(*sample_video.shape[1:3])
    video = list(sample_video[:20]) + [other] * 10 + list(sample_video[20:30])
    detector = SceneChangeDetector()
    fired = [i for i, frame in enumerate(video) if detector.update(frame)]
    assert fired == [20, 30]  # into the new scene and back; the reference follows the cut


@pytest.mark.shared
def test_cut_between_two_real_videos(sample_video, shared_data):
    import av

    path = shared_data / "TUD-Stadtmitte" / "TUD-Stadtmitte.mp4"
    if not path.is_file():
        pytest.skip(f"{path} is missing")
    with av.open(str(path)) as container:
        frames = container.decode(video=0)
        tud = [next(frames).to_ndarray(format="rgb24") for _ in range(30)]
    height, width = sample_video.shape[1:3]
    tud = resize_to(np.stack(tud), width, height)
    video = np.concatenate([sample_video[:30], tud])
    detector = SceneChangeDetector()
    assert [i for i, frame in enumerate(video) if detector.update(frame)] == [30]

    schedule = KeyframeSchedule(interval=25, scene_change=True)
    keys = [i for i, frame in enumerate(video) if schedule.is_keyframe(i, frame)]
    assert keys == [0, 25, 30, 55]  # the interval restarts at the scene-change keyframe


def test_schedule_interval_only(sample_video):
    schedule = KeyframeSchedule(interval=5, scene_change=False)
    keys = [i for i in range(1, 23) if schedule.is_keyframe(i)]
    assert keys == [1, 6, 11, 16, 21]
    schedule.reset()
    assert schedule.is_keyframe(100)
    # indices may skip (dropped frames): the interval is in index units
    schedule = KeyframeSchedule(interval=5, scene_change=False)
    assert [i for i in (0, 3, 7, 8, 12) if schedule.is_keyframe(i)] == [0, 7, 12]


def test_schedule_periodic_keyframe_resets_detector_reference(sample_video):
    # a fade: each step is small, but the last frame is far from the first
    fade = [(sample_video[0] * g).astype(np.uint8) for g in (1.0, 0.9, 0.8, 0.7)]
    detector = SceneChangeDetector()
    detector.update(fade[0])
    assert detector.difference(fade[2]) < detector.threshold < detector.difference(fade[3])

    only_scene = KeyframeSchedule(interval=0, scene_change=True)
    assert [only_scene.is_keyframe(i, f) for i, f in enumerate(fade)] == [1, 0, 0, 1]
    # the periodic keyframe at 2 becomes the reference, so frame 3 is no scene change
    periodic = KeyframeSchedule(interval=2, scene_change=True)
    assert [periodic.is_keyframe(i, f) for i, f in enumerate(fade)] == [1, 0, 1, 0]


def test_bad_input(sample_video):
    with pytest.raises(ValueError, match="threshold"):
        SceneChangeDetector(threshold=0)
    with pytest.raises(ValueError, match="uint8"):
        SceneChangeDetector().update(sample_video[0].astype(np.float32))
    with pytest.raises(ValueError, match="shape"):
        SceneChangeDetector().update(sample_video[0][..., :2])
    with pytest.raises(ValueError, match="interval"):
        KeyframeSchedule(interval=-1, scene_change=False)
    schedule = KeyframeSchedule(interval=2, scene_change=True)
    with pytest.raises(ValueError, match="needs the frame"):
        schedule.is_keyframe(0)
    schedule.is_keyframe(5, sample_video[0])
    with pytest.raises(ValueError, match="increase"):
        schedule.is_keyframe(5, sample_video[1])
    # grayscale frames of another size are fine
    assert SceneChangeDetector().update(sample_video[0, ::2, ::2, 0].copy()) is False
