"""Congestion reroute, decided by the daemon, against the real softswitch and
the real server: the daemon installs its routes, classes and watch; a burst
into the shaped port moves the watched destination to its backup in the data
plane, the daemon records it as a `reroute` event (flow, paths, trigger), and
once the primary port has stayed clear for the hold time it moves the flow
back (a second event) and the switch forwards by the primary again. Bad
configuration is refused with a clear message."""

from __future__ import annotations

import asyncio
import datetime as dt
import ipaddress
import struct
import subprocess
import time
from pathlib import Path

import pytest
from conftest import ROOT_ONLY, Bed, sh
from p4relay_collector.config import Settings as CollectorSettings
from p4relay_collector.service import Collector
from p4relay_collector.wire import IngestBatch
from p4relay_controlplane.config import ConfigError, Settings, load
from p4relay_controlplane.daemon import Daemon
from p4relay_testsupport import Server, Softswitch, wait_for
from pydantic import SecretStr

HOLD_MS = 400


def send_udp(ns: str, n: int, size: int) -> None:
    send_udp_to(ns, "198.18.99.10", n, size)


def send_udp_to(ns: str, dst: str, n: int, size: int) -> None:
    code = (
        "import socket\n"
        "s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)\n"
        f"for _ in range({n}): s.sendto(b'x' * {size}, ('{dst}', 40000))\n"
    )
    subprocess.run(["ip", "netns", "exec", ns, "python3", "-c", code], check=True, timeout=30)


async def _reroutes_at(server: Server, n: int) -> bool:
    """The server holds `n` reroute events."""
    got = await asyncio.to_thread(server.get, "/api/v1/events", type="reroute")
    return len(got["items"]) >= n


def config(address: str) -> Settings:
    """198.18.99.0/24 by port 2 (primary, next hop 1); next hop 2 (port 1) is the backup."""
    return Settings.model_validate(
        {
            "switch": "soft-rr",
            "grpc_address": address,
            "client_id": 21,
            "metrics_listen": "",
            "reconcile_interval_s": 30,
            "nexthops": [
                {
                    "id": 1,
                    "port": 2,
                    "src_mac": "02:00:00:00:00:01",
                    "dst_mac": "02:00:00:00:00:99",
                },
                {
                    "id": 2,
                    "port": 1,
                    "src_mac": "02:00:00:00:00:01",
                    "dst_mac": "02:00:00:00:00:98",
                },
            ],
            "routes": [{"prefix": "198.18.99.0/24", "nexthop": 1}],
            "reroute": {
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
            },
        }
    )


@ROOT_ONLY
@pytest.mark.timeout(120)
async def test_reroute_recorded_and_moved_back_after_hold(
    server: Server, shaped: tuple[Softswitch, str]
) -> None:
    sw, ns = shaped
    collector = Collector(
        CollectorSettings.model_validate(
            {
                "server_url": server.url,
                "token": SecretStr(server.ingest_token),
                "metrics_listen": "",
            }
        )
    )
    d = Daemon(config(sw.address), collector.submit)
    assert d.reroute is not None
    rc = d.reroute
    stop = asyncio.Event()
    task = asyncio.create_task(d.run(stop))
    try:
        await wait_for(lambda: d.last_report is not None, within=20, what="configuration applied")
        assert d.last_report is not None and not d.last_report.refused
        # 300 x 1000 bytes at once into a 10 Mbit/s port: the queue holds ms
        await asyncio.to_thread(send_udp, ns, 300, 1000)
        t_sent = time.monotonic()
        await wait_for(lambda: rc.moves > 0, within=5, interval=0.01, what="reroute digest")
        moved_after = time.monotonic() - t_sent
        assert (await rc.rr.active([3]))[3] is True
        await wait_for(lambda: rc.returns > 0, within=10, interval=0.02, what="move back")
        assert (await rc.rr.active([3]))[3] is False
        # A move is counted, then its event sent: both at the server before
        # the collector (their sender) is closed.
        await wait_for(lambda: _reroutes_at(server, 2), within=20, what="both events stored")
    finally:
        stop.set()
        await task
        await collector.close()
    assert moved_after < 1.0
    events = server.get("/api/v1/events", type="reroute")["items"]
    assert len(events) == 2, events
    by_dir = {e["payload"]["direction"]: e for e in events}
    away, back = by_dir["to_backup"], by_dir["to_primary"]
    # The primary was hot until the queue drained (~0.05 s), then clear for the
    # hold time: timed by the daemon's own event stamps.
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
    base = 'switch = "s"\ngrpc_address = "127.0.0.1:1"\n[reroute]\n'
    p.write_text(
        base
        + '[[reroute.watch]]\nprefix = "10.0.0.0/8"\nslot = 1\nflow_class = 9\nprimary_port = 1\n'
    )
    with pytest.raises(ConfigError, match="flow class 9"):
        load(p)
    p.write_text(
        base
        + '[[reroute.watch]]\nprefix = "10.0.0.0/8"\nslot = 4096\nflow_class = 0\nprimary_port = 1\n'
    )
    with pytest.raises(ConfigError, match="slot"):
        load(p)
    p.write_text(
        base + "[[reroute.classes]]\nflow_class = 0\nt_q_us = 100\nm = 1\nhold_ms = 1\n"
        '[[reroute.watch]]\nprefix = "10.0.0.0/8"\nslot = 1\nflow_class = 0\nprimary_port = 1\n'
        '[[reroute.watch]]\nprefix = "10.1.0.0/16"\nslot = 1\nflow_class = 0\nprimary_port = 1\n'
    )
    with pytest.raises(ConfigError, match="share a slot"):
        load(p)
    p.write_text(base + "bogus = 1\n")
    with pytest.raises(ConfigError, match="bogus"):
        load(p)
    p.write_text("not toml [")
    with pytest.raises(ConfigError, match="not valid TOML"):
        load(p)
    # a backup next hop the configuration does not have
    p.write_text(
        base + "[[reroute.classes]]\nflow_class = 1\nt_q_us = 100\nm = 1\nhold_ms = 1\n"
        '[[reroute.watch]]\nprefix = "10.0.0.0/8"\nslot = 1\nflow_class = 1\nprimary_port = 1\n'
        "backup_nexthop_id = 4\n"
        '[[nexthops]]\nid = 1\nport = 1\nsrc_mac = "02:00:00:00:00:01"\n'
        'dst_mac = "02:00:00:00:00:02"\n'
    )
    with pytest.raises(ConfigError, match="backup_nexthop_id 4 is not in nexthops"):
        load(p)
    ok = base + "[[reroute.classes]]\nflow_class = 1\nt_q_us = 250.5\nm = 3\nhold_ms = 2000\n"
    p.write_text(
        ok
        + '[[reroute.watch]]\nprefix = "198.18.2.0/24"\nslot = 0\nflow_class = 1\nprimary_port = 2\n'
    )
    cfg = load(p)
    assert cfg.reroute is not None
    assert cfg.reroute.classes[0].t_q_ns == 250_500
    w = cfg.reroute.watch[0]
    assert w.prefix == ipaddress.IPv4Network("198.18.2.0/24") and w.backup_nexthop_id is None


