"""cloud-decoder serve and edge-agent stream over real gRPC on 127.0.0.1 (ephemeral ports),
with a real 3-frame stream of the embedded sample."""

from __future__ import annotations

import datetime
import ipaddress
import os
import signal
import subprocess
import sys
import threading
import time
import urllib.request
from pathlib import Path

import grpc
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc

from semcodec.cloud.cli import main as cloud_main
from semcodec.codec.bitstream import (
    ModelEntry,
    StreamHeader,
    SubStream,
    SubStreamType,
    Unit,
    read_stream,
    write_stream,
)
from semcodec.edge.cli import main as edge_main
from semcodec.edge.stream.client import (
    ChannelSecurity,
    StreamClient,
    StreamError,
    open_request,
    unit_chunks,
)
from semcodec.edge.stream.pacer import TokenBucket
from semcodec.edge.stream.spool import Spool, SpooledUnit
from semcodec.protos import semcodec_v1_pb2 as pb
from semcodec.protos import semcodec_v1_pb2_grpc as pb_grpc

from .conftest import (
    ENCODE_ARGS,
    TOKEN_A,
    TOKEN_B,
    assert_same_tree,
    code_of,
    fill,
    free_port,
    session_paths,
    spool_of,
    start_server,
    stub_for,
    wait_serving,
)

# ------------------------------------------------------------------------------ end to end


def test_streamed_session_equals_offline_decode(server, semc, offline, tmp_path):
    client = StreamClient(f"127.0.0.1:{server.port}", spool_of(semc, tmp_path / "spool"),
                          chunk_bytes=1024)  # fmt: skip
    results = client.run()
    assert (results.state, results.complete, results.frames_decoded) == (
        pb.SESSION_STATE_CLOSED, True, 3)
    assert client.stats.units_acked == 4 and client.stats.units_resent == 0
    log, outputs = session_paths(server.settings.out, "default", results.session_id)
    assert log.read_bytes() == semc.read_bytes()  # every unit exactly once, in order
    assert_same_tree(outputs, offline)
    assert results.output_dir == f"default/{results.session_id}"
    metrics = urllib.request.urlopen(f"http://127.0.0.1:{server.metrics_port}/metrics").read()
    text = metrics.decode()
    assert "semcodec_units_stored_total 4.0" in text
    assert 'semcodec_sessions_closed_total{state="closed"} 1.0' in text
    assert "semcodec_decode_seconds_count 4.0" in text and "semcodec_backlog_units 0.0" in text
    channel = grpc.insecure_channel(f"127.0.0.1:{server.port}")
    health = health_pb2_grpc.HealthStub(channel)
    assert health.Check(health_pb2.HealthCheckRequest(service="semcodec.v1.SemanticStream"),
                        timeout=5).status == health_pb2.HealthCheckResponse.SERVING  # fmt: skip
    from grpc_reflection.v1alpha.proto_reflection_descriptor_database import (
        ProtoReflectionDescriptorDatabase,
    )

    services = ProtoReflectionDescriptorDatabase(channel).get_services()
    assert "semcodec.v1.SemanticStream" in services and "grpc.health.v1.Health" in services
    channel.close()


def test_edge_agent_stream_encodes_paces_and_summarises(server, semc, sample_dir, tmp_path,
                                                        capsys):  # fmt: skip
    spool = tmp_path / "spool"
    argv = ["stream", str(sample_dir), "--server", f"127.0.0.1:{server.port}", *ENCODE_ARGS,
            "--bandwidth-kbps", "400", "--spool", str(spool), "--chunk-kib", "1"]  # fmt: skip
    start = time.monotonic()
    assert edge_main(argv) == 0
    assert time.monotonic() - start >= 8 * semc.stat().st_size / 400_000 * 0.5
    summary = [line for line in capsys.readouterr().err.splitlines() if "units sent" in line]
    assert summary and "units sent 4, acknowledged 4, resent 0, dropped by policy 0" in summary[0]
    (session,) = (server.settings.out / ".sessions" / "default").iterdir()
    assert (session / "stream.semc").read_bytes() == semc.read_bytes()  # same bytes as encode
    assert list((spool / "units").iterdir()) == []  # everything acknowledged


