"""Health for everyone (issue 53, item 4): with the shipped defaults one address asking for
4,100 unauthenticated health ``Watch`` streams holds 4 of them
(``max_watch_streams_per_peer``), the rest refused with RESOURCE_EXHAUSTED naming the cap
(or cancelled, when gRPC ends a connection whose streams are reset in a flood), and a
legitimate watcher from another address is answered SERVING at once. Real gRPC on the
loopback: the attacker from 127.0.0.1, the watcher from ::1 (the server listens on
``localhost``, both)."""

from __future__ import annotations

import asyncio
import socket
import time

import grpc
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc

from semcodec.cloud.service import server as server_module

from .conftest import start_server

ATTEMPTS, PER_CHANNEL = 4100, 32  # a connection carries 32 streams (the server's cap)


def _ipv6_loopback() -> bool:
    try:
        with socket.socket(socket.AF_INET6) as probe:
            probe.bind(("::1", 0))
        return True
    except OSError:
        return False


async def _attack(port: int, attempts: int) -> tuple[dict[str, int], list, list]:
    """``attempts`` Watch calls from 127.0.0.1; (their first answers by name, the calls,
    the channels), the calls still open."""
    options = (("grpc.use_local_subchannel_pool", 1),)  # a connection of its own each
    channels, calls = [], []
    for k in range(attempts):
        if k % PER_CHANNEL == 0:
            channels.append(grpc.aio.insecure_channel(f"127.0.0.1:{port}", options=options))
        calls.append(health_pb2_grpc.HealthStub(channels[-1]).Watch(
            health_pb2.HealthCheckRequest(service="")))  # fmt: skip

    async def first(call) -> str:
        try:
            reply = await asyncio.wait_for(call.read(), 60)
            return health_pb2.HealthCheckResponse.ServingStatus.Name(reply.status)
        except grpc.RpcError as exc:
            return exc.code().name

    answers = await asyncio.gather(*(first(call) for call in calls))
    counts: dict[str, int] = {}
    for answer in answers:
        counts[answer] = counts.get(answer, 0) + 1
    return counts, calls, channels


async def _watch(target: str) -> tuple[str, float]:
    start = time.monotonic()
    async with grpc.aio.insecure_channel(target) as channel:
        call = health_pb2_grpc.HealthStub(channel).Watch(health_pb2.HealthCheckRequest())
        try:
            reply = await asyncio.wait_for(call.read(), 10)
            name = health_pb2.HealthCheckResponse.ServingStatus.Name(reply.status)
        except grpc.RpcError as exc:
            name = f"{exc.code().name}: {exc.details()}"
        call.cancel()
    return name, time.monotonic() - start


def test_one_address_cannot_take_the_watch_streams_from_a_legitimate_watcher(tmp_path,
                                                                            monkeypatch,
                                                                            capsys):  # fmt: skip
    if not _ipv6_loopback():
        pytest.skip("no IPv6 loopback here: a second address is needed")
    monkeypatch.setattr(server_module, "check_decoder", lambda text: None)
    server = start_server(tmp_path, listen="localhost:0")

    async def scenario():
        counts, calls, channels = await _attack(server.port, ATTEMPTS)
        try:
            legit = await _watch(f"[::1]:{server.port}")
            again = await _watch(f"127.0.0.1:{server.port}")  # the attacker's address
        finally:
            for call in calls:
                call.cancel()
            for channel in channels:
                await channel.close()
        return counts, legit, again

    try:
        start = time.monotonic()
        counts, legit, again = asyncio.run(scenario())
        took = time.monotonic() - start
    finally:
        server.stop(0)
    with capsys.disabled():
        print(f"\n{ATTEMPTS} Watch calls from one address: {counts} in {took:.1f} s; a "
              f"watcher from ::1: {legit[0]} in {1000 * legit[1]:.0f} ms")  # fmt: skip
    # past the cap, refused; gRPC's own defence against streams reset in a flood ends some
    # of the attacker's connections (GOAWAY): their calls end CANCELLED
    assert counts.get("SERVING") == 4 and counts.get("RESOURCE_EXHAUSTED", 0) > ATTEMPTS / 3
    assert set(counts) <= {"SERVING", "RESOURCE_EXHAUSTED", "CANCELLED"}, counts
    assert legit[0] == "SERVING" and legit[1] < 2, legit
    assert again[0].startswith("RESOURCE_EXHAUSTED") and "max_watch_streams_per_peer" in again[0]


def test_the_forwarded_address_is_read_only_from_trusted_proxies():
    from semcodec.cloud.service.config import ConfigError, client_address, proxy_networks

    trusted = proxy_networks("10.0.0.0/8, 127.0.0.1")
    # a client behind two proxies; what it wrote itself is to the left
    assert client_address("10.0.0.5", "6.6.6.6, 198.51.100.7, 10.0.0.9", trusted) \
        == "198.51.100.7"  # fmt: skip
    assert client_address("[::1]", "198.51.100.7", proxy_networks("::1")) == "198.51.100.7"
    assert client_address("203.0.113.1", "198.51.100.7", trusted) == "203.0.113.1"  # untrusted
    assert client_address("127.0.0.1", "198.51.100.7", ()) == "127.0.0.1"  # none trusted
    assert client_address("127.0.0.1", "junk, 10.0.0.2", trusted) == "127.0.0.1"
    with pytest.raises(ConfigError, match="trusted_proxies 'nonsense'"):
        proxy_networks("10.0.0.0/8,nonsense")


def test_behind_a_trusted_proxy_watch_streams_are_capped_per_client(tmp_path, monkeypatch):
    """The proxy (127.0.0.1) says who each caller is: one client past its 4 watches is
    refused while another behind the same proxy is answered; without the proxy trusted, the
    header a caller writes itself changes nothing."""
    monkeypatch.setattr(server_module, "check_decoder", lambda text: None)

    async def watches(port: int, forwarded: list[str]) -> list[str]:
        channel = grpc.aio.insecure_channel(f"127.0.0.1:{port}")
        calls = [health_pb2_grpc.HealthStub(channel).Watch(
            health_pb2.HealthCheckRequest(), metadata=(("x-forwarded-for", who),))
            for who in forwarded]  # fmt: skip
        answers = []
        for call in calls:
            try:
                await asyncio.wait_for(call.read(), 10)
                answers.append("SERVING")
            except grpc.RpcError as exc:
                answers.append(exc.code().name)
        for call in calls:
            call.cancel()
        await channel.close()
        return answers

    clients = ["198.51.100.7"] * 5 + ["198.51.100.8"]
    for trusted in ("127.0.0.1", ""):
        server = start_server(tmp_path / (trusted or "none"), trusted_proxies=trusted)
        try:
            answers = asyncio.run(watches(server.port, clients))
        finally:
            server.stop(0)
        served = {who: sum(a == "SERVING" for w, a in zip(clients, answers, strict=True)
                           if w == who) for who in set(clients)}  # fmt: skip
        if trusted:  # each client its own 4
            assert served == {"198.51.100.7": 4, "198.51.100.8": 1}, answers
        else:  # all the proxy's: 4 in all
            assert sum(served.values()) == 4, answers
