"""The ``restore`` reconstructor: ``warp`` v2 drawing references restored by a small network;
the network's known answers, the per-track memory, determinism, FLOPs and bad weights."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch

from semcodec.cloud.cli import main as cloud_main
from semcodec.codec.reconstruct import UnknownReconstructorError, create_reconstructor
from semcodec.codec.reconstruct.restore import (
    ReferenceRestorer,
    load_restorer,
    restore_reference,
    save_restorer,
)
from semcodec.codec.scaffold.appearance import ref_region
from semcodec.codec.scaffold.codec import decode_stream

SIZE = (96, 64)


@pytest.fixture(scope="module")
def weights(tmp_path_factory):
    torch.manual_seed(0)
    return save_restorer(ReferenceRestorer(width=4, blocks=1),
                         tmp_path_factory.mktemp("w") / "tiny.pt", {"test": True})  # fmt: skip


@pytest.fixture(scope="module")
def stream(level1_stream):
    return level1_stream


def test_a_network_adding_nothing_returns_the_enlarged_reference():
    model = ReferenceRestorer(width=4, blocks=1).eval()
    torch.nn.init.zeros_(model.fuse[1].weight)
    torch.nn.init.zeros_(model.fuse[1].bias)
    ref = np.random.default_rng(0).integers(0, 256, (10, 5, 3), dtype=np.uint8)
    out = restore_reference(model, ref, None, (10, 20))
    import cv2

    enlarged = cv2.resize(ref, (10, 20), interpolation=cv2.INTER_CUBIC)
    np.testing.assert_array_equal(out, enlarged)
    odd = restore_reference(model, ref, ref, (7, 15))  # odd sizes are padded, then cut
    assert odd.shape == (15, 7, 3) and odd.dtype == np.uint8


def test_people_are_restored_inside_their_boxes_and_the_rest_is_warps(decode_with, stream, weights):
    _, decoded, warp = decode_with(stream, "warp")
    rec, _, frames = decode_with(stream, "restore", weights=weights)
    assert frames.shape == warp.shape and frames.dtype == np.uint8
    for k, unit in enumerate(decoded):
        outside = np.ones(SIZE[::-1], bool)
        for box in unit.scaffold.tracks.boxes:
            x1, y1, x2, y2 = ref_region(box)
            outside[max(0, int(y1) - 1) : int(np.ceil(y2)) + 1,
                    max(0, int(x1) - 1) : int(np.ceil(x2)) + 1] = False  # fmt: skip
        np.testing.assert_array_equal(frames[k][outside], warp[k][outside])
    assert not np.array_equal(frames, warp)
    refs = sum(len(d.appearances) for d in decoded)
    assert rec.restored == refs > 0 and rec.flops > 0
    assert rec.flops_per_frame() == rec.flops // len(decoded)
    info = rec.describe()
    assert (info["name"], info["weights"]) == ("restore", "tiny.pt")
    assert len(info["weights_sha256"]) == 64


def test_same_stream_same_frames_and_memory_changes_them(decode_with, stream, weights):
    one = decode_with(stream, "restore", weights=weights)[2]
    again = decode_with(stream, "restore", weights=weights)[2]
    np.testing.assert_array_equal(one, again)
    rec = create_reconstructor("restore", weights=weights)
    list(decode_stream(stream, rec))
    assert set(rec._memory) == {int(t) for d in decode_stream(stream) for t in d[0].appearances}
    forgetful = create_reconstructor("restore", weights=weights, memory_mb=0)
    list(decode_stream(stream, forgetful))
    assert not forgetful._memory and forgetful.describe()["memory_mb"] == 0


def test_the_memory_budget_forgets_the_least_recently_heard_from_track(weights):
    rec = create_reconstructor("restore", weights=weights, memory_mb=2 * 96 * 48 * 3 / 1e6)
    ref = np.zeros((96, 48, 3), np.uint8)
    for track_id in (1, 2, 1, 3):  # track 2 is the least recently heard from when 3 comes
        rec._remember(track_id, ref)
    assert list(rec._memory) == [1, 3]
    rec._remember(1, np.zeros((48, 24, 3), np.uint8))
    assert list(rec._memory) == [3, 1]
    with pytest.raises(ValueError, match="memory_mb"):
        create_reconstructor("restore", weights=weights, memory_mb=-1)


def test_bad_weights_and_options_are_refused(weights, tmp_path, stream, capsys):
    with pytest.raises(UnknownReconstructorError, match="no such file, and not a shipped"):
        create_reconstructor("restore", weights=tmp_path / "none.pt")
    bad = tmp_path / "bad.pt"
    torch.save({"config": {"width": 4}}, bad)
    with pytest.raises(UnknownReconstructorError, match="cannot load restorer weights"):
        load_restorer(bad)
    garbage = tmp_path / "garbage.pt"  # not a torch file at all: refused as such, typed
    garbage.write_bytes(b"these bytes are not a pickle")
    with pytest.raises(UnknownReconstructorError, match="cannot load restorer weights"):
        load_restorer(garbage)
    semc = tmp_path / "s.semc"
    semc.write_bytes(stream)
    assert cloud_main(["decode", str(semc), "-o", str(tmp_path / "x"), "--decoder", "restore",
                       "--steps", "4"]) == 2  # fmt: skip
    assert "only for --decoder diffusion" in capsys.readouterr().err
    assert cloud_main(["decode", str(semc), "-o", str(tmp_path / "x"), "--decoder", "warp",
                       "--memory-mb", "1"]) == 2  # fmt: skip
    assert "--memory-mb: only for --decoder animate or restore" in capsys.readouterr().err
    assert cloud_main(["decode", str(semc), "-o", str(tmp_path / "g"), "--decoder", "restore",
                       "--weights", str(garbage)]) == 2  # fmt: skip
    assert "cannot load restorer weights" in capsys.readouterr().err
    assert not (tmp_path / "g").exists()  # nothing written under the output's name
    out = tmp_path / "out"
    assert cloud_main(["decode", str(semc), "-o", str(out), "--no-overview", "--decoder",
                       "restore", "--weights", str(weights),
                       "--memory-mb", "0.5", "--smooth-s", "0"]) == 0  # fmt: skip
    decoder = json.loads((out / "stream.json").read_text())["decoder"]
    assert (decoder["name"], decoder["memory_mb"], decoder["smooth_s"]) == ("restore", 0.5, 0)
    assert cloud_main(["decode", str(semc), "-o", str(tmp_path / "y"), "--decoder", "diffusion",
                       "--smooth-s", "0.1"]) == 2  # fmt: skip
    assert "--smooth-s: only for --decoder animate or restore or warp" in capsys.readouterr().err


def test_the_shipped_restorer_is_registered_and_verified():
    from semcodec.codec.core.models import resolve_model

    model = load_restorer(resolve_model("ref_restorer"))
    assert sum(p.numel() for p in model.parameters()) < 2_000_000
    assert model.metadata["steps"] > 0 and "held_out" in model.metadata
    default = create_reconstructor("restore")  # the second restorer, seen down to thumbnails
    assert default.weights == resolve_model("ref_restorer_v2")
    assert min(default.model.metadata["scales"]) <= 0.125
    small = create_reconstructor("restore", weights="ref_restorer_w8")  # a shipped name
    assert small.model.width == 8 and small.weights == resolve_model("ref_restorer_w8")
    assert small._flops_per_pixel * 12 < create_reconstructor("restore")._flops_per_pixel


def test_training_examples_and_a_short_run_give_a_loadable_restorer(tmp_path):
    from pathlib import Path

    from semcodec.evaluation.training.restorer import CANVAS, Range, examples, train

    sample = str(Path(__file__).resolve().parents[2] / "datasets/sample/PETS09-S2L1-384x288")
    part = Range(sample, 1, 60, every=3)
    reference, memory, original = examples(part, np.random.default_rng(0))
    assert reference.shape == memory.shape == original.shape and reference.shape[1:3] == CANVAS
    assert reference.dtype == np.uint8 and len(reference) > 10
    again = examples(part, np.random.default_rng(0))
    np.testing.assert_array_equal(again[0], reference)  # the same seed, the same examples
    # a thumbnail-sized reference (1/8 of its full size) is blurrier than a full one
    tiny = examples(part, np.random.default_rng(0), scales=(0.125,))[0]
    assert np.abs(np.diff(tiny.astype(float), axis=1)).mean() < \
        np.abs(np.diff(original.astype(float), axis=1)).mean()
    # a reference coded at WebP quality 4 is further from the original than one at 30
    rough = examples(part, np.random.default_rng(0), scales=(1.0,), qualities=(4,))[0]
    fine = examples(part, np.random.default_rng(0), scales=(1.0,), qualities=(30,))[0]
    assert np.abs(rough.astype(float) - original).mean() > \
        np.abs(fine.astype(float) - original).mean()
    weights = train(tmp_path / "r", steps=2, batch=4, width=4, blocks=1, scales=(1.0, 0.25),
                    qualities=(30, 8), ranges=(part,), held_out=(part,), log=lambda _: None)
    model = load_restorer(weights)
    assert (model.width, model.blocks) == (4, 1) and model.metadata["scales"] == [1.0, 0.25]
    assert model.metadata["qualities"] == [30, 8]
    with pytest.raises(ValueError, match="qualities"):
        train(tmp_path / "bad", steps=1, qualities=(0,), ranges=(part,), log=lambda _: None)
    scores = model.metadata["held_out"]
    assert set(next(iter(scores.values()))) == {"examples", "enlarged", "restored_without_memory",
                                                "restored"}  # fmt: skip
    assert json.loads((tmp_path / "r" / "scores.json").read_text()) == scores


def test_redrawing_changes_people_only_counts_its_flops_and_steps_down_first(
        decode_with, stream, weights, capsys, tmp_path):  # fmt: skip
    from semcodec.codec.reconstruct.restore import person_window

    _, decoded, drawn = decode_with(stream, "restore", weights=weights)
    rec, _, frames = decode_with(stream, "restore", weights=weights, redraw=str(weights))
    assert rec.steps_down()[0] == "redraw" and rec.describe()["redraw"] == str(weights)
    height, width = drawn.shape[1:3]
    windows = 0
    for k, unit in enumerate(decoded):
        outside = np.ones((height, width), bool)
        for box in unit.scaffold.tracks.boxes:
            window = person_window(box, width, height)
            if window is not None:
                windows += 1
                outside[window[1]:window[3], window[0]:window[2]] = False
        np.testing.assert_array_equal(frames[k][outside], drawn[k][outside])
    assert windows > 0 and not np.array_equal(frames, drawn)
    plain = decode_with(stream, "restore", weights=weights)[0]
    assert rec.flops == plain.flops + windows * rec.redrawer.flops_per_window
    stepped = create_reconstructor("restore", weights=weights, redraw=str(weights))
    stepped.skipped = frozenset({"redraw"})  # a live decoder behind its camera
    np.testing.assert_array_equal(np.stack([f for _, f in decode_stream(stream, stepped)]), drawn)
    with pytest.raises(UnknownReconstructorError, match="not a shipped redrawer"):
        create_reconstructor("restore", redraw=str(tmp_path / "none.pt"))
    semc = tmp_path / "s.semc"
    semc.write_bytes(stream)
    assert cloud_main(["decode", str(semc), "-o", str(tmp_path / "x"), "--decoder", "restore",
                       "--redraw", str(tmp_path / "none.pt")]) == 2  # fmt: skip
    assert "--redraw" in capsys.readouterr().err and not (tmp_path / "x").exists()


def test_redraw_training_windows_and_a_short_run_give_a_loadable_redrawer(tmp_path):
    from pathlib import Path

    from semcodec.codec.reconstruct.restore import REDRAW_CANVAS, PeopleRedrawer
    from semcodec.evaluation.training.redraw import (
        TARGETS,
        Range,
        cached_windows,
        train,
        window_pairs,
    )

    sample = str(Path(__file__).resolve().parents[2] / "datasets/sample/PETS09-S2L1-384x288")
    part = Range(sample, 1, 24, every=6)
    pairs = window_pairs(part)
    assert pairs["decoded"].shape == pairs["original"].shape
    assert pairs["decoded"].shape[1:] == (REDRAW_CANVAS[1], REDRAW_CANVAS[0], 3)
    assert set(pairs["target"].tolist()) == set(TARGETS) and pairs["ground_truth"].any()
    assert not np.array_equal(pairs["decoded"], pairs["original"])  # what level 1 lost
    weights = train(tmp_path / "r", steps=2, batch=4, ranges=(part,), held_out=(part,),
                    windows=tmp_path / "w", log=lambda _: None)  # fmt: skip
    (cached,) = cached_windows((part,), tmp_path / "w")  # read back
    assert len(list((tmp_path / "w").glob("windows-*.npz"))) == 1  # training = held out
    assert all(np.array_equal(cached[k], pairs[k]) for k in pairs)
    model = load_restorer(weights)
    assert model.width == 8 and model.metadata["init"] == "ref_restorer_w8"
    assert model.metadata["device"] == "cpu"
    (held,) = model.metadata["held_out"].values()
    assert set(held["after"]) == {f"{t} {k}" for t in TARGETS for k in (
        "drawn", "redrawn", "confidence original", "confidence drawn", "confidence redrawn")}
    assert PeopleRedrawer(model).flops_per_window > 0
    with pytest.raises(ValueError, match="widths 8, 32"):
        train(tmp_path / "bad", width=16, ranges=(part,), log=lambda _: None)
