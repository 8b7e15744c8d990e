"""The HTTP front door of ``cloud-decoder serve`` (``--http-listen``): a dashboard of the
tenant's sessions, a live view per session, MJPEG and server-sent events, a JSON API.

It runs on aiohttp in the gRPC server's event loop (:class:`~cloud.service.server.
DecoderServer` starts it), on the same tokens and tenants, with TLS like the gRPC port:

* ``GET /``: the tenant's sessions as an HTML table (works without JavaScript, refreshes
  itself; ``curl -H "Authorization: Bearer TOKEN"``), ``GET /api/sessions`` the same as JSON,
  ``GET /api/sessions/ID`` one session;
* ``GET /sessions/ID``: the live view (the video with its boxes drawn over it, a rate plot);
  ``/sessions/ID/mjpeg`` the reconstruction as MJPEG (players, NVRs, the page's ``<img>``),
  ``/sessions/ID/frame.jpg`` the latest frame, ``/sessions/ID/events`` each frame's tracked
  boxes, rate and counts as server-sent events (``event: frame``, JSON data);
* authentication: ``Authorization: Bearer TOKEN``, or ``Basic`` with the token as password
  (players that only speak that: ``http://:TOKEN@host/...``), or ``POST /login`` which sets
  an HttpOnly, SameSite=Strict cookie (Secure over TLS). A server without tokens serves the
  tenant ``default`` to anyone who reaches it (on the loopback, unless asked for by name).

Refusals: 401 without a known token (nothing served), 400 for a session id that is not 32
hex digits (path tricks), 404 for another tenant's session or one not held, 413/400 for
oversized bodies, header lines or URLs (aiohttp's limits), 429 past the viewer quotas
(``tenant_max_viewers`` per tenant, ``max_viewers`` in all). What a viewer was sent and has
not taken is bounded in frames (``viewer_max_behind``): past it frames are skipped for it
(it gets the newest), and a viewer that takes none for ``viewer_stall_s`` is dropped, its
socket reset so that the kernel releases its buffers; the decoder only ever hands a frame
over (:mod:`cloud.service.live`), so no viewer can slow decoding.
Connections are timed out and capped in all and per address (:mod:`cloud.service.front`);
the pages themselves are in :mod:`cloud.service.pages`.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import collections
import contextlib
import json
import re
import secrets
import time
from concurrent.futures import Executor
from dataclasses import dataclass

from aiohttp import web

from semcodec.cloud.service.auth import DEFAULT_TENANT, TokenTable
from semcodec.cloud.service.config import client_address, is_loopback
from semcodec.cloud.service.errors import ServiceError
from semcodec.cloud.service.front import (
    ConnectionGate,
    GatedSite,
    Paces,
    PeerRefusals,
    QuietServerLog,
    hang_up,
    unsent_bytes,
)
from semcodec.cloud.service.live import InFlight, jpeg_of
from semcodec.cloud.service.pages import (
    LIVE_JS,
    LOGIN_HTML,
    dashboard_html,
    live_html,
    view_fields,
)

_SESSION_ID = re.compile(r"[0-9a-f]{32}")  # fullmatch: "$" would take a trailing newline
COOKIE = "semcodec_login"
#: Logins kept at once per tenant (its oldest forgotten first) and how long one lasts, s.
MAX_LOGINS_PER_TENANT, LOGIN_S = 256, 12 * 3600.0
#: What one address may POST to /login at once beyond --http-login-rps.
LOGIN_BURST = 5
#: The largest request body taken (the login form), bytes.
MAX_BODY = 4096
#: Without a new frame for this long a viewer checks its session is still held, seconds.
RECHECK_S = 2.0
#: The longest a request over its tenant's rate waits for its turn (then 429), seconds.
PACE_HOLD_S = 2.0
#: Where a request's tenant is kept, once authenticated.
TENANT = web.RequestKey("tenant", str)
_SECURITY_HEADERS = {"X-Content-Type-Options": "nosniff", "Referrer-Policy": "no-referrer",
                     "Content-Security-Policy": "default-src 'self'; img-src 'self'; "
                     "style-src 'self' 'unsafe-inline'; frame-ancestors 'none'",
                     "Cache-Control": "no-store"}  # fmt: skip


@dataclass(frozen=True)
class HttpSettings:
    """The front door's settings (from ``ServeSettings``).

    Attributes:
        tenant_max_viewers: concurrent live viewers (MJPEG or events) per tenant.
        max_viewers: concurrent live viewers in all.
        viewer_stall_s: a viewer whose socket takes nothing for this long, or that takes
            none of its ``viewer_max_behind`` frames in flight for this long, is dropped.
        viewer_max_behind: frames a viewer may have been sent and not yet taken (past it,
            frames are skipped for it).
        secure_cookie: the login cookie is sent over TLS only.
        header_s: a connection must send its first request's head within this long.
        body_s: a request's body must come within this long (408), and a body left unread
            is read for this long at most.
        keepalive_s: a connection waits this long for its next request's head.
        max_connections, max_connections_per_peer: open connections in all and from one
            address (past them: 503 and closed; 0: no cap).
        tenant_rps, tenant_burst: requests per second of one tenant and what a quiet one
            may make at once (past them a request waits its turn up to ``PACE_HOLD_S``, then
            429; 0: no limit).
        login_rps: ``POST /login`` per second from one address (``LOGIN_BURST`` at once;
            past it 429 at once; 0: no limit).
        trusted: networks of proxies whose ``X-Forwarded-For`` names the client's address
            (for the logins' pace and the refusals' log; empty: the connection's).
    """

    tenant_max_viewers: int = 8
    max_viewers: int = 64
    viewer_stall_s: float = 5.0
    viewer_max_behind: int = 8
    secure_cookie: bool = False
    header_s: float = 10.0
    body_s: float = 10.0
    keepalive_s: float = 15.0
    max_connections: int = 512
    max_connections_per_peer: int = 32
    tenant_rps: float = 20.0
    tenant_burst: int = 40
    login_rps: float = 1.0
    trusted: tuple = ()


class Viewers:
    """Counts live viewers per tenant and in all; :meth:`take` refuses past a quota."""

    def __init__(self, per_tenant: int, total: int) -> None:
        self.per_tenant, self.total = per_tenant, total
        self.held: collections.Counter[str] = collections.Counter()
        self.dropped = 0  # viewers dropped for not reading
        self.on_drop = None  # called for each (the metrics' counter)
        self.on_taken = None  # called with each frame's latency, seconds (the metrics')

    def drop(self, transport) -> None:
        """Drops a viewer that does not take its frames: counted, its socket reset."""
        self.dropped += 1
        if self.on_drop is not None:
            self.on_drop()
        if transport is not None:
            hang_up(transport)

    def taken(self, latency_s: float) -> None:
        """A frame was taken by a viewer ``latency_s`` after its publication."""
        if self.on_taken is not None:
            self.on_taken(max(0.0, latency_s))

    @contextlib.contextmanager
    def take(self, tenant: str):
        if self.per_tenant and self.held[tenant] >= self.per_tenant:
            raise web.HTTPTooManyRequests(text=f"tenant {tenant} has {self.held[tenant]} live "
                                          "viewers, its quota (tenant_max_viewers)\n")
        if self.total and sum(self.held.values()) >= self.total:
            raise web.HTTPTooManyRequests(text="the server has its most live viewers "
                                          "(max_viewers)\n")  # fmt: skip
        self.held[tenant] += 1
        try:
            yield
        finally:
            self.held[tenant] -= 1
            if self.held[tenant] <= 0:
                del self.held[tenant]


class Logins:
    """Login cookies: a random key per login, mapped to its tenant, expiring; at most
    ``per_tenant`` per tenant, its oldest forgotten first, so that one tenant's logins never
    log another's browsers out."""

    def __init__(self, per_tenant: int = MAX_LOGINS_PER_TENANT) -> None:
        self.per_tenant = per_tenant
        self._keys: dict[str, tuple[str, float]] = {}
        self._of: dict[str, collections.OrderedDict[str, None]] = {}  # tenant: its keys

    def add(self, tenant: str) -> str:
        key = secrets.token_urlsafe(32)
        self._keys[key] = (tenant, time.monotonic() + LOGIN_S)
        mine = self._of.setdefault(tenant, collections.OrderedDict())
        mine[key] = None
        while len(mine) > self.per_tenant:
            self._keys.pop(mine.popitem(last=False)[0], None)
        return key

    def tenant(self, key: str | None) -> str | None:
        found = self._keys.get(key or "")
        if found is None:
            return None
        if found[1] < time.monotonic():
            del self._keys[key]
            self._of[found[0]].pop(key, None)
            return None
        return found[0]

    def held(self, tenant: str) -> int:
        """Logins of ``tenant`` kept."""
        return len(self._of.get(tenant, ()))


class FrontDoor:
    """The aiohttp application over a :class:`~cloud.service.manager.SessionManager`.

    Args:
        manager: the session core (read only: viewers never load or keep sessions).
        tokens: ``{token: tenant}`` (None: no tokens, every request is tenant ``default``).
        settings: see :class:`HttpSettings`.
        pool: threads for JPEG encoding and disk reads.
    """

    def __init__(self, manager, tokens: dict[str, str] | None, settings: HttpSettings,
                 pool: Executor) -> None:  # fmt: skip
        self.manager, self.settings, self.pool = manager, settings, pool
        self.table = TokenTable(tokens) if tokens is not None else None
        self.viewers = Viewers(settings.tenant_max_viewers, settings.max_viewers)
        self.logins = Logins()
        self.gate = ConnectionGate(settings.max_connections, settings.max_connections_per_peer,
                                   settings.header_s)  # fmt: skip
        self.server_log = QuietServerLog()
        self.tenant_paces = Paces(settings.tenant_rps, settings.tenant_burst, PACE_HOLD_S)
        self.login_paces = Paces(settings.login_rps, LOGIN_BURST, hold_s=0.0)
        self.refusals = PeerRefusals()  # counted by reason, logged once a second per peer
        self.hosts: set[str] | None = None  # the Host names answered (None: any)
        self._runner: web.AppRunner | None = None

    # -- serving

    def app(self) -> web.Application:
        app = web.Application(client_max_size=MAX_BODY, middlewares=[self._guard])
        app.router.add_get("/", self.dashboard)
        app.router.add_get("/login", self.login_form)
        app.router.add_post("/login", self.login)
        app.router.add_get("/live.js", self.script)
        app.router.add_get("/api/sessions", self.api_sessions)
        app.router.add_get("/api/sessions/{sid}", self.api_session)
        app.router.add_get("/sessions/{sid}", self.live_page)
        app.router.add_get("/sessions/{sid}/mjpeg", self.mjpeg)
        app.router.add_get("/sessions/{sid}/frame.jpg", self.snapshot)
        app.router.add_get("/sessions/{sid}/events", self.events)
        return app

    async def start(self, host: str, port: int, ssl_context=None) -> int:
        """Listens (in the running event loop); returns the port bound."""
        # a viewer that goes away cancels its handler; a stop waits 1 s for handlers
        settings = self.settings
        self._runner = web.AppRunner(self.app(), access_log=None, handle_signals=False,
                                     handler_cancellation=True, shutdown_timeout=1.0,
                                     keepalive_timeout=settings.keepalive_s,
                                     lingering_time=settings.body_s, logger=self.server_log)
        # without tokens on the loopback, only requests naming it are answered
        self.hosts = {"localhost", host.lower()} if (
            self.table is None and is_loopback(host)) else None  # fmt: skip
        await self._runner.setup()
        site = GatedSite(self._runner, host, port, self.gate, ssl_context)
        await site.start()
        return site.port

    async def stop(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()

    # -- who asks

    def tenant_of(self, request: web.Request) -> str | None:
        """The request's tenant (bearer token, basic password, login cookie), or None."""
        if self.table is None:
            return DEFAULT_TENANT
        header = request.headers.get("Authorization", "")
        if header.startswith("Basic "):
            with contextlib.suppress(binascii.Error, UnicodeDecodeError, ValueError):
                password = base64.b64decode(header[6:], validate=True).decode().partition(":")[2]
                header = f"Bearer {password}"
        if header:
            return self.table.tenant(header)
        return self.logins.tenant(request.cookies.get(COOKIE))

    @web.middleware
    async def _guard(self, request: web.Request, handler):
        """Authentication (401 before anything is served) and the security headers."""
        self.gate.seen(request.transport)
        if self.hosts is not None and not self._host_known(request.headers.get("Host")):
            raise self._refuse(request, web.HTTPMisdirectedRequest, "misdirected",
                               "421: without tokens this server answers only its loopback "
                               "names (Host)")  # fmt: skip
        if request.path not in ("/login", "/live.js"):
            tenant = self.tenant_of(request)
            if tenant is None:
                raise self._refuse(request, web.HTTPUnauthorized, "unauthenticated",
                                   "401: a known token is required (Authorization: Bearer "
                                   "TOKEN, or POST /login)", headers={
                                       "WWW-Authenticate": 'Bearer realm="semcodec", '
                                       'Basic realm="semcodec"'})  # fmt: skip
            request[TENANT] = tenant
            if not await self.tenant_paces.turn(tenant):
                raise self._refuse(request, web.HTTPTooManyRequests, "tenant_rate",
                                   f"429: tenant {tenant} is over its requests per second "
                                   "(http_tenant_rps)", headers={"Retry-After": "1"})
        response = await handler(request)
        if not response.prepared:
            for name, value in _SECURITY_HEADERS.items():  # a handler's own stays
                response.headers.setdefault(name, value)
        return response

    def _refuse(self, request: web.Request, kind, reason: str, text: str, **kw):
        """The refusal ``kind`` (an aiohttp HTTP exception class) to raise, counted under
        ``reason`` (the metrics' label) and logged at most once a second per peer."""
        self.refusals.count(self._client(request), reason, kind.status_code)
        return kind(text=text + "\n", **kw)

    def _client(self, request: web.Request) -> str:
        """The client's address: the connection's, or behind a trusted proxy the one its
        ``X-Forwarded-For`` names."""
        return client_address(request.remote or "?", request.headers.get("X-Forwarded-For"),
                              self.settings.trusted)  # fmt: skip

    def _host_known(self, host: str | None) -> bool:
        """Whether a ``Host`` header names this server as the loopback does: a page of
        another site whose name was made to resolve to 127.0.0.1 (DNS rebinding) sends its
        own name and is refused."""
        if host is None:  # HTTP/1.0 without Host: not a browser
            return True
        name = host.lower()
        if name.startswith("["):
            name = name[1:].partition("]")[0]
        elif name.count(":") == 1:
            name, _, port = name.partition(":")
            if not port.isdigit():
                return False
        name = name.rstrip(".")
        return name in self.hosts or is_loopback(name)

    def _session(self, request: web.Request):
        """The held session the path names, of the request's tenant (400 / 404)."""
        sid = request.match_info["sid"]
        if not _SESSION_ID.fullmatch(sid):
            raise web.HTTPBadRequest(text="400: a session id is 32 hexadecimal digits\n")
        try:
            return self.manager.held(request[TENANT], sid)
        except (ServiceError, ValueError):
            raise web.HTTPNotFound(text="404: no such live session\n") from None

    async def _listing(self, tenant: str) -> list:
        """The tenant's sessions: from the session manager's index, in memory (read from
        disk only the first time a tenant asks), in the pool all the same: the manager's
        lock may be held by a session being created (its files written and fsynced), and
        the event loop never waits for it."""
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self.pool, self.manager.listing, tenant)

    # -- pages and API

    async def dashboard(self, request: web.Request) -> web.Response:
        views = await self._listing(request[TENANT])
        return web.Response(text=dashboard_html(request[TENANT], views),
                            content_type="text/html")  # fmt: skip

    async def api_sessions(self, request: web.Request) -> web.Response:
        views = await self._listing(request[TENANT])
        return web.json_response({"tenant": request[TENANT],
                                  "sessions": [view_fields(v) for v in views]})

    async def api_session(self, request: web.Request) -> web.Response:
        sid = request.match_info["sid"]
        if not _SESSION_ID.fullmatch(sid):
            raise web.HTTPBadRequest(text="400: a session id is 32 hexadecimal digits\n")
        for view in await self._listing(request[TENANT]):
            if view.session_id == sid:
                return web.json_response(view_fields(view))
        raise web.HTTPNotFound(text="404: no such session\n")

    async def live_page(self, request: web.Request) -> web.Response:
        session = self._session(request)
        from semcodec.codec.bitstream import StreamHeader

        header = StreamHeader.from_bytes(session.log.header_bytes())
        return web.Response(text=live_html(session.session_id, header.width, header.height),
                            content_type="text/html")  # fmt: skip

    async def script(self, request: web.Request) -> web.Response:
        return web.Response(text=LIVE_JS, content_type="text/javascript")

    async def login_form(self, request: web.Request) -> web.Response:
        # its form's POST carries this server's Origin (not "null", as under no-referrer)
        return web.Response(text=LOGIN_HTML, content_type="text/html",
                            headers={"Referrer-Policy": "same-origin"})

    async def login(self, request: web.Request) -> web.Response:
        if not await self.login_paces.turn(self._client(request)):
            raise self._refuse(request, web.HTTPTooManyRequests, "login_rate",
                               "429: too many logins from this address (http_login_rps)",
                               headers={"Retry-After": "1"})  # fmt: skip
        if _cross_site(request):
            raise self._refuse(request, web.HTTPForbidden, "cross_site",
                               "403: a login must come from this server's own page (Origin, "
                               "Sec-Fetch-Site)")  # fmt: skip
        try:
            async with asyncio.timeout(self.settings.body_s):
                form = await request.post()
        except TimeoutError:
            raise web.HTTPRequestTimeout(text="408: the body did not come in time\n") from None
        except (web.RequestPayloadError, ValueError):
            raise web.HTTPBadRequest(text="400: a malformed body\n") from None
        token = str(form.get("token", ""))
        tenant = self.table.tenant(f"Bearer {token}") if self.table is not None else None
        if tenant is None:
            raise self._refuse(request, web.HTTPUnauthorized, "login_failed",
                               "401: unknown token")
        response = web.HTTPSeeOther("/")
        response.set_cookie(COOKIE, self.logins.add(tenant), httponly=True, samesite="Strict",
                            secure=self.settings.secure_cookie, max_age=int(LOGIN_S))
        raise response

    # -- live

    async def snapshot(self, request: web.Request) -> web.Response:
        frame = self._session(request).live.latest
        if frame is None:
            raise web.HTTPNotFound(text="404: no frame decoded yet\n")
        data = await asyncio.get_running_loop().run_in_executor(self.pool, jpeg_of, frame)
        return web.Response(body=data, content_type="image/jpeg",
                            headers={"X-Frame": str(frame.number)})  # fmt: skip

    async def mjpeg(self, request: web.Request) -> web.StreamResponse:
        loop = asyncio.get_running_loop()

        async def part(frame) -> bytes:
            data = await loop.run_in_executor(self.pool, jpeg_of, frame)
            return (b"--frame\r\nContent-Type: image/jpeg\r\nContent-Length: %d\r\n"
                    b"X-Frame: %d\r\n\r\n" % (len(data), frame.number)) + data + b"\r\n"

        return await self._stream(request, "multipart/x-mixed-replace; boundary=frame", b"",
                                  part)  # fmt: skip

    async def events(self, request: web.Request) -> web.StreamResponse:
        session = self._session(request)

        async def event(frame) -> bytes:
            return self._event(session, frame)

        return await self._stream(request, "text/event-stream", b"retry: 2000\n\n", event)

    async def _stream(self, request, content_type: str, preamble: bytes, render):
        """A live viewer: each new frame of the session, as ``render(frame)`` makes its bytes,
        while the viewer takes them. What it was sent and has not taken is bounded in
        frames (:class:`~cloud.service.live.InFlight`, ``viewer_max_behind``): past it,
        frames are skipped for it, and it is dropped (its socket reset, buffers released)
        when it takes none for ``viewer_stall_s``. Each frame's latency, from its
        publication to the viewer's machine taking it, is measured (at the next frame)."""
        session = self._session(request)
        settings, viewers = self.settings, self.viewers
        with viewers.take(request[TENANT]):
            response = web.StreamResponse(headers={"Content-Type": content_type,
                                                   **_SECURITY_HEADERS})  # fmt: skip
            await response.prepare(request)
            if preamble and not await self._send(request, response, preamble):
                return response
            flight, sent = InFlight(settings.viewer_max_behind, settings.viewer_stall_s), 0
            with self._woken(session) as ready:
                while (frame := await self._next_frame(request, session, sent, ready)):
                    sent = frame.version
                    now = time.time()
                    for published in flight.taken(unsent_bytes(request.transport)):
                        viewers.taken(now - published)
                    verdict = flight.verdict(time.monotonic())
                    if verdict == "drop":
                        viewers.drop(request.transport)
                        break
                    data = await render(frame) if verdict == "send" else b""
                    if data and not await self._send(request, response, data):
                        break
                    if data:
                        flight.sent(len(data), frame.at)
        return response

    @staticmethod
    def _event(session, frame) -> bytes:
        """One frame's server-sent event: its boxes, rate and counts."""
        feedback = session.feedback()
        data = {**frame.boxes, "frame": frame.number, "at": round(frame.at, 3),
                "edge_us": frame.edge_us,
                "kbps": round(feedback.goodput_bps / 1000, 3),
                "frames_decoded": feedback.frames_decoded, "backlog": feedback.backlog_units}
        return f"event: frame\nid: {frame.version}\ndata: {json.dumps(data)}\n\n".encode()

    async def _send(self, request, response, data: bytes) -> bool:
        """Writes to a viewer; False (and the connection reset) when its socket took
        nothing for ``viewer_stall_s`` or it went away."""
        try:
            await asyncio.wait_for(response.write(data), self.settings.viewer_stall_s)
            return True
        except TimeoutError:
            self.viewers.drop(request.transport)
            return False
        except (ConnectionError, RuntimeError):
            pass
        if request.transport is not None:
            hang_up(request.transport)
        return False

    async def _next_frame(self, request, session, sent: int, ready: asyncio.Event):
        """The session's newest frame once it is newer than version ``sent`` (frames a slow
        viewer missed are skipped), or None when the session is no longer held."""
        while True:
            ready.clear()
            frame = session.live.latest
            if frame is not None and frame.version != sent:
                return frame
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(ready.wait(), RECHECK_S)
            gone = request.transport is None or request.transport.is_closing()
            if gone or (not ready.is_set() and not self._still_held(request, session)):
                return None

    @contextlib.contextmanager
    def _woken(self, session):
        """An event set (in this loop) whenever the session's feed publishes a frame."""
        loop = asyncio.get_running_loop()
        ready = asyncio.Event()

        def wake() -> None:  # the decoder's thread
            loop.call_soon_threadsafe(ready.set)

        session.live.listen(wake)
        try:
            yield ready
        finally:
            session.live.unlisten(wake)

    def _still_held(self, request, session) -> bool:
        try:
            return self.manager.held(request[TENANT], session.session_id) is session
        except (ServiceError, ValueError):
            return False


def _cross_site(request: web.Request) -> bool:
    """Whether a request comes from another site's page (login CSRF): its browser says so
    (``Sec-Fetch-Site``, which a page cannot set: other than ``same-origin`` or ``none``),
    or, from a browser that does not send it, its ``Origin`` is not this server as the
    request names it. A client that sends neither (curl) is not a browser and passes.
    (Chromium sends ``Origin: null`` with a same-origin form under ``no-referrer``: its
    ``Sec-Fetch-Site`` decides.)"""
    site = request.headers.get("Sec-Fetch-Site")
    if site is not None:
        return site.lower() not in ("same-origin", "none")
    origin = request.headers.get("Origin")
    return origin is not None and origin.lower() != f"{request.scheme}://{request.host}".lower()