def test_a_ten_mib_unit_is_chunked_and_round_trips(server, semc, tmp_path):
    header, units = read_stream(semc)
    units = list(units)
    big = os.urandom(10 << 20)
    units[1] = Unit(units[1].kind, units[1].seq,
                    units[1].substreams + (SubStream(SubStreamType.METADATA, big),))  # fmt: skip
    path = tmp_path / "big.semc"
    write_stream(path, header, units)
    client = StreamClient(f"127.0.0.1:{server.port}", spool_of(path, tmp_path / "spool"),
                          chunk_bytes=4 << 20)  # more than the server's 1 MiB: capped  # fmt: skip
    results = client.run()
    assert results.complete and results.frames_decoded == 3
    log, outputs = session_paths(server.settings.out, "default", results.session_id)
    assert log.read_bytes() == path.read_bytes()
    offline = tmp_path / "offline"
    assert cloud_main(["-q", "decode", str(path), "-o", str(offline)]) == 0
    assert_same_tree(outputs, offline)


# ------------------------------------------------------------------------------ bad input


def test_bad_input_gets_a_clear_status_and_the_session_stays_usable(server, semc, offline,
                                                                     tmp_path):  # fmt: skip
    target = f"127.0.0.1:{server.port}"
    header, units = read_stream(semc)
    units = [u.to_bytes() for u in units]
    channel, stub = stub_for(target)
    bad_version = open_request(header.to_bytes())
    bad_version.protocol_version = 2
    assert code_of(lambda: stub.OpenSession(bad_version))[0] == grpc.StatusCode.UNIMPLEMENTED
    garbage = open_request(header.to_bytes())
    garbage.stream_header = b"SEMC\x02garbage"
    assert code_of(lambda: stub.OpenSession(garbage))[0] == grpc.StatusCode.INVALID_ARGUMENT
    lying = open_request(header.to_bytes())
    lying.width += 1
    code, details = code_of(lambda: stub.OpenSession(lying))
    assert code == grpc.StatusCode.INVALID_ARGUMENT and "width" in details
    needs = StreamHeader(**{**{f: getattr(header, f) for f in (
        "width", "height", "fps_num", "fps_den", "level", "num_frames", "settings")},
        "models": header.models + (ModelEntry("made_up_model", "ab" * 32),)})  # fmt: skip
    code, details = code_of(lambda: stub.OpenSession(open_request(needs.to_bytes())))
    assert code == grpc.StatusCode.FAILED_PRECONDITION and "made_up_model" in details

    sid = stub.OpenSession(open_request(header.to_bytes())).session_id
    start = pb.StreamRequest(start=pb.StreamStart(session_id=sid))

    def send(*messages):
        return list(stub.StreamUnits(iter([start, *messages]), timeout=10))

    def unit_msgs(seq, size=1 << 20):
        kind = Unit.from_bytes(units[seq], seq=seq).kind
        return list(unit_chunks(SpooledUnit(seq, int(kind), 0, units[seq]), size))

    damaged = unit_msgs(0, 512)
    damaged[1].chunk.crc32 ^= 1
    code, details = code_of(lambda: send(*damaged))
    assert code == grpc.StatusCode.DATA_LOSS and "CRC32 mismatch" in details
    wrong_sha = unit_msgs(0)
    wrong_sha[0].chunk.unit_sha256 = b"\1" * 32
    assert code_of(lambda: send(*wrong_sha))[0] == grpc.StatusCode.DATA_LOSS
    junk = list(unit_chunks(SpooledUnit(0, 1, 0, b"\xa5\x5a" + os.urandom(200)), 1 << 20))
    code, details = code_of(lambda: send(*junk))
    assert code == grpc.StatusCode.INVALID_ARGUMENT and "not a valid unit" in details
    assert code_of(lambda: send(*unit_msgs(1)))[0] == grpc.StatusCode.OUT_OF_RANGE
    oversized = list(unit_chunks(SpooledUnit(0, 1, 0, b"x" * (2 << 20)), 2 << 20))
    assert code_of(lambda: send(*oversized))[0] == grpc.StatusCode.INVALID_ARGUMENT
    too_big = list(unit_chunks(SpooledUnit(0, 1, 0, b"x" * (5 << 20)), 5 << 20))
    assert code_of(lambda: send(*too_big))[0] == grpc.StatusCode.RESOURCE_EXHAUSTED
    code, _ = code_of(lambda: list(stub.StreamUnits(iter(unit_msgs(0)), timeout=10)))
    assert code == grpc.StatusCode.INVALID_ARGUMENT
    assert stub.GetResults(pb.GetResultsRequest(session_id=sid)).units_stored == 0  # none kept

    replies = send(*unit_msgs(0))
    assert replies[-1].ack.next_seq == 1
    code, details = code_of(lambda: send(*unit_msgs(0)))
    assert code == grpc.StatusCode.ALREADY_EXISTS and "resume from 1" in details
    channel.close()
    # the edge resumes the same session from unit 1 and it decodes like the file
    spool = spool_of(semc, tmp_path / "spool")
    spool.set_session(sid)
    results = StreamClient(target, spool).run()
    assert results.complete and results.session_id == sid
    log, outputs = session_paths(server.settings.out, "default", sid)
    assert log.read_bytes() == semc.read_bytes()
    assert_same_tree(outputs, offline)


