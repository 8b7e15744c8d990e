"""The steady-state protocol: a codec runs from the sequence's first frame and is charged
only for the bytes of the measured range, whose quality alone is measured."""

from __future__ import annotations

import io

import av
import numpy as np
import pytest

from semcodec.evaluation.bench import grid as bench
from semcodec.evaluation.bench.options import STEADY_INTRA_PERIOD
from semcodec.evaluation.cli import build_parser
from semcodec.evaluation.cli.run import grid_from_args
from semcodec.evaluation.codecs.base import CodecError, Setting, bytes_of_frames, create_codec
from semcodec.evaluation.metrics.image import psnr
from semcodec.evaluation.report.saving import saving_factors


@pytest.mark.parametrize("name, fmt", [("x264", "h264"), ("x265", "hevc")])
def test_frame_bytes_are_the_packets_of_the_elementary_stream(name, fmt, sample_frames):
    """Each frame's bytes are its own packet in the payload; the parameter sets belong to
    no frame, so frame bytes and headers add up to the payload."""
    frames = sample_frames[:12]
    encoded = create_codec(name, preset="ultrafast", gop=5).encode(frames, Setting.of(qp=35), 7)
    sizes = [f["video"] for f in encoded.frame_bytes]
    assert len(sizes) == 12 and min(sizes) > 0
    with av.open(io.BytesIO(encoded.payload), format=fmt) as container:
        packets = [p.size for p in container.demux(video=0) if p.size]
    headers = encoded.num_bytes - sum(sizes)
    assert headers > 0
    assert packets == [headers + sizes[0], *sizes[1:]]
    # intra frames at 0, 5, 10 are the largest of their groups
    assert sizes[5] > max(sizes[1:5]) and sizes[10] > max(sizes[6:10])
    assert bytes_of_frames(encoded, 7) == {"video": sum(sizes[7:])}
    with pytest.raises(CodecError, match="outside"):
        bytes_of_frames(encoded, 12)


def test_a_codec_that_cannot_split_its_bytes_is_refused(sample_frames):
    encoded = create_codec("raw").encode(sample_frames[:2], Setting.of(format="rgb24"), 7)
    assert bytes_of_frames(encoded, 1) == {"rgb": 288 * 384 * 3}
    encoded.frame_bytes = None
    with pytest.raises(CodecError, match="bytes per frame"):
        bytes_of_frames(encoded, 1)


def _grid(tmp_path, protocol: str, gop: int):
    from semcodec.codec.core.sources import sample_path

    return bench.GridConfig(sequences=[str(sample_path())], codecs={"x264": ["qp=30"]},
                            out_dir=tmp_path, frames=6, start=31, metrics=("psnr",),
                            codec_options={"x264": {"preset": "ultrafast", "gop": gop}},
                            protocol=protocol)  # fmt: skip


def test_a_steady_cell_is_charged_and_measured_on_its_range_only(tmp_path):
    from semcodec.codec.core.sources import sample_path

    config = _grid(tmp_path, "steady", 10)
    (row,) = bench.run_grid(config, progress=False)
    assert (row["protocol"], row["warmup_frames"], row["start"], row["frames"]) == (
        "steady", 30, 31, 6)  # fmt: skip
    # the same continuous encode of frames 1..36, done here: the row has frames 31..36
    frames, _, _ = bench.load_sequence(str(sample_path()), 36)
    codec = create_codec("x264", preset="ultrafast", gop=10)
    encoded = codec.encode(frames, Setting.of(qp=30), 7)
    decoded = codec.decode(encoded)
    expected = sum(f["video"] for f in encoded.frame_bytes[30:])
    assert row["bytes"] == row["bytes_video"] == expected < encoded.num_bytes
    assert row["bpp"] == pytest.approx(8 * expected / (6 * 288 * 384))
    assert row["psnr"] == pytest.approx(psnr(frames[30:], decoded[30:]))
    # a cold cell of the same range is another cell, with its own intra frame at frame 31
    cold = bench.plan_cells(_grid(tmp_path, "cold", 10), {})
    assert cold[0].warmup == 0 and cold[0].key() != bench.plan_cells(config, {})[0].key()
    with pytest.raises(bench.BenchError, match="protocol"):
        bench.validate_grid(_grid(tmp_path, "warm", 10))


