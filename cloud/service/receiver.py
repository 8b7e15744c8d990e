"""One stream of chunks into a session (:class:`StreamReceiver`, what the servicer drives):
chunks are reassembled and verified into units, each stored in the session's log under the
session's and the tenant's rate limits and the tenant's storage quota.
"""

from __future__ import annotations

import dataclasses

from semcodec.cloud.service.assembler import Chunk, ChunkAssembler
from semcodec.cloud.service.limits import ServiceLimits
from semcodec.cloud.service.messages import Feedback, Metrics
from semcodec.cloud.service.session import Session
from semcodec.cloud.service.store import partial_path
from semcodec.cloud.service.tenants import TenantUsage


class StreamReceiver:
    """One stream of chunks into a session (what the servicer drives).

    Its feedback carries the detections of the frames decoded since its previous feedback,
    from frame ``detections_from`` on (detect mode).
    """

    def __init__(self, session: Session, generation: int, limits: ServiceLimits,
                 metrics: Metrics, detections_from: int = 1,
                 tenant: TenantUsage | None = None) -> None:  # fmt: skip
        self.session, self.generation, self.metrics = session, generation, metrics
        self.tenant = tenant
        spill = partial_path(session.state_dir, generation)
        self._assembler = ChunkAssembler(limits.max_chunk_bytes, limits.max_unit_bytes, spill)
        self._next_detection = max(1, detections_from)
        # a generative stream's tracked boxes go back only when asked (detections_from >= 1)
        self._send_detections = detections_from > 0 or session.detect
        self._detached = False
        self._reserved = 0  # the unit in progress's bytes, counted in the tenant's storage

    @property
    def between_units(self) -> bool:
        """No unit is partly received (the next chunk starts one)."""
        return self._assembler.pending_seq is None

    @property
    def pending_bytes(self) -> int:
        """Bytes received of the unit in progress."""
        return self._assembler.pending_bytes

    def detach(self) -> None:
        """The stream ended: its partial unit is forgotten (and its file removed)."""
        if not self._detached:
            self._detached = True
            self._assembler.reset()
            self._release()
            self.session.detach()

    def _release(self) -> None:
        """The unit in progress no longer holds its place in the tenant's storage."""
        if self._reserved and self.tenant is not None:
            self.tenant.release(self._reserved)
        self._reserved = 0

    def throttle_delay(self, nbytes: int) -> float:
        """Takes ``nbytes`` from the session's and the tenant's rate limits; returns how long
        to wait before reading more, seconds."""
        wait = self.session.throttle_delay(nbytes)
        if self.tenant is not None:
            wait = max(wait, self.tenant.throttle_delay(nbytes))
        return wait

    def feedback(self) -> Feedback:
        feedback = self.session.feedback()
        if not self._send_detections:
            return feedback
        detections = self.session.detections_since(self._next_detection)
        if not detections:
            return feedback
        self._next_detection = detections[-1].frame + 1
        return dataclasses.replace(feedback, detections=detections)

    def add(self, chunk: Chunk) -> Feedback | None:
        """Takes one chunk; returns the acknowledgement once a unit is stored, else None.

        Raises:
            ServiceError subclasses (see :mod:`cloud.service.errors`); nothing is stored for
            a refused unit.
        """
        wait = self.throttle_delay(len(chunk.data))
        if wait > 0:
            self.session.wait(wait, self.generation)
        return self.take(chunk)

    def take(self, chunk: Chunk) -> Feedback | None:
        """:meth:`add` without waiting for the rate limits (the caller waited
        :meth:`throttle_delay`) -- nor for the decoder when it checked
        :meth:`Session.has_room` before the unit's first chunk.

        Every chunk is checked against the session first: a superseded stream (or one whose
        session closed or was put to rest) writes nothing more, and its partial unit is
        removed when it ends. A unit's declared size is counted in the tenant's stored bytes
        from its first chunk (its partial file included) until it is stored or dropped.
        """
        if self._assembler.pending_seq is None:
            self.session.check_seq(chunk.seq, self.generation)
            if chunk.dropped:
                self.session.store_dropped(chunk.seq, self.generation)
                return self.feedback()
            if self.tenant is not None:
                self.tenant.reserve(chunk.unit_size)
                self._reserved = chunk.unit_size
        else:
            self.session.check_current(self.generation)
        try:
            unit = self._assembler.add(chunk)
            if unit is None:
                return None
            self.session.store(unit, self.generation)
        except BaseException:
            if self._assembler.pending_seq is None:  # the unit was refused or forgotten
                self._release()
            raise
        self._release()
        if self.tenant is not None:
            self.tenant.stored(len(unit.data))
        return self.feedback()
