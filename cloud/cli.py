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

from semcodec.codec.core.console import (
    EXIT_INTERRUPTED,
    OneLineErrorParser,
    add_common_arguments,
    add_verbosity,
    configure_logging,
    frame_progress,
    non_negative_float,
    non_negative_int,
    one_line,
    positive_int,
)
from semcodec.codec.core.models import MODELS_DIR_HELP

PROG = "cloud-decoder"
# not __name__: run as ``python -m semcodec.cloud.cli`` it is "__main__", outside "semcodec"
log = logging.getLogger("semcodec.cloud.cli")


def _decoder_names() -> str:
    from semcodec.codec.reconstruct import available_reconstructors

    return ", ".join(available_reconstructors())


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
    dec.add_argument("--decoder", default="warp", metavar="NAME",
                     help=f"reconstructor: one of {_decoder_names()} (default: warp)")  # fmt: skip
    dec.add_argument("--steps", type=positive_int, metavar="S",
                     help="diffusion: sampling steps (1, 2, 4, 8, 16; default 2)")  # fmt: skip
    dec.add_argument("--seed", type=non_negative_int, help="diffusion: noise seed (default 0)")
    dec.add_argument("--weights", type=Path, metavar="FILE",
                     help="diffusion: denoiser weights; restore: restorer weights, or a "
                     "shipped restorer's name: ref_restorer_v2 (default), ref_restorer (the "
                     "first), ref_restorer_w8 (1/15 of the compute)")  # fmt: skip
    dec.add_argument("--memory-mb", type=non_negative_float, metavar="MB",
                     help="restore: the memory of earlier references the restorer keeps, MB "
                     "per stream (default 16; 0: none)")  # fmt: skip
    dec.add_argument("--smooth-s", type=non_negative_float, metavar="SECONDS",
                     help="warp, restore: time constant of the people's drawn boxes (default "
                     "0.058: half of each frame's jitter kept at 25 frames/s; 0: the boxes "
                     "as decoded)")  # fmt: skip
    dec.add_argument("--person-matte", metavar="MODEL",
                     help="warp, restore, animate: cut each person out of their reference with "
                     "a matte the cloud computes itself (zero bits): selfie_segmentation "
                     "(every person in the crop), pose_landmark_full or pose_landmark_lite "
                     "(the one person centred in it) (default: none, the reference's "
                     "rectangle)")  # fmt: skip
    dec.add_argument("--refiner", metavar="NAME",
                     help="animate: redraw each posed person with a learned refiner: w8 or w32 "
                     "(its width, the compute knob) or a refiner file; needs a stream sent "
                     "with pose (edge setting pose_every)")  # fmt: skip
    dec.add_argument("--sr", default="bicubic", metavar="NAME",
                     help="the plate's super-resolution when the edge sent it smaller than the "
                     "frame: bicubic (default), esrgan-slim, esrgan-medium, esrgan-slim-plates, "
                     "esrgan-medium-plates (the networks tuned to level 1's plates; rising "
                     "FLOPs and quality); networks are fetched from npm on first use")  # fmt: skip
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
    srv.add_argument("--config", type=Path, metavar="FILE", help="TOML settings ([serve])")
    srv.add_argument("--listen", metavar="HOST:PORT", help="gRPC address (127.0.0.1:50051)")
    srv.add_argument("--out", type=Path, metavar="DIR", help="output folder (required)")
    srv.add_argument("--tls-cert", type=Path, metavar="F", help="PEM certificate chain: TLS")
    srv.add_argument("--tls-key", type=Path, metavar="F", help="PEM private key of --tls-cert")
    srv.add_argument("--client-ca", type=Path, metavar="F",
                     help="PEM CA of client certificates: mutual TLS")  # fmt: skip
    srv.add_argument("--tokens", type=Path, metavar="FILE",
                     help="bearer tokens, one 'TOKEN TENANT' pair per line")  # fmt: skip
    srv.add_argument("--allow-anonymous-remote", action="store_const", const=True,
                     help="serve without --tokens on an address beyond the loopback "
                     "(refused otherwise: anyone reaching the port could stream and read "
                     "results)")  # fmt: skip
    srv.add_argument("--metrics-listen", metavar="HOST:PORT",
                     help="Prometheus /metrics address (127.0.0.1:9464; '' for none)")  # fmt: skip
    srv.add_argument("--http-listen", metavar="HOST:PORT",
                     help="HTTP front door: dashboard, live view (MJPEG, boxes as events), "
                     "JSON API, on the same tokens and TLS ('' for none, the default)")
    srv.add_argument("--tenant-max-viewers", type=int, metavar="N",
                     help="concurrent live viewers per tenant (8; 0: no cap)")  # fmt: skip
    srv.add_argument("--max-viewers", type=int, metavar="N",
                     help="concurrent live viewers in all (64; 0: no cap)")  # fmt: skip
    srv.add_argument("--viewer-stall-s", type=float, metavar="S",
                     help="drop a viewer whose socket takes nothing for S (5)")  # fmt: skip
    srv.add_argument("--max-sessions", type=int, metavar="N", help="open sessions (64)")
    srv.add_argument("--max-backlog-units", type=int, metavar="N",
                     help="units stored but not decoded per session (32)")  # fmt: skip
    srv.add_argument("--max-chunk-kib", type=int, metavar="K", help="largest chunk (1024)")
    srv.add_argument("--max-unit-mib", type=int, metavar="M", help="largest unit (64)")
    srv.add_argument("--max-session-kbps", type=float, metavar="K",
                     help="per-session rate of unit bytes, kbit/s: a faster stream is read "
                     "more slowly (back-pressure), not refused (0: unlimited)")  # fmt: skip
    srv.add_argument("--session-burst-kib", type=int, metavar="K",
                     help="what an idle session may send at once beyond --max-session-kbps "
                     "(0: one second at the rate, at least 4)")  # fmt: skip
    srv.add_argument("--grace-s", type=float, metavar="S", help="drain time on stop (10)")
    srv.add_argument("--notice-s", type=float, metavar="S",
                     help="NOT_SERVING time before the drain on stop (1)")  # fmt: skip
    srv.add_argument("--workers", type=int, metavar="N",
                     help="threads for disk work; idle streams hold none (16)")  # fmt: skip
    srv.add_argument("--tenant-max-sessions", type=int, metavar="N",
                     help="open sessions per tenant (16; 0: no per-tenant bound)")  # fmt: skip
    srv.add_argument("--tenant-max-streams", type=int, metavar="N",
                     help="concurrent streams per tenant (32; 0: no bound)")  # fmt: skip
    srv.add_argument("--tenant-max-kbps", type=float, metavar="K",
                     help="unit bytes per tenant, kbit/s, back-pressure (0: unlimited)")
    srv.add_argument("--tenant-max-stored-mib", type=float, metavar="M",
                     help="stored streams per tenant on disk, units being received "
                     "included, MiB (4096; 0: unlimited)")  # fmt: skip
    srv.add_argument("--session-idle-s", type=float, metavar="S",
                     help="put a session without stream or request to rest after S "
                     "(resumable; 300; 0: never)")  # fmt: skip
    srv.add_argument("--retain-s", type=float, metavar="S",
                     help="remove a session at rest (put to rest, or closed) after S, its "
                     "outputs with it (604800; 0: never)")  # fmt: skip
    srv.add_argument("--stream-start-s", type=float, metavar="S",
                     help="a stream's StreamStart must come within S (10)")  # fmt: skip
    srv.add_argument("--stream-idle-s", type=float, metavar="S",
                     help="a stream may stay quiet between units for S (300)")  # fmt: skip
    srv.add_argument("--progress-window-s", type=float, metavar="S",
                     help="a unit in progress must bring --min-progress-bytes every S (30)")
    srv.add_argument("--min-progress-bytes", type=int, metavar="B", help="see above (1024)")
    srv.add_argument("--keepalive-s", type=float, metavar="S",
                     help="ping quiet connections every S, drop them when unanswered (60)")
    srv.add_argument("--max-connection-idle-s", type=float, metavar="S",
                     help="close connections without calls after S (300; 0: never)")
    srv.add_argument("--max-connection-age-s", type=float, metavar="S",
                     help="ask connections to go away after S (3600; 0: never)")
    srv.add_argument("--max-streams-per-connection", type=int, metavar="N",
                     help="concurrent calls per HTTP/2 connection (32)")  # fmt: skip
    srv.add_argument("--max-calls", type=int, metavar="N",
                     help="concurrent calls on the server (8192; 0: no cap)")  # fmt: skip
    srv.add_argument("--max-open-streams", type=int, metavar="N",
                     help="concurrent unauthenticated reflection streams (256)")
    srv.add_argument("--max-watch-streams", type=int, metavar="N",
                     help="concurrent unauthenticated health Watch streams, apart from "
                     "reflection (4096)")  # fmt: skip
    srv.add_argument("--max-calls-per-peer", type=int, metavar="N",
                     help="concurrent calls from one address (0: no cap)")  # fmt: skip
    srv.add_argument("--decode-threads", type=int, metavar="N",
                     help="frames decoded at once over all sessions (0: the cores)")  # fmt: skip
    srv.add_argument("--decoder", metavar="NAME", help="reconstructor (warp)")
    srv.add_argument("--sr", metavar="NAME",
                     help="the plate's upscaler where an edge sent it smaller than the frame "
                     "(bicubic; as cloud-decoder decode --sr)")  # fmt: skip
    srv.add_argument("--no-overview", dest="overview", action="store_const", const=False,
                     help="no overview.mp4 per session")  # fmt: skip
    srv.add_argument("--flow-prior", type=Path, metavar="FILE",
                     help="the flow prior the edges use, when not the shipped one")  # fmt: skip
    srv.add_argument("--bottleneck-dir", type=Path, metavar="DIR",
                     help="detect-mode streams: a folder of bottleneck files (*.pt from "
                     "`semcodec-bench train-bottleneck`) looked in beside the shipped ones; a "
                     "stream whose bottleneck is found nowhere is refused "
                     "(FAILED_PRECONDITION)")  # fmt: skip


