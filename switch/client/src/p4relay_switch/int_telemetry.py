"""In-band network telemetry (INT-MD over UDP, Telemetry Report v2.0):
the watch list, the roles of next hops, this switch's hop per egress port,
the report target, and the INT counters (switch/contract.toml,
``pipe.Ingress.int_watch`` / ``int_watch6`` / ``int_role``,
``pipe.Egress.int_hop_config`` /
``int_report`` and the ``int_*`` registers).

The watch list chooses which UDP packets a source switch marks: every
offloaded relay session (``watch_relay_sessions``: the relay hit bit, so
each offloaded call is traced), one session leg, or configured prefixes and
flows (``watch_flows``); IPv6 destination prefixes in ``int_watch6``
(``flow_watch6``, programs with IPv6). ``IntHop.check`` refuses what the softswitch
refuses, so a bad setting fails with the same ``InvalidArgumentError`` on
bf_switchd, which stores any value it is given.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Literal

import grpc

from p4relay_switch.client import Entry, SwitchClient
from p4relay_switch.codec import KeyValue, Lpm, Ternary
from p4relay_switch.errors import write_error
from p4relay_switch.names import (
    A_INT_HOP,
    A_INT_REPORT_ENCAP,
    A_INT_SINK,
    A_INT_TRANSIT,
    A_INT_WATCH_FLOW,
    INT_HOP_CONFIG,
    INT_REPORT,
    INT_ROLE,
    INT_WATCH,
    INT_WATCH6,
    K6_DST_ADDR,
    K_BRIDGED_LEG,
    K_BRIDGED_RELAY,
    K_DST_ADDR,
    K_DST_PORT,
    K_EGRESS_PORT,
    K_NEXTHOP_ID,
    K_PRIORITY,
    K_SRC_ADDR,
    REG_INT_HOP_LIMIT,
    REG_INT_MALFORMED,
    REG_INT_REPORT_SEQ,
    REG_INT_TX_BYTES,
)

Role = Literal["transit", "sink"]
LEG_MASK = (1 << 21) - 1


@dataclass(frozen=True, slots=True)
class IntHop:
    """This switch's hop on an egress port: its switch id and the thresholds
    (queue cells at dequeue, hop latency in ns). A hop at or over an onset
    threshold starts a congestion episode; it ends when no hop is over the
    clear thresholds (hysteresis: clear <= onset)."""

    switch_id: int
    onset_cells: int
    clear_cells: int
    onset_ns: int
    clear_ns: int

    def check(self) -> None:
        err = None
        for name in ("switch_id", "onset_cells", "clear_cells", "onset_ns", "clear_ns"):
            v = getattr(self, name)
            if not 0 <= v < 1 << 32:
                err = f"{name} {v} out of range 0..2^32-1"
                break
        if err is None and (self.clear_cells > self.onset_cells or self.clear_ns > self.onset_ns):
            err = (
                f"clear thresholds ({self.clear_cells} cells, {self.clear_ns} ns) must not "
                f"exceed the onset thresholds ({self.onset_cells} cells, {self.onset_ns} ns)"
            )
        if err is not None:
            raise write_error(grpc.StatusCode.INVALID_ARGUMENT, f"{INT_HOP_CONFIG}: {err}")


@dataclass(frozen=True, slots=True)
class ReportTarget:
    """Where the sink's telemetry reports go (the collector's
    ``--int-report-listen``), and the node id they carry."""

    src_mac: int
    dst_mac: int
    src_addr: ipaddress.IPv4Address
    dst_addr: ipaddress.IPv4Address
    dst_port: int
    switch_id: int


@dataclass(frozen=True, slots=True)
class IntCounters:
    """INT's counters: malformed stacks dropped, hops refused at the hop
    limit, telemetry reports numbered so far (per-pipe values summed)."""

    malformed: int
    hop_limit: int
    reports: int


async def _check_port(client: SwitchClient, table: str, dev_port: int) -> None:
    if dev_port not in await client.ports():
        raise write_error(
            grpc.StatusCode.INVALID_ARGUMENT,
            f"{table}: port {dev_port} is not a port of this switch",
        )


async def set_hop(client: SwitchClient, dev_port: int, hop: IntHop) -> None:
    """Packets of the INT domain leaving by `dev_port` get this switch's hop."""
    hop.check()
    await _check_port(client, INT_HOP_CONFIG, dev_port)
    await client.insert_or_modify(
        INT_HOP_CONFIG,
        [
            Entry(
                {K_EGRESS_PORT: dev_port},
                A_INT_HOP,
                {
                    "switch_id": hop.switch_id,
                    "onset_cells": hop.onset_cells,
                    "clear_cells": hop.clear_cells,
                    "onset_ns": hop.onset_ns,
                    "clear_ns": hop.clear_ns,
                },
            )
        ],
    )


async def set_role(client: SwitchClient, nexthop_id: int, role: Role) -> None:
    """The next hop is another INT switch (transit: add a hop, insert INT at
    the source) or outside the domain (sink: strip INT and report)."""
    action = {"transit": A_INT_TRANSIT, "sink": A_INT_SINK}.get(role)
    if action is None:
        raise write_error(grpc.StatusCode.INVALID_ARGUMENT, f"{INT_ROLE}: unknown role {role!r}")
    await client.insert_or_modify(INT_ROLE, [Entry({K_NEXTHOP_ID: nexthop_id}, action)])


