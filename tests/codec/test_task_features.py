"""Tests of the task-feature codec (issue 14): the split detector, the bottleneck file, the
unit coder (round trips, another process, bad units) and the training step."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import numpy as np
import pytest
import torch

from semcodec.codec.entropy.features import FeatureCodingError, count_symbols, tables_from_counts
from semcodec.codec.task.bottleneck import (
    BottleneckConfig,
    BottleneckFileError,
    FeatureBottleneck,
    TaskBottleneck,
    load_bottleneck,
)
from semcodec.codec.task.coder import TaskDecoder, TaskEncoder
from semcodec.codec.task.split import SplitConfig, SplitDetector


@pytest.fixture(scope="module", autouse=True)
def one_torch_thread():
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


@pytest.fixture(scope="module")
def random_detector() -> SplitDetector:
    """The split detector with random weights (the coder does not care which)."""
    from semcodec.codec.detection.ssdlite import SSDLiteMobileNetV2

    torch.manual_seed(0)
    model = SSDLiteMobileNetV2().eval().fuse_batchnorm()
    for p in model.parameters():
        p.requires_grad_(False)
    return SplitDetector(model, SplitConfig())


def _bottleneck(latent: int = 4, seed: int = 0) -> TaskBottleneck:
    torch.manual_seed(seed)
    model = FeatureBottleneck(BottleneckConfig(latent=latent, hidden=8)).eval()
    rng = np.random.default_rng(seed)
    frames = [[rng.integers(-3, 4, (latent, 19, 19)) for _ in range(3)]]
    counts = count_symbols(frames, groups=latent)
    return TaskBottleneck(model, tables_from_counts(counts), SplitConfig(), counts,
                          {"beta": 0.5})  # fmt: skip


def test_bottleneck_file_round_trip(tmp_path) -> None:
    original = _bottleneck()
    path = original.save(tmp_path / "b.pt")
    loaded = load_bottleneck(path)
    assert loaded.sha256() == original.sha256()
    assert loaded.metadata == {"beta": 0.5} and loaded.split == SplitConfig()
    x = torch.randn(2, 64, 19, 19)
    assert np.array_equal(loaded.model.quantize(x), original.model.quantize(x))
    assert _bottleneck(seed=1).sha256() != original.sha256()
    assert not list(tmp_path.glob(".*partial"))


@pytest.mark.parametrize("content", [b"", b"garbage", None])
def test_bad_bottleneck_files_raise_typed_errors(tmp_path, content) -> None:
    path = tmp_path / "bad.pt"
    if content is None:  # a torch file that is not a bottleneck
        torch.save({"format": "something-else"}, path)
    else:
        path.write_bytes(content)
    with pytest.raises(BottleneckFileError):
        load_bottleneck(path)
    with pytest.raises(BottleneckFileError, match="no such"):
        load_bottleneck(tmp_path / "missing.pt")


def test_units_round_trip_intra_and_temporal(random_detector, sample_frames) -> None:
    bottleneck = _bottleneck()
    h, w = sample_frames.shape[1:3]
    encoder = TaskEncoder(bottleneck, random_detector, intra_period=4)
    decoder = TaskDecoder(bottleneck, random_detector, encoder.shape(h, w), h, w)
    frames = sample_frames[:6]
    for i, frame in enumerate(frames):
        unit = encoder.encode(frame)
        assert unit[0] == (0 if i % 4 == 0 else 1)  # intra at 0 and 4
        expected = encoder.latents(frame)
        assert np.array_equal(decoder.latents(unit), expected)
    assert encoder.shape(h, w).stacked == (4, 4 * 19, 19)


def test_skipped_positions_keep_their_previous_latents(random_detector, sample_frames) -> None:
    bottleneck = _bottleneck()
    h, w = sample_frames.shape[1:3]
    skipping = TaskEncoder(bottleneck, random_detector, intra_period=0, skip_threshold=10**6)
    decoder = TaskDecoder(bottleneck, random_detector, skipping.shape(h, w), h, w)
    first = decoder.latents(skipping.encode(sample_frames[0]))
    for frame in sample_frames[1:4]:
        assert np.array_equal(decoder.latents(skipping.encode(frame)), first)  # all skipped
    with pytest.raises(ValueError, match="skip_threshold"):
        TaskEncoder(bottleneck, random_detector, skip_threshold=-1)


def test_the_encoder_defaults_to_the_bottlenecks_skip_threshold(random_detector) -> None:
    bottleneck = _bottleneck()
    assert TaskEncoder(bottleneck, random_detector).skip_threshold == 0
    bottleneck.metadata["skip_threshold"] = 3
    assert TaskEncoder(bottleneck, random_detector).skip_threshold == 3


def test_version_1_files_need_their_tables_refitted(tmp_path) -> None:
    from semcodec.codec.task.bottleneck import load_transforms

    original = _bottleneck()
    blob = torch.load(__import__("io").BytesIO(original.to_bytes()), weights_only=True)
    blob["format"] = "semcodec-task-bottleneck/1"
    del blob["update_counts"]
    torch.save(blob, tmp_path / "v1.pt")
    with pytest.raises(BottleneckFileError, match="--refit"):
        load_bottleneck(tmp_path / "v1.pt")
    model, split, metadata = load_transforms(tmp_path / "v1.pt")
    x = torch.randn(1, 64, 19, 19)
    assert np.array_equal(model.quantize(x), original.model.quantize(x))
    assert split == SplitConfig() and metadata == {"beta": 0.5}


def test_decoding_in_another_process_gives_the_same_latents(random_detector, sample_frames,
                                                            tmp_path) -> None:  # fmt: skip
    bottleneck = _bottleneck()
    path = bottleneck.save(tmp_path / "b.pt")
    h, w = sample_frames.shape[1:3]
    encoder = TaskEncoder(bottleneck, random_detector, intra_period=0)
    units = [encoder.encode(f) for f in sample_frames[:3]]
    expected = np.stack([encoder.latents(f) for f in sample_frames[:3]])
    for i, u in enumerate(units):
        (tmp_path / f"u{i}").write_bytes(u)
    script = textwrap.dedent(f"""
        import numpy as np
        from semcodec.codec.task.bottleneck import load_bottleneck
        from semcodec.codec.task.coder import TaskDecoder, UnitShape
        b = load_bottleneck({str(path)!r})
        d = TaskDecoder(b, None, UnitShape(4, 4, 19), {h}, {w})
        q = [d.latents(open({str(tmp_path)!r} + f"/u{{i}}", "rb").read()) for i in range(3)]
        np.save({str(tmp_path / "q.npy")!r}, np.stack(q))
    """)
    subprocess.run([sys.executable, "-c", script], check=True, timeout=120)
    assert np.array_equal(np.load(tmp_path / "q.npy"), expected)


def test_bad_units_raise_feature_coding_errors(random_detector, sample_frames) -> None:
    bottleneck = _bottleneck()
    h, w = sample_frames.shape[1:3]
    encoder = TaskEncoder(bottleneck, random_detector)
    intra, temporal = encoder.encode(sample_frames[0]), encoder.encode(sample_frames[1])
    fresh = TaskDecoder(bottleneck, random_detector, encoder.shape(h, w), h, w)
    with pytest.raises(FeatureCodingError, match="intra unit"):
        fresh.latents(temporal)
    for bad in (b"", bytes([7]) + intra[1:], intra[:3]):
        with pytest.raises(FeatureCodingError):
            fresh.latents(bad)


def test_encoder_refuses_a_detector_cut_elsewhere(random_detector) -> None:
    other = SplitDetector(random_detector.model, SplitConfig(after=9))
    with pytest.raises(ValueError, match="trained after"):
        TaskEncoder(_bottleneck(), other)


def test_gradients_pass_the_detector_with_the_same_numbers(random_detector) -> None:
    feature = torch.randn(2, 64, 19, 19)
    with torch.no_grad():
        enc_ref, logits_ref = random_detector.raw_outputs(feature)
    x = feature.clone().requires_grad_(True)
    enc, logits = random_detector.raw_outputs(x)
    torch.testing.assert_close(enc, enc_ref, rtol=0, atol=1e-5)
    torch.testing.assert_close(logits, logits_ref, rtol=0, atol=1e-5)
    (enc.sum() + logits.sum()).backward()
    assert x.grad is not None and torch.isfinite(x.grad).all() and x.grad.abs().sum() > 0


@pytest.mark.parametrize("rate_model", ["temporal", "factorized"])
def test_training_steps_lower_the_loss_and_fit_tables(random_detector, rate_model) -> None:
    from semcodec.evaluation.training.bottleneck import (
        BottleneckTrainConfig,
        WindowCache,
        train_bottleneck,
    )

    torch.manual_seed(1)
    feats = torch.randn(3, 2, 64, 19, 19) * 0.5
    with torch.no_grad():
        enc, logits = random_detector.raw_outputs(feats.reshape(6, 64, 19, 19))
    cache = WindowCache("t", feats.numpy().astype(np.float16),
                        enc.reshape(3, 2, 1917, 4).numpy().astype(np.float16),
                        logits[..., 1].reshape(3, 2, 1917).numpy().astype(np.float16))  # fmt: skip
    losses = []
    config = BottleneckTrainConfig(beta=0.01, epochs=6, batch_size=6, learning_rate=3e-3,
                                   bottleneck=BottleneckConfig(latent=4, hidden=16),
                                   rate_model=rate_model)  # fmt: skip
    trained = train_bottleneck(config, random_detector, [cache],
                               lambda step, total, v: losses.append(v["distill"]))  # fmt: skip
    assert len(losses) == 6 and losses[-1] < losses[0]
    assert trained.tables.channels == 4 and trained.metadata["beta"] == 0.01
    assert trained.metadata["rate_model"] == rate_model
    assert trained.metadata["skip_threshold"] == 0
    # the tables count every training window: 2 sequences of 3 frames, 2 temporal steps each
    assert trained.counts.updates.sum() == 2 * 2 * 19 * 19
    assert trained.counts.temporal.sum() == _coded_changes(trained, cache)


def test_temporal_training_pairs_each_window_with_the_same_window_a_frame_before() -> None:
    from semcodec.evaluation.training.bottleneck import WindowCache, _previous_windows

    def cache(frames: int, windows: int) -> WindowCache:
        empty = np.zeros((frames, windows, 1, 1, 1), np.float16)
        return WindowCache("t", empty, empty, empty)

    # two ranges, frame-major and window-minor: (3 frames x 2 windows), (2 frames x 1 window)
    assert _previous_windows([cache(3, 2), cache(2, 1)]).tolist() == [-1, -1, 0, 1, 2, 3, -1, 6]


def test_unknown_rate_model_is_refused() -> None:
    from semcodec.evaluation.training.bottleneck import BottleneckTrainConfig

    with pytest.raises(ValueError, match="rate_model"):
        BottleneckTrainConfig(rate_model="gaussian-mixture")


def _coded_changes(trained, cache) -> int:
    """Values at updated positions of the training windows, less those outside the tables."""
    from semcodec.codec.entropy.features import SUPPORT
    from semcodec.evaluation.training.bottleneck import _latent_sequences

    total = 0
    for s in _latent_sequences(trained.model, [cache]):
        for i in (1, 2):
            change = s[i] - s[i - 1]
            values = change[:, (change != 0).any(axis=0)]
            total += int((np.abs(values) <= SUPPORT).sum())
    return total


def test_split_detector_reproduces_the_unsplit_onnx_detector(sample_frames) -> None:
    """Both halves with nothing between them give the ONNX detector's boxes (same windows)."""
    from semcodec.codec.core.models import ModelError
    from semcodec.codec.scaffold.detector import DetectorConfig, PersonDetector
    from semcodec.codec.task.split import load_split_model

    try:
        split = SplitDetector(load_split_model())
        onnx = PersonDetector(DetectorConfig(score_threshold=0.3, tiles=2,
                                             include_full_frame=False), threads=1)  # fmt: skip
    except ModelError as exc:
        pytest.skip(f"detector model not available: {exc}")
    for frame in sample_frames[:3]:
        a, b = split.detect(frame), onnx.detect(frame)
        assert len(a) == len(b) and len(a) > 0
        order_a, order_b = np.argsort(-a.scores), np.argsort(-b.scores)
        np.testing.assert_allclose(a.boxes[order_a], b.boxes[order_b], atol=0.05)
        np.testing.assert_allclose(a.scores[order_a], b.scores[order_b], atol=1e-3)


