"""The switch telemetry collector against the real softswitch binary: ports
are veth pairs whose far ends sit in a network namespace (p4rsrvc); UDP sent
from there is forwarded by the switch, and the collector's samples must show
it. The collector posts to the real API (ASGI transport)."""

from __future__ import annotations

import asyncio
import contextlib
import datetime as dt
import os
import socket
import subprocess
import time
import tomllib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from conftest import Auth
from fastapi.testclient import TestClient
from p4relay_server.collector import PortReading, SwitchPoller, derive_sample
from p4relay_server.config import Settings
from p4relay_server.models import Event, QueueSample, SwitchPort
from pydantic import SecretStr
from sqlalchemy import Engine, func, select

ROOT = Path(__file__).resolve().parents[2]
BINARY = Path(
    os.environ.get("P4RELAY_SOFTSWITCH_BIN", ROOT / "switch/target/release/p4relay-softswitch")
)
NS = "p4rsrvc"
LINKS = ("p4rsc1", "p4rsc2")  # switch side; peers are <name>n inside NS
LINE_RATE = 10_000_000  # bit/s, so utilisation is visible with a few hundred packets


def sh(*cmd: str) -> None:
    subprocess.run(cmd, check=True, capture_output=True, timeout=20)


def teardown_net() -> None:
    for link in LINKS:
        subprocess.run(["ip", "link", "del", link], capture_output=True, check=False)
    subprocess.run(["ip", "netns", "del", NS], capture_output=True, check=False)


