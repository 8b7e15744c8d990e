"""The gRPC servicer: translates messages and calls the session core, nothing more.

Core errors (:mod:`cloud.service.errors`) become the status they name, with their message.
"""

from __future__ import annotations

import logging

import grpc

from semcodec.cloud.service.assembler import Chunk
from semcodec.cloud.service.auth import tenant_of
from semcodec.cloud.service.core import Feedback, Metrics, OpenRequest, Results, SessionManager
from semcodec.cloud.service.errors import InvalidRequestError, ServiceError
from semcodec.protos import semcodec_v1_pb2 as pb
from semcodec.protos import semcodec_v1_pb2_grpc as pb_grpc

log = logging.getLogger("semcodec.cloud.service")

_MODES = {pb.MODE_UNSPECIFIED: "generative", pb.MODE_GENERATIVE: "generative",
          pb.MODE_TASK: "task"}  # fmt: skip
_STATES = {"open": pb.SESSION_STATE_OPEN, "closed": pb.SESSION_STATE_CLOSED,
           "failed": pb.SESSION_STATE_FAILED}  # fmt: skip


def open_request(msg: pb.OpenSessionRequest) -> OpenRequest:
    """The core's view of an OpenSessionRequest."""
    return OpenRequest(
        header=msg.stream_header, session_id=msg.session_id,
        protocol_version=msg.protocol_version, codec=msg.codec,
        mode=_MODES.get(msg.mode, f"unknown ({msg.mode})"), level=msg.level, width=msg.width,
        height=msg.height, fps_num=msg.fps_num, fps_den=msg.fps_den, num_frames=msg.num_frames,
        models=tuple((m.name, m.sha256) for m in msg.models),
    )  # fmt: skip


def chunk_of(msg: pb.UnitChunk) -> Chunk:
    """The core's view of a UnitChunk."""
    return Chunk(seq=msg.seq, kind=int(msg.kind), unit_size=msg.unit_size, offset=msg.offset,
                 data=msg.data, crc32=msg.crc32, unit_sha256=msg.unit_sha256,
                 timestamp_us=msg.timestamp_us, dropped=msg.dropped)  # fmt: skip


def detections_of(frames) -> list[pb.FrameDetections]:
    """FrameDetections messages of the core's :class:`~cloud.service.detect.FrameDetections`."""
    return [pb.FrameDetections(frame=f.frame, boxes=[
        pb.Detection(x1=x1, y1=y1, x2=x2, y2=y2, score=score)
        for x1, y1, x2, y2, score in f.boxes]) for f in frames]  # fmt: skip


def reply_of(fb: Feedback) -> pb.StreamReply:
    feedback = pb.Feedback(goodput_bps=fb.goodput_bps, backlog_units=fb.backlog_units,
                           max_backlog_units=fb.max_backlog_units,
                           recommended_rate_bps=fb.recommended_rate_bps,
                           frames_decoded=fb.frames_decoded,
                           decode_error=fb.decode_error,
                           detections=detections_of(fb.detections))  # fmt: skip
    return pb.StreamReply(ack=pb.Ack(next_seq=fb.next_seq, feedback=feedback))


def results_of(r: Results) -> pb.SessionResults:
    return pb.SessionResults(session_id=r.session_id, state=_STATES[r.state],
                             units_stored=r.units_stored, bytes_stored=r.bytes_stored,
                             frames_decoded=r.frames_decoded, complete=r.complete,
                             error=r.error, output_dir=r.output_dir,
                             dropped_seqs=r.dropped,
                             detections=detections_of(r.detections))  # fmt: skip


class SemanticStreamServicer(pb_grpc.SemanticStreamServicer):
    """``semcodec.v1.SemanticStream`` over a :class:`SessionManager`."""

    def __init__(self, manager: SessionManager, metrics: Metrics) -> None:
        self.manager = manager
        self.metrics = metrics

    def _abort(self, context, exc: ServiceError):
        self.metrics.error(exc.code)
        log.info("refused (%s): %s", exc.code, exc)
        context.abort(grpc.StatusCode[exc.code], str(exc))

    def OpenSession(self, request, context):
        try:
            opened = self.manager.open(tenant_of(context), open_request(request))
        except ServiceError as exc:
            self._abort(context, exc)
        limits = self.manager.limits
        return pb.OpenSessionResponse(session_id=opened.session_id, next_seq=opened.next_seq,
                                      resumed=opened.resumed,
                                      max_chunk_bytes=limits.max_chunk_bytes,
                                      max_unit_bytes=limits.max_unit_bytes)  # fmt: skip

    def StreamUnits(self, request_iterator, context):
        try:
            first = next(request_iterator, None)
            if first is None or first.WhichOneof("body") != "start":
                raise InvalidRequestError("the first message of a stream must be StreamStart")
            receiver = self.manager.attach(tenant_of(context), first.start.session_id,
                                           first.start.detections_from)  # fmt: skip
            yield reply_of(receiver.feedback())
            for message in request_iterator:
                if message.WhichOneof("body") != "chunk":
                    raise InvalidRequestError("StreamStart may only be the first message")
                feedback = receiver.add(chunk_of(message.chunk))
                if feedback is not None:
                    yield reply_of(feedback)
        except ServiceError as exc:
            self._abort(context, exc)

    def CloseSession(self, request, context):
        try:
            results = self.manager.close(tenant_of(context), request.session_id,
                                         request.timeout_s, request.detections_from)  # fmt: skip
        except ServiceError as exc:
            self._abort(context, exc)
        return results_of(results)

    def GetResults(self, request, context):
        try:
            results = self.manager.results(tenant_of(context), request.session_id)
        except ServiceError as exc:
            self._abort(context, exc)
        return results_of(results)
