"""The cloud's super-resolution: the converted UpscalerJS networks against the originals'
own outputs, tiling, FLOPs, refused files and layers, and the plate decoded through it."""

from __future__ import annotations

from pathlib import Path

import cv2
import numpy as np
import pytest

from semcodec.codec.reconstruct.superres import (
    TILE_MARGIN,
    LayersGraph,
    NetworkUpscaler,
    SuperResolutionError,
    Upscaler,
    create_upscaler,
)

DATA = Path(__file__).resolve().parents[1] / "data" / "superres"


def _rgb(name: str) -> np.ndarray:
    return cv2.cvtColor(cv2.imread(str(DATA / name)), cv2.COLOR_BGR2RGB)


def _network(name: str) -> NetworkUpscaler:
    from semcodec.codec.core.models import ModelError

    try:
        return create_upscaler(name)
    except (ModelError, OSError) as exc:  # no npm and nothing cached: nothing to check
        pytest.skip(f"{name} cannot be had here: {exc}")


@pytest.mark.parametrize("name", ["esrgan-slim", "esrgan-medium"])
def test_the_converted_network_gives_the_originals_pixels(name):
    """The package's own x2 result of its fixture (made with TensorFlow.js), away from the
    crop's edges (where the original saw the rest of the fixture, ours padding)."""
    up = _network(name)
    out = up.upscale(_rgb("fixture-crop.png"))
    expected = _rgb(f"{name}-x2-result-crop.png")
    assert out.shape == expected.shape == (96, 96, 3)
    inner = slice(2 * TILE_MARGIN, 96 - 2 * TILE_MARGIN)
    diff = np.abs(out[inner, inner].astype(int) - expected[inner, inner])
    assert diff.max() <= 1 and diff.mean() < 0.01  # float rounding, nothing more
    bicubic = Upscaler()(_rgb("fixture-crop.png"), (96, 96))
    assert np.abs(bicubic[inner, inner].astype(int) - expected[inner, inner]).mean() > 1


def _tiny_graph() -> LayersGraph:
    """One 3x3 convolution (3 -> 3 channels, identity kernel times 2) and a x2 upsampling."""
    kernel = np.zeros((3, 3, 3, 3), np.float32)
    for c in range(3):
        kernel[1, 1, c, c] = 2.0
    layers = [
        {"class_name": "InputLayer", "name": "in", "config": {}, "inbound_nodes": []},
        {"class_name": "Conv2D", "name": "c", "inbound_nodes": [[["in", 0, 0, {}]]],
         "config": {"padding": "same", "use_bias": True, "activation": "relu"}},
        {"class_name": "UpSampling2D", "name": "up", "inbound_nodes": [[["c", 0, 0, {}]]],
         "config": {"size": [2, 2], "interpolation": "nearest"}},
    ]  # fmt: skip
    topology = {"model_config": {"config": {"layers": layers, "input_layers": [["in", 0, 0]],
                                            "output_layers": [["up", 0, 0]]}}}  # fmt: skip
    return LayersGraph(topology, {"c/kernel": kernel, "c/bias": np.ones(3, np.float32)})


def test_a_known_graph_computes_and_counts_its_flops():
    up = NetworkUpscaler("tiny", _tiny_graph(), 2)
    picture = np.full((5, 7, 3), 10, np.uint8)
    out = up.upscale(picture)
    assert out.shape == (10, 14, 3) and (out == 21).all()  # 2 x 10 + 1, each pixel twice
    assert up.flops((7, 5)) == 2 * 3 * 9 * 3 * 35  # one 3x3 conv at the input's size


@pytest.mark.parametrize("name", ["tiny", "esrgan-slim"])
def test_tiles_give_the_pixels_of_one_pass(name):
    rng = np.random.default_rng(3)
    picture = cv2.GaussianBlur(rng.integers(0, 255, (70, 90, 3), np.uint8), (5, 5), 0)
    graph = _tiny_graph() if name == "tiny" else _network(name).graph
    one = NetworkUpscaler(name, graph, 2, tile=1000)
    tiled = NetworkUpscaler(name, graph, 2, tile=24)
    assert np.abs(one.upscale(picture).astype(int) - tiled.upscale(picture)).max() <= 1


