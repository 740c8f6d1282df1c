"""Congestion reroute: typed operations on the contract's reroute objects.

The data plane detects congestion per watched destination (``m`` consecutive
packets leaving by the primary next hop over ``t_q`` of delay from ingress to
egress, or, at the INT sink, with a hop of their INT stack over its onset
threshold) and moves the flow to a pre-installed backup next hop by itself,
or sends a congestion notice upstream, which each switch without a backup
passes on until one with a backup moves the flow. The control plane installs
watches and flow classes, hears each reroute as a digest, and moves a flow
back by writing its ``reroute_active`` slot to 0.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from p4relay_switch.client import Digest, Entry, SwitchClient
from p4relay_switch.codec import Lpm
from p4relay_switch.names import (
    A_REROUTE_BACKUP,
    A_REROUTE_NOTIFY,
    A_REROUTE_THRESHOLDS,
    K6_DST_ADDR,
    K_DST_ADDR,
    K_RR_CLASS,
    REG_REROUTE_ACTIVE,
    REG_REROUTE_FROM,
    REG_REROUTE_PORT_HOT,
    REG_REROUTE_RUN,
    REROUTE_CLASS,
    REROUTE_DIGEST,
    REROUTE_SLOTS,
    REROUTE_WATCH,
    REROUTE_WATCH6,
)

Network = ipaddress.IPv4Network | ipaddress.IPv6Network


def watch_table(prefix: Network) -> tuple[str, str]:
    """The watch list of the prefix's family and its key: reroute_watch
    (IPv4) or reroute_watch6 (IPv6)."""
    return (REROUTE_WATCH6, K6_DST_ADDR) if prefix.version == 6 else (REROUTE_WATCH, K_DST_ADDR)


MOVED = 1
"""Digest kind: the slot's flow now takes its backup next hop."""
NOTIFIED = 2
"""Digest kind: no backup here (or seen in INT); a congestion notice went upstream."""
RELAYED = 3
"""Digest kind: an upstream notice arrived, no backup here: passed on upstream."""


@dataclass(frozen=True, slots=True)
class RerouteClass:
    """Knobs of a flow class. ``t_q_ns``: threshold of the delay from ingress
    to egress (measured from the 48-bit timestamps: exact up to 2^32 - 1 ns,
    ``limits.check_reroute_t_q``); ``m``: consecutive hot packets that
    trigger (0 = never). The hold before a flow moves back is the switch
    control plane's own setting, not the switch's."""

    flow_class: int
    t_q_ns: int
    m: int

    def __post_init__(self) -> None:
        if not 0 <= self.flow_class < 256:
            raise ValueError(f"flow class {self.flow_class} outside 0..255")
        if not 0 <= self.t_q_ns < 2**32:
            raise ValueError(f"t_q_ns {self.t_q_ns} outside 0..2^32-1")
        if not 0 <= self.m < 2**16:
            raise ValueError(f"m {self.m} outside 0..65535")


@dataclass(frozen=True, slots=True)
class RerouteWatch:
    """A watched destination prefix, IPv4 or IPv6 (its own table, the same
    slots). With ``backup_nexthop_id`` the switch moves the flow itself;
    without, it notifies the upstream switch and passes upstream notices on.
    ``primary_port``: the port of the primary next hop, the only one an
    upstream notice is accepted from."""

    prefix: Network
    slot: int
    flow_class: int
    backup_nexthop_id: int | None = None
    primary_port: int = 0

    def __post_init__(self) -> None:
        if not 0 <= self.slot < REROUTE_SLOTS:
            raise ValueError(f"slot {self.slot} outside 0..{REROUTE_SLOTS - 1}")
        if not 0 <= self.flow_class < 256:
            raise ValueError(f"flow class {self.flow_class} outside 0..255")
        if not 0 <= self.primary_port < 512:
            raise ValueError(f"primary port {self.primary_port} outside 0..511")
        if self.backup_nexthop_id is not None and not 0 <= self.backup_nexthop_id < 2**16:
            raise ValueError(f"backup next hop {self.backup_nexthop_id} outside 0..65535")


@dataclass(frozen=True, slots=True)
class RerouteEvent:
    """One ``pipe.IngressDeparser.reroute`` digest. ``dst``: the flow's IPv4
    destination (0.0.0.0 for an IPv6 flow: the slot names it)."""

    dst: ipaddress.IPv4Address | ipaddress.IPv6Address
    slot: int
    kind: int  # MOVED, NOTIFIED or RELAYED
    port: int  # the flow's ingress port at the switch that saw the congestion
    queue_delay_ns: int  # its delay from ingress to egress there
    run: int
    flow_class: int
    from_int: bool = False  # the trigger: a hop over onset in INT (at the sink)
    # from_int: the hop the sink saw at/over onset (INT switch id, egress
    # port); None when the notice names none (a program without the field)
    hop: tuple[int, int] | None = None

    @property
    def moved(self) -> bool:
        return self.kind == MOVED


