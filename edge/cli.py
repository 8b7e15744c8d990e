"""``edge-agent``: the edge side of semcodec.

``edge-agent encode INPUT -o FILE.semc --level N`` extracts the scaffolds of a video (a MOT
sequence folder, a frame folder, a video file, ``.y4m`` or ``.yuv``) and writes the
entropy-coded bitstream to a file. ``edge-agent stream INPUT --server HOST:PORT`` encodes the
same way and streams the units to ``cloud-decoder serve`` as they are made (paced, spooled
on disk until acknowledged, resumed after a broken link: :mod:`edge.stream`).

Exit status: 0 success; 2 a user error (bad argument, missing input or model, unusable
output; one line ``edge-agent: error: ...`` on stderr, checked before any model loads);
130 interrupted (Ctrl-C: nothing is written, run the command again).

:class:`OneLineErrorParser` and :class:`DefaultsHelpFormatter` are also used by
``semcodec-bench``.
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
import time
from pathlib import Path

from semcodec.codec.core.console import (
    EXIT_INTERRUPTED,
    DefaultsHelpFormatter,
    OneLineErrorParser,
    add_common_arguments,
    add_verbosity,
    configure_logging,
    count,
    frame_progress,
    one_line,
    positive_float,
    positive_int,
)
from semcodec.codec.core.models import MODELS_DIR_HELP
from semcodec.codec.task import DEFAULT_MIN_AGREEMENT

PROG = "edge-agent"
INPUT_HELP = ("MOT sequence folder, frame folder, video file, .y4m or .yuv (or a sequence name "
              "under --data-dir / $SEMCODEC_DATA_DIR), or a live stream: rtsp://, rtsps://, "
              "http(s)://, udp://, tcp://, srt:// URL, or a capture device such as "
              "v4l2:///dev/video0 (read forward only; without --frames until the stream ends "
              "or Ctrl-C)")  # fmt: skip
# not __name__: run as ``python -m semcodec.edge.cli`` it is "__main__", outside "semcodec"
log = logging.getLogger("semcodec.edge.cli")


def build_parser() -> argparse.ArgumentParser:
    parser = OneLineErrorParser(
        prog=PROG,
        description="The edge side of semcodec: extracts scaffolds (segmentation, pose, flow, "
        "rare keyframes) from video and entropy-codes them.",
    )
    add_common_arguments(parser, PROG)
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    enc = sub.add_parser(
        "encode",
        help="encode a video to a .semc bitstream file",
        description="Encodes INPUT to FILE.semc at a level (0: fewest bits ... 3: everything "
        "finer). The file is written atomically: nothing is left behind on error or Ctrl-C.",
        formatter_class=DefaultsHelpFormatter,
    )
    add_verbosity(enc)
    enc.add_argument("input", help=INPUT_HELP)
    enc.add_argument("-o", "--output", required=True, type=Path, help="the .semc file to write")
    _add_encoder_arguments(enc)
    enc.add_argument("--mode", choices=("scaffold", "detect"), default="scaffold",
                     help="scaffold: the structure of the video, for reconstruction; detect: "
                     "task features of the split person detector, for detections only "
                     "(`cloud-decoder decode` then writes detections.txt/json)")  # fmt: skip
    _add_detect_arguments(enc)
    enc.add_argument("--no-progress", action="store_true", help="no progress bar")
    _add_stream_parser(sub)
    return parser


def _add_detect_arguments(enc: argparse.ArgumentParser) -> None:
    """The options of ``--mode detect`` shared by ``encode`` and ``stream``."""
    enc.add_argument("--beta", type=positive_float, metavar="B",
                     help="detect mode: the shipped bottleneck of rate weight B (higher: fewer "
                     "bytes; default 0.01); with a target the edge chooses it")  # fmt: skip
    enc.add_argument("--bottleneck", type=Path, action="append", metavar="FILE",
                     help="detect mode: a bottleneck file from `semcodec-bench "
                     "train-bottleneck` instead of a shipped one (a server needs it too: "
                     "`cloud-decoder serve --bottleneck-dir`); with a target, repeat it to "
                     "give the set the edge chooses among (default: the shipped ones)")
    enc.add_argument("--intra-period", type=int, metavar="N",
                     help="detect mode: frames between intra units (0: only the first; "
                     "default 64; with a target the edge chooses it)")  # fmt: skip
    enc.add_argument("--skip-threshold", type=int, metavar="T",
                     help="detect mode: positions whose latents change by at most T (L1) keep "
                     "their previous values (default: the bottleneck's; 0: lossless; with a "
                     "target the edge chooses it)")  # fmt: skip
    enc.add_argument("--min-agreement", type=float, metavar="F",
                     help="detect mode with --target-kbps/--target-bpp: never choose a setting "
                     "whose detections agree with the uncompressed detector's below F (F1 at "
                     "IoU 0.5, measured by the edge on its own frames; default "
                     f"{DEFAULT_MIN_AGREEMENT:g}); a budget that cannot reach it is exceeded, "
                     "with a warning")  # fmt: skip


def _add_encoder_arguments(enc: argparse.ArgumentParser) -> None:
    """The source and encoder options shared by ``encode`` and ``stream``."""
    enc.add_argument("--level", type=int, choices=(0, 1, 2, 3),
                     help="scaffold level: 0 fewest bits ... 3 most detail (default 1; "
                     "refused with --mode detect)")  # fmt: skip
    enc.add_argument("--frames", type=positive_int, metavar="N",
                     help="encode N frames from --start (default: to the end)")  # fmt: skip
    enc.add_argument("--start", type=positive_int, default=1, metavar="K",
                     help="first frame (1-based)")  # fmt: skip
    enc.add_argument("--models-dir", metavar="DIR", help=MODELS_DIR_HELP)
    enc.add_argument("--data-dir", metavar="DIR",
                     help="where sequence names are looked up (else $SEMCODEC_DATA_DIR, "
                     "then ../shared/data)")  # fmt: skip
    enc.add_argument("--fps", type=positive_float,
                     help="frame rate (else the input's own; frame folders 25, raw .yuv "
                     "needs it, a live stream stating none 25 with a warning)")  # fmt: skip
    enc.add_argument("--width", type=positive_int, help="frame width of a raw .yuv")
    enc.add_argument("--height", type=positive_int, help="frame height of a raw .yuv")
    enc.add_argument("--input-timeout", type=positive_float, default=10.0, metavar="S",
                     help="live input: give up when connecting, or any read, takes longer "
                     "than S seconds")  # fmt: skip
    enc.add_argument("--input-option", type=_key_value, action="append", default=[],
                     metavar="KEY=VALUE",
                     help="live input: an FFmpeg option of the protocol or device, repeatable "
                     "(e.g. rtsp_transport=udp; RTSP is over TCP by default; "
                     "video_size=640x480 framerate=15 for v4l2)")  # fmt: skip
    rate = enc.add_mutually_exclusive_group()
    rate.add_argument("--target-bpp", type=positive_float, metavar="B",
                      help="hold the stream to B bits per pixel (default: the level's own "
                      "target, 0.004 at level 1; levels 0, 2, 3 have none; detect mode: "
                      "none, the bottleneck's rate)")  # fmt: skip
    rate.add_argument("--target-kbps", type=positive_float, metavar="R",
                      help="hold the stream to R kilobits per second (1000 bits); detect "
                      "mode chooses its bottleneck, skip threshold and intra period for "
                      "it")  # fmt: skip
    enc.add_argument("--pose-every", type=positive_int, metavar="K",
                     help="level 1: also send each tracked person's sparse body pose (13 "
                     "joints, a few bytes a person) every K-th frame, paid from the same "
                     "target; the cloud moves the limbs with `cloud-decoder decode --decoder "
                     "animate` (and --refiner). Default: none")  # fmt: skip
    enc.add_argument("--priority", choices=("people", "balanced", "scene"),
                     help="level 1: how the rate target is split between the background "
                     "plate and the people's references: balanced (the default: the plate "
                     "takes the pixels' share, the references the level's quality); people "
                     "or scene (chosen per camera from its start-up frames by each part's "
                     "error per byte, the people weighed by half of a viewer's attention, or "
                     "by a quarter of their area); the choice is in the profile line")  # fmt: skip
    enc.add_argument("--threads", type=positive_int,
                     help="CPU threads per model (default: the CPUs this process may use; "
                     "the bytes do not depend on it)")  # fmt: skip
    enc.add_argument("--flow-prior", type=Path, metavar="FILE",
                     help="learned flow prior (JSON from `semcodec-bench train-flow-prior`; "
                     "else the one shipped for the level's flow step)")  # fmt: skip


def _add_stream_parser(sub) -> None:
    st = sub.add_parser(
        "stream",
        help="encode a video and stream it to a cloud-decoder serve",
        description="Encodes INPUT as `encode` does and streams each unit as it is made to "
        "`cloud-decoder serve`, paced to --bandwidth-kbps or to a capacity --trace (with "
        "--auto the encoder's target follows the link), kept in an on-disk spool until the "
        "cloud acknowledges it, resent after a broken link (reconnect with backoff, resume "
        "from the cloud's last acknowledgement, no duplicates). Exits 0 once every unit is "
        "acknowledged, with a summary line. With --mode detect it streams task features "
        "instead (as `encode --mode detect`), the cloud writes detections.txt/json per "
        "session and sends each frame's detections back (--detections-out); --target-kbps "
        "or --target-bpp there chooses the bottleneck, skip threshold and intra period for "
        "the budget, and --auto has that target follow the link (the bottleneck stays the "
        "one chosen for the start); the scaffold options (--level, --flow-prior) are refused "
        "there, the pacing applies.",
        formatter_class=DefaultsHelpFormatter,
    )
    add_verbosity(st)
    st.add_argument("input", help=INPUT_HELP)
    st.add_argument("--server", required=True, metavar="HOST:PORT", help="the cloud-decoder")
    _add_encoder_arguments(st)
    st.add_argument("--mode", choices=("scaffold", "detect"), default="scaffold",
                    help="scaffold (--level default 1): the structure of the video, for "
                    "reconstruction; detect: task features of the split person detector, "
                    "for detections only")  # fmt: skip
    _add_detect_arguments(st)
    st.add_argument("--decoder", metavar="NAME[,KEY=VALUE...]",
                    help="the decoder the cloud rebuilds this stream with, as `cloud-decoder "
                    "decode --decoder` takes it: warp, restore,person_matte=none, ... or "
                    "KEY=VALUE,... over the server's own (default: the server's --decoder); "
                    "a resumed session keeps its decoder; scaffold mode only")  # fmt: skip
    st.add_argument("--detections-out", type=Path, metavar="FILE",
                    help="detect mode: write the detections the cloud sends back to FILE "
                    "(MOTChallenge lines, as the cloud's detections.txt; written under a "
                    "hidden partial name, renamed at the end)")  # fmt: skip
    auth = st.add_mutually_exclusive_group()
    auth.add_argument("--token", metavar="T", help="bearer token (visible in `ps`: prefer "
                      "--token-file)")  # fmt: skip
    auth.add_argument("--token-file", type=Path, metavar="F", help="file holding the token")
    st.add_argument("--ca", "--tls-ca", dest="tls_ca", type=Path, metavar="F",
                    help="PEM CA of the server's certificate: connect with TLS")  # fmt: skip
    st.add_argument("--tls-cert", type=Path, metavar="F", help="client certificate (mutual TLS)")
    st.add_argument("--tls-key", type=Path, metavar="F", help="key of --tls-cert")
    st.add_argument("--server-name", metavar="NAME",
                    help="name on the server's certificate, when not the host")  # fmt: skip
    pacing = st.add_mutually_exclusive_group()
    pacing.add_argument("--bandwidth-kbps", type=positive_float, metavar="K",
                        help="hold the sent rate to K kbit/s (token bucket; default: "
                        "unpaced)")  # fmt: skip
    pacing.add_argument("--trace", type=Path, metavar="FILE",
                        help="pace to a recorded link: a Mahimahi capacity trace (one "
                        "millisecond timestamp per 1500-byte packet), looped")  # fmt: skip
    st.add_argument("--trace-scale-kbps", type=positive_float, metavar="K",
                    help="scale --trace to a mean of K kbit/s, keeping its shape (default: "
                    "the trace's own rate)")  # fmt: skip
    st.add_argument("--burst-bytes", type=positive_int, metavar="B",
                    help="token bucket depth (default: 0.25 s at --bandwidth-kbps, at least "
                    "one chunk)")  # fmt: skip
    st.add_argument("--auto", action="store_true",
                    help="closed-loop rate control: the encoder's target follows the link "
                    "(measured goodput, spool, the cloud's feedback): fast back-off, slow "
                    "probe up, within --min-kbps..--max-kbps; starts at --target-kbps / "
                    "--target-bpp, else the level's target, else --max-kbps; a file is "
                    "read at its frame rate, as from a camera")  # fmt: skip
    st.add_argument("--min-kbps", type=positive_float, metavar="K",
                    help="--auto: lowest target, kbit/s (default 1)")  # fmt: skip
    st.add_argument("--max-kbps", type=positive_float, metavar="K",
                    help="--auto: highest target, kbit/s (default: --bandwidth-kbps, the "
                    "--trace's mean rate, else 1000)")  # fmt: skip
    st.add_argument("--chunk-kib", type=positive_int, metavar="K",
                    help="largest piece of a unit per message (the server may lower it; "
                    "default: 256, or a quarter second at --bandwidth-kbps / the --trace's "
                    "mean when less, at least 1, so a slow link is paced smoothly)")  # fmt: skip
    st.add_argument("--spool", type=Path, metavar="DIR",
                    help="on-disk spool of unacknowledged units; run again with the same DIR "
                    "to resume after a restart (default: a temporary folder)")  # fmt: skip
    st.add_argument("--spool-max-mb", type=positive_float, default=64.0, metavar="M",
                    help="spool size bound, MiB")  # fmt: skip
    st.add_argument("--spool-policy", choices=("block", "drop-oldest"), default="block",
                    help="when the spool is full: wait, or drop the oldest unsent non-keyframe "
                    "units (recorded in DIR/dropped.jsonl and reported)")  # fmt: skip
    st.add_argument("--max-outage-s", type=positive_float, default=300.0, metavar="S",
                    help="give up after S seconds without progress")  # fmt: skip
    st.add_argument("--keepalive-s", type=positive_float, default=10.0, metavar="S",
                    help="ping a quiet connection every S seconds; one unanswered for S "
                    "seconds is dead (reconnect)")  # fmt: skip


def _key_value(text: str) -> tuple[str, str]:
    """``KEY=VALUE`` of ``--input-option`` as a pair."""
    key, sep, value = text.partition("=")
    if not sep or not key.strip():
        raise argparse.ArgumentTypeError(f"expected KEY=VALUE, got {text!r}")
    return key.strip(), value


class UsageError(ValueError):
    """An argument that parses but cannot be used (checked before any model loads)."""


def _check_output(path: Path) -> None:
    if path.is_dir():
        raise UsageError(f"-o {path}: is a folder; give the .semc file to write")
    if not path.parent.is_dir():
        raise UsageError(f"-o {path}: the folder {path.parent} does not exist")


def _frames_to_encode(info, start: int, frames: int | None) -> int:
    """How many frames ``encode`` will read (0 when the source does not know its length)."""
    if not info.num_frames:
        return frames or 0
    if start > info.num_frames:
        raise UsageError(f"--start {start}: the input has only {info.num_frames} frames")
    left = info.num_frames - start + 1
    return min(frames, left) if frames else left


def _counted(frames, bar):
    for frame in frames:
        yield frame
        bar.update(1)


def _level_config(args: argparse.Namespace, info, start_bps: float | None = None):
    """The level preset with the rate target of ``--target-bpp`` / ``--target-kbps`` (or
    ``start_bps``, bits per second, where given: ``--auto``'s first target)."""
    import dataclasses

    from semcodec.codec.scaffold.levels import LEVELS

    config = LEVELS[args.level]
    target = args.target_bpp
    if args.target_kbps is not None:
        target = args.target_kbps * 1000 / _pixels_per_s(info)
    if start_bps is not None:
        target = start_bps / _pixels_per_s(info)
    if args.pose_every:
        config = dataclasses.replace(config, pose_every=args.pose_every)
    if args.priority:
        config = dataclasses.replace(config, priority=args.priority)
    return config if target is None else dataclasses.replace(config, target_bpp=target)


def _pixels_per_s(info) -> float:
    return info.width * info.height * info.fps


def _open_input(args: argparse.Namespace):
    """``(source, frames to encode, flow prior or None)`` of ``encode``/``stream``'s input."""
    from semcodec.codec.core.sources import open_source, resolve_data_path

    prior = None
    if args.flow_prior:
        from semcodec.codec.entropy.flow import FlowPrior

        prior = FlowPrior.load(args.flow_prior)
    source = open_source(resolve_data_path(args.input, args.data_dir), fps=args.fps,
                         width=args.width, height=args.height, timeout=args.input_timeout,
                         options=dict(args.input_option))  # fmt: skip
    return source, _frames_to_encode(source.info, args.start, args.frames), prior


def cmd_encode(args: argparse.Namespace) -> int:
    """Encodes ``args.input`` to ``args.output``; returns the exit status."""
    from semcodec.codec.core.sources import interrupt_ends
    from semcodec.codec.scaffold.codec import encode_to_file

    _check_output(args.output)
    _check_mode_options(args)
    if args.mode == "detect":
        return _encode_detect(args)
    source, total, prior = _open_input(args)
    info = source.info
    start = time.perf_counter()
    quiet = args.no_progress or args.quiet > 0
    with interrupt_ends(source), frame_progress("encode", total, quiet) as bar:
        frames = _counted((f.rgb for f in source.frames(start=args.start, count=args.frames)), bar)
        stats = encode_to_file(args.output, frames, _level_config(args, info), info.fps,
                               (info.width, info.height), total, args.models_dir,
                               args.threads, prior)  # fmt: skip
    seconds = time.perf_counter() - start
    size = args.output.stat().st_size
    bpp = 8 * size / (info.width * info.height * max(stats.frames, 1))
    parts = ", ".join(f"{k} {v}" for k, v in sorted(stats.stream_bytes.items()))
    if stats.profile:
        log.info("camera profile: %s", stats.profile)
    log.info("%s: %s (%s), %d bytes, %.5f bpp [%s], %.1f fps on %s a model", args.output,
             count(stats.frames, "frame"), count(stats.keyframes, "keyframe"), size, bpp, parts,
             stats.frames / max(seconds, 1e-9), count(args.threads, "thread"))  # fmt: skip
    return 0


def _given(pairs) -> list[str]:
    """The flags of ``(flag, value)`` pairs whose value was given (not None)."""
    return [flag for flag, value in pairs if value is not None]


def _check_mode_options(args: argparse.Namespace) -> None:
    """Refuses every option that cannot apply to ``--mode`` (before any model loads): an
    option is never silently ignored. Sets scaffold mode's default ``--level`` (1)."""
    stream = args.command == "stream"
    if args.mode == "detect":
        scaffold = [("--level", args.level), ("--flow-prior", args.flow_prior),
                    ("--pose-every", args.pose_every), ("--priority", args.priority)]
        if stream:  # detections come from the bottleneck: no decoder rebuilds video
            scaffold.append(("--decoder", args.decoder))
        if _given(scaffold):
            raise UsageError(f"{', '.join(_given(scaffold))}: scaffold-mode options; --mode "
                             "detect takes a budget as --target-kbps or --target-bpp, or "
                             "--auto with `stream` (and the link's pace as --bandwidth-kbps "
                             "or --trace)")  # fmt: skip
        _check_detect_numbers(args)
        return
    detect = [("--beta", args.beta), ("--bottleneck", args.bottleneck),
              ("--skip-threshold", args.skip_threshold), ("--intra-period", args.intra_period),
              ("--min-agreement", args.min_agreement)]  # fmt: skip
    if stream:
        detect.append(("--detections-out", args.detections_out))
    if _given(detect):
        given = _given(detect)
        raise UsageError(f"{', '.join(given)} {'is' if len(given) == 1 else 'are'} for --mode "
                         "detect only")  # fmt: skip
    if args.level is None:
        args.level = 1
    _check_pose_every(args)
    _check_priority(args)


def _check_priority(args: argparse.Namespace) -> None:
    """Refuses ``--priority`` at a level that splits no budget between a plate and people."""
    from semcodec.codec.scaffold.levels import LEVELS

    if args.priority is not None and not LEVELS[args.level].splits_budget:
        raise UsageError(f"--priority: level {args.level} sends no plate and references to "
                         "split a target between; use --level 1")  # fmt: skip


def _check_pose_every(args: argparse.Namespace) -> None:
    """Refuses ``--pose-every`` at a level without the box stream it rides on, or above the
    most frames between poses a stream may declare."""
    from semcodec.codec.scaffold.levels import LEVELS, MAX_POSE_EVERY

    if args.pose_every is None:
        return
    if not LEVELS[args.level].box_step_px:
        raise UsageError(f"--pose-every: level {args.level} sends no tracked boxes for the "
                         "pose to ride on; use --level 1")  # fmt: skip
    if args.pose_every > MAX_POSE_EVERY:
        raise UsageError(f"--pose-every {args.pose_every}: at most {MAX_POSE_EVERY} frames "
                         "between poses")  # fmt: skip


def _auto(args: argparse.Namespace) -> bool:
    """Whether ``--auto`` was given (``stream`` only)."""
    return bool(getattr(args, "auto", False))


class _LinkTarget:
    """Detect mode's target under ``--auto``: frame index -> bits per second from the
    stream's :class:`~edge.stream.agent.AutoRate`, which exists once the client does
    (before any unit is coded)."""

    auto = None

    def __call__(self, index: int) -> float:
        return self.auto.target_bps(index)


def _detect_target_bps(args: argparse.Namespace, info) -> float | None:
    """Detect mode's target in bits per second (``--target-kbps``/``--target-bpp``), or None."""
    if args.target_kbps is not None:
        return args.target_kbps * 1000
    if args.target_bpp is not None:
        return args.target_bpp * _pixels_per_s(info)
    return None


def _check_detect_numbers(args: argparse.Namespace) -> None:
    """Detect mode's numbers and which options go together, or :class:`UsageError`."""
    for flag, value in (("--intra-period", args.intra_period),
                        ("--skip-threshold", args.skip_threshold)):  # fmt: skip
        if value is not None and value < 0:
            raise UsageError(f"{flag} must be >= 0, got {value}")
    if args.target_kbps is not None or args.target_bpp is not None or _auto(args):
        chosen = _given((("--beta", args.beta), ("--skip-threshold", args.skip_threshold),
                         ("--intra-period", args.intra_period)))  # fmt: skip
        if chosen:
            raise UsageError(f"{', '.join(chosen)}: with --target-kbps/--target-bpp/--auto the "
                             "edge chooses these itself (give the bottlenecks to choose among "
                             "with --bottleneck, the floor with --min-agreement)")  # fmt: skip
        if args.min_agreement is not None and not 0.0 <= args.min_agreement <= 1.0:
            raise UsageError(f"--min-agreement must be in [0, 1], got {args.min_agreement}")
        return
    if args.min_agreement is not None:
        raise UsageError("--min-agreement goes with --target-kbps, --target-bpp or --auto")
    if len(args.bottleneck or ()) > 1:
        raise UsageError("several --bottleneck files are a set to choose from: give "
                         "--target-kbps or --target-bpp")  # fmt: skip


def _encode_detect(args: argparse.Namespace) -> int:
    """``encode --mode detect``: task features of the split detector to ``args.output``."""
    from semcodec.codec.bitstream import write_stream
    from semcodec.codec.core.sources import interrupt_ends

    start = time.perf_counter()
    source, total, _ = _open_input(args)
    info = source.info
    with interrupt_ends(source), frame_progress("encode", total, args.no_progress
                                                or args.quiet > 0) as bar:  # fmt: skip
        header, units, stats = _detect_units(args, source, total, bar)
        write_stream(args.output, header, units)
    seconds = time.perf_counter() - start
    size = args.output.stat().st_size
    log.info("%s: %d frames (%d intra), %d bytes (%.0f feature bytes per frame), %.6f bpp, "
             "%.1f kbit/s, %.1f fps", args.output, stats.frames, stats.intra_units, size,
             stats.feature_bytes / max(stats.frames, 1),
             8 * size / (info.width * info.height * max(stats.frames, 1)),
             8 * size * info.fps / max(stats.frames, 1) / 1000,
             stats.frames / max(seconds, 1e-9))  # fmt: skip
    _log_rate(stats)
    return 0


def _log_rate(stats) -> None:
    """What detect mode's rate control did (with a target): its moves and the self-check."""
    if not stats.rate:
        return
    moves = ", ".join(f"frame {s.frame + 1}: beta {s.setting.beta:g}, skip "
                      f"{s.setting.skip_threshold}, intra every {s.setting.intra_period} "
                      f"({s.reason})" for s in stats.switches[1:])  # fmt: skip
    checks = [a for _, a in stats.agreements]
    log.info("rate: %d move(s)%s; self-check agreement %s", len(stats.switches) - 1,
             f" ({moves})" if moves else "",
             f"{min(checks):.2f}..{max(checks):.2f} over {len(checks)} checks" if checks
             else "not checked")  # fmt: skip
    if stats.status and stats.status != "ok":
        log.warning("warning: rate status at the end: %s", stats.status)


def _detect_units(args: argparse.Namespace, source, total: int | None, bar=None,
                  start_bps: float | None = None, target_of=None):  # fmt: skip
    """``(header, units, stats)`` of detect mode on ``source`` (units made as read): the
    windows and the cloud's threshold are chosen on the camera's start-up frames; with a
    target (or ``--auto``: ``start_bps`` and ``target_of``) the rate control too."""
    import torch

    from semcodec.codec.scaffold.detector import PersonDetector
    from semcodec.codec.task.bottleneck import load_bottleneck
    from semcodec.codec.task.coder import DEFAULT_INTRA_PERIOD
    from semcodec.codec.task.split import SplitDetector, load_split_model
    from semcodec.codec.task.stream import (
        DetectRateRequest,
        bottleneck_path,
        encode_detect,
        shipped_candidates,
    )

    torch.set_num_threads(args.threads)
    info = source.info
    target = start_bps if start_bps is not None else _detect_target_bps(args, info)
    rate = None
    if target is None:
        files = args.bottleneck or [None]
        bottleneck = load_bottleneck(bottleneck_path(args.beta, files[0]))
    else:
        candidates = ({float(i): load_bottleneck(path) for i, path in enumerate(args.bottleneck)}
                      if args.bottleneck else shipped_candidates())  # fmt: skip
        floor = DEFAULT_MIN_AGREEMENT if args.min_agreement is None else args.min_agreement
        rate = DetectRateRequest(target, _by_beta(candidates), floor, target_of=target_of,
                                 report=lambda line: log.warning("warning: %s", line))
        bottleneck = next(iter(rate.bottlenecks.values()))
    detector = SplitDetector(load_split_model(args.models_dir), bottleneck.split)
    person = PersonDetector(models_dir=args.models_dir, threads=args.threads)
    frames = (f.rgb for f in source.frames(start=args.start, count=args.frames))
    if bar is not None:
        frames = _counted(frames, bar)
    intra = DEFAULT_INTRA_PERIOD if args.intra_period is None else args.intra_period
    header, units, stats = encode_detect(frames, bottleneck, detector, info.fps,
                                         (info.width, info.height), total or 0,
                                         intra, args.skip_threshold,
                                         person_detector=person, rate=rate)  # fmt: skip
    log.info("camera profile: %s", stats.profile)
    if stats.rate:
        log.info("rate: %.1f kbit/s: %s", target / 1000, stats.rate)
    return header, units, stats


def _by_beta(candidates: dict) -> dict:
    """Bottlenecks keyed by their rate weight β (their metadata; a file without one, or two
    files of one β, keep their position in the list)."""
    out = {}
    for key, bottleneck in candidates.items():
        beta = float(bottleneck.metadata.get("beta", key))
        out[beta if beta not in out else key] = bottleneck
    return out


def _stream_security(args: argparse.Namespace):
    from semcodec.edge.stream.client import ChannelSecurity

    if (args.tls_cert is None) != (args.tls_key is None):
        raise UsageError("--tls-cert and --tls-key go together")
    if args.tls_cert is not None and args.tls_ca is None:
        raise UsageError("--tls-cert needs --ca (the server's CA)")
    for flag, path in (("--ca", args.tls_ca), ("--tls-cert", args.tls_cert),
                       ("--tls-key", args.tls_key), ("--token-file", args.token_file)):  # fmt: skip
        if path is not None and not path.is_file():
            raise UsageError(f"{flag} {path}: no such file")
    token = args.token
    if args.token_file is not None:
        token = args.token_file.read_text(encoding="utf-8").strip()
        if not token:
            raise UsageError(f"--token-file {args.token_file}: the file is empty")
    return ChannelSecurity(args.tls_ca, args.tls_cert, args.tls_key, token, args.server_name)


def _pacer(args: argparse.Namespace):
    from semcodec.edge.stream.pacer import TokenBucket, TraceError, TracePacer, Unpaced

    if args.trace_scale_kbps is not None and args.trace is None:
        raise UsageError("--trace-scale-kbps needs --trace")
    if args.trace is not None:
        try:
            pacer = TracePacer.from_file(args.trace, _kbps(args.trace_scale_kbps))
        except TraceError as exc:
            raise UsageError(f"--trace: {exc}") from None
        log.info("pacing to %s looped every %.1f s, mean %.1f kbit/s", args.trace,
                 pacer.period_ms / 1000, pacer.mean_bps / 1000)  # fmt: skip
        return pacer
    if args.bandwidth_kbps is None:
        return Unpaced()
    rate = args.bandwidth_kbps * 1000
    burst = args.burst_bytes or max(int(rate / 8 * 0.25), _chunk_kib(args, rate) * 1024)
    return TokenBucket(rate, burst)


def _chunk_kib(args: argparse.Namespace, rate_bps: float | None) -> int:
    """``--chunk-kib``, else 256 KiB or a quarter second at ``rate_bps`` when less (>= 1)."""
    if args.chunk_kib is not None:
        return args.chunk_kib
    if not rate_bps:
        return 256
    return max(1, min(256, int(rate_bps / 8 * 0.25) // 1024))


def _kbps(value: float | None) -> float | None:
    """kbit/s (1000 bits) as bit/s."""
    return None if value is None else value * 1000


def _rate_control(args: argparse.Namespace, info, pacer):
    """``--auto``'s controller settings (rates in bit/s), or None without ``--auto``."""
    from semcodec.codec.scaffold.levels import LEVELS
    from semcodec.edge.stream.ratecontrol import RateControlConfig

    if not args.auto:
        if args.min_kbps is not None or args.max_kbps is not None:
            raise UsageError("--min-kbps and --max-kbps go with --auto")
        return None
    low = _kbps(args.min_kbps) or 1000.0
    high = _kbps(args.max_kbps or args.bandwidth_kbps) or getattr(pacer, "mean_bps", 1e6)
    if low > high:
        raise UsageError(f"--min-kbps {low / 1000:g} is above the highest target "
                         f"{high / 1000:g} kbit/s")  # fmt: skip
    start = _kbps(args.target_kbps)
    level_bpp = 0.0 if args.level is None else LEVELS[args.level].target_bpp  # detect: none
    if args.target_bpp is not None or (start is None and level_bpp > 0):
        start = (args.target_bpp or level_bpp) * _pixels_per_s(info)
    return RateControlConfig(low, high, min(high, max(low, start or high)))


def _auto_rate(control, spool, client, info):
    """The :class:`~edge.stream.agent.AutoRate` of ``--auto`` (None without it)."""
    from semcodec.edge.stream.agent import AutoRate
    from semcodec.edge.stream.ratecontrol import LinkRateController

    if control is None:
        return None
    log.info("rate: --auto from %.1f kbit/s within %.1f..%.1f kbit/s", control.start_bps / 1000,
             control.min_bps / 1000, control.max_bps / 1000)  # fmt: skip
    return AutoRate(LinkRateController(control), spool, client.stats, _pixels_per_s(info))


def _detect_stream_units(args: argparse.Namespace, pacer):
    """``(header, units, source info, --auto's settings or None, its link target)`` of
    ``stream --mode detect`` (units made as read)."""
    source, total, _ = _open_input(args)
    control = _rate_control(args, source.info, pacer)
    link = _LinkTarget() if control is not None else None
    header, units, _ = _detect_units(args, source, total,
                                     start_bps=control.start_bps if control else None,
                                     target_of=link)  # fmt: skip
    return header, units, source.info, control, link


def cmd_stream(args: argparse.Namespace) -> int:
    """Encodes ``args.input`` and streams it to ``args.server``; returns the exit status."""
    import shutil
    import tempfile

    from semcodec.edge.stream.agent import Producer, ProgressLog, UnitProducer
    from semcodec.edge.stream.client import StreamClient
    from semcodec.edge.stream.detections import DetectionRecorder
    from semcodec.edge.stream.spool import Spool

    _check_mode_options(args)
    if args.detections_out is not None:
        _check_output(args.detections_out)
    security, pacer = _stream_security(args), _pacer(args)
    detect = args.mode == "detect"
    control = link = None
    if detect:
        header, units, info, control, link = _detect_stream_units(args, pacer)
        header = header.to_bytes()
    else:
        from semcodec.codec.scaffold.codec import ScaffoldEncoder

        source, total, prior = _open_input(args)
        info = source.info
        control = _rate_control(args, info, pacer)
        config = _level_config(args, info, control.start_bps if control else None)
        encoder = ScaffoldEncoder(config, (info.width, info.height), info.fps,
                                  models_dir=args.models_dir, threads=args.threads,
                                  flow_prior=prior, expected_frames=total)  # fmt: skip
        frames = (f.rgb for f in source.frames(start=args.start, count=args.frames))
        # the look-ahead frames choose the camera's profile before the header is sent
        frames = encoder.start(frames)
        header = encoder.header(total).to_bytes()
        if encoder.profile is not None:
            log.info("camera profile: %s", encoder.profile.describe())
    folder = args.spool or Path(tempfile.mkdtemp(prefix="semcodec-spool-"))
    spool = Spool(folder, int(args.spool_max_mb * (1 << 20)), args.spool_policy)
    spool.bind(header)
    chunk_kib = _chunk_kib(args, getattr(pacer, "mean_bps", None) or _kbps(args.bandwidth_kbps))
    recorder = DetectionRecorder(args.detections_out) if detect else None
    client = StreamClient(args.server, spool, security, pacer, chunk_kib * 1024,
                          max_outage_s=args.max_outage_s, keepalive_s=args.keepalive_s,
                          detections=recorder, decoder=args.decoder or "")  # fmt: skip
    auto = _auto_rate(control, spool, client, info)
    if link is not None:
        link.auto = auto
    client.progress = ProgressLog(spool, auto=auto)
    if detect:  # --auto holds bits per second of video: a file is read at its frame rate
        producer = UnitProducer(units, spool, info.fps if auto else None)
    else:  # --auto holds bits per second of video: a file is read at its frame rate
        producer = Producer(encoder, frames, spool, auto, info.fps if auto else None)
    producer.start()
    try:
        results = client.run()
    except BaseException:
        producer.stop()
        if recorder is not None:
            recorder.discard()
        if not spool.finished():
            log.warning("the unacknowledged units are kept in %s: run again with --spool %s "
                        "to resume", folder, folder)  # fmt: skip
        raise
    producer.join()
    if producer.error is not None:
        if recorder is not None:
            recorder.discard()
        raise producer.error
    detections = ""
    if recorder is not None:
        if recorder.frames or not results.frames_decoded:
            recorder.finish()
        else:  # an earlier run closed the session and got them: keep what it wrote
            recorder.discard()
            if args.detections_out is not None:
                log.warning("no detections came back (the session was closed before); %s is "
                            "left as it was", args.detections_out)  # fmt: skip
        detections = f", {recorder.summary(results.frames_decoded)}"
    incomplete = results.error or ("see detections.json" if detect else "see stream.json")
    decoder = f" with {client.session_decoder}" if client.session_decoder else ""
    log.info("%s: session %s, %s; cloud: %d frames decoded%s%s%s, outputs in %s", args.server,
             results.session_id, client.stats.summary(), results.frames_decoded, decoder,
             "" if results.complete else f" (incomplete: {incomplete})", detections,
             results.output_dir)  # fmt: skip
    if auto is not None:
        log.info("rate: final target %.1f kbit/s, %d change(s) (%s)",
                 auto.controller.target_bps / 1000, len(auto.controller.decisions),
                 _decision_counts(auto.controller.decisions))  # fmt: skip
    if args.spool is None:
        shutil.rmtree(folder, ignore_errors=True)
    return 0


def _decision_counts(decisions) -> str:
    """``reason: count`` of the controller's decisions, most common first."""
    import collections

    counts = collections.Counter(d.reason for d in decisions)
    return ", ".join(f"{reason}: {n}" for reason, n in counts.most_common()) or "none"


def _user_errors() -> tuple[type[BaseException], ...]:
    from semcodec.codec.bitstream import BitstreamError
    from semcodec.codec.core.models import ModelError
    from semcodec.codec.core.sources import SourceError
    from semcodec.codec.entropy.rans import EntropyCodingError
    from semcodec.edge.stream.client import StreamError
    from semcodec.edge.stream.spool import SpoolError

    return (UsageError, SourceError, ModelError, BitstreamError, EntropyCodingError, ValueError,
            StreamError, SpoolError, OSError)  # fmt: skip


#: OpenBLAS threads of the edge's numpy (unless the environment sets them): its matrices are a
#: tracker's 4x4 and 8x8, which gain nothing from threads, while the edge shares its cores
#: with the detector, the encoder thread and gRPC. OpenBLAS's worker threads also hung a
#: stream agent once: its encoder thread spun in ``np.linalg.solve`` for minutes while the
#: workers slept (a test of a server killed mid-stream, on a loaded 2-core machine).
BLAS_THREADS = "1"


def usable_cpus() -> int:
    """The CPUs this process may run on (its affinity where the OS tells it, else all)."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # not on Linux
        return max(1, os.cpu_count() or 1)


def _choose_threads(args: argparse.Namespace) -> None:
    """``--threads`` unless given: every CPU the process may use (on the 2-core VM the edge
    at level 1 with pose runs 9.1 frames/s at 2 threads against 6.0 at 1, the same bytes:
    journal, issue 39). Says what it chose (``-v``; an encode's summary line says it too)."""
    if getattr(args, "threads", 0) is None:
        args.threads = usable_cpus()
        log.debug("threads: %d per model (the CPUs this process may use; --threads sets it)",
                  args.threads)  # fmt: skip


def main(argv: list[str] | None = None) -> int:
    """Entry point of ``edge-agent``; returns the exit status."""
    os.environ.setdefault("OPENBLAS_NUM_THREADS", BLAS_THREADS)  # read when numpy loads
    parser = build_parser()
    args = parser.parse_args(sys.argv[1:] if argv is None else argv)
    configure_logging(args.verbose, args.quiet, prog=PROG)
    if args.command is None:
        parser.print_help()
        return 0
    _choose_threads(args)
    try:
        return cmd_stream(args) if args.command == "stream" else cmd_encode(args)
    except KeyboardInterrupt:
        if args.command == "stream":
            log.error("interrupted; unacknowledged units stay in --spool (run the command "
                      "again with the same --spool to resume)")  # fmt: skip
        else:
            log.error("interrupted; nothing was written to %s (run the command again)",
                      args.output)  # fmt: skip
        return EXIT_INTERRUPTED
    except _user_errors() as exc:
        log.error("error: %s", one_line(exc))
        return 2


if __name__ == "__main__":
    sys.exit(main())
