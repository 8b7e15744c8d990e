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
import sys
import time
from pathlib import Path

from semcodec.codec.console import (
    DefaultsHelpFormatter,
    OneLineErrorParser,
    add_common_arguments,
    add_verbosity,
    configure_logging,
    frame_progress,
    one_line,
    positive_float,
    positive_int,
)
from semcodec.codec.models import MODELS_DIR_HELP

PROG = "edge-agent"
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
    enc.add_argument("input", help="MOT sequence folder, frame folder, video file, .y4m or .yuv "
                     "(or a sequence name under --data-dir / $SEMCODEC_DATA_DIR)")  # fmt: skip
    enc.add_argument("-o", "--output", required=True, type=Path, help="the .semc file to write")
    _add_encoder_arguments(enc)
    enc.add_argument("--no-progress", action="store_true", help="no progress bar")
    _add_stream_parser(sub)
    return parser


def _add_encoder_arguments(enc: argparse.ArgumentParser) -> None:
    """The source and encoder options shared by ``encode`` and ``stream``."""
    enc.add_argument("--level", type=int, choices=(0, 1, 2, 3), default=1,
                     help="scaffold level: 0 fewest bits ... 3 most detail")  # fmt: skip
    enc.add_argument("--frames", type=positive_int, metavar="N",
                     help="encode N frames from --start (default: to the end)")  # fmt: skip
    enc.add_argument("--start", type=positive_int, default=1, metavar="K",
                     help="first frame (1-based)")  # fmt: skip
    enc.add_argument("--models-dir", metavar="DIR", help=MODELS_DIR_HELP)
    enc.add_argument("--data-dir", metavar="DIR",
                     help="where sequence names are looked up (else $SEMCODEC_DATA_DIR, "
                     "then ../shared/data)")  # fmt: skip
    enc.add_argument("--fps", type=positive_float,
                     help="frame rate of frame folders and raw .yuv (else their own)")  # fmt: skip
    enc.add_argument("--width", type=positive_int, help="frame width of a raw .yuv")
    enc.add_argument("--height", type=positive_int, help="frame height of a raw .yuv")
    rate = enc.add_mutually_exclusive_group()
    rate.add_argument("--target-bpp", type=positive_float, metavar="B",
                      help="hold the stream to B bits per pixel (default: the level's own "
                      "target, 0.004 at level 1; levels 0, 2, 3 have none)")  # fmt: skip
    rate.add_argument("--target-kbps", type=positive_float, metavar="R",
                      help="hold the stream to R kilobits per second (1000 bits)")  # fmt: skip
    enc.add_argument("--threads", type=positive_int, default=1, help="CPU threads per model")
    enc.add_argument("--flow-prior", type=Path, metavar="FILE",
                     help="learned flow prior (JSON from `semcodec-bench train-flow-prior`; "
                     "else the one shipped for the level's flow step)")  # fmt: skip


def _add_stream_parser(sub) -> None:
    st = sub.add_parser(
        "stream",
        help="encode a video and stream it to a cloud-decoder serve",
        description="Encodes INPUT as `encode` does and streams each unit as it is made to "
        "`cloud-decoder serve`, paced to --bandwidth-kbps, kept in an on-disk spool until the "
        "cloud acknowledges it, resent after a broken link (reconnect with backoff, resume "
        "from the cloud's last acknowledgement, no duplicates). Exits 0 once every unit is "
        "acknowledged, with a summary line.",
        formatter_class=DefaultsHelpFormatter,
    )
    add_verbosity(st)
    st.add_argument("input", help="MOT sequence folder, frame folder, video file, .y4m or .yuv "
                    "(or a sequence name under --data-dir / $SEMCODEC_DATA_DIR)")  # fmt: skip
    st.add_argument("--server", required=True, metavar="HOST:PORT", help="the cloud-decoder")
    _add_encoder_arguments(st)
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
    st.add_argument("--bandwidth-kbps", type=positive_float, metavar="K",
                    help="hold the sent rate to K kbit/s (token bucket; default: "
                    "unpaced)")  # fmt: skip
    st.add_argument("--burst-bytes", type=positive_int, metavar="B",
                    help="token bucket depth (default: 0.25 s at --bandwidth-kbps, at least "
                    "one chunk)")  # fmt: skip
    st.add_argument("--chunk-kib", type=positive_int, default=256, metavar="K",
                    help="largest piece of a unit per message (the server may lower "
                    "it)")  # fmt: skip
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


def _level_config(args: argparse.Namespace, info):
    """The level preset with the rate target of ``--target-bpp`` / ``--target-kbps``."""
    import dataclasses

    from semcodec.codec.scaffold.levels import LEVELS

    config = LEVELS[args.level]
    target = args.target_bpp
    if args.target_kbps is not None:
        target = args.target_kbps * 1000 / (info.width * info.height * info.fps)
    return config if target is None else dataclasses.replace(config, target_bpp=target)


def _open_input(args: argparse.Namespace):
    """``(source, frames to encode, flow prior or None)`` of ``encode``/``stream``'s input."""
    from semcodec.edge.sources import open_source, resolve_data_path

    prior = None
    if args.flow_prior:
        from semcodec.codec.entropy.flow import FlowPrior

        prior = FlowPrior.load(args.flow_prior)
    source = open_source(resolve_data_path(args.input, args.data_dir), fps=args.fps,
                         width=args.width, height=args.height)  # fmt: skip
    return source, _frames_to_encode(source.info, args.start, args.frames), prior


