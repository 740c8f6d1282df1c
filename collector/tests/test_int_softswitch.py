"""Telemetry reports from the real softswitch reach the collector's decoder:
an INT packet (one upstream hop) sent from the namespace into port 1 leaves
the INT domain by port 2 (the sink strips it), and the sink's Telemetry
Report v2.0 datagrams, sent by port 2 to a UDP socket in the namespace, decode
with the collector's parse_report: the first report of the flow, none while
nothing changes, one at congestion onset."""

from __future__ import annotations

import asyncio
import ipaddress
import json
import struct
import subprocess
import sys
import urllib.request

from conftest import LINKS, NS
from p4relay_switch import Nexthop, Pipeline, SwitchClient
from p4relay_switch import int_telemetry as it
from p4relay_testsupport import Softswitch

REPORT_PORT = 32766
COLLECTOR_IP = "198.18.92.10"  # the namespace's address behind port 2
SWITCH_ID = 0x51
UPSTREAM_ID = 0x42

# Runs in the namespace: every report datagram for `secs`, decoded, one JSON line each.
LISTEN = """
import dataclasses, json, socket, sys
from p4relay_collector.int_reports import parse_report
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
s.bind(("{ip}", {port}))
s.settimeout({secs})
print("ready", flush=True)
try:
    while True:
        data = s.recv(65535)
        r = parse_report(data)
        print(json.dumps(dataclasses.asdict(r)), flush=True)
except TimeoutError:
    pass
"""

# Runs in the namespace: sends the given frames (hex) into port 1's peer.
SEND = """
import socket, sys, time
s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW)
s.bind(("{ifname}", 0))
for h in sys.argv[1:]:
    s.send(bytes.fromhex(h))
    time.sleep(0.05)  # paced like a flow's packets
"""


def ns_mac(ifname: str) -> str:
    out = subprocess.run(
        ["ip", "-n", NS, "-j", "link", "show", ifname], capture_output=True, check=True, text=True
    ).stdout
    return str(json.loads(out)[0]["address"])


def int_frame(flags: int, seq: int) -> bytes:
    """198.18.91.10:5000 -> 198.18.99.10:6000 with one upstream hop on board."""
    payload = b"\x80\x08" + struct.pack("!HI", seq, seq * 160) + b"\x00" * 4 + b"\xd5" * 160
    shim = bytes([0x10, 9, 0, 0])
    md = bytes([0x20, 0, 5, 1]) + struct.pack("!HHHH", 0xF100, 0x7072, 0, flags)
    hop = struct.pack("!IHHIII", UPSTREAM_ID, 3, 4, 1500, 12, 999)
    udp_len = 8 + len(shim) + len(md) + len(hop) + len(payload)
    udp = struct.pack("!HHHH", 5000, 6000, udp_len, 0)
    total = 20 + udp_len
    ip = bytearray(
        struct.pack(
            "!BBHHHBBH4s4s",
            0x45,
            0x17 << 2,
            total,
            seq,
            0,
            64,
            17,
            0,
            ipaddress.IPv4Address("198.18.91.10").packed,
            ipaddress.IPv4Address("198.18.99.10").packed,
        )
    )
    words = struct.unpack("!10H", bytes(ip))
    s = sum(words)
    while s > 0xFFFF:
        s = (s & 0xFFFF) + (s >> 16)
    struct.pack_into("!H", ip, 10, ~s & 0xFFFF)
    eth = bytes.fromhex("020000000001") + bytes.fromhex(ns_mac(f"{LINKS[0]}n").replace(":", ""))
    return eth + b"\x08\x00" + bytes(ip) + udp + shim + md + hop + payload


async def program(address: str, collector_mac: str) -> None:
    async with SwitchClient(address, client_id=9) as sw:
        p = Pipeline(sw)
        await p.add_nexthops(
            [Nexthop(1, port=2, src_mac="02:00:00:00:00:01", dst_mac="02:00:00:00:00:99")]
        )
        await p.add_routes([("198.18.99.0/24", 1)])
        await it.set_role(sw, 1, "sink")
        await it.set_report_target(
            sw,
            2,
            it.ReportTarget(
                src_mac=0x020000000001,
                dst_mac=int(collector_mac.replace(":", ""), 16),
                src_addr=ipaddress.IPv4Address("198.18.92.1"),
                dst_addr=ipaddress.IPv4Address(COLLECTOR_IP),
                dst_port=REPORT_PORT,
                switch_id=SWITCH_ID,
            ),
        )


def test_sink_reports_reach_the_collectors_decoder(softswitch: Softswitch) -> None:
    asyncio.run(program(softswitch.address, ns_mac(f"{LINKS[1]}n")))
    listener = subprocess.Popen(
        [
            "ip",
            "netns",
            "exec",
            NS,
            sys.executable,
            "-c",
            LISTEN.format(ip=COLLECTOR_IP, port=REPORT_PORT, secs=2.0),
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert listener.stdout is not None
        assert listener.stdout.readline().strip() == "ready"
        frames = [int_frame(UPSTREAM_ID, 1), int_frame(UPSTREAM_ID, 2)]
        frames.append(int_frame(UPSTREAM_ID | 0x8000 | 0x4000, 3))
        send = SEND.format(ifname=f"{LINKS[0]}n")
        subprocess.run(
            ["ip", "netns", "exec", NS, "python3", "-c", send, *[f.hex() for f in frames]],
            check=True,
            timeout=30,
        )
        out, _ = listener.communicate(timeout=30)
    finally:
        if listener.poll() is None:
            listener.kill()
    reports = [json.loads(line) for line in out.splitlines() if line.strip()]
    # first report of the flow; the second packet changes nothing; onset reports
    assert [r["onset"] for r in reports] == [False, True], reports
    for r in reports:
        assert r["node_id"] == SWITCH_ID
        assert r["flow"] == {
            "src": "198.18.91.10",
            "dst": "198.18.99.10",
            "sport": 5000,
            "dport": 6000,
        }
        assert [h["switch_id"] for h in r["hops"]] == [UPSTREAM_ID]
        assert r["hops"][0]["latency_ns"] == 1500
        # the sink's own hop: the packet came in by port 1 and left by port 2
        s = r["sink"]
        assert (s["switch_id"], s["ingress_port"], s["egress_port"]) == (SWITCH_ID, 1, 2), r
        assert s["tx_bytes"] is None and 0 <= s["latency_ns"] < 1 << 18
    assert reports[1]["seq"] == reports[0]["seq"] + 1
    # the switch counts what it sent and what it suppressed
    with urllib.request.urlopen(f"http://{softswitch.metrics_address}/metrics", timeout=5) as r:
        metrics = dict(
            line.rsplit(" ", 1) for line in r.read().decode().splitlines() if line[:1] != "#"
        )
    assert metrics["p4relay_int_reports_sent_total"] == "2"
    assert metrics["p4relay_int_reports_suppressed_total"] == "1"
