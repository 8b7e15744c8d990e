"""Per-tenant quotas, idle sessions put to rest, retention, bounded markers, the progress
rule and capped messages, in the transport-free session core (issue 25); the same over
real gRPC is tests/test_service_abuse.py."""

from __future__ import annotations

import dataclasses
import hashlib
import os
import stat
import time
import zlib

import pytest

from semcodec.cloud.service.assembler import AssembledUnit, Chunk
from semcodec.cloud.service.config import ServeSettings
from semcodec.cloud.service.errors import (
    CapacityError,
    ProgressTimeoutError,
    QuotaError,
    SessionNotFoundError,
    brief,
)
from semcodec.cloud.service.limits import ServiceLimits
from semcodec.cloud.service.manager import SessionManager
from semcodec.cloud.service.messages import OpenRequest
from semcodec.cloud.service.servicer import Progress
from semcodec.cloud.service.store import DROPPED_NAME, RECORD_NAME
from semcodec.codec.bitstream import read_stream


def _manager(tmp_path, **limits) -> SessionManager:
    """A manager under the default serve settings' limits, ``limits`` (core units) changed."""
    # codec.core.registry loads its built-ins on first use without a lock: decoder threads that
    # race to it can leave it empty ("unknown reconstructor 'warp'; available: "), so load it
    # here first, as DecoderServer does
    from semcodec.codec.reconstruct import available_reconstructors

    assert "warp" in available_reconstructors()
    defaults = ServiceLimits.of(ServeSettings(out=tmp_path / "out"))
    return SessionManager(tmp_path / "out", dataclasses.replace(defaults, **limits))


def _open(manager, semc, tenant="a") -> str:
    header = read_stream(semc)[0].to_bytes()
    return manager.open(tenant, OpenRequest(header=header)).session_id


def _units(semc):
    return [AssembledUnit(i, u.to_bytes(), u, 0) for i, u in enumerate(read_stream(semc)[1])]


def test_a_tenant_over_its_session_quota_is_refused_naming_it_others_are_not(tmp_path, semc):
    manager = _manager(tmp_path, max_sessions=4, tenant_max_sessions=2)
    try:
        _open(manager, semc, "a"), _open(manager, semc, "a")
        with pytest.raises(QuotaError, match="tenant a holds 2 sessions.*tenant_max_sessions"):
            _open(manager, semc, "a")
        _open(manager, semc, "b"), _open(manager, semc, "b")  # b is unaffected
        with pytest.raises(CapacityError, match="--max-sessions"):
            _open(manager, semc, "c")  # the server's own limit still holds
    finally:
        manager.shutdown(5)


def test_stream_and_storage_quotas(tmp_path, semc):
    manager = _manager(tmp_path, tenant_max_streams=1,
                       tenant_max_stored_bytes=read_stream(semc)[0].to_bytes().__len__() + 50)
    try:
        usage = manager.tenant("a")
        usage.open_stream()
        with pytest.raises(QuotaError, match="tenant_max_streams"):
            usage.open_stream()
        usage.close_stream()
        usage.open_stream()  # a stream that ended gives its place back
        sid = _open(manager, semc)
        receiver = manager.attach("a", sid)
        unit = _units(semc)[0]
        chunk = Chunk(seq=0, kind=int(unit.unit.kind), unit_size=len(unit.data), offset=0,
                      data=unit.data, crc32=zlib.crc32(unit.data),
                      unit_sha256=hashlib.sha256(unit.data).digest())  # fmt: skip
        with pytest.raises(QuotaError, match="tenant_max_stored_bytes"):
            receiver.take(chunk)  # refused before a byte of it is read
        assert receiver.session.next_seq == 0
    finally:
        manager.shutdown(5)


def test_idle_sessions_rest_resume_from_disk_and_expire_after_retention(tmp_path, semc):
    manager = _manager(tmp_path, session_idle_s=0.2, retain_s=300)
    try:
        sid = _open(manager, semc)
        receiver = manager.attach("a", sid)
        receiver.session.store(_units(semc)[0], receiver.generation)
        assert manager.reap() == []  # a stream is attached: not idle
        receiver.detach()
        deadline = time.monotonic() + 120  # the decoder catches up, then it idles
        while not manager.reap() and time.monotonic() < deadline:
            time.sleep(0.1)
        assert manager.active == 0
        # resumable: the log stays, the edge goes on from where it was
        header = read_stream(semc)[0].to_bytes()
        opened = manager.open("a", OpenRequest(header=header, session_id=sid))
        assert opened.resumed and opened.next_seq == 1 and manager.active == 1
        deadline = time.monotonic() + 120
        while not manager.reap() and time.monotonic() < deadline:
            time.sleep(0.1)
        state_dir = tmp_path / "out" / ".sessions" / "a" / sid
        assert manager.sweep(time.time()) == []  # kept within retain_s
        assert manager.sweep(time.time() + 600) == [state_dir]
        assert not state_dir.exists()
        with pytest.raises(SessionNotFoundError):
            manager.open("a", OpenRequest(header=header, session_id=sid))
    finally:
        manager.shutdown(5)


