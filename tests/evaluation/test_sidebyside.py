"""``semcodec-bench sidebyside``: a picture of frames, the original beside reconstructions."""

from __future__ import annotations

import numpy as np
import pytest

from semcodec.evaluation.bench.sidebyside import side_by_side


def test_one_row_per_frame_and_one_panel_per_codec():
    rng = np.random.default_rng(0)
    pixels = rng.integers(0, 255, (6, 48, 64, 3), np.uint8)
    picture = side_by_side(pixels, 10.0, [("jpeg", "q=90"), ("raw", "")], at=[1, 6],
                           width=64)  # fmt: skip
    assert picture.shape == (2 * 48, 3 * 64, 3) and picture.dtype == np.uint8
    raw_panel = picture[48:, 128:]  # frame 6, raw: the original itself below the label band
    np.testing.assert_array_equal(raw_panel[20:], pixels[5, 20:])


def test_frames_outside_the_clip_are_refused():
    with pytest.raises(ValueError, match="outside"):
        side_by_side(np.zeros((3, 16, 16, 3), np.uint8), 5.0, [], at=[4])


def test_steady_protocol_shows_and_charges_only_the_frames_after_the_warmup():
    rng = np.random.default_rng(1)
    pixels = rng.integers(0, 255, (5, 48, 64, 3), np.uint8)
    picture = side_by_side(pixels, 10.0, [("raw", "")], at=[1, 3], width=64, warmup=2)
    assert picture.shape == (2 * 48, 2 * 64, 3)
    np.testing.assert_array_equal(picture[20:48, 64:], pixels[2, 20:])  # clip frame 1 = 3rd
    np.testing.assert_array_equal(picture[68:, 64:], pixels[4, 20:])
    with pytest.raises(ValueError, match="outside the clip of 3 frames"):
        side_by_side(pixels, 10.0, [], at=[4], warmup=2)


def test_the_label_gives_the_bpp_of_the_shown_frames_alone():
    from semcodec.evaluation.bench.sidebyside import reconstructions

    pixels = np.zeros((4, 16, 16, 3), np.uint8)
    [(label, decoded)] = reconstructions(pixels, 5.0, [("raw", "")], warmup=3)
    assert decoded.shape == (1, 16, 16, 3) and label.endswith("24.0000 bpp")


def test_cli_steady_protocol_on_the_sample(tmp_path):
    import cv2

    from semcodec.codec.core.sources import open_source, sample_path
    from semcodec.evaluation.cli import main

    out = tmp_path / "steady.png"
    argv = ["-q", "sidebyside", "--data", str(sample_path()), "--start", "4", "--frames", "2",
            "--protocol", "steady", "--show", "jpeg:q=95", "--at", "2", "--width", "64",
            "-o", str(out)]  # fmt: skip
    assert main(argv) == 0
    picture = cv2.cvtColor(cv2.imread(str(out)), cv2.COLOR_BGR2RGB)
    frame = open_source(sample_path()).read(start=5, count=1)[0]  # clip frame 2 = frame 5
    expected = cv2.resize(frame, (64, picture.shape[0]), interpolation=cv2.INTER_AREA)
    assert np.abs(picture[20:, :64].astype(int) - expected[20:]).mean() < 1


def test_equal_rate_baseline_is_the_best_x265_near_the_rate_else_the_nearest():
    from semcodec.evaluation.bench.sidebyside import equal_rate_baseline

    def row(codec, setting, bpp, lpips, sequence="s"):
        return {"codec": codec, "setting": setting, "bpp": bpp, "st_lpips": lpips,
                "sequence": sequence, "protocol": "cold"}  # fmt: skip

    rows = [row("scaffold", "level=1", 0.004, 0.5), row("x265", "crf=51", 0.0044, 0.40),
            row("x265", "qp=51,ipratio=8", 0.0037, 0.30), row("x265", "crf=38", 0.03, 0.1),
            row("x265", "crf=51", 0.004, 0.01, sequence="other"),
            row("x264", "crf=51", 0.004, 0.01)]  # fmt: skip
    assert equal_rate_baseline(rows, "scaffold", "level=1")["setting"] == "qp=51,ipratio=8"
    far = [rows[0], row("x265", "a", 0.001, 0.9), row("x265", "b", 0.01, 0.2)]
    assert equal_rate_baseline(far, "scaffold", "level=1")["setting"] == "b"  # nearer in log
    assert equal_rate_baseline(rows[1:], "scaffold", "level=1") is None
    assert equal_rate_baseline(rows[:1], "scaffold", "level=1") is None


def test_the_demo_grid_has_x265_at_level_1s_rate():
    from semcodec.evaluation.cli import build_parser
    from semcodec.evaluation.cli.common import DEMO_X265_AT_LEVEL1_RATE
    from semcodec.evaluation.cli.run import grid_from_args

    parser = build_parser()
    demo = grid_from_args(parser.parse_args(["run"]))
    assert set(DEMO_X265_AT_LEVEL1_RATE) <= set(demo.codecs["x265"])
    assert "crf=23" in demo.codecs["x265"]
    chosen = grid_from_args(parser.parse_args(["run", "--crf", "30"]))
    assert chosen.codecs["x265"] == ["crf=30"]  # a user's sweep is left alone
