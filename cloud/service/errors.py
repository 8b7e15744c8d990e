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
