"""Congestion reroute end to end on the three-switch testbed (reroute_bed.py):
a media stream UAC -> UAS (50 packets/s) shares the shaped s1-s2 link with
iperf3 cross traffic at twice its rate; s1's data plane moves the stream to
s1-s3-s2 within m packets of queueing delay over t_q, s1's control plane
(`p4relay-controlplane`) records the reroute at the server, and the stream loses under 1 %."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from p4relay_collector.config import Settings
from p4relay_collector.service import Collector
from p4relay_controlplane.config import Settings as ControlplaneSettings
from p4relay_controlplane.daemon import Daemon
from p4relay_scenarios import reroute_bed as bed
from p4relay_testsupport import Server, Softswitch, running_server, wait_until
from pydantic import SecretStr

BIN = Path(sys.executable).parent
RATE_BPS = 2_000_000  # the s1-s2 bottleneck
CROSS_BPS = 2 * RATE_BPS
MEDIA_S = 8.0
T_Q_US = 2000.0
M = 5

RECEIVER = """
import json, socket, sys, time
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
s.bind(("198.18.12.10", 4000))
print("bound", flush=True)
s.settimeout(float(sys.argv[1]))
seqs, last, gap = set(), None, 0.0
try:
    while True:
        d, _ = s.recvfrom(2048)
        t = time.monotonic()
        seqs.add(int.from_bytes(d[:4], "big"))
        if last is not None:
            gap = max(gap, t - last)
        last = t
except socket.timeout:
    pass
print(json.dumps({"received": len(seqs), "max_gap_s": gap}))
"""

SENDER = """
import socket, sys, time
n, pps = int(sys.argv[1]), int(sys.argv[2])
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
t0 = time.monotonic()
for i in range(n):
    time.sleep(max(0.0, t0 + i / pps - time.monotonic()))
    s.sendto(i.to_bytes(4, "big") + b"m" * 168, ("198.18.12.10", 4000))
"""


def ns(name: str, *cmd: str) -> list[str]:
    return ["ip", "netns", "exec", name, *cmd]


def iperf_listening(netns: str) -> bool:
    """iperf3's server socket listens (seen by `ss`: a probe connection would be
    its one client)."""
    r = subprocess.run(
        ns(netns, "ss", "-Hnlt", "sport = :5201"), capture_output=True, text=True, check=False
    )
    return r.returncode == 0 and bool(r.stdout.strip())


@pytest.fixture
def server(database_url: str, tmp_path: Path) -> Iterator[Server]:
    with running_server(database_url, tmp_path / "server.log") as srv:
        yield srv


@pytest.fixture
def switches(tmp_path: Path) -> Iterator[dict[str, Softswitch]]:
    if os.geteuid() != 0:
        pytest.fail("the reroute testbed builds network namespaces: run as root")
    bed.down()
    bed.up()
    sws: dict[str, Softswitch] = {}
    try:
        for name in bed.SWITCHES:
            args = []
            for p, ifname in bed.switch_ports(name).items():
                args += ["--port", f"{p}={ifname}"]
            if name == bed.BOTTLENECK[0]:
                args += ["--port-rate", f"{bed.BOTTLENECK[1]}={RATE_BPS}", "--queue-depth", "128"]
            sw = Softswitch(args, log_path=tmp_path / f"{name}.log")
            sw.start()
            sws[name] = sw
        for name, sw in sws.items():
            asyncio.run(bed.program(name, sw.address))
        yield sws
    finally:
        for sw in sws.values():
            sw.stop()
        bed.down()


def test_stream_moves_off_the_congested_link_without_loss(
    switches: dict[str, Softswitch], server: Server
) -> None:
    s1 = switches["s1"].address
    cfg = ControlplaneSettings.model_validate(
        bed.reroute_controlplane(s1, t_q_us=T_Q_US, m=M, hold_ms=60_000)
    )
    collector = Collector(
        Settings.model_validate(
            {
                "server_url": server.url,
                "token": SecretStr(server.ingest_token),
                "metrics_listen": "",
            }
        )
    )
    agent = Daemon(cfg, collector.submit)
    assert agent.reroute is not None
    rc = agent.reroute
    stop = asyncio.Event()
    loop = asyncio.new_event_loop()

    async def control_plane() -> None:
        try:
            await agent.run(stop)
        finally:
            await collector.close()

    cp = threading.Thread(target=loop.run_until_complete, args=(control_plane(),), daemon=True)
    cp.start()
    try:
        wait_until(lambda: agent.last_report is not None, within=10, what="reroute watch applied")
        iperf_s = subprocess.Popen(
            ns(bed.XDST.netns, "iperf3", "-s", "-1", "-B", bed.XDST.addr),
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        wait_until(
            lambda: iperf_listening(bed.XDST.netns), within=10, what="iperf3 server listening"
        )
        recv = subprocess.Popen(
            ns(bed.UAS.netns, sys.executable, "-c", RECEIVER, "3"),
            stdout=subprocess.PIPE,
            text=True,
        )
        assert recv.stdout is not None
        assert recv.stdout.readline().strip() == "bound"  # listening before the first packet
        n = int(MEDIA_S * 50)
        send = subprocess.Popen(ns(bed.UAC.netns, sys.executable, "-c", SENDER, str(n), "50"))
        time.sleep(1.0)  # media flows uncongested for a second first (the scenario), not a wait
        cross = subprocess.run(
            [
                *ns(bed.XSRC.netns, "iperf3", "-c", bed.XDST.addr, "-u", "-b", str(CROSS_BPS)),
                "-l",
                "1000",
                "-t",
                "5",
                "--json",
            ],
            capture_output=True,
            text=True,
            timeout=30,
        )
        send.wait(30)
        out, _ = recv.communicate(timeout=30)
        iperf_s.wait(10)
    finally:
        loop.call_soon_threadsafe(stop.set)
        cp.join(15)
    stats = json.loads(out)
    loss = 1 - stats["received"] / n
    assert cross.returncode == 0, cross.stderr
    lost_cross = json.loads(cross.stdout)["end"]["sum"]["lost_percent"]
    assert lost_cross > 20, "the cross traffic did not congest the bottleneck"
    print(
        f"reroute e2e: media loss {loss:.2%}, max inter-arrival {stats['max_gap_s'] * 1000:.1f} ms, "
        f"cross-traffic loss {lost_cross:.1f} %, reroutes {rc.moves}"
    )
    assert rc.moves == 1
    assert loss < 0.01, stats
    # The e2e suite shares one database: this bed's reroutes are those of its UAS subnet.
    events = [
        e
        for e in server.get("/api/v1/events", type="reroute")["items"]
        if e["payload"]["flow"] == bed.UAS.subnet
    ]
    assert [e["payload"]["direction"] for e in events] == ["to_backup"]
    assert events[0]["payload"]["run"] == M
