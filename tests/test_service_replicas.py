"""Replicas for real (issue 25): two ``cloud-decoder serve`` processes on a shared ``--out``
behind a real NGINX (Debian's package: ``grpc_pass``, ``hash $http_x_semcodec_stream
consistent``), configured with the block of docs/deployment.md (addresses replaced). Six
agents stream through it and land on both replicas, three each (their stream keys are chosen
by probing NGINX's hash with health calls); one replica is SIGKILLed mid-stream and
restarted on the same port; every stream completes, each unit stored exactly once (the
stored stream equals the file byte for byte).

Skipped, with the reason, where ``nginx`` is not installed (``.ci/run`` installs it as root).
The agents are the edge's ``StreamClient`` (what ``edge-agent stream`` runs) in threads,
sending a pre-encoded stream paced to 16 kbit/s, so that the kill lands mid-stream.
"""

from __future__ import annotations

import re
import secrets
import shutil
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

from semcodec.codec.bitstream import read_stream
from semcodec.edge.stream.client import AFFINITY_HEADER, StreamClient
from semcodec.edge.stream.pacer import TokenBucket
from semcodec.edge.stream.spool import Spool

from .conftest import free_port, wait_serving

pytestmark = pytest.mark.slow

DOCS = Path(__file__).resolve().parents[1] / "docs" / "deployment.md"
AGENTS = 6
RATE_BPS = 16_000
HEALTH_URI = "/grpc.health.v1.Health/Check"


def nginx_config_from_docs() -> str:
    """The NGINX block of docs/deployment.md (the one after its ``nginx: checked`` mark)."""
    text = DOCS.read_text(encoding="utf-8")
    mark = text.index("<!-- nginx: checked by tests/test_service_replicas.py -->")
    match = re.search(r"```nginx\n(.*?)```", text[mark:], re.S)
    assert match, "docs/deployment.md lost its NGINX block"
    return match[1]


def nginx_config(listen: int, replicas: list[int], folder: Path) -> str:
    """The docs' block with this test's addresses, inside a minimal main configuration."""
    block = nginx_config_from_docs()
    for directive in ("hash $http_x_semcodec_stream consistent;", "grpc_pass grpc://",
                      "listen 50051 http2;"):  # fmt: skip
        assert directive in block, directive
    servers = re.findall(r"^ *server \S+:\d+ .*$", block, re.M)
    assert len(servers) == len(replicas), servers
    for line, port in zip(servers, replicas, strict=True):
        block = block.replace(line, re.sub(r"server \S+:\d+", f"server 127.0.0.1:{port}", line))
    block = block.replace("listen 50051 http2;", f"listen 127.0.0.1:{listen} http2;")
    return (f"worker_processes 1;\ndaemon off;\npid {folder}/nginx.pid;\n"
            f"error_log {folder}/error.log info;\nevents {{ worker_connections 1024; }}\n"
            "http {\n  log_format streams '$http_x_semcodec_stream $upstream_addr "
            "$request_uri';\n"
            f"  access_log {folder}/access.log streams;\n"
            f"  client_body_temp_path {folder}/body;\n{block}}}\n")  # fmt: skip


@pytest.fixture
def nginx(tmp_path):
    binary = shutil.which("nginx") or ("/usr/sbin/nginx" if Path("/usr/sbin/nginx").is_file()
                                       else None)  # fmt: skip
    if binary is None:
        pytest.skip("needs nginx (Debian: apt-get install nginx; .ci/run installs it as root)")
    procs: list[subprocess.Popen] = []

    def start(listen: int, replicas: list[int]) -> subprocess.Popen:
        folder = tmp_path / "nginx"
        folder.mkdir(exist_ok=True)
        conf = folder / "nginx.conf"
        conf.write_text(nginx_config(listen, replicas, folder))
        check = subprocess.run([binary, "-t", "-c", str(conf)], capture_output=True, text=True)
        assert check.returncode == 0, check.stderr
        proc = subprocess.Popen([binary, "-c", str(conf)], stdout=subprocess.DEVNULL,
                                stderr=subprocess.PIPE, text=True)  # fmt: skip
        procs.append(proc)
        return proc

    yield start
    for proc in procs:
        proc.terminate()
        proc.wait(10)


