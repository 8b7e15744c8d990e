"""The output folder: written beside the target and moved into place, never half-written,
never through symlinks, refused when it holds something, with every write checked."""

from __future__ import annotations

import errno
import json
import os
import signal
import subprocess
import sys
import time
import tracemalloc
from pathlib import Path

import numpy as np
import pytest
from semc_streams import stream_bytes, synthetic_stream

from semcodec.cloud import outputs as outputs_module
from semcodec.cloud.cli import build_parser
from semcodec.cloud.cli import main as cloud_main
from semcodec.cloud.outputs import DecodeOutputs, OutputError, remove_stale_partials
from semcodec.codec.core.types import DecodedFrame, FrameScaffold, Segmentation


@pytest.fixture()
def semc(tmp_path) -> Path:
    path = tmp_path / "in.semc"
    path.write_bytes(stream_bytes(*synthetic_stream(level=1, count=3)))
    return path


def _leftovers(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir() if p.name.startswith("."))


def test_a_non_empty_output_folder_is_refused_unless_force(semc, tmp_path, capsys):
    out = tmp_path / "out"
    out.mkdir()
    (out / "stream.json").write_text("old")
    (out / "frames").mkdir()
    (out / "frames" / "000099.png").write_bytes(b"old")
    assert cloud_main(["decode", str(semc), "-o", str(out)]) == 2
    assert "--force" in capsys.readouterr().err
    assert (out / "stream.json").read_text() == "old"
    assert cloud_main(["decode", str(semc), "-o", str(out), "--force"]) == 0
    assert sorted(p.name for p in (out / "frames").iterdir()) == [f"{i:06d}.png" for i in (1, 2, 3)]
    assert json.loads((out / "stream.json").read_text())["complete"] is True
    assert _leftovers(tmp_path) == []


