"""iRED through the collector, against the real softswitch and server: a
burst into a shaped port with iRED on makes the switch decide and drop in
Ingress; the next poll sends an `ired_drop` event with the counts and the
queue average, which the server stores; a port without iRED sends none."""

from __future__ import annotations

import asyncio

from conftest import Server
from p4relay_collector.service import Collector
from p4relay_collector.wire import IngestBatch
from p4relay_switch import SwitchClient
from p4relay_switch.ired import IredSettings, set_ired
from p4relay_testsupport import Softswitch
from test_softswitch import program_forwarding, send_udp, settings

CELLS = 15  # a 1200-byte frame is 15 cells of 80 bytes


async def enable_ired(address: str) -> IredSettings:
    s = IredSettings(max_len_queue=2 * (10 * CELLS + 4 * CELLS), n_drop=4 * CELLS, drop_prob=1.0)
    async with SwitchClient(address, client_id=9) as sw:
        await set_ired(sw, 2, s)
    return s


def test_ired_drops_become_events(server: Server, softswitch: Softswitch) -> None:
    server.cli("register-switch", "--name", "soft-1", "--grpc-address", softswitch.address)
    asyncio.run(program_forwarding(softswitch.address))
    s = asyncio.run(enable_ired(softswitch.address))

    async def scenario() -> list[IngestBatch]:
        col = Collector(settings(server, congestion_onset_drops=0))
        out: list[IngestBatch] = []
        try:
            await col.refresh_switches()
            out += await col.poll_once()  # baseline
            await asyncio.to_thread(send_udp, 300, 1200)
            await asyncio.sleep(0.5)
            out += await col.poll_once()
            await asyncio.sleep(0.1)
            out += await col.poll_once()  # nothing new: no event
            return out
        finally:
            await col.close()

    first, second, third = asyncio.run(scenario())
    assert [e.type for e in first.events] == ["switch_up"]
    (ev,) = [e for e in second.events if e.type == "ired_drop"]
    p = ev.payload
    assert p["dev_port"] == 2 and p["mode"] == "ired" and p["protect"] is True
    assert isinstance(p["decisions"], int) and p["decisions"] > 0
    assert isinstance(p["ingress_drops"], int) and 0 < p["ingress_drops"] <= p["decisions"]
    assert isinstance(p["tail_drops"], int)
    assert p["drops"] == p["ingress_drops"] + p["tail_drops"]
    assert p["flags_set"] == p["decisions"]
    assert p["min_thsld_bytes"] == s.min_thsld * 80 and p["max_thsld_bytes"] == s.max_thsld * 80
    assert [e.type for e in third.events if e.type == "ired_drop"] == []

    stored = server.get("/api/v1/events", type="ired_drop").json()["items"]
    assert [(e["switch"], e["payload"]["dev_port"], e["payload"]["drops"]) for e in stored] == [
        ("soft-1", 2, p["drops"])
    ]
