"""Level 1's tracked boxes returned over the service (issue 40 item 3, the service part): a
generative stream that asks (``StreamStart.detections_from``) gets every decoded frame's
tracked boxes, with their track ids, in its acknowledgements' feedback and the rest with
CloseSession -- the same boxes as the offline decode's ``tracks.json`` (written by
:func:`cloud.outputs.track_entry`, which the service calls too); one that does not ask gets
none."""

from __future__ import annotations

import hashlib
import json
import zlib

import pytest

from semcodec.codec.bitstream import read_stream
from semcodec.edge.stream.client import open_request
from semcodec.protos import semcodec_v1_pb2 as pb

from .conftest import stub_for


def _stream(stub, semc, detections_from: int) -> dict[int, list]:
    """Streams every unit; returns {frame: [(id, x1, y1, x2, y2), ...]} from the feedback
    and the close."""
    header, units = read_stream(semc)
    sid = stub.OpenSession(open_request(header.to_bytes())).session_id

    def requests():
        yield pb.StreamRequest(start=pb.StreamStart(session_id=sid,
                                                    detections_from=detections_from))
        for seq, unit in enumerate(units):
            data = unit.to_bytes()
            yield pb.StreamRequest(chunk=pb.UnitChunk(
                seq=seq, kind=int(unit.kind), unit_size=len(data), offset=0, data=data,
                crc32=zlib.crc32(data), unit_sha256=hashlib.sha256(data).digest()))

    got: dict[int, list] = {}
    for reply in stub.StreamUnits(requests(), timeout=120):
        for frame in reply.ack.feedback.detections:
            got[frame.frame] = _boxes(frame)
    following = max(got, default=0) + 1 if detections_from else 0
    results = stub.CloseSession(pb.CloseSessionRequest(session_id=sid, timeout_s=120,
                                                       detections_from=following))
    assert results.complete
    for frame in results.detections:
        got[frame.frame] = _boxes(frame)
    return got


def _boxes(frame) -> list:
    return [(b.track_id, b.x1, b.y1, b.x2, b.y2) for b in frame.boxes]


def test_a_generative_stream_gets_its_tracked_boxes_back_when_it_asks(server, semc, offline):
    channel, stub = stub_for(f"127.0.0.1:{server.port}")
    try:
        got = _stream(stub, semc, detections_from=1)
        assert _stream(stub, semc, detections_from=0) == {}  # not asked: none sent
    finally:
        channel.close()
    tracks = json.loads((offline / "tracks.json").read_text())["frames"]
    assert sorted(got) == [t["frame"] for t in tracks] and any(t["ids"] for t in tracks)
    for entry in tracks:
        ids = [b[0] for b in got[entry["frame"]]]
        assert ids == entry["ids"] and all(i >= 1 for i in ids)
        for box, expected in zip(got[entry["frame"]], entry["boxes"], strict=True):
            assert box[1:] == pytest.approx(expected, abs=0.01)