@ROOT_ONLY
@pytest.mark.timeout(60)
async def test_at_connect_flows_on_backup_are_taken_over_and_stale_slots_reset(bed: Bed) -> None:
    """A daemon starting finds slot 3 (watched) on its backup: it takes the
    flow over and moves it back after the hold time (the primary is quiet);
    slot 7 on a backup that no watch names any more goes back at once."""
    from p4relay_switch.names import REG_REROUTE_ACTIVE

    await bed.probe.write_register(REG_REROUTE_ACTIVE, {3: 1, 7: 1})
    cfg = config(bed.sw.address).model_copy(update={"nexthops": None, "routes": None})
    d = Daemon(cfg)
    assert d.reroute is not None
    rc = d.reroute
    stop = asyncio.Event()
    task = asyncio.create_task(d.run(stop))
    try:
        await wait_for(lambda: d.last_report is not None, within=20, what="first pass")

        async def slot(i: int) -> int:
            return sum((await bed.probe.read_register(REG_REROUTE_ACTIVE, [i]))[i])

        await wait_for(lambda: 3 in rc.episodes or rc.returns > 0, within=5, what="taken over")
        await wait_for(lambda: rc.returns == 1, within=10, interval=0.05, what="moved back")
        assert await slot(3) == 0 and await slot(7) == 0
    finally:
        stop.set()
        await task


def _csum(b: bytes) -> int:
    s = sum(int.from_bytes(b[i : i + 2], "big") for i in range(0, len(b), 2))
    while s >> 16:
        s = (s & 0xFFFF) + (s >> 16)
    return ~s & 0xFFFF


def int_notice(dst: str, slot: int) -> bytes:
    """An UPSTREAM congestion notice from the sink's INT trigger (from_int):
    Ethernet type 0x88B5, reroute_notice_h (kind 4, class 1, from_int + the
    flow's port there, the sink's slot, run 5, delay, the hop at/over onset:
    INT switch 3, its egress port 2), then the flow's IPv4 and UDP headers."""
    udp = struct.pack("!HHHH", 4000, 4001, 8, 0)
    ip = bytearray(struct.pack("!BBHHHBBH4s4s", 0x45, 0, 28, 9, 0, 63, 17, 0, bytes(4), bytes(4)))
    ip[12:16] = ipaddress.IPv4Address("198.18.91.10").packed
    ip[16:20] = ipaddress.IPv4Address(dst).packed
    ip[10:12] = _csum(bytes(ip)).to_bytes(2, "big")
    notice = struct.pack("!BBHHHIIH", 4, 1, 0x8000 | 3, slot, 5, 0, 3, 2)
    eth = bytes.fromhex("020000000001") + bytes.fromhex("020000000099") + b"\x88\xb5"
    return eth + notice + bytes(ip) + udp