def test_max_sessions_answers_resource_exhausted(tmp_path, semc):
    srv = start_server(tmp_path, max_sessions=1)
    try:
        channel, stub = stub_for(f"127.0.0.1:{srv.port}")
        request = open_request(read_stream(semc)[0].to_bytes())
        stub.OpenSession(request)
        code, details = code_of(lambda: stub.OpenSession(request))
        assert code == grpc.StatusCode.RESOURCE_EXHAUSTED and "limit" in details
        channel.close()
    finally:
        srv.stop(0)


# ------------------------------------------------------------------------------ security


def test_tokens_tenants_and_isolation(tmp_path, semc):
    tokens = tmp_path / "tokens"
    tokens.write_text(f"{TOKEN_A} alpha\n{TOKEN_B} beta\n")
    srv = start_server(tmp_path, tokens=tokens)
    target = f"127.0.0.1:{srv.port}"
    try:
        request = open_request(read_stream(semc)[0].to_bytes())
        for token in (None, "not-a-known-token-at-all", TOKEN_A + "x"):
            channel, stub = stub_for(target, ChannelSecurity(token=token))
            code, _ = code_of(lambda stub=stub: stub.OpenSession(request))
            assert code == grpc.StatusCode.UNAUTHENTICATED
            channel.close()
        channel, _ = stub_for(target)  # health stays open for load balancers
        assert health_pb2_grpc.HealthStub(channel).Check(health_pb2.HealthCheckRequest(),
                                                         timeout=5).status == 1  # fmt: skip
        channel.close()
        results = StreamClient(target, spool_of(semc, tmp_path / "a"),
                               ChannelSecurity(token=TOKEN_A)).run()  # fmt: skip
        assert results.complete and results.output_dir.startswith("alpha/")
        assert (srv.settings.out / results.output_dir / "stream.json").is_file()
        channel, beta = stub_for(target, ChannelSecurity(token=TOKEN_B))
        sid = results.session_id
        resume = open_request(read_stream(semc)[0].to_bytes(), sid)
        for call in (lambda: beta.OpenSession(resume),
                     lambda: beta.GetResults(pb.GetResultsRequest(session_id=sid)),
                     lambda: list(beta.StreamUnits(iter([pb.StreamRequest(
                         start=pb.StreamStart(session_id=sid))]))),
                     lambda: beta.CloseSession(pb.CloseSessionRequest(
                         session_id=sid))):  # fmt: skip
            assert code_of(call)[0] == grpc.StatusCode.NOT_FOUND
        channel.close()
        with pytest.raises(StreamError, match="UNAUTHENTICATED"):
            StreamClient(target, spool_of(semc, tmp_path / "b")).run()
    finally:
        srv.stop(0)


