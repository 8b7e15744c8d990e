"""The cloud's own person matte (codec.reconstruct.matte): a synthetic person on a known
background, with the real segmentation models; the matte in ``warp``'s drawing."""

from __future__ import annotations

import cv2
import numpy as np
import pytest

from semcodec.codec.core.models import ModelNotFoundError
from semcodec.codec.core.types import DecodedFrame, FrameScaffold, Tracks
from semcodec.codec.reconstruct.matte import MATTE_MODELS, PersonMatte, ref_probability

PLATE_RGB = (150, 160, 140)


def synthetic_person(height: int) -> tuple[np.ndarray, np.ndarray]:
    """A flat-coloured figure (head, torso, arms, legs) ``(height, height // 2, 3)`` uint8 on
    black, and its ``(height, height // 2)`` bool mask."""
    h, w = height, height // 2
    picture = np.zeros((h, w, 3), np.uint8)
    mask = np.zeros((h, w), bool)
    parts = [
        (lambda m: cv2.circle(m, (w // 2, h // 9), h // 14, 1, -1), (224, 172, 140)),
        (lambda m: cv2.ellipse(m, (w // 2, int(h * 0.36)), (w // 5, int(h * 0.17)), 0, 0, 360,
                               1, -1), (40, 60, 150)),
        (lambda m: cv2.line(m, (w // 2 - w // 12, h // 2), (w // 2 - w // 6, h - 4), 1,
                            max(2, h // 14)), (50, 50, 60)),
        (lambda m: cv2.line(m, (w // 2 + w // 12, h // 2), (w // 2 + w // 6, h - 4), 1,
                            max(2, h // 14)), (50, 50, 60)),
        (lambda m: cv2.line(m, (w // 2 - w // 5, h // 4), (w // 2 - w // 3, h // 2), 1,
                            max(2, h // 20)), (40, 60, 150)),
        (lambda m: cv2.line(m, (w // 2 + w // 5, h // 4), (w // 2 + w // 3, h // 2), 1,
                            max(2, h // 20)), (40, 60, 150)),
    ]  # fmt: skip
    for draw, rgb in parts:
        part = np.zeros((h, w), np.uint8)
        draw(part)
        picture[part > 0], mask[part > 0] = rgb, True
    return picture, mask


def plates() -> dict[str, np.ndarray]:
    """A flat and a textured ``(288, 384, 3)`` uint8 background."""
    noise = np.random.default_rng(0).integers(60, 200, (288, 384, 3)).astype(np.uint8)
    return {"flat": np.full((288, 384, 3), PLATE_RGB, np.uint8),
            "textured": cv2.GaussianBlur(noise, (0, 0), 3)}  # fmt: skip


def reference_on(plate: np.ndarray, height: int, x: int = 150, y: int = 60):
    """The reference a level-1 edge would cut: the figure over ``plate`` in its box."""
    figure, mask = synthetic_person(height)
    box = np.array([x, y, x + figure.shape[1], y + height], np.float64)
    ref = plate[y : y + height, x : x + figure.shape[1]].copy()
    ref[mask] = figure[mask]
    return ref, mask, box


@pytest.fixture(scope="module", params=["selfie_segmentation", "pose_landmark_full"])
def matter(request) -> PersonMatte:
    try:
        return PersonMatte(request.param)
    except ModelNotFoundError as exc:
        pytest.skip(f"model {request.param} not available: {exc}")


@pytest.mark.parametrize("background", ["flat", "textured"])
@pytest.mark.parametrize("height", [40, 80, 160])
def test_the_matte_of_a_synthetic_person_is_the_person(matter, background, height):
    plate = plates()[background]
    ref, mask, box = reference_on(plate, height)
    alpha = matter.matte(ref, box, plate)
    assert alpha.shape == mask.shape and alpha.dtype == np.float32
    assert alpha.min() >= 0 and alpha.max() <= 1
    assert alpha[mask].mean() > 0.9  # the figure is kept
    assert alpha[~mask].mean() < 0.12  # the background it was cut with is not
    cut = alpha > 0.5
    assert (cut & mask).sum() / (cut | mask).sum() > 0.7  # IoU with the known figure


def test_a_reference_without_a_person_keeps_its_rectangle(matter):
    plate = plates()["flat"]
    box = np.array([150, 60, 190, 140], np.float64)
    ref = plate[60:140, 150:190].copy()  # the plate itself: nobody there
    assert (matter.matte(ref, box, plate) == 1).all()


def test_a_crop_map_lands_on_the_reference_pixels():
    """A crop square of side 200 at (-50, 0) with probability 1 on its crop pixels
    [64, 192) x [0, 128) (frame x 0..100, y 0..100) onto a 10x20 picture of box
    (50, 50, 150, 250), 10 frame pixels a picture pixel: rows and columns 0..4."""
    prob = np.zeros((256, 256), np.float32)
    prob[:128, 64:192] = 1.0
    out = ref_probability(prob, -50.0, 0.0, 200.0, np.array([50, 50, 150, 250]), (10, 20))
    assert out.shape == (20, 10)
    assert (out[:4, :4] > 0.99).all() and (out[6:] < 0.01).all() and (out[:, 6:] < 0.01).all()


def test_warp_draws_the_person_and_the_plate_around_them(matter):
    from semcodec.codec.reconstruct.warp import WarpReconstructor

    plate = plates()["textured"]
    stale = np.full_like(plate, 230)  # the reference was cut from another background
    ref, mask, box = reference_on(stale, 80)
    tracks = Tracks(boxes=box[None].astype(np.float32), scores=np.ones(1, np.float32),
                    ids=np.array([7], np.int32))  # fmt: skip
    frame = DecodedFrame(FrameScaffold(number=1, tracks=tracks), (384, 288), plate, {7: ref},
                         plate=True)  # fmt: skip
    boxed = WarpReconstructor(smooth_s=0).reconstruct(frame)
    cut = WarpReconstructor(smooth_s=0, person_matte=matter.model).reconstruct(frame)
    inside = np.zeros(plate.shape[:2], bool)
    inside[60:140, 150:190] = True
    person = np.zeros_like(inside)
    person[60:140, 150:190] = mask
    background = inside & ~cv2.dilate(person.astype(np.uint8), np.ones((5, 5))).astype(bool)
    error = np.abs(cut.astype(int) - plate.astype(int)).mean(-1)
    assert error[background].mean() < 10  # the plate shows where the stale background was
    assert np.abs(boxed.astype(int) - plate.astype(int)).mean(-1)[background].mean() > 60
    eroded = cv2.erode(person.astype(np.uint8), np.ones((3, 3))).astype(bool)
    assert np.abs(cut.astype(int) - boxed.astype(int)).mean(-1)[eroded].mean() < 10  # the person
    assert (cut[~inside] == boxed[~inside]).all()  # nothing else changes


#: Known answers: 2 x the multiply-adds of each model's layers at 256x256, from its graph.
MATTE_MFLOP = {"selfie_segmentation": 116.3, "pose_landmark_full": 772.3}


def test_the_matte_models_flops_are_counted_per_matte(matter):
    """The decoder's FLOPs (issue 39's bits x FLOPs) include the cloud's matte model: its
    graph's FLOPs once per reference matted, spread over the frames drawn; none without it."""
    from semcodec.codec.reconstruct.restore import RestoreReconstructor
    from semcodec.codec.reconstruct.warp import WarpReconstructor

    per_crop = matter._runner.flops_per_crop()
    assert per_crop / 1e6 == pytest.approx(MATTE_MFLOP[matter.model], abs=0.1)
    plate = plates()["textured"]
    ref, _, box = reference_on(plate, 80)
    tracks = Tracks(boxes=box[None].astype(np.float32), scores=np.ones(1, np.float32),
                    ids=np.array([7], np.int32))  # fmt: skip
    first = DecodedFrame(FrameScaffold(number=1, tracks=tracks), (384, 288), plate, {7: ref},
                         plate=True)  # fmt: skip
    later = DecodedFrame(FrameScaffold(number=2, tracks=tracks), (384, 288), None, {},
                         plate=True)  # fmt: skip
    warp = WarpReconstructor(smooth_s=0, person_matte=matter.model)
    assert WarpReconstructor(smooth_s=0).flops_per_frame() is None
    for frame in (first, later, later, later):  # one reference matted over four frames
        warp.reconstruct(frame)
    assert warp.flops_per_frame() == per_crop // 4
    warp.reset()
    assert warp.flops_per_frame() == 0
    restore = RestoreReconstructor(person_matte=matter.model)
    restore.reconstruct(first)
    restore.reconstruct(later)
    restorer_only = restore.flops
    assert restorer_only > 0 and restore.flops_per_frame() == (restorer_only + per_crop) // 2


def test_unknown_models_and_two_mattes_are_refused():
    from semcodec.codec.reconstruct.warp import WarpReconstructor

    with pytest.raises(ValueError, match="expected one of"):
        PersonMatte("pose_detection")
    with pytest.raises(ValueError, match="choose one"):
        WarpReconstructor(matte=True, person_matte=MATTE_MODELS[0])


def test_the_benchmark_setting_reaches_warp_and_restore():
    from semcodec.evaluation.codecs.base import Setting, SettingError, create_codec

    codec = create_codec("scaffold")

    def decoder(setting):
        spec = codec.decoder_of(setting)
        return spec.name, dict(spec.options)

    assert decoder(Setting.parse("level=1,decoder=warp,person_matte=selfie_segmentation")) == (
        "warp", {"person_matte": "selfie_segmentation"})  # fmt: skip
    name, options = decoder(Setting.parse("level=1,decoder=restore,person_matte="
                                          "pose_landmark_full"))  # fmt: skip
    assert name == "restore" and options == {"person_matte": "pose_landmark_full"}
    for bad in ("level=1,person_matte=ellipse", "level=1,decoder=diffusion,"
                "person_matte=selfie_segmentation"):  # fmt: skip
        with pytest.raises(SettingError, match="person_matte"):
            decoder(Setting.parse(bad))