def _replica(port: int, metrics: int, out: Path, log: Path) -> subprocess.Popen:
    with open(log, "a") as fh:
        return subprocess.Popen([sys.executable, "-m", "semcodec.cloud.cli", "serve",
                                 "--listen", f"127.0.0.1:{port}", "--out", str(out),
                                 "--metrics-listen", f"127.0.0.1:{metrics}", "--grace-s", "2",
                                 "--notice-s", "0", "--no-overview"],
                                stdout=subprocess.DEVNULL, stderr=fh)  # fmt: skip


def _route(listen: int, key: str, log: Path) -> str:
    """The replica address NGINX sends ``key``'s calls to: one health call through it, read
    back from its access log."""
    before = log.read_text().count("\n") if log.exists() else 0
    with grpc.insecure_channel(f"127.0.0.1:{listen}") as channel:
        grpc.channel_ready_future(channel).result(timeout=10)  # NGINX is listening
        health_pb2_grpc.HealthStub(channel).Check(health_pb2.HealthCheckRequest(), timeout=10,
                                                  metadata=[(AFFINITY_HEADER, key)])  # fmt: skip
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline:
        lines = log.read_text().splitlines()[before:]
        if lines:
            return lines[-1].split(" ")[1].rstrip(",")
        time.sleep(0.05)
    raise AssertionError(f"NGINX logged no call for {key}")


