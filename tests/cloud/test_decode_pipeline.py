"""One decode pipeline: ``cloud-decoder decode``, the service's decoder and the benchmark
decode one stream with one decoder to the same frames, and the decoder's text is read,
checked and refused in one place (:mod:`codec.reconstruct.pipeline`)."""

from __future__ import annotations

import hashlib
import json

import cv2
import numpy as np
import pytest

from semcodec.cloud.cli import main as cloud_main
from semcodec.codec.reconstruct.pipeline import (
    DEFAULT_DECODER,
    OPTIONS,
    DecoderOptionError,
    DecoderSpec,
)


def _digest(frames) -> str:
    digest = hashlib.sha256()
    for frame in frames:
        digest.update(np.ascontiguousarray(frame).tobytes())
    return digest.hexdigest()


@pytest.fixture(scope="module")
def half_plate_stream(sample_frames, tmp_path_factory):
    """``(path, header)`` of 4 level-1 frames of the sample with its plate sent at half size
    and room for references (target 0.2 BPP)."""
    from semcodec.codec.bitstream import write_stream
    from semcodec.codec.scaffold.codec import encode_frames
    from semcodec.codec.scaffold.levels import level_config

    config = level_config(1, plate_scales="0.5", target_bpp=0.2)
    header, units, _ = encode_frames(iter(sample_frames[:4]), config, 7.0, (384, 288), 4)
    path = tmp_path_factory.mktemp("pipeline") / "half.semc"
    write_stream(path, header, units)
    return path, header


def _available(spec: DecoderSpec, header) -> None:
    """Skips (with the reason) where a model of ``spec`` cannot be had here."""
    from semcodec.codec.core.models import ModelError

    try:
        spec.open(header)
    except (ModelError, DecoderOptionError) as exc:  # pragma: no cover - offline machine
        pytest.skip(f"decoder {spec} cannot be had here: {exc}")


def _offline(path, spec: DecoderSpec, out) -> list[np.ndarray]:
    assert cloud_main(["decode", str(path), "-o", str(out), "--no-overview", "--decoder",
                       str(spec)]) == 0  # fmt: skip
    return _pngs(out)


def _pngs(out) -> list[np.ndarray]:
    return [cv2.cvtColor(cv2.imread(str(p)), cv2.COLOR_BGR2RGB)
            for p in sorted((out / "frames").glob("*.png"))]  # fmt: skip


def _served(path, spec: DecoderSpec, out, frames: int) -> list[np.ndarray]:
    from semcodec.cloud.service import decode

    class Source:  # the session, as the decoder asks it
        def next_work(self, decoded):
            return "unit" if decoded <= frames else "finish"  # the frames, then END

        def frame_decoded(self, decoded, seconds, detections=None):
            pass

        def frame_shown(self, frame, picture):
            pass

        def rate_status(self, frame, status):
            pass

        def decode_done(self, count, complete, error):
            assert (count, complete, error) == (frames, True, None)

    settings = decode.DecodeSettings(decoder=str(spec), overview=False)
    decode.DecodeWorker(path, out, settings, Source()).run()
    return _pngs(out)


def _benched(path, spec: DecoderSpec, header) -> tuple[np.ndarray, dict]:
    from semcodec.evaluation.codecs.base import Encoded, Setting
    from semcodec.evaluation.codecs.scaffold import ScaffoldCodec

    width, height = header.width, header.height
    setting = Setting.parse(f"level=1,decoder={spec}")
    payload = path.read_bytes()
    encoded = Encoded(codec="scaffold", setting=setting, frames=header.num_frames, width=width,
                      height=height, fps=7.0, payload=payload, stream_bytes={},
                      encode_seconds=0.0)  # fmt: skip
    frames = ScaffoldCodec().decode(encoded)
    return frames, encoded.metadata["decoder"]


@pytest.mark.parametrize("text", [str(DEFAULT_DECODER), "warp",
                                  "restore,person_matte=none,sr=esrgan-slim-plates"])
def test_the_three_front_ends_give_the_same_frames(half_plate_stream, tmp_path, text):
    path, header = half_plate_stream
    spec = DecoderSpec.parse(text)
    _available(spec, header)
    offline = _offline(path, spec, tmp_path / "offline")
    served = _served(path, spec, tmp_path / "served", header.num_frames)
    benched, record = _benched(path, spec, header)
    assert len(offline) == header.num_frames == 4
    assert _digest(offline) == _digest(served) == _digest(benched)
    recorded = [json.loads((tmp_path / d / "stream.json").read_text())["decoder"]
                for d in ("offline", "served")]  # fmt: skip
    assert recorded[0] == recorded[1]
    assert recorded[0]["spec"] == record["spec"] == str(spec)
    if spec.sr != "bicubic":  # the plate was sent at half size: the network upscaled it
        assert recorded[0]["sr"] == spec.sr


