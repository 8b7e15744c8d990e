"""The transport-free session core of ``cloud-decoder serve``: :class:`SessionManager`
opens, resumes, closes and reports sessions per tenant, and shows them to viewers
(:class:`~cloud.service.views.SessionView`), from memory: the sessions it holds, and an index
of those on disk (read once per tenant, kept as sessions come and go).

A session (:mod:`cloud.service.session`) stores each unit a
:class:`~cloud.service.receiver.StreamReceiver` reassembles and verifies in its log
(written and fsynced: that is what an acknowledgement means) and decodes the log behind
it; the requests and answers are in :mod:`cloud.service.messages`, the limits in
:mod:`cloud.service.limits`, each tenant's quota use in :mod:`cloud.service.tenants`.

Layout under the server's ``out`` folder::

    OUT/<tenant>/<session-id>/            the outputs, as `cloud-decoder decode` writes them
                                          (appear when the session's decode is complete)
    OUT/.sessions/<tenant>/<session-id>/  stream.semc (the stored stream), session.json

Tenants are isolated by construction: a session is looked up under its tenant only, so
another tenant's session id is simply not found.

A detect-mode stream (mode ``task``, codec ``features``; :mod:`cloud.service.detect`) is
decoded to detections; each frame's detections go to the edge in the feedback of its stream
(from the frame the edge asks for when it attaches) and the rest with CloseSession.
"""

from __future__ import annotations

import collections
import contextlib
import dataclasses
import re
import secrets
import threading
import time
from pathlib import Path

from semcodec.cloud.service.compute import DecoderMismatchError, choose_decoder, parse_decoder
from semcodec.cloud.service.config import ServeSettings
from semcodec.cloud.service.decode import DecodeSettings, FairSlots
from semcodec.cloud.service.errors import (
    CapacityError,
    InvalidRequestError,
    QuotaError,
    SessionNotFoundError,
    SessionStateError,
    ShuttingDownError,
    brief_id,
)
from semcodec.cloud.service.limits import ServiceLimits, close_wait_s
from semcodec.cloud.service.messages import (
    Metrics,
    Opened,
    OpenRequest,
    Results,
    check_decodable,
    check_tenant,
    parse_open,
)
from semcodec.cloud.service.receiver import StreamReceiver
from semcodec.cloud.service.session import Session
from semcodec.cloud.service.store import (
    LOG_NAME,
    RECORD_NAME,
    SessionLog,
    leftovers,
    make_private_dir,
    read_dropped,
    read_json,
    remove_paths,
    tree_bytes,
    write_json_atomic,
)
from semcodec.cloud.service.tenants import TenantUsage
from semcodec.cloud.service.views import (
    SessionView,
    recorded_decoder,
    rest_view,
    stored_view,
    view_of,
)
from semcodec.codec.bitstream import BitstreamError, StreamHeader
from semcodec.codec.task import is_detect_stream

SESSIONS_DIR = ".sessions"
_SESSION_ID = re.compile(r"[0-9a-f]{32}")  # fullmatch: "$" would take a trailing newline


def _mtime(path: Path) -> float:
    try:
        return path.stat().st_mtime
    except OSError:
        return 0.0


def _check_ids(tenant: str, session_id: str) -> None:
    """Refuses a tenant name that cannot be one (ValueError) and a session id that cannot be
    one (NOT_FOUND: as for any session not found)."""
    check_tenant(tenant)
    if not _SESSION_ID.fullmatch(session_id):
        raise SessionNotFoundError(f"no session {brief_id(session_id)}")


def _stored_record(state_dir: Path) -> dict:
    """The record of the session stored in ``state_dir`` (NOT_FOUND without one)."""
    if not (state_dir / RECORD_NAME).is_file():
        raise SessionNotFoundError(f"no session {state_dir.name}")
    return read_json(state_dir / RECORD_NAME)


def _expired(state_dir: Path, now: float, retain_s: float) -> bool:
    """Whether a session's state folder has been at rest longer than ``retain_s`` (by its
    files' age; an unreadable record counts as not expired)."""
    try:
        read_json(state_dir / RECORD_NAME)
        age = now - max(p.stat().st_mtime for p in state_dir.iterdir())
    except (OSError, ValueError):
        return False
    return age > retain_s


