"""Dual stack: IPv6 routes go to `ipv6_lpm` beside the IPv4 ones in
`ipv4_lpm`, on the real softswitch; `--diff` names an IPv6 route as an
operator writes it."""

from __future__ import annotations

import asyncio
import ipaddress
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import ROOT_ONLY, Bed
from p4relay_switch import Entry, Lpm
from p4relay_switch.names import IPV4_LPM, IPV6_LPM, K6_DST_ADDR

CONFIG = """
switch = "v6-sw"
grpc_address = "{address}"

[[nexthops]]
id = 1
port = 1
src_mac = "02:00:00:00:00:01"
dst_mac = "02:00:00:00:00:11"
[[nexthops]]
id = 2
port = 2
src_mac = "02:00:00:00:00:01"
dst_mac = "02:00:00:00:00:12"

[[routes]]
prefix = "198.18.1.0/24"
nexthop = 1
[[routes]]
prefix = "fd00:198:18:1::/64"
nexthop = 1
[[routes]]
prefix = "fd00:198:18:2::/64"
nexthop = 2
[[routes]]
prefix = "::/0"
nexthop = 2
"""


def _lpm6(prefix: str) -> Lpm:
    net = ipaddress.IPv6Network(prefix)
    return Lpm(int(net.network_address), net.prefixlen)


@ROOT_ONLY
@pytest.mark.timeout(60)
async def test_ipv6_routes_applied_beside_ipv4_and_diffed(bed: Bed, tmp_path: Path) -> None:
    conf = tmp_path / "v6.toml"
    conf.write_text(CONFIG.format(address=bed.sw.address))

    def run(mode: str) -> tuple[int, str]:
        # a child process: the CLI configures logging onto the stderr it
        # finds, which in-process would be this test's capture, closed after it
        cmd = [sys.executable, "-m", "p4relay_controlplane.cli", "--config", str(conf), mode]
        r = subprocess.run(cmd, capture_output=True, text=True, timeout=60, check=False)
        return r.returncode, r.stdout

    code, out = await asyncio.to_thread(run, "--once")
    assert code == 0, out
    assert f"{IPV6_LPM}: 3 missing" in out and "0 refused" in out, out
    got = {e.key[K6_DST_ADDR]: e.data["nexthop_id"] for e in await bed.probe.read(IPV6_LPM)}
    assert got == {
        _lpm6("fd00:198:18:1::/64"): 1,
        _lpm6("fd00:198:18:2::/64"): 2,
        _lpm6("::/0"): 2,
    }
    assert len(await bed.probe.read(IPV4_LPM)) == 1
    # A route deleted behind its back is named as the file writes it.
    await bed.probe.delete(IPV6_LPM, [Entry({K6_DST_ADDR: _lpm6("fd00:198:18:2::/64")})])
    code, out = await asyncio.to_thread(run, "--diff")
    assert code == 1
    assert out.splitlines() == [f"missing  {IPV6_LPM}: hdr.ipv6.dst_addr=fd00:198:18:2::/64"], out
