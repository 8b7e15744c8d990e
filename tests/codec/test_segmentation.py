"""Top-down person segmentation: geometry and overlap rules without models, the selfie model
(and the pose model's masks) on the embedded sample and on PETS09-S2L1 frame 150."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from semcodec.codec.core import models
from semcodec.codec.core.models import ModelNotFoundError, resolve_model
from semcodec.codec.core.types import Tracks
from semcodec.codec.scaffold.segmentation import (
    CropMask,
    PersonSegmenter,
    SegmenterConfig,
    crop_square,
    label_size,
    square_around,
)

PETS = Path(__file__).resolve().parents[2].parent / "shared" / "data" / "PETS09-S2L1"


def make_tracks(rows) -> Tracks:
    """Tracks from ``(id, x, y, w, h)`` rows (MOT boxes)."""
    rows = np.asarray(rows, np.float64).reshape(-1, 5)
    boxes = np.c_[rows[:, 1:3], rows[:, 1:3] + rows[:, 3:5]].astype(np.float32)
    return Tracks(boxes, np.ones(len(rows), np.float32), rows[:, 0].astype(np.int32))


def need_model(name: str) -> None:
    try:
        resolve_model(name)
    except ModelNotFoundError as exc:
        pytest.skip(f"model {name} not available: {str(exc).splitlines()[0]}")


def inside_fraction(labels: np.ndarray, track_id: int, box, frame_size, pad: float = 0.0):
    """Fraction of ``track_id``'s cells whose centres lie in ``box`` enlarged by ``pad``."""
    h, w = labels.shape
    rows, cols = np.nonzero(labels == track_id)
    x = (cols + 0.5) * frame_size[0] / w
    y = (rows + 0.5) * frame_size[1] / h
    x1, y1, x2, y2 = box
    px, py = pad * (x2 - x1), pad * (y2 - y1)
    inside = (x >= x1 - px) & (x <= x2 + px) & (y >= y1 - py) & (y <= y2 + py)
    return inside.mean() if len(x) else 0.0


def box_cells(box, frame_size, shape) -> float:
    """The box's area in label cells."""
    x1, y1, x2, y2 = box
    return (x2 - x1) * (y2 - y1) * shape[0] * shape[1] / (frame_size[0] * frame_size[1])


# --------------------------------------------------------------------------- no model


def test_config_is_validated():
    for bad in (
        dict(scale=0),
        dict(scale=1.5),
        dict(crop_margin=0.9),
        dict(threshold=1.0),
        dict(method="magic"),
        dict(model="pose_detection"),
        dict(threads=0),
        dict(box_margin=-0.1),
        dict(overlap="random"),
    ):
        with pytest.raises(ValueError):
            SegmenterConfig(**bad)
    assert SegmenterConfig(method="ellipse", model="anything").method == "ellipse"


def test_label_size():
    assert label_size((768, 576), 0.125) == (96, 72)
    assert label_size((384, 288), 0.125) == (48, 36)
    assert label_size((10, 6), 0.01) == (1, 1)


def test_crop_square_places_pixels_exactly():
    frame = np.zeros((60, 80, 3), np.uint8)
    frame[20:30, 40:50] = 255  # a 10x10 white square
    crop = crop_square(frame, 40.0, 20.0, 10.0, 20)  # exactly the square, 2x enlarged
    assert crop.shape == (20, 20, 3) and crop.dtype == np.float32
    assert crop[1:-1, 1:-1].min() > 0.99
    crop = crop_square(frame, 30.0, 10.0, 30.0, 30)  # 1:1 around it
    assert np.allclose(crop[10:20, 10:20], 1.0) and crop[:9].max() == 0 and crop[:, 21:].max() == 0
    crop = crop_square(frame, -100.0, -100.0, 400.0, 40)  # shrinks, mostly outside: zeros
    assert crop[:10].max() == 0 and crop.max() > 0
    ys, xs = np.nonzero(crop[..., 0] > 0.5)  # the square lands at (100+45)/10, (100+25)/10
    assert abs(xs.mean() + 0.5 - 14.5) < 0.6 and abs(ys.mean() + 0.5 - 12.5) < 0.6


def test_square_around_is_centred():
    x0, y0, side = square_around(np.array([10, 20, 30, 100.0]), 1.25)
    assert side == pytest.approx(100) and (x0 + side / 2, y0 + side / 2) == (20, 60)