def _add_loadtest_parser(sub) -> None:
    load = sub.add_parser(
        "loadtest",
        help="load-test a serve: many concurrent streams, health and ack latency, memory",
        description="Starts a `serve` (or uses --server), runs --streams concurrent edge "
        "streams of the embedded sample for --seconds, probes gRPC health every 0.1 s and "
        "the server's memory every second; writes DIR/summary.json, DIR/rss.csv and "
        "DIR/rss.png. Exit 0 when health p99 < 50 ms, ack p99 < 200 ms, memory flat, no "
        "stream starved and no errors; 1 when a check fails.",
    )
    add_verbosity(load)
    load.add_argument("--abuse", action="store_true",
                      help="instead: start a server with two tenants and quotas and run the "
                      "attacks of issue 25 against it (idle calls, a tenant at its quota, a "
                      "slow client, partial units, markers, long ids); prints the table, exit "
                      "0 when every attack held")  # fmt: skip
    load.add_argument("--abuse-idle", type=positive_int, default=1000, metavar="N",
                      help="--abuse: idle calls of each kind (1000)")  # fmt: skip
    load.add_argument("--streams", type=positive_int, default=64, help="concurrent streams")
    load.add_argument("--seconds", type=float, default=60.0, help="how long they stream")
    load.add_argument("--out", type=Path, required=True, metavar="DIR", help="results folder")
    load.add_argument("--fps", type=float, default=1.0,
                      help="units per second each stream sends (default 1)")  # fmt: skip
    load.add_argument("--semc", type=Path, metavar="FILE",
                      help="the stream to send (default: the sample at level 1)")  # fmt: skip
    load.add_argument("--ramp-s", type=float, metavar="S",
                      help="the streams start evenly over S seconds (default: a tenth of "
                      "--seconds, at most 5)")  # fmt: skip
    load.add_argument("--workers", type=positive_int, default=4,
                      help="client processes the streams are spread over (default 4)")  # fmt: skip
    load.add_argument("--viewers", type=int, default=0, metavar="N",
                      help="live viewers reading the sessions' MJPEG from the server's HTTP "
                      "front door while the streams run (own server only; 0: none)")
    load.add_argument("--server", metavar="HOST:PORT",
                      help="a running plaintext server (default: start one on "
                      "127.0.0.1)")  # fmt: skip
    load.add_argument("--server-pid", type=positive_int, metavar="PID",
                      help="--server's process, for its memory")  # fmt: skip
    load.add_argument("--metrics", metavar="HOST:PORT", help="--server's /metrics address")
    load.add_argument("--serve-arg", action="append", default=[], metavar="ARG",
                      help="one more flag for the server it starts (repeat it; "
                      "--serve-arg=--no-overview)")  # fmt: skip


