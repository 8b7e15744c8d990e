"""Crafted streams (valid CRCs, hostile contents) give typed errors, never crashes or
unbounded allocations: the regression tests of the decoder audit."""

from __future__ import annotations

import dataclasses
import json
import tracemalloc

import numpy as np
import pytest
from semc_streams import stream_bytes, synthetic_config, synthetic_stream, with_settings

from semcodec.cloud.cli import main as cloud_main
from semcodec.codec.bitstream import StreamHeader, SubStream, SubStreamType, Unit, UnitKind
from semcodec.codec.scaffold.codec import (
    IncompleteStreamError,
    ScaffoldCodecError,
    ScaffoldDecoder,
    StreamLimitError,
    StreamLimits,
    StreamStructureError,
    decode_stream,
)


def _decode_all(header: StreamHeader, units: list[Unit]) -> int:
    decoder = ScaffoldDecoder(header)
    for unit in units:
        if decoder.decode_unit(unit) is None:
            break
    decoder.finish()
    return decoder.frames_decoded


def _cli(tmp_path, header, units, *extra, name="x.semc"):
    path = tmp_path / name
    path.write_bytes(stream_bytes(header, units))
    return cloud_main(["decode", str(path), "-o", str(tmp_path / "out"), *extra])


# ------------------------------------------------------------------ header limits


def test_flow_substream_when_the_header_sends_no_flow_is_a_structure_error():
    header, units = synthetic_stream(level=2, count=3)
    header = with_settings(header, flow_scale=0.0)
    with pytest.raises(StreamStructureError, match="unexpected.*FLOW"):
        _decode_all(header, units)


def test_tiny_frames_are_refused_before_decoding():
    header, units = synthetic_stream(level=1, count=2)
    with pytest.raises(StreamLimitError, match="width 1 "):
        ScaffoldDecoder(dataclasses.replace(header, width=1, height=1))


@pytest.mark.parametrize("setting", ["pose_step_px", "flow_step_px"])
@pytest.mark.parametrize("value", ["1000000000.0", "nan", "inf", "0.0"])
def test_absurd_quantisation_steps_are_refused(setting, value):
    header, _ = synthetic_stream(level=2, count=1)
    with pytest.raises(ScaffoldCodecError, match="step"):
        ScaffoldDecoder(with_settings(header, **{setting: value}))


def test_huge_frames_with_a_tiny_keyframe_scale_are_refused_without_allocating():
    header, _ = synthetic_stream(level=0, count=1)
    hostile = with_settings(dataclasses.replace(header, width=65535, height=65535),
                            keyframe_scale=1 / 65535)  # fmt: skip
    tracemalloc.start()
    try:
        with pytest.raises(StreamLimitError, match="65535"):
            ScaffoldDecoder(hostile)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 8 << 20


def test_a_full_resolution_label_map_of_a_large_frame_is_refused():
    header, _ = synthetic_stream(level=1, count=1)
    hostile = with_settings(dataclasses.replace(header, width=2048, height=2048), seg_scale=1.0)
    with pytest.raises(StreamLimitError, match="seg_scale"):
        ScaffoldDecoder(hostile)
    assert StreamLimits().max_label_cells < 2048 * 2048


@pytest.mark.parametrize("rate", [((1 << 32) - 1, 1), (1, (1 << 32) - 1), (100000, 1)])
def test_frame_rates_a_video_container_cannot_hold_are_refused(rate):
    header, _ = synthetic_stream(level=0, count=1)
    with pytest.raises(StreamLimitError, match="frame rate"):
        ScaffoldDecoder(dataclasses.replace(header, fps_num=rate[0], fps_den=rate[1]))


def test_limits_are_configurable():
    header, _ = synthetic_stream(level=0, count=1)
    with pytest.raises(StreamLimitError, match="pixels"):
        ScaffoldDecoder(header, limits=StreamLimits(max_pixels=100))


# ------------------------------------------------------------------ structure