def test_steady_gives_every_codec_one_intra_period():
    parser = build_parser()
    args = parser.parse_args(["run", "--codecs", "x265,scaffold", "--protocol", "steady"])
    config = grid_from_args(args)
    assert config.protocol == "steady"
    assert config.codec_options["x265"]["gop"] == STEADY_INTRA_PERIOD
    assert config.codec_options["scaffold"] == {"keyframe_interval": STEADY_INTRA_PERIOD}
    args = parser.parse_args(["run", "--codecs", "x265,scaffold", "--protocol", "steady",
                              "--gop", "75"])  # fmt: skip
    assert grid_from_args(args).codec_options["scaffold"] == {"keyframe_interval": 75}
    cold = grid_from_args(parser.parse_args(["run", "--codecs", "x265,scaffold"]))
    assert cold.codec_options["x265"]["gop"] == 0 and "scaffold" not in cold.codec_options
    scaffold = create_codec("scaffold", keyframe_interval=75)
    assert scaffold.level_config(Setting.of(level=1)).keyframe_interval == 75
    nine = scaffold.level_config(Setting.parse("level=1,keyframe_interval=9"))
    assert nine.keyframe_interval == 9


def test_scaffold_frame_bytes_add_up_and_silhouettes_count_the_range(sample_frames):
    codec = create_codec("scaffold")
    encoded = codec.encode(sample_frames[:8], Setting.of(level=1), 7, measured_from=4)
    per_stream = bytes_of_frames(encoded, 0)
    header_and_end = encoded.num_bytes - sum(per_stream.values())
    assert 0 < header_and_end < 2000  # the stream header and END belong to no frame
    for name, n in per_stream.items():
        whole = encoded.stream_bytes[name]
        assert n == whole or (name == "header" and n == whole - header_and_end)
    assert "keyframe" not in bytes_of_frames(encoded, 4)  # the plate is frame 0's
    decoded = codec.decode(encoded)
    assert decoded.shape == sample_frames[:8].shape
    counts = encoded.metadata["counts"]
    people = sum(len(b) for b in encoded.metadata["person_boxes"][4:])
    assert counts["person_frames"] == people > 0
    # the references' cost over the measured frames: their bytes per person-second
    refs = bytes_of_frames(encoded, 4).get("appearance", 0)
    assert counts["ref_bytes_per_person_s"] == pytest.approx(refs / (people / 7))
    assert 0 <= counts["ref_share"] < 1


def _row(codec, setting, bpp, moda, protocol):
    return {"sequence": "s", "codec": codec, "setting": setting, "curve": codec, "bpp": bpp,
            "moda": moda, "protocol": protocol}  # fmt: skip


def test_saving_compares_a_row_with_the_baselines_of_its_own_protocol():
    rows = [_row("x265", "qp=40", 0.01, 0.5, "cold"), _row("x265", "qp=45", 0.005, 0.3, "cold"),
            _row("x265", "qp=40", 0.004, 0.5, "steady"),
            _row("x265", "qp=45", 0.002, 0.3, "steady"),
            _row("scaffold", "level=1", 0.004, 0.5, "steady"),
            {**_row("scaffold", "level=1", 0.004, 0.5, "cold"), "protocol": None}]  # fmt: skip
    found = {s.protocol: s for s in saving_factors(rows) if s.metric == "moda"}
    assert found["steady"].factor == pytest.approx(1.0)
    assert found["cold"].factor == pytest.approx(2.5)  # a row without the column is cold
    assert np.isfinite(found["cold"].baseline_bpp)


def test_settings_differing_only_in_the_decoder_share_one_encode(sample_frames, monkeypatch):
    from semcodec.evaluation.codecs import scaffold as scaffold_codec

    calls = []
    encode = scaffold_codec.ScaffoldCodec._encode
    monkeypatch.setattr(scaffold_codec.ScaffoldCodec, "_encode",
                        lambda self, *a: calls.append(a[1]) or encode(self, *a))  # fmt: skip
    monkeypatch.setattr(scaffold_codec, "_LAST_STREAM", {})
    frames = sample_frames[:4]
    first = create_codec("scaffold").encode(frames, Setting.parse("level=1,decoder=warp"), 7)
    codec = create_codec("scaffold")
    again = codec.encode(frames, Setting.parse("level=1,decoder=restore"), 7)
    assert len(calls) == 1 and again.payload == first.payload
    assert str(again.setting) == "level=1,decoder=restore"
    codec.decode(again)  # decoding adds to the metadata of its own copy only
    assert "decoder" in again.metadata and "decoder" not in first.metadata
    codec.encode(frames, Setting.parse("level=1,target_bpp=0.002,decoder=restore"), 7)
    codec.encode(frames[:3], Setting.parse("level=1,target_bpp=0.002"), 7)
    assert len(calls) == 3  # another rate, other frames: coded again
    assert codec.curve_of(Setting.parse("level=1,target_bpp=0.002,decoder=restore")) == \
        "scaffold@level=1,decoder=restore"
    assert codec.curve_of(Setting.parse("level=2")) == "scaffold@level=2"
