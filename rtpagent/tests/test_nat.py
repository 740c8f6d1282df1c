"""NAT latching from the switch's learn digest: a real packet enters the real
softswitch on a veth port (peer in a p4ra* namespace) and misses `relay`."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
from pathlib import Path

import pytest
from harness import Client, route_all, running_agent, settings
from p4relay_testsupport import Softswitch, wait_for
from rtpagent.state import OffloadState

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="needs root for a network namespace")


async def send_udp(
    ns: str, iface: str, src: str, sport: int, dst: str, dport: int, count: int = 1
) -> None:
    """RTP-looking UDP packets, crafted inside the namespace (never routed
    anywhere). Off the event loop: the agent under test runs on it, and
    starting scapy may take seconds on a loaded host."""
    code = (
        "from scapy.all import Ether, IP, UDP, Raw, sendp;"
        f"sendp(Ether(dst='02:00:00:00:00:01')/IP(src='{src}', dst='{dst}')/UDP(sport={sport}, dport={dport})"
        "/Raw(b'\\x80\\x00\\x00\\x01' + b'\\x00' * 168), iface='" + iface + "', "
        f"count={count}, verbose=False)"
    )
    await asyncio.to_thread(
        subprocess.run,
        ["ip", "netns", "exec", ns, sys.executable, "-c", code],
        check=True,
        timeout=60,
    )


async def test_nat_latched_from_first_packet(tmp_path: Path, netns_port: tuple[str, str]) -> None:
    ifname, ns = netns_port
    sw = Softswitch(["--port", f"1={ifname}"])
    sw.start()
    try:
        await route_all(sw.address)
        cfg = settings(tmp_path, switch=sw.address)
        async with running_agent(cfg) as app:
            cl = Client(int(cfg.listen[0].rsplit(":", 1)[1]))
            # The caller's SDP says 10.0.0.5 (behind NAT): wait for its real source.
            await cl.cmd("U nat1 10.0.0.5 6000 f;1")
            r = await cl.cmd("L nat1 198.18.2.10 7000 f;1 t;1")
            assert r is not None
            port_a = int(r.split()[0])
            await app.offloader.drained()
            s = next(iter(app.table))
            assert s.state is OffloadState.LEARNING and not app.offloader.plans
            peer = ifname[:-1] + "b"
            await send_udp(ns, peer, "198.18.3.10", 41000, "127.0.0.1", port_a)
            await wait_for(lambda: app.offloader.plans, within=10.0)
            keys = {r.key for r in app.offloader.plans[s.uid].relays}
            assert ("198.18.3.10", "127.0.0.1", 41000, port_a, 1) in {tuple(k) for k in keys}
            # The callee's packets go to the latched address, not the SDP one.
            to_caller = app.offloader.plans[s.uid].legs[0]
            assert (to_caller.dst_addr, to_caller.dst_port) == ("198.18.3.10", 41000)
            # Now the switch carries the caller's packets: they hit the entry and
            # Q (from the caller's side) counts them from the switch's counters.
            await send_udp(ns, peer, "198.18.3.10", 41000, "127.0.0.1", port_a, count=3)

            async def counted() -> bool:
                q = await cl.cmd("Q nat1 f;1 t;1")
                return q is not None and int(q.split()[1]) >= 3

            await wait_for(counted, within=10.0, interval=0.2)
            cl.close()
    finally:
        sw.stop()