def test_duplicate_sequence_numbers_are_refused():
    header, units = synthetic_stream(level=0, count=3, config=synthetic_config(0))
    key = units[0]
    with pytest.raises(StreamStructureError, match="repeats"):
        _decode_all(
            dataclasses.replace(header, num_frames=3), [key, key, key, Unit(UnitKind.END, 3)]
        )


def test_skipped_sequence_numbers_are_refused():
    header, units = synthetic_stream(level=0, count=3)
    with pytest.raises(StreamStructureError, match="skips"):
        _decode_all(header, [units[0], units[2]])


def test_a_repeated_substream_type_is_refused():
    header, units = synthetic_stream(level=1, count=2)
    first = units[0]
    doubled = Unit(first.kind, first.seq, (*first.substreams, first.substreams[-1]))
    with pytest.raises(StreamStructureError, match="twice"):
        _decode_all(header, [doubled, *units[1:]])


@pytest.mark.parametrize(
    ("level", "missing"),
    [(2, SubStreamType.SEGMENTATION), (2, SubStreamType.FLOW), (1, SubStreamType.TRACKS)],
)
def test_a_missing_substream_is_refused(level, missing):
    # level 1 without a box rate: every frame carries its boxes
    config = synthetic_config(level, box_rate=0.0) if level == 1 else None
    header, units = synthetic_stream(level=level, count=2, config=config)
    frame = units[1]
    cut = Unit(frame.kind, frame.seq, tuple(s for s in frame.substreams if s.type != missing))
    with pytest.raises(StreamStructureError, match=f"missing.*{missing.name}"):
        _decode_all(header, [units[0], cut, units[2]])


def test_a_box_rate_stream_may_leave_a_frames_boxes_out_but_no_more():
    """With ``box_rate`` a frame without boxes decodes (everyone at their prediction), but
    not more frames in a row than the rate allows: 3 a second at 7 fps, one."""
    config = synthetic_config(1, box_rate=3.0, keyframe_interval=0)
    header, units = synthetic_stream(level=1, count=3, config=config)

    def boxless(unit: Unit) -> Unit:
        return Unit(unit.kind, unit.seq, tuple(s for s in unit.substreams
                                               if s.type == SubStreamType.KEYFRAME_IMAGE))

    decoder = ScaffoldDecoder(header)
    first = decoder.decode_unit(units[0]).scaffold.tracks
    second = decoder.decode_unit(boxless(units[1])).scaffold.tracks
    np.testing.assert_array_equal(second.ids, first.ids)  # seen once: predicted where it was
    np.testing.assert_array_equal(second.boxes, first.boxes)
    with pytest.raises(StreamStructureError, match="2 frames without boxes.*allows 1"):
        decoder.decode_unit(boxless(units[2]))


def test_a_keyframe_without_its_picture_is_refused():
    header, units = synthetic_stream(level=0, count=1)
    key = units[0]
    kept = tuple(s for s in key.substreams if s.type != SubStreamType.KEYFRAME_IMAGE)
    bare = Unit(UnitKind.KEYFRAME, 0, kept)
    with pytest.raises(StreamStructureError, match="KEYFRAME_IMAGE"):
        _decode_all(header, [bare, units[1]])


def test_end_must_count_the_frames_and_nothing_follows_it():
    header, units = synthetic_stream(level=0, count=2)
    with pytest.raises(StreamStructureError, match="END"):
        _decode_all(header, [*units[:2], Unit(UnitKind.END, 5)])
    decoder = ScaffoldDecoder(header)
    for unit in units:
        decoder.decode_unit(unit)
    with pytest.raises(StreamStructureError, match="follows the END"):
        decoder.decode_unit(units[0])


def test_a_stream_cut_at_a_unit_boundary_is_incomplete():
    header, units = synthetic_stream(level=0, count=4)
    with pytest.raises(IncompleteStreamError, match="2 frame.*4") as info:
        _decode_all(header, units[:2])
    assert (info.value.frames_decoded, info.value.frames_expected) == (2, 4)
    unknown = dataclasses.replace(header, num_frames=0)
    with pytest.raises(IncompleteStreamError, match="END"):
        _decode_all(unknown, units[:2])
    with pytest.raises(IncompleteStreamError):
        list(decode_stream(stream_bytes(header, units[:3])))