def test_ellipse_backend():
    frame = np.zeros((288, 384, 3), np.uint8)
    tracks = make_tracks([(3, 40, 40, 40, 100), (7, 200, 100, 60, 120)])
    seg = PersonSegmenter(SegmenterConfig(method="ellipse", scale=0.25)).segment(frame, tracks)
    assert seg.labels.shape == (72, 96) and seg.labels.dtype == np.uint16
    assert seg.frame_size == (384, 288)
    assert set(np.unique(seg.labels)) == {0, 3, 7}
    for box, tid in zip(tracks.boxes, tracks.ids, strict=True):
        assert inside_fraction(seg.labels, tid, box, seg.frame_size) == 1.0
        area = (seg.labels == tid).sum() / box_cells(box, seg.frame_size, seg.labels.shape)
        assert 0.6 < area < 0.95  # an ellipse fills pi/4 of its box


def test_no_tracks_and_out_of_frame_boxes_give_background():
    frame = np.zeros((288, 384, 3), np.uint8)
    seg = PersonSegmenter(SegmenterConfig(method="ellipse")).segment(frame, Tracks.empty())
    assert seg.labels.shape == (36, 48) and not seg.labels.any()
    far = make_tracks([(1, 1000, 1000, 20, 40), (2, 50, 50, 0, 40)])  # outside; empty box
    assert not PersonSegmenter(SegmenterConfig(method="ellipse")).segment(frame, far).labels.any()


@pytest.mark.parametrize(
    "frame",
    [
        np.zeros((288, 384), np.uint8),
        np.zeros((288, 384, 4), np.uint8),
        np.zeros((288, 384, 3), np.float32),
        np.zeros((0, 384, 3), np.uint8),
        [[0, 0, 0]],
    ],
)
def test_bad_frames_raise(frame):
    with pytest.raises(ValueError):
        PersonSegmenter(SegmenterConfig(method="ellipse")).segment(frame, Tracks.empty())


def test_bad_tracks_raise():
    frame = np.zeros((288, 384, 3), np.uint8)
    seg = PersonSegmenter(SegmenterConfig(method="ellipse"))
    with pytest.raises(ValueError):
        seg.segment(frame, Tracks(np.zeros((2, 4), np.float32), np.ones(2), np.array([1, 0])))
    with pytest.raises(ValueError):
        seg.segment(frame, Tracks(np.zeros((2, 3), np.float32), np.ones(2), np.array([1, 2])))


def test_given_masks_and_overlap_rules():
    frame = np.zeros((100, 100, 3), np.uint8)
    # two people whose boxes overlap; the nearer one (id 2) reaches lower in the image
    tracks = make_tracks([(1, 20, 10, 40, 60), (2, 40, 20, 40, 70)])
    strong, weak = np.full((32, 32), 0.9, np.float32), np.full((32, 32), 0.6, np.float32)
    masks = [CropMask(1, 0.0, 0.0, 100.0, strong), CropMask(2, 0.0, 0.0, 100.0, weak)]
    both = (slice(20, 70), slice(40, 60))  # the boxes' intersection, at scale 1
    for overlap, owner in (("probability", 1), ("depth", 2)):
        cfg = SegmenterConfig(method="ellipse", scale=1.0, box_margin=0.0, overlap=overlap)
        labels = PersonSegmenter(cfg).segment(frame, tracks, masks=masks).labels
        assert (labels[both] == owner).all(), overlap
        assert (labels[10:70, 20:40] == 1).all() and (labels[70:90, 40:80] == 2).all()
        assert not labels[:, :20].any() and not labels[:10].any()  # kept inside the boxes
    # a track without a mask gets nothing; low probability is background
    cfg = SegmenterConfig(method="ellipse", scale=1.0)
    labels = PersonSegmenter(cfg).segment(frame, tracks, masks=masks[:1]).labels
    assert set(np.unique(labels)) == {0, 1}
    low = [CropMask(1, 0.0, 0.0, 100.0, np.full((8, 8), 0.4, np.float32))]
    assert not PersonSegmenter(cfg).segment(frame, tracks, masks=low).labels.any()


def test_placed_mask_is_aligned():
    # a crop whose left half is person: at scale 0.5 exactly the cells left of the crop centre
    frame = np.zeros((200, 200, 3), np.uint8)
    prob = np.zeros((64, 64), np.float32)
    prob[:, :32] = 1
    tracks = make_tracks([(5, 40, 40, 120, 120)])
    cfg = SegmenterConfig(method="ellipse", scale=0.5, box_margin=0.0)
    labels = PersonSegmenter(cfg).segment(frame, tracks, [CropMask(5, 40, 40, 120, prob)]).labels
    cols = np.nonzero(labels.any(0))[0]
    rows = np.nonzero(labels.any(1))[0]
    assert (cols.min(), cols.max()) == (20, 49) and (rows.min(), rows.max()) == (20, 79)