@pytest.fixture
def veths() -> Iterator[None]:
    teardown_net()
    sh("ip", "netns", "add", NS)
    try:
        for i, link in enumerate(LINKS, start=1):
            sh("ip", "link", "add", link, "type", "veth", "peer", "name", f"{link}n", "netns", NS)
            sh("ip", "link", "set", link, "up")
            sh("ip", "-n", NS, "link", "set", f"{link}n", "up")
            sh("ip", "-n", NS, "addr", "add", f"198.18.9{i}.10/24", "dev", f"{link}n")
        # Traffic from the namespace to 198.18.92.0/24 leaves by port 1's link.
        sh("ip", "-n", NS, "route", "add", "198.18.99.0/24", "dev", "p4rsc1n")
        sh(
            "ip",
            "-n",
            NS,
            "neigh",
            "add",
            "198.18.99.10",
            "lladdr",
            "02:00:00:00:00:02",
            "dev",
            "p4rsc1n",
        )
        yield
    finally:
        teardown_net()


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextlib.contextmanager
def softswitch(tmp_path: Path) -> Iterator[tuple[str, subprocess.Popen[bytes]]]:
    if not BINARY.is_file():
        pytest.fail(f"{BINARY} not built: run `cd switch && cargo build --release`")
    grpc = free_port()
    address = f"127.0.0.1:{grpc}"
    log = open(tmp_path / "softswitch.log", "wb")  # noqa: SIM115
    proc = subprocess.Popen(
        [
            str(BINARY),
            "--grpc-listen",
            address,
            "--metrics-listen",
            f"127.0.0.1:{free_port()}",
            "--port",
            f"1={LINKS[0]}",
            "--port",
            f"2={LINKS[1]}",
            "--line-rate",
            str(LINE_RATE),
            "--workers",
            "1",
        ],
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    try:
        deadline = time.monotonic() + 15
        while True:
            assert proc.poll() is None, (tmp_path / "softswitch.log").read_text()[-2000:]
            with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", grpc), 0.2):
                break
            assert time.monotonic() < deadline, "softswitch did not listen"
            time.sleep(0.05)
        yield address, proc
    finally:
        proc.terminate()
        try:
            proc.wait(5)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        log.close()


async def program_forwarding(address: str) -> None:
    from p4relay_switch import Nexthop, Pipeline, SwitchClient

    async with SwitchClient(address, client_id=9) as sw:
        p = Pipeline(sw)
        await p.add_nexthops(
            [Nexthop(1, port=2, src_mac="02:00:00:00:00:01", dst_mac="02:00:00:00:00:99")]
        )
        await p.add_routes([("198.18.99.0/24", 1)])


async def install_call(address: str, n: int) -> None:
    """One offloaded call: 4 relay entries (RTP and RTCP, both ways)."""
    from p4relay_switch import Endpoint, Pipeline, RelayCall, SwitchClient

    async with SwitchClient(address, client_id=9) as sw:
        call = RelayCall.between(
            a=Endpoint.of("198.18.1.10", 6000 + 2 * n),
            relay_a=Endpoint.of("198.18.0.10", 20000 + 4 * n),
            b=Endpoint.of("198.18.2.10", 7000 + 2 * n),
            relay_b=Endpoint.of("198.18.0.10", 20002 + 4 * n),
            legs=(2 * n, 2 * n + 1),
        )
        await Pipeline(sw).install_call(call, ttl_ms=600_000)


def softswitch_relay_size() -> int:
    with open(ROOT / "switch/contract.toml", "rb") as f:
        return int(tomllib.load(f)["config"]["relay_entries_softswitch"])


def send_udp(n: int, size: int = 172) -> None:
    code = (
        "import socket\n"
        "s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)\n"
        f"for _ in range({n}): s.sendto(b'x' * {size}, ('198.18.99.10', 40000))\n"
    )
    subprocess.run(["ip", "netns", "exec", NS, "python3", "-c", code], check=True, timeout=30)


def test_derive_sample_arithmetic() -> None:
    t = dt.datetime(2026, 1, 1, tzinfo=dt.UTC)
    prev = PortReading(
        1, "p", True, 1e6, tx_packets=10, tx_bytes=1000, usage_cells=0, queue_drops=5
    )
    cur = PortReading(
        1, "p", True, 1e6, tx_packets=60, tx_bytes=63_500, usage_cells=25, queue_drops=7
    )
    s = derive_sample("sw", prev, cur, 0.5, t)
    assert s.depth_bytes == 25 * 80
    assert s.queue_delay_us == pytest.approx(2000 * 8 / 1e6 * 1e6)  # 16 ms at 1 Mbit/s
    assert s.utilisation == pytest.approx(62_500 * 8 / 0.5 / 1e6)
    assert (s.drops, s.tx_packets, s.tx_bytes) == (2, 50, 62_500)
    reset = derive_sample("sw", cur, PortReading(1, "p", True, None, 3, 300, 0, 1), 1.0, t)
    assert (reset.drops, reset.tx_packets, reset.utilisation, reset.queue_delay_us) == (
        1,
        3,
        None,
        None,
    )
    first = derive_sample("sw", None, cur, 0.0, t)
    assert (first.utilisation, first.drops, first.tx_packets) == (None, 0, None)


def test_collector_polls_softswitch_and_stores_samples(
    veths: None, tmp_path: Path, client: TestClient, auth: Auth, clean: Engine, app: Any
) -> None:
    with softswitch(tmp_path) as (address, proc):
        r = client.post(
            "/api/v1/switches", json={"name": "soft-1", "grpc_address": address}, headers=auth.admin
        )
        assert r.status_code == 201
        asyncio.run(program_forwarding(address))
        asyncio.run(install_call(address, 0))

        from p4relay_server.collector import Collector

        settings = Settings(
            database_url="unused://",
            collector={"token": SecretStr(auth.ingest_token), "bfrt_timeout_s": 3.0},
        )

        async def scenario() -> list[Any]:
            http = httpx.AsyncClient(
                transport=httpx.ASGITransport(app=app), base_url="http://server"
            )
            col = Collector(settings, http=http)
            await col.refresh_switches()
            assert list(col.pollers) == ["soft-1"]
            first = await col.poll_once()
            await install_call(address, 1)
            await asyncio.to_thread(send_udp, 300)
            await asyncio.sleep(0.3)
            second = await col.poll_once()
            proc.kill()  # the switch crashes
            proc.wait(5)
            third = await col.poll_once()
            fourth = await col.poll_once()  # still down: no second switch_down
            for p in col.pollers.values():
                await p.close()
            assert not col.backlog
            await http.aclose()
            return [first, second, third, fourth]

        batches = asyncio.run(scenario())

    first, second, third, fourth = (b[0] for b in batches)
    assert [p.dev_port for p in first.switch.ports] == [1, 2]
    assert [p.name for p in first.switch.ports] == list(LINKS)
    assert [e.type for e in first.events] == ["switch_up"]
    # Relay table occupancy: one call (4 entries), then two; size from bfrt.json.
    capacity = softswitch_relay_size()
    assert (first.switch.relay_table_used, first.switch.relay_table_capacity) == (4, capacity)
    assert (second.switch.relay_table_used, second.switch.relay_table_capacity) == (8, capacity)
    assert third.switch.relay_table_used is None  # down: nothing read, the last value stays
    port2 = next(s for s in second.queue_samples if s.dev_port == 2)
    assert port2.tx_packets is not None and port2.tx_packets >= 300
    assert port2.tx_bytes is not None and port2.tx_bytes >= 300 * 200
    assert port2.utilisation is not None and port2.utilisation > 0
    assert third.switch.up is False and [e.type for e in third.events] == ["switch_down"]
    assert fourth.events == [] and fourth.queue_samples == []

    with clean.connect() as c:
        stored = c.execute(
            select(func.count(), func.sum(QueueSample.tx_packets)).where(QueueSample.dev_port == 2)
        ).one()
        ports = c.execute(
            select(SwitchPort.dev_port, SwitchPort.name).order_by(SwitchPort.dev_port)
        ).all()
        events = [t for (t,) in c.execute(select(Event.type).order_by(Event.id))]
    assert stored[0] == 2 and stored[1] >= 300
    assert [tuple(p) for p in ports] == [(1, LINKS[0]), (2, LINKS[1])]
    assert events == ["switch_up", "switch_down"]
    sw = client.get("/api/v1/switches", headers=auth.viewer).json()[0]
    assert (sw["up"], sw["relay_table_used"], sw["relay_table_capacity"]) == (False, 8, capacity)


def test_poller_reports_unreachable_switch() -> None:
    async def go() -> Any:
        p = SwitchPoller("ghost", f"127.0.0.1:{free_port()}", 0, timeout_s=0.5)
        return await p.poll()

    info, samples, events = asyncio.run(go())
    assert info.up is False and samples == []
    assert events[0].type == "switch_down" and "BfRt poll failed" in (events[0].message or "")
