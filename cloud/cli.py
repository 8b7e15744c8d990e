"""``cloud-decoder``: the cloud side of semcodec.

``cloud-decoder decode FILE.semc -o DIR`` decodes a bitstream exactly and rebuilds the
video with a reconstructor (``warp`` by default). ``cloud-decoder serve --listen HOST:PORT
--out DIR`` takes streams from edge agents over gRPC (:mod:`cloud.service`) and writes the
same files per session under ``DIR/<tenant>/<session-id>/``; SIGTERM or Ctrl-C stops it
gracefully (exit 0).

Exit status: 0 success, 2 a user error (bad or damaged stream, unusable output folder,
missing file; one line ``cloud-decoder: error: ...`` on stderr), 130 interrupted (Ctrl-C).
"""

from __future__ import annotations

import argparse
import logging
import sys
import time
from pathlib import Path

from semcodec.cloud.service.config import add_serve_arguments
from semcodec.codec.core.console import (
    EXIT_ERROR,
    EXIT_INTERRUPTED,
    OneLineErrorParser,
    add_common_arguments,
    add_verbosity,
    configure_logging,
    frame_progress,
    one_line,
)
from semcodec.codec.core.models import MODELS_DIR_HELP

PROG = "cloud-decoder"
# not __name__: run as ``python -m semcodec.cloud.cli`` it is "__main__", outside "semcodec"
log = logging.getLogger("semcodec.cloud.cli")


def _decoder_names() -> str:
    from semcodec.codec.reconstruct import available_reconstructors

    return ", ".join(available_reconstructors())


def add_decoder_arguments(parser: argparse.ArgumentParser) -> None:
    """``--decoder`` and a flag per decoder option of :data:`codec.reconstruct.pipeline.OPTIONS`
    (each given as text: the pipeline reads and checks them)."""
    from semcodec.codec.reconstruct.pipeline import DEFAULT_DECODER, OPTIONS

    parser.add_argument("--decoder", metavar="NAME[,KEY=VALUE...]",
                        help=f"reconstructor: one of {_decoder_names()}, optionally with its "
                        "options (restore,person_matte=none; or the flags below) (default: "
                        f"{DEFAULT_DECODER}; warp is the bit-exact reference)")  # fmt: skip
    for option in OPTIONS.values():
        parser.add_argument(option.flag, dest=option.key, metavar=option.metavar,
                            help=option.help)  # fmt: skip


def decoder_spec(args: argparse.Namespace):
    """The :class:`~codec.reconstruct.pipeline.DecoderSpec` of ``decode``'s flags."""
    from semcodec.codec.reconstruct.pipeline import OPTIONS, DecoderSpec

    base = DecoderSpec.parse(args.decoder) if args.decoder else None
    return DecoderSpec.from_mapping({k: getattr(args, k) for k in OPTIONS}, base)