def test_the_default_decoder_is_what_a_user_gets_without_options(half_plate_stream, tmp_path):
    path, header = half_plate_stream
    _available(DEFAULT_DECODER, header)
    assert cloud_main(["decode", str(path), "-o", str(tmp_path / "d"), "--no-overview"]) == 0
    record = json.loads((tmp_path / "d" / "stream.json").read_text())["decoder"]
    assert record["spec"] == str(DEFAULT_DECODER) and record["name"] == DEFAULT_DECODER.name


@pytest.mark.parametrize("text, words", [
    ("magic", "decoder 'magic': expected one of"),
    ("warp,memory_mb=3", "--memory-mb: only for --decoder animate or restore, not warp"),
    ("restore,memory_mb=-1", "memory_mb=-1): expected a number 0..1e+06"),
    ("restore,fade=1.5", "expected an integer >= 0"),
    ("restore,colour=red", "decoder option 'colour'"),
    ("restore,memory_mb", "'memory_mb' is not key=value"),
    ("restore,fade=1,fade=2", "fade given twice"),
    ("warp,person_matte=magic", "expected one of selfie_segmentation"),
    ("warp,sr=magic", "expected one of bicubic"),
    ("warp,device=tpu", "expected cpu, cuda or cuda:N"),
    ("warp,device=cuda", "runs no network on the device"),
])  # fmt: skip
def test_bad_decoders_are_refused_with_what_is_accepted(text, words):
    with pytest.raises(DecoderOptionError, match=None) as caught:
        DecoderSpec.parse(text)
    assert words in str(caught.value)


def test_the_text_round_trips_and_options_lay_over_the_default():
    spec = DecoderSpec.parse("restore,memory_mb=4,sr=esrgan-slim,person_matte=none")
    assert spec == DecoderSpec.parse(str(spec))
    assert dict(spec.options) == {"memory_mb": 4.0} and spec.sr == "esrgan-slim"
    over = DecoderSpec.parse("memory_mb=4")  # no name: the default's options and this one
    assert over.name == DEFAULT_DECODER.name
    assert dict(over.options) == {**dict(DEFAULT_DECODER.options), "memory_mb": 4.0}
    assert DecoderSpec.parse("") == DEFAULT_DECODER
    warp = DecoderSpec.from_mapping({"decoder": "warp", "matte": True})  # TOML's booleans
    assert warp.options == (("matte", True),) and str(warp) == "warp,matte=1"


def test_options_that_cannot_apply_to_the_stream_are_refused(half_plate_stream):
    _, header = half_plate_stream  # sent without the sparse pose
    with pytest.raises(DecoderOptionError, match="carries no pose"):
        DecoderSpec.parse("animate,refiner=w8").check(header)


def test_each_option_is_a_flag_of_decode_and_a_key_of_the_benchmark(capsys):
    from semcodec.evaluation.codecs.scaffold import DECODER_KEYS

    with pytest.raises(SystemExit):
        cloud_main(["decode", "--help"])
    text = " ".join(capsys.readouterr().out.split())
    for option in OPTIONS.values():
        assert option.flag in text
    assert set(DECODER_KEYS) == {"decoder", *OPTIONS}


def test_a_decoder_that_falls_behind_steps_down_and_back_up(half_plate_stream):
    from semcodec.codec.reconstruct.pipeline import PaceKeeper

    _, header = half_plate_stream
    _available(DEFAULT_DECODER, header)
    pipeline = DEFAULT_DECODER.open(header)
    assert pipeline.ladder() == ("full", "no redraw", "no person_matte", "no restorer")
    assert DecoderSpec.parse("warp").open(header).ladder() == ("full",)
    changes = []
    keeper = PaceKeeper(pipeline, fps=10.0, window_s=0.5, retry_s=1.0,
                        on_step=lambda rung, frame: changes.append((rung, frame)))  # fmt: skip
    for _ in range(5):  # 0.3 s a frame at 10 frames/s: behind
        pipeline.count += 1
        keeper.frame_done(0.3)
    assert pipeline.rung == 1 and pipeline.reconstructor.skipped == {"redraw"}
    for _ in range(5):
        pipeline.count += 1
        keeper.frame_done(0.3)
    assert pipeline.rung == 2 and pipeline.reconstructor.skipped == {"redraw", "person_matte"}
    for _ in range(20):  # 0.01 s a frame: well ahead, one rung up after retry_s
        pipeline.count += 1
        keeper.frame_done(0.01)
    assert pipeline.rung == 0 and changes[:2] == [("no redraw", 6), ("no person_matte", 11)]
    assert pipeline.record()["steps"][0] == {"frame": 6, "rung": "no redraw"}
    for _ in range(5):  # behind again right after stepping up: the next try waits longer
        pipeline.count += 1
        keeper.frame_done(0.3)
    assert pipeline.rung == 1 and keeper.retry == 2 * keeper.base_retry


