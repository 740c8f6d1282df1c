"""iRED through the collector, against the real softswitch and server: a
burst into a shaped port with iRED on makes the switch decide, and a second
burst is dropped in Ingress; the next poll sends an `ired_drop` event with the counts and the
queue average, which the server stores; a port without iRED sends none. Every
poll's queue sample of an iRED port carries the queue average, which the
server keeps beside the depth and serves in the port's queue series (the
console's Switches page plots it)."""

from __future__ import annotations

import asyncio
import datetime as dt

from p4relay_collector.service import Collector
from p4relay_collector.wire import IngestBatch
from p4relay_switch import SwitchClient
from p4relay_switch.ired import IredSettings, clear_ired, set_ired
from p4relay_testsupport import Server, Softswitch
from prometheus_client import REGISTRY
from test_softswitch import program_forwarding, send_udp, settings, through

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
            # A decision flags the port for the next packet to arrive; a busy host may
            # take the whole first burst into the queue before the first decision, so
            # the flag is consumed by the second burst.
            await asyncio.to_thread(send_udp, 20, 1200)
            await through(softswitch.address, 320)
            out += await col.poll_once()
            await asyncio.sleep(0.1)  # a later poll, nothing sent meanwhile (the scenario)
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

    # /metrics: the port's settings as the switch holds them, beside its counters.
    def sample(name: str, **labels: str) -> float | None:
        return REGISTRY.get_sample_value(name, {"switch": "soft-1", "dev_port": "2", **labels})

    for name, cells in (
        ("max_len_queue", s.max_len_queue),
        ("min", s.min_thsld),
        ("max", s.max_thsld),
    ):
        assert sample("p4relay_collector_ired_threshold_bytes", threshold=name) == cells * 80
    assert sample("p4relay_collector_ired_drop_prob") == s.drop_prob_reg / 65536
    assert sample("p4relay_collector_ired_mode", mode="ired_protect") == 1
    assert sample("p4relay_collector_ired_mode", mode="tail_drop") == 0
    assert sample("p4relay_collector_ired_drops_total") == p["ingress_drops"]

    stored = server.get("/api/v1/events", type="ired_drop")["items"]
    assert [(e["switch"], e["payload"]["dev_port"], e["payload"]["drops"]) for e in stored] == [
        ("soft-1", 2, p["drops"])
    ]

    # The queue average as telemetry: on port 2's samples (iRED on), the value the
    # poll read (the event carries the same reading), on no other port's.
    def qavg(b: IngestBatch) -> dict[int, int | None]:
        return {q.dev_port: q.ired_qavg_bytes for q in b.queue_samples}

    for b in (first, second, third):
        assert set(qavg(b)) >= {1, 2}, b.queue_samples
        assert all(v is None for port, v in qavg(b).items() if port != 2)
        assert isinstance(qavg(b)[2], int)
    read_qavg = p["qavg_bytes"]
    assert isinstance(read_qavg, int)
    assert qavg(second)[2] == read_qavg
    sw_id = server.get("/api/v1/switches")[0]["id"]
    start = min(q.ts for b in (first, second, third) for q in b.queue_samples)
    window: dict[str, str | int] = {
        "from": (start - dt.timedelta(seconds=5)).isoformat(),
        "to": (start + dt.timedelta(minutes=1)).isoformat(),
        "resolution_s": 1,
    }
    series = server.get(f"/api/v1/switches/{sw_id}/queues", **window)
    by_port = {s["dev_port"]: s["points"] for s in series}
    served = [pt["ired_qavg_bytes"] for pt in by_port[2]]
    # 1 s buckets average the polls that fell into them: never above the reading.
    assert served and all(v is not None and v <= read_qavg for v in served), served
    assert (max(served) > 0) == (read_qavg > 0), served
    assert all(pt["ired_qavg_bytes"] is None for pt in by_port[1])

    # iRED off on port 2 (an agent reload dropped it): its settings leave /metrics at
    # the next poll, its counters stay.
    async def turned_off() -> None:
        col = Collector(settings(server, congestion_onset_drops=0))
        try:
            await col.refresh_switches()
            await col.poll_once()
            async with SwitchClient(softswitch.address, client_id=9) as sw:
                await clear_ired(sw, 2, reset=False)
            await col.poll_once()
        finally:
            await col.close()

    asyncio.run(turned_off())
    assert sample("p4relay_collector_ired_mode", mode="ired_protect") is None
    assert sample("p4relay_collector_ired_threshold_bytes", threshold="min") is None
    assert sample("p4relay_collector_ired_qavg_bytes") is None
    assert sample("p4relay_collector_ired_drops_total") == p["ingress_drops"]