def cmd_encode(args: argparse.Namespace) -> int:
    """Encodes ``args.input`` to ``args.output``; returns the exit status."""
    from semcodec.codec.scaffold.codec import encode_to_file

    _check_output(args.output)
    source, total, prior = _open_input(args)
    info = source.info
    start = time.perf_counter()
    with frame_progress("encode", total, args.no_progress or args.quiet > 0) as bar:
        frames = _counted((f.rgb for f in source.frames(start=args.start, count=args.frames)), bar)
        stats = encode_to_file(args.output, frames, _level_config(args, info), info.fps,
                               (info.width, info.height), total, args.models_dir,
                               args.threads, prior)  # fmt: skip
    seconds = time.perf_counter() - start
    size = args.output.stat().st_size
    bpp = 8 * size / (info.width * info.height * max(stats.frames, 1))
    parts = ", ".join(f"{k} {v}" for k, v in sorted(stats.stream_bytes.items()))
    log.info("%s: %d frames (%d keyframes), %d bytes, %.5f bpp [%s], %.1f fps", args.output,
             stats.frames, stats.keyframes, size, bpp, parts,
             stats.frames / max(seconds, 1e-9))  # fmt: skip
    return 0


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
    from semcodec.edge.stream.pacer import TokenBucket, Unpaced

    if args.bandwidth_kbps is None:
        return Unpaced()
    rate = args.bandwidth_kbps * 1000
    burst = args.burst_bytes or max(int(rate / 8 * 0.25), args.chunk_kib * 1024)
    return TokenBucket(rate, burst)


def cmd_stream(args: argparse.Namespace) -> int:
    """Encodes ``args.input`` and streams it to ``args.server``; returns the exit status."""
    import shutil
    import tempfile

    from semcodec.codec.scaffold.codec import ScaffoldEncoder
    from semcodec.edge.stream.agent import Producer, ProgressLog
    from semcodec.edge.stream.client import StreamClient
    from semcodec.edge.stream.spool import Spool

    security, pacer = _stream_security(args), _pacer(args)
    source, total, prior = _open_input(args)
    info = source.info
    encoder = ScaffoldEncoder(_level_config(args, info), (info.width, info.height), info.fps,
                              models_dir=args.models_dir, threads=args.threads,
                              flow_prior=prior, expected_frames=total)  # fmt: skip
    header = encoder.header(total).to_bytes()
    folder = args.spool or Path(tempfile.mkdtemp(prefix="semcodec-spool-"))
    spool = Spool(folder, int(args.spool_max_mb * (1 << 20)), args.spool_policy)
    spool.bind(header)
    frames = (f.rgb for f in source.frames(start=args.start, count=args.frames))
    producer = Producer(encoder, frames, spool)
    producer.start()
    client = StreamClient(args.server, spool, security, pacer, args.chunk_kib * 1024,
                          max_outage_s=args.max_outage_s, progress=ProgressLog(spool))  # fmt: skip
    try:
        results = client.run()
    except BaseException:
        if not spool.finished():
            log.warning("the unacknowledged units are kept in %s: run again with --spool %s "
                        "to resume", folder, folder)  # fmt: skip
        raise
    producer.join()
    if producer.error is not None:
        raise producer.error
    log.info("%s: session %s, %s; cloud: %d frames decoded%s, outputs in %s", args.server,
             results.session_id, client.stats.summary(), results.frames_decoded,
             "" if results.complete else f" (incomplete: {results.error or 'see stream.json'})",
             results.output_dir)  # fmt: skip
    if args.spool is None:
        shutil.rmtree(folder, ignore_errors=True)
    return 0


def _user_errors() -> tuple[type[BaseException], ...]:
    from semcodec.codec.bitstream import BitstreamError
    from semcodec.codec.entropy.rans import EntropyCodingError
    from semcodec.codec.models import ModelError
    from semcodec.edge.sources import SourceError
    from semcodec.edge.stream.client import StreamError
    from semcodec.edge.stream.spool import SpoolError

    return (UsageError, SourceError, ModelError, BitstreamError, EntropyCodingError, ValueError,
            StreamError, SpoolError, OSError)  # fmt: skip


def main(argv: list[str] | None = None) -> int:
    """Entry point of ``edge-agent``; returns the exit status."""
    parser = build_parser()
    args = parser.parse_args(sys.argv[1:] if argv is None else argv)
    configure_logging(args.verbose, args.quiet, prog=PROG)
    if args.command is None:
        parser.print_help()
        return 0
    try:
        return cmd_stream(args) if args.command == "stream" else cmd_encode(args)
    except KeyboardInterrupt:
        if args.command == "stream":
            log.error("interrupted; unacknowledged units stay in --spool (run the command "
                      "again with the same --spool to resume)")  # fmt: skip
        else:
            log.error("interrupted; nothing was written to %s (run the command again)",
                      args.output)  # fmt: skip
        return 130
    except _user_errors() as exc:
        log.error("error: %s", one_line(exc))
        return 2


if __name__ == "__main__":
    sys.exit(main())
