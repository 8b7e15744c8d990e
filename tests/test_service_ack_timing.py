"""The one-second acknowledgements of the load test (issue 25): a unit must count as sent
before its last chunk goes to gRPC, never after.

gRPC's request thread asks the request generator for the next message only once the last
send completed and the thread ran again; on a busy machine the unit's ack can come back
before that. The client used to count the unit as sent only then, so the load test matched
that ack to nothing and timed the unit at the *next* ack: one unit period later (1 s at 1
unit/s, 0.5 s at 2 units/s). Measured before the fix (16 streams, 1 unit/s, a CPU-bound
process beside): 5-6 of 672 acks at 1.00-1.03 s; after: none over 87 ms.
"""

from __future__ import annotations

import threading

from semcodec.edge.stream.client import StreamClient
from semcodec.edge.stream.spool import Spool


def test_a_unit_counts_as_sent_before_its_last_chunk_is_handed_to_grpc(tmp_path):
    spool = Spool(tmp_path / "spool", 1 << 20)
    spool.bind(b"header")
    spool.put(0, 1, bytes(range(256)) * 10)  # 2560 bytes: 3 chunks of 1 KiB
    spool.put(1, 3, b"end")
    client = StreamClient("127.0.0.1:1", spool)
    sent: list[tuple[int, int]] = []  # (seq, chunks handed out when it counted as sent)
    handed = 0
    client._sent = lambda unit: sent.append((unit.seq, handed))
    requests = client._requests("0" * 32, 0, 1024, stop=threading.Event())
    assert next(requests).WhichOneof("body") == "start"
    for _ in range(3):  # unit 0's chunks: counted as sent before its last one is taken
        assert next(requests).chunk.seq == 0
        handed += 1
    assert sent == [(0, 2)]
    assert next(requests).chunk.seq == 1
    assert sent == [(0, 2), (1, 3)]


def test_a_unit_handed_over_again_after_a_reconnect_counts_as_resent(tmp_path):
    spool = Spool(tmp_path / "spool", 1 << 20)
    spool.bind(b"header")
    spool.put(0, 1, b"x" * 100)
    spool.put(1, 3, b"end")
    client = StreamClient("127.0.0.1:1", spool)
    first = client._requests("0" * 32, 0, 1024, threading.Event())
    next(first), next(first)  # unit 0 handed to gRPC; the connection breaks before its ack
    again = client._requests("0" * 32, 0, 1024, threading.Event())
    next(again), next(again)
    assert client.stats.units_sent == 2 and client.stats.units_resent == 1