def test_ground_truth_teaches_people_in_and_false_positives_away() -> None:
    from semcodec.codec.detection.ssdlite import ssd_anchors
    from semcodec.evaluation.training.bottleneck import (
        NEGATIVE_LOGIT,
        POSITIVE_LOGIT,
        ground_truth_logits,
    )

    anchors = ssd_anchors()
    target = 100  # a person exactly on anchor 100 of a window at (50, 20)-(350, 320)
    ymin, xmin, ymax, xmax = anchors[target] * 300
    person = np.array([[50 + xmin, 20 + ymin, 50 + xmax, 20 + ymax]])
    teacher = np.zeros(len(anchors), np.float32)
    out = ground_truth_logits(teacher, person, np.zeros((0, 4)), (50, 20, 350, 320))
    assert out[target] == POSITIVE_LOGIT
    assert (out == NEGATIVE_LOGIT).sum() > len(anchors) // 2  # the background
    # a person mostly outside the window and an ignore region are left to the teacher
    outside = np.array([[300.0, 20.0, 500.0, 320.0]])
    unsure = ground_truth_logits(teacher, outside, person, (50, 20, 350, 320))
    assert unsure[target] == 0.0 and not (unsure == POSITIVE_LOGIT).any()
    # no ground truth at all: every anchor is background
    assert (ground_truth_logits(teacher + 1, np.zeros((0, 4)), np.zeros((0, 4)),
                                (0, 0, 300, 300)) == NEGATIVE_LOGIT).all()  # fmt: skip


