"""An in-memory `Switch` for unit tests of pure logic (the same behaviour is
tested against the real softswitch in the integration tests)."""

from __future__ import annotations

import asyncio
import ipaddress
from collections.abc import AsyncIterator

from p4relay_switch import (
    Counters,
    Endpoint,
    EntryBatch,
    EntryDump,
    FlowKey,
    GuardEntry,
    GuardKey,
    LegQuality,
    LegRewrite,
    RelayEntry,
    RelayIdle,
    Routes,
)
from rtpagent.switchport import OffloadRefused, SwitchEvent, SwitchUp

# Hosts of 198.18.N.0/24 behind port N, everything else (the relay, NAT'd
# parties' public addresses) behind port 3.
ROUTES = Routes(
    tuple(
        (ipaddress.IPv4Network(net), port)
        for net, port in (
            ("198.18.1.0/24", 1),
            ("198.18.2.0/24", 2),
            ("198.18.4.0/24", 4),
            ("0.0.0.0/0", 3),
        )
    )
)


def port_of(addr: str) -> int:
    """The port a source's packets arrive on (its route)."""
    port = ROUTES.port_for(addr)
    assert port is not None
    return port


class FakeSwitch:
    def __init__(self, capacity: int = 1 << 20) -> None:
        self.routes = ROUTES
        self.capacity = capacity
        self.relays: dict[FlowKey, RelayEntry] = {}
        self.legs: dict[int, LegRewrite] = {}
        self.counters: dict[int, Counters] = {}  # by leg (leg_rewrite's counter)
        self.guards: set[GuardKey] = set()
        self.guard_legs: dict[GuardKey, int] = {}  # guard_drop's leg
        self.guard_drops: dict[int, int] = {}  # by leg
        self.quality: dict[int, LegQuality] = {}
        self.guard_capacity = 1 << 20
        self.up = True
        self.writes = 0
        self.ttl_left: dict[FlowKey, int] = {}
        self.lost_at: float | None = None
        self.queue: asyncio.Queue[SwitchEvent] = asyncio.Queue()

    @property
    def connected(self) -> bool:
        return self.up

    @property
    def relays_ipv6(self) -> bool:
        return True

    async def start(self) -> None:
        self.queue.put_nowait(SwitchUp(restarted=False))

    async def close(self) -> None:
        pass

    async def set_relay_addrs(self, addrs: list[str], port_min: int, port_max: int) -> None:
        pass

    async def write(self, batch: EntryBatch, idle_ttl_ms: int) -> None:
        if not self.up:
            raise OffloadRefused("switch_unreachable", "down")
        self.writes += 1
        for g in batch.del_guards:
            self.guards.discard(g)
            self.guard_legs.pop(g, None)
        for k in batch.del_relays:
            self.relays.pop(k, None)
        for lg in batch.mod_legs:
            self.legs[lg.leg] = lg
        if len(self.relays) + len(batch.add_relays) > self.capacity:
            raise OffloadRefused("table_full", "full")
        if len(self.guards) + len(batch.add_guards) > self.guard_capacity:
            raise OffloadRefused("table_full", "guard table full")
        if any(ge.key in self.guards for ge in batch.add_guards):  # BfRt: ALREADY_EXISTS
            raise OffloadRefused("refused", "guard exists")
        for lg in batch.add_legs:
            self.legs[lg.leg] = lg
        for r in batch.add_relays:
            self.relays[r.key] = r
        for ge in batch.add_guards:
            self.guards.add(ge.key)
            self.guard_legs[ge.key] = ge.leg
        for leg in batch.reset_legs:
            self.guard_drops.pop(leg, None)
        for leg in batch.del_legs:
            self.legs.pop(leg, None)

    async def read_leg_counters(self, legs: list[int]) -> dict[int, Counters]:
        return {leg: self.counters.get(leg, Counters(0, 0)) for leg in legs if leg in self.legs}

    async def read_guard_drops(self, legs: list[int]) -> dict[int, int]:
        return {leg: self.guard_drops.get(leg, 0) for leg in legs}

    async def read_quality(self, legs: list[int]) -> dict[int, LegQuality]:
        return {leg: self.quality.get(leg, LegQuality.zero(leg)) for leg in legs}

    async def dump(self) -> EntryDump:
        guards = [GuardEntry(g, self.guard_legs[g]) for g in self.guards]
        return EntryDump(list(self.relays.values()), list(self.legs.values()), guards)

    async def read_ttl_left(self) -> dict[FlowKey, int]:
        """As a switch whose entries all saw a packet just now (a test that
        needs another age sets `ttl_left`)."""
        return {k: self.ttl_left.get(k, 5000) for k in self.relays}

    async def read_routes(self) -> Routes:
        if not self.up:
            raise OffloadRefused("switch_unreachable", "down")
        return self.routes

    def idle_all(self) -> None:
        """Every RTP relay entry's idle timeout, as the switch notifies it."""
        for k, r in list(self.relays.items()):
            if not r.rtcp:
                src, dst = Endpoint.of(k.src_addr, k.src_port), Endpoint.of(k.dst_addr, k.dst_port)
                self.queue.put_nowait(RelayIdle(src, dst, k.ingress_port, 0))

    async def events(self) -> AsyncIterator[SwitchEvent]:
        while True:
            yield await self.queue.get()
