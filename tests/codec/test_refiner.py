"""The learned refiner of ``animate`` (issue 39 item 4): its FLOPs counted (known answer),
the limb maps, the start from the restorer, the shipped weights refused on a wrong sha256,
the decoder option refused where it cannot apply, and a decode with it deterministic across
processes with its FLOPs in the rows."""

from __future__ import annotations

import hashlib
import io
import subprocess
import sys

import numpy as np
import pytest
import torch

from semcodec.codec.reconstruct.animate import ref_joints
from semcodec.codec.reconstruct.refiner import (
    IN_CHANNELS,
    POSE_CHANNELS,
    SHIPPED_REFINERS,
    PersonRefiner,
    flops_per_pixel,
    from_restorer,
    load_refiner,
    pose_maps,
    refine_person,
    refined_size,
    refiner_weights,
    save_refiner,
)
from semcodec.codec.reconstruct.restore import ReferenceRestorer


def expected_flops_per_pixel(width: int, blocks: int) -> int:
    """Multiply-adds x 2 per full-resolution output pixel, layer by layer (bias not counted,
    as ``FlopCounterMode``): head, stride-2 down (1/4 of the pixels), the blocks at half
    resolution, the transposed convolution (4x4 kernel over the half-resolution input), the
    full-resolution block and the 4-channel output."""
    w, w2 = width, 2 * width
    head = 2 * IN_CHANNELS * w * 9
    down = 2 * w * w2 * 9 / 4
    mid = blocks * 2 * (2 * w2 * w2 * 9) / 4
    up = 2 * w2 * w * 16 / 4
    fuse = 2 * (2 * w * w * 9)
    out = 2 * w * 4 * 9
    return int(head + down + mid + up + fuse + out)


@pytest.mark.parametrize("width,blocks", [(8, 4), (32, 4), (4, 1)])
def test_the_refiners_flops_are_counted_known_answer(width, blocks):
    model = PersonRefiner(width, blocks)
    assert flops_per_pixel(model) == expected_flops_per_pixel(width, blocks)
    assert expected_flops_per_pixel(8, 4) == 15424  # the w8 refiner: 71 MFLOP a 96x48 person


def test_the_width_is_a_compute_knob_over_a_decade():
    assert flops_per_pixel(PersonRefiner(32, 4)) > 10 * flops_per_pixel(PersonRefiner(8, 4))


def test_limb_maps_peak_on_visible_bones_and_are_empty_for_hidden_ones():
    uv = np.zeros((13, 2))
    uv[:, 0] = 0.0
    uv[:, 1] = np.linspace(0.1, 0.95, 13)
    visible = np.ones(13, bool)
    visible[[9, 10]] = False  # knees hidden: no upper or lower leg
    maps = pose_maps(uv, visible, (48, 96))
    assert maps.shape == (len(POSE_CHANNELS), 96, 48) and maps.dtype == np.float32
    joints = ref_joints(uv, (48, 96))
    x, y = (int(v) for v in 0.5 * (joints[1] + joints[3]))  # on the left upper arm
    assert maps[1, y, x] > 0.9 and maps[1, 0, 0] < 1e-3
    assert maps[3].max() == 0 and maps[4].max() == 0
    assert maps[0].max() > 0.9  # the torso
    assert pose_maps(uv, np.zeros(13, bool), (48, 96)).max() == 0


def test_a_refiner_started_from_the_restorer_is_the_restorer_with_the_alpha_kept():
    torch.manual_seed(0)
    restorer = ReferenceRestorer(8, 2).eval()
    refiner = from_restorer(restorer).eval()
    animated, reference = torch.rand(2, 1, 3, 32, 16) * 2 - 1
    alpha = torch.rand(1, 1, 32, 16)
    maps = torch.rand(1, len(POSE_CHANNELS), 32, 16)
    with torch.inference_mode():
        rgb, out_alpha = refiner(animated, reference, alpha, maps)
        assert torch.allclose(rgb, restorer(animated, reference), atol=1e-5)
        assert torch.allclose(out_alpha, alpha, atol=1e-6)


def test_refine_person_sizes_and_round_trip_of_the_weights(tmp_path):
    torch.manual_seed(1)
    model = PersonRefiner(4, 1).eval()
    path = save_refiner(model, tmp_path / "r.pt", {"note": "test"})
    again = load_refiner(path)
    assert again.metadata == {"note": "test"} and (again.width, again.blocks) == (4, 1)
    ref = np.random.default_rng(0).integers(0, 255, (24, 12, 3), np.uint8)
    uv = np.zeros((13, 2))
    size = refined_size(ref.shape, 80.5)
    assert size == (40, 80)
    assert refined_size(ref.shape, 300) == (48, 96)  # at most 96 high
    rgb, alpha = refine_person(again, ref, np.ones((24, 12), np.float32), ref, uv,
                               np.ones(13, bool), size)  # fmt: skip
    assert rgb.shape == (80, 40, 3) and rgb.dtype == np.uint8
    assert alpha.shape == (80, 40) and alpha.min() >= 0 and alpha.max() <= 1
    with pytest.raises(Exception, match="refiner"):
        load_refiner(tmp_path / "missing.pt")