def test_markers_are_appended_not_rewritten_and_bounded(tmp_path, semc):
    manager = _manager(tmp_path, max_markers=2)
    try:
        sid = _open(manager, semc)
        receiver = manager.attach("a", sid)
        session = receiver.session
        record_before = (session.state_dir / RECORD_NAME).stat().st_mtime_ns
        for seq in (0, 1):
            receiver.take(Chunk(seq=seq, kind=2, dropped=True))
        with pytest.raises(QuotaError, match="2 dropped markers"):
            receiver.take(Chunk(seq=2, kind=2, dropped=True))
        assert (session.state_dir / DROPPED_NAME).read_text() == "0\n1\n"
        assert (session.state_dir / RECORD_NAME).stat().st_mtime_ns == record_before
        assert manager.results("a", sid).dropped == [0, 1]
        mode = stat.S_IMODE(os.stat(session.state_dir / DROPPED_NAME).st_mode)
        assert mode == 0o600 and stat.S_IMODE(session.state_dir.stat().st_mode) == 0o700
    finally:
        manager.shutdown(5)


def test_a_trickling_unit_fails_the_progress_rule_a_slow_link_does_not():
    now = [0.0]
    progress = Progress(30.0, 1024, clock=lambda: now[0])
    for _ in range(30):  # 1 byte a second
        now[0] += 1.0
        if now[0] < 30:
            progress.add(1)
    with pytest.raises(ProgressTimeoutError, match="30 bytes of a unit in 30 s"):
        progress.add(1)
    slow = Progress(30.0, 1024, clock=lambda: now[0])  # 1 kbit/s, 1-KiB chunks every 8 s
    for _ in range(8):
        now[0] += 8.192
        slow.add(1024)


def test_long_inputs_are_cut_and_hashed_in_messages(tmp_path):
    manager = _manager(tmp_path)
    with pytest.raises(SessionNotFoundError) as caught:
        manager.results("a", "x" * 4_000_000)
    assert len(str(caught.value)) < 120 and "4000002 chars, sha256" in str(caught.value)
    assert brief("y" * 10) == "y" * 10
    assert brief("a" * 5000) != brief("a" * 4999 + "b") and len(brief("a" * 5000)) <= 1024


def test_the_tokens_file_sets_a_tenants_own_quotas(tmp_path, semc):
    from semcodec.cloud.service.auth import TokenFileError, load_token_file

    path = tmp_path / "tokens"
    path.write_text("alpha-token-0123456789 a max_sessions=1,max_kbps=8\n"
                    "alpha-token-9876543210 a max_sessions=1,max_kbps=8\n"
                    "beta-token-0123456789ab b\n")  # fmt: skip
    tokens, quotas = load_token_file(path)
    assert set(tokens.values()) == {"a", "b"} and quotas == {"a": {"max_sessions": 1.0,
                                                                   "max_kbps": 8.0}}
    _manager(tmp_path)  # the registry loaded
    manager = limits = ServiceLimits.of(ServeSettings(out=tmp_path / "out", tenant_max_sessions=3))
    manager = SessionManager(tmp_path / "out", limits,
                             tenant_quotas=quotas)  # fmt: skip
    try:
        _open(manager, semc, "a")
        with pytest.raises(QuotaError, match="tenant a holds 1 sessions"):
            _open(manager, semc, "a")
        for _ in range(3):  # b has the server's quota
            _open(manager, semc, "b")
        with pytest.raises(QuotaError, match="tenant b holds 3 sessions"):
            _open(manager, semc, "b")
        assert manager.tenant("a").throttle_delay(4096) == 0  # 8 kbit/s: 1000 B/s, 4 KiB burst
        assert manager.tenant("a").throttle_delay(2000) > 1.5
        assert manager.tenant("b").throttle_delay(10**6) == 0
    finally:
        manager.shutdown(5)
    for bad, why in (("max_session=1", "expected NAME=VALUE"), ("max_kbps=x", "not a number"),
                     ("max_kbps=-1", "0 \\(none\\) or more")):  # fmt: skip
        path.write_text(f"alpha-token-0123456789 a {bad}\n")
        with pytest.raises(TokenFileError, match=why):
            load_token_file(path)
    path.write_text("alpha-token-0123456789 a max_sessions=1\n"
                    "alpha-token-9876543210 a max_sessions=2\n")  # fmt: skip
    with pytest.raises(TokenFileError, match="differ"):
        load_token_file(path)


def test_decode_slots_are_handed_out_first_come_first_served():
    import threading

    from semcodec.cloud.service.decode import FairSlots

    slots, order, started = FairSlots(1), [], threading.Barrier(2)
    gate = threading.Event()

    def hog() -> None:  # takes the slot, and goes straight back for it after each "frame"
        for _ in range(3):
            with slots:
                order.append("hog")
                if len(order) == 1:
                    started.wait()
                    gate.wait(5)

    def other() -> None:
        started.wait()
        threading.Timer(0.2, gate.set).start()  # queued before the hog releases
        with slots:
            order.append("other")

    threads = [threading.Thread(target=hog), threading.Thread(target=other)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(10)
    assert order[:2] == ["hog", "other"], order  # a plain semaphore: hog, hog, hog, other
