"""The edge's side of ``cloud-decoder loadtest``: a process that runs many real streams.

``python tools/loadtest/loadgen.py streams ...`` runs ``--count`` streams in threads,
each a :class:`~edge.stream.client.StreamClient` (as ``edge-agent stream`` runs it) sending a
``.semc`` file's units at ``--fps``, session after session until the deadline, and writes
each stream's record (acknowledgement latencies, sessions, errors) as JSON. ``... sample
--out FILE`` encodes the embedded sample (``edge-agent encode``). The load test
(``loadtest.py`` beside it) starts these processes. Like it, this is a client for testing
the service, kept out of the installed package (``tools/`` is in no wheel).

An acknowledgement is timed from the moment the unit's last chunk is handed to gRPC
(:meth:`StreamClient._sent`) until the acknowledgement that covers it is read.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys
import tempfile
import threading
import time
from pathlib import Path

from semcodec.codec.bitstream import read_stream
from semcodec.edge.stream.client import ChannelSecurity, StreamClient, StreamError
from semcodec.edge.stream.spool import Spool


def run_stream(index: int, target: str, semc: Path, begin: float, deadline: float, fps: float,
               spool_root: Path, token: str | None = None) -> dict:  # fmt: skip
    """One stream: from ``begin``, sessions of the whole bitstream one after the other
    until ``deadline`` (the last one is finished at once after it); returns its record
    (``ack_ms``: each unit's acknowledgement latency, milliseconds)."""
    class TimedClient(StreamClient):
        """Records when each unit's last chunk went to gRPC and when it was acknowledged."""

        def __init__(self, *args, **kwargs) -> None:
            super().__init__(*args, **kwargs)
            self.sent_at: dict[int, float] = {}
            self.lock = threading.Lock()

        def _sent(self, unit) -> None:
            with self.lock:
                self.sent_at[unit.seq] = time.monotonic()
            super()._sent(unit)

        def _acked(self, next_seq, feedback=None) -> None:
            now = time.monotonic()
            with self.lock:
                for seq in [s for s in self.sent_at if s < next_seq]:
                    sent = self.sent_at.pop(seq)
                    if sent < deadline:  # the rest of a session, sent at once after: not
                        record["ack_ms"].append(1000 * (now - sent))
                        record["ack_at"].append((session, seq, round(sent - begin, 3)))
                    record["units_acked"] += 1
            super()._acked(next_seq, feedback)

    header, units = read_stream(semc)
    units = [(u.seq, int(u.kind), u.to_bytes()) for u in units]
    header_bytes = header.to_bytes()
    record = {"stream": index, "sessions": 0, "complete": 0, "units_acked": 0, "ack_ms": [],
              "ack_at": [], "errors": []}  # fmt: skip
    session = 0
    time.sleep(max(0.0, begin - time.monotonic()))
    while time.monotonic() < deadline:
        spool = Spool(spool_root / f"stream{index}-{session}", 64 << 20)
        spool.bind(header_bytes)
        client = TimedClient(target, spool, ChannelSecurity(token=token), chunk_bytes=64 << 10,
                             max_outage_s=60)  # fmt: skip

        def feed(spool=spool) -> None:
            at = time.monotonic()
            for seq, kind, data in units:
                if time.monotonic() < deadline:  # after it: the rest at once
                    time.sleep(max(0.0, at - time.monotonic()))
                spool.put(seq, kind, data)
                at += 1.0 / fps

        feeder = threading.Thread(target=feed, daemon=True)
        feeder.start()
        try:
            results = client.run()
            record["complete"] += int(results.complete and results.units_stored == len(units))
        except (StreamError, OSError) as exc:
            record["errors"].append(str(exc))
            spool.fail(exc)
        feeder.join()
        record["sessions"] += 1
        session += 1
    return record


def streams_main(argv: list[str]) -> int:
    """A client process: runs its streams in threads, writes their records as JSON."""
    parser = argparse.ArgumentParser(prog="loadgen streams")
    parser.add_argument("--target", required=True)
    parser.add_argument("--semc", type=Path, required=True)
    parser.add_argument("--first", type=int, required=True)
    parser.add_argument("--count", type=int, required=True)
    parser.add_argument("--start", type=float, required=True, help="time.monotonic() to start")
    parser.add_argument("--seconds", type=float, required=True)
    parser.add_argument("--ramp", type=float, required=True)
    parser.add_argument("--streams", type=int, required=True, help="of all workers")
    parser.add_argument("--fps", type=float, required=True)
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args(argv)
    records: list[dict] = []
    time.sleep(max(0.0, args.start - time.monotonic()))
    deadline = args.start + args.seconds
    with tempfile.TemporaryDirectory(prefix="semcodec-load-") as spool_root:

        def run(index: int) -> None:
            try:
                begin = args.start + args.ramp * index / args.streams
                records.append(run_stream(index, args.target, args.semc, begin, deadline,
                                            args.fps, Path(spool_root)))  # fmt: skip
            except Exception as exc:  # recorded: the summary counts it as an error
                records.append({"stream": index, "sessions": 0, "complete": 0,
                                "units_acked": 0, "ack_ms": [],
                                "errors": [f"{type(exc).__name__}: {exc}"]})  # fmt: skip

        threads = [threading.Thread(target=run, args=(args.first + i,))
                   for i in range(args.count)]  # fmt: skip
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
    args.out.write_text(json.dumps(records))
    return 0


def sample_main(argv: list[str]) -> int:
    """Encodes the embedded sample at level 1 into ``--out`` (as ``edge-agent encode SAMPLE
    --level 1`` does)."""
    from semcodec.codec.core.sources import open_source, sample_path
    from semcodec.codec.scaffold.codec import encode_to_file
    from semcodec.codec.scaffold.levels import LEVELS

    parser = argparse.ArgumentParser(prog="loadgen sample")
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--frames", type=int)
    args = parser.parse_args(argv)
    source = open_source(sample_path())
    info = source.info
    total = min(args.frames or info.num_frames, info.num_frames)
    frames = (f.rgb for f in source.frames(count=total))
    encode_to_file(args.out, frames, LEVELS[1], info.fps, (info.width, info.height), total)
    return 0


def main(argv: list[str]) -> int:
    commands = {"streams": streams_main, "sample": sample_main}
    if not argv or argv[0] not in commands:
        print(f"usage: python tools/loadtest/loadgen.py {{{','.join(commands)}}} ...",
              file=sys.stderr)  # fmt: skip
        return 2
    return commands[argv[0]](argv[1:])


if __name__ == "__main__":
    logging.basicConfig(level=logging.WARNING)
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    sys.exit(main(sys.argv[1:]))
