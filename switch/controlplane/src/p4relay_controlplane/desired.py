"""What the switch should hold, computed from the configuration alone (no
switch needed: `--check` prints it).

Per managed table the exact entries, keyed by their normalised key; per
managed register the values; per shaped port its rate. A table is managed
when its configuration section is present (config.py).
"""

from __future__ import annotations

import ipaddress
from collections.abc import Mapping
from dataclasses import dataclass, field

from p4relay_switch import Entry
from p4relay_switch.codec import KeyValue, Lpm, Ternary
from p4relay_switch.names import (
    A_FORWARD,
    A_INT_HOP,
    A_INT_REPORT_ENCAP,
    A_INT_SINK,
    A_INT_TRANSIT,
    A_INT_WATCH_FLOW,
    A_IRED_SET,
    A_IRED_SPARE_PACKET,
    A_REROUTE_BACKUP,
    A_REROUTE_NOTIFY,
    A_REROUTE_THRESHOLDS,
    A_SET_NEXTHOP,
    INT_HOP_CONFIG,
    INT_REPORT,
    INT_ROLE,
    INT_WATCH,
    INT_WATCH6,
    IPV4_LPM,
    IPV6_LPM,
    IRED_PORT,
    IRED_SPARE,
    K6_DST_ADDR,
    K_BRIDGED_LEG,
    K_BRIDGED_RELAY,
    K_DSCP,
    K_DST_ADDR,
    K_DST_PORT,
    K_EGRESS_PORT,
    K_L4_DST_PORT,
    K_L4_SRC_PORT,
    K_NEXTHOP_ID,
    K_PRIORITY,
    K_RR_CLASS,
    K_SRC_ADDR,
    NEXTHOP,
    REG_IRED_DROP_PROB,
    REROUTE_CLASS,
    REROUTE_WATCH,
    REROUTE_WATCH6,
)

from p4relay_controlplane.config import (
    LEG_BITS,
    IntSection,
    IredSpareSection,
    Settings,
    mac,
)

Key = tuple[tuple[str, KeyValue], ...]
LEG_MASK = (1 << LEG_BITS) - 1
# int_watch priorities (lower wins): the calls' entries.
INT_WATCH_PRIORITY = 10

# Tables keyed by an egress port: an entry for a port the switch does not have
# is refused before it is written (bf_switchd stores any value it is given).
PORT_KEYED = {IRED_PORT: K_EGRESS_PORT, INT_HOP_CONFIG: K_EGRESS_PORT, INT_REPORT: K_EGRESS_PORT}
# What each table is, for logs and docs.
TABLE_ORDER = (
    NEXTHOP,
    IPV4_LPM,
    IPV6_LPM,
    REROUTE_CLASS,
    REROUTE_WATCH,
    REROUTE_WATCH6,
    INT_ROLE,
    INT_HOP_CONFIG,
    INT_REPORT,
    INT_WATCH,
    INT_WATCH6,
    IRED_PORT,
    IRED_SPARE,
)


def key_of(key: Mapping[str, KeyValue]) -> Key:
    return tuple(sorted(key.items()))


def describe(key: Key) -> str:
    """A key as an operator reads it: `hdr.ipv4.dst_addr=198.18.2.0/24`."""
    parts = []
    for name, v in key:
        if isinstance(v, Lpm):
            family = ipaddress.IPv6Address if name == K6_DST_ADDR else ipaddress.IPv4Address
            parts.append(f"{name}={family(int(v.value))}/{v.prefix_len}")
        elif isinstance(v, Ternary):
            if int(v.mask) == 0:
                continue
            parts.append(f"{name}={int(v.value):#x}&{int(v.mask):#x}")
        elif name in (K_DST_ADDR, K_SRC_ADDR) and isinstance(v, int):
            parts.append(f"{name}={ipaddress.IPv4Address(v)}")
        else:
            parts.append(f"{name}={v!s}")
    return ",".join(parts) or "*"


@dataclass
class Desired:
    """The switch state the configuration asks for."""

    tables: dict[str, dict[Key, Entry]] = field(default_factory=dict)
    # register -> index -> value (one value for every pipe)
    registers: dict[str, dict[int, int]] = field(default_factory=dict)
    # dev_port -> (kbit/s, burst bytes); 0 kbit/s: unshaped
    shaping: dict[int, tuple[int, int]] = field(default_factory=dict)

    def put(self, table: str, e: Entry) -> None:
        self.tables.setdefault(table, {})[key_of(e.key)] = e

    def lines(self) -> list[str]:
        """One line per entry, register value and shaped port (for `--check`)."""
        out = []
        for t in sorted(self.tables, key=_order):
            entries = self.tables[t]
            if not entries:
                out.append(f"{t}: empty")
            for k, e in entries.items():
                data = ", ".join(f"{n}={_show(n, v)}" for n, v in e.data.items())
                out.append(f"{t}: {describe(k)} -> {e.action}({data})")
        for reg, values in sorted(self.registers.items()):
            out += [f"{reg}[{i}] = {v}" for i, v in sorted(values.items())]
        for port, (rate, burst) in sorted(self.shaping.items()):
            what = f"{rate} kbit/s, burst {burst} B" if rate else "unshaped"
            out.append(f"tf1.tm.port.sched_shaping: dev_port={port} -> {what}")
        return out


