"""The control-plane INT loop against the real softswitch and the real server:
telemetry reports (the sink's wire format) naming a hop two switches down
the watched destination's primary path over onset move the destination to
its backup (the switch's `reroute_active`), recorded at the server with the
hop; the hop clear for the hold time moves it back; reports from a source
that is not a configured sink, reports of the flow on its backup and a hop
under onset move nothing. Bad `[int_loop]` settings are refused."""

from __future__ import annotations

import asyncio
import socket
import struct
from pathlib import Path
from typing import Any

import pytest
from conftest import ROOT_ONLY, Bed
from p4relay_collector.config import Settings as CollectorSettings
from p4relay_collector.service import Collector
from p4relay_controlplane.config import ConfigError, Settings, load
from p4relay_controlplane.daemon import Daemon
from p4relay_switch.names import REG_REROUTE_ACTIVE
from p4relay_testsupport import Server, free_port, wait_for
from prometheus_client import REGISTRY
from pydantic import SecretStr

HOLD_MS = 300
S1, S3, S2, S4 = 0x51, 0x53, 0x52, 0x54  # INT ids: source, congested transit, sink, backup
SLOT = 3


def hop(sw: int, inp: int, outp: int, cells: int, lat_ns: int = 1000) -> bytes:
    return struct.pack("!IHHIII", sw, inp, outp, lat_ns, cells, 0)


