"""`p4relay-reroute` against the real softswitch and the real server: a burst
into the shaped port moves the watched destination to its backup in the data
plane, the daemon records it as a `reroute` event (flow, paths, trigger),
and once the primary port has stayed clear for the hold time it moves the flow
back (a second event) and the switch forwards by the primary again. Bad
configuration is refused with a clear message."""

from __future__ import annotations

import asyncio
import datetime as dt
import ipaddress
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from conftest import shaped_switch
from p4relay_collector.config import ConfigError, Settings
from p4relay_collector.reroute import RerouteAgent, RerouteConfig, load_config
from p4relay_collector.service import Collector
from p4relay_switch import Nexthop, Pipeline, SwitchClient
from p4relay_testsupport import Server, Softswitch
from pydantic import SecretStr

HOLD_MS = 400
# Namespace and links of their own, so this module can run beside the other
# softswitch tests of the collector.
NS = "p4rrrt"
LINKS = ("p4rrt1", "p4rrt2")


@pytest.fixture
def rr_switch(tmp_path: Path) -> Iterator[Softswitch]:
    """Two ports at 10 Mbit/s; traffic from NS to 198.18.99.0/24 enters by port 1."""
    with shaped_switch(tmp_path / "softswitch.log", NS, LINKS) as sw:
        yield sw


def send_udp(n: int, size: int) -> None:
    code = (
        "import socket\n"
        "s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)\n"
        f"for _ in range({n}): s.sendto(b'x' * {size}, ('198.18.99.10', 40000))\n"
    )
    subprocess.run(["ip", "netns", "exec", NS, "python3", "-c", code], check=True, timeout=30)


def config(address: str) -> RerouteConfig:
    return RerouteConfig.model_validate(
        {
            "switch": "soft-rr",
            "grpc_address": address,
            "client_id": 21,
            "poll_ms": 20,
            "classes": [
                {"flow_class": 0, "t_q_us": 1000, "m": 1, "hold_ms": HOLD_MS},
                {"flow_class": 1, "t_q_us": 1000, "m": 5, "hold_ms": HOLD_MS},
            ],
            "watch": [
                {
                    "prefix": "198.18.99.0/24",
                    "slot": 3,
                    "flow_class": 1,
                    "primary_port": 2,
                    "backup_nexthop_id": 2,
                    "backup_port": 1,
                }
            ],
        }
    )


async def routes(address: str) -> None:
    """198.18.99.0/24 by port 2 (primary); next hop 2 (port 1) is the backup."""
    async with SwitchClient(address, client_id=9) as sw:
        p = Pipeline(sw)
        await p.add_nexthops(
            [
                Nexthop(1, port=2, src_mac="02:00:00:00:00:01", dst_mac="02:00:00:00:00:99"),
                Nexthop(2, port=1, src_mac="02:00:00:00:00:01", dst_mac="02:00:00:00:00:98"),
            ]
        )
        await p.add_routes([("198.18.99.0/24", 1)])


