"""The collector against the real softswitch binary and the real server: UDP
sent from the namespace is forwarded by the switch (port 1 -> port 2), the
collector's samples must show it, a burst over the shaped port's queue must
open and then close a congestion episode, and a crashed switch must be
reported down once. Everything is checked through the server's read API."""

from __future__ import annotations

import asyncio
import datetime as dt
import subprocess
import tomllib

from conftest import LINKS, NS, ROOT
from p4relay_collector.config import Settings
from p4relay_collector.poller import SwitchPoller
from p4relay_collector.service import Collector
from p4relay_collector.wire import IngestBatch, QueueSample, SwitchInfo
from p4relay_switch import Endpoint, Nexthop, Pipeline, RelayCall, SwitchClient
from p4relay_testsupport import Server, Softswitch, free_port, wait_for
from pydantic import SecretStr


async def program_forwarding(address: str) -> None:
    async with SwitchClient(address, client_id=9) as sw:
        p = Pipeline(sw)
        await p.add_nexthops(
            [Nexthop(1, port=2, src_mac="02:00:00:00:00:01", dst_mac="02:00:00:00:00:99")]
        )
        await p.add_routes([("198.18.99.0/24", 1)])


async def install_call(address: str, n: int) -> None:
    """One offloaded call: 4 relay entries (RTP and RTCP, both ways)."""
    async with SwitchClient(address, client_id=9) as sw:
        call = RelayCall.between(
            a=Endpoint.of("198.18.1.10", 6000 + 2 * n),
            relay_a=Endpoint.of("198.18.0.10", 20000 + 4 * n),
            b=Endpoint.of("198.18.2.10", 7000 + 2 * n),
            relay_b=Endpoint.of("198.18.0.10", 20002 + 4 * n),
            legs=(2 * n, 2 * n + 1),
            ports=(1, 2),
        )
        await Pipeline(sw).install_call(call, ttl_ms=600_000)


async def through(address: str, sent: int, *, rx_port: int = 1, tx_port: int = 2) -> None:
    """Until the switch has taken `sent` frames in on `rx_port` and `tx_port`'s
    queue is empty again: each one forwarded or dropped, counted where it was."""
    async with SwitchClient(address, client_id=9) as sw:

        async def done() -> bool:
            rx = (await sw.port_stats([rx_port]))[rx_port].get("$FramesReceivedOK", 0)
            return rx >= sent and (await sw.queue_stats(tx_port))["usage_cells"] == 0

        await wait_for(done, within=10.0, what=f"{sent} frames through the switch")


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


def settings(server: Server, **kw: float | int) -> Settings:
    return Settings.model_validate(
        {
            "server_url": server.url,
            "token": SecretStr(server.ingest_token),
            "bfrt_timeout_s": 3.0,
            "metrics_listen": "",
            **kw,
        }
    )


def test_collector_polls_softswitch_and_server_stores_it(
    server: Server, softswitch: Softswitch
) -> None:
    server.cli("register-switch", "--name", "soft-1", "--grpc-address", softswitch.address)
    asyncio.run(program_forwarding(softswitch.address))
    asyncio.run(install_call(softswitch.address, 0))

    async def scenario() -> list[IngestBatch]:
        col = Collector(settings(server, congestion_onset_drops=0))
        try:
            await col.refresh_switches()
            assert list(col.pollers) == ["soft-1"]
            (first,) = await col.poll_once()
            await install_call(softswitch.address, 1)
            await asyncio.to_thread(send_udp, 40)
            await through(softswitch.address, 40)
            (second,) = await col.poll_once()
            assert softswitch.proc is not None
            softswitch.proc.kill()  # the switch crashes
            softswitch.proc.wait(5)
            (third,) = await col.poll_once()
            (fourth,) = await col.poll_once()  # still down: no second switch_down
            assert not col.backlog
            return [first, second, third, fourth]
        finally:
            await col.close()

    first, second, third, fourth = asyncio.run(scenario())
    assert first.switch is not None and second.switch is not None and third.switch is not None
    assert [p.dev_port for p in first.switch.ports] == [1, 2]
    assert [p.name for p in first.switch.ports] == list(LINKS)
    assert [p.speed_mbps for p in first.switch.ports] == [10, 10]
    assert [e.type for e in first.events] == ["switch_up"]
    # Relay table occupancy: one call (4 entries), then two; size from bfrt.json.
    capacity = softswitch_relay_size()
    assert (first.switch.relay_table_used, first.switch.relay_table_capacity) == (4, capacity)
    assert (second.switch.relay_table_used, second.switch.relay_table_capacity) == (8, capacity)
    assert third.switch.relay_table_used is None  # down: nothing read, the last value stays
    port2 = next(s for s in second.queue_samples if s.dev_port == 2)
    assert port2.tx_packets is not None and port2.tx_packets >= 40
    assert port2.tx_bytes is not None and port2.tx_bytes >= 40 * 200
    assert port2.utilisation is not None and port2.utilisation > 0
    assert third.switch.up is False and [e.type for e in third.events] == ["switch_down"]
    assert fourth.events == [] and fourth.queue_samples == []

    # What the server stored, through its read API.
    (sw,) = server.get("/api/v1/switches")
    assert (sw["up"], sw["relay_table_used"], sw["relay_table_capacity"]) == (False, 8, capacity)
    assert [(p["dev_port"], p["name"]) for p in sw["ports"]] == [(1, LINKS[0]), (2, LINKS[1])]
    series = server.get(f"/api/v1/switches/{sw['id']}/queues", dev_port=2)
    points = [pt for s in series for pt in s["points"]]
    assert points
    assert max(pt["utilisation"] or 0 for pt in points) > 0
    events = server.get("/api/v1/events")["items"]
    assert sorted(e["type"] for e in events) == ["switch_down", "switch_up"]