def test_packed_windows_round_trip_within_half_a_step(random_detector, tmp_path) -> None:
    """pack_windows keeps every k-th frame as 8-bit codes; load_packed decodes them within
    half a code step and recomputes the teacher outputs from the decoded features."""
    from semcodec.evaluation.training.bottleneck import (
        WindowCache,
        every_kth_frame,
        load_packed,
        pack_windows,
    )

    torch.manual_seed(2)
    feats = (torch.randn(6, 2, 64, 19, 19) * 2).numpy().astype(np.float16)
    zeros = np.zeros((6, 2, 1917), np.float16)
    cache = WindowCache("r", feats, np.zeros((6, 2, 1917, 4), np.float16), zeros)
    path = pack_windows(every_kth_frame([cache], 3), tmp_path / "w.npz")
    (back,) = load_packed(path, random_detector)
    assert back.name == "r" and back.features.shape == (2, 2, 64, 19, 19)
    kept = feats[::3].astype(np.float32)
    step = (kept.max(axis=(0, 1, 3, 4)) - kept.min(axis=(0, 1, 3, 4))) / 255
    error = np.abs(back.features.astype(np.float32) - kept).max(axis=(0, 1, 3, 4))
    assert np.all(error <= step / 2 + 2e-2)  # + float16 rounding of the decoded values
    with torch.no_grad():
        enc, logits = random_detector.raw_outputs(
            torch.from_numpy(back.features.reshape(4, 64, 19, 19).astype(np.float32)))
    np.testing.assert_allclose(back.logits.reshape(4, -1), logits[..., 1].numpy(), atol=1e-2)
    with pytest.raises(ValueError, match="not a packed windows file"):
        np.savez(tmp_path / "other.npz", x=np.zeros(1))
        load_packed(tmp_path / "other.npz", random_detector)
    with pytest.raises(ValueError, match="frame step"):
        every_kth_frame([cache], 0)