def test_corrupt_payloads_are_typed_errors():
    header, units = synthetic_stream(level=2, count=2)
    frame = units[1]
    damaged = tuple(SubStream(s.type, s.payload[:1] + b"\xff" * 12) for s in frame.substreams)
    with pytest.raises(ScaffoldCodecError, match="payload"):
        _decode_all(header, [units[0], Unit(frame.kind, frame.seq, damaged), units[2]])


def test_many_ids_in_a_label_map_are_decoded_in_one_pass():
    from semcodec.codec.scaffold.codec import tracks_from_labels

    labels = (np.random.default_rng(0).integers(0, 4000, (64, 48)) % 4000).astype(np.uint16)
    tracks = tracks_from_labels(labels, (96, 128))
    ids = np.unique(labels[labels > 0])
    np.testing.assert_array_equal(tracks.ids, ids)
    for box, track_id in zip(tracks.boxes, ids, strict=True):  # the plain per-id definition
        ys, xs = np.nonzero(labels == track_id)
        expected = [xs.min() * 2, ys.min() * 2, (xs.max() + 1) * 2, (ys.max() + 1) * 2]
        np.testing.assert_array_equal(box, np.asarray(expected, np.float32))


# ------------------------------------------------------------------ through the CLI


def test_cli_refuses_duplicate_keyframes_with_status_2(tmp_path, capsys):
    header, units = synthetic_stream(level=0, count=3)
    key = units[0]
    status = _cli(tmp_path, header, [key, key, key, Unit(UnitKind.END, 3)])
    err = capsys.readouterr().err
    assert status == 2
    assert err.startswith("cloud-decoder: error:") and err.count("\n") == 1
    assert not (tmp_path / "out").exists()


def test_cli_truncated_stream_is_an_error_unless_allow_partial(tmp_path, capsys):
    header, units = synthetic_stream(level=0, count=4)
    assert _cli(tmp_path, header, units[:2]) == 2
    assert "--allow-partial" in capsys.readouterr().err
    assert not (tmp_path / "out").exists()
    assert _cli(tmp_path, header, units[:2], "--allow-partial") == 0
    err = capsys.readouterr().err
    assert "warning" in err.lower() and "2" in err
    info = json.loads((tmp_path / "out" / "stream.json").read_text())
    assert info["complete"] is False and "END" in info["incomplete"]
    assert len(list((tmp_path / "out" / "frames").glob("*.png"))) == 2


def test_cli_truncation_inside_a_unit_with_allow_partial_keeps_the_frames_before(tmp_path):
    header, units = synthetic_stream(level=0, count=4)
    data = stream_bytes(header, units)
    cut = len(stream_bytes(header, units[:2])) + 5
    path = tmp_path / "cut.semc"
    path.write_bytes(data[:cut])
    out = tmp_path / "out"
    assert cloud_main(["decode", str(path), "-o", str(out)]) == 2
    assert cloud_main(["decode", str(path), "-o", str(out), "--allow-partial", "-q"]) == 0
    assert len(list((out / "frames").glob("*.png"))) == 2


def test_cli_odd_frame_sizes_get_an_overview(tmp_path):
    header, units = synthetic_stream(level=0, count=2, size=(385, 289))
    assert _cli(tmp_path, header, units) == 0
    import av

    with av.open(str(tmp_path / "out" / "overview.mp4")) as container:
        stream = container.streams.video[0]
        assert (stream.codec_context.width, stream.codec_context.height) == (386, 290)
        assert len(list(container.decode(stream))) == 2


def test_cli_huge_quantisation_steps_are_refused(tmp_path, capsys):
    header, units = synthetic_stream(level=2, count=2)
    assert _cli(tmp_path, with_settings(header, pose_step_px=1e9), units) == 2
    assert "pose_step_px" in capsys.readouterr().err
