"""Bearer tokens: a tokens file maps each token to a tenant; an interceptor checks them.

The tokens file has one ``TOKEN TENANT`` pair per line (``#`` starts a comment). A request
carries ``authorization: Bearer TOKEN`` in its metadata; the interceptor compares it with
every known token in constant time (``hmac.compare_digest``), answers UNAUTHENTICATED when
none matches, and hands the tenant to the servicer on the call's context. Health and
reflection stay open (load balancers probe them without credentials).
"""

from __future__ import annotations

import hmac
from pathlib import Path

import grpc

from semcodec.cloud.service.messages import check_tenant

#: Tenant of every request when the server runs without --tokens.
DEFAULT_TENANT = "default"
#: Methods served without a token.
OPEN_METHODS = ("/grpc.health.v1.Health/", "/grpc.reflection.")
#: Shortest token accepted, characters.
MIN_TOKEN_CHARS = 16


class TokenFileError(ValueError):
    """A tokens file that cannot be used (says which line and why)."""


#: Quotas a tokens file may set for a tenant (a third field ``max_sessions=8,max_kbps=64``),
#: overriding the server's ``tenant_*`` settings for it.
QUOTA_NAMES = ("max_sessions", "max_streams", "max_kbps", "max_stored_mib",
               "max_decoder_gflops", "max_stored_sessions", "max_output_mib")


def load_tokens(path: Path) -> dict[str, str]:
    """``{token: tenant}`` from a tokens file (see :func:`load_token_file`)."""
    return load_token_file(path)[0]


def _quotas(text: str, where: str) -> dict[str, float]:
    quotas = {}
    for item in text.split(","):
        name, sep, value = item.partition("=")
        if not sep or name not in QUOTA_NAMES:
            raise TokenFileError(f"{where}: {item!r}: expected NAME=VALUE with NAME one of "
                                 f"{', '.join(QUOTA_NAMES)}")  # fmt: skip
        try:
            quotas[name] = float(value)
        except ValueError:
            raise TokenFileError(f"{where}: {item!r}: not a number") from None
        if quotas[name] < 0:
            raise TokenFileError(f"{where}: {item!r}: must be 0 (none) or more")
    return quotas


def load_token_file(path: Path) -> tuple[dict[str, str], dict[str, dict[str, float]]]:
    """``({token: tenant}, {tenant: quotas})`` from a tokens file: one ``TOKEN TENANT``
    pair per line, optionally followed by the tenant's quotas (``max_sessions=8,
    max_streams=16,max_kbps=64,max_stored_mib=512,max_decoder_gflops=50,
    max_stored_sessions=1000,max_output_mib=20000``; see ``QUOTA_NAMES``).

    Raises:
        TokenFileError: a malformed line, a short or repeated token, a bad tenant name,
            quotas of one tenant that differ between its lines, or no token at all.
        OSError: the file cannot be read.
    """
    tokens: dict[str, str] = {}
    quotas: dict[str, dict[str, float]] = {}
    for number, line in enumerate(Path(path).read_text(encoding="utf-8").splitlines(), 1):
        text = line.split("#", 1)[0].strip()
        if not text:
            continue
        parts = text.split()
        where = f"{path}:{number}"
        if len(parts) not in (2, 3):
            raise TokenFileError(f"{where}: expected 'TOKEN TENANT [QUOTAS]', found "
                                 f"{len(parts)} field(s)")  # fmt: skip
        token, tenant = parts[:2]
        if len(parts) == 3:
            given = _quotas(parts[2], where)
            if quotas.setdefault(tenant, given) != given:
                raise TokenFileError(f"{where}: tenant {tenant}'s quotas differ from an "
                                     "earlier line's")  # fmt: skip
        if len(token) < MIN_TOKEN_CHARS:
            raise TokenFileError(f"{where}: the token is shorter than {MIN_TOKEN_CHARS} "
                                 "characters")  # fmt: skip
        if token in tokens:
            raise TokenFileError(f"{where}: the token is listed twice")
        try:
            tokens[token] = check_tenant(tenant)
        except ValueError as exc:
            raise TokenFileError(f"{where}: {exc}") from None
    if not tokens:
        raise TokenFileError(f"{path}: no tokens in the file")
    return tokens, quotas


class TokenTable:
    """Looks a bearer token up in constant time per known token."""

    def __init__(self, tokens: dict[str, str]) -> None:
        self._pairs = [(t.encode("utf-8"), tenant) for t, tenant in tokens.items()]

    def tenant(self, authorization: str | None) -> str | None:
        """The tenant of an ``authorization`` metadata value, or None."""
        if not authorization or not authorization.startswith("Bearer "):
            return None
        given = authorization[len("Bearer ") :].strip().encode("utf-8")
        found = None
        for token, tenant in self._pairs:  # every token is compared: no early exit
            if hmac.compare_digest(given, token) and found is None:
                found = tenant
        return found


class TenantContext:
    """The servicer context of an authenticated call, with its ``tenant``."""

    def __init__(self, context: grpc.aio.ServicerContext, tenant: str) -> None:
        self._context = context
        self.tenant = tenant

    def __getattr__(self, name: str):
        return getattr(self._context, name)


def tenant_of(context) -> str:
    """The tenant a call runs as (DEFAULT_TENANT without authentication)."""
    return getattr(context, "tenant", DEFAULT_TENANT)


def wrap_handler(handler: grpc.RpcMethodHandler, wrap) -> grpc.RpcMethodHandler:
    """``handler`` with each of its behaviours ``fn`` replaced by ``wrap(fn, streaming)``
    (``streaming``: the behaviour answers with a stream)."""
    names = ("unary_unary", "unary_stream", "stream_unary", "stream_stream")
    return handler._replace(**{n: wrap(getattr(handler, n), n.endswith("_stream"))
                               for n in names if getattr(handler, n) is not None})  # fmt: skip


class AuthInterceptor(grpc.aio.ServerInterceptor):
    """Refuses calls without a known bearer token (UNAUTHENTICATED)."""

    def __init__(self, table: TokenTable, on_refused=None) -> None:
        self.table = table
        self.on_refused = on_refused

    async def intercept_service(self, continuation, handler_call_details):
        handler = await continuation(handler_call_details)
        if handler is None or handler_call_details.method.startswith(OPEN_METHODS):
            return handler
        metadata = dict(handler_call_details.invocation_metadata or ())
        tenant = self.table.tenant(metadata.get("authorization"))
        if tenant is None:
            if self.on_refused is not None:
                self.on_refused()
            return wrap_handler(handler, lambda _fn, _streaming: _refuse)
        return wrap_handler(handler, lambda fn, streaming: _as_tenant(fn, tenant, streaming))


async def _refuse(request, context):
    await context.abort(grpc.StatusCode.UNAUTHENTICATED,
                        "missing or unknown bearer token (metadata 'authorization: Bearer "
                        "TOKEN')")  # fmt: skip


def _as_tenant(fn, tenant: str, streaming: bool):
    if streaming:

        async def stream(request, context):
            async for reply in fn(request, TenantContext(context, tenant)):
                yield reply

        return stream

    async def call(request, context):
        return await fn(request, TenantContext(context, tenant))

    return call