def test_the_refiner_and_the_restorer_run_on_one_thread_and_restore_the_count():
    """Both networks run on :data:`INFERENCE_THREADS` torch threads (two threads of a shared
    CPU made a w8 call 100x slower), whatever the process uses, and leave its count as it
    was."""
    from semcodec.codec.reconstruct.restore import restore_reference
    from semcodec.codec.reconstruct.weights import INFERENCE_THREADS

    seen = []
    refiner, restorer = PersonRefiner(4, 1).eval(), ReferenceRestorer(4, 1).eval()
    for model in (refiner, restorer):
        model.register_forward_pre_hook(lambda *_: seen.append(torch.get_num_threads()))
    ref = np.random.default_rng(0).integers(0, 255, (24, 12, 3), np.uint8)
    before = torch.get_num_threads()
    torch.set_num_threads(2)
    try:
        refine_person(refiner, ref, np.ones((24, 12), np.float32), ref, np.zeros((13, 2)),
                      np.ones(13, bool), (12, 24))  # fmt: skip
        restore_reference(restorer, ref, None, (12, 24))
        assert seen == [INFERENCE_THREADS, INFERENCE_THREADS] and INFERENCE_THREADS == 1
        assert torch.get_num_threads() == 2
    finally:
        torch.set_num_threads(before)


def test_a_restorer_file_is_not_a_refiner(tmp_path):
    from semcodec.codec.reconstruct import UnknownReconstructorError
    from semcodec.codec.reconstruct.restore import save_restorer

    path = save_restorer(ReferenceRestorer(4, 1), tmp_path / "restorer.pt", {})
    with pytest.raises(UnknownReconstructorError, match="refiner"):
        load_refiner(path)
    with pytest.raises(UnknownReconstructorError, match="refiner nope: not a shipped refiner"):
        refiner_weights("nope")


@pytest.mark.parametrize("short", sorted(SHIPPED_REFINERS))
def test_the_shipped_refiners_load_and_are_refused_on_a_wrong_sha256(short, tmp_path,
                                                                     monkeypatch):  # fmt: skip
    from semcodec.codec.core import models
    from semcodec.codec.reconstruct import create_reconstructor

    path = refiner_weights(short)
    assert path.stat().st_size <= 10_000_000
    spec = models.model_spec(SHIPPED_REFINERS[short])
    assert hashlib.sha256(path.read_bytes()).hexdigest() == spec.sha256
    assert load_refiner(path).width == int(short[1:])
    data = bytearray(path.read_bytes())
    data[-1] ^= 1
    (tmp_path / path.name).write_bytes(bytes(data))
    monkeypatch.setenv(models.MODELS_DIR_ENV, str(tmp_path))
    with pytest.raises(models.ModelChecksumError):
        create_reconstructor("animate", refiner=short)


@pytest.mark.parametrize("setting,message", [
    ("level=1,decoder=animate,refiner=w8", "pose_every"),
    ("level=1,pose_every=1,decoder=warp,refiner=w8", "--decoder animate"),
    ("level=1,pose_every=1,decoder=animate,refiner=w7", "refiner=w7"),
])  # fmt: skip
def test_a_refiner_that_cannot_apply_is_refused(setting, message):
    from semcodec.evaluation.codecs.base import Setting, SettingError
    from semcodec.evaluation.codecs.scaffold import ScaffoldCodec

    with pytest.raises(SettingError, match=message):
        ScaffoldCodec().check_setting(Setting.parse(setting))
    ScaffoldCodec().check_setting(Setting.parse("level=1,pose_every=1,decoder=animate,"
                                                "refiner=w8"))  # fmt: skip


DECODE = """
import hashlib, io, sys
import numpy as np
from semcodec.codec.bitstream import write_stream
from semcodec.codec.reconstruct import create_reconstructor
from semcodec.codec.scaffold.codec import decode_stream, encode_frames
from semcodec.codec.scaffold.levels import level_config
frames = np.load(sys.argv[1])
size = frames.shape[2], frames.shape[1]
header, units, _ = encode_frames(frames, level_config(1, pose_every=1), 7, size, len(frames))
buffer = io.BytesIO()
write_stream(buffer, header, units)
out = create_reconstructor("animate", refiner=sys.argv[2])
digest = hashlib.sha256()
for _, image in decode_stream(buffer.getvalue(), out):
    digest.update(image.tobytes())
print(digest.hexdigest(), out.refined, out.flops_per_frame())
"""


