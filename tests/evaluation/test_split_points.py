"""``semcodec-bench split-points``: the detector's split costs add up and match its parts."""

from __future__ import annotations

import json

import torch
from torch.utils.flop_counter import FlopCounterMode

from semcodec.codec.detection.ssdlite import SSDLiteMobileNetV2
from semcodec.evaluation.bench.split_points import format_table, split_costs
from semcodec.evaluation.cli import main as bench_main


def test_every_split_costs_the_whole_detector_and_sends_its_feature():
    costs = split_costs()
    assert [c.after for c in costs] == list(range(13))
    x = torch.zeros(1, 3, 300, 300)
    with torch.inference_mode(), FlopCounterMode(display=False) as counter:
        SSDLiteMobileNetV2().eval().raw_outputs(x)
    whole = counter.get_total_flops()
    for c in costs:
        assert c.edge_flops + c.cloud_flops == whole  # nothing counted twice, nothing lost
        assert c.elements == c.shape[0] * c.shape[1] * c.shape[2]
        assert c.float16_bytes == 2 * c.elements
    assert all(a.edge_flops < b.edge_flops for a, b in zip(costs, costs[1:], strict=False))
    # the shapes the detector's own split test knows
    assert costs[5].shape == (32, 38, 38) and costs[12].shape == (96, 19, 19)
    assert costs[12].elements == 34_656 and "expanded_conv_12 | (96, 19, 19)" in format_table(costs)


def test_cli_prints_the_table_and_writes_json(tmp_path, capsys):
    assert bench_main(["split-points", "--json", str(tmp_path / "s.json")]) == 0
    assert "| expanded_conv_0 | (16, 150, 150) |" in capsys.readouterr().out
    rows = json.loads((tmp_path / "s.json").read_text())
    assert len(rows) == 13 and rows[6]["shape"] == [64, 19, 19]
