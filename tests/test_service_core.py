"""The transport-free parts of the service: chunk assembly, spool, pacer, settings, tokens."""

from __future__ import annotations

import hashlib
import zlib
from dataclasses import replace

import pytest

from semcodec.cloud.service.assembler import Chunk, ChunkAssembler
from semcodec.cloud.service.auth import TokenFileError, TokenTable, load_tokens
from semcodec.cloud.service.config import ConfigError, load_settings
from semcodec.cloud.service.errors import ChecksumError, InvalidRequestError
from semcodec.codec.bitstream import SubStream, SubStreamType, Unit, UnitKind
from semcodec.edge.stream.pacer import TokenBucket
from semcodec.edge.stream.spool import Spool, SpoolError


def _unit(seq: int = 0, size: int = 100) -> bytes:
    return Unit(UnitKind.FRAME, seq, (SubStream(SubStreamType.METADATA, b"x" * size),)).to_bytes()


def _chunks(seq: int, data: bytes, size: int, kind: int = 2) -> list[Chunk]:
    digest = hashlib.sha256(data).digest()
    return [Chunk(seq=seq, kind=kind, unit_size=len(data), offset=o, data=data[o : o + size],
                  crc32=zlib.crc32(data[o : o + size]), unit_sha256=digest if o == 0 else b"")
            for o in range(0, len(data), size)]  # fmt: skip


def test_assembler_rebuilds_a_chunked_unit():
    data = _unit(size=1000)
    asm = ChunkAssembler(max_chunk_bytes=64, max_unit_bytes=1 << 20)
    results = [asm.add(c) for c in _chunks(0, data, 64)]
    assert results[:-1] == [None] * (len(results) - 1)
    assert results[-1].data == data and results[-1].unit.seq == 0
    assert asm.pending_seq is None


@pytest.mark.parametrize("damage, error, words", [
    (lambda cs: [replace(cs[0], crc32=cs[0].crc32 ^ 1)] + cs[1:], ChecksumError,
     "CRC32 mismatch"),
    (lambda cs: [replace(cs[0], unit_sha256=b"\0" * 32)] + cs[1:], ChecksumError,
     "sha256 mismatch"),
    (lambda cs: [cs[0], cs[2]], InvalidRequestError, "expected 64"),
    (lambda cs: [replace(c, kind=3) for c in cs], InvalidRequestError, "the unit is FRAME"),
    (lambda cs: [cs[0], replace(cs[1], kind=3)], InvalidRequestError, "kind changed"),
    (lambda cs: [replace(cs[0], kind=9)], InvalidRequestError, "unknown unit kind"),
])  # fmt: skip
def test_assembler_refuses_damaged_or_misplaced_chunks(damage, error, words):
    asm = ChunkAssembler(max_chunk_bytes=64, max_unit_bytes=1 << 20)
    with pytest.raises(error, match=words):  # noqa: PT012
        for chunk in damage(_chunks(0, _unit(size=300), 64)):
            asm.add(chunk)


def test_assembler_refuses_garbage_with_good_checksums_and_oversized_chunks():
    garbage = b"\xa5\x5a" + bytes(range(50))
    asm = ChunkAssembler(max_chunk_bytes=1024, max_unit_bytes=1 << 20)
    with pytest.raises(InvalidRequestError, match="not a valid unit"):
        asm.add(_chunks(0, garbage, 1024)[0])
    with pytest.raises(InvalidRequestError, match="expected 1 to 16"):
        ChunkAssembler(16, 1 << 20).add(_chunks(0, _unit(), 64)[0])
    with pytest.raises(InvalidRequestError, match="unit_size"):
        ChunkAssembler(16, 40).add(_chunks(0, _unit(), 16)[0])