def test_a_decode_with_the_refiner_is_the_same_in_two_processes_and_counts_its_flops(
        sample_frames, tmp_path):  # fmt: skip
    from semcodec.codec.core.models import ModelNotFoundError, resolve_model

    try:
        resolve_model("pose_landmark_lite")
    except ModelNotFoundError as exc:
        pytest.skip(f"models are not beside the repository: {exc}")
    np.save(tmp_path / "frames.npy", sample_frames[:6])
    runs = [subprocess.run([sys.executable, "-c", DECODE, str(tmp_path / "frames.npy"), "w8"],
                           capture_output=True, text=True, check=True).stdout.split()
            for _ in range(2)]  # fmt: skip
    assert runs[0] == runs[1]
    digest, refined, flops = runs[0]
    assert int(refined) > 0 and int(flops) > 0
    # the refiner changes the picture: a decode without it differs
    from semcodec.codec.bitstream import write_stream
    from semcodec.codec.reconstruct import create_reconstructor
    from semcodec.codec.scaffold.codec import decode_stream, encode_frames
    from semcodec.codec.scaffold.levels import level_config

    frames = sample_frames[:6]
    header, units, _ = encode_frames(frames, level_config(1, pose_every=1), 7,
                                     (frames.shape[2], frames.shape[1]), len(frames))  # fmt: skip
    buffer = io.BytesIO()
    write_stream(buffer, header, units)
    plain = create_reconstructor("animate")
    digest_plain = hashlib.sha256()
    for _, image in decode_stream(buffer.getvalue(), plain):
        digest_plain.update(image.tobytes())
    assert digest_plain.hexdigest() != digest and plain.flops_per_frame() is None


def test_the_training_ranges_never_touch_the_measured_frames():
    from semcodec.evaluation.training.refiner import DEFAULT_RANGES, HELD_OUT

    measured = {"PETS09-S2L1-full": (501, 795), "TUD-Stadtmitte": (91, 179)}
    for part in DEFAULT_RANGES:
        first, last = measured[part.data]
        assert part.start + part.frames - 1 < first or part.start > last
    assert {p.data for p in HELD_OUT} == set(measured)
    for part in HELD_OUT:
        assert measured[part.data][0] <= part.start <= measured[part.data][1]


def test_training_examples_and_a_short_run_give_a_loadable_refiner(tmp_path):
    from pathlib import Path

    from semcodec.codec.core.models import ModelNotFoundError, resolve_model
    from semcodec.evaluation.training.refiner import FIELDS, examples, load_or_make, train
    from semcodec.evaluation.training.restorer import CANVAS, Range

    try:
        resolve_model("pose_landmark_lite")
        resolve_model("selfie_segmentation")
    except ModelNotFoundError as exc:
        pytest.skip(f"models are not beside the repository: {exc}")
    sample = str(Path(__file__).resolve().parents[2] / "datasets/sample/PETS09-S2L1-384x288")
    part = Range(sample, 1, 40, every=4)
    made = examples(part, np.random.default_rng(0))
    n = len(made["animated"])
    assert n > 5 and set(made) == set(FIELDS)
    assert made["animated"].shape == (n, *CANVAS, 3) and made["alpha"].shape == (n, *CANVAS)
    assert made["maps"].shape == (n, len(POSE_CHANNELS), *CANVAS) and made["maps"].max() > 200
    cache = tmp_path / "ex.npz"
    first = load_or_make(cache, (part,), 0)
    np.testing.assert_array_equal(load_or_make(cache, (part,), 0)["target"], first["target"])
    weights = train(tmp_path / "r", width=4, blocks=1, steps=2, batch=4, init="",
                    examples_file=cache, held_out=(part,), log=lambda _: None)  # fmt: skip
    model = load_refiner(weights)
    assert (model.width, model.blocks) == (4, 1) and model.metadata["steps"] == 2
    assert set(model.metadata["held_out"]) == {"examples", "rectangle", "animated", "refined"}
    with pytest.raises(ValueError, match="width"):
        train(tmp_path / "bad", width=4, init="ref_restorer_w8", examples_file=cache,
              held_out=(), log=lambda _: None)  # fmt: skip


def test_train_refiner_refuses_a_config_with_unknown_keys(tmp_path, capsys):
    from semcodec.evaluation.cli import main

    config = tmp_path / "c.toml"
    config.write_text("width = 8\nsteps_per_epoch = 3\n")
    try:
        status = main(["train-refiner", "--out", str(tmp_path / "o"), "--config", str(config)])
    except SystemExit as exc:
        status = int(exc.code or 0)
    assert status == 2 and "steps_per_epoch" in capsys.readouterr().err
    assert not (tmp_path / "o").exists()


def test_the_gpu_config_is_a_valid_training_config():
    import tomllib
    from pathlib import Path

    from semcodec.evaluation.cli.train import REFINER_KEYS

    path = Path(__file__).resolve().parents[2] / "docs/train-refiner-gpu.toml"
    config = tomllib.loads(path.read_text())
    assert set(config) <= set(REFINER_KEYS) and config["steps"] >= 10 * 400