def cmd_loadtest(args: argparse.Namespace) -> int:
    from semcodec.cloud.service.loadtest import LoadSettings, describe, run_abuse, run_load

    if args.abuse:
        return run_abuse(args.out, args.semc, args.abuse_idle)

    summary = run_load(LoadSettings(args.streams, args.seconds, args.out, args.fps,
                                    args.server, args.server_pid, args.metrics, args.semc,
                                    args.workers, args.ramp_s,
                                    tuple(args.serve_arg), args.viewers))  # fmt: skip
    log.warning("loadtest: %s (%s)", describe(summary), args.out / "summary.json")
    return 0 if summary["ok"] else 1


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


def _decode_into(outputs, decoder, reconstructor, units, args) -> None:
    """Decodes every unit into ``outputs``; an early end is kept with ``--allow-partial``."""
    from semcodec.codec.bitstream import TruncatedError
    from semcodec.codec.scaffold.codec import IncompleteStreamError

    with frame_progress("decode", decoder.header.num_frames, args.quiet > 0) as bar:
        try:
            for unit in units:
                decoded = decoder.decode_unit(unit)
                if decoded is None:
                    break
                outputs.add(decoded, reconstructor.reconstruct(decoded))
                bar.update(1)
            decoder.finish()
        except (IncompleteStreamError, TruncatedError) as exc:
            if not args.allow_partial:
                raise
            outputs.mark_incomplete(str(exc))
            log.warning("warning: the stream ended early, keeping the %d frame(s) decoded: %s",
                        outputs.count, exc)  # fmt: skip


