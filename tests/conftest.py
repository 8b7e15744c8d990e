"""Shared fixtures: the embedded sample and the ../shared folder beside the repository.

``SEMCODEC_NO_SHARED=1`` runs the suite as on a fresh clone: tests marked ``shared`` skip,
the ``SHARED`` path below points nowhere, and the code itself stops looking in ``../shared``
(models are then fetched from their packages into the user cache on first use).
"""

from __future__ import annotations

import json
import os
import platform
import queue
import secrets
import shutil
import socket
import subprocess
import time
from pathlib import Path

import numpy as np
import pytest

from semcodec.codec.core.layout import NO_SHARED_ENV, shared_hidden

REPO = Path(__file__).resolve().parents[1]
SHARED = REPO.parent / ("shared-hidden-by-" + NO_SHARED_ENV if shared_hidden() else "shared")


def pytest_collection_modifyitems(config, items):
    """Skips the ``shared`` tests, with the reason, when ``../shared`` is hidden or absent."""
    if SHARED.is_dir():
        return
    why = f"{NO_SHARED_ENV} is set" if shared_hidden() else f"{SHARED} is not beside the repo"
    skip = pytest.mark.skip(reason=f"needs ../shared: {why}")
    for item in items:
        if "shared" in item.keywords:
            item.add_marker(skip)


#: Set by ``make test`` (and ``make test-no-shared``) to the file that receives the suite's
#: counts and wall time, quoted by the README.
FIGURES_ENV = "SEMCODEC_TEST_FIGURES"
_STARTED = time.time()


def pytest_terminal_summary(terminalreporter, exitstatus, config):
    """Writes the run's counts and wall time to ``$SEMCODEC_TEST_FIGURES`` when it is set."""
    target = os.environ.get(FIGURES_ENV)
    if not target:
        return
    counts = {kind: len(terminalreporter.stats.get(kind, []))
              for kind in ("passed", "failed", "skipped", "error", "deselected")}  # fmt: skip
    from semcodec.evaluation.bench.grid import machine_description
    from semcodec.evaluation.report.markdown import write_text_atomic

    figures = {**counts, "seconds": round(time.time() - _STARTED),
               "machine": machine_description(),
               "python": platform.python_version(), "exit_status": int(exitstatus),
               "shared_hidden": shared_hidden(), "date": time.strftime("%Y-%m-%d"),
               "load_1min_at_end": round(os.getloadavg()[0], 1)}  # fmt: skip
    write_text_atomic(Path(target), json.dumps(figures, indent=1) + "\n")


@pytest.fixture(scope="session")
def sample_dir() -> Path:
    from semcodec.codec.core.sources import sample_path

    return sample_path()


@pytest.fixture(scope="session")
def sample_frames(sample_dir) -> np.ndarray:
    """The first 12 frames of the embedded sample, (12, 288, 384, 3) uint8 RGB."""
    from semcodec.codec.core.sources import open_source

    return open_source(sample_dir).read(start=1, count=12)


@pytest.fixture(scope="session")
def shared_data() -> Path:
    path = SHARED / "data"
    if not path.is_dir():
        pytest.skip("../shared/data is not beside the repository")
    return path


PETS = SHARED / "data" / "PETS09-S2L1"


def _load_pets_frame(number: int) -> np.ndarray:
    import cv2

    image = cv2.imread(str(PETS / "img1" / f"{number:06d}.jpg"))
    if image is None:
        pytest.skip(f"PETS09-S2L1 frame {number} not found under {PETS}")
    return cv2.cvtColor(image, cv2.COLOR_BGR2RGB)


@pytest.fixture(scope="session")
def pets_frame():
    """``pets_frame(k)``: frame k of ../shared/data/PETS09-S2L1, (576, 768, 3) uint8 RGB."""
    return _load_pets_frame