def test_an_empty_existing_folder_is_used(semc, tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    assert cloud_main(["decode", str(semc), "-o", str(out)]) == 0
    assert len(list((out / "frames").iterdir())) == 3


def test_a_failed_decode_leaves_the_old_outputs_untouched_and_no_new_ones(semc, tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    (out / "stream.json").write_text("old")
    data = semc.read_bytes()
    bad = tmp_path / "bad.semc"
    bad.write_bytes(data[: len(data) - 3])  # cut inside the END unit
    assert cloud_main(["decode", str(bad), "-o", str(out), "--force"]) == 2
    assert [p.name for p in out.iterdir()] == ["stream.json"]
    assert _leftovers(tmp_path) == []


def test_a_symlinked_output_folder_is_refused(semc, tmp_path, capsys):
    victim = tmp_path / "victim"
    victim.mkdir()
    link = tmp_path / "out"
    link.symlink_to(victim)
    assert cloud_main(["decode", str(semc), "-o", str(link), "--force"]) == 2
    assert "symbolic link" in capsys.readouterr().err
    assert list(victim.iterdir()) == []


def test_a_missing_parent_folder_is_refused_and_not_created(semc, tmp_path, capsys):
    out = tmp_path / "typo" / "out"
    assert cloud_main(["decode", str(semc), "-o", str(out)]) == 2
    assert "does not exist" in capsys.readouterr().err
    assert not (tmp_path / "typo").exists()


def test_planted_symlinks_in_the_old_folder_are_never_followed(semc, tmp_path):
    victim = tmp_path / "victim.txt"
    victim.write_text("precious")
    out = tmp_path / "out"
    out.mkdir()
    (out / "stream.json").symlink_to(victim)
    (out / "frames").symlink_to(tmp_path)
    assert cloud_main(["decode", str(semc), "-o", str(out), "--force"]) == 0
    assert victim.read_text() == "precious"
    assert not (out / "stream.json").is_symlink() and not (out / "frames").is_symlink()
    assert (tmp_path / "in.semc").exists()  # the old frames -> tmp_path link was not emptied


def test_files_are_created_exclusively_without_following_links(tmp_path):
    target = tmp_path / "x.png"
    target.symlink_to(tmp_path / "elsewhere")
    with pytest.raises(OutputError, match="x.png"):
        outputs_module.write_new_file(target, b"data")
    assert not (tmp_path / "elsewhere").exists()


def test_a_full_disk_is_an_error_and_leaves_nothing(semc, tmp_path, monkeypatch, capsys):
    real_open = outputs_module.open_new_file

    class FullDisk:
        def __init__(self, fh):
            self.fh = fh

        def write(self, data):
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

        def __getattr__(self, name):
            return getattr(self.fh, name)

        def __enter__(self):
            return self

        def __exit__(self, *exc):
            self.fh.close()

    def full(path):
        fh = real_open(path)
        return FullDisk(fh) if path.suffix == ".png" else fh

    monkeypatch.setattr(outputs_module, "open_new_file", full)
    out = tmp_path / "out"
    assert cloud_main(["decode", str(semc), "-o", str(out)]) == 2
    err = capsys.readouterr().err
    assert "No space left on device" in err and err.count("\n") == 1
    assert not out.exists() and _leftovers(tmp_path) == []


def test_scaffolds_are_streamed_to_disk_not_kept_in_memory(tmp_path):
    from semcodec.codec.bitstream import StreamHeader

    header = StreamHeader(512, 512, 7)
    labels = np.ones((512, 512), np.uint16)
    image = np.zeros((8, 8, 3), np.uint8)
    with DecodeOutputs(tmp_path / "out", header, overview=False) as out:
        tracemalloc.start()
        try:
            for k in range(1, 41):  # 40 maps of 512 KiB: 20 MiB if they were kept
                scaffold = FrameScaffold(k, segmentation=Segmentation(labels, (512, 512)))
                out.add(DecodedFrame(scaffold, (8, 8)), image)
            growth = tracemalloc.get_traced_memory()[0]
        finally:
            tracemalloc.stop()
    assert growth < 4 << 20
    saved = np.load(tmp_path / "out" / "scaffolds.npz")
    assert len(saved.files) == 40
    np.testing.assert_array_equal(saved["seg_000040"], labels)


def test_interrupt_exits_130_with_one_line_and_leaves_nothing(semc, tmp_path, monkeypatch, capsys):
    def interrupted(self, decoded, image):
        raise KeyboardInterrupt

    monkeypatch.setattr(DecodeOutputs, "add", interrupted)
    out = tmp_path / "out"
    assert cloud_main(["decode", str(semc), "-o", str(out)]) == 130
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "interrupted" in err and "Traceback" not in err
    assert not out.exists() and _leftovers(tmp_path) == []


def test_kill_9_during_decode_leaves_nothing_under_the_final_name(tmp_path):
    header, units = synthetic_stream(level=1, count=400, size=(96, 64))
    path = tmp_path / "long.semc"
    path.write_bytes(stream_bytes(header, units))
    out = tmp_path / "out"
    code = "import sys; from semcodec.cloud.cli import main; sys.exit(main(sys.argv[1:]))"
    proc = subprocess.Popen([sys.executable, "-c", code, "decode", str(path), "-o", str(out)],
                            stderr=subprocess.DEVNULL)  # fmt: skip
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            work = [p for p in tmp_path.iterdir() if p.name.startswith(".out.")]
            if work and len(list((work[0] / "frames").glob("*.png"))) >= 5:
                break
            assert proc.poll() is None, "the decode ended before it could be killed"
            time.sleep(0.05)
        os.kill(proc.pid, signal.SIGKILL)
    finally:
        proc.wait()
    assert proc.returncode == -signal.SIGKILL
    assert not out.exists()
    (stale,) = [p for p in tmp_path.iterdir() if p.name.startswith(".out.")]
    assert stale.name.startswith(f".out.{proc.pid}-")
    short = tmp_path / "short.semc"
    short.write_bytes(stream_bytes(*synthetic_stream(level=1, count=3, size=(96, 64))))
    assert cloud_main(["decode", str(short), "-o", str(out), "-q"]) == 0
    assert not stale.exists()  # the next decode into the same folder cleans it up
    assert sorted(p.name for p in tmp_path.iterdir()) == ["long.semc", "out", "short.semc"]


def test_partials_of_a_running_decode_are_left_alone(tmp_path):
    live = tmp_path / f".out.{os.getpid()}-0011aabb.partial"
    odd = tmp_path / ".out.notapid.partial"
    for folder in (live, odd):
        folder.mkdir()
    assert remove_stale_partials(tmp_path / "out") == []
    assert live.is_dir() and odd.is_dir()


def test_help_texts_version_and_decoder_names(capsys):
    help_text = build_parser()._subparsers._group_actions[0].choices["decode"].format_help()
    assert "(default: None)" not in help_text and "warp" in help_text
    assert "--allow-partial" in help_text and "--force" in help_text
    with pytest.raises(SystemExit) as info:
        cloud_main(["--version"])
    assert info.value.code == 0
    assert capsys.readouterr().out.startswith("cloud-decoder (semcodec ")


def test_unknown_decoder_is_one_line_status_2(semc, tmp_path, capsys):
    assert cloud_main(["decode", str(semc), "-o", str(tmp_path / "o"), "--decoder", "nope"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("cloud-decoder: error:") and "warp" in err and err.count("\n") == 1


def test_quiet_success_prints_nothing_and_info_goes_to_stderr(semc, tmp_path, capsys):
    assert cloud_main(["decode", str(semc), "-o", str(tmp_path / "a"), "-q"]) == 0
    assert capsys.readouterr() == ("", "")
    assert cloud_main(["-q", "decode", str(semc), "-o", str(tmp_path / "c")]) == 0
    assert capsys.readouterr() == ("", "")
    assert cloud_main(["decode", str(semc), "-o", str(tmp_path / "b")]) == 0
    captured = capsys.readouterr()
    assert captured.out == "" and "3 frames" in captured.err


def test_overview_drawing_clips_coordinates_far_outside_the_frame():
    from semcodec.cloud.outputs import render_overview
    from semcodec.codec.core.types import Flow, Pose

    far = np.full((33, 2), 4e15, np.float32)
    far[::2] = -4e15
    pose = Pose(3, far, np.ones(33, np.float32))
    flow = Flow(np.full((4, 4, 2), 1e12, np.float32), (48, 32))
    decoded = DecodedFrame(FrameScaffold(2, poses=[pose], flow=flow), (48, 32))
    picture = render_overview(np.zeros((32, 48, 3), np.uint8), decoded)
    assert picture.shape == (32, 48, 3) and picture.any()


def test_overview_draws_each_tracked_box_in_its_id_colour():
    from semcodec.cloud.outputs import id_colour, render_overview
    from semcodec.codec.core.types import Tracks

    tracks = Tracks(np.array([[10, 20, 40, 90], [-1e15, -1e15, 1e15, 1e15]], np.float32),
                    np.ones(2, np.float32), np.array([5, 9], np.int32))  # fmt: skip
    decoded = DecodedFrame(FrameScaffold(2, tracks=tracks), (96, 96))
    picture = render_overview(np.zeros((96, 96, 3), np.uint8), decoded)
    assert tuple(picture[50, 10]) == id_colour(5)  # the left edge of track 5's box
    assert tuple(picture[50, 25]) == (0, 0, 0)  # inside it: not filled