def build_parser() -> argparse.ArgumentParser:
    parser = OneLineErrorParser(
        prog=PROG,
        description="The cloud side of semcodec: decodes scaffold bitstreams exactly and "
        "reconstructs the video.",
    )
    add_common_arguments(parser, PROG)
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    dec = sub.add_parser(
        "decode",
        help="decode a .semc file to frames, scaffolds and an overview video",
        description="Writes DIR/frames/000001.png..., DIR/scaffolds.npz (the decoded "
        "scaffolds), DIR/stream.json, DIR/overview.mp4 and, for a stream with tracked boxes "
        "(level 1), DIR/tracks.txt (MOT challenge format) and DIR/tracks.json; a detect-mode "
        "stream: DIR/detections.txt and detections.json. The outputs are written to a "
        "hidden folder beside DIR and moved to DIR only when the decode succeeds.",
    )
    add_verbosity(dec)
    dec.add_argument("input", type=Path, help="the .semc file")
    dec.add_argument("-o", "--output", required=True, type=Path, metavar="DIR",
                     help="output folder; must not exist or be empty (see --force)")  # fmt: skip
    dec.add_argument("--force", action="store_true",
                     help="replace a non-empty output folder (swapped in at the end)")  # fmt: skip
    add_decoder_arguments(dec)
    dec.add_argument("--models-dir", metavar="DIR", help=MODELS_DIR_HELP)
    dec.add_argument("--bottleneck", type=Path, metavar="FILE", action="append",
                     help="detect-mode streams: the edge's bottleneck file when it is not a "
                     "shipped one (again for each file of a set the edge's rate control chose "
                     "among: a stream may change bottleneck)")  # fmt: skip
    dec.add_argument("--score-threshold", type=float, metavar="T",
                     help="detect-mode streams: keep detections scoring at least T (default: "
                     "the bottleneck's, 0.3)")  # fmt: skip
    dec.add_argument("--no-overview", action="store_true", help="skip overview.mp4")
    dec.add_argument("--flow-prior", type=Path, metavar="FILE",
                     help="the flow prior the edge used, when not the shipped one")  # fmt: skip
    dec.add_argument("--allow-partial", action="store_true",
                     help="keep the frames of a stream that ends early (no END unit, fewer "
                     "frames than declared, or cut inside a unit) instead of failing; "
                     "stream.json then says \"complete\": false")  # fmt: skip
    _add_serve_parser(sub)
    _add_loadtest_parser(sub)
    return parser


def _add_serve_parser(sub) -> None:
    srv = sub.add_parser(
        "serve",
        help="serve edge agents over gRPC (health, reflection, metrics, TLS, tokens)",
        description="Takes streams from edge agents (`edge-agent stream`) and decodes them as "
        "they arrive into DIR/<tenant>/<session-id>/ (the files of `decode`). Settings: flags, "
        "then $SEMCODEC_SERVE_<NAME>, then the [serve] table of --config FILE "
        "($SEMCODEC_SERVE_CONFIG). SIGTERM or Ctrl-C: NOT_SERVING, drain, exit 0.",
    )
    add_verbosity(srv)
    add_serve_arguments(srv)


def _add_loadtest_parser(sub) -> None:
    """Listed in the help; its arguments are the checkout's ``tools/loadtest/loadtest.py``'s
    (:func:`main` hands ``loadtest ...`` to it before parsing)."""
    sub.add_parser(
        "loadtest", add_help=False,
        help="load- or abuse-test a serve (from a checkout: tools/loadtest/, not installed)",
    )


#: The load test and its clients: in a checkout only (``tools/`` is in no wheel).
LOADTEST = Path(__file__).resolve().parents[1] / "tools" / "loadtest" / "loadtest.py"


def cmd_loadtest(argv: list[str]) -> int:
    """``cloud-decoder loadtest ARGS``: the checkout's load test, run in this process."""
    import importlib.util

    if not LOADTEST.is_file():
        configure_logging(prog=PROG)
        log.error("error: loadtest runs from a checkout of semcodec (pip install -e): its "
                  "load and attack clients (tools/loadtest/) are not installed with the "
                  "package; %s is missing", LOADTEST)  # fmt: skip
        return EXIT_ERROR
    sys.path.insert(0, str(LOADTEST.parent))  # loadtest.py runs loadgen.py, abuse.py beside it
    spec = importlib.util.spec_from_file_location("loadtest", LOADTEST)
    module = importlib.util.module_from_spec(spec)
    sys.modules["loadtest"] = module
    spec.loader.exec_module(module)
    return module.main(argv)


def _load_prior(path: Path | None):
    if path is None:
        return None
    from semcodec.codec.entropy.flow import FlowPrior
    from semcodec.codec.entropy.rans import EntropyCodingError
    from semcodec.codec.scaffold.codec import ScaffoldCodecError

    try:
        return FlowPrior.load(path)
    except EntropyCodingError as exc:
        raise ScaffoldCodecError(f"--flow-prior: {exc}") from exc


