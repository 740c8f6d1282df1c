"""Program the testbed's forwarding into the switch over BfRt gRPC.

One route per host subnet and family (`ipv4_lpm` / `ipv6_lpm` -> `nexthop`
-> port and MACs; IPv6 routes when the switch's program has `ipv6_lpm`) and
the relay's IPv4 media range in `relay_addr`, so RTP to the relay that no
relay entry matches is forwarded to RTPProxy and raises the learn digest.
The relay's IPv6 range (`relay6_addr`, whose relay ids its client assigns)
and the per-call relay entries are rtpagent's business, not ours.
"""

from __future__ import annotations

import ipaddress

from p4relay_switch.client import Entry, SwitchClient
from p4relay_switch.codec import Lpm, Range

from p4relay_scenarios.topology import RELAY, PortInfo

T_LPM = "pipe.Ingress.ipv4_lpm"
T_LPM6 = "pipe.Ingress.ipv6_lpm"
T_NEXTHOP = "pipe.Ingress.nexthop"
T_RELAY_ADDR = "pipe.Ingress.relay_addr"
T_RELAY = "pipe.Ingress.relay"
T_LEG = "pipe.Ingress.leg_rewrite"
T_GUARD = "pipe.Ingress.relay_guard"
T_RELAY6 = "pipe.Ingress.relay6"
T_LEG6 = "pipe.Ingress.leg_rewrite6"
T_GUARD6 = "pipe.Ingress.relay_guard6"
# Generous: on a loaded 2-core machine a busy switch can take seconds to accept a channel.
CONNECT_TIMEOUT_S = 30.0


def route_entries(ports: list[PortInfo]) -> tuple[list[Entry], list[Entry]]:
    """(nexthop entries, ipv4_lpm entries): nexthop id = switch port number."""
    nexthops = [
        Entry(
            {"ig_md.nexthop_id": p.port},
            "Ingress.forward",
            {"port": p.port, "src_mac": p.switch_mac, "dst_mac": p.host_mac},
        )
        for p in ports
    ]
    lpms = []
    for p in ports:
        net, plen = p.subnet.split("/")
        lpms.append(
            Entry(
                {"hdr.ipv4.dst_addr": Lpm(net, int(plen))},
                "Ingress.set_nexthop",
                {"nexthop_id": p.port},
            )
        )
    return nexthops, lpms


def route6_entries(ports: list[PortInfo]) -> list[Entry]:
    """ipv6_lpm entries of the hosts with an IPv6 prefix (nexthop id = port)."""
    out = []
    for p in ports:
        if p.subnet6 is None:
            continue
        net = ipaddress.IPv6Network(p.subnet6)
        out.append(
            Entry(
                {"hdr.ipv6.dst_addr": Lpm(int(net.network_address), net.prefixlen)},
                "Ingress.set_nexthop",
                {"nexthop_id": p.port},
            )
        )
    return out


def relay_addr_entry(addr: str, port_min: int, port_max: int) -> Entry:
    return Entry(
        {
            "hdr.ipv4.dst_addr": addr,
            "hdr.udp.dst_port": Range(port_min, port_max),
            "$MATCH_PRIORITY": 1,
        },
        "Ingress.mark_relay",
    )


async def program(
    grpc_addr: str,
    ports: list[PortInfo],
    *,
    relay_port_min: int = 20000,
    relay_port_max: int = 29999,
    connect_timeout_s: float = CONNECT_TIMEOUT_S,
) -> None:
    """Install routes and the relay range (insert or modify: safe to repeat).
    No ports: the relay range only (the reroute fabric routes its switches itself)."""
    sw = SwitchClient(grpc_addr, client_id=7, connect_timeout_s=connect_timeout_s, reconnect=False)
    await sw.connect()
    try:
        if ports:
            nexthops, lpms = route_entries(ports)
            await sw.insert_or_modify(T_NEXTHOP, nexthops)
            await sw.insert_or_modify(T_LPM, lpms)
            if T_LPM6 in sw.schema.tables:
                await sw.insert_or_modify(T_LPM6, route6_entries(ports))
        await sw.insert_or_modify(
            T_RELAY_ADDR, [relay_addr_entry(RELAY.addr, relay_port_min, relay_port_max)]
        )
    finally:
        await sw.close()


async def relay_entry_count(grpc_addr: str, family: int = 4) -> tuple[int, int]:
    """(relay entries, leg_rewrite entries) of one address family installed right now."""
    relay, leg = (T_RELAY6, T_LEG6) if family == 6 else (T_RELAY, T_LEG)
    sw = SwitchClient(grpc_addr, client_id=8, reconnect=False, connect_timeout_s=CONNECT_TIMEOUT_S)
    await sw.connect()
    try:
        return len(await sw.read(relay)), len(await sw.read(leg))
    finally:
        await sw.close()


async def guard_entries(grpc_addr: str, family: int = 4) -> int:
    """relay_guard entries installed right now (rtpagent guards offloaded calls' ports)."""
    sw = SwitchClient(grpc_addr, client_id=8, reconnect=False, connect_timeout_s=CONNECT_TIMEOUT_S)
    await sw.connect()
    try:
        return len(await sw.read(T_GUARD6 if family == 6 else T_GUARD))
    finally:
        await sw.close()


async def port_counters(grpc_addr: str, dev_ports: list[int]) -> dict[int, dict[str, int]]:
    sw = SwitchClient(grpc_addr, client_id=9, reconnect=False, connect_timeout_s=CONNECT_TIMEOUT_S)
    await sw.connect()
    try:
        return await sw.port_stats(dev_ports)
    finally:
        await sw.close()


async def frames_transmitted(grpc_addr: str, dev_port: int) -> int:
    """Frames a port has sent (the port table's all-frames counter, or OK frames
    where a target names only that one)."""
    stats = (await port_counters(grpc_addr, [dev_port]))[dev_port]
    for key in ("$FramesTransmittedAll", "$FramesTransmittedOK"):
        if key in stats:
            return stats[key]
    raise LookupError(f"port {dev_port}: no transmit counter in {sorted(stats)}")


async def shape_port(grpc_addr: str, dev_port: int, rate_kbps: int | None) -> None:
    """Egress rate of a switch port in the switch's own traffic manager (None: unshaped)."""
    sw = SwitchClient(grpc_addr, client_id=10, reconnect=False, connect_timeout_s=CONNECT_TIMEOUT_S)
    await sw.connect()
    try:
        if rate_kbps is None:
            await sw.set_port_shaping(dev_port, 0, enable=False)
        else:
            await sw.set_port_shaping(dev_port, rate_kbps)
    finally:
        await sw.close()
