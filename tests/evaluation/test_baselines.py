"""Baseline codecs round-trip real bytes on the embedded sample."""

from __future__ import annotations

import numpy as np
import pytest

from semcodec.evaluation.codecs.base import CodecError, Setting, SettingError, create_codec
from semcodec.evaluation.metrics.image import psnr


@pytest.mark.parametrize("name", ["x264", "x265"])
def test_video_round_trip_quality_improves_as_crf_falls(name, sample_frames):
    codec = create_codec(name, preset="ultrafast", gop=6)
    results = []
    for crf in (40, 32, 24):
        encoded = codec.encode(sample_frames, Setting.of(crf=crf), fps=7)
        decoded = codec.decode(encoded)
        assert encoded.num_bytes > 0
        assert encoded.stream_bytes == {"video": encoded.num_bytes}
        assert encoded.container_bytes > 0  # the MP4 boxes, reported apart
        assert decoded.shape == sample_frames.shape and decoded.dtype == np.uint8
        results.append((encoded.num_bytes, psnr(sample_frames, decoded)))
    sizes, quality = zip(*results, strict=True)
    assert sizes[0] < sizes[1] < sizes[2]
    assert quality[0] < quality[1] < quality[2]
    assert quality[0] > 24 and quality[2] < 50


def test_payload_is_a_decodable_elementary_stream(sample_frames):
    """The payload alone (no container) decodes: it is what a link would carry."""
    import io

    import av

    encoded = create_codec("x264", preset="ultrafast").encode(sample_frames, Setting.of(qp=30), 7)
    with av.open(io.BytesIO(encoded.payload), format="h264") as container:
        count = sum(1 for _ in container.decode(video=0))
    assert count == len(sample_frames)


@pytest.mark.parametrize("name, fmt", [("x264", "h264"), ("x265", "hevc")])
def test_low_delay_has_no_b_frames(name, fmt, sample_frames):
    import io

    import av
    from av.video.frame import PictureType

    encoded = create_codec(name, gop=4).encode(sample_frames, Setting.of(crf=30), 7)
    with av.open(io.BytesIO(encoded.payload), format=fmt) as container:
        kinds = [PictureType(f.pict_type).name for f in container.decode(video=0)]
    assert "B" not in kinds
    assert kinds.count("I") == 3  # frames 0, 4, 8 of 12


def test_downscale_costs_fewer_bytes_and_returns_full_size(sample_frames):
    codec = create_codec("x265", preset="ultrafast")
    full = codec.encode(sample_frames, Setting.parse("crf=30"), 7)
    half = codec.encode(sample_frames, Setting.parse("crf=30,scale=0.5"), 7)
    assert half.metadata["coded_width"] == 192 and half.metadata["coded_height"] == 144
    assert half.num_bytes < full.num_bytes
    assert codec.decode(half).shape == sample_frames.shape


@pytest.mark.parametrize("name", ["jpeg", "webp"])
def test_image_codecs(name, sample_frames):
    codec = create_codec(name)
    low = codec.encode(sample_frames[:4], Setting.of(q=20), 7)
    high = codec.encode(sample_frames[:4], Setting.of(q=90), 7)
    assert 0 < low.num_bytes < high.num_bytes
    assert sum(low.metadata["frame_bytes"]) == low.num_bytes
    q_low = psnr(sample_frames[:4], codec.decode(low))
    q_high = psnr(sample_frames[:4], codec.decode(high))
    assert 22 < q_low < q_high < 50


def test_raw_is_lossless_at_24_bits_per_pixel(sample_frames):
    codec = create_codec("raw")
    encoded = codec.encode(sample_frames, Setting(), 7)
    assert encoded.num_bytes == sample_frames.size
    np.testing.assert_array_equal(codec.decode(encoded), sample_frames)


