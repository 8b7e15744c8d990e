"""What an edge asks the session core and what it is told: the open request and its
checks, the answers (opened, feedback, results), the rate the cloud recommends, and the
hooks the core reports through (:class:`Metrics`).

An open is checked here before any session exists: the protocol version, the served
(codec, mode) pairs, the stream header against the request's fields, and whether this
server has what the stream needs to decode (:func:`check_decodable`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from semcodec.cloud.service.decode import DecodeSettings, load_flow_prior
from semcodec.cloud.service.detect import (
    BOTTLENECK_MODEL,
    FrameDetections,
    check_unit_shape,
    find_bottleneck,
    is_bottleneck_entry,
)
from semcodec.cloud.service.errors import (
    InvalidRequestError,
    MissingModelsError,
    UnsupportedError,
)
from semcodec.codec.bitstream import BitstreamError, StreamHeader
from semcodec.codec.task import is_detect_stream

PROTOCOL_VERSION = 1
_TENANT = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,63}")  # fullmatch: "$" takes a newline
#: Seconds of stored bytes (and decoded units) the goodput (and decode rate) is measured over.
GOODPUT_WINDOW_S = 5.0
#: How far below what the cloud takes its recommended rate stays (a share).
RECOMMEND_MARGIN = 0.1
#: The decode backlog (a share of its bound) above which the cloud recommends a rate.
RECOMMEND_FROM_FILL = 0.25
#: The served (codec, mode) pairs: scaffold streams are generative, detect streams task.
SERVED = {"scaffold": "generative", "features": "task"}


def recommend_rate(goodput_bps: float, decode_bps: float, backlog: int, max_backlog: int,
                   margin: float = RECOMMEND_MARGIN) -> float:  # fmt: skip
    """The rate the cloud recommends to the edge, bits per second (0: no recommendation).

    While the decoder keeps up (backlog at most ``RECOMMEND_FROM_FILL`` of its bound) the
    cloud recommends nothing: the link's capacity is the edge's to measure, and the cloud
    only sees what arrives. Past that the decoder is the bottleneck, and the stream should
    cost no more than the decoder takes: ``min(goodput, decode) * (1 - margin) * (1 -
    fill / 2)``, ``fill = backlog / max_backlog`` -- below the decoder's throughput by the
    margin, and lower the fuller the backlog, so that it drains. A decoder that decoded
    nothing over the window counts as taking half the goodput.

    Args:
        goodput_bps: stored unit bits per second (the window's).
        decode_bps: decoded unit bits per second (the window's; 0: none decoded).
        backlog: units stored but not decoded; max_backlog: its bound (> 0).
    """
    if max_backlog <= 0 or backlog <= RECOMMEND_FROM_FILL * max_backlog:
        return 0.0
    fill = min(1.0, backlog / max_backlog)
    takes = decode_bps if decode_bps > 0 else 0.5 * goodput_bps
    if goodput_bps > 0:
        takes = min(takes, goodput_bps)
    return max(1.0, takes * (1 - margin) * (1 - fill / 2))



@dataclass(frozen=True)
class OpenRequest:
    """What an edge declares when it opens (or resumes) a session.

    ``header`` is the ``.semc`` stream header, exactly; the other fields must agree with it.
    ``models`` are ``(name, sha256 hex or "")`` pairs. ``decoder``: the decoder a generative
    session asks for (:func:`~cloud.service.compute.choose_decoder`; "": the server's).
    """

    header: bytes
    session_id: str = ""
    protocol_version: int = PROTOCOL_VERSION
    codec: str = "scaffold"
    mode: str = "generative"
    level: int | None = None
    width: int | None = None
    height: int | None = None
    fps_num: int | None = None
    fps_den: int | None = None
    num_frames: int | None = None
    models: tuple[tuple[str, str], ...] | None = None
    decoder: str = ""


@dataclass(frozen=True)
class Opened:
    """The answer to an open: where the edge continues, and the session's decoder in full
    ("": a detect-mode stream)."""

    session_id: str
    next_seq: int
    resumed: bool
    decoder: str = ""


@dataclass(frozen=True)
class Feedback:
    """What the cloud tells the edge with each acknowledgement.

    Attributes:
        next_seq: units ``0 .. next_seq-1`` are durably stored (cumulative ack).
        goodput_bps: stored unit bits per second over the last ``GOODPUT_WINDOW_S``.
        backlog_units: stored but not yet decoded.
        max_backlog_units: the session's bound on that backlog.
        recommended_rate_bps: a rate to send at, bits per second (0: no recommendation;
            see :func:`recommend_rate`).
        frames_decoded: frames (units) decoded so far.
        decode_error: why decoding failed, if it did.
        detections: detect mode: the frames decoded since the stream's previous feedback.
    """

    next_seq: int
    goodput_bps: float = 0.0
    backlog_units: int = 0
    max_backlog_units: int = 0
    recommended_rate_bps: float = 0.0
    frames_decoded: int = 0
    decode_error: str = ""
    detections: tuple[FrameDetections, ...] = ()


@dataclass
class Results:
    """A session's results (see the ``SessionResults`` message); ``detections`` only in
    the answer to a CloseSession (never recorded)."""

    session_id: str
    state: str  # "open", "closed" or "failed"
    units_stored: int
    bytes_stored: int
    frames_decoded: int
    complete: bool
    error: str
    output_dir: str
    dropped: list[int] = field(default_factory=list)
    detections: list[FrameDetections] = field(default_factory=list)

    def record(self) -> dict:
        """What the session record keeps (no detections)."""
        return {k: v for k, v in vars(self).items() if k != "detections"}


class Metrics:
    """Hooks the core calls; the default does nothing (see :mod:`cloud.service.metrics`)."""

    def session_opened(self, resumed: bool) -> None: ...

    def session_closed(self, state: str) -> None: ...

    def unit_stored(self, nbytes: int) -> None: ...

    def frame_decoded(self, seconds: float) -> None: ...

    def error(self, code: str) -> None: ...

    def throttled(self, seconds: float) -> None: ...

    def detect_frame(self, status: str) -> None: ...

    def detect_unheld(self, delta: int) -> None: ...

    def decoder_stepped(self, down: bool, cause: str) -> None: ...


def check_tenant(tenant: str) -> str:
    """``tenant`` if it is a safe folder name (letters, digits, ``_.-``; 1-64 characters)."""
    if not _TENANT.fullmatch(tenant):
        raise ValueError(f"tenant name {tenant!r}: use 1-64 letters, digits, '_', '.', '-' "
                         "(starting with a letter or digit)")  # fmt: skip
    return tenant


# ------------------------------------------------------------------------------ checks


def parse_open(request: OpenRequest) -> StreamHeader:
    """Checks an open request; returns its stream header.

    Raises:
        UnsupportedError: another protocol version, codec or mode.
        InvalidRequestError: an unreadable header, or fields that disagree with it.
    """
    if request.protocol_version != PROTOCOL_VERSION:
        raise UnsupportedError(f"protocol version {request.protocol_version} is not supported "
                               f"(this server speaks {PROTOCOL_VERSION})")  # fmt: skip
    if request.codec not in SERVED:
        raise UnsupportedError(f"codec {request.codec!r} is not served (served: "
                               f"{', '.join(SERVED)})")  # fmt: skip
    if request.mode not in SERVED.values():
        raise UnsupportedError(f"mode {request.mode!r} is not served (served: "
                               f"{', '.join(SERVED.values())})")  # fmt: skip
    if SERVED[request.codec] != request.mode:
        raise InvalidRequestError(f"codec {request.codec!r} goes with mode "
                                  f"{SERVED[request.codec]!r}, not {request.mode!r}")  # fmt: skip
    try:
        header = StreamHeader.from_bytes(request.header)
    except BitstreamError as exc:
        raise InvalidRequestError(f"the stream header is not valid: {exc}") from exc
    kind = "task" if is_detect_stream(header) else "generative"
    if request.mode != kind:
        raise InvalidRequestError(f"mode {request.mode!r}, but the stream header is a {kind} "
                                  "stream (mode=detect: task)")  # fmt: skip
    _check_fields(request, header)
    return header


def _check_fields(request: OpenRequest, header: StreamHeader) -> None:
    declared = {"level": header.level, "width": header.width, "height": header.height,
                "fps_num": header.fps_num, "fps_den": header.fps_den,
                "num_frames": header.num_frames,
                "models": tuple((m.name, m.sha256 or "") for m in header.models)}  # fmt: skip
    for name, value in declared.items():
        sent = getattr(request, name)
        if sent is not None and sent != value:
            raise InvalidRequestError(f"{name} is {sent!r} but the stream header says {value!r}")


def missing_models(header: StreamHeader, decode: DecodeSettings) -> list[str]:
    """The header's models this server does not have at the stream's sha256, described.

    The flow prior is compared with the decoder's; a detect-mode stream's bottleneck must be
    among the shipped ones or the files of ``decode.bottleneck_dir``; every other model must
    be known to the model registry, at the same sha256 where both pin one (the edge's models
    are named so a stream says what made it).
    """
    from semcodec.codec.core.models import ModelError, model_spec, pinned_sha256
    from semcodec.codec.scaffold.codec import default_flow_prior
    from semcodec.codec.scaffold.levels import LevelConfig

    missing = []
    detect = is_detect_stream(header)
    for entry in header.models:
        known, have = True, None
        if detect and is_bottleneck_entry(entry.name):
            if find_bottleneck(entry.sha256, decode.bottleneck_dir) is None:
                missing.append(f"{entry.name} (sha256 {entry.sha256 or 'unknown'}; looked for "
                               "among the shipped bottlenecks and --bottleneck-dir)")  # fmt: skip
            continue
        try:
            if entry.name == "flow_prior":
                config = LevelConfig.from_dict(dict(header.settings))
                have = (load_flow_prior(decode.flow_prior) or default_flow_prior(config)).sha256
            else:
                have = pinned_sha256(model_spec(entry.name))
        except (ModelError, ValueError, TypeError, OSError):
            known = False
        # a version-3 header holds a prefix of the digest: ModelEntry.matches compares
        if not known or (entry.sha256 and have and not entry.matches(have)):
            missing.append(f"{entry.name} (sha256 {entry.sha256 or 'unknown'})")
    return missing


def check_decodable(header: StreamHeader, decode: DecodeSettings) -> None:
    """Raises :class:`MissingModelsError` or :class:`InvalidRequestError` when this server
    cannot decode the stream (missing models, settings outside its limits)."""
    from semcodec.codec.scaffold.codec import ScaffoldCodecError, ScaffoldDecoder

    missing = missing_models(header, decode)
    if is_detect_stream(header) and BOTTLENECK_MODEL not in {m.name for m in header.models}:
        missing.append(f"{BOTTLENECK_MODEL} (the detect-mode header names none)")
    if missing:
        raise MissingModelsError("this server lacks the model(s) the stream needs: "
                                 + ", ".join(missing))  # fmt: skip
    if is_detect_stream(header):
        from semcodec.codec.task.bottleneck import BottleneckFileError

        sha = {m.name: m.sha256 for m in header.models}[BOTTLENECK_MODEL]
        try:
            check_unit_shape(header, find_bottleneck(sha, decode.bottleneck_dir))
        except (BottleneckFileError, ValueError) as exc:
            raise InvalidRequestError(f"this server cannot decode the stream: {exc}") from exc
        return
    try:
        ScaffoldDecoder(header, flow_prior=load_flow_prior(decode.flow_prior))
    except (ScaffoldCodecError, ValueError) as exc:
        raise InvalidRequestError(f"this server cannot decode the stream: {exc}") from exc

