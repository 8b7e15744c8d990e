"""Typed errors of the session core, each naming the gRPC status it maps to.

The core never imports gRPC: an error carries the status *name* (``"NOT_FOUND"``), and the
servicer turns it into ``grpc.StatusCode[name]`` at the edge of the service.
"""

from __future__ import annotations


class ServiceError(Exception):
    """A request the service refuses; ``code`` is the gRPC status name."""

    code = "INTERNAL"


class InvalidRequestError(ServiceError):
    """A malformed request or unit (bad header, unparseable unit, wrong field)."""

    code = "INVALID_ARGUMENT"


class ChecksumError(ServiceError):
    """A chunk or a unit whose bytes do not match its checksum (damaged on the way)."""

    code = "DATA_LOSS"


class SequenceGapError(ServiceError):
    """A unit whose sequence number skips ahead of the next expected one."""

    code = "OUT_OF_RANGE"


class ReplayError(ServiceError):
    """A unit whose sequence number is already stored (a duplicate)."""

    code = "ALREADY_EXISTS"


class SessionNotFoundError(ServiceError):
    """No such session for this tenant (another tenant's sessions are not found either)."""

    code = "NOT_FOUND"


class MissingModelsError(ServiceError):
    """The stream needs models (name and sha256) this server does not have."""

    code = "FAILED_PRECONDITION"


class SessionStateError(ServiceError):
    """The session cannot take this request in its state (closed, failed, ended)."""

    code = "FAILED_PRECONDITION"


class CapacityError(ServiceError):
    """Too many sessions: retry later or elsewhere."""

    code = "RESOURCE_EXHAUSTED"


class SupersededError(ServiceError):
    """A newer stream took over the session (the edge reconnected)."""

    code = "ABORTED"


class UnsupportedError(ServiceError):
    """A protocol version, codec or mode this server does not serve."""

    code = "UNIMPLEMENTED"


class ShuttingDownError(ServiceError):
    """The server is draining: it takes no new sessions or units."""

    code = "UNAVAILABLE"


class QuotaError(CapacityError):
    """A tenant over one of its quotas (sessions, streams, stored bytes): the message names
    the quota; other tenants are unaffected."""

    code = "RESOURCE_EXHAUSTED"


class ProgressTimeoutError(ServiceError):
    """A stream that sent too little for too long (no StreamStart in time, a unit that
    trickles in, an idle stream)."""

    code = "DEADLINE_EXCEEDED"


#: The longest error message or logged value the service emits, characters.
MAX_MESSAGE_CHARS = 1024
#: The longest client-supplied id quoted in a message, characters.
MAX_ID_CHARS = 64


def brief(text: str, limit: int = MAX_MESSAGE_CHARS) -> str:
    """``text`` cut to at most ``limit`` characters (about): a longer text keeps its start
    and ends with its length and a short hash, so that two long inputs stay distinguishable
    and no log line or error message grows with the input."""
    text = str(text)
    if len(text) <= limit:
        return text
    import hashlib

    digest = hashlib.sha256(text.encode("utf-8", "replace")).hexdigest()[:12]
    return f"{text[: max(0, limit - 48)]}...({len(text)} chars, sha256 {digest})"


def brief_id(value: str) -> str:
    """A client-supplied id for a message: ``repr`` of it, cut and hashed past
    ``MAX_ID_CHARS``."""
    return brief(repr(value), MAX_ID_CHARS)