class Reroute:
    """The reroute objects of one switch."""

    def __init__(self, client: SwitchClient) -> None:
        self.client = client

    async def set_classes(self, classes: Iterable[RerouteClass]) -> None:
        await self.client.insert_or_modify(
            REROUTE_CLASS,
            [
                Entry(
                    {K_RR_CLASS: c.flow_class},
                    A_REROUTE_THRESHOLDS,
                    {"t_q_ns": c.t_q_ns, "m": c.m},
                )
                for c in classes
            ],
        )

    async def classes(self) -> dict[int, RerouteClass]:
        out: dict[int, RerouteClass] = {}
        for e in await self.client.read(REROUTE_CLASS):
            c = e.key.get(K_RR_CLASS)
            if not isinstance(c, int) or e.action != A_REROUTE_THRESHOLDS:
                continue
            d = e.data
            out[c] = RerouteClass(c, _num(d, "t_q_ns"), _num(d, "m"))
        return out

    async def watch(self, watches: Iterable[RerouteWatch]) -> None:
        entries: dict[str, list[Entry]] = {}
        for w in watches:
            table, field = watch_table(w.prefix)
            key = {field: Lpm(int(w.prefix.network_address), w.prefix.prefixlen)}
            data = {"slot": w.slot, "flow_class": w.flow_class, "primary_port": w.primary_port}
            if w.backup_nexthop_id is None:
                entries.setdefault(table, []).append(Entry(key, A_REROUTE_NOTIFY, data))
            else:
                data["backup_nexthop_id"] = w.backup_nexthop_id
                entries.setdefault(table, []).append(Entry(key, A_REROUTE_BACKUP, data))
        for table, es in entries.items():
            await self.client.insert_or_modify(table, es)

    async def unwatch(self, prefixes: Iterable[Network]) -> None:
        entries: dict[str, list[Entry]] = {}
        for p in prefixes:
            table, field = watch_table(p)
            entries.setdefault(table, []).append(
                Entry({field: Lpm(int(p.network_address), p.prefixlen)})
            )
        for table, es in entries.items():
            await self.client.delete(table, es)

    async def watches(self) -> list[RerouteWatch]:
        """Both families' watches (IPv6 ones when the program has reroute_watch6)."""
        out = []
        tables = [(REROUTE_WATCH, K_DST_ADDR, 4)]
        if REROUTE_WATCH6 in self.client.schema.tables:
            tables.append((REROUTE_WATCH6, K6_DST_ADDR, 6))
        for table, field, version in tables:
            for e in await self.client.read(table):
                k = e.key.get(field)
                if not isinstance(k, Lpm) or e.action not in (A_REROUTE_BACKUP, A_REROUTE_NOTIFY):
                    continue
                net: Network = (
                    ipaddress.IPv6Network((k.value, k.prefix_len))
                    if version == 6
                    else ipaddress.IPv4Network((k.value, k.prefix_len))
                )
                d = e.data
                backup = _num(d, "backup_nexthop_id") if e.action == A_REROUTE_BACKUP else None
                out.append(
                    RerouteWatch(
                        net, _num(d, "slot"), _num(d, "flow_class"), backup, _num(d, "primary_port")
                    )
                )
        return out

    async def active(self, slots: Sequence[int]) -> dict[int, bool]:
        """slot -> on its backup (any pipe)."""
        got = await self.client.read_register(REG_REROUTE_ACTIVE, slots)
        return {i: any(v != 0 for v in vals) for i, vals in got.items()}

    async def move_back(self, slots: Sequence[int]) -> None:
        """The flows take their primary next hop again; detection starts afresh."""
        await self.client.write_register(REG_REROUTE_ACTIVE, dict.fromkeys(slots, 0))
        await self.client.write_register(REG_REROUTE_RUN, dict.fromkeys(slots, 0))

    async def move_to_backup(self, slots: Sequence[int]) -> None:
        """What a notice does, from the control plane (a controller's reroute)."""
        await self.client.write_register(REG_REROUTE_ACTIVE, dict.fromkeys(slots, 1))

    async def port_hot(self, ports: Sequence[int]) -> dict[int, int]:
        """dev_port -> switch ms time of its last departure over t_q (0: never;
        compare readings with each other, not with wall time)."""
        got = await self.client.read_register(REG_REROUTE_PORT_HOT, ports)
        return {i: max(vals, default=0) for i, vals in got.items()}

    async def came_from(self, slots: Sequence[int]) -> dict[int, int]:
        """slot -> dev_port its flow last came in by (slots without a backup:
        where an upstream notice for it goes on)."""
        got = await self.client.read_register(REG_REROUTE_FROM, slots)
        return {i: max(vals, default=0) for i, vals in got.items()}

    async def run(self, slots: Sequence[int]) -> dict[int, int]:
        got = await self.client.read_register(REG_REROUTE_RUN, slots)
        return {i: max(vals, default=0) for i, vals in got.items()}

    @staticmethod
    def events(d: Digest) -> list[RerouteEvent]:
        if d.learn != REROUTE_DIGEST:
            return []
        return [
            RerouteEvent(
                dst=ipaddress.IPv4Address(r.get("dst_addr", 0)),
                slot=r.get("slot", 0),
                kind=r.get("kind", 0),
                port=r.get("port", 0),
                queue_delay_ns=r.get("queue_delay_ns", 0),
                run=r.get("run", 0),
                flow_class=r.get("flow_class", 0),
                from_int=r.get("from_int", 0) == 1,
                hop=_hop(r),
            )
            for r in d.entries
        ]


def _hop(r: dict[str, int]) -> tuple[int, int] | None:
    """The congested hop a notice names: (switch id, egress port); the
    switch id 0 names none."""
    switch_id = r.get("hop_switch_id", 0)
    return (switch_id, r.get("hop_port", 0)) if switch_id else None


def _num(d: object, name: str) -> int:
    v = d.get(name, 0) if isinstance(d, dict) else 0
    return v if isinstance(v, int) else 0