def cmd_decode(args: argparse.Namespace) -> int:
    from semcodec.cloud.outputs import DecodeOutputs, OutputError
    from semcodec.codec.bitstream import read_stream
    from semcodec.codec.reconstruct import (
        DECODER_OPTIONS,
        UnknownReconstructorError,
        create_reconstructor,
    )
    from semcodec.codec.reconstruct.superres import DEFAULT_SR, create_upscaler, upscaler_names
    from semcodec.codec.scaffold.codec import ScaffoldDecoder
    from semcodec.codec.task.stream import is_detect_stream

    options = {k: getattr(args, k) for k in ("steps", "seed", "weights", "memory_mb", "smooth_s",
                                              "person_matte", "refiner")
               if getattr(args, k) is not None}  # fmt: skip
    extra = [k for k in options if k not in DECODER_OPTIONS.get(args.decoder, ())]
    if extra:
        owners = " or ".join(n for n, keys in DECODER_OPTIONS.items() if extra[0] in keys)
        flags = ", ".join("--" + k.replace("_", "-") for k in extra)
        raise UnknownReconstructorError(f"{flags}: only for --decoder {owners}")
    if not args.output.parent.is_dir():  # as edge-agent: a mistyped path creates nothing
        raise OutputError(f"-o {args.output}: the folder {args.output.parent} does not exist")
    if args.sr not in upscaler_names():
        raise UnknownReconstructorError(f"--sr {args.sr}: expected one of "
                                        f"{', '.join(upscaler_names())}")  # fmt: skip
    header, units = read_stream(args.input)
    if is_detect_stream(header):
        if args.sr != DEFAULT_SR:
            raise UnknownReconstructorError("--sr: a detect-mode stream has no picture to "
                                            "upscale")  # fmt: skip
        return _decode_detections(args, header, units)
    if args.refiner is not None and not _carries_pose(header):
        raise UnknownReconstructorError("--refiner: this stream carries no pose (the edge sent "
                                        "it without pose_every), and the refiner redraws "
                                        "posed people only")  # fmt: skip
    reconstructor = create_reconstructor(args.decoder, **options)
    upscaler, upscaled = create_upscaler(args.sr, args.models_dir), []

    def upscale(picture, size):
        upscaled.append(picture.shape)
        return upscaler(picture, size)

    decoder = ScaffoldDecoder(header, flow_prior=_load_prior(args.flow_prior),
                              upscale=upscale)  # fmt: skip
    start = time.perf_counter()
    with DecodeOutputs(args.output, header, overview=not args.no_overview, force=args.force,
                       decoder=_decoder_record(reconstructor, args.sr)) as outputs:  # fmt: skip
        _decode_into(outputs, decoder, reconstructor, units, args)
    seconds = time.perf_counter() - start
    if args.sr != DEFAULT_SR and not upscaled:  # the option had nothing to act on: say so
        log.warning("--sr %s: every plate of this stream was sent at the frame's size, so "
                    "nothing was upscaled", args.sr)  # fmt: skip
    log.info("%s: %d frames (%.1f fps with outputs), decoder %s", args.output, outputs.count,
             outputs.count / max(seconds, 1e-9), args.decoder)  # fmt: skip
    return 0


