"""Detect mode's rate control and self-check (issue 40): the choice on a synthetic rate table
(known answers), the controller holding a target on a scene dearer than the table, the
self-check refusing a setting below the floor, settings changed mid-stream round-tripping,
and the command line refusing options that cannot apply."""

from __future__ import annotations

import numpy as np
import pytest

from semcodec.codec.task.ratecontrol import (
    DetectRateController,
    DetectSetting,
    RatePoint,
    agreement_counts,
    choose_setting,
    f1,
)


def _point(beta, skip, period, rate, agreement):
    return RatePoint(DetectSetting(beta, skip, period), rate, agreement)


#: β 0.01 agrees better than β 0.1 at every rate; β 1 is cheap and bad.
TABLE = [
    _point(0.01, 0, 64, 400.0, 0.95), _point(0.01, 4, 64, 200.0, 0.93),
    _point(0.01, 8, 64, 120.0, 0.86), _point(0.01, 16, 64, 80.0, 0.70),
    _point(0.1, 0, 64, 150.0, 0.85), _point(0.1, 4, 64, 60.0, 0.82),
    _point(1.0, 0, 64, 20.0, 0.30), _point(1.0, 8, 64, 10.0, 0.20),
]  # fmt: skip


def test_the_choice_on_a_synthetic_rate_table():
    choice = choose_setting(TABLE, 250.0, 0.8)  # fits: 200 (0.93), 120, 150, 60
    assert choice.status == "ok" and choice.point.setting == DetectSetting(0.01, 4, 64)
    # the rungs: the chosen β's points at or above the floor, cheapest first
    assert [p.bytes_per_frame for p in choice.rungs] == [120.0, 200.0, 400.0]
    assert choose_setting(TABLE, 130.0, 0.8).point.setting == DetectSetting(0.01, 8, 64)
    # agreements within 0.02 are equal: the one using more of the budget
    tied = [_point(0.01, 4, 64, 100.0, 0.90), _point(0.03, 2, 64, 140.0, 0.89)]
    assert choose_setting(tied, 150.0, 0.8).point.setting.beta == 0.03
    # a budget too small for the floor: the cheapest setting that reaches it, said so
    low = choose_setting(TABLE, 30.0, 0.8)
    assert low.status == "over_budget" and low.point.setting == DetectSetting(0.1, 4, 64)
    assert "cannot reach the floor" in low.describe()
    # never a setting below the floor while one reaches it (β 1 fits 30 B but agrees 0.30)
    assert all(choose_setting(TABLE, t, 0.8).point.agreement >= 0.8 for t in (5, 30, 100, 1e4))
    # no setting reaches it: the best agreement, said so
    none = choose_setting(TABLE, 1e4, 0.99)
    assert none.status == "below_floor" and none.point.agreement == 0.95
    with pytest.raises(ValueError):
        choose_setting([], 100.0)
    with pytest.raises(ValueError):
        choose_setting(TABLE, 0.0)


def _run(controller: DetectRateController, frames: int, cost: float) -> None:
    """Feeds ``frames`` units of ``cost`` times the table's bytes for the current rung."""
    for _ in range(frames):
        controller.add_frame(round(cost * controller.rungs[controller.rung].bytes_per_frame))


@pytest.mark.parametrize("cost", [0.6, 1.0, 1.5])
def test_the_controller_holds_the_target_on_a_scene_the_table_misjudged(cost):
    ladder = ((16, 60.0), (12, 80.0), (8, 100.0), (4, 150.0), (2, 200.0), (0, 300.0))
    rungs = [_point(0.01, s, 64, r, 0.9) for s, r in ladder]
    choice = choose_setting(rungs, 120.0, 0.8)
    assert choice.point.bytes_per_frame == 100.0
    control = DetectRateController(choice, fps=7.0, header_bytes=300, expected_frames=300)
    _run(control, 300, cost)
    assert 0.9 <= control.rate / 120.0 <= 1.1, (cost, control.rate, control.switches)
    assert control.switches[0].reason == "start"
    if cost != 1.0:  # it moved, and says from which frame, to what and why
        assert len(control.switches) > 1
        assert {s.reason for s in control.switches[1:]} <= {"over", "under"}


def test_a_target_that_follows_the_link_starts_a_new_account():
    """``--auto``: the target drops to half mid-stream; the stream does not spend what it
    saved at the old target, it holds the new one from there."""
    ladder = ((24, 30.0), (16, 45.0), (8, 70.0), (4, 100.0), (0, 160.0))
    rungs = [_point(0.01, s, 64, r, 0.9) for s, r in ladder]
    control = DetectRateController(choose_setting(rungs, 100.0, 0.8), fps=7.0)
    _run(control, 140, 1.0)
    before = control.spent
    control.set_target_bps(50.0 * 8 * 7)  # 50 B/frame
    assert control.spent == 0.0 and control.target == pytest.approx(50.0)
    _run(control, 140, 1.0)
    assert 0.9 <= control.spent / 140 / 50.0 <= 1.1, control.switches
    assert before > 0 and control.switches[-1].reason == "over"
    control.set_target_bps(52.0 * 8 * 7)  # a small move keeps the account
    assert control.spent > 0
    with pytest.raises(ValueError):
        control.set_target_bps(0.0)