def test_spool_blocks_then_drops_oldest_non_keyframes_and_records_them(tmp_path):
    unit = b"u" * 100
    spool = Spool(tmp_path / "s", max_bytes=350, policy="drop-oldest")
    spool.bind(b"header")
    spool.put(0, 1, unit)  # keyframe: never dropped
    for seq in range(1, 6):
        spool.put(seq, 2, unit)
    assert spool.spooled_bytes <= 350
    assert spool.dropped_count == 3
    lines = (tmp_path / "s" / "dropped.jsonl").read_text().splitlines()
    assert [int(line.split('"seq": ')[1].split(",")[0]) for line in lines] == [1, 2, 3]
    assert spool.get(1).dropped and spool.get(0).data == unit and spool.get(5).data == unit
    # a spool reopened after a restart holds the same units and drops
    again = Spool(tmp_path / "s", max_bytes=350, policy="drop-oldest")
    assert (again.produced, again.dropped_count, again.acked) == (6, 3, 0)
    assert again.get(4).data == unit and again.get(2).dropped
    assert again.put(3, 2, unit) is False  # produced by the earlier run: skipped
    again.ack(5)
    assert again.acked == 5 and sorted(p.name[:12] for p in (tmp_path / "s/units").iterdir()) \
        == ["000000000005"]  # fmt: skip
    with pytest.raises(SpoolError, match="another stream"):
        again.bind(b"another header")


def test_spool_block_policy_waits_for_acknowledgements(tmp_path):
    import threading

    spool = Spool(tmp_path / "s", max_bytes=250, policy="block")
    spool.put(0, 1, b"a" * 100)
    spool.put(1, 2, b"b" * 100)
    done = threading.Event()
    worker = threading.Thread(target=lambda: (spool.put(2, 2, b"c" * 100), done.set()))
    worker.start()
    assert not done.wait(0.3), "the put did not wait for room"
    spool.ack(1)
    assert done.wait(5)
    worker.join()
    assert spool.dropped_count == 0 and spool.spooled_bytes == 200


def test_token_bucket_holds_the_rate():
    now = [0.0]
    bucket = TokenBucket(80_000, burst_bytes=1000, clock=lambda: now[0],
                         sleep=lambda s: now.__setitem__(0, now[0] + s))  # fmt: skip
    sent = 0
    while now[0] < 10:
        bucket.consume(500)
        sent += 500
    # 10 kB/s for 10 s, plus the initial burst
    assert 100_000 <= sent <= 100_000 + 1000 + 500
    assert bucket.consume(50_000) == pytest.approx(50_000 / 10_000, rel=0.05)


def test_settings_come_from_flags_then_environment_then_file(tmp_path):
    config = tmp_path / "serve.toml"
    config.write_text('[serve]\nmax_sessions = 3\ngrace_s = 2.5\nlisten = "0.0.0.0:1"\n'
                      f'out = "{tmp_path}"\n')  # fmt: skip
    env = {"SEMCODEC_SERVE_MAX_SESSIONS": "5", "SEMCODEC_SERVE_OVERVIEW": "false"}
    s = load_settings({"listen": "127.0.0.1:7"}, config, env)
    assert (s.max_sessions, s.grace_s, s.listen, s.overview) == (5, 2.5, "127.0.0.1:7", False)
    with pytest.raises(ConfigError, match="unknown setting"):
        load_settings({}, None, {"SEMCODEC_SERVE_MAX_SESIONS": "1"})
    with pytest.raises(ConfigError, match="out"):
        load_settings({}, None, {})
    with pytest.raises(ConfigError, match="4 MiB"):
        load_settings({"out": tmp_path, "max_chunk_kib": 8192}, None, {})
    with pytest.raises(ConfigError, match="go together"):
        load_settings({"out": tmp_path, "tls_cert": tmp_path}, None, {})