def _order(t: str) -> int:
    return TABLE_ORDER.index(t) if t in TABLE_ORDER else len(TABLE_ORDER)


def _show(name: str, v: object) -> str:
    if name.endswith("_mac") and isinstance(v, int):
        return ":".join(f"{(v >> s) & 0xFF:02x}" for s in range(40, -8, -8))
    if name.endswith("_addr") and isinstance(v, int):
        return str(ipaddress.IPv4Address(v))
    return str(v)


# Hop latency "not used" (onset_us 0): a threshold no hop reaches (Tofino 1's
# hop latency, deq_timedelta, stops at 2^18 - 1 ns; the switch compares >=).
LATENCY_UNUSED_NS = 2**32 - 1


def _hop_ns(us: float) -> int:
    return LATENCY_UNUSED_NS if us == 0 else round(us * 1000)


def _net(n: ipaddress.IPv4Network | None) -> Ternary:
    return Ternary(0, 0) if n is None else Ternary(int(n.network_address), int(n.netmask))


def watch_key(
    priority: int, *, leg: Ternary, dst: ipaddress.IPv4Network | None = None
) -> dict[str, KeyValue]:
    """An int_watch key on offloaded calls' packets (the relay hit bit)."""
    return {
        K_BRIDGED_RELAY: Ternary(1, 1),
        K_BRIDGED_LEG: leg,
        K_SRC_ADDR: Ternary(0, 0),
        K_DST_ADDR: _net(dst),
        K_DST_PORT: Ternary(0, 0),
        K_PRIORITY: priority,
    }


def int_watch6_entries(s: IntSection) -> list[Entry]:
    """The IPv6 prefixes traced (int_watch6: LPM on the destination, no relay
    bit to match: every IPv6 UDP packet to them)."""
    if s.calls != "prefixes":
        return []
    return [
        Entry({K6_DST_ADDR: Lpm(int(p.network_address), p.prefixlen)}, A_INT_WATCH_FLOW)
        for p in s.prefixes
        if isinstance(p, ipaddress.IPv6Network)
    ]


def int_watch_entries(s: IntSection) -> list[Entry]:
    """Which offloaded calls this switch, as the INT source, traces. The relay
    table is rtpagent's; these entries match its hits (the bridged relay bit),
    so the watch list follows the calls without a write per call. IPv6
    prefixes are int_watch6's (`int_watch6_entries`)."""
    if s.calls == "none":
        return []
    if s.calls == "all":
        return [Entry(watch_key(INT_WATCH_PRIORITY, leg=Ternary(0, 0)), A_INT_WATCH_FLOW)]
    if s.calls == "sampled":
        # legs are handed out in turn, so 1 in N legs' low bits are all zero
        mask = (s.sample_one_in - 1) & LEG_MASK
        return [Entry(watch_key(INT_WATCH_PRIORITY, leg=Ternary(0, mask)), A_INT_WATCH_FLOW)]
    v4 = [p for p in s.prefixes if isinstance(p, ipaddress.IPv4Network)]
    return [
        Entry(
            watch_key(INT_WATCH_PRIORITY + i, leg=Ternary(0, 0), dst=p),
            A_INT_WATCH_FLOW,
        )
        for i, p in enumerate(v4)
    ]


def ired_spare_entries(s: IredSpareSection) -> list[Entry]:
    """The signalling class: one entry per DSCP, two per UDP port (to it and
    from it), in that order of priority."""
    out: list[Entry] = []
    wild = Ternary(0, 0)

    def spare(dscp: Ternary, sport: Ternary, dport: Ternary) -> None:
        key = {K_DSCP: dscp, K_L4_SRC_PORT: sport, K_L4_DST_PORT: dport}
        out.append(Entry({**key, K_PRIORITY: len(out) + 1}, A_IRED_SPARE_PACKET))

    for c in s.dscp:
        spare(Ternary(c, 0x3F), wild, wild)
    for p in s.udp_ports:
        spare(wild, wild, Ternary(p, 0xFFFF))
        spare(wild, Ternary(p, 0xFFFF), wild)
    return out


