"""``--camera-transform``: new cameras made from the data there is."""

from __future__ import annotations

import numpy as np
import pytest

from semcodec.evaluation.data.camera import (
    CameraTransform,
    CameraTransformError,
    parse_camera_transform,
)
from semcodec.evaluation.data.groundtruth import GroundTruth


def _gt(boxes_xywh, counted=None) -> GroundTruth:
    n = len(boxes_xywh)
    return GroundTruth(frame_numbers=np.ones(n), ids=np.arange(1, n + 1), boxes=boxes_xywh,
                       counted=np.ones(n, bool) if counted is None else counted,
                       world_xy=np.full((n, 2), np.nan))  # fmt: skip


def test_parse_known_answers():
    assert parse_camera_transform(None).is_identity
    assert parse_camera_transform("none").is_identity
    t = parse_camera_transform("zoom=2,x=0.25,y=0.75")
    assert (t.zoom, t.x, t.y, t.scale) == (2.0, 0.25, 0.75, 1.0)
    assert parse_camera_transform("scale=0.5") == CameraTransform(scale=0.5)
    assert parse_camera_transform(t.describe()) == t
    assert parse_camera_transform("zoom=2,scale=0.5").describe() == "zoom=2,x=0.5,y=0.5,scale=0.5"


@pytest.mark.parametrize("text", ["zoom", "zoom=two", "zoom=0.5", "scale=0", "scale=9",
                                  "x=0.2", "zoom=2,zoom=3", "tilt=3", "zoom=2,x=1.5"])
def test_parse_refuses_bad_text(text):
    with pytest.raises(CameraTransformError):
        parse_camera_transform(text)


def test_zoom_crops_the_centre_and_keeps_the_size():
    frames = np.zeros((2, 100, 200, 3), np.uint8)
    frames[:, 25:75, 50:150] = 200  # the central half
    out = CameraTransform(zoom=2).frames(frames)
    assert out.shape == (2, 100, 200, 3)
    assert out.min() == 200  # only the centre is left, enlarged


def test_crop_stays_inside_the_frame():
    assert CameraTransform(zoom=2, x=1.0, y=0.0).crop(200, 100) == (100, 0, 200, 50)


def test_scale_halves_the_frame_and_boxes():
    frames = np.zeros((1, 100, 200, 3), np.uint8)
    t = CameraTransform(scale=0.5)
    assert t.frames(frames).shape == (1, 50, 100, 3)
    gt = t.groundtruth(_gt([[20, 10, 40, 60]]), 200, 100)
    np.testing.assert_allclose(gt.boxes, [[10, 5, 20, 30]])


def test_zoom_maps_boxes_and_ignores_people_mostly_outside():
    # frame 200x100, zoom 2 about the centre: crop x 50..150, y 25..75, then x2
    gt = _gt([[60, 30, 10, 20],    # inside: (20, 10, 20, 40)
              [35, 30, 20, 20],    # a quarter inside: kept as an ignore region
              [0, 0, 20, 20]])     # outside: dropped
    out = CameraTransform(zoom=2).groundtruth(gt, 200, 100)
    np.testing.assert_allclose(out.boxes, [[20, 10, 20, 40], [0, 10, 10, 40]])
    assert out.counted.tolist() == [True, False]
    assert out.ids.tolist() == [1, 2]


def test_load_sequence_makes_the_new_camera(sample_dir):
    from semcodec.evaluation.data.sequences import load_sequence

    plain, info, gt = load_sequence(str(sample_dir), 3, (), 1)
    zoomed, zinfo, zgt = load_sequence(str(sample_dir), 3, (("camera_transform", "scale=0.5"),), 1)
    assert zoomed.shape == (3, plain.shape[1] // 2, plain.shape[2] // 2, 3)
    assert (zinfo.width, zinfo.height) == (zoomed.shape[2], zoomed.shape[1])
    assert zinfo.name == f"{info.name}[scale=0.5]"
    np.testing.assert_allclose(zgt.boxes, gt.boxes * 0.5)


def test_bad_camera_transform_is_a_usage_error(tmp_path, capsys):
    from semcodec.evaluation.cli import main

    with pytest.raises(SystemExit) as exit_info:
        main(["run", "--camera-transform", "zoom=0.5", "--out", str(tmp_path / "o")])
    assert exit_info.value.code == 2
    assert "zoom must be in [1, 16]" in capsys.readouterr().err
    assert not (tmp_path / "o").exists()


@pytest.mark.parametrize("level", [0, 1])
def test_scaffold_rows_name_the_camera_profile(sample_frames, level):
    """Every level chooses its windows per camera and the benchmark row says what; level 1
    (rate-controlled) also reports its window rates."""
    from semcodec.evaluation.codecs.base import Setting, create_codec

    codec = create_codec("scaffold")
    encoded = codec.encode(sample_frames[:4], Setting.parse(f"level={level}"), fps=7.0)
    rate = encoded.metadata["rate"]
    assert rate["camera_profile"].startswith("2x2 tiles")
    assert ("rate_window_min" in rate) == (level == 1)
    decoded = codec.decode(encoded)
    assert decoded.shape == sample_frames[:4].shape
    assert encoded.metadata["counts"]["person_frames"] >= 0
