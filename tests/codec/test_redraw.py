"""``restore``'s redrawing step (:class:`~codec.reconstruct.restore.PeopleRedrawer`): the
windows' known answers, a network that changes nothing, a change that stays inside the
windows, and the option's parsing."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from semcodec.codec.reconstruct.pipeline import DEFAULT_DECODER, DecoderOptionError, DecoderSpec
from semcodec.codec.reconstruct.restore import (
    REDRAW_CANVAS,
    PeopleRedrawer,
    ReferenceRestorer,
    on_canvas,
    person_window,
)


def _network(change: float = 0.0) -> ReferenceRestorer:
    """A width-4 restorer whose output is its input plus ``change`` (-1..1 units) everywhere."""
    model = ReferenceRestorer(width=4, blocks=1).eval()
    torch.nn.init.zeros_(model.fuse[1].weight)
    torch.nn.init.constant_(model.fuse[1].bias, change)
    return model


def test_a_window_is_the_box_grown_1_2x_about_its_centre_and_clipped():
    assert person_window(np.array([10.0, 20, 30, 60]), 100, 100) == (8, 16, 32, 64)
    assert person_window(np.array([-10.0, 80, 10, 120]), 100, 100) == (0, 76, 12, 100)
    assert person_window(np.array([50.0, 50, 54, 90]), 100, 100) is None  # under 8 px wide
    assert person_window(np.array([200.0, 20, 230, 60]), 100, 100) is None  # off the frame


def test_windows_are_resampled_to_the_canvas():
    picture = np.random.default_rng(0).integers(0, 256, (300, 200, 3), dtype=np.uint8)
    for window in ((0, 0, 20, 30), (10, 10, 190, 290), (5, 5, 69, 133)):
        canvas = on_canvas(picture, window)
        assert canvas.shape == (REDRAW_CANVAS[1], REDRAW_CANVAS[0], 3)
        assert canvas.dtype == np.uint8
    np.testing.assert_array_equal(on_canvas(picture, (5, 5, 69, 133)), picture[5:133, 5:69])


def test_a_network_that_changes_nothing_leaves_the_frame_as_drawn():
    picture = np.random.default_rng(1).integers(0, 256, (120, 160, 3), dtype=np.uint8)
    redrawer = PeopleRedrawer(_network())
    out = redrawer(picture, np.array([[20.0, 10, 50, 90], [40, 30, 80, 110]]))
    np.testing.assert_array_equal(out, picture)
    assert redrawer.windows == 2 and redrawer.flops_per_window > 0
    assert redrawer(picture, np.zeros((0, 4))) is picture  # nobody: nothing to redraw


def test_a_change_lands_inside_the_windows_only_feathered_at_their_edges():
    picture = np.full((120, 160, 3), 100, np.uint8)
    box = np.array([[40.0, 20, 80, 100]])  # window (36, 12, 84, 108)
    out = PeopleRedrawer(_network(0.25))(picture, box)
    outside = np.ones((120, 160), bool)
    outside[12:108, 36:84] = False
    np.testing.assert_array_equal(out[outside], picture[outside])
    assert int(out[60, 60, 0]) == int(100 + 0.25 * 127.5 + 0.5)  # the middle: all of it
    edge = int(out[12, 60, 0])  # the window's top row: a fraction of it
    assert 100 <= edge < int(out[60, 60, 0])


def test_the_option_names_a_shipped_redrawer_a_file_or_none(tmp_path):
    spec = DecoderSpec.parse("restore,redraw=w8")
    assert dict(spec.options)["redraw"] == "w8" and spec.runs_networks()
    assert "redraw" not in dict(DecoderSpec.parse("redraw=none", spec).options)
    assert DecoderSpec.parse("redraw=none").options == tuple(
        (k, v) for k, v in DEFAULT_DECODER.options if k != "redraw")  # fmt: skip
    with pytest.raises(DecoderOptionError, match="redraw.*expected one of w8"):
        DecoderSpec.parse("restore,redraw=w16")
    with pytest.raises(DecoderOptionError, match="only for --decoder restore"):
        DecoderSpec.parse("warp,redraw=w8")
    weights = tmp_path / "r.pt"
    weights.write_bytes(b"x")
    assert dict(DecoderSpec.parse(f"restore,redraw={weights}").options)["redraw"] == str(weights)


def test_the_detector_evidence_term_is_zero_on_the_original_and_pulls_towards_it():
    """``train-redraw --detector-weight``: the loss is 0 when the output is the target, grows
    with the weight, and its gradient moves the output towards the target's evidence."""
    from semcodec.codec.detection.ssdlite import SSDLiteMobileNetV2
    from semcodec.evaluation.training.redraw import evidence_loss, person_confidence

    torch.manual_seed(0)
    detector = SSDLiteMobileNetV2().eval().requires_grad_(False)
    target = torch.rand(2, 3, 128, 64) * 2 - 1
    output = (target + 0.3 * torch.randn_like(target)).clamp(-1, 1).requires_grad_(True)
    with torch.no_grad():
        assert float(evidence_loss(detector, 1.0)(target, target)) == 0.0
    light, heavy = evidence_loss(detector, 0.1)(output, target), evidence_loss(detector, 1.0)(
        output, target)
    assert float(heavy.detach()) > 0
    assert float(heavy.detach()) == pytest.approx(10 * float(light.detach()), rel=1e-5)
    heavy.backward()
    with torch.no_grad():
        stepped = output - 1e-2 * output.grad / output.grad.abs().max()
        assert float(evidence_loss(detector, 1.0)(stepped, target)) < float(heavy.detach())
        assert 0.0 < person_confidence(detector, target) < 1.0
