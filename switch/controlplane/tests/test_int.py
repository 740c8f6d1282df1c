"""INT in production: the daemon installs the watch list, roles and hops from
its `[int]` section, and the watch list follows the calls another client
(rtpagent's role here: relay entries only) offloads, without that client
writing anything for INT. Media of a traced call leaves the switch by a
transit port marked with INT (DSCP 0x17); `calls` chooses every call, one in
N by leg, or those towards listed prefixes, and a reload changes the choice."""

from __future__ import annotations

import asyncio
import contextlib
import json
import subprocess
import sys
from collections.abc import AsyncIterator, Mapping

import pytest
from conftest import ROOT_ONLY, Bed, sh
from p4relay_controlplane.config import Settings
from p4relay_controlplane.daemon import Daemon
from p4relay_switch import Endpoint, Pipeline, RelayCall, Subscription, SwitchClient
from p4relay_switch.names import INT_DSCP, INT_WATCH
from p4relay_testsupport import wait_for

RELAY = "198.18.0.10"
A = "198.18.1.10"
B = "198.18.2.10"
# Two calls from A to B through the relay; their A-to-B legs are 8 and 11.
CALLS = [(4000, 20000, 20002, 5000, (8, 9)), (4010, 20010, 20012, 5010, (11, 12))]

SNIFF = r"""
import json, socket, sys, time
s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(0x0800))
s.bind((sys.argv[1], 0))
s.settimeout(0.2)
print("ready", flush=True)
seen = {}
end = time.monotonic() + float(sys.argv[2])
while time.monotonic() < end and len(seen) < int(sys.argv[3]):
    try:
        f = s.recv(2048)
    except socket.timeout:
        continue
    ip = f[14:]
    if ip[9] != 17:
        continue
    ihl = (ip[0] & 15) * 4
    dport = int.from_bytes(ip[ihl + 2:ihl + 4], "big")
    seen.setdefault(str(dport), ip[1] >> 2)
print(json.dumps(seen), flush=True)
"""

SEND = r"""
import socket, sys
for sport, rport in ((int(a), int(b)) for a, b in (p.split(":") for p in sys.argv[2:])):
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.bind((sys.argv[1], sport))
    for _ in range(3):
        s.sendto(b"\x80" + b"\x00" * 171, ("198.18.0.10", rport))
    s.close()
"""


def _config(address: str, int_section: Mapping[str, object]) -> Settings:
    mac = "02:00:00:00:00:0{}"
    return Settings.model_validate(
        {
            "grpc_address": address,
            "metrics_listen": "",
            "reconcile_interval_s": 30,
            "nexthops": [
                {"id": 1, "port": 1, "src_mac": mac.format(1), "dst_mac": mac.format(2)},
                {
                    "id": 2,
                    "port": 2,
                    "src_mac": mac.format(1),
                    "dst_mac": mac.format(3),
                    "int_role": "transit",
                },
            ],
            "routes": [
                {"prefix": "198.18.1.0/24", "nexthop": 1},
                {"prefix": "198.18.2.0/24", "nexthop": 2},
            ],
            "int": {"switch_id": 5, "hops": [{"port": 2}], **int_section},
        }
    )


@contextlib.asynccontextmanager
async def _running(cfg: Settings) -> AsyncIterator[Daemon]:
    d = Daemon(cfg)
    stop = asyncio.Event()
    task = asyncio.create_task(d.run(stop))
    try:
        await wait_for(lambda: d.last_report is not None, within=20, what="first pass")
        assert d.last_report is not None and not d.last_report.refused
        yield d
    finally:
        stop.set()
        await task


async def _offload(address: str) -> None:
    """What rtpagent writes: the relay range and the two calls' entries."""
    async with SwitchClient(
        address, client_id=1, subscription=Subscription(learn=False, idle_timeout=False)
    ) as sw:
        p = Pipeline(sw)
        await p.set_relay_addrs([RELAY], 20000, 20999)
        for a_port, ra, rb, b_port, legs in CALLS:
            await p.install_call(
                RelayCall.between(
                    Endpoint.of(A, a_port),
                    Endpoint.of(RELAY, ra),
                    Endpoint.of(B, b_port),
                    Endpoint.of(RELAY, rb),
                    legs=legs,
                    ports=(1, 2),
                )
            )


def _dscp_at_b(bed: Bed) -> dict[int, int]:
    """Sends each call's media from A; B's side of port 2 -> {B's port: DSCP}."""
    ns, b_if = bed.ns, f"{bed.ifnames[1]}n"
    sniff = subprocess.Popen(
        ["ip", "netns", "exec", ns, sys.executable, "-c", SNIFF, b_if, "5", str(len(CALLS))],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert sniff.stdout is not None and sniff.stdout.readline().strip() == "ready"
        pairs = [f"{a_port}:{ra}" for a_port, ra, *_ in CALLS]
        subprocess.run(
            ["ip", "netns", "exec", ns, sys.executable, "-c", SEND, A, *pairs],
            check=True,
            timeout=20,
        )
        out, _ = sniff.communicate(timeout=20)
    finally:
        if sniff.poll() is None:
            sniff.kill()
            sniff.wait()
    return {int(k): v for k, v in json.loads(out.strip().splitlines()[-1]).items()}


@ROOT_ONLY
@pytest.mark.timeout(120)
async def test_the_watch_list_follows_offloaded_calls(bed: Bed) -> None:
    a_if = f"{bed.ifnames[0]}n"
    sh("ip", "-n", bed.ns, "addr", "add", f"{A}/24", "dev", a_if)
    sh("ip", "-n", bed.ns, "route", "add", "198.18.0.0/24", "dev", a_if)
    sh("ip", "-n", bed.ns, "neigh", "add", RELAY, "lladdr", "02:00:00:00:00:01", "dev", a_if)
    await _offload(bed.sw.address)
    int_marked = INT_DSCP
    b1, b2 = CALLS[0][3], CALLS[1][3]

    # One call direction in 2: by the leg's low bit (8 traced, 11 not).
    async with _running(_config(bed.sw.address, {"calls": "sampled", "sample_one_in": 2})) as d:
        assert len(await bed.probe.read(INT_WATCH)) == 1
        got = await asyncio.to_thread(_dscp_at_b, bed)
        assert got[b1] == int_marked and got[b2] != int_marked, got

        # Every offloaded call.
        assert await d.reload(_config(bed.sw.address, {"calls": "all"})) == "applied"
        got = await asyncio.to_thread(_dscp_at_b, bed)
        assert got[b1] == int_marked and got[b2] == int_marked, got

        # Only calls towards 198.18.3.0/24: neither of these.
        only = {"calls": "prefixes", "prefixes": ["198.18.3.0/24"]}
        assert await d.reload(_config(bed.sw.address, only)) == "applied"
        got = await asyncio.to_thread(_dscp_at_b, bed)
        assert got[b1] != int_marked and got[b2] != int_marked, got
        # rtpagent's calls are untouched by any of it
        relay_entries = await bed.probe.read("pipe.Ingress.relay")
        assert len(relay_entries) == 4 * len(CALLS)
