"""What bounds the calls strangers can hold (issue 25): the cap on unauthenticated streams,
health ``Watch`` of unknown services, the cap per peer, the StreamStart deadline and the
idle-stream deadline -- over real gRPC on 127.0.0.1, with health checks answered
throughout."""

from __future__ import annotations

import time

import grpc
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc

from semcodec.edge.stream.client import open_request
from semcodec.protos import semcodec_v1_pb2 as pb
from semcodec.protos import semcodec_v1_pb2_grpc as pb_grpc

from .conftest import code_of, start_server


def _check(channel) -> int:
    return health_pb2_grpc.HealthStub(channel).Check(health_pb2.HealthCheckRequest(),
                                                     timeout=5).status  # fmt: skip


def test_unauthenticated_streams_are_capped_and_health_checks_never_are(tmp_path):
    server = start_server(tmp_path, max_open_streams=2, max_watch_streams=2)
    channel = grpc.insecure_channel(f"127.0.0.1:{server.port}")
    health = health_pb2_grpc.HealthStub(channel)
    try:
        watches = [health.Watch(health_pb2.HealthCheckRequest(service="")) for _ in range(2)]
        for watch in watches:
            assert next(watch).status == health_pb2.HealthCheckResponse.SERVING
        third = health.Watch(health_pb2.HealthCheckRequest(service=""))
        code, details = code_of(lambda: next(third))
        assert code == grpc.StatusCode.RESOURCE_EXHAUSTED and "max_watch_streams" in details
        assert _check(channel) == health_pb2.HealthCheckResponse.SERVING  # never capped
        watches[0].cancel()
        deadline = time.monotonic() + 5  # a stream that ended gives its place back
        while time.monotonic() < deadline:
            again = health.Watch(health_pb2.HealthCheckRequest(service=""))
            try:
                next(again)
                break
            except grpc.RpcError:
                time.sleep(0.1)
        else:
            pytest.fail("the cap did not free a place")
        again.cancel()
        watches[1].cancel()
        unknown = health.Watch(health_pb2.HealthCheckRequest(service="x" * 10000))
        code, details = code_of(lambda: next(unknown))
        assert code == grpc.StatusCode.NOT_FOUND and len(details) < 200
    finally:
        channel.close()
        server.stop(0)


def test_calls_per_peer_are_capped_when_asked(tmp_path, semc):
    server = start_server(tmp_path, max_calls_per_peer=1, stream_start_s=30)
    channel = grpc.insecure_channel(f"127.0.0.1:{server.port}")
    stub = pb_grpc.SemanticStreamStub(channel)
    try:
        held = stub.StreamUnits(_forever())
        time.sleep(0.5)
        code, details = code_of(lambda: stub.GetResults(
            pb.GetResultsRequest(session_id="0" * 32), timeout=5))  # fmt: skip
        assert code == grpc.StatusCode.RESOURCE_EXHAUSTED and "max_calls_per_peer" in details
        assert _check(channel) == health_pb2.HealthCheckResponse.SERVING
        held.cancel()
    finally:
        channel.close()
        server.stop(0)


def _forever():
    """A request stream that never sends anything and never ends."""
    while True:
        time.sleep(0.1)
        yield from ()


def test_a_stream_without_start_or_units_is_ended_by_its_deadlines(tmp_path, semc):
    from semcodec.codec.bitstream import read_stream

    server = start_server(tmp_path, stream_start_s=1, stream_idle_s=1)
    channel = grpc.insecure_channel(f"127.0.0.1:{server.port}")
    stub = pb_grpc.SemanticStreamStub(channel)
    try:
        start = time.monotonic()
        code, details = code_of(lambda: list(stub.StreamUnits(_forever(), timeout=30)))
        assert code == grpc.StatusCode.DEADLINE_EXCEEDED and "no StreamStart" in details
        assert time.monotonic() - start < 5
        sid = stub.OpenSession(open_request(read_stream(semc)[0].to_bytes())).session_id

        def started():
            yield pb.StreamRequest(start=pb.StreamStart(session_id=sid))
            yield from _forever()

        code, details = code_of(lambda: list(stub.StreamUnits(started(), timeout=30)))
        assert code == grpc.StatusCode.DEADLINE_EXCEEDED and "no unit in 1 s" in details
        assert stub.GetResults(pb.GetResultsRequest(session_id=sid)).state == \
            pb.SESSION_STATE_OPEN  # fmt: skip
    finally:
        channel.close()
        server.stop(0)


def test_a_unit_paused_at_a_window_end_with_enough_bytes_goes_on(tmp_path, semc):
    """The progress window ends while the stream is quiet, but it brought enough: the stream
    goes on and its unit is stored (the read in progress is not lost with the window)."""
    from semcodec.codec.bitstream import read_stream
    from semcodec.edge.stream.client import unit_chunks
    from semcodec.edge.stream.spool import SpooledUnit

    server = start_server(tmp_path, progress_window_s=1, min_progress_bytes=10)
    channel = grpc.insecure_channel(f"127.0.0.1:{server.port}")
    stub = pb_grpc.SemanticStreamStub(channel)
    try:
        header, units = read_stream(semc)
        sid = stub.OpenSession(open_request(header.to_bytes())).session_id
        unit = next(iter(units))
        chunks = list(unit_chunks(SpooledUnit(0, int(unit.kind), 0, unit.to_bytes()), 200))
        assert len(chunks) >= 3

        def requests():
            yield pb.StreamRequest(start=pb.StreamStart(session_id=sid))
            yield chunks[0]
            yield chunks[1]  # 200 bytes in the first window: enough
            time.sleep(1.5)  # quiet past the first window's end, not the whole second
            yield from chunks[2:]

        replies = list(stub.StreamUnits(requests(), timeout=30))
        assert replies[-1].ack.next_seq == 1
    finally:
        channel.close()
        server.stop(0)