@pytest.fixture(scope="module")
def detector():
    """The person detector at threshold 0.3 (skips when frames or model are absent)."""
    from semcodec.codec.core.models import ModelNotFoundError
    from semcodec.codec.scaffold.detector import DetectorConfig, PersonDetector

    if not (PETS / "img1" / "000001.jpg").is_file():
        pytest.skip(f"PETS09-S2L1 frames not found under {PETS}")
    try:
        return PersonDetector(DetectorConfig(score_threshold=0.3), threads=2)
    except ModelNotFoundError as exc:
        pytest.skip(f"person detector model not available: {exc}")


@pytest.fixture(scope="module")
def pets_gt():
    from semcodec.evaluation.data.groundtruth import load_mot_groundtruth

    return load_mot_groundtruth(PETS)


@pytest.fixture(scope="session")
def gt_tracks():
    """``gt_tracks(gt_file, frame)``: the counted ground-truth people of a frame as Tracks."""
    from semcodec.codec.core.types import Tracks
    from semcodec.evaluation.data.groundtruth import load_mot_groundtruth

    def load(gt_file, frame: int) -> Tracks:
        gt = load_mot_groundtruth(gt_file)
        rows = (gt.frame_numbers == frame) & gt.counted
        xywh = np.asarray(gt.boxes[rows], np.float32)
        boxes = np.c_[xywh[:, :2], xywh[:, :2] + xywh[:, 2:]].astype(np.float32)
        return Tracks(boxes, np.ones(len(boxes), np.float32), gt.ids[rows].astype(np.int32))

    return load


# ------------------------------------------------------------------ the service tests' helpers
# What the test_service_* modules share: fixtures (found here by name) and helpers (imported
# `from .conftest import ...`); a test module never imports another. The service's modules
# are imported inside the helpers, so that collecting other tests does not load them.

TOKEN_A, TOKEN_B = "alpha-token-0123456789abcdef", "beta-token-0123456789abcdef0"
#: `edge-agent encode` options of the service tests' stream: 3 frames of the sample at level 1
ENCODE_ARGS = ["--level", "1", "--frames", "3", "--target-bpp", "0.2"]


@pytest.fixture(scope="module")
def detector_model():
    """Skips the test where the person detector cannot be had."""
    from semcodec.codec.core.models import ModelNotFoundError, resolve_model

    try:
        resolve_model("ssdlite_person")
    except ModelNotFoundError as exc:
        pytest.skip(f"the person detector is not available: {exc}")


@pytest.fixture(scope="module")
def semc(tmp_path_factory, sample_dir, detector_model) -> Path:
    """3 frames of the embedded sample at level 1, as `edge-agent encode` writes them."""
    from semcodec.edge.cli import main as edge_main

    path = tmp_path_factory.mktemp("semc") / "sample.semc"
    assert edge_main(["-q", "encode", str(sample_dir), "-o", str(path), *ENCODE_ARGS]) == 0
    return path


@pytest.fixture(scope="module")
def offline(semc, tmp_path_factory) -> Path:
    """`cloud-decoder decode` of the stream: what every session must reproduce."""
    from semcodec.cloud.cli import main as cloud_main

    out = tmp_path_factory.mktemp("offline") / "decoded"
    assert cloud_main(["-q", "decode", str(semc), "-o", str(out)]) == 0
    return out


def start_server(tmp_path: Path, **settings):
    """A started in-process ``DecoderServer`` on a free port of 127.0.0.1 (no metrics, no
    grace notice), writing under ``tmp_path/out``."""
    from semcodec.cloud.service.config import ServeSettings
    from semcodec.cloud.service.server import DecoderServer

    values = {"out": tmp_path / "out", "listen": "127.0.0.1:0", "metrics_listen": "",
              "notice_s": 0.0, "grace_s": 1.0, **settings}  # fmt: skip
    return DecoderServer(ServeSettings(**values)).start()


@pytest.fixture
def server(tmp_path):
    srv = start_server(tmp_path, metrics_listen="127.0.0.1:0")
    yield srv
    srv.stop(0)


def spool_of(semc: Path, folder: Path, upto: int | None = None):
    """A spool holding the stream's header and its first ``upto`` units (all: None)."""
    from semcodec.codec.bitstream import read_stream
    from semcodec.edge.stream.spool import Spool

    header, units = read_stream(semc)
    spool = Spool(folder, 256 << 20)
    spool.bind(header.to_bytes())
    for seq, unit in enumerate(units):
        if upto is not None and seq >= upto:
            break
        spool.put(seq, int(unit.kind), unit.to_bytes())
    return spool