def test_a_stepped_down_restore_skips_its_networks(half_plate_stream):
    path, header = half_plate_stream
    _available(DEFAULT_DECODER, header)
    from semcodec.codec.bitstream import read_stream

    pipeline = DEFAULT_DECODER.open(header)
    pipeline.step_to(3)
    list(pipeline.frames(read_stream(path)[1]))
    stepped = pipeline.reconstructor
    assert stepped.restored == 0 and stepped._matter.flops == 0 and stepped.redrawer.windows == 0
    full = DEFAULT_DECODER.open(header)
    list(full.frames(read_stream(path)[1]))
    assert full.reconstructor.restored > 0 and full.reconstructor._matter.flops > 0
    assert full.reconstructor.redrawer.windows > 0


def test_the_restorer_on_a_gpu_stays_within_its_tolerance_of_the_cpu(half_plate_stream):
    import torch

    if not torch.cuda.is_available():
        pytest.skip("no CUDA device here: device=cuda is checked on a GPU machine")
    from semcodec.codec.bitstream import read_stream
    from semcodec.codec.reconstruct.restore import GPU_TOLERANCE

    path, header = half_plate_stream
    cpu, gpu = (DecoderSpec.parse(f"restore,person_matte=none,device={d}").open(header)
                for d in ("cpu", "cuda"))  # fmt: skip
    for (_, a), (_, b) in zip(cpu.frames(read_stream(path)[1]), gpu.frames(read_stream(path)[1]),
                              strict=True):  # fmt: skip
        assert np.abs(a.astype(int) - b.astype(int)).max() <= GPU_TOLERANCE + 1
    assert gpu.record()["device"] == "cuda" and gpu.reconstructor.restored > 0


def test_people_whose_boxes_overlap_are_found_as_touching():
    from semcodec.codec.reconstruct.warp import touching

    boxes = np.array([[0, 0, 10, 30], [8, 2, 18, 32], [40, 0, 50, 30], [50, 0, 60, 30]], float)
    # the first two overlap; the last two only share an edge: apart
    assert touching(boxes).tolist() == [True, True, False, False]
    assert touching(np.zeros((0, 4))).tolist() == []
    # each widened by a third of its height (10 px a side): 20 px apart touch, 21 do not
    assert touching(np.array([[40, 0, 50, 30], [70, 0, 80, 30]]), gap=1 / 3).tolist() == \
        [False, False]
    assert touching(np.array([[40, 0, 50, 30], [69, 0, 79, 30]]), gap=1 / 3).tolist() == \
        [True, True]


def test_a_neighbour_keeps_its_rectangle_at_the_near_floor():
    """With ``near_floor=1`` a person overlapping another is drawn as their whole rectangle
    although their matte says nobody is there; apart, the same matte hides them."""
    from semcodec.codec.core.types import DecodedFrame, FrameScaffold, Tracks
    from semcodec.codec.reconstruct.warp import WarpReconstructor

    plate = np.zeros((60, 90, 3), np.uint8)
    ref = np.full((30, 10, 3), 200, np.uint8)

    def drawn(boxes, floor):
        rec = WarpReconstructor(smooth_s=0, near_floor=floor)
        rec._person = lambda track_id, frame: (ref, np.zeros((30, 10), np.float32))
        tracks = Tracks(boxes=np.array(boxes, np.float32), scores=np.ones(2, np.float32),
                        ids=np.array([1, 2], np.int32))  # fmt: skip
        frame = DecodedFrame(FrameScaffold(1, tracks), (90, 60), keyframe_image=plate,
                             plate=True)  # fmt: skip
        return rec.reconstruct(frame)

    together, apart = [[10, 10, 20, 40], [15, 12, 25, 42]], [[10, 10, 20, 40], [60, 10, 70, 40]]
    assert drawn(together, 1.0).max() == 200  # kept apart by their rectangles
    assert drawn(together, 0.0).max() == 0 and drawn(apart, 1.0).max() == 0  # cut out