def test_the_self_check_refuses_a_setting_below_the_floor():
    rungs = [_point(0.01, s, 64, r, 0.9) for s, r in ((16, 60.0), (8, 100.0), (0, 300.0))]
    control = DetectRateController(choose_setting(rungs, 110.0, 0.8), fps=7.0)
    assert control.setting.skip_threshold == 8
    for _ in range(2):  # the decoded features find 1 of the 4 people: F1 0.4
        control.add_frame(100)
        control.add_check((1, 4, 1))
    assert control.setting.skip_threshold == 0 and control.switches[-1].reason == "floor"
    assert control.lowest == 2  # skip 8 and 16 are barred for the rest of the stream
    _run(control, 70, 0.2)  # far under budget... and far over: it never goes back below
    _run(control, 70, 5.0)
    assert control.setting.skip_threshold == 0
    for _ in range(2):  # still below at the finest setting: a warning, once
        control.add_check((0, 3, 0))
    assert len(control.warnings) == 1 and "under the floor" in control.warnings[0]


def test_agreement_counts_known_answers():
    ref = np.array([[0, 0, 10, 20], [50, 50, 60, 70], [100, 0, 110, 20]], float)
    got = np.array([[1, 1, 10, 20], [52, 50, 62, 70], [200, 0, 210, 20]], float)
    assert agreement_counts(ref, got) == (2, 3, 3)  # IoU 0.85 and 0.67 match, the third not
    assert agreement_counts(ref, np.zeros((0, 4))) == (0, 3, 0)
    assert f1([(2, 3, 3), (0, 0, 0)]) == pytest.approx(2 / 3)
    assert f1([(0, 0, 0)]) == 1.0  # nobody on either side: they agree


def test_settings_changed_mid_stream_round_trip():
    """Skip threshold and intra period change between frames (the controller's moves): the
    cloud decodes every unit to the latents the edge holds for it."""
    import torch

    from semcodec.codec.entropy.features import count_symbols, tables_from_counts
    from semcodec.codec.task.bottleneck import BottleneckConfig, FeatureBottleneck, TaskBottleneck
    from semcodec.codec.task.coder import TaskDecoder, TaskEncoder, UnitShape
    from semcodec.codec.task.split import SplitConfig

    torch.manual_seed(0)
    rng = np.random.default_rng(3)
    latents = np.cumsum(rng.integers(-1, 2, (12, 4, 2 * 19, 19)), axis=0).astype(np.int32)
    counts = count_symbols([[latents[t].reshape(4, 2, 19, 19)[:, 0] for t in range(3)]], groups=4)
    model = FeatureBottleneck(BottleneckConfig(latent=4, hidden=8)).eval()
    bottleneck = TaskBottleneck(model, tables_from_counts(counts), SplitConfig(), counts, {})

    class _Cut:  # the encoder only checks the cut
        config = SplitConfig()

    encoder = TaskEncoder(bottleneck, _Cut(), intra_period=4, skip_threshold=0)
    decoder = TaskDecoder(bottleneck, _Cut(), UnitShape(2, 4, 19), 38, 19)
    kinds = []
    for t, q in enumerate(latents):
        encoder.skip_threshold = (0, 3, 1, 6)[t % 4]
        encoder.intra_period = 4 if t < 6 else 3
        unit = encoder.encode_latents(q)
        kinds.append("I" if unit[0] == 0 else "T")
        np.testing.assert_array_equal(decoder.latents(unit), encoder.decoded)
    assert "".join(kinds) == "ITTTITTITTIT"  # the new period counts from the last intra unit


@pytest.mark.parametrize("extra, words", [
    (["--mode", "detect", "--level", "2"], "--level: scaffold-mode options"),
    (["--mode", "detect", "--flow-prior", "p.json"], "--flow-prior: scaffold-mode options"),
    (["--mode", "detect", "--target-kbps", "80", "--skip-threshold", "2"],
     "--skip-threshold: with --target-kbps/--target-bpp/--auto the edge chooses"),
    (["--mode", "detect", "--target-kbps", "80", "--min-agreement", "1.5"],
     "--min-agreement must be in [0, 1]"),
    (["--mode", "detect", "--min-agreement", "0.9"], "--min-agreement goes with --target"),
    (["--mode", "detect", "--bottleneck", "a.pt", "--bottleneck", "b.pt"], "a set to choose"),
    (["--intra-period", "8"], "--intra-period is for --mode detect"),
    (["--min-agreement", "0.5"], "--min-agreement is for --mode detect"),
])  # fmt: skip
def test_encode_refuses_options_that_cannot_apply(extra, words, sample_dir, tmp_path, capsys):
    from semcodec.edge.cli import main as edge_main

    out = tmp_path / "x.semc"
    assert edge_main(["encode", str(sample_dir), "-o", str(out), *extra]) == 2
    assert words in capsys.readouterr().err
    assert not out.exists()
