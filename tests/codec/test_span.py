"""SPAN from its ncnn files (issue 54): the reader on hand-made files, the converted network
against ncnn's own run of the package's files, its known answer without ncnn, and the
upscalers ``sr=span-x2`` / ``sr=span-x4``."""

from __future__ import annotations

import struct
from pathlib import Path

import cv2
import numpy as np
import pytest
import torch

from semcodec.codec.reconstruct.span import (
    TAG_FLOAT16,
    NcnnFormatError,
    NcnnGraph,
    load_ncnn,
    read_bin,
    read_param,
)

DATA = Path(__file__).resolve().parents[1] / "data"
#: Largest difference from ncnn's float32 run, in the network's 0..1 output range (measured
#: 3.6e-7 on x86_64: float summation order only).
NCNN_TOLERANCE = 1e-5
#: Largest difference from the stored known answers: their step (2 / 65535, the output held as
#: 16-bit PNG over -0.5..1.5) halved, plus NCNN_TOLERANCE.
STORED_TOLERANCE = 1 / 65535 + NCNN_TOLERANCE


def _fixture() -> np.ndarray:
    """The known-answer input: 24 x 24 RGB pixels of UpscalerJS's fixture (MIT)."""
    bgr = cv2.imread(str(DATA / "superres" / "fixture-crop.png"))
    return cv2.cvtColor(bgr, cv2.COLOR_BGR2RGB)[12:36, 12:36]


def _stored_answer(factor: int) -> np.ndarray:
    """ncnn's output for :func:`_fixture`, ``(3, 24 f, 24 f)`` float in the 0..1 range."""
    q = cv2.cvtColor(cv2.imread(str(DATA / "span" / f"span-x{factor}-ncnn.png"),
                                cv2.IMREAD_UNCHANGED), cv2.COLOR_BGR2RGB)  # fmt: skip
    return q.transpose(2, 0, 1).astype(np.float64) / 32767.5 - 0.5


def _files(factor: int) -> tuple[Path, Path]:
    from semcodec.codec.core.models import ModelError, resolve_model

    try:
        return (resolve_model(f"span_x{factor}_ch48"),
                resolve_model(f"span_x{factor}_ch48_weights"))  # fmt: skip
    except (ModelError, OSError) as exc:  # offline and nothing cached: nothing to check
        pytest.skip(f"SPAN x{factor}'s files cannot be had here: {exc}")


def _torch_run(param: Path, weights: Path, picture: np.ndarray) -> np.ndarray:
    x = torch.from_numpy(picture.astype(np.float32).transpose(2, 0, 1) / 255)[None]
    with torch.no_grad():
        return load_ncnn(param, weights)(x)[0].double().numpy()


@pytest.mark.parametrize("factor", [2, 4])
def test_the_converted_network_gives_the_pinned_answer(factor):
    """Without ncnn: the PyTorch module against ncnn's output stored beside the tests (the
    package's files are pinned by sha256 in the model zoo)."""
    out = _torch_run(*_files(factor), _fixture())
    expected = _stored_answer(factor)
    assert out.shape == expected.shape == (3, 24 * factor, 24 * factor)
    assert np.abs(out - expected).max() <= STORED_TOLERANCE


@pytest.mark.parametrize("factor", [2, 4])
def test_the_converted_network_computes_what_ncnn_computes(factor):
    """The package's own runtime (the ncnn wheel, float32 on the CPU) on the same files and
    the same input; also the stored answers are ncnn's."""
    ncnn = pytest.importorskip("ncnn", reason="the ncnn wheel is not installed (a dev extra)")
    param, weights = _files(factor)
    rng = np.random.default_rng(factor)
    noisy = cv2.GaussianBlur(rng.integers(0, 256, (37, 29, 3), np.uint8), (3, 3), 0)
    for picture in (_fixture(), noisy):
        net = ncnn.Net()
        for option in ("use_vulkan_compute", "use_fp16_storage", "use_fp16_packed",
                       "use_fp16_arithmetic", "use_bf16_storage"):  # fmt: skip
            setattr(net.opt, option, False)
        net.opt.num_threads = 1
        assert net.load_param(str(param)) == 0 and net.load_model(str(weights)) == 0
        extractor = net.create_extractor()
        chw = np.ascontiguousarray(picture.astype(np.float32).transpose(2, 0, 1) / 255)
        extractor.input("data", ncnn.Mat(chw))
        status, blob = extractor.extract("output")
        assert status == 0
        theirs = np.array(blob).astype(np.float64)
        ours = _torch_run(param, weights, picture)
        assert ours.shape == theirs.shape == (3, factor * picture.shape[0],
                                              factor * picture.shape[1])  # fmt: skip
        assert np.abs(ours - theirs).max() <= NCNN_TOLERANCE
    assert np.abs(_stored_answer(factor) - _torch_run(param, weights, _fixture())).max() \
        <= STORED_TOLERANCE  # fmt: skip


# ------------------------------------------------------------------ the reader, by hand

_TINY_PARAM = """7767517
8 10
Input        in      0 1 data
MemoryData   mean    0 1 mean 0=1 1=1 2=2
BinaryOp     sub     2 1 data mean centred 0=1
BinaryOp     scale   1 1 centred scaled 0=2 1=1 2=2.0
Convolution  conv    1 1 scaled conv 0=8 1=3 4=1 5=1 6=144
Split        split   1 2 conv c1 c2
Swish        swish   1 1 c1 s
PixelShuffle shuffle 1 1 s out 0=2
"""