def _certificates(folder: Path) -> dict[str, Path]:
    """A throwaway CA, a server certificate for 127.0.0.1 and a client certificate (PEM)."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

    now = datetime.datetime.now(datetime.UTC)

    def make(name, issuer_key=None, issuer_name=None, ca=False, usage=None, san=None):
        key = ec.generate_private_key(ec.SECP256R1())
        subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)])
        builder = (x509.CertificateBuilder().subject_name(subject)
                   .issuer_name(issuer_name or subject).public_key(key.public_key())
                   .serial_number(x509.random_serial_number())
                   .not_valid_before(now - datetime.timedelta(minutes=5))
                   .not_valid_after(now + datetime.timedelta(days=1))
                   .add_extension(x509.BasicConstraints(ca=ca, path_length=None),
                                  True))  # fmt: skip
        if usage:
            builder = builder.add_extension(x509.ExtendedKeyUsage([usage]), False)
        if san:
            builder = builder.add_extension(x509.SubjectAlternativeName(san), False)
        cert = builder.sign(issuer_key or key, hashes.SHA256())
        return key, cert

    ca_key, ca = make("semcodec test CA", ca=True)
    san = [x509.DNSName("localhost"), x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]
    server_key, server = make("127.0.0.1", ca_key, ca.subject,
                              usage=ExtendedKeyUsageOID.SERVER_AUTH, san=san)  # fmt: skip
    client_key, client = make("edge-1", ca_key, ca.subject,
                              usage=ExtendedKeyUsageOID.CLIENT_AUTH)  # fmt: skip
    files = {}
    for name, obj in (("ca", ca), ("server", server), ("client", client)):
        files[name] = folder / f"{name}.pem"
        files[name].write_bytes(obj.public_bytes(serialization.Encoding.PEM))
    for name, key in (("server_key", server_key), ("client_key", client_key)):
        files[name] = folder / f"{name}.pem"
        files[name].write_bytes(key.private_bytes(serialization.Encoding.PEM,
                                                  serialization.PrivateFormat.PKCS8,
                                                  serialization.NoEncryption()))  # fmt: skip
    return files


def test_tls_and_mutual_tls(tmp_path, semc, offline):
    certs = _certificates(tmp_path)
    request = open_request(read_stream(semc)[0].to_bytes())
    tokens = tmp_path / "tokens"
    tokens.write_text(f"{TOKEN_A} alpha\n")
    tls = start_server(tmp_path / "tls", tls_cert=certs["server"], tls_key=certs["server_key"])
    try:
        channel, stub = stub_for(f"127.0.0.1:{tls.port}", ChannelSecurity(ca=certs["ca"]))
        assert stub.OpenSession(request, timeout=10).session_id
        channel.close()
        channel, plain = stub_for(f"127.0.0.1:{tls.port}")
        assert code_of(lambda: plain.OpenSession(request, timeout=2))[0] in (
            grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED)
        channel.close()
    finally:
        tls.stop(0)
    mtls = start_server(tmp_path / "mtls", tls_cert=certs["server"], tls_key=certs["server_key"],
                        client_ca=certs["ca"], tokens=tokens)  # fmt: skip
    target = f"localhost:{mtls.port}"
    try:
        no_cert = ChannelSecurity(ca=certs["ca"], token=TOKEN_A)
        channel, stub = stub_for(target, no_cert)
        assert code_of(lambda: stub.OpenSession(request, timeout=3))[0] in (
            grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED)
        channel.close()
        security = ChannelSecurity(certs["ca"], certs["client"], certs["client_key"], TOKEN_A)
        results = StreamClient(target, spool_of(semc, tmp_path / "spool"), security).run()
        assert results.complete
        assert_same_tree(mtls.settings.out / results.output_dir, offline)
    finally:
        mtls.stop(0)


# ------------------------------------------------------------------------------ faults, stop


def _serve(port: int, out: Path) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-m", "semcodec.cloud.cli", "serve", "--listen", f"127.0.0.1:{port}",
         "--out", str(out), "--metrics-listen", "", "--grace-s", "2", "--notice-s", "0.2"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)  # fmt: skip


def test_server_killed_mid_stream_then_restarted_gets_every_unit_once(semc, offline, tmp_path):
    port, out = free_port(), tmp_path / "out"
    first = _serve(port, out)
    second = None
    try:
        wait_serving(port, first)
        spool = spool_of(semc, tmp_path / "spool", upto=2)
        client = StreamClient(f"127.0.0.1:{port}", spool, pacer=TokenBucket(64_000, 512),
                              chunk_bytes=512, backoff_s=(0.1, 0.5), max_outage_s=60)  # fmt: skip
        outcome = {}
        thread = threading.Thread(target=lambda: outcome.update(results=client.run()))
        thread.start()
        deadline = time.monotonic() + 30
        while spool.acked < 1 and time.monotonic() < deadline:
            time.sleep(0.02)
        assert spool.acked >= 1, "no unit was acknowledged"
        first.kill()  # mid-stream: units 2 and 3 are not even encoded yet
        first.communicate()
        fill(spool, semc, start=2)
        second = _serve(port, out)
        thread.join(60)
        assert not thread.is_alive() and "results" in outcome
        results = outcome["results"]
        assert results.complete and results.frames_decoded == 3
        assert client.stats.reconnects >= 1
        log, outputs = session_paths(out, "default", results.session_id)
        assert log.read_bytes() == semc.read_bytes()  # no unit lost, none twice
        assert_same_tree(outputs, offline)
        assert not list((out / "default").glob(".*.partial"))  # the killed decode's, removed
        second.send_signal(signal.SIGTERM)  # graceful stop: drain, exit 0
        _, stderr = second.communicate(timeout=30)
        assert second.returncode == 0, stderr
        assert "stopping" in stderr and "Traceback" not in stderr
    finally:
        for proc in (first, second):
            if proc is not None and proc.poll() is None:
                proc.kill()
                proc.communicate()


def test_graceful_stop_answers_not_serving_then_drains(tmp_path, semc):
    srv = start_server(tmp_path, notice_s=1.0, grace_s=1.0)
    channel = grpc.insecure_channel(f"127.0.0.1:{srv.port}")
    health = health_pb2_grpc.HealthStub(channel)
    stub = pb_grpc.SemanticStreamStub(channel)
    request = open_request(read_stream(semc)[0].to_bytes())
    sid = stub.OpenSession(request).session_id
    stopper = threading.Thread(target=srv.stop)
    stopper.start()
    time.sleep(0.3)
    status = health.Check(health_pb2.HealthCheckRequest(), timeout=2).status
    assert status == health_pb2.HealthCheckResponse.NOT_SERVING
    assert code_of(lambda: stub.OpenSession(request, timeout=2))[0] == grpc.StatusCode.UNAVAILABLE
    stopper.join(10)
    assert not stopper.is_alive()
    channel.close()
    # the open session kept its stream on disk: a new server resumes it
    again = start_server(tmp_path)
    try:
        channel, stub = stub_for(f"127.0.0.1:{again.port}")
        opened = stub.OpenSession(open_request(request.stream_header, sid))
        assert opened.resumed and opened.next_seq == 0
        channel.close()
    finally:
        again.stop(0)


# ------------------------------------------------------------------------------ policies, limits


def test_drop_policy_is_recorded_and_reported_never_silent(semc, tmp_path):
    server = start_server(tmp_path, max_backlog_units=1)  # units after the gap never wait
    header, units = read_stream(semc)
    sizes = [len(u.to_bytes()) for u in read_stream(semc)[1]]
    # room for the keyframe and the larger of units 1 and 2: putting unit 2 drops unit 1
    spool = Spool(tmp_path / "spool", sizes[0] + max(sizes[1:3]) + 100, policy="drop-oldest")
    spool.bind(header.to_bytes())
    for seq, unit in enumerate(units):  # the link is down: the spool fills up
        spool.put(seq, int(unit.kind), unit.to_bytes())
    assert spool.dropped_count == 1 and spool.get(1).dropped
    assert '"seq": 1' in (tmp_path / "spool" / "dropped.jsonl").read_text()
    client = StreamClient(f"127.0.0.1:{server.port}", spool, max_outage_s=20)
    try:
        results = client.run()
    finally:
        server.stop(0)
    assert list(results.dropped_seqs) == [1] and client.stats.dropped == 1
    assert "dropped by policy 1" in client.stats.summary()
    assert not results.complete and results.frames_decoded == 1  # decoding stops at the gap
    outputs = server.settings.out / results.output_dir
    info = (outputs / "stream.json").read_text()
    assert '"complete": false' in info and "dropped by the edge" in info
    assert [p.name for p in (outputs / "frames").iterdir()] == ["000001.png"]


def test_a_stream_that_does_not_decode_fails_its_own_session_only(server, semc, offline,
                                                                  tmp_path):  # fmt: skip
    target = f"127.0.0.1:{server.port}"
    header = read_stream(semc)[0].to_bytes()
    channel, stub = stub_for(target)
    sid = stub.OpenSession(open_request(header)).session_id
    bogus = Unit(1, 0, (SubStream(SubStreamType.METADATA, b"not a keyframe"),)).to_bytes()
    start = pb.StreamRequest(start=pb.StreamStart(session_id=sid))
    replies = list(stub.StreamUnits(iter([start, *unit_chunks(SpooledUnit(0, 1, 0, bogus),
                                                               1024)]), timeout=10))  # fmt: skip
    assert replies[-1].ack.next_seq == 1  # stored: framing and checksums are fine
    deadline = time.monotonic() + 20
    while (res := stub.GetResults(pb.GetResultsRequest(session_id=sid))).state \
            != pb.SESSION_STATE_FAILED and time.monotonic() < deadline:  # fmt: skip
        time.sleep(0.05)
    assert res.state == pb.SESSION_STATE_FAILED and res.error
    good = Unit.from_bytes(read_stream(semc)[1].__next__().to_bytes()).to_bytes()
    code, details = code_of(lambda: list(stub.StreamUnits(iter(
        [start, *unit_chunks(SpooledUnit(1, 2, 0, good), 1024)]), timeout=10)))  # fmt: skip
    assert code == grpc.StatusCode.INVALID_ARGUMENT and "does not decode" in details
    assert not (server.settings.out / "default" / sid).exists()  # no partial outputs
    channel.close()
    results = StreamClient(target, spool_of(semc, tmp_path / "other")).run()
    assert results.complete
    assert_same_tree(server.settings.out / results.output_dir, offline)


def test_backlog_is_bounded_a_stream_waits_for_its_decoder(semc, tmp_path, monkeypatch):
    from semcodec.cloud.service import decode
    from semcodec.cloud.service.assembler import AssembledUnit
    from semcodec.cloud.service.config import ServeSettings
    from semcodec.cloud.service.errors import ShuttingDownError
    from semcodec.cloud.service.limits import ServiceLimits
    from semcodec.cloud.service.manager import SessionManager
    from semcodec.cloud.service.messages import OpenRequest

    stalled = threading.Event()
    monkeypatch.setattr(decode.DecodeWorker, "run", lambda self: stalled.wait(30))
    limits = ServiceLimits.of(ServeSettings(out=tmp_path, max_backlog_units=2), backlog_wait_s=0.5)
    manager = SessionManager(tmp_path, limits)
    header, units = read_stream(semc)
    opened = manager.open("default", OpenRequest(header=header.to_bytes()))
    receiver = manager.attach("default", opened.session_id)
    units = [AssembledUnit(i, u.to_bytes(), u, 0) for i, u in enumerate(units)]
    receiver.session.store(units[0], receiver.generation)
    receiver.session.store(units[1], receiver.generation)
    start = time.monotonic()
    with pytest.raises(ShuttingDownError, match="behind"):
        receiver.session.store(units[2], receiver.generation)
    assert time.monotonic() - start >= 0.5
    assert receiver.session.next_seq == 2 and receiver.feedback().backlog_units == 2
    stalled.set()
    manager.shutdown(5)


def test_a_decoder_that_loses_the_commit_to_another_replica_keeps_its_outputs(semc, offline,
                                                                            tmp_path):  # fmt: skip
    """Two replicas on one storage decoded the same session (its stream moved between them);
    the one that commits second finds the outputs in place: it reports them, not a failure."""
    import shutil

    from semcodec.cloud.service import decode

    out = tmp_path / "default" / "session"
    shutil.copytree(offline, out)  # what the other replica committed while this one decoded
    reports = []

    class Source:
        def next_work(self, decoded):
            return "unit" if decoded < 4 else "finish"

        def frame_decoded(self, decoded, seconds, detections=None):
            pass

        def decode_done(self, frames, complete, error):
            reports.append((frames, complete, error))

    decode.DecodeWorker(semc, out, decode.DecodeSettings(overview=False), Source()).run()
    assert reports == [(3, True, None)]
    assert decode.committed_decode(out) == (3, True)
    assert decode.committed_decode(tmp_path / "nothing") is None


def test_per_session_rate_limit_slows_each_stream_without_failing_it(semc, offline, tmp_path):
    """--max-session-kbps: an unpaced stream is read at the session's rate (its reads are
    delayed, nothing is refused); two sessions each get the rate (not a shared one)."""
    rate_bytes, burst = 1000, 1024  # 8 kbit/s
    server = start_server(tmp_path, max_session_kbps=8.0, session_burst_kib=1,
                          metrics_listen="127.0.0.1:0")  # fmt: skip
    size = semc.stat().st_size
    try:
        clients = [StreamClient(f"127.0.0.1:{server.port}",
                                spool_of(semc, tmp_path / f"spool{i}"), chunk_bytes=512)
                   for i in range(2)]  # fmt: skip
        results, took = [None, None], [0.0, 0.0]

        def run(i: int) -> None:
            start = time.monotonic()
            results[i] = clients[i].run()
            took[i] = time.monotonic() - start

        start = time.monotonic()
        threads = [threading.Thread(target=run, args=(i,)) for i in range(2)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(60)
        wall = time.monotonic() - start
        metrics = urllib.request.urlopen(f"http://127.0.0.1:{server.metrics_port}/metrics")
        text = metrics.read().decode()
    finally:
        server.stop(0)
    # the stream header goes with OpenSession, outside the limit: every unit byte beyond the
    # burst is read at the rate (5 ms for the clock's granularity)
    header = len(read_stream(semc)[0].to_bytes())
    least = (size - header - burst) / rate_bytes - 0.005
    for i in range(2):
        assert results[i] is not None and results[i].complete, results[i]
        assert clients[i].stats.units_resent == 0 and clients[i].stats.reconnects == 0
        assert took[i] >= least, (took, least)
        log, outputs = session_paths(server.settings.out, "default", results[i].session_id)
        assert log.read_bytes() == semc.read_bytes()
        assert_same_tree(outputs, offline)
    assert wall < (2 * size - burst) / rate_bytes, (wall, size)  # one shared rate: longer
    samples = dict(line.rsplit(" ", 1) for line in text.splitlines() if not line.startswith("#"))
    assert float(samples["semcodec_throttled_seconds_total"]) >= least, text
    assert not any(name.startswith("semcodec_errors_total") for name in samples), text


# ------------------------------------------------------------------------------ command lines


def test_command_line_user_errors_exit_2(tmp_path, sample_dir, semc, capsys):
    assert cloud_main(["serve", "--out", str(tmp_path), "--tls-cert", str(semc)]) == 2
    assert "tls_cert and tls_key go together" in capsys.readouterr().err
    tokens = tmp_path / "tokens"
    tokens.write_text(f"{TOKEN_A} alpha\n")
    srv = start_server(tmp_path, tokens=tokens)
    try:
        argv = ["stream", str(sample_dir), "--server", f"127.0.0.1:{srv.port}", *ENCODE_ARGS,
                "--spool", str(tmp_path / "spool"), "--token", TOKEN_B]  # fmt: skip
        assert edge_main(argv) == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert err[-1].startswith("edge-agent: error: UNAUTHENTICATED"), err
        assert edge_main([*argv[:-2], "--tls-cert", str(semc)]) == 2
        assert "--tls-cert and --tls-key go together" in capsys.readouterr().err
    finally:
        srv.stop(0)


def test_agent_killed_and_restarted_resumes_its_session(server, semc, sample_dir, tmp_path):
    spool = tmp_path / "spool"
    argv = [sys.executable, "-m", "semcodec.edge.cli", "stream", str(sample_dir), "--server",
            f"127.0.0.1:{server.port}", *ENCODE_ARGS, "--bandwidth-kbps", "8", "--burst-bytes",
            "512", "--chunk-kib", "1", "--spool", str(spool)]  # fmt: skip
    agent = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        state, deadline = spool / "state.json", time.monotonic() + 60
        while time.monotonic() < deadline and agent.poll() is None:
            if state.is_file() and '"acked": 0' not in (text := state.read_text()) and text:
                break
            time.sleep(0.02)
        agent.kill()  # after unit 0 was acknowledged, before the rest
        agent.communicate()
    finally:
        if agent.poll() is None:
            agent.kill()
    again = subprocess.run(argv, capture_output=True, text=True, timeout=120)
    assert again.returncode == 0, again.stderr
    assert "acknowledged 4" in again.stderr
    (session,) = (server.settings.out / ".sessions" / "default").iterdir()  # one session
    assert (session / "stream.semc").read_bytes() == semc.read_bytes()
    assert (server.settings.out / "default" / session.name / "stream.json").is_file()
    # the same command once more: the session is closed, its results are reported
    third = subprocess.run(argv, capture_output=True, text=True, timeout=120)
    assert third.returncode == 0, third.stderr
    assert "units sent 0, acknowledged 4" in third.stderr and session.name in third.stderr


def test_agent_killed_before_it_recorded_the_end_finishes_after_a_restart(server, semc, offline,
                                                                         tmp_path):  # fmt: skip
    """Issue 13: an agent SIGKILLed between spooling the END unit and recording the end in
    its state. The restarted agent used to send every unit, have all acknowledged, and then
    wait for ever for a unit after END (the session was never closed)."""

    class Killed(BaseException):
        pass

    def killed() -> None:
        raise Killed

    header, units = read_stream(semc)
    units = list(units)
    torn = spool_of(semc, tmp_path / "spool", upto=len(units) - 1)
    torn._save_state = killed  # SIGKILL once the END unit's file is in place
    with pytest.raises(Killed):
        fill(torn, semc, len(units) - 1)
    spool = Spool(tmp_path / "spool", 256 << 20)  # the restarted agent
    spool.bind(header.to_bytes())
    fill(spool, semc, 0)  # its producer encodes the stream again: nothing new is spooled
    client = StreamClient(f"127.0.0.1:{server.port}", spool, chunk_bytes=1024)
    got: list = []
    runner = threading.Thread(target=lambda: got.append(client.run()), daemon=True)
    runner.start()
    runner.join(30)  # it takes about 2 s
    if runner.is_alive():
        spool.fail(RuntimeError("the test gave up"))  # ends the stuck stream
        runner.join(10)
    assert got, f"the client did not finish: {client.stats.summary()}"
    results = got[0]
    assert (results.state, results.complete) == (pb.SESSION_STATE_CLOSED, True)
    log, outputs = session_paths(server.settings.out, "default", results.session_id)
    assert log.read_bytes() == semc.read_bytes()  # every unit exactly once, in order
    assert_same_tree(outputs, offline)


def test_agent_refused_mid_encode_exits_2_cleanly(tmp_path, sample_dir):
    """A refusal while the encoder thread runs native code: the encoder is stopped before
    the process exits (it used to abort with 'terminate called without an active
    exception', exit status 134)."""
    tokens = tmp_path / "tokens"
    tokens.write_text(f"{TOKEN_A} alpha\n")
    srv = start_server(tmp_path, tokens=tokens)
    try:
        argv = [sys.executable, "-m", "semcodec.edge.cli", "stream", str(sample_dir),
                "--server", f"127.0.0.1:{srv.port}", "--level", "1", "--frames", "40",
                "--token", TOKEN_B, "--spool", str(tmp_path / "spool")]  # fmt: skip
        done = subprocess.run(argv, capture_output=True, text=True, timeout=120)
    finally:
        srv.stop(0)
    assert done.returncode == 2, done.stderr
    assert done.stderr.strip().splitlines()[-1].startswith("edge-agent: error: UNAUTHENTICATED")