@pytest.mark.parametrize(
    "name, setting",
    [
        ("x264", "crf=23,qp=20"),
        ("x264", "crf=60"),
        ("x265", "speed=3"),
        ("jpeg", "q=0"),
        ("webp", "crf=3"),
        ("x264", "crf=23,scale=1.5"),
        ("raw", "format=yuv"),
    ],
)
def test_bad_settings_are_rejected(name, setting, sample_frames):
    with pytest.raises(SettingError):
        create_codec(name).encode(sample_frames[:2], Setting.parse(setting), 7)


@pytest.mark.parametrize(
    "frames",
    [
        np.zeros((2, 16, 16), np.uint8),
        np.zeros((2, 16, 16, 3), np.float32),
        np.zeros((0, 16, 16, 3), np.uint8),
        [[1, 2, 3]],
    ],
)
def test_bad_frames_are_rejected(frames):
    with pytest.raises(CodecError):
        create_codec("x264").encode(frames, Setting.of(crf=30), 7)


@pytest.mark.parametrize("name, text", [("x264", b"x264 - core"), ("x265", b"x265 (build")])
def test_payload_carries_no_encoder_settings_sei(name, text, sample_frames):
    """Baselines carry only bytes that describe pictures: x265 info=0, x264's SEI dropped."""
    codec = create_codec(name)
    encoded = codec.encode(sample_frames[:3], Setting.parse("crf=30"), fps=7)
    assert text not in encoded.payload
    assert len(codec.decode(encoded)) == 3


@pytest.mark.parametrize("name", ["x264", "x265"])
def test_ipratio_boosts_the_intra_frame_of_a_static_camera(name, sample_frames):
    codec = create_codec(name)
    frames = sample_frames[:6]
    plain = codec.encode(frames, Setting.parse("qp=51"), fps=7)
    boosted = codec.encode(frames, Setting.parse("qp=51,ipratio=8"), fps=7)
    assert len(boosted.payload) > 2 * len(plain.payload)  # a finer first frame costs bytes
    first = [psnr(frames[:1], codec.decode(e)[:1]) for e in (plain, boosted)]
    assert first[1] > first[0] + 2  # ... and shows in its quality
    assert codec.curve_of(Setting.parse("qp=45,ipratio=8")) == f"{name}@ipratio=8"
    assert codec.curve_of(Setting.parse("qp=45,ipratio=8,scale=0.5")) == (
        f"{name}@ipratio=8,scale=0.5")
    with pytest.raises(SettingError, match="ipratio"):
        codec.check_setting(Setting.parse("qp=45,ipratio=0.5"))


def test_static_camera_family_joins_the_x265_grid():
    from semcodec.evaluation.cli import build_parser
    from semcodec.evaluation.cli.common import STATIC_CAMERA_SETTINGS
    from semcodec.evaluation.cli.run import grid_from_args

    args = build_parser().parse_args(["run", "--codecs", "x265", "--static-camera"])
    settings = grid_from_args(args).codecs["x265"]
    assert settings[:4] == ["crf=23", "crf=28", "crf=33", "crf=38"]
    assert settings[4:] == list(STATIC_CAMERA_SETTINGS) and "qp=51,ipratio=16" in settings


def _decoder(text: str) -> tuple[str, dict]:
    """The reconstructor and options the scaffold codec decodes setting ``text`` with."""
    spec = create_codec("scaffold").decoder_of(Setting.parse(text))
    return spec.name, dict(spec.options)


def test_scaffold_matte_setting_reaches_the_warp_decoder():
    assert _decoder("level=1,decoder=warp,matte=1") == ("warp", {"matte": True})
    for bad in ("level=1,decoder=warp,matte=2", "level=1,decoder=diffusion,matte=1"):
        with pytest.raises(SettingError, match="matte"):
            _decoder(bad)


def test_scaffold_fade_setting_reaches_the_warp_decoder():
    assert _decoder("level=1,decoder=warp,fade=3") == ("warp", {"fade": 3})
    for bad in ("level=1,fade=-1", "level=1,fade=1.5", "level=1,decoder=diffusion,fade=2"):
        with pytest.raises(SettingError, match="fade"):
            _decoder(bad)