def _keys_on_both(listen: int, ports: list[int], log: Path) -> list[str]:
    """AGENTS stream keys, half routed to each replica (random keys put all six on one
    replica about one run in 32)."""
    by_port: dict[str, list[str]] = {f"127.0.0.1:{p}": [] for p in ports}
    for _ in range(200):
        key = secrets.token_hex(16)
        chosen = by_port[_route(listen, key, log)]
        if len(chosen) < AGENTS // 2:
            chosen.append(key)
        if all(len(v) == AGENTS // 2 for v in by_port.values()):
            return [k for v in by_port.values() for k in v]
    raise AssertionError(f"NGINX's hash never reached both replicas: {by_port}")


def _opened(metrics: int) -> float:
    text = urllib.request.urlopen(f"http://127.0.0.1:{metrics}/metrics", timeout=5).read()
    return sum(float(line.rsplit(" ", 1)[1]) for line in text.decode().splitlines()
               if line.startswith("semcodec_sessions_opened_total"))  # fmt: skip


@pytest.fixture(scope="module")
def long_semc(tmp_path_factory, sample_dir) -> Path:
    """14 frames of the sample at level 1 (about 13 kB: 6-7 s at 16 kbit/s)."""
    from semcodec.codec.core.models import ModelNotFoundError, resolve_model
    from semcodec.edge.cli import main as edge_main

    try:
        resolve_model("ssdlite_person")
    except ModelNotFoundError as exc:
        pytest.skip(f"the person detector is not available: {exc}")
    path = tmp_path_factory.mktemp("semc") / "sample14.semc"
    assert edge_main(["-q", "encode", str(sample_dir), "-o", str(path), "--level", "1",
                      "--frames", "14", "--target-bpp", "0.2"]) == 0  # fmt: skip
    return path


def test_six_agents_through_nginx_survive_a_replica_killed_and_restarted(nginx, long_semc,
                                                                         tmp_path):  # fmt: skip
    out = tmp_path / "shared-out"
    ports = [free_port(), free_port()]
    metrics = [free_port(), free_port()]
    logs = [tmp_path / "replica0.log", tmp_path / "replica1.log"]
    replicas = [_replica(p, m, out, log) for p, m, log in zip(ports, metrics, logs, strict=True)]
    try:
        for port, proc in zip(ports, replicas, strict=True):
            wait_serving(port, proc)
        listen = free_port()
        balancer = nginx(listen, ports)
        header, units = read_stream(long_semc)
        units = list(units)
        keys = _keys_on_both(listen, ports, tmp_path / "nginx" / "access.log")
        spools, clients, results, errors = [], [], [None] * AGENTS, []
        for k in range(AGENTS):
            spool = Spool(tmp_path / f"spool{k}", 1 << 20)
            spool.state["stream_key"] = keys[k]
            spool.bind(header.to_bytes())
            for seq, unit in enumerate(units):
                spool.put(seq, int(unit.kind), unit.to_bytes())
            spools.append(spool)
            clients.append(StreamClient(f"127.0.0.1:{listen}", spool,
                                        pacer=TokenBucket(RATE_BPS, 1024), chunk_bytes=1024,
                                        backoff_s=(0.2, 1.0), max_outage_s=120))  # fmt: skip

        def run(k: int) -> None:
            try:
                results[k] = clients[k].run()
            except Exception as exc:  # reported below
                errors.append(f"agent {k}: {type(exc).__name__}: {exc}")

        threads = [threading.Thread(target=run, args=(k,)) for k in range(AGENTS)]
        for thread in threads:
            thread.start()
        # wait until every agent has a session and some units stored, then kill the replica
        # that holds the most streams
        deadline = time.monotonic() + 60
        while (min(s.acked for s in spools) < 1 or sum(map(_opened, metrics)) < AGENTS) \
                and time.monotonic() < deadline:  # fmt: skip
            time.sleep(0.1)
        per_replica = [_opened(m) for m in metrics]
        assert min(per_replica) >= 1 and sum(per_replica) == AGENTS, per_replica
        assert not any(s.finished() for s in spools), "streams ended before the kill"
        victim = 0 if per_replica[0] >= per_replica[1] else 1
        replicas[victim].send_signal(signal.SIGKILL)
        replicas[victim].wait(10)
        time.sleep(2.0)
        replicas[victim] = _replica(ports[victim], metrics[victim], out, logs[victim])
        wait_serving(ports[victim], replicas[victim])
        for thread in threads:
            thread.join(180)
        assert not errors, errors
        assert balancer.poll() is None
    finally:
        for proc in replicas:
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
                proc.wait(30)
    expected = long_semc.read_bytes()
    reconnects = 0
    for k, (client, result) in enumerate(zip(clients, results, strict=True)):
        assert result is not None and result.complete, (k, result)
        assert result.units_stored == len(units) and not result.dropped_seqs
        stored = out / ".sessions" / "default" / result.session_id / "stream.semc"
        assert stored.read_bytes() == expected  # every unit once: none lost, none twice
        reconnects += client.stats.reconnects
    assert reconnects >= per_replica[victim], (reconnects, per_replica)
    # affinity: every call carried its stream's key, and each key's calls went to one
    # replica (the killed one's keys: it, then the one they moved to)
    routes: dict[str, set[str]] = {}
    for line in (tmp_path / "nginx" / "access.log").read_text().splitlines():
        if line.endswith(HEALTH_URI):
            continue  # the probes that chose the keys
        key, upstreams = line.split(" ", 1)[0], line.split(" ")[1:-1]
        assert re.fullmatch(r"[0-9a-f]{32}", key), line
        routes.setdefault(key, set()).update(u.rstrip(",") for u in upstreams)
    assert len(routes) == AGENTS
    on = {port: f"127.0.0.1:{port}" for port in ports}
    assert all(r == {on[ports[1 - victim]]} or r == set(on.values()) for r in routes.values())
    assert sum(r == set(on.values()) for r in routes.values()) == per_replica[victim]
    print(f"\nreplicas behind nginx: sessions per replica before the kill {per_replica}; "
          f"replica {victim} SIGKILLed and restarted; {AGENTS} streams complete, "
          f"{AGENTS * len(units)} units stored once each, {reconnects} reconnects")