def _decode_into(outputs, pipeline, units, args) -> None:
    """Decodes every unit into ``outputs``; an early end is kept with ``--allow-partial``."""
    from semcodec.codec.bitstream import TruncatedError
    from semcodec.codec.scaffold.codec import IncompleteStreamError

    with frame_progress("decode", pipeline.header.num_frames, args.quiet > 0) as bar:
        try:
            for decoded, picture in pipeline.frames(units):
                outputs.add(decoded, picture)
                bar.update(1)
        except (IncompleteStreamError, TruncatedError) as exc:
            if not args.allow_partial:
                raise
            outputs.mark_incomplete(str(exc))
            log.warning("warning: the stream ended early, keeping the %d frame(s) decoded: %s",
                        outputs.count, exc)  # fmt: skip


def cmd_decode(args: argparse.Namespace) -> int:
    from semcodec.cloud.outputs import DecodeOutputs, OutputError
    from semcodec.codec.bitstream import read_stream
    from semcodec.codec.reconstruct.pipeline import OPTIONS, DecoderOptionError
    from semcodec.codec.task import is_detect_stream

    spec = decoder_spec(args)
    if not args.output.parent.is_dir():  # as edge-agent: a mistyped path creates nothing
        raise OutputError(f"-o {args.output}: the folder {args.output.parent} does not exist")
    header, units = read_stream(args.input)
    if is_detect_stream(header):
        given = [OPTIONS[k].flag for k in OPTIONS if getattr(args, k) is not None]
        if args.decoder is not None or given:
            flags = ", ".join((["--decoder"] if args.decoder is not None else []) + given)
            raise DecoderOptionError(f"{flags}: a detect-mode stream has no picture to "
                                     "reconstruct (it decodes to detections)")  # fmt: skip
        return _decode_detections(args, header, units)
    pipeline = spec.open(header, args.models_dir, _load_prior(args.flow_prior))
    start = time.perf_counter()
    with DecodeOutputs(args.output, header, overview=not args.no_overview, force=args.force,
                       decoder=pipeline.record()) as outputs:  # fmt: skip
        _decode_into(outputs, pipeline, units, args)
    seconds = time.perf_counter() - start
    if args.sr is not None and not pipeline.upscaled:  # the option had nothing to act on
        log.warning("--sr %s: every plate of this stream was sent at the frame's size, so "
                    "nothing was upscaled", args.sr)  # fmt: skip
    fps = outputs.count / max(seconds, 1e-9)
    log.info("%s: %d frames (%.1f fps with outputs, %s), decoder %s", args.output,
             outputs.count, fps, _pace(fps, header), spec)  # fmt: skip
    return 0


def _pace(fps: float, header) -> str:
    """How a decode's ``fps`` compares with the camera's frame rate, in words."""
    camera = header.fps_num / max(1, header.fps_den)
    if not camera > 0:
        return "the stream states no frame rate"
    ratio = fps / camera
    if ratio >= 1:
        return f"{ratio:.1f}x the camera's {camera:g} fps"
    return (f"behind the camera's {camera:g} fps: {ratio:.2f}x real time; a live service "
            "steps this decoder down its ladder")


def _decode_detections(args: argparse.Namespace, header, units) -> int:
    """A detect-mode stream: ``DIR/detections.txt`` (MOTChallenge) and ``detections.json``."""
    from semcodec.codec.task.stream import decode_detect, open_detect_decoder, write_detections

    out = args.output
    existing = [p for p in (out / "detections.txt", out / "detections.json") if p.exists()]
    if existing and not args.force:
        raise FileExistsError(f"{existing[0]} exists (--force replaces it)")
    start = time.perf_counter()
    decoder = open_detect_decoder(header, args.bottleneck, args.models_dir,
                                  args.score_threshold)  # fmt: skip
    switches = []
    frames = decode_detect(units, decoder)
    if decoder.alternatives:  # a stream that may change bottleneck: say when it did
        frames = _noting_switches(frames, decoder, switches)
    count = write_detections(out, frames, header)
    for frame, beta in switches:
        log.info("frame %d: the stream changes to the bottleneck of beta %s", frame, beta)
    log.info("%s: detections of %d frames (%.1f fps)", out, count,
             count / max(time.perf_counter() - start, 1e-9))  # fmt: skip
    return 0