def fill(spool, semc: Path, start: int) -> None:
    """Puts the stream's units from ``start`` on into ``spool``."""
    from semcodec.codec.bitstream import read_stream

    _, units = read_stream(semc)
    for seq, unit in enumerate(units):
        if seq >= start:
            spool.put(seq, int(unit.kind), unit.to_bytes())


def assert_same_tree(got: Path, expected: Path) -> None:
    files = sorted(p.relative_to(expected) for p in expected.rglob("*") if p.is_file())
    assert sorted(p.relative_to(got) for p in got.rglob("*") if p.is_file()) == files
    for rel in files:
        assert (got / rel).read_bytes() == (expected / rel).read_bytes(), rel


def session_paths(out: Path, tenant: str, session_id: str) -> tuple[Path, Path]:
    """(the stored stream, the outputs folder) of a session."""
    return out / ".sessions" / tenant / session_id / "stream.semc", out / tenant / session_id


class TokenStub:
    """A SemanticStream stub that sends the security's token with every call."""

    def __init__(self, channel, metadata) -> None:
        from semcodec.protos import semcodec_v1_pb2_grpc as pb_grpc

        self._stub, self._metadata = pb_grpc.SemanticStreamStub(channel), metadata

    def __getattr__(self, name: str):
        method = getattr(self._stub, name)
        return lambda request, **kw: method(request, metadata=self._metadata, **kw)


def stub_for(target: str, security=None):
    """(a channel to ``target``, a :class:`TokenStub` on it) with ``security`` (a
    ``ChannelSecurity``; default: plain, no token)."""
    from semcodec.edge.stream.client import ChannelSecurity

    security = security or ChannelSecurity()
    channel = security.channel(target)
    return channel, TokenStub(channel, security.metadata())


def code_of(call):
    """(the gRPC status code, its details) of ``call()``, which must fail."""
    import grpc

    with pytest.raises(grpc.RpcError) as info:
        call()
    return info.value.code(), info.value.details()