def _carries_pose(header) -> bool:
    """Whether a level-1 stream was sent with the sparse pose (header ``pose_every`` >= 1)."""
    try:
        return int(header.settings.get("pose_every", "0")) >= 1
    except ValueError:
        return False


def _decoder_record(reconstructor, sr: str) -> dict:
    """What stream.json says of the decoder: the reconstructor's description, and the
    plate's upscaler when it is not the default (as the service writes it)."""
    from semcodec.codec.reconstruct.superres import DEFAULT_SR

    return {**reconstructor.describe(), **({"sr": sr} if sr != DEFAULT_SR else {})}


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


_SERVE_FLAGS = ("listen", "out", "tls_cert", "tls_key", "client_ca", "tokens",
                "allow_anonymous_remote", "metrics_listen", "http_listen",
                "tenant_max_viewers", "max_viewers", "viewer_stall_s",
                "max_sessions", "max_backlog_units", "max_chunk_kib", "max_unit_mib",
                "max_session_kbps", "session_burst_kib",
                "grace_s", "notice_s", "workers", "decoder", "sr", "overview", "flow_prior",
                "bottleneck_dir", "tenant_max_sessions", "tenant_max_streams",
                "tenant_max_kbps", "tenant_max_stored_mib", "session_idle_s", "retain_s",
                "stream_start_s", "stream_idle_s", "progress_window_s", "min_progress_bytes",
                "keepalive_s", "max_connection_idle_s", "max_connection_age_s",
                "max_streams_per_connection", "max_calls", "max_open_streams",
                "max_watch_streams", "max_calls_per_peer", "decode_threads")  # fmt: skip


def cmd_serve(args: argparse.Namespace) -> int:
    """Serves until SIGTERM/SIGINT; returns the exit status."""
    from semcodec.cloud.service.config import load_settings
    from semcodec.cloud.service.server import DecoderServer

    settings = load_settings({k: getattr(args, k) for k in _SERVE_FLAGS}, args.config)
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


def _user_errors() -> tuple[type[BaseException], ...]:
    from semcodec.cloud.outputs import OutputError
    from semcodec.cloud.service.auth import TokenFileError
    from semcodec.cloud.service.config import ConfigError
    from semcodec.cloud.service.loadtest import LoadTestError
    from semcodec.cloud.service.server import ServerStartError
    from semcodec.codec.bitstream import BitstreamError
    from semcodec.codec.entropy.rans import EntropyCodingError
    from semcodec.codec.keyframes import KeyframeError
    from semcodec.codec.reconstruct import ReconstructionError
    from semcodec.codec.scaffold.codec import ScaffoldCodecError
    from semcodec.codec.task.bottleneck import BottleneckFileError
    from semcodec.codec.task.stream import TaskStreamError

    return (TaskStreamError, BottleneckFileError, EntropyCodingError, BitstreamError,
            KeyframeError, ReconstructionError, ScaffoldCodecError, OutputError, ConfigError,
            TokenFileError, ServerStartError, LoadTestError, OSError)  # fmt: skip


def _one_line(exc: BaseException) -> str:
    from semcodec.codec.bitstream import TruncatedError
    from semcodec.codec.scaffold.codec import IncompleteStreamError

    text = one_line(exc)
    if isinstance(exc, (IncompleteStreamError, TruncatedError)):
        text += " (--allow-partial keeps the frames decoded before the end)"
    return text


def main(argv: list[str] | None = None) -> int:
    """Entry point of ``cloud-decoder``; returns the exit status."""
    parser = build_parser()
    args = parser.parse_args(sys.argv[1:] if argv is None else argv)
    configure_logging(args.verbose, args.quiet, prog=PROG)
    if args.command is None:
        parser.print_help()
        return 0
    try:
        commands = {"serve": cmd_serve, "loadtest": cmd_loadtest}
        return commands.get(args.command, cmd_decode)(args)
    except KeyboardInterrupt:
        if args.command in ("serve", "loadtest"):
            log.error("interrupted")
        else:
            log.error("interrupted; nothing was written to %s", args.output)
        return EXIT_INTERRUPTED
    except _user_errors() as exc:
        log.error("error: %s", _one_line(exc))
        return 2


if __name__ == "__main__":
    sys.exit(main())