def _noting_switches(frames, decoder, switches: list):
    """``frames`` as they are, noting ``(frame, β)`` in ``switches`` where the decoder
    changed bottleneck."""
    index = decoder.index
    for frame, detections in frames:
        if decoder.index != index:
            index = decoder.index
            switches.append((frame, decoder.betas[index] if decoder.betas else str(index)))
        yield frame, detections


def cmd_serve(args: argparse.Namespace) -> int:
    """Serves until SIGTERM/SIGINT; returns the exit status."""
    from semcodec.cloud.service.config import load_settings, serve_overrides
    from semcodec.cloud.service.server import DecoderServer

    settings = load_settings(serve_overrides(args), args.config)
    _fixed_mmap_threshold()
    return DecoderServer(settings).run()


def _fixed_mmap_threshold(nbytes: int = 128 * 1024) -> None:
    """Keeps glibc's mmap threshold at ``nbytes`` in the server process. glibc raises it
    after a large block is freed, so later chunks (up to 1 MiB each) come from the threads'
    arenas and their memory stays resident; fixed, each chunk's memory goes back when it is
    freed. (Not glibc: nothing to do.)"""
    import contextlib
    import ctypes

    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL("libc.so.6").mallopt(-3, nbytes)  # M_MMAP_THRESHOLD


#: The exceptions a user can act on (exit 2, one line), by module: an exception can only be
#: raised by a module already imported, so :func:`_user_errors` imports none (a failed start
#: need not load torch to say why).
USER_ERRORS = (("semcodec.codec.task.stream", "TaskStreamError"),
               ("semcodec.codec.task.bottleneck", "BottleneckFileError"),
               ("semcodec.codec.entropy.rans", "EntropyCodingError"),
               ("semcodec.codec.bitstream", "BitstreamError"),
               ("semcodec.codec.keyframes", "KeyframeError"),
               ("semcodec.codec.reconstruct", "ReconstructionError"),
               ("semcodec.codec.scaffold.codec", "ScaffoldCodecError"),
               ("semcodec.cloud.outputs", "OutputError"),
               ("semcodec.cloud.service.config", "ConfigError"),
               ("semcodec.cloud.service.auth", "TokenFileError"),
               ("semcodec.cloud.service.server", "ServerStartError"))  # fmt: skip


def _user_errors() -> tuple[type[BaseException], ...]:
    """The classes of :data:`USER_ERRORS` whose modules are loaded, and ``OSError``."""
    loaded = (getattr(sys.modules[module], name) for module, name in USER_ERRORS
              if module in sys.modules)  # fmt: skip
    return (*loaded, OSError)


def _one_line(exc: BaseException) -> str:
    early_end = tuple(getattr(sys.modules[module], name) for module, name in (
        ("semcodec.codec.bitstream", "TruncatedError"),
        ("semcodec.codec.scaffold.codec", "IncompleteStreamError")) if module in sys.modules)
    text = one_line(exc)
    if isinstance(exc, early_end):
        text += " (--allow-partial keeps the frames decoded before the end)"
    return text


def main(argv: list[str] | None = None) -> int:
    """Entry point of ``cloud-decoder``; returns the exit status."""
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["loadtest"]:
        return cmd_loadtest(argv[1:])
    parser = build_parser()
    args = parser.parse_args(argv)
    configure_logging(args.verbose, args.quiet, prog=PROG)
    if args.command is None:
        parser.print_help()
        return 0
    try:
        commands = {"serve": cmd_serve}
        return commands.get(args.command, cmd_decode)(args)
    except KeyboardInterrupt:
        if args.command == "serve":
            log.error("interrupted")
        else:
            log.error("interrupted; nothing was written to %s", args.output)
        return EXIT_INTERRUPTED
    except _user_errors() as exc:
        log.error("error: %s", _one_line(exc))
        return 2


if __name__ == "__main__":
    sys.exit(main())
