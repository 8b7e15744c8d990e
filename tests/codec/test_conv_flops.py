"""The decoders' FLOP count (``codec.reconstruct.weights.conv_flops``) against PyTorch's own
``FlopCounterMode`` on the shipped networks' shapes and on layers of every kind it counts."""

from __future__ import annotations

import pytest
import torch
from torch.utils.flop_counter import FlopCounterMode

from semcodec.codec.reconstruct.restore import ReferenceRestorer
from semcodec.codec.reconstruct.weights import conv_flops


def _reference(model: torch.nn.Module, *inputs: torch.Tensor) -> int:
    with FlopCounterMode(display=False) as counter, torch.inference_mode():
        model(*inputs)
    return int(counter.get_total_flops())


@pytest.mark.parametrize("model,shape", [
    (ReferenceRestorer(8, 4), (1, 3, 96, 48)),
    (ReferenceRestorer(32, 4), (2, 3, 64, 32)),  # a batch
])  # fmt: skip
def test_a_restorer_counts_as_pytorch_counts(model, shape):
    x = torch.zeros(shape)
    assert conv_flops(model, x, x) == _reference(model, x, x) > 0


def test_grouped_strided_transposed_and_linear_layers_count_as_pytorch_counts():
    model = torch.nn.Sequential(
        torch.nn.Conv2d(4, 8, 3, groups=2, padding=1, stride=2),
        torch.nn.ConvTranspose2d(8, 6, 4, stride=2, padding=1, groups=2),
        torch.nn.ReLU(),
        torch.nn.Flatten(),
        torch.nn.Linear(6 * 10 * 12, 7))  # fmt: skip
    x = torch.zeros(3, 4, 10, 12)
    assert conv_flops(model, x) == _reference(model, x) > 0


def test_the_count_leaves_no_hook_behind():
    model = ReferenceRestorer(8, 1)
    x = torch.zeros(1, 3, 16, 8)
    conv_flops(model, x, x)
    assert not any(m._forward_hooks for m in model.modules())