def test_missing_model_is_reported(monkeypatch):
    def missing(name, models_dir=None):
        raise ModelNotFoundError(f"model {name!r} was not found")

    monkeypatch.setattr(models, "resolve_model", missing)
    with pytest.raises(ModelNotFoundError):
        PersonSegmenter(SegmenterConfig())
    PersonSegmenter(SegmenterConfig(method="ellipse"))  # needs no model


# --------------------------------------------------------------------------- with models


@pytest.fixture(scope="module")
def selfie() -> PersonSegmenter:
    need_model("selfie_segmentation")
    return PersonSegmenter(SegmenterConfig(scale=0.5))


def check_people(seg, tracks, min_area=0.25, min_inside=0.8):
    labels = seg.labels
    assert set(np.unique(labels)) <= {0, *tracks.ids.tolist()}
    for box, tid in zip(tracks.boxes, tracks.ids, strict=True):
        cells = (labels == tid).sum()
        assert cells >= min_area * box_cells(box, seg.frame_size, labels.shape), tid
        assert inside_fraction(labels, tid, box, seg.frame_size) >= min_inside, tid


@pytest.mark.shared
def test_selfie_model_on_sample(gt_tracks, selfie, sample_dir, sample_frames):
    tracks = gt_tracks(sample_dir / "gt" / "gt.txt", 1)
    assert len(tracks) == 3
    seg = selfie.segment(sample_frames[0], tracks)
    assert seg.labels.shape == (144, 192) and seg.frame_size == (384, 288)
    check_people(seg, tracks)
    # far from every box stays background
    assert seg.labels[:, :40].max() == 0
    # the default scale gives the configured map size and still marks everyone
    small = PersonSegmenter(SegmenterConfig()).segment(sample_frames[0], tracks)
    assert small.labels.shape == (36, 48)
    assert set(np.unique(small.labels)) == {0, *tracks.ids.tolist()}
    assert not selfie.segment(sample_frames[0], Tracks.empty()).labels.any()


@pytest.mark.shared
def test_selfie_model_on_full_size_frame(pets_frame, gt_tracks, selfie):
    frame = pets_frame(150)
    tracks = gt_tracks(PETS / "gt" / "gt.txt", 150)
    assert len(tracks) == 6
    seg = PersonSegmenter(SegmenterConfig()).segment(frame, tracks)
    assert seg.labels.shape == (72, 96)
    check_people(seg, tracks, min_area=0.2)
    check_people(selfie.segment(frame, tracks), tracks)


@pytest.mark.shared
def test_pose_model_masks(gt_tracks, sample_dir, sample_frames):
    need_model("pose_landmark_lite")
    tracks = gt_tracks(sample_dir / "gt" / "gt.txt", 1)
    cfg = SegmenterConfig(scale=0.5, model="pose_landmark_lite", crop_margin=1.25)
    seg = PersonSegmenter(cfg).segment(sample_frames[0], tracks)
    check_people(seg, tracks)


# --------------------------------------------------------------- module layout and quiet LiteRT


def _python(code: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=120)  # fmt: skip


def test_segmentation_and_pose_do_not_import_each_other():
    code = (
        "import sys\n"
        "import semcodec.codec.scaffold.{first}\n"
        "assert 'semcodec.codec.scaffold.{second}' not in sys.modules, 'import cycle'\n"
    )
    for first, second in (("pose", "segmentation"), ("segmentation", "pose")):
        done = _python(code.format(first=first, second=second))
        assert done.returncode == 0, done.stderr
    from semcodec.codec.scaffold import crops, pose, segmentation

    assert segmentation.CropMask is crops.CropMask is pose.CropMask  # one class, re-exported
    assert segmentation.crop_square is crops.crop_square


@pytest.mark.parametrize("name", ["selfie_segmentation", "pose_landmark_lite"])
def test_creating_an_interpreter_prints_nothing_on_the_terminal(name):
    try:
        path = models.resolve_model(name)  # fetched from its package on a fresh machine
    except models.ModelNotFoundError as exc:
        pytest.skip(f"model {name} not available: {str(exc).splitlines()[0]}")
    code = (
        "from semcodec.codec.scaffold.crops import make_interpreter\n"
        f"interpreter = make_interpreter({str(path)!r}, 1)\n"
        "assert interpreter.get_input_details()[0]['shape'][1] == 256\n"
        "print('ok')\n"
    )
    done = _python(code)
    assert done.returncode == 0, done.stderr
    assert done.stdout == "ok\n" and done.stderr == ""  # LiteRT's "INFO: Created ..." is gone