def test_burst_over_shaped_port_opens_and_closes_congestion(
    server: Server, softswitch: Softswitch
) -> None:
    """300 frames at once into a 10 Mbit/s port with a 64-frame queue: tail
    drops open an episode on port 2; three quiet polls close it."""
    server.cli("register-switch", "--name", "soft-1", "--grpc-address", softswitch.address)
    asyncio.run(program_forwarding(softswitch.address))

    async def scenario() -> list[IngestBatch]:
        col = Collector(settings(server, congestion_clear_polls=3))
        out: list[IngestBatch] = []
        try:
            await col.refresh_switches()
            out += await col.poll_once()
            await asyncio.to_thread(send_udp, 300, 1200)
            await through(softswitch.address, 300)  # 64 x 1.2 kB at 10 Mbit/s: 63 ms
            out += await col.poll_once()
            assert col.congestion.open_episodes() == [("soft-1", 2, 0)]
            for _ in range(3):
                await asyncio.sleep(0.1)  # the poll interval (the scenario)
                out += await col.poll_once()
            assert col.congestion.open_episodes() == []
            return out
        finally:
            await col.close()

    batches = asyncio.run(scenario())
    kinds = [[e.type for e in b.events] for b in batches]
    assert kinds == [["switch_up"], ["congestion_onset"], [], [], ["congestion_clear"]]
    onset = batches[1].events[0]
    assert onset.payload["dev_port"] == 2 and onset.payload["trigger"] == "drops"
    drops = onset.payload["drops"]
    assert isinstance(drops, int) and drops >= 100
    sample = next(s for s in batches[1].queue_samples if s.dev_port == 2)
    assert sample.drops == drops
    clear = batches[4].events[0]
    assert clear.payload["dev_port"] == 2 and clear.payload["drops"] == drops

    stored = server.get("/api/v1/events", type="congestion_onset")["items"]
    assert [(e["switch"], e["payload"]["dev_port"], e["severity"]) for e in stored] == [
        ("soft-1", 2, "warning")
    ]
    stored = server.get("/api/v1/events", type="congestion_clear")["items"]
    assert [(e["switch"], e["payload"]["dev_port"]) for e in stored] == [("soft-1", 2)]


def test_poller_reports_unreachable_switch() -> None:
    async def go() -> tuple[bool, int, list[str], str | None]:
        p = SwitchPoller("ghost", f"127.0.0.1:{free_port()}", 0, timeout_s=0.5)
        got = await p.poll()
        await p.close()
        return got.switch.up, len(got.samples), [e.type for e in got.events], got.events[0].message

    up, n, kinds, message = asyncio.run(go())
    assert (up, n, kinds) == (False, 0, ["switch_down"])
    assert message is not None and "BfRt poll failed" in message


def test_backlog_survives_a_refused_token_and_the_server_replays_retries(server: Server) -> None:
    """Batches the server will not take yet (wrong token) stay in order; once
    the token is right they are delivered, and re-sending one is a replay."""
    batch = IngestBatch(
        idempotency_key="collector-test-0001",
        switch=SwitchInfo(name="soft-9", up=True),
        queue_samples=[
            QueueSample(
                switch="soft-9", dev_port=3, ts=dt.datetime.now(dt.UTC), depth_bytes=800, drops=2
            )
        ],
    )

    async def scenario() -> tuple[int, int]:
        col = Collector(settings(server).model_copy(update={"token": SecretStr("p4r_no_tok")}))
        try:
            col.backlog.append(batch)
            await col.flush()
            kept = len(col.backlog)
            col.http.headers["Authorization"] = f"Bearer {server.ingest_token}"
            await col.flush()
            assert not col.backlog
            r = await col.http.post(
                "/api/v1/ingest",
                content=batch.model_dump_json(exclude_none=True),
                headers={"Content-Type": "application/json"},
            )
            assert r.status_code == 200 and r.json()["replayed"] is True
            return kept, len(col.backlog)
        finally:
            await col.close()

    assert asyncio.run(scenario()) == (1, 0)
    (sw,) = server.get("/api/v1/switches")
    assert sw["name"] == "soft-9"
    series = server.get(f"/api/v1/switches/{sw['id']}/queues", dev_port=3)
    assert [pt["drops"] for s in series for pt in s["points"]] == [2]


def test_concurrent_flushes_send_each_batch_once(server: Server) -> None:
    """The poll loop and the control plane may flush at the same time: each
    batch still reaches the server, in order, and none is dropped unsent
    (re-sending any of them afterwards is a replay)."""
    now = dt.datetime.now(dt.UTC)
    batches = [
        IngestBatch(
            idempotency_key=f"collector-test-flush-{n}",
            switch=SwitchInfo(name="soft-8", up=True),
            queue_samples=[
                QueueSample(switch="soft-8", dev_port=4, ts=now, depth_bytes=80, drops=n)
            ],
        )
        for n in (1, 2, 3)
    ]

    async def scenario() -> tuple[int, list[bool]]:
        col = Collector(settings(server))
        try:
            col.backlog.extend(batches)
            await asyncio.gather(col.flush(), col.flush(), col.flush())
            replayed = []
            for b in batches:
                r = await col.http.post(
                    "/api/v1/ingest",
                    content=b.model_dump_json(exclude_none=True),
                    headers={"Content-Type": "application/json"},
                )
                assert r.status_code == 200, r.text
                replayed.append(bool(r.json()["replayed"]))
            return len(col.backlog), replayed
        finally:
            await col.close()

    assert asyncio.run(scenario()) == (0, [True, True, True])
