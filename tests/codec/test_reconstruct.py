"""The warp reference reconstruction on synthetic scaffolds with known answers."""

from __future__ import annotations

import numpy as np
import pytest

from semcodec.codec.core.types import DecodedFrame, Flow, FrameScaffold, Segmentation
from semcodec.codec.reconstruct import (
    ReconstructionError,
    available_reconstructors,
    create_reconstructor,
    register_reconstructor,
)
from semcodec.codec.reconstruct.warp import WarpReconstructor

SIZE = (64, 48)  # width, height


def _frame(number, image=None, labels=None, flow=None):
    seg = Segmentation(labels, SIZE) if labels is not None else None
    flow_obj = Flow(flow, SIZE) if flow is not None else None
    scaffold = FrameScaffold(number=number, segmentation=seg, flow=flow_obj,
                             keyframe=b"k" if image is not None else None)  # fmt: skip
    return DecodedFrame(scaffold, SIZE, image)


def _texture():
    y, x = np.mgrid[0:48, 0:64]
    return np.stack([(x * 4) % 256, (y * 5) % 256, (x + y) % 256], -1).astype(np.uint8)


def test_keyframe_is_returned_and_zero_flow_keeps_it():
    image = _texture()
    rec = create_reconstructor("warp")
    np.testing.assert_array_equal(rec.reconstruct(_frame(1, image)), image)
    empty = np.zeros((6, 8), np.uint16)
    out = rec.reconstruct(_frame(2, labels=empty, flow=np.zeros((3, 4, 2), np.float32)))
    np.testing.assert_array_equal(out, image)


def test_constant_flow_shifts_the_picture():
    image = _texture()
    rec = WarpReconstructor()
    rec.reconstruct(_frame(1, image))
    flow = np.full((3, 4, 2), [2.0, 0.0], np.float32)  # content came from 2 px to the right
    out = rec.reconstruct(_frame(2, flow=flow))
    np.testing.assert_array_equal(out[:, 10:50], image[:, 12:52])


def test_people_without_flow_are_silhouettes_in_their_keyframe_colour():
    image = np.full((48, 64, 3), 200, np.uint8)
    image[8:24, 8:16] = (10, 20, 30)  # person 5 in the keyframe
    labels = np.zeros((6, 8), np.uint16)
    labels[1:3, 1:2] = 5  # the same place, at 1/8
    rec = WarpReconstructor()
    rec.reconstruct(_frame(1, image, labels))
    moved = np.zeros((6, 8), np.uint16)
    moved[3:5, 4:7] = 5  # person 5 walked to the lower right
    moved[0:2, 6:8] = 9  # someone the keyframe did not show
    out = rec.reconstruct(_frame(2, labels=moved))
    assert tuple(out[32, 44]) == (10, 20, 30)
    assert tuple(out[4, 56]) == (128, 128, 128)
    assert abs(int(out[16, 12, 0]) - 200) < 20  # old place: inpainted background


def test_the_stream_must_start_with_a_keyframe_and_names_are_checked():
    with pytest.raises(ReconstructionError, match="keyframe"):
        WarpReconstructor().reconstruct(_frame(1, labels=np.zeros((6, 8), np.uint16)))
    assert "warp" in available_reconstructors()
    with pytest.raises(ValueError, match="unknown reconstructor"):
        create_reconstructor("nope")
    with pytest.raises(ValueError, match="already registered"):
        register_reconstructor("warp")(WarpReconstructor)


def test_frames_too_small_to_warp_are_a_reconstruction_error():
    rec = WarpReconstructor()
    tiny = DecodedFrame(
        FrameScaffold(number=1, keyframe=b"k"), (1, 1), np.zeros((1, 1, 3), np.uint8)
    )
    rec.reconstruct(tiny)
    flow = Flow(np.zeros((1, 1, 2), np.float32), (1, 1))
    with pytest.raises(ReconstructionError, match="warp"):
        rec.reconstruct(DecodedFrame(FrameScaffold(number=2, flow=flow), (1, 1)))
    wrong = DecodedFrame(
        FrameScaffold(number=1, keyframe=b"k"), SIZE, np.zeros((8, 8, 3), np.uint8)
    )
    with pytest.raises(ReconstructionError, match="keyframe picture"):
        rec.reconstruct(wrong)


def _reference_people(rec, seg, moved, background):
    """The per-id definition of WarpReconstructor._people (one full-frame pass per id)."""
    from semcodec.codec.reconstruct.warp import ABSENT_DIFFERENCE, UNKNOWN_PERSON_RGB, label_image

    labels = label_image(seg)
    canvas = moved.astype(np.float32) if moved is not None else background.copy()
    for track_id in np.unique(labels[labels > 0]):
        region = labels == track_id
        difference = np.abs(canvas[region] - background[region]).mean()
        if moved is not None and difference >= ABSENT_DIFFERENCE:
            continue
        canvas[region] = rec._colours.get(int(track_id), UNKNOWN_PERSON_RGB)
    return canvas