def desired(cfg: Settings) -> Desired:
    d = Desired()
    if cfg.nexthops is not None:
        d.tables[NEXTHOP] = {}
        for n in cfg.nexthops:
            d.put(
                NEXTHOP,
                Entry(
                    {K_NEXTHOP_ID: n.id},
                    A_FORWARD,
                    {"port": n.port, "src_mac": mac(n.src_mac), "dst_mac": mac(n.dst_mac)},
                ),
            )
    if cfg.routes is not None:
        # Both families' routes are the section's (a program without ipv6_lpm
        # has none to want, and nothing is refused).
        d.tables[IPV4_LPM] = {}
        d.tables[IPV6_LPM] = {}
        for r in cfg.routes:
            table, field = (
                (IPV6_LPM, K6_DST_ADDR) if r.prefix.version == 6 else (IPV4_LPM, K_DST_ADDR)
            )
            key = {field: Lpm(int(r.prefix.network_address), r.prefix.prefixlen)}
            d.put(table, Entry(key, A_SET_NEXTHOP, {"nexthop_id": r.nexthop}))
    if cfg.ports is not None:
        d.shaping = {p.port: (p.rate_kbps, p.burst_bytes) for p in cfg.ports}
    if cfg.reroute is not None:
        d.tables[REROUTE_CLASS] = {}
        # both families' watches are the section's (a program without
        # reroute_watch6 has none to want, and an IPv6 watch is refused there)
        d.tables[REROUTE_WATCH] = {}
        d.tables[REROUTE_WATCH6] = {}
        for c in cfg.reroute.classes:
            d.put(
                REROUTE_CLASS,
                Entry(
                    {K_RR_CLASS: c.flow_class},
                    A_REROUTE_THRESHOLDS,
                    {"t_q_ns": c.t_q_ns, "m": c.m},
                ),
            )
        for w in cfg.reroute.watch:
            table, field = (
                (REROUTE_WATCH6, K6_DST_ADDR)
                if w.prefix.version == 6
                else (REROUTE_WATCH, K_DST_ADDR)
            )
            key = {field: Lpm(int(w.prefix.network_address), w.prefix.prefixlen)}
            if w.backup_nexthop_id is None:
                e = Entry(
                    key,
                    A_REROUTE_NOTIFY,
                    {"slot": w.slot, "flow_class": w.flow_class, "primary_port": w.primary_port},
                )
            else:
                e = Entry(
                    key,
                    A_REROUTE_BACKUP,
                    {
                        "slot": w.slot,
                        "flow_class": w.flow_class,
                        "backup_nexthop_id": w.backup_nexthop_id,
                        "primary_port": w.primary_port,
                    },
                )
            d.put(table, e)
    if cfg.ired is not None:
        d.tables[IRED_PORT] = {}
        d.registers[REG_IRED_DROP_PROB] = {}
        for p in cfg.ired:
            s = p.settings()
            d.put(
                IRED_PORT,
                Entry(
                    {K_EGRESS_PORT: p.port},
                    A_IRED_SET,
                    {
                        "max_len_queue": s.max_len_queue,
                        "n_drop": s.n_drop,
                        "ewma_n": s.ewma_n,
                        "tail_drop": int(s.tail_drop),
                        "protect": int(s.protect),
                    },
                ),
            )
            d.registers[REG_IRED_DROP_PROB][p.port] = s.drop_prob_reg
        d.tables[IRED_SPARE] = {}
        for e in ired_spare_entries(cfg.ired_spare or IredSpareSection()):
            d.put(IRED_SPARE, e)
    if cfg.int is not None:
        it = cfg.int
        # int_watch6 too (a program without it, no IPv6, has none to want,
        # and an IPv6 prefix is refused there)
        for t in (INT_ROLE, INT_HOP_CONFIG, INT_REPORT, INT_WATCH, INT_WATCH6):
            d.tables[t] = {}
        for n in cfg.nexthops or []:
            if n.int_role is not None:
                action = A_INT_TRANSIT if n.int_role == "transit" else A_INT_SINK
                d.put(INT_ROLE, Entry({K_NEXTHOP_ID: n.id}, action))
        for h in it.hops:
            d.put(
                INT_HOP_CONFIG,
                Entry(
                    {K_EGRESS_PORT: h.port},
                    A_INT_HOP,
                    {
                        "switch_id": it.switch_id,
                        "onset_cells": h.onset_cells,
                        "clear_cells": h.clear_cells,
                        "onset_ns": _hop_ns(h.onset_us),
                        "clear_ns": _hop_ns(h.clear_us if h.onset_us else 0),
                    },
                ),
            )
        if it.report is not None:
            rep = it.report
            d.put(
                INT_REPORT,
                Entry(
                    {K_EGRESS_PORT: rep.port},
                    A_INT_REPORT_ENCAP,
                    {
                        "src_mac": mac(rep.src_mac),
                        "dst_mac": mac(rep.dst_mac),
                        "src_addr": int(rep.src_addr),
                        "dst_addr": int(rep.dst_addr),
                        "dst_port": rep.dst_port,
                        "switch_id": it.switch_id,
                    },
                ),
            )
        for e in int_watch_entries(it):
            d.put(INT_WATCH, e)
        for e in int_watch6_entries(it):
            d.put(INT_WATCH6, e)
    return d
