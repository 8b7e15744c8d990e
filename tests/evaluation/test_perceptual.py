"""Tests of the ST-LPIPS reimplementation (evaluation.metrics.perceptual).

The known answers were obtained with the reference package ``stlpips-pytorch==0.0.2``
(``stlpips_pytorch.stlpips.LPIPS(net="alex", variant="shift_tolerant")``, torch 2.14.1 CPU,
its packaged weights, which are byte-identical in value to the shared file). This
implementation matched the package to 0.0 (bit-identical float32) on all pairs below and on
256x256, 64x96 and 75x83 crops, so the tolerance here only absorbs BLAS differences.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch

from semcodec.codec.core.models import ModelNotFoundError, resolve_model
from semcodec.evaluation.metrics.perceptual import (
    STLPIPS,
    load_stlpips,
    st_lpips,
    st_lpips_per_frame,
)

_FRAMES_DIR = Path(__file__).resolve().parents[2].parent / "shared/data/PETS09-S2L1/img1"

#: 128x128 crop at rows 200.., cols 300.. of frame 1 of PETS09-S2L1, against ...
REFERENCE_VALUES = {
    "identical": 0.0,
    "shift_1px": 0.00276316,  # the same crop one column to the right
    "noise_pm8": 0.03296212,  # plus the deterministic integer noise of _hash_noise(amp=8)
    "frame_50": 0.16985805,  # the same crop of frame 50
    "other_place": 0.71865559,  # the crop at rows 0.., cols 0.. of frame 1
}

#: The 20 keys of the published state dict.
EXPECTED_KEYS = {
    "scaling_layer.shift",
    "scaling_layer.scale",
    "net.slice1.0.weight",
    "net.slice1.0.bias",
    "net.slice1.1.filt",
    "net.slice2.4.filt",
    "net.slice2.5.weight",
    "net.slice2.5.bias",
    "net.slice3.8.filt",
    "net.slice3.9.weight",
    "net.slice3.9.bias",
    "net.slice4.11.weight",
    "net.slice4.11.bias",
    "net.slice5.13.weight",
    "net.slice5.13.bias",
    *(f"lin{i}.model.1.weight" for i in range(5)),
}


def _hash_noise(shape: tuple[int, ...], amp: int) -> np.ndarray:
    """Deterministic integer noise in ``-amp..amp`` (int16), independent of any RNG."""
    idx = np.arange(np.prod(shape), dtype=np.int64).reshape(shape)
    return ((idx * 2654435761) % 2**32 % (2 * amp + 1) - amp).astype(np.int16)


def _to_tensor(image: np.ndarray) -> torch.Tensor:
    return torch.from_numpy(np.ascontiguousarray(image)).permute(2, 0, 1)[None].float() / 127.5 - 1


@pytest.fixture(scope="module")
def weights_path() -> Path:
    try:
        return resolve_model("stlpips_alex")
    except ModelNotFoundError as exc:
        pytest.skip(f"ST-LPIPS weights not available: {exc}")


@pytest.fixture(scope="module")
def pets_frames() -> tuple[np.ndarray, np.ndarray]:
    if not (_FRAMES_DIR / "000001.jpg").is_file():
        pytest.skip(f"PETS09-S2L1 frames not found in {_FRAMES_DIR}")
    from PIL import Image

    def load(index: int) -> np.ndarray:
        with Image.open(_FRAMES_DIR / f"{index:06d}.jpg") as image:
            return np.asarray(image.convert("RGB"))

    return load(1), load(50)


def _pairs(frames: tuple[np.ndarray, np.ndarray]) -> dict[str, np.ndarray]:
    first, fiftieth = frames
    y, x, s = 200, 300, 128
    crop = first[y : y + s, x : x + s]
    noisy = np.clip(crop.astype(np.int16) + _hash_noise(crop.shape, 8), 0, 255).astype(np.uint8)
    return {
        "reference": crop,
        "identical": crop,
        "shift_1px": first[y : y + s, x + 1 : x + 1 + s],
        "noise_pm8": noisy,
        "frame_50": fiftieth[y : y + s, x : x + s],
        "other_place": first[0:s, 0:s],
    }


# --- without the weights ----------------------------------------------------------------------


def test_state_dict_layout_matches_published_keys() -> None:
    state = STLPIPS().state_dict()
    assert set(state) == EXPECTED_KEYS
    assert state["net.slice1.0.weight"].shape == (64, 3, 11, 11)
    assert state["net.slice3.8.filt"].shape == (192, 1, 3, 3)
    assert [state[f"lin{i}.model.1.weight"].shape[1] for i in range(5)] == [64, 192, 384, 256, 256]
    blur = state["net.slice1.1.filt"][0, 0]
    assert torch.allclose(blur, torch.tensor([[1, 2, 1], [2, 4, 2], [1, 2, 1]]) / 16.0)


def test_identical_inputs_give_zero_and_shape_n() -> None:
    torch.manual_seed(0)
    model = STLPIPS().eval()
    x = torch.rand(2, 3, 48, 40) * 2 - 1
    with torch.inference_mode():
        out = model(x, x)
        other = model(x, torch.rand_like(x) * 2 - 1)
    assert out.shape == (2,) and out.dtype == torch.float32
    assert torch.all(out == 0)
    assert other.shape == (2,)


def test_mismatched_inputs_raise() -> None:
    model = STLPIPS()
    with pytest.raises(ValueError, match="differ in shape"):
        model(torch.zeros(1, 3, 32, 32), torch.zeros(1, 3, 32, 33))
    with pytest.raises(ValueError, match=r"\(N, 3, H, W\)"):
        model(torch.zeros(1, 1, 32, 32), torch.zeros(1, 1, 32, 32))
    with pytest.raises(ValueError, match="at least 21x21"):
        model(torch.zeros(1, 3, 20, 64), torch.zeros(1, 3, 20, 64))
    model(torch.zeros(1, 3, 21, 21), torch.zeros(1, 3, 21, 21))  # the smallest accepted size


def test_st_lpips_rejects_bad_arrays(tmp_path: Path) -> None:
    good = np.zeros((1, 32, 32, 3), dtype=np.uint8)
    with pytest.raises(ValueError, match="differ in shape"):
        st_lpips_per_frame(good, np.zeros((1, 32, 33, 3), np.uint8), models_dir=tmp_path)
    with pytest.raises(ValueError, match="uint8"):
        st_lpips(good.astype(np.float32), good, models_dir=tmp_path)


# --- with the shared weights ------------------------------------------------------------------


@pytest.mark.shared
def test_load_is_strict_eval_and_cached(weights_path: Path) -> None:
    model = load_stlpips(weights_path.parent)
    assert not model.training
    assert load_stlpips(weights_path.parent) is model
    reference = torch.load(weights_path, map_location="cpu", weights_only=True)
    assert set(reference) == EXPECTED_KEYS
    assert torch.equal(model.state_dict()["lin2.model.1.weight"], reference["lin2.model.1.weight"])
    assert all(not p.requires_grad for p in model.parameters())


@pytest.mark.shared
def test_known_answers_from_reference_package(
    weights_path: Path, pets_frames: tuple[np.ndarray, np.ndarray]
) -> None:
    model = load_stlpips(weights_path.parent)
    pairs = _pairs(pets_frames)
    ref = _to_tensor(pairs["reference"])
    with torch.inference_mode():
        for name, expected in REFERENCE_VALUES.items():
            got = model(ref, _to_tensor(pairs[name])).item()
            assert got == pytest.approx(expected, abs=1e-5), name


@pytest.mark.shared
def test_st_lpips_on_video_is_mean_of_frames(
    weights_path: Path, pets_frames: tuple[np.ndarray, np.ndarray]
) -> None:
    pairs = _pairs(pets_frames)
    names = ["identical", "shift_1px", "frame_50"]
    reference = np.stack([pairs["reference"]] * len(names))
    distorted = np.stack([pairs[name] for name in names])
    per_frame = st_lpips_per_frame(reference, distorted, weights_path.parent, batch_size=2)
    expected = [REFERENCE_VALUES[name] for name in names]
    np.testing.assert_allclose(per_frame, expected, atol=1e-5)
    mean = st_lpips(reference, distorted, models_dir=weights_path.parent, batch_size=4)
    assert mean == pytest.approx(np.mean(expected), abs=1e-5)


@pytest.mark.shared
def test_shift_tolerance_ordering(
    weights_path: Path, pets_frames: tuple[np.ndarray, np.ndarray]
) -> None:
    pairs = _pairs(pets_frames)
    ref = pairs["reference"]
    scores = {name: st_lpips(ref, pairs[name], weights_path.parent) for name in REFERENCE_VALUES}
    assert scores["identical"] == 0.0
    assert scores["shift_1px"] < scores["noise_pm8"] < scores["frame_50"] < scores["other_place"]


@pytest.mark.shared
@pytest.mark.parametrize("cache_bytes", [1 << 30, 0])
def test_reference_scorer_gives_the_known_answers_with_and_without_its_cache(
    weights_path: Path, pets_frames: tuple[np.ndarray, np.ndarray], cache_bytes: int
) -> None:
    from semcodec.evaluation.metrics.perceptual import STLPIPSReference

    pairs = _pairs(pets_frames)
    names = ["identical", "shift_1px", "noise_pm8", "frame_50", "other_place"]
    reference = np.stack([pairs["reference"]] * len(names))
    distorted = np.stack([pairs[name] for name in names])
    scorer = STLPIPSReference(reference, weights_path.parent, batch_size=2,
                              cache_bytes=cache_bytes)  # fmt: skip
    done: list[int] = []
    for _ in range(2):  # the second pass uses the cached reference features (if any)
        got = scorer.distances(distorted, progress=done.append)
        np.testing.assert_allclose(got, [REFERENCE_VALUES[n] for n in names], atol=1e-5)
    assert done == [2, 4, 5, 2, 4, 5]
    assert (len(scorer._features) == 3) == bool(cache_bytes)
    assert scorer.distances(reference).tolist() == [0.0] * len(names)  # identical: exactly 0
    with pytest.raises(ValueError, match="differ in shape"):
        scorer.distances(distorted[:2])