def test_reroute_recorded_and_moved_back_after_hold(server: Server, rr_switch: Softswitch) -> None:
    softswitch = rr_switch
    asyncio.run(routes(softswitch.address))
    collector = Collector(
        Settings.model_validate(
            {
                "server_url": server.url,
                "token": SecretStr(server.ingest_token),
                "metrics_listen": "",
            }
        )
    )
    agent = RerouteAgent(config(softswitch.address), collector.submit)

    async def scenario() -> tuple[float, float]:
        stop = asyncio.Event()
        task = asyncio.create_task(agent.run(stop))
        try:
            deadline = time.monotonic() + 10
            while not agent.client.connected:
                assert time.monotonic() < deadline, "agent did not connect"
                await asyncio.sleep(0.05)
            await asyncio.sleep(0.3)  # classes and watches installed
            # 300 x 1000 bytes at once into a 10 Mbit/s port: the queue holds ms
            await asyncio.to_thread(send_udp, 300, 1000)
            t_sent = time.monotonic()
            while agent.moves == 0:
                assert time.monotonic() - t_sent < 5, "no reroute digest"
                await asyncio.sleep(0.01)
            t_moved = time.monotonic()
            assert (await agent.rr.active([3]))[3] is True
            while agent.returns == 0:
                assert time.monotonic() - t_moved < 10, "never moved back"
                await asyncio.sleep(0.02)
            t_back = time.monotonic()
            assert (await agent.rr.active([3]))[3] is False
            return t_moved - t_sent, t_back - t_moved
        finally:
            stop.set()
            await task
            await collector.close()

    moved_after, back_after = asyncio.run(scenario())
    assert moved_after < 1.0
    assert back_after < 10
    events = server.get("/api/v1/events", type="reroute")["items"]
    assert len(events) == 2, events
    by_dir = {e["payload"]["direction"]: e for e in events}
    away, back = by_dir["to_backup"], by_dir["to_primary"]
    # The primary was hot until the queue drained (~0.05 s), then clear for the
    # hold time: timed by the daemon's own event stamps (this test's polling of
    # agent.moves can lag the move on a loaded machine).
    held = dt.datetime.fromisoformat(back["ts"]) - dt.datetime.fromisoformat(away["ts"])
    assert held.total_seconds() >= HOLD_MS / 1000, (away["ts"], back["ts"])
    assert away["payload"]["flow"] == "198.18.99.0/24"
    assert away["payload"]["from_path"] == "port 2"
    assert away["payload"]["to_path"] == "nexthop 2 port 1"
    assert away["payload"]["run"] == 5
    assert away["payload"]["queue_delay_ns"] > 1_000_000
    assert "t_q 1.000 ms for 5 packets" in away["payload"]["trigger"]
    assert back["payload"]["to_path"] == "port 2"
    assert away["switch"] == "soft-rr"


def test_bad_config_is_refused(tmp_path: Path) -> None:
    p = tmp_path / "r.toml"
    base = '[reroute]\nswitch = "s"\ngrpc_address = "127.0.0.1:1"\n'
    p.write_text(
        base
        + '[[reroute.watch]]\nprefix = "10.0.0.0/8"\nslot = 1\nflow_class = 9\nprimary_port = 1\n'
    )
    with pytest.raises(ConfigError, match="flow class 9"):
        load_config(p)
    p.write_text(
        base
        + '[[reroute.watch]]\nprefix = "10.0.0.0/8"\nslot = 4096\nflow_class = 0\nprimary_port = 1\n'
    )
    with pytest.raises(ConfigError, match="slot"):
        load_config(p)
    p.write_text(
        base + "[[reroute.classes]]\nflow_class = 0\nt_q_us = 1\nm = 1\nhold_ms = 1\n"
        '[[reroute.watch]]\nprefix = "10.0.0.0/8"\nslot = 1\nflow_class = 0\nprimary_port = 1\n'
        '[[reroute.watch]]\nprefix = "10.1.0.0/16"\nslot = 1\nflow_class = 0\nprimary_port = 1\n'
    )
    with pytest.raises(ConfigError, match="share a slot"):
        load_config(p)
    p.write_text(base + "bogus = 1\n")
    with pytest.raises(ConfigError, match="bogus"):
        load_config(p)
    p.write_text("not toml [")
    with pytest.raises(ConfigError):
        load_config(p)
    ok = base + "[[reroute.classes]]\nflow_class = 1\nt_q_us = 250.5\nm = 3\nhold_ms = 2000\n"
    p.write_text(
        ok
        + '[[reroute.watch]]\nprefix = "198.18.2.0/24"\nslot = 0\nflow_class = 1\nprimary_port = 2\n'
    )
    cfg = load_config(p)
    assert cfg.reroute_classes()[0].t_q_ns == 250_500
    w = cfg.watches()[0]
    assert w.prefix == ipaddress.IPv4Network("198.18.2.0/24") and w.backup_nexthop_id is None