def _tiny_bin(weight: np.ndarray, bias: np.ndarray, half: bool) -> bytes:
    mean = np.array([0.25, -0.5], "<f4").tobytes()
    if half:
        data = weight.astype("<f2").tobytes()
        tagged = struct.pack("<I", TAG_FLOAT16) + data + b"\0" * (-len(data) % 4)
    else:
        tagged = struct.pack("<I", 0) + weight.astype("<f4").tobytes()
    return mean + tagged + bias.astype("<f4").tobytes()


@pytest.mark.parametrize("half", [True, False])
def test_a_hand_made_network_computes_its_known_answer(half):
    rng = np.random.default_rng(1)
    weight = rng.normal(size=(8, 2, 3, 3)).astype(np.float16).astype(np.float32)
    bias = rng.normal(size=8).astype(np.float32)
    # "c2" is read by no layer: a second output, which the reader refuses; drop it
    layers = read_param(_TINY_PARAM.replace("1 2 conv c1 c2", "1 1 conv c1"))
    graph = NcnnGraph(layers, read_bin(layers, _tiny_bin(weight, bias, half)))
    x = torch.from_numpy(rng.normal(size=(1, 2, 5, 6)).astype(np.float32))
    mean = torch.tensor([0.25, -0.5]).reshape(1, 2, 1, 1)
    conv = torch.nn.functional.conv2d((x - mean) * 2, torch.from_numpy(weight),
                                      torch.from_numpy(bias), padding=1)  # fmt: skip
    expected = torch.nn.functional.pixel_shuffle(torch.nn.functional.silu(conv), 2)
    with torch.no_grad():
        assert torch.allclose(graph(x), expected, atol=1e-5)


def test_strides_dilations_and_pads_are_read_per_side():
    """ncnn's 3 / 13 are the stride across / down, 2 / 12 the dilation, 4 / 15 / 14 / 16 the
    padding left / right / top / bottom."""
    text = ("7767517\n2 2\nInput in 0 1 data\n"
            "Convolution c 1 1 data out 0=1 1=3 11=3 2=1 12=2 3=2 13=1 4=1 15=0 14=2 16=3 "
            "5=0 6=9\n")  # fmt: skip
    layers = read_param(text)
    graph = NcnnGraph(layers, read_bin(layers, struct.pack("<I", 0) + np.ones(9, "<f4").tobytes()))
    with torch.no_grad():
        out = graph(torch.ones(1, 1, 10, 9))
    # height: 10 + 2 + 3 padded, dilation 2 (5 rows seen), stride 1 -> 11; width: 9 + 1,
    # dilation 1, stride 2 -> 4
    assert out.shape == (1, 1, 11, 4)


def test_files_it_cannot_read_are_refused():
    layers = read_param(_TINY_PARAM)
    weights = _tiny_bin(np.zeros((8, 2, 3, 3), np.float32), np.zeros(8, np.float32), False)
    with pytest.raises(NcnnFormatError, match="one input and one output"):
        NcnnGraph(layers, read_bin(layers, weights))  # c2 is a second output
    with pytest.raises(NcnnFormatError, match="more than"):
        read_bin(layers, weights + b"\0\0\0\0")
    with pytest.raises(NcnnFormatError, match="ends before"):
        read_bin(layers, weights[:-4])
    int8 = weights[:8] + struct.pack("<I", 0x000D4B38) + weights[12:]
    with pytest.raises(NcnnFormatError, match="quantized"):
        read_bin(layers, int8)
    with pytest.raises(NcnnFormatError, match="Deconvolution"):
        read_bin(read_param(_TINY_PARAM.replace("Swish  ", "Deconvolution")), weights)
    with pytest.raises(NcnnFormatError, match="not an ncnn param"):
        read_param("7767518\n0 0\n")
    with pytest.raises(NcnnFormatError, match="says 9 layers"):
        read_param(_TINY_PARAM.replace("8 10", "9 10"))
    with pytest.raises(NcnnFormatError, match="array parameters"):
        read_param(_TINY_PARAM.replace("0=2\n", "0=2 -23300=2,1,1\n"))


# ------------------------------------------------------------------ the upscalers


@pytest.mark.parametrize("name,factor,flops", [("span-x2", 2, 819_360), ("span-x4", 4, 850_464)])
def test_span_upscales_plates_with_its_flops_and_tiles_exactly(name, factor, flops):
    from semcodec.codec.reconstruct.pipeline import DecoderSpec
    from semcodec.codec.reconstruct.superres import NetworkUpscaler, create_upscaler

    _files(factor)
    up = create_upscaler(name)
    # conv_1, 19 convolutions 48 -> 48, the 1x1 over 4 x 48 and the 3 f^2-channel last one
    assert flops == 2 * 9 * 48 * (3 + 19 * 48 + 3 * factor**2) + 2 * 192 * 48
    assert up.factor == factor and up.flops((320, 240)) == flops * 320 * 240
    rng = np.random.default_rng(5)
    picture = cv2.GaussianBlur(rng.integers(0, 256, (61, 75, 3), np.uint8), (5, 5), 0)
    whole = NetworkUpscaler(name, up.graph, factor, tile=1000).upscale(picture)
    assert (up.upscale(picture) == whole).all()  # tiles of 96 with a margin of 24: exact
    assert (NetworkUpscaler(name, up.graph, factor, tile=20, margin=24).upscale(picture)
            == whole).all()  # fmt: skip
    out = up(picture, (150, 122))
    assert out.shape == (122, 150, 3)
    bicubic = cv2.resize(picture, (75 * factor, 61 * factor), interpolation=cv2.INTER_CUBIC)
    assert np.abs(whole.astype(int) - bicubic).mean() < 8  # the same picture, sharper
    assert DecoderSpec.parse(f"warp,sr={name}").sr == name