def test_layers_it_cannot_run_and_unknown_names_are_refused():
    topology = {"model_config": {"config": {
        "layers": [{"class_name": "InputLayer", "name": "in", "config": {}, "inbound_nodes": []},
                   {"class_name": "Lambda", "name": "x", "config": {},
                    "inbound_nodes": [[["in", 0, 0, {}]]]}],
        "input_layers": [["in", 0, 0]], "output_layers": [["x", 0, 0]]}}}  # fmt: skip
    with pytest.raises(SuperResolutionError, match="Lambda"):
        LayersGraph(topology, {})
    with pytest.raises(SuperResolutionError, match="sr='magic'"):
        create_upscaler("magic")


def test_network_files_with_another_sha256_are_refused(tmp_path, monkeypatch):
    from semcodec.codec.core.models import ModelChecksumError, model_spec, resolve_model

    spec = model_spec("esrgan_slim_x2")
    bad = tmp_path / spec.relpath
    bad.parent.mkdir(parents=True)
    bad.write_text('{"format": "layers-model"}')
    monkeypatch.setenv("SEMCODEC_OFFLINE", "1")
    with pytest.raises(ModelChecksumError):
        resolve_model("esrgan_slim_x2", tmp_path)


def test_a_plate_sent_small_is_brought_to_size_by_the_upscaler():
    from semcodec.codec.keyframes import create_intra_coder

    rng = np.random.default_rng(0)
    frame = cv2.GaussianBlur(rng.integers(0, 255, (64, 96, 3), np.uint8), (9, 9), 0)
    coder = create_intra_coder("webp", downscale=0.5)
    data = coder.encode(frame, 80)
    seen = []

    def upscale(picture, size):
        seen.append((picture.shape, size))
        return np.zeros((size[1], size[0], 3), np.uint8)

    out = coder.decode(data, (96, 64), upscale)
    assert seen == [((32, 48, 3), (96, 64))] and out.shape == (64, 96, 3) and not out.any()
    full = create_intra_coder("webp").encode(frame, 80)  # sent at full size: nothing to do
    create_intra_coder("webp").decode(full, (96, 64), upscale)
    assert len(seen) == 1


def test_tuned_weights_round_trip_and_other_networks_are_refused(tmp_path):
    from semcodec.codec.reconstruct.superres import load_tuned, save_tuned

    graph = _tiny_graph()
    for p in graph.modules.parameters():
        p.data.mul_(3)
    path = save_tuned(graph, tmp_path / "sr.pt", {"steps": 2})
    fresh = _tiny_graph()
    assert load_tuned(fresh, path) == {"steps": 2}
    picture = np.full((4, 4, 3), 5, np.uint8)
    assert (NetworkUpscaler("t", fresh, 2).upscale(picture) == 33).all()  # 3 x (2 x 5 + 1)
    other = LayersGraph({"model_config": {"config": {
        "layers": [{"class_name": "InputLayer", "name": "in", "config": {}, "inbound_nodes": []},
                   {"class_name": "Add", "name": "a", "config": {},
                    "inbound_nodes": [[["in", 0, 0, {}], ["in", 0, 0, {}]]]}],
        "input_layers": [["in", 0, 0]], "output_layers": [["a", 0, 0]]}}}, {})  # fmt: skip
    with pytest.raises(SuperResolutionError, match="not weights of this network"):
        load_tuned(other, path)


def test_train_sr_runs_on_the_sample_and_scores_against_bicubic(tmp_path):
    from semcodec.evaluation.training.superres import Range, train

    _network("esrgan-slim")  # skips where the network cannot be had
    sample = Range("PETS09-S2L1-384x288", 1, 6, every=3)
    path = train(tmp_path, steps=2, batch=2, train_ranges=(sample,),
                 validate_ranges=(Range("PETS09-S2L1-384x288", 50, 1, every=1),),
                 log=lambda *_: None)  # fmt: skip
    import json

    scores = json.loads((tmp_path / "scores.json").read_text())["scores"]
    assert set(scores) == {"bicubic", "esrgan-slim", "tuned"} and path.is_file()
    assert all(0 < s["st_lpips"] < 1 and s["psnr"] > 15 for s in scores.values())