@pytest.mark.parametrize("with_flow", [False, True])
def test_many_people_are_composited_as_the_per_id_definition_says(with_flow):
    rng = np.random.default_rng(3)
    image = rng.integers(0, 255, (48, 64, 3), dtype=np.uint8)
    labels = rng.integers(0, 40, (6, 8)).astype(np.uint16)
    rec = WarpReconstructor()
    rec.reconstruct(_frame(1, image, labels))
    for track_id in np.unique(labels[labels > 0]):  # keyframe colours: per-id means
        region = np.kron(labels == track_id, np.ones((8, 8), bool))
        np.testing.assert_array_equal(rec._colours[int(track_id)], image[region].mean(axis=0))
    seg = Segmentation(rng.integers(0, 60, (6, 8)).astype(np.uint16), SIZE)
    background = rec._background.astype(np.float32)
    moved = np.roll(image, 3, axis=1) if with_flow else None
    expected = _reference_people(rec, seg, moved, background)
    np.testing.assert_array_equal(rec._people(seg, moved, background), expected)


def test_track_smoother_known_answers():
    from semcodec.codec.scaffold.tracker import TrackSmoother

    values = np.array([[20.0, 80.0, 60.0]])
    assert np.array_equal(TrackSmoother(1.0).update([1], values), values)  # 1: off
    smoother = TrackSmoother(0.5)
    assert np.array_equal(smoother.update([1], values), values)  # a new track: as given
    # the third value jumps by 10: half of it is taken (no velocity yet), a quarter of it
    # ((1/2)**2 / (2 - 1/2) = 1/6 of the error, 10/6) becomes velocity
    np.testing.assert_allclose(smoother.update([1], [[20.0, 80.0, 70.0]]), [[20.0, 80.0, 65.0]])
    np.testing.assert_allclose(smoother.update([1], [[20.0, 80.0, 70.0]]),
                               [[20.0, 80.0, 65.0 + 10 / 6 + 0.5 * (5 - 10 / 6)]])  # fmt: skip
    # a track absent for a frame starts again from its value
    smoother.update([2], values)
    np.testing.assert_allclose(smoother.update([1], [[0.0, 0.0, 5.0]]), [[0.0, 0.0, 5.0]])
    for gain in (0.0, 1.5, float("nan")):
        with pytest.raises(ValueError, match="gain"):
            TrackSmoother(gain)


def test_box_smoother_has_the_same_time_constant_at_every_frame_rate():
    from semcodec.codec.reconstruct.warp import SMOOTH_S, BoxSmoother

    assert BoxSmoother().gain(25.0) == pytest.approx(0.5)  # the default's definition
    assert BoxSmoother().gain(7.0) == pytest.approx(1 - 0.5 ** (25 / 7))
    assert BoxSmoother(0.0).gain(25.0) == 1.0 and BoxSmoother().gain(0.0) == 1.0  # off
    boxes = np.array([[10.0, 20.0, 30.0, 80.0]])
    assert np.array_equal(BoxSmoother(0.0).update([1], boxes, 25.0), boxes)
    smoother = BoxSmoother(SMOOTH_S)
    smoother.update([1], boxes, 25.0)
    # the height grows by 10 px at gain 1/2: the drawn box grows by 5, its bottom stays
    np.testing.assert_allclose(smoother.update([1], [[10.0, 10.0, 30.0, 80.0]], 25.0),
                               [[10.0, 15.0, 30.0, 80.0]])  # fmt: skip
    for bad in (-1.0, float("inf"), float("nan")):
        with pytest.raises(ValueError, match="smooth_s"):
            BoxSmoother(bad)


def test_box_smoother_follows_constant_motion_and_damps_jitter():
    from semcodec.codec.reconstruct.warp import BoxSmoother

    rng = np.random.default_rng(0)
    smoother, truth, seen, drawn = BoxSmoother(0.1), [], [], []
    for t in range(200):
        box = np.array([100.0 + 2 * t, 50.0, 140.0 + 2 * t, 150.0])  # walks 2 px a frame
        noisy = box + np.r_[0.0, rng.normal(0, 3), 0.0, rng.normal(0, 3)]
        truth.append(box), seen.append(noisy)
        drawn.append(smoother.update([7], noisy[None], 25.0)[0])
    truth, seen, drawn = (np.array(a[100:]) for a in (truth, seen, drawn))
    assert abs(np.mean(drawn[:, 0] - truth[:, 0])) < 0.5  # no lag once the velocity is known

    def shake(boxes):  # frame-to-frame change of the height, px
        return np.std(np.diff(boxes[:, 3] - boxes[:, 1]))

    assert shake(drawn) < 0.5 * shake(seen)