def test_tokens_file_and_constant_time_lookup(tmp_path):
    path = tmp_path / "tokens"
    path.write_text("# token tenant\n" + "a" * 32 + " alpha\n\n" + "b" * 32 + " beta # x\n")
    table = TokenTable(load_tokens(path))
    assert table.tenant("Bearer " + "a" * 32) == "alpha"
    assert table.tenant("Bearer " + "b" * 32) == "beta"
    assert table.tenant("Bearer " + "a" * 31) is None
    assert table.tenant("a" * 32) is None and table.tenant(None) is None
    for text, words in (("short alpha\n", "shorter"), ("a" * 32 + " ../x\n", "tenant"),
                        ("a" * 32 + "\n", "TOKEN TENANT"), ("# none\n", "no tokens")):  # fmt: skip
        path.write_text(text)
        with pytest.raises(TokenFileError, match=words):
            load_tokens(path)


def test_session_log_recovery_cuts_a_torn_tail(tmp_path):
    from semcodec.cloud.service.store import SessionLog
    from semcodec.codec.bitstream import StreamHeader, read_stream

    header = StreamHeader(width=64, height=48, fps_num=25, fps_den=1, level=1, num_frames=0,
                          models=(), settings={"a": "1"})  # fmt: skip
    path = tmp_path / "stream.semc"
    log = SessionLog.create(path, header.to_bytes())
    for seq in range(3):
        log.append(_unit(seq), is_end=False)
    whole = path.read_bytes()
    with open(path, "ab") as fh:  # a crash in the middle of writing unit 3 (never acked)
        fh.write(_unit(3)[:40])
    again = SessionLog.recover(path)
    assert (again.units, again.unit_bytes, again.ended) == (3, 3 * len(_unit(0)), False)
    assert path.read_bytes() == whole
    again.append(_unit(3), is_end=False)
    assert [u.seq for u in read_stream(path)[1]] == [0, 1, 2, 3]


def test_rate_limiter_lets_a_chunk_through_and_makes_the_next_wait():
    from semcodec.cloud.service.limits import RateLimiter

    now = [0.0]
    limiter = RateLimiter(1000, 500, clock=lambda: now[0])
    assert limiter.take(400) == 0.0  # within the burst
    assert limiter.take(600) == pytest.approx(0.5)  # 500 B of debt: half a second
    now[0] = 0.5
    assert limiter.take(0) == 0.0
    assert limiter.take(2000) == pytest.approx(2.0)  # larger than the bucket: still taken
    now[0] = 10.0
    assert limiter.take(0) == 0.0 and limiter.take(500) == 0.0  # refills to the burst only
    assert limiter.take(1) == pytest.approx(0.001)
    with pytest.raises(ValueError):
        RateLimiter(0, 10)
    with pytest.raises(ConfigError, match="max_session_kbps"):
        load_settings({"out": "x", "max_session_kbps": -1}, environ={})


def test_spool_stream_key_is_made_once_and_sent_for_affinity(tmp_path):
    from semcodec.edge.stream.client import AFFINITY_HEADER, ChannelSecurity, StreamClient

    spool = Spool(tmp_path / "spool", 1 << 20)
    assert spool.stream_key == ""
    spool.bind(b"header")
    key = spool.stream_key
    assert len(key) == 32
    again = Spool(tmp_path / "spool", 1 << 20)  # a restarted agent: the same key
    again.bind(b"header")
    assert again.stream_key == key
    client = StreamClient("127.0.0.1:9", again, ChannelSecurity(token="t"))
    assert client.metadata() == (("authorization", "Bearer t"), (AFFINITY_HEADER, key))


# ------------------------------------------------------------------------------ agent restarts
# (issue 13: a restarted agent that never finished, though the cloud stored every unit)


class _Killed(BaseException):
    """Stands for a SIGKILL at one point of the agent."""


def _spool_killed_before_it_recorded_the_end(folder, units: list[tuple[int, bytes]]) -> None:
    """Leaves ``folder`` as an agent SIGKILLed between spooling the END unit (its file is in
    place) and recording ``done`` in state.json -- the state a CI run's hang was left in."""
    spool = Spool(folder, 1 << 20)
    spool.bind(b"header")
    for seq, (kind, data) in enumerate(units[:-1]):
        spool.put(seq, kind, data)

    def killed() -> None:
        raise _Killed

    spool._save_state = killed
    with pytest.raises(_Killed):
        spool.put(len(units) - 1, *units[-1])
    assert '"done": false' in (folder / "state.json").read_text()


