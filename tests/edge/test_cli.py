"""edge-agent: progress on stderr, Ctrl-C, one-line errors (more argument cases in
tests/evaluation/test_cli.py, which runs them with models forbidden)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from semcodec.edge import cli as edge_cli
from semcodec.edge.cli import DefaultsHelpFormatter, OneLineErrorParser, build_parser, main

#: edge-agent with an encoder that reads frames slowly and never finishes: $MARKER is touched
#: once the third frame is read; Ctrl-C must then end it.
_SLOW_EDGE = """
import os, signal, sys, time
# Ctrl-C as at a terminal, also when the tests run as a background job (SIGINT ignored)
signal.signal(signal.SIGINT, signal.default_int_handler)
from pathlib import Path
import semcodec.codec.scaffold.codec as scaffold_codec
from semcodec.edge.cli import main

def slow_encode(path, frames, *args, **kwargs):
    for i, _ in enumerate(frames):
        if i == 2:
            Path(os.environ["MARKER"]).touch()
        time.sleep(0.5)
    time.sleep(60)

scaffold_codec.encode_to_file = slow_encode
sys.exit(main(sys.argv[1:]))
"""


def test_ctrl_c_exits_130_with_one_line_and_writes_nothing(tmp_path, sample_dir):
    marker, out = tmp_path / "reading", tmp_path / "out.semc"
    proc = subprocess.Popen(
        [sys.executable, "-c", _SLOW_EDGE, "encode", str(sample_dir), "-o", str(out)],
        env={**os.environ, "MARKER": str(marker)}, stdout=subprocess.PIPE,
        stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    deadline = time.monotonic() + 120
    while not marker.exists():
        if proc.poll() is not None or time.monotonic() > deadline:
            proc.kill()
            pytest.fail(f"the encoder never started: {proc.communicate()}")
        time.sleep(0.1)
    proc.send_signal(signal.SIGINT)
    stdout, stderr = proc.communicate(timeout=60)
    assert proc.returncode == 130, stderr
    assert "Traceback" not in stderr and stdout == ""
    lines = stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("edge-agent: interrupted"), stderr
    assert not out.exists()


def test_progress_bar_counts_the_frames_read(tmp_path, sample_dir, monkeypatch, capsys):
    import semcodec.codec.scaffold.codec as scaffold_codec
    from semcodec.codec.scaffold.codec import EncoderStats

    def fake_encode(path, frames, config, fps, size, total, *args):
        assert total == 5
        stats = EncoderStats(frames=sum(1 for _ in frames))
        Path(path).write_bytes(b"x" * 10)
        return stats

    monkeypatch.setattr(scaffold_codec, "encode_to_file", fake_encode)
    monkeypatch.setattr(sys.stderr, "isatty", lambda: True, raising=False)
    bars = []
    make_bar = edge_cli.frame_progress
    monkeypatch.setattr(edge_cli, "frame_progress",
                        lambda *a: bars.append(make_bar(*a)) or bars[-1])  # fmt: skip
    out = tmp_path / "x.semc"
    assert main(["encode", str(sample_dir), "-o", str(out), "--frames", "5", "--start", "3"]) == 0
    (bar,) = bars
    assert (bar.n, bar.total) == (5, 5)  # every frame read was counted
    err = capsys.readouterr().err
    assert "encode:" in err  # drawn on stderr
    assert "x.semc: 5 frames" in err  # the summary, logged
    assert main(["encode", str(sample_dir), "-o", str(out), "--frames", "5", "-q"]) == 0
    assert capsys.readouterr() == ("", "")  # -q: no bar, no summary


def test_output_folder_problems_are_user_errors(tmp_path, sample_dir, capsys):
    assert main(["encode", str(sample_dir), "-o", str(tmp_path)]) == 2
    assert "is a folder" in capsys.readouterr().err
    assert main(["encode", str(sample_dir), "-o", str(tmp_path / "no" / "x.semc")]) == 2
    assert "does not exist" in capsys.readouterr().err


def test_help_has_no_none_defaults(capsys):
    parser = build_parser()
    assert isinstance(parser, OneLineErrorParser)
    with pytest.raises(SystemExit):
        parser.parse_args(["encode", "--help"])
    text = capsys.readouterr().out
    assert "(default: None)" not in text and "(default: 1)" in text
    assert DefaultsHelpFormatter is not None


@pytest.fixture
def encoded_configs(monkeypatch) -> list:
    """The level configs ``encode`` codes with, in order (the coding itself skipped: each
    writes a one-byte file)."""
    import semcodec.codec.scaffold.codec as scaffold_codec
    from semcodec.codec.scaffold.codec import EncoderStats

    seen = []

    def fake_encode(path, frames, config, fps, size, total, *args):
        seen.append(config)
        Path(path).write_bytes(b"x")
        return EncoderStats(frames=sum(1 for _ in frames))

    monkeypatch.setattr(scaffold_codec, "encode_to_file", fake_encode)
    return seen


def test_rate_targets_reach_the_level_config(tmp_path, sample_dir, encoded_configs, capsys):
    seen = encoded_configs
    out = str(tmp_path / "x.semc")
    assert main(["encode", str(sample_dir), "-o", out, "--frames", "2", "-q"]) == 0
    assert main(["encode", str(sample_dir), "-o", out, "--frames", "2", "-q",
                 "--target-bpp", "0.01"]) == 0  # fmt: skip
    assert main(["encode", str(sample_dir), "-o", out, "--frames", "2", "-q",
                 "--target-kbps", "7.7414"]) == 0  # fmt: skip
    default, by_bpp, by_kbps = (c.target_bpp for c in seen)
    assert default == 0.004 and by_bpp == 0.01
    assert by_kbps == pytest.approx(7741.4 / (384 * 288 * 7))  # the sample: 384x288, 7 fps
    with pytest.raises(SystemExit) as exc:
        main(["encode", str(sample_dir), "-o", out, "--target-bpp", "0.01", "--target-kbps", "8"])
    assert exc.value.code == 2
    assert "not allowed with" in capsys.readouterr().err


def test_the_model_threads_default_to_the_cpus_the_process_may_use(caplog):
    """``--threads`` unset: every CPU of the process's affinity (said in the log); given: kept."""
    import argparse
    import logging
    import os
    import subprocess
    import sys

    from semcodec.edge.cli import _choose_threads, usable_cpus

    args = build_parser().parse_args(["encode", "in.mp4", "-o", "out.semc"])
    assert args.threads is None
    with caplog.at_level(logging.DEBUG, logger="semcodec"):
        _choose_threads(args)
    assert args.threads == usable_cpus() == len(os.sched_getaffinity(0))
    assert f"threads: {args.threads} per model" in caplog.text
    given = build_parser().parse_args(["encode", "in.mp4", "-o", "o.semc", "--threads", "3"])
    _choose_threads(given)
    assert given.threads == 3
    _choose_threads(argparse.Namespace(command="other"))  # a command without the option
    one = subprocess.run([sys.executable, "-c", "import os; os.sched_setaffinity(0, {0}); "
                          "from semcodec.edge.cli import usable_cpus; print(usable_cpus())"],
                         capture_output=True, text=True, check=True)  # fmt: skip
    assert one.stdout.strip() == "1"