def free_port() -> int:
    """A TCP port of 127.0.0.1 that nothing listens on now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_serving(port: int, proc: subprocess.Popen, timeout_s: float = 60) -> None:
    """Waits until the server process on ``port`` answers SERVING to a health check."""
    import grpc
    from grpc_health.v1 import health_pb2, health_pb2_grpc

    deadline = time.monotonic() + timeout_s
    with grpc.insecure_channel(f"127.0.0.1:{port}") as channel:
        health = health_pb2_grpc.HealthStub(channel)
        while time.monotonic() < deadline:
            assert proc.poll() is None, proc.communicate()
            try:
                if health.Check(health_pb2.HealthCheckRequest(), timeout=1).status == 1:
                    return
            except grpc.RpcError:
                time.sleep(0.1)
    pytest.fail("the server did not start")


def tokens_file(tmp_path: Path, extra: str = "") -> Path:
    """A tokens file: TOKEN_A for tenant alpha (with ``extra`` on its line), TOKEN_B for
    beta."""
    path = tmp_path / "tokens"
    path.write_text(f"{TOKEN_A} alpha{extra}\n{TOKEN_B} beta\n")
    path.chmod(0o600)
    return path


class Requests:
    """A request stream fed from the test (``put``; ``None`` ends it)."""

    def __init__(self) -> None:
        self.queue: queue.Queue = queue.Queue()

    def put(self, message) -> None:
        self.queue.put(message)

    def __iter__(self):
        while (message := self.queue.get()) is not None:
            yield message


def wait_for(predicate, seconds: float = 10.0) -> bool:
    """Whether ``predicate()`` became true within ``seconds``."""
    deadline = time.monotonic() + seconds
    while not predicate():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)
    return True


# the edge over kernel-shaped links: a network namespace of the test's own

NS_PORT = 50051  # inside the test's own namespace: nothing else listens there
NS_ENCODE = ["--level", "1", "--frames", "6", "--target-bpp", "0.5"]  # about 11 kB


def netns_unavailable() -> str | None:
    """Why kernel-shaped links cannot be made here (None: they can)."""
    if not hasattr(os, "geteuid") or os.geteuid() != 0:
        return "needs root (network namespaces, tc and nftables)"
    missing = [tool for tool in ("ip", "tc", "nft") if shutil.which(tool) is None]
    if missing:
        return f"needs {', '.join(missing)} (Debian: iproute2, nftables)"
    return None


class NetNs:
    """A network namespace of the test's own, with only its loopback up (MTU 1500, so tbf
    sees real packet sizes): traffic shaped or dropped there never leaves it."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.procs: list[subprocess.Popen] = []

    def sh(self, *argv: str, stdin: str | None = None) -> None:
        """Runs a command inside the namespace (fails the test when it fails)."""
        done = subprocess.run(["ip", "netns", "exec", self.name, *argv], input=stdin,
                              capture_output=True, text=True, timeout=20)  # fmt: skip
        assert done.returncode == 0, f"{' '.join(argv)}: {done.stderr}"

    def popen(self, argv: list[str]) -> subprocess.Popen:
        """Starts a process inside the namespace (killed at the end of the test)."""
        proc = subprocess.Popen(["ip", "netns", "exec", self.name, *argv], text=True,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE)  # fmt: skip
        self.procs.append(proc)
        return proc

    def shape(self, rate_kbit: int, burst_bytes: int, latency_ms: int) -> None:
        """``tc qdisc ... tbf`` on the loopback: every packet of the link goes through it."""
        self.sh("tc", "qdisc", "replace", "dev", "lo", "root", "tbf", "rate", f"{rate_kbit}kbit",
                "burst", str(burst_bytes), "latency", f"{latency_ms}ms")  # fmt: skip

    def drop(self, table: str, port: int, percent: int) -> None:
        """Drops ``percent`` % of the TCP packets to and from ``port`` (nftables)."""
        rule = f"numgen random mod 100 < {percent} drop" if percent < 100 else "drop"
        self.sh("nft", "-f", "-", stdin=(
            f"table inet {table} {{\n chain out {{\n"
            f"  type filter hook output priority 0; policy accept;\n"
            f"  tcp dport {port} {rule}\n  tcp sport {port} {rule}\n }}\n}}\n"))  # fmt: skip

    def undrop(self, table: str) -> None:
        self.sh("nft", "delete", "table", "inet", table)

    def close(self) -> None:
        for proc in self.procs:
            if proc.poll() is None:
                proc.kill()
            proc.communicate()
        subprocess.run(["ip", "netns", "delete", self.name], capture_output=True, timeout=20)


@pytest.fixture
def netns():
    """A fresh network namespace, deleted (with the processes started in it, its qdiscs
    and nftables tables) whatever the test does; skips with the reason where it cannot be
    made."""
    reason = netns_unavailable()
    if reason:
        pytest.skip(reason)
    name = f"semc-test-{os.getpid()}-{secrets.token_hex(3)}"
    made = subprocess.run(["ip", "netns", "add", name], capture_output=True, text=True)
    if made.returncode != 0:
        pytest.skip(f"cannot make a network namespace here: {made.stderr.strip()}")
    ns = NetNs(name)
    try:
        ns.sh("ip", "link", "set", "lo", "mtu", "1500", "up")
        yield ns
    finally:
        ns.close()


@pytest.fixture(scope="module")
def ns_stream(detector_model, sample_dir, tmp_path_factory) -> tuple[Path, Path]:
    """(the 6-frame stream as `edge-agent encode` writes it, its offline decode)."""
    from semcodec.cloud.cli import main as cloud_main
    from semcodec.edge.cli import main as edge_main

    folder = tmp_path_factory.mktemp("ns_stream")
    semc, offline = folder / "sample.semc", folder / "offline"
    assert edge_main(["-q", "encode", str(sample_dir), "-o", str(semc), *NS_ENCODE]) == 0
    assert cloud_main(["-q", "decode", str(semc), "-o", str(offline)]) == 0
    return semc, offline