async def set_report_target(client: SwitchClient, dev_port: int, t: ReportTarget) -> None:
    """Telemetry reports leave by `dev_port` (the report session's port) to `t`."""
    await _check_port(client, INT_REPORT, dev_port)
    if not 0 < t.dst_port < 65536:
        raise write_error(
            grpc.StatusCode.INVALID_ARGUMENT, f"{INT_REPORT}: dst_port {t.dst_port} out of range"
        )
    await client.insert_or_modify(
        INT_REPORT,
        [
            Entry(
                {K_EGRESS_PORT: dev_port},
                A_INT_REPORT_ENCAP,
                {
                    "src_mac": t.src_mac,
                    "dst_mac": t.dst_mac,
                    "src_addr": int(t.src_addr),
                    "dst_addr": int(t.dst_addr),
                    "dst_port": t.dst_port,
                    "switch_id": t.switch_id,
                },
            )
        ],
    )


def _watch_key(
    priority: int,
    *,
    relay: bool | None = None,
    leg: int | None = None,
    src: ipaddress.IPv4Network | None = None,
    dst: ipaddress.IPv4Network | None = None,
    dst_port: int | None = None,
) -> dict[str, KeyValue]:
    def net(n: ipaddress.IPv4Network | None) -> Ternary:
        if n is None:
            return Ternary(0, 0)
        return Ternary(int(n.network_address), int(n.netmask))

    return {
        K_BRIDGED_RELAY: Ternary(0, 0) if relay is None else Ternary(int(relay), 1),
        K_BRIDGED_LEG: Ternary(0, 0) if leg is None else Ternary(leg & LEG_MASK, LEG_MASK),
        K_SRC_ADDR: net(src),
        K_DST_ADDR: net(dst),
        K_DST_PORT: Ternary(0, 0) if dst_port is None else Ternary(dst_port, 0xFFFF),
        K_PRIORITY: priority,
    }


async def watch_relay_sessions(
    client: SwitchClient, *, leg: int | None = None, priority: int = 10
) -> None:
    """Traces every offloaded relay session's media (or one leg's)."""
    await client.insert_or_modify(
        INT_WATCH, [Entry(_watch_key(priority, relay=True, leg=leg), A_INT_WATCH_FLOW)]
    )


def flow_watch(
    *,
    src: ipaddress.IPv4Network | None = None,
    dst: ipaddress.IPv4Network | None = None,
    dst_port: int | None = None,
    priority: int = 20,
) -> Entry:
    """The `int_watch` entry that traces the UDP packets of these prefixes (and
    destination port)."""
    if dst_port is not None and not 0 <= dst_port < 65536:
        raise write_error(
            grpc.StatusCode.INVALID_ARGUMENT, f"{INT_WATCH}: dst_port {dst_port} out of range"
        )
    return Entry(_watch_key(priority, src=src, dst=dst, dst_port=dst_port), A_INT_WATCH_FLOW)


def flow_watch6(dst: ipaddress.IPv6Network) -> Entry:
    """The `int_watch6` entry that traces the UDP packets to this IPv6
    prefix (longest prefix wins; every hop keeps their UDP checksum valid)."""
    return Entry({K6_DST_ADDR: Lpm(int(dst.network_address), dst.prefixlen)}, A_INT_WATCH_FLOW)


async def watch_flows(
    client: SwitchClient,
    *,
    src: ipaddress.IPv4Network | None = None,
    dst: ipaddress.IPv4Network | None = None,
    dst_port: int | None = None,
    priority: int = 20,
) -> None:
    """Traces the UDP packets of these prefixes (and destination port)."""
    entry = flow_watch(src=src, dst=dst, dst_port=dst_port, priority=priority)
    await client.insert_or_modify(INT_WATCH, [entry])


async def clear(client: SwitchClient) -> None:
    """Turns INT off: no watch lists, roles, hops or report targets."""
    tables = [INT_WATCH, INT_ROLE, INT_HOP_CONFIG, INT_REPORT]
    if INT_WATCH6 in client.schema.tables:
        tables.append(INT_WATCH6)
    for table in tables:
        got = await client.read(table)
        if got:
            await client.delete(table, [Entry(e.key) for e in got])


async def counters(client: SwitchClient) -> IntCounters:
    def total(v: dict[int, list[int]]) -> int:
        return sum(sum(x) for x in v.values())

    return IntCounters(
        malformed=total(await client.read_register(REG_INT_MALFORMED, [0])),
        hop_limit=total(await client.read_register(REG_INT_HOP_LIMIT, [0])),
        reports=total(await client.read_register(REG_INT_REPORT_SEQ, [0])),
    )


async def tx_bytes(client: SwitchClient, ports: Iterable[int]) -> dict[int, int]:
    """Each port's running byte count as the hops carry it (mod 2^32)."""
    idx = list(ports)
    got = await client.read_register(REG_INT_TX_BYTES, idx) if idx else {}
    return {p: sum(got.get(p, [0])) & 0xFFFFFFFF for p in idx}