class SessionManager:
    """All sessions of one server, by tenant.

    Args:
        out_root: the server's output folder.
        limits: see :class:`~cloud.service.limits.ServiceLimits` (default: those of the
            default serve settings).
        decode: how sessions are decoded.
        metrics: hooks for counters (default: none).
        tenant_quotas: quotas of named tenants, overriding ``limits``' ``tenant_*`` (see
            :class:`TenantUsage`).
    """

    def __init__(self, out_root: Path, limits: ServiceLimits | None = None,
                 decode: DecodeSettings | None = None, metrics: Metrics | None = None,
                 tenant_quotas: dict[str, dict[str, float]] | None = None):  # fmt: skip
        self.out_root = Path(out_root)
        self.tenant_quotas = tenant_quotas or {}
        self.limits = limits or ServiceLimits.of(ServeSettings(out=self.out_root))
        self.decode = decode or DecodeSettings()
        self.metrics = metrics or Metrics()
        self._sessions: dict[tuple[str, str], Session] = {}
        self._tenants: dict[str, TenantUsage] = {}
        self._slots = (FairSlots(self.limits.decode_threads)
                       if self.limits.decode_threads > 0 else None)  # fmt: skip
        self._lock = threading.RLock()
        # the listing index: per tenant, the views of its sessions on disk and not held,
        # with when each was last seen (read from disk once per tenant, then kept here)
        self._index: dict[str, dict[str, tuple[float, SessionView]]] = {}
        self._draining = False
        self._default_decoder = None  # the server's DecoderSpec, parsed on first use

    def default_decoder(self):
        """The server's default :class:`~codec.reconstruct.pipeline.DecoderSpec` (``decode``'s)."""
        if self._default_decoder is None:
            self._default_decoder = self.decode.spec
        return self._default_decoder

    def _session_decode(self, decoder: str) -> DecodeSettings:
        """How a session of ``decoder`` (in full) is decoded."""
        return dataclasses.replace(self.decode, decoder=decoder)

    def tenant(self, tenant: str) -> TenantUsage:
        """The quota use of ``tenant`` (a valid tenant name)."""
        check_tenant(tenant)
        with self._lock:
            usage = self._tenants.get(tenant)
            if usage is None:
                usage = TenantUsage(tenant, self.limits, self.out_root / SESSIONS_DIR / tenant,
                                    self.tenant_quotas.get(tenant),
                                    self.out_root / tenant)  # fmt: skip
                self._tenants[tenant] = usage
            return usage

    # -- lookup

    def _paths(self, tenant: str, session_id: str) -> tuple[Path, Path]:
        return (self.out_root / SESSIONS_DIR / tenant / session_id,
                self.out_root / tenant / session_id)  # fmt: skip

    def _find(self, tenant: str, session_id: str) -> Session:
        """The session, loaded from disk after a restart; NOT_FOUND for any other tenant's."""
        _check_ids(tenant, session_id)
        with self._lock:
            session = self._sessions.get((tenant, session_id))
            if session is not None:
                session.touch()
                return session
            state_dir, out_dir = self._paths(tenant, session_id)
            record = _stored_record(state_dir)
            if record.get("state") != "open":
                raise SessionStateError(f"session {session_id} is {record.get('state')}")
            self._check_capacity(tenant)
            # the session is this server's now: what earlier servers left of it goes
            remove_paths(leftovers(state_dir, out_dir, everyone=True))
            log = SessionLog.recover(state_dir / LOG_NAME)
            decoder = recorded_decoder(record, StreamHeader.from_bytes(log.header_bytes()),
                                       str(self.default_decoder()))  # fmt: skip
            usage = self.tenant(tenant)
            session = Session(tenant, session_id, state_dir, out_dir, log, self.limits,
                              self._session_decode(decoder), self.metrics, record, self._slots,
                              usage.compute, usage)  # fmt: skip
            self._sessions[(tenant, session_id)] = session
            self._index.get(tenant, {}).pop(session_id, None)
        session.start()
        return session

    def _check_capacity(self, tenant: str) -> None:
        """Room for one more session of ``tenant`` (call with ``_lock`` held)."""
        if self._draining:
            raise ShuttingDownError("the server is stopping: it takes no new sessions")
        quota = self.tenant(tenant).max_sessions
        if quota:
            held = sum(1 for owner, _ in self._sessions if owner == tenant)
            if held >= quota:
                raise QuotaError(f"tenant {tenant} holds {held} sessions, its quota "
                                 "(tenant_max_sessions): close one, or wait for idle ones to "
                                 "be put to rest (session_idle_s)")  # fmt: skip
        if len(self._sessions) >= self.limits.max_sessions:
            raise CapacityError(f"the server holds {len(self._sessions)} sessions, its limit "
                                "(--max-sessions): retry later")  # fmt: skip

    @property
    def active(self) -> int:
        """Sessions held open."""
        return len(self._sessions)

    def total_backlog(self) -> int:
        """Units stored but not decoded, over all sessions."""
        with self._lock:
            sessions = list(self._sessions.values())
        return sum(s.backlog for s in sessions)

    # -- requests

    def open(self, tenant: str, request: OpenRequest) -> Opened:
        """Opens a new session, or resumes ``request.session_id``.

        A new session's decoder is the request's (checked against the stream; "": the
        server's), refused while the tenant is over its compute limit if it runs networks;
        a resume keeps the session's (naming another is refused).
        """
        header = parse_open(request)
        if request.session_id:
            session = self._find(tenant, request.session_id)
            if session.log.header_bytes() != request.header:
                raise InvalidRequestError(f"the stream header differs from the one session "
                                          f"{session.session_id} was opened with")  # fmt: skip
            self._check_same_decoder(session, header, request.decoder)
            self.metrics.session_opened(True)
            return Opened(session.session_id, session.next_seq, True, session.decoder)
        check_decodable(header, self.decode)
        spec = choose_decoder(header, request.decoder, self.default_decoder())
        self.tenant(check_tenant(tenant)).compute.check_open(spec)
        decoder = "" if spec is None else str(spec)
        session = self._create(tenant, request.header, decoder)
        self.metrics.session_opened(False)
        return Opened(session.session_id, 0, False, decoder)

    def _check_same_decoder(self, session: Session, header: StreamHeader, text: str) -> None:
        """Refuses a resume that names another decoder than the session's ("": keeps it)."""
        if not text.strip():
            return
        if is_detect_stream(header):
            choose_decoder(header, text, self.default_decoder())  # refuses it
        asked = str(parse_decoder(text, self.default_decoder()))
        if asked != session.decoder:
            raise DecoderMismatchError(f"session {session.session_id} decodes with "
                                       f"{session.decoder!r}, the request names {asked!r}: a "
                                       "session keeps its decoder; resume with the same one (or "
                                       "none), or open a new session")  # fmt: skip

    def _create(self, tenant: str, header: bytes, decoder: str) -> Session:
        index = self._index_of(tenant)  # read from disk (once) outside the lock
        usage = self.tenant(tenant)
        with self._lock:
            self._check_capacity(tenant)
            held = sum(1 for owner, _ in self._sessions if owner == tenant)
            usage.check_sessions(held + len(index))
            session_id = secrets.token_hex(16)
            state_dir, out_dir = self._paths(tenant, session_id)
            make_private_dir(state_dir.parent)
            state_dir.mkdir(mode=0o700)
            log = SessionLog.create(state_dir / LOG_NAME, header)
            record = {"session_id": session_id, "tenant": tenant, "state": "open",
                      "created": time.time(), "dropped": [], "decoder": decoder}  # fmt: skip
            write_json_atomic(state_dir / RECORD_NAME, record)
            session = Session(tenant, session_id, state_dir, out_dir, log, self.limits,
                              self._session_decode(decoder), self.metrics, record, self._slots,
                              usage.compute, usage)  # fmt: skip
            self._sessions[(tenant, session_id)] = session
        session.start()
        return session

    def attach(self, tenant: str, session_id: str, detections_from: int = 0) -> StreamReceiver:
        """A stream for the session (a newer stream supersedes an older one); its feedback
        carries detections from frame ``detections_from`` on (detect mode; 0: from the
        first), or a generative stream's tracked boxes (level 1; only when asked:
        ``detections_from`` >= 1)."""
        if self._draining:
            raise ShuttingDownError("the server is stopping; resume the session later")
        session = self._find(tenant, session_id)
        return StreamReceiver(session, session.attach(), self.limits, self.metrics,
                              detections_from, self.tenant(tenant))  # fmt: skip

    def close(self, tenant: str, session_id: str, timeout_s: float = 0.0,
              detections_from: int = 0) -> Results:  # fmt: skip
        """Ends a session: the decoder finishes what is stored; returns the results, with
        the kept detections from frame ``detections_from`` on (detect mode; 0: the first;
        a generative stream's tracked boxes only when asked, ``detections_from`` >= 1).

        A closed session is final: its results stay readable, it cannot be resumed.
        """
        session = self.start_close(tenant, session_id)
        if isinstance(session, Results):
            return session
        wait = close_wait_s(timeout_s, self.limits.close_timeout_s)
        if not session.close(wait):
            raise ShuttingDownError(f"session {session_id}: the decoder did not finish in "
                                    f"{wait:.0f} s; close it again to wait longer")  # fmt: skip
        return self.finish_close(session, detections_from)

    def start_close(self, tenant: str, session_id: str) -> Session | Results:
        """First half of :meth:`close`: asks the session's decoder to finish (without
        waiting); the results at once when the session is closed already."""
        try:
            session = self._find(tenant, session_id)
        except SessionStateError:
            return self.results(tenant, session_id)
        session.request_close()
        return session

    def finish_close(self, session: Session, detections_from: int = 0) -> Results:
        """Second half of :meth:`close`, once ``session.decode_finished`` (or its decoder
        thread ended): records the results and forgets the session."""
        tenant, session_id = session.tenant, session.session_id
        session.close(10.0)  # the decoder thread ends right after it reports
        results = session.results()
        session.record.update(state=results.state, results=results.record(),
                              decoder_steps=list(session.steps))  # fmt: skip
        write_json_atomic(session.state_dir / RECORD_NAME, session.record)
        view = rest_view(session, results.state)
        with self._lock:
            self._sessions.pop((tenant, session_id), None)
            self._indexed(tenant, session_id, view)
        self.metrics.session_closed(results.state)
        if detections_from > 0 or session.detect:
            results.detections = list(session.detections_since(max(1, detections_from)))
        return results

    def results(self, tenant: str, session_id: str) -> Results:
        """The results so far (never waits)."""
        _check_ids(tenant, session_id)
        with self._lock:
            session = self._sessions.get((tenant, session_id))
        if session is not None:
            session.touch()
            return session.results()
        state_dir, _ = self._paths(tenant, session_id)
        record = _stored_record(state_dir)
        if "results" in record:
            return Results(**record["results"])
        log = SessionLog.recover(state_dir / LOG_NAME)
        return Results(session_id, "open", log.units, log.unit_bytes, 0, False, "",
                       f"{tenant}/{session_id}", read_dropped(state_dir, record))  # fmt: skip

    # -- viewers (read only: a viewer never loads, resumes or keeps a session)

    def held(self, tenant: str, session_id: str) -> Session:
        """The session of ``tenant`` held in memory (open, decoding) for a viewer.

        Raises:
            SessionNotFoundError: no such session of this tenant in memory (another tenant's
                sessions are not found either).
        """
        check_tenant(tenant)
        with self._lock:
            session = self._sessions.get((tenant, session_id))
        if session is None:
            raise SessionNotFoundError(f"no live session {brief_id(session_id)}")
        return session

    def _indexed(self, tenant: str, session_id: str, view: SessionView) -> None:
        """A session of ``tenant`` leaves memory: its view goes to the index, when the
        tenant's is made (call with ``_lock`` held)."""
        index = self._index.get(tenant)
        if index is not None:
            index[session_id] = (time.time(), view)

    def _index_of(self, tenant: str) -> dict[str, tuple[float, SessionView]]:
        """``tenant``'s index: read from disk on first use (each record and stream header
        once), kept up to date as sessions leave memory, come back or are removed."""
        index = self._index.get(tenant)
        if index is not None:
            return index
        folder = self.out_root / SESSIONS_DIR / tenant
        read = {}
        for state_dir in folder.glob("*"):
            if _SESSION_ID.fullmatch(state_dir.name) and not state_dir.is_symlink():
                with contextlib.suppress(OSError, ValueError, BitstreamError):
                    read[state_dir.name] = (_mtime(state_dir), stored_view(
                        state_dir, str(self.default_decoder())))  # fmt: skip
        with self._lock:
            if tenant not in self._index:  # what changed meanwhile is checked again here
                self._index[tenant] = {
                    sid: entry for sid, entry in read.items()
                    if (tenant, sid) not in self._sessions and (folder / sid).is_dir()}  # fmt: skip
            return self._index[tenant]

    def stored_sessions(self, tenant: str) -> int:
        """How many sessions ``tenant`` has on disk (held or not)."""
        index = self._index_of(tenant)
        with self._lock:
            held = sum(1 for owner, _ in self._sessions if owner == tenant)
            return held + len(index)

    def listing(self, tenant: str, limit: int = 100) -> list[SessionView]:
        """The tenant's sessions, those held first then the newest on disk, at most
        ``limit``: from memory (the index), once the tenant's index is made."""
        check_tenant(tenant)
        index = self._index_of(tenant)
        with self._lock:
            held = [s for (owner, _), s in self._sessions.items() if owner == tenant]
            rest = sorted(index.values(), key=lambda entry: entry[0], reverse=True)
        views = [view_of(s) for s in held[:limit]]
        views += [view for _, view in rest[: max(0, limit - len(views))]]
        return views

    def decoder_census(self) -> collections.Counter:
        """Held sessions whose decoder is open, by ``(reconstructor name, rung)`` (the
        metrics' labels: never a session id)."""
        with self._lock:
            sessions = list(self._sessions.values())
        return collections.Counter((s.decoder.partition(",")[0], s.rung) for s in sessions
                                   if s.rung and s.decode_state is None)  # fmt: skip

    def decoder_flops(self) -> float:
        """FLOP/s of every held session's decoder (metered)."""
        with self._lock:
            sessions = list(self._sessions.values())
        return sum(s.meter.rate() for s in sessions)

    def reap(self, now: float | None = None, timeout_s: float = 10.0) -> list[str]:
        """Puts to rest the sessions idle for ``session_idle_s`` (see :class:`ServeSettings`):
        their decoders stop and they leave memory; their logs stay for a resume. Returns
        their ids."""
        idle_s = self.limits.session_idle_s
        if idle_s <= 0:
            return []
        now = time.monotonic() if now is None else now
        rested = []
        with self._lock:
            for key, session in list(self._sessions.items()):
                if session.rest_if_idle(now, idle_s):
                    del self._sessions[key]
                    self._indexed(session.tenant, session.session_id,
                                  rest_view(session, "at rest"))  # fmt: skip
                    rested.append(session)
        for session in rested:
            session.join(timeout_s)
            self.metrics.session_closed("rested")
        return [s.session_id for s in rested]

    def sweep(self, now: float | None = None) -> list[Path]:
        """Removes the sessions at rest for longer than ``retain_s`` (by the age of their
        files): open sessions put to rest, and closed or failed ones, whose outputs go with
        them; a tenant's folders go once empty. Returns the state folders removed."""
        retain = self.limits.retain_s
        if retain <= 0:
            return []
        now = time.time() if now is None else now
        removed = []
        for state_dir in (self.out_root / SESSIONS_DIR).glob("*/*"):
            tenant, session_id = state_dir.parent.name, state_dir.name
            if not _SESSION_ID.match(session_id) or state_dir.is_symlink():
                continue
            with self._lock:
                if (tenant, session_id) in self._sessions or not _expired(state_dir, now, retain):
                    continue
                size = sum(p.stat().st_size for p in state_dir.glob(LOG_NAME))
                out_dir = self._paths(tenant, session_id)[1]
                outputs = tree_bytes(out_dir)
                remove_paths([state_dir, *leftovers(state_dir, out_dir, everyone=False)]
                             + ([out_dir] if out_dir.is_dir() else []))  # fmt: skip
                self._index.get(tenant, {}).pop(session_id, None)
                for folder in (state_dir.parent, out_dir.parent):
                    with contextlib.suppress(OSError):
                        folder.rmdir()  # only when empty
            usage = self._tenants.get(tenant)
            if usage is not None:
                usage.stored(-size)
                usage.wrote_outputs(-outputs)
            removed.append(state_dir)
        return removed

    def clean_start(self) -> list[Path]:
        """At start-up: removes what killed servers left (partial units, unfinished record
        writes, hidden partial output folders) of processes that no longer run. Returns what
        it removed."""
        found = []
        for state_dir in (self.out_root / SESSIONS_DIR).glob("*/*"):
            tenant, session_id = state_dir.parent.name, state_dir.name
            if _SESSION_ID.match(session_id) and not state_dir.is_symlink():
                out_dir = self._paths(tenant, session_id)[1]
                found += leftovers(state_dir, out_dir, everyone=False)
        remove_paths(found)
        return found

    # -- stopping

    def drain(self) -> None:
        """Takes no new sessions or streams from now on."""
        self._draining = True

    def shutdown(self, timeout_s: float = 10.0) -> None:
        """Stops every decoder; open sessions keep their logs for a resume after a restart."""
        self.drain()
        with self._lock:
            sessions = list(self._sessions.values())
            self._sessions.clear()
        for session in sessions:
            session.abandon(timeout_s)