def report(hops: list[bytes], dst: str = "198.18.99.10", seq: int = 1) -> bytes:
    """A report as the sink's egress emits it (hops newest first)."""
    n = len(hops)
    shim = bytes([0x10, 4 + 5 * n, 0, 0])
    md = bytes([0x20, 0x00, 5, 2 - n]) + struct.pack("!HHHH", 0xF100, 0, 0, 0)
    udp_payload = shim + md + b"".join(hops) + b"\x80" + bytes(11)
    udp = struct.pack("!HHHH", 4000, 6000, 8 + len(udp_payload), 0) + udp_payload
    ip = struct.pack(
        "!BBHHHBBH4s4s",
        *(0x45, 0x17 << 2, 20 + len(udp), 0, 0, 63, 17, 0),
        socket.inet_aton("198.18.91.10"),
        socket.inet_aton(dst),
    )
    frame = b"\x02" * 6 + b"\x04" * 6 + b"\x08\x00" + ip + udp
    group = struct.pack("!II", (2 << 28) | seq, S2)
    individual = bytes([0x13, (12 + len(frame) + 3) // 4, 0, 0x30]) + bytes(8)
    return group + individual + frame


def on_primary(s3_cells: int) -> bytes:
    """s1 by its primary port 2, s3 by port 2 (towards the sink) with this queue."""
    return report([hop(S3, 1, 2, s3_cells), hop(S1, 1, 2, 0)])


def sample(result: str) -> float | None:
    return REGISTRY.get_sample_value("p4relay_controlplane_int_reports_total", {"result": result})


def config(address: str, listen: str, forward: str = "") -> Settings:
    doc: dict[str, Any] = {
        "switch": "soft-int",
        "grpc_address": address,
        "client_id": 22,
        "metrics_listen": "",
        "reconcile_interval_s": 30,
        "nexthops": [
            {"id": 1, "port": 2, "src_mac": "02:00:00:00:00:01", "dst_mac": "02:00:00:00:00:99"},
            {"id": 2, "port": 1, "src_mac": "02:00:00:00:00:01", "dst_mac": "02:00:00:00:00:98"},
        ],
        "routes": [{"prefix": "198.18.99.0/24", "nexthop": 1}],
        "reroute": {
            "poll_ms": 20,
            # local detection off for this class (m = 0): only the loop moves it
            "classes": [{"flow_class": 1, "t_q_us": 100, "m": 0, "hold_ms": 60_000}],
            "watch": [
                {
                    "prefix": "198.18.99.0/24",
                    "slot": SLOT,
                    "flow_class": 1,
                    "primary_port": 2,
                    "backup_nexthop_id": 2,
                    "backup_port": 1,
                }
            ],
        },
        "int": {"switch_id": S1, "calls": "none"},
        "int_loop": {
            "listen": listen,
            "sources": ["127.0.0.1"],
            "forward": forward,
            "onset_cells": 400,
            "clear_cells": 100,
            "m": 2,
            "hold_ms": HOLD_MS,
            "switch_names": {str(S1): "s1", str(S3): "s3", str(S2): "s2"},
        },
    }
    return Settings.model_validate(doc)


@ROOT_ONLY
@pytest.mark.timeout(90)
async def test_hop_down_the_path_moves_and_returns(bed: Bed, server: Server) -> None:
    listen = f"127.0.0.1:{free_port()}"
    fwd = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    fwd.bind(("127.0.0.1", 0))
    fwd.settimeout(5)
    collector = Collector(
        CollectorSettings.model_validate(
            {
                "server_url": server.url,
                "token": SecretStr(server.ingest_token),
                "metrics_listen": "",
            }
        )
    )
    d = Daemon(
        config(bed.sw.address, listen, f"127.0.0.1:{fwd.getsockname()[1]}"), collector.submit
    )
    assert d.reroute is not None
    rc = d.reroute
    stop = asyncio.Event()
    task = asyncio.create_task(d.run(stop))
    host, port = listen.split(":")
    tx = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)

    def send(data: bytes) -> None:
        tx.sendto(data, (host, int(port)))

    async def active() -> int:
        return sum((await bed.probe.read_register(REG_REROUTE_ACTIVE, [SLOT]))[SLOT])

    try:
        await wait_for(lambda: d.int_loop is not None and d.int_loop._transport is not None)
        await wait_for(lambda: d.last_report is not None, within=20, what="configuration applied")
        loop = d.int_loop
        assert loop is not None
        # under onset, and one report over it (m = 2): nothing moves
        send(on_primary(150))
        send(on_primary(500))
        assert await asyncio.to_thread(fwd.recv, 4096) == on_primary(150)  # passed on as is
        await wait_for(lambda: loop.hops.get((S3, 2)) is not None and loop.hops[(S3, 2)].run == 1)
        assert rc.moves == 0 and await active() == 0
        # congestion on the backup path (s1 by port 1, then s4): not the watch's primary
        for _ in range(2):
            send(report([hop(S4, 1, 2, 900), hop(S1, 1, 1, 0)]))
        await wait_for(lambda: (S4, 2) in loop.hops and loop.hops[(S4, 2)].congested)
        # a forged report from a source that is not a sink: dropped before it counts
        bad = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        bad.bind(("127.0.0.2", 0))
        bad.sendto(on_primary(900), (host, int(port)))
        bad.close()
        await wait_for(lambda: (sample("foreign_source") or 0) >= 1, what="forged report counted")
        assert loop.hops[(S3, 2)].run == 1
        assert rc.moves == 0 and await active() == 0
        # m = 2 consecutive over onset on the primary: s3's port 2 congested, the flow moves
        send(on_primary(600))
        await wait_for(lambda: rc.moves == 1, within=5, what="moved by the INT loop")
        assert await active() == 1
        # the hop keeps reporting over clear: the flow stays on its backup
        for _ in range(4):
            send(report([hop(S3, 1, 2, 300), hop(S1, 1, 2, 0)]))
            await asyncio.sleep(HOLD_MS / 4000)  # the reports' pace, not a synchronisation
        assert rc.returns == 0 and await active() == 1
        # clear for the hold time: back on the primary
        send(on_primary(20))
        await wait_for(lambda: rc.returns == 1, within=5, what="moved back")
        assert await active() == 0
        # back too early (the hop still over clear): moved again at once, the hold doubled
        send(on_primary(300))
        await wait_for(lambda: rc.moves == 2, within=5, what="moved again")
        assert rc.episodes[SLOT].hold_ms == 2 * HOLD_MS and await active() == 1

        # A move is counted, then its event sent: all three at the server
        # before the collector (their sender) is closed.
        async def stored() -> bool:
            got = await asyncio.to_thread(server.get, "/api/v1/events", type="reroute")
            return len(got["items"]) >= 3

        await wait_for(stored, within=20, what="three events stored")
    finally:
        stop.set()
        await task
        await collector.close()
        tx.close()
        fwd.close()
    events = server.get("/api/v1/events", type="reroute")["items"]
    events.sort(key=lambda e: e["id"])
    assert [e["payload"]["direction"] for e in events] == ["to_backup", "to_primary", "to_backup"]
    away, back, again = (e["payload"] for e in events)
    assert (away["hold_ms"], again["hold_ms"]) == (HOLD_MS, 2 * HOLD_MS)
    assert away["detected_by"] == "int_control_plane"
    assert (away["hop_switch"], away["hop_port"], away["hop_queue_cells"]) == ("s3", 2, 600)
    assert away["reported_by"] == "s2" and away["int_path"] == "s1,s3"
    assert "s3 port 2" in away["trigger"] and away["to_path"] == "nexthop 2 port 1"
    assert back["detected_by"] == "int_control_plane"
    assert back["trigger"].startswith(f"hop {S3} port 2 clear for")


def test_bad_int_loop_config_is_refused(tmp_path: Path) -> None:
    p = tmp_path / "c.toml"
    base = (
        'switch = "s"\n[reroute]\nclasses = [{ flow_class = 1, t_q_us = 100, m = 1, hold_ms = 1 }]\n'
        'watch = [{ prefix = "10.0.0.0/8", slot = 1, flow_class = 1, primary_port = 1, '
        'backup_nexthop_id = 2 }]\n[int]\nswitch_id = 1\ncalls = "none"\n'
    )
    cases = {
        '[int_loop]\nlisten = "127.0.0.1:9"\nsources = []\n': "sources",
        '[int_loop]\nlisten = "nowhere"\nsources = ["127.0.0.1"]\n': "host:port",
        '[int_loop]\nlisten = "localhost:9"\nsources = ["127.0.0.1"]\n': "not an IPv4",
        '[int_loop]\nlisten = "127.0.0.1:9"\nsources = ["127.0.0.1"]\nclear_cells = 900\n': (
            "must not exceed"
        ),
        '[int_loop]\nlisten = "127.0.0.1:9"\nsources = ["127.0.0.1"]\nswitch_names = { x = "a" }\n': (
            "not an INT switch id"
        ),
    }
    for text, why in cases.items():
        p.write_text(base + text)
        with pytest.raises(ConfigError, match=why):
            load(p)
    p.write_text('switch = "s"\n[int_loop]\nlisten = "127.0.0.1:9"\nsources = ["127.0.0.1"]\n')
    with pytest.raises(ConfigError, match=r"needs \[reroute\]"):
        load(p)
    p.write_text(base + '[int_loop]\nlisten = "127.0.0.1:9"\nsources = ["127.0.0.1"]\n')
    cfg = load(p)
    assert cfg.int_loop is not None and cfg.int_loop.m == 2


def test_hop_latency_unused_is_a_threshold_no_hop_reaches() -> None:
    """`onset_us = 0`: depth only (Tofino 1's hop latency stops at 262 us)."""
    from p4relay_controlplane.desired import LATENCY_UNUSED_NS, desired
    from p4relay_switch.names import INT_HOP_CONFIG

    hops = [
        {"port": 2, "onset_cells": 400, "clear_cells": 100, "onset_us": 0, "clear_us": 0},
        {"port": 3, "onset_cells": 400, "clear_cells": 100, "onset_us": 200, "clear_us": 50},
    ]
    cfg = Settings.model_validate({"int": {"switch_id": 1, "calls": "none", "hops": hops}})
    got = {
        e.key["eg_intr_md.egress_port"]: e.data
        for e in desired(cfg).tables[INT_HOP_CONFIG].values()
    }
    assert (got[2]["onset_ns"], got[2]["clear_ns"]) == (LATENCY_UNUSED_NS, LATENCY_UNUSED_NS)
    assert (got[3]["onset_ns"], got[3]["clear_ns"]) == (200_000, 50_000)
    assert got[2]["onset_cells"] == 400