def peers(ns: str) -> list[str]:
    """The namespace's ends of the switch's ports, dev port 1 first
    (veth_ports names them in order)."""
    listing = subprocess.run(
        ["ip", "netns", "exec", ns, "ls", "/sys/class/net"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    return sorted(n for n in listing.split() if n != "lo")


def send_frame(ns: str, ifname: str, frame: bytes) -> None:
    code = (
        "import socket, sys\n"
        "s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW)\n"
        "s.bind((sys.argv[1], 0))\n"
        "s.send(bytes.fromhex(sys.argv[2]))\n"
    )
    subprocess.run(
        ["ip", "netns", "exec", ns, "python3", "-c", code, ifname, frame.hex()],
        check=True,
        timeout=30,
    )


@ROOT_ONLY
@pytest.mark.timeout(90)
async def test_a_flow_the_sinks_int_notice_moved_returns_blind_with_backoff(
    tmp_path: Path, shaped: tuple[Softswitch, str]
) -> None:
    """A move by the sink's INT notice (the congested hop is further down the
    path) waits the hold from the move, whatever this switch's own primary
    port does: stamped hot all along by other traffic, it does not hold the
    flow back. Moved again within one hold of its return, the next hold is
    twice as long."""
    sw, ns = shaped
    cfg = config(sw.address)
    doc = cfg.model_dump(mode="json")
    hold = 600
    doc["reroute"]["classes"] = [
        {"flow_class": 0, "t_q_us": 1000, "m": 1, "hold_ms": hold},
        {"flow_class": 1, "t_q_us": 1000, "m": 0, "hold_ms": hold},
    ]
    doc["reroute"]["switch_names"] = {"3": "s3"}
    # other traffic by the primary port (class 0: it stamps the port only)
    doc["routes"].append({"prefix": "198.18.98.0/24", "nexthop": 1})
    events: list[dict[str, object]] = []

    async def submit(b: IngestBatch) -> None:
        events.extend(dict(e.payload) for e in b.events)

    d = Daemon(Settings.model_validate(doc), submit)
    assert d.reroute is not None
    rc = d.reroute
    first_peer, primary_peer = await asyncio.to_thread(peers, ns)
    sh("ip", "-n", ns, "route", "add", "198.18.98.0/24", "dev", first_peer)
    sh(
        *("ip", "-n", ns, "neigh", "add", "198.18.98.10"),
        *("lladdr", "02:00:00:00:00:02", "dev", first_peer),
    )
    stop = asyncio.Event()
    task = asyncio.create_task(d.run(stop))
    try:
        await wait_for(lambda: d.last_report is not None, within=20, what="configuration applied")
        assert d.last_report is not None and not d.last_report.refused
        await asyncio.to_thread(send_frame, ns, primary_peer, int_notice("198.18.99.10", 7))
        await wait_for(lambda: rc.moves == 1, within=5, interval=0.01, what="the notice's move")
        moved_at = time.monotonic()
        assert (await rc.rr.active([3]))[3] is True
        # the primary port hot all along: bursts of other traffic into it
        stamps: list[tuple[float, int]] = []
        while rc.returns == 0 and time.monotonic() - moved_at < 5:
            await asyncio.to_thread(send_udp_to, ns, "198.18.98.10", 100, 1000)
            stamps.append((time.monotonic(), (await rc.rr.port_hot([2]))[2]))
        returned_at = time.monotonic()
        assert rc.returns == 1, "the flow returned"
        changed = [t for (t, s), (_, p) in zip(stamps[1:], stamps, strict=False) if s != p]
        assert changed and returned_at - changed[-1] < hold / 1000, (
            "the port was stamped within the hold before the return",
            stamps,
        )
        # a probe that fails: moved again at once, the next hold doubles
        await asyncio.to_thread(send_frame, ns, primary_peer, int_notice("198.18.99.10", 7))
        await wait_for(lambda: rc.moves == 2, within=5, interval=0.01, what="the second move")
        await wait_for(lambda: rc.returns == 2, within=10, interval=0.02, what="second return")
        await wait_for(lambda: len(events) == 4, what="the events sent")  # sent after the count
    finally:
        stop.set()
        await task
    away = [e for e in events if e["direction"] == "to_backup"]
    back = [e for e in events if e["direction"] == "to_primary"]
    assert [e["detected_by"] for e in away + back] == ["int_data_plane"] * 4
    assert [e["hold_ms"] for e in away] == [hold, 2 * hold]
    assert hold <= int(str(back[0]["on_backup_ms"])) < hold + 500
    assert int(str(back[1]["on_backup_ms"])) >= 2 * hold
    assert str(away[0]["trigger"]) == "INT: s3 port 2 over onset for 5 packets at the sink"
    # the hop the sink's notice named, on the moves and the returns (the console's field names)
    assert {(e["hop_switch"], e["hop_switch_id"], e["hop_port"]) for e in away + back} == {
        ("s3", 3, 2)
    }
