"""What viewers are shown of sessions (the dashboard's rows, the JSON API's objects):
:class:`SessionView`, made from a session held in memory (:func:`view_of`), from one leaving
memory (:func:`rest_view`: the session manager's listing index keeps it) or from its files
(:func:`stored_view`: read once per tenant)."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from pathlib import Path

from semcodec.cloud.service.session import Session
from semcodec.cloud.service.store import LOG_NAME, RECORD_NAME, read_json
from semcodec.codec.bitstream import StreamHeader
from semcodec.codec.task import is_detect_stream


@dataclass(frozen=True)
class SessionView:
    """What a viewer is shown of a session (the dashboard's row, the JSON API's object).

    Attributes:
        session_id, state: ``streaming`` (a stream attached), ``open``, ``at rest`` (open,
            out of memory), ``closed`` or ``failed``.
        mode, level: ``generative`` (level 0-3) or ``task``.
        width, height, fps: the stream's frames.
        frames_decoded, units_stored: so far.
        kbps: stored unit bits per second over the last ``GOODPUT_WINDOW_S`` (0 at rest).
        last_ack: wall-clock time of the last stored unit (None: none yet, or at rest).
        decoder: the session's decoder in full (``restore,person_matte=pose_landmark_full``;
            "": a detect-mode stream, decoded to detections).
        rung: the rung of the decoder's ladder it decodes at now (``full``, ``no
            person_matte``, ...; "": not decoding).
        steps: the last changes of rung, ``{"frame", "rung", "cause"}`` (cause ``pace``: the
            decoder behind its camera or caught up; ``compute``: the tenant's compute limit).
        gflops: the decoder's metered compute, GFLOP/s (0 at rest).
        live: frames can be watched now.
    """

    session_id: str
    state: str
    mode: str
    level: int
    width: int
    height: int
    fps: float
    frames_decoded: int
    units_stored: int
    kbps: float
    last_ack: float | None
    decoder: str
    rung: str
    steps: tuple[dict, ...]
    gflops: float
    live: bool


def _header_fields(header: StreamHeader) -> dict:
    return {"mode": "task" if is_detect_stream(header) else "generative", "level": header.level,
            "width": header.width, "height": header.height,
            "fps": round(header.fps_num / max(header.fps_den, 1), 3)}  # fmt: skip


def view_of(session: Session) -> SessionView:
    """A held session's view."""
    header = StreamHeader.from_bytes(session.log.header_bytes())
    results, feedback = session.results(), session.feedback()
    state = "streaming" if session.streams else results.state
    return SessionView(session.session_id, state, frames_decoded=results.frames_decoded,
                       units_stored=results.units_stored,
                       kbps=round(feedback.goodput_bps / 1000, 2),
                       last_ack=session.last_stored_at, decoder=session.decoder,
                       rung=session.rung if session.decode_state is None else "",
                       steps=tuple(session.steps), gflops=round(session.meter.rate() / 1e9, 3),
                       live=True, **_header_fields(header))  # fmt: skip


def recorded_decoder(record: dict, header: StreamHeader, default: str) -> str:
    """The decoder a session's record holds (one recorded before sessions chose theirs: the
    server's ``default``; "" for a detect-mode stream)."""
    if is_detect_stream(header):
        return ""
    return str(record.get("decoder", default))


def stored_view(state_dir: Path, default: str) -> SessionView:
    """The view of a session on disk only (at rest, closed or failed); ``default``: the
    server's decoder, for a record that holds none."""
    from semcodec.codec.bitstream import read_stream

    record = read_json(state_dir / RECORD_NAME)
    results = record.get("results") or {}
    with open(state_dir / LOG_NAME, "rb") as fh:
        header = read_stream(fh)[0]
    state = record.get("state", "open")
    steps = tuple(s for s in record.get("decoder_steps", ()) if isinstance(s, dict))
    return SessionView(state_dir.name, "at rest" if state == "open" else state,
                       frames_decoded=int(results.get("frames_decoded", 0)),
                       units_stored=int(results.get("units_stored", 0)), kbps=0.0,
                       last_ack=None, decoder=recorded_decoder(record, header, default),
                       rung="", steps=steps, gflops=0.0, live=False,
                       **_header_fields(header))  # fmt: skip


def rest_view(session: Session, state: str) -> SessionView:
    """The view of a session that leaves memory (``state``: ``at rest``, ``closed``,
    ``failed``), made from what it holds: it goes to the listing index, not to disk."""
    return dataclasses.replace(view_of(session), state=state, kbps=0.0, last_ack=None,
                               rung="", gflops=0.0, live=False)  # fmt: skip