def test_the_decoder_is_a_scaffold_stream_option(sample_dir, tmp_path, capsys):
    assert main(["stream", str(sample_dir), "--server", "127.0.0.1:9", "--mode", "detect",
                 "--decoder", "warp"]) == 2  # fmt: skip
    assert "--decoder: scaffold-mode options" in capsys.readouterr().err
    with pytest.raises(SystemExit) as exited:  # a file is decoded by whoever reads it
        main(["encode", str(sample_dir), "-o", str(tmp_path / "x.semc"), "--decoder", "warp"])
    assert exited.value.code == 2
    assert "unrecognized arguments: --decoder warp" in capsys.readouterr().err
    assert not (tmp_path / "x.semc").exists()
    args = build_parser().parse_args(["stream", "in", "--server", "h:1", "--decoder", "warp"])
    assert args.decoder == "warp"


def test_the_priority_reaches_the_level_config_and_is_refused_where_it_cannot_apply(
        tmp_path, sample_dir, encoded_configs, capsys):  # fmt: skip
    seen = encoded_configs
    out = tmp_path / "x.semc"
    for priority in ("scene", "people"):
        assert main(["encode", str(sample_dir), "-o", str(out), "--frames", "2", "-q",
                     "--priority", priority]) == 0  # fmt: skip
    assert main(["encode", str(sample_dir), "-o", str(out), "--frames", "2", "-q"]) == 0
    assert [c.priority for c in seen] == ["scene", "people", "balanced"]
    out.unlink()
    assert main(["encode", str(sample_dir), "-o", str(out), "--level", "2",
                 "--priority", "scene"]) == 2  # fmt: skip
    assert "--priority: level 2 sends no plate and references" in capsys.readouterr().err
    assert main(["encode", str(sample_dir), "-o", str(out), "--mode", "detect",
                 "--priority", "people"]) == 2  # fmt: skip
    assert "--priority: scaffold-mode options" in capsys.readouterr().err
    assert not out.exists()
