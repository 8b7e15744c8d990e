"""Where to split the person detector between the edge and the cloud (issue 14): for every
cut after ``expanded_conv_K`` (K = 0..12, before the first predictor's input), what the edge
computes, what it would send and what the cloud computes.

FLOPs are counted with :class:`torch.utils.flop_counter.FlopCounterMode` (a multiply-add is
2 FLOPs) on one preprocessed 300x300 image; they do not depend on the weights, so the
detector is built with random ones. Post-processing (box decoding, NMS) is not counted.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass


@dataclass(frozen=True)
class SplitCost:
    """One split point.

    Attributes:
        after: the edge runs the stem and ``expanded_conv_0..after``.
        shape: the feature the edge sends, ``(channels, height, width)``.
        elements: values per image in that feature.
        float16_bytes: its size uncoded at 16 bits per value (the bottleneck must beat this).
        edge_flops: FLOPs of the edge part per image.
        cloud_flops: FLOPs of the rest (backbone and the six heads) per image.
    """

    after: int
    shape: tuple[int, int, int]
    elements: int
    float16_bytes: int
    edge_flops: int
    cloud_flops: int

    def to_dict(self) -> dict:
        return asdict(self)


def _flops(fn, *args) -> int:
    import torch
    from torch.utils.flop_counter import FlopCounterMode

    with torch.inference_mode(), FlopCounterMode(display=False) as counter:
        fn(*args)
    return int(counter.get_total_flops())


def split_costs() -> list[SplitCost]:
    """The cost of every split point of :class:`~codec.detection.ssdlite.SSDLiteMobileNetV2`,
    in order of ``after``."""
    import torch

    from semcodec.codec.detection.ssdlite import HEAD_TAP_BLOCK, SSDLiteMobileNetV2

    model = SSDLiteMobileNetV2().eval()
    size = model.params.input_size
    x = torch.zeros(1, 3, size, size).contiguous(memory_format=torch.channels_last)
    costs = []
    for after in range(HEAD_TAP_BLOCK):
        with torch.inference_mode():
            feature = model.features(x, upto=after)
        shape = tuple(int(v) for v in feature.shape[1:])
        elements = int(feature[0].numel())
        costs.append(SplitCost(
            after=after, shape=shape, elements=elements, float16_bytes=2 * elements,
            edge_flops=_flops(model.features, x, after),
            cloud_flops=_flops(model.raw_outputs_from, feature, after),
        ))  # fmt: skip
    return costs


def format_table(costs: list[SplitCost]) -> str:
    """A Markdown table of ``costs``: shape, values, uncoded bytes, edge and cloud MFLOPs."""
    lines = ["| after | feature (C, H, W) | values | float16 bytes | edge MFLOP | cloud MFLOP |",
             "|---|---|---|---|---|---|"]  # fmt: skip
    for c in costs:
        lines.append(f"| expanded_conv_{c.after} | {c.shape} | {c.elements:,} | "
                     f"{c.float16_bytes:,} | {c.edge_flops / 1e6:,.1f} | "
                     f"{c.cloud_flops / 1e6:,.1f} |")  # fmt: skip
    return "\n".join(lines)