def test_spool_of_an_agent_killed_before_it_recorded_the_end_still_finishes(tmp_path):
    from semcodec.edge.stream.spool import END_KIND

    units = [(1, b"k" * 50), (2, b"a" * 20), (2, b"b" * 20), (END_KIND, b"e" * 5)]
    _spool_killed_before_it_recorded_the_end(tmp_path / "s", units)
    again = Spool(tmp_path / "s", 1 << 20)  # the restarted agent
    again.bind(b"header")
    assert again.done and again.produced == 4 and again.get(3).data == b"e" * 5
    # its producer encodes the same units again: all are skipped as already spooled
    assert [again.put(seq, kind, data) for seq, (kind, data) in enumerate(units)] == [False] * 4
    again.ack(4)  # the cloud stored every unit
    assert again.finished(), "the client would wait for a unit after END, for ever"
    # the END unit's file alone is enough, whichever run reopens the spool
    assert Spool(tmp_path / "s", 1 << 20).finished()


def test_spool_put_of_an_already_spooled_end_records_the_end(tmp_path):
    from semcodec.edge.stream.spool import END_KIND

    spool = Spool(tmp_path / "s", 1 << 20)
    spool.put(0, 1, b"k")
    spool.put(1, END_KIND, b"e")
    spool.state["done"] = False  # as if the record were lost
    assert spool.put(1, END_KIND, b"e") is False and spool.done


def test_requests_go_on_after_units_acknowledged_before_they_were_sent(tmp_path):
    """A resumed stream's first ack can be past where it started (the killed connection's
    last unit was stored after OpenSession read the resume point): the requests go on after
    it instead of asking the spool for the acknowledged unit for ever (a busy loop that sent
    nothing while the cloud waited)."""
    import threading

    from semcodec.edge.stream.client import StreamClient

    spool = Spool(tmp_path / "s", 1 << 20)
    spool.bind(b"header")
    for seq in range(4):
        spool.put(seq, 2, _unit(seq))
    client = StreamClient("127.0.0.1:9", spool, chunk_bytes=1 << 20)
    stop = threading.Event()
    requests = client._requests("0" * 32, 1, 1 << 20, stop)  # resumed at 1 ...
    assert next(requests).WhichOneof("body") == "start"
    spool.ack(2)  # ... and the stream's first ack says 2
    got: list = []
    reader = threading.Thread(target=lambda: got.append(next(requests, None)), daemon=True)
    reader.start()
    reader.join(5)
    stop.set()  # ends a spinning generator (before the fix) at its next turn
    reader.join(5)
    assert got and got[0] is not None, "no request: the generator spun on the acked unit"
    assert got[0].chunk.seq == 2


def test_close_waits_a_bounded_time():
    from semcodec.cloud.service.limits import MAX_CLOSE_WAIT_S, close_wait_s

    assert close_wait_s(0, 120) == 120 and close_wait_s(5, 120) == 5
    for bad in (-1.0, float("nan"), float("inf")):
        assert close_wait_s(bad, 120) == 120
    assert close_wait_s(1e9, 120) == MAX_CLOSE_WAIT_S


def test_ids_with_a_trailing_newline_are_refused():
    """``$`` matches before a trailing newline: tenants and session ids are matched whole."""
    from semcodec.cloud.service.errors import SessionNotFoundError
    from semcodec.cloud.service.manager import _check_ids
    from semcodec.cloud.service.messages import check_tenant

    assert check_tenant("tenant-a") == "tenant-a"
    with pytest.raises(ValueError):
        check_tenant("tenant-a\n")
    _check_ids("a", "0" * 32)
    with pytest.raises(SessionNotFoundError):
        _check_ids("a", "0" * 32 + "\n")