def test_scaffold_smooth_setting_reaches_the_warp_and_restore_decoders():
    assert _decoder("level=1,decoder=warp,smooth_s=0") == ("warp", {"smooth_s": 0.0})
    assert _decoder("level=1,decoder=restore,smooth_s=0.1") == ("restore", {"smooth_s": 0.1})
    bad_settings = ("level=1,smooth_s=-1", "level=1,smooth_s=x",
                    "level=1,decoder=diffusion,smooth_s=0")  # fmt: skip
    for bad in bad_settings:
        with pytest.raises(SettingError, match="smooth_s"):
            _decoder(bad)


def test_a_setting_without_a_decoder_lays_its_options_over_the_default():
    from semcodec.codec.reconstruct.pipeline import DEFAULT_DECODER

    name, options = _decoder("level=1,memory_mb=2")
    assert name == DEFAULT_DECODER.name
    assert options == {**dict(DEFAULT_DECODER.options), "memory_mb": 2.0}


def test_silhouette_count_keeps_references_over_a_plate_refresh_not_a_keyframe():
    from semcodec.codec.core.types import DecodedFrame, FrameScaffold, Tracks
    from semcodec.evaluation.codecs.scaffold import SilhouetteCount

    one = Tracks(np.array([[0, 0, 10, 30]], np.float32), np.ones(1, np.float32), np.array([4]))
    picture = np.zeros((8, 8, 3), np.uint8)
    ref = np.zeros((30, 10, 3), np.uint8)

    def frame(n, image=None, refs=None, refresh=False):
        return DecodedFrame(FrameScaffold(number=n, tracks=one), (8, 8), image, refs or {},
                            plate=True, plate_refresh=refresh)  # fmt: skip

    count = SilhouetteCount(fps=1.0)
    count.add(frame(1, picture))  # keyframe, no reference yet: a silhouette
    count.add(frame(2, refs={4: ref}))
    count.add(frame(3, picture, refresh=True))  # a better plate: the reference stays
    count.add(frame(4, picture))  # a keyframe: references start over
    row = count.row()
    assert row["silhouettes"] == 2 and row["person_frames"] == 4
    assert row["silhouettes_after_1s"] == 1  # frame 4: seen since frame 1, 3 s before


def test_reference_costs_known_answer():
    from semcodec.codec.bitstream import SubStream, SubStreamType, Unit, UnitKind
    from semcodec.evaluation.codecs.scaffold import reference_costs

    def unit(seq, refs=0):
        subs = [SubStream(SubStreamType.TRACKS, b"x" * 10)]
        if refs:
            subs.append(SubStream(SubStreamType.APPEARANCE, b"r" * refs))
        return Unit(UnitKind.FRAME if seq else UnitKind.KEYFRAME, seq, tuple(subs))

    units = [unit(0, 100), unit(1), unit(2, 50), Unit(UnitKind.END, 3)]
    two = np.zeros((2, 4), np.float32)
    costs = reference_costs(units, [two, two, two], fps=2.0)
    total = sum(len(u.to_bytes()) for u in units[:3])
    assert costs["ref_share"] == pytest.approx(150 / total)
    assert costs["ref_bytes_per_person_s"] == pytest.approx(150 / (6 / 2.0))  # 6 person-frames
    later = reference_costs(units, [two, two, two], fps=2.0, measured_from=2)  # steady state
    assert later["ref_share"] == pytest.approx(50 / len(units[2].to_bytes()))
    assert later["ref_bytes_per_person_s"] == pytest.approx(50 / 1.0)
    assert reference_costs(units[1:2], [np.zeros((0, 4))], fps=1.0)["ref_bytes_per_person_s"] == 0


def test_scaffold_memory_budget_setting_reaches_the_restore_decoder():
    assert _decoder("level=1,decoder=restore,memory_mb=2") == ("restore", {"memory_mb": 2.0})
    for bad in ("level=1,decoder=restore,memory_mb=-1", "level=1,decoder=warp,memory_mb=2",
                "level=1,decoder=restore,memory_mb=x"):
        with pytest.raises(SettingError, match="memory_mb"):
            _decoder(bad)
