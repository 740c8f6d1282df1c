"""A call as switch entries: the typed objects `Pipeline` takes and returns.

The one mapping from a call to the entries that carry it, used by the agent
in production and by the PTF suite, the tests and the benches alike:

* `RelayCall` (two `RelayDirection`s between `Endpoint`s): a whole call;
* `CallEntries`: the entries it needs (`RelayCall.entries`): two
  `LegRewrite`s, four `RelayEntry`s and, guarded, four `GuardEntry`s;
* `EntryBatch`: one ordered write of entries, for one call
  (`CallEntries.install`, `.removal`, `.change_from`) or many
  (`EntryBatch.joined`), through `Pipeline.write`.

Addresses in `FlowKey`/`GuardKey`/`LegRewrite` are strings as signalling
carries them: dotted IPv4 or IPv6 (`str(IPv6Address)`, compressed), validated
when encoded. An entry's family is its addresses': IPv6 entries go to the IPv6
tables (relay6, relay_guard6, leg_rewrite6). A call is one family; a call
bridging IPv4 and IPv6 is not offloaded (the switch does not translate).
"""

from __future__ import annotations

import ipaddress
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import NamedTuple

import grpc

from p4relay_switch.errors import TableFullError
from p4relay_switch.names import JITTER_SHIFT, RTP_CLOCK_HZ

Addr = ipaddress.IPv4Address | ipaddress.IPv6Address


def ip(value: str | int | Addr) -> Addr:
    """An IPv4 or IPv6 address (an int below 2^32 is IPv4)."""
    if isinstance(value, ipaddress.IPv4Address | ipaddress.IPv6Address):
        return value
    return ipaddress.ip_address(value)


def is_v6(host: str) -> bool:
    """An entry's address string is IPv6 (the family of the entry)."""
    return ":" in host


class BridgedCallError(ValueError):
    """A call whose parties or relay sides are not all one address family:
    the switch does not translate between IPv4 and IPv6."""


# ---------------------------------------------------------------- entries


class FlowKey(NamedTuple):
    """Exact key of `pipe.Ingress.relay`: a sender's packets to a relay port,
    arriving on switch port ``ingress_port`` (dev port). The same addresses
    and ports arriving on any other port do not match."""

    src_addr: str
    dst_addr: str
    src_port: int
    dst_port: int
    ingress_port: int


class GuardKey(NamedTuple):
    """Exact key of `pipe.Ingress.relay_guard`: one relay-side port of an
    offloaded call. A packet to it that misses `relay` (any source but the
    installed one) is dropped, never reaching the relay server."""

    dst_addr: str
    dst_port: int


class GuardEntry(NamedTuple):
    """`pipe.Ingress.relay_guard[key]` -> `guard_drop(leg)`: the drops are
    counted in `guard_drops[leg]`, the leg of the direction whose relay port
    `key` is (its sender's packets arrive there)."""

    key: GuardKey
    leg: int


# Entries are named tuples, like the keys: a control plane builds several per
# call on its event loop, and a tuple is made in a fraction of the time a
# frozen dataclass takes (one `object.__setattr__` per field).


class RelayEntry(NamedTuple):
    """`pipe.Ingress.relay[key]` -> `relay_leg(leg, rtcp)`."""

    key: FlowKey
    leg: int
    rtcp: bool


class LegRewrite(NamedTuple):
    """`pipe.Ingress.leg_rewrite[leg]` (IPv6 addresses: `leg_rewrite6[leg]`):
    what a packet of this leg becomes."""

    leg: int
    src_addr: str
    dst_addr: str
    src_port: int
    dst_port: int

    @property
    def v6(self) -> bool:
        return is_v6(self.dst_addr)


@dataclass(frozen=True, slots=True)
class EntryBatch:
    """One ordered write. Removals: guards first, then relays, legs last;
    additions: legs, relays, guards last. So a legitimate packet is never
    dropped: a guard exists only while the relay entries carry the call."""

    add_legs: tuple[LegRewrite, ...] = ()
    mod_legs: tuple[LegRewrite, ...] = ()
    add_relays: tuple[RelayEntry, ...] = ()
    del_relays: tuple[FlowKey, ...] = ()
    del_legs: tuple[int, ...] = ()
    del_legs6: tuple[int, ...] = ()  # legs whose rewrite is in leg_rewrite6
    reset_legs: tuple[int, ...] = ()  # zero these legs' quality registers and guard_drops
    add_guards: tuple[GuardEntry, ...] = ()
    del_guards: tuple[GuardKey, ...] = ()

    @classmethod
    def joined(cls, batches: Iterable[EntryBatch]) -> EntryBatch:
        """Several batches as one write: each kind of change of all of them
        at its place in the order (one call's guards still go before any
        relay is deleted, and so on)."""
        parts = list(batches)
        return cls(
            add_legs=tuple(x for b in parts for x in b.add_legs),
            mod_legs=tuple(x for b in parts for x in b.mod_legs),
            add_relays=tuple(x for b in parts for x in b.add_relays),
            del_relays=tuple(x for b in parts for x in b.del_relays),
            del_legs=tuple(x for b in parts for x in b.del_legs),
            del_legs6=tuple(x for b in parts for x in b.del_legs6),
            reset_legs=tuple(x for b in parts for x in b.reset_legs),
            add_guards=tuple(x for b in parts for x in b.add_guards),
            del_guards=tuple(x for b in parts for x in b.del_guards),
        )

    def __bool__(self) -> bool:
        return bool(
            self.add_legs
            or self.mod_legs
            or self.add_relays
            or self.del_relays
            or self.del_legs
            or self.del_legs6
            or self.reset_legs
            or self.add_guards
            or self.del_guards
        )


@dataclass(frozen=True, slots=True)
class CallEntries:
    """The entries that carry one call: each direction's leg rewrite, its
    relay entries (RTP and RTCP) and, when the call is guarded, the relay
    ports' guards (each direction's RTP and RTCP port)."""

    legs: tuple[LegRewrite, LegRewrite]
    relays: tuple[RelayEntry, ...]
    guards: tuple[GuardEntry, ...] = ()

    def flow_keys(self) -> list[FlowKey]:
        return [r.key for r in self.relays]

    @property
    def v6(self) -> bool:
        """An IPv6 call (its entries go to the IPv6 tables)."""
        return self.legs[0].v6

    def install(self, reset_legs: Iterable[int] | None = None) -> EntryBatch:
        """The call's entries written anew; ``reset_legs``: the legs whose
        quality registers and guard drops are zeroed first (default: both)."""
        return EntryBatch(
            add_legs=self.legs,
            add_relays=self.relays,
            add_guards=self.guards,
            reset_legs=(
                tuple(lg.leg for lg in self.legs) if reset_legs is None else tuple(reset_legs)
            ),
        )

    def removal(self, *, reset: bool = False) -> EntryBatch:
        """The call's entries taken away; ``reset`` zeroes its legs' registers
        too, so the next call on them starts clean."""
        legs = tuple(lg.leg for lg in self.legs)
        return EntryBatch(
            del_guards=tuple(g.key for g in self.guards),
            del_relays=tuple(self.flow_keys()),
            del_legs=() if self.v6 else legs,
            del_legs6=legs if self.v6 else (),
            reset_legs=legs if reset else (),
        )

    def change_from(self, old: CallEntries) -> EntryBatch:
        """What turns ``old`` (the same call on the same legs, as installed)
        into these entries: changed rewrites modified, moved flows' relays
        and moved relay ports' guards deleted and added (a re-INVITE, a
        latched source). The batch's order deletes before it adds, so a flow
        may take over a key the same write frees."""
        old_relays = {r.key: r for r in old.relays}
        new_keys = {r.key for r in self.relays}
        return EntryBatch(
            mod_legs=tuple(lg for lg, was in zip(self.legs, old.legs, strict=True) if lg != was),
            del_relays=tuple(k for k in old_relays if k not in new_keys),
            add_relays=tuple(r for r in self.relays if r.key not in old_relays),
            del_guards=tuple(g.key for g in old.guards if g not in self.guards),
            add_guards=tuple(g for g in self.guards if g not in old.guards),
        )


@dataclass(frozen=True, slots=True)
class EntryDump:
    """Every entry of the call tables, as read back."""

    relays: list[RelayEntry]
    legs: list[LegRewrite]
    guards: list[GuardEntry]


@dataclass(frozen=True, slots=True)
class Counters:
    """A leg's packets and bytes (leg_rewrite's direct counter: RTP and RTCP
    of the direction, since its entry was added)."""

    packets: int
    bytes: int


@dataclass(frozen=True, slots=True)
class LegQuality:
    """One direction's RTP quality as the data plane measured it at egress
    (packets that left the switch; tail drops count as lost), cumulative
    since the leg's registers were zeroed."""

    leg: int
    packets: int
    lost: int
    reordered: int
    max_seq: int
    transit: int
    jitter_raw: int  # J << JITTER_SHIFT, RTP clock units
    last_seen_ms: int
    payload_type: int

    @property
    def jitter_units(self) -> float:
        return self.jitter_raw / (1 << JITTER_SHIFT)

    @property
    def jitter_ms(self) -> float:
        return self.jitter_units * 1000.0 / RTP_CLOCK_HZ

    @property
    def loss_ratio(self) -> float:
        expected = self.packets + self.lost
        return self.lost / expected if expected else 0.0

    @classmethod
    def zero(cls, leg: int) -> LegQuality:
        return cls(leg, 0, 0, 0, 0, 0, 0, 0, 0)


# ---------------------------------------------------------------- calls


@dataclass(frozen=True, slots=True)
class Endpoint:
    addr: Addr
    port: int
    # The address as entries name it (dotted), made once: every entry of a
    # call names its endpoints, and `str(IPv4Address)` costs microseconds.
    host: str = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "host", str(self.addr))

    @classmethod
    def of(cls, addr: str | int | Addr, port: int) -> Endpoint:
        if not 0 < port < 0xFFFF:  # RTCP needs port + 1
            raise ValueError(f"port {port} out of range")
        return cls(ip(addr), port)

    @property
    def v6(self) -> bool:
        return self.addr.version == 6

    def __str__(self) -> str:
        return f"[{self.addr}]:{self.port}" if self.v6 else f"{self.addr}:{self.port}"


@dataclass(frozen=True, slots=True)
class RelayDirection:
    """Packets ``src -> relay`` arriving on dev port ``ingress_port`` leave as
    ``out_src -> out_dst``; quality by ``leg``. RTCP goes from ``rtcp_src``
    (default: ``src``'s port + 1, or where a NAT was seen to send it from)
    to the relay's port + 1."""

    leg: int
    src: Endpoint
    relay: Endpoint
    out_src: Endpoint
    out_dst: Endpoint
    ingress_port: int
    rtcp_src: Endpoint | None = None

    def flow_key(self, rtcp: bool = False) -> FlowKey:
        if not rtcp:
            return FlowKey(
                self.src.host, self.relay.host, self.src.port, self.relay.port, self.ingress_port
            )
        src_host, src_port = (
            (self.src.host, self.src.port + 1)
            if self.rtcp_src is None
            else (self.rtcp_src.host, self.rtcp_src.port)
        )
        return FlowKey(src_host, self.relay.host, src_port, self.relay.port + 1, self.ingress_port)

    def guard_key(self, rtcp: bool = False) -> GuardKey:
        """The relay port this direction's sender uses, as a relay_guard key."""
        return GuardKey(self.relay.host, self.relay.port + (1 if rtcp else 0))

    def guard(self, rtcp: bool = False) -> GuardEntry:
        """That port's relay_guard entry, its drops counted on this leg."""
        return GuardEntry(self.guard_key(rtcp), self.leg)

    def rewrite(self) -> LegRewrite:
        return LegRewrite(
            self.leg,
            self.out_src.host,
            self.out_dst.host,
            self.out_src.port,
            self.out_dst.port,
        )

    def relays(self) -> tuple[RelayEntry, RelayEntry]:
        return (
            RelayEntry(self.flow_key(False), self.leg, False),
            RelayEntry(self.flow_key(True), self.leg, True),
        )


@dataclass(frozen=True, slots=True)
class RelayCall:
    a_to_b: RelayDirection
    b_to_a: RelayDirection

    @classmethod
    def between(
        cls,
        a: Endpoint,
        relay_a: Endpoint,
        b: Endpoint,
        relay_b: Endpoint,
        legs: tuple[int, int],
        ports: tuple[int, int],
    ) -> RelayCall:
        """``relay_a``: the relay's address:port facing A (A sends RTP there);
        ``relay_b`` the one facing B. ``legs``: (a_to_b, b_to_a) leg indexes;
        ``ports``: the dev ports A's and B's packets arrive on."""
        return cls(
            a_to_b=RelayDirection(legs[0], a, relay_a, relay_b, b, ports[0]),
            b_to_a=RelayDirection(legs[1], b, relay_b, relay_a, a, ports[1]),
        )

    def __post_init__(self) -> None:
        ends = [
            e
            for d in (self.a_to_b, self.b_to_a)
            for e in (d.src, d.relay, d.out_src, d.out_dst, d.rtcp_src)
            if e is not None
        ]
        if len({e.v6 for e in ends}) != 1:
            raise BridgedCallError(
                "bridged call (IPv4 and IPv6 endpoints): the switch does not translate "
                f"between families ({', '.join(str(e) for e in ends)})"
            )

    @property
    def v6(self) -> bool:
        """An IPv6 call: its entries go to relay6, relay_guard6, leg_rewrite6."""
        return self.a_to_b.src.v6

    @property
    def directions(self) -> tuple[RelayDirection, RelayDirection]:
        return (self.a_to_b, self.b_to_a)

    @property
    def legs(self) -> tuple[int, int]:
        return (self.a_to_b.leg, self.b_to_a.leg)

    def flow_keys(self) -> list[FlowKey]:
        return [d.flow_key(r) for d in self.directions for r in (False, True)]

    def guard_keys(self) -> list[GuardKey]:
        """The call's 4 relay_guard keys: each leg's relay port and port + 1."""
        return [d.guard_key(r) for d in self.directions for r in (False, True)]

    def guards(self) -> list[GuardEntry]:
        """The call's 4 relay_guard entries (`guard_keys`, each with its leg)."""
        return [d.guard(r) for d in self.directions for r in (False, True)]

    def entries(self, *, guard: bool = False) -> CallEntries:
        """The entries that carry it (``guard``: with its relay ports' guards)."""
        a, b = self.a_to_b, self.b_to_a
        return CallEntries(
            legs=(a.rewrite(), b.rewrite()),
            relays=(*a.relays(), *b.relays()),
            guards=(a.guard(False), a.guard(True), b.guard(False), b.guard(True)) if guard else (),
        )

    def install(self, *, guard: bool = False) -> EntryBatch:
        """Its entries as one batch: quality reset, rewrites, relays, guards."""
        return self.entries(guard=guard).install()

    def removal(self) -> EntryBatch:
        """Its entries taken away, guards included whether or not it had them."""
        return self.entries(guard=True).removal()


@dataclass(frozen=True, slots=True)
class Nexthop:
    id: int
    port: int
    src_mac: str
    dst_mac: str


@dataclass(frozen=True, slots=True)
class Routes:
    """The switch's routes as ports: prefix -> the dev port `ipv4_lpm` (IPv6:
    `ipv6_lpm`) + `nexthop` send that prefix to (None: the route drops).

    A relay entry is bound to the port its sender's packets arrive on; with
    symmetric routing that is the port the switch routes the sender's address
    to (reverse path), which a spoofed packet from elsewhere cannot change."""

    prefixes: tuple[tuple[ipaddress.IPv4Network | ipaddress.IPv6Network, int | None], ...] = ()
    # Per family, per prefix length, longest first: (mask, network -> port). A
    # lookup is a dict probe per length, and each address's answer is kept
    # (the agent asks for every party of every call; a new Routes starts afresh).
    _by_len: dict[int, tuple[tuple[int, dict[int, int | None]], ...]] = field(
        init=False, repr=False, compare=False
    )
    _seen: dict[str, int | None] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        by_len: dict[int, dict[int, dict[int, int | None]]] = {4: {}, 6: {}}
        for net, port in self.prefixes:
            # Equal prefixes: the first one listed wins.
            fam = by_len[net.version]
            fam.setdefault(net.prefixlen, {}).setdefault(int(net.network_address), port)
        tables: dict[int, tuple[tuple[int, dict[int, int | None]], ...]] = {}
        for version, bits in ((4, 32), (6, 128)):
            lens = by_len[version]
            full = (1 << bits) - 1
            tables[version] = tuple(
                ((full << (bits - n)) & full, lens[n]) for n in sorted(lens)[::-1]
            )
        object.__setattr__(self, "_by_len", tables)
        object.__setattr__(self, "_seen", {})

    def port_for(self, addr: str | int | Addr) -> int | None:
        """The port of the longest prefix holding ``addr`` (None: no route, or
        a route that drops)."""
        if isinstance(addr, str):
            seen = self._seen
            if addr in seen:
                return seen[addr]
            port = self._lookup(ip(addr))
            if len(seen) >= 65536:
                seen.clear()
            seen[addr] = port
            return port
        return self._lookup(ip(addr))

    def _lookup(self, addr: Addr) -> int | None:
        a = int(addr)
        for mask, nets in self._by_len[addr.version]:
            net = a & mask
            if net in nets:
                return nets[net]
        return None


# ---------------------------------------------------------------- notifications


@dataclass(frozen=True, slots=True)
class LearnEvent:
    """A UDP flow to a relay address that matched no relay entry (NAT
    latching), or a foreign source dropped at a guarded port."""

    src: Endpoint
    dst: Endpoint
    ingress_port: int


@dataclass(frozen=True, slots=True)
class RelayIdle:
    """A relay entry saw no packet for its TTL (``idle``), or saw one again."""

    src: Endpoint
    dst: Endpoint
    ingress_port: int
    pipe: int
    idle: bool = True

    @property
    def key(self) -> FlowKey:
        return FlowKey(
            self.src.host, self.dst.host, self.src.port, self.dst.port, self.ingress_port
        )


# ---------------------------------------------------------------- legs


class LegAllocator:
    """Free list of leg indexes [first, first + size).

    ``clean`` holds legs whose quality registers are known to be zero (reset
    when the leg was last released): an install of a clean leg need not
    reset them again. Unknown at start, so nothing is clean yet."""

    def __init__(self, size: int, first: int = 0) -> None:
        self._range = range(first, first + size)
        # Free legs, lowest last; a leg claimed after a restart stays in the
        # list and is skipped when reached (removing it there is O(size), and
        # a restart claims thousands).
        self._free = list(range(first + size - 1, first - 1, -1))
        self._used: set[int] = set()
        self.clean: set[int] = set()

    def take(self) -> int | None:
        """A free leg, or None when every leg is in use."""
        while self._free:
            leg = self._free.pop()
            if leg not in self._used:
                self._used.add(leg)
                return leg
        return None

    def allocate(self) -> int:
        leg = self.take()
        if leg is None:
            raise TableFullError("no free leg index", code=grpc.StatusCode.RESOURCE_EXHAUSTED)
        return leg

    def claim(self, leg: int) -> bool:
        """Mark a leg used (rebuilding after a restart); False if it is not free."""
        if leg in self._used or leg not in self._range:
            return False
        self._used.add(leg)
        return True

    def release(self, leg: int) -> None:
        if leg in self._used:
            self._used.remove(leg)
            self._free.append(leg)

    def dirty(self, legs: Iterable[int]) -> tuple[int, ...]:
        """Of these legs (about to be used), those whose registers need a reset."""
        legs = tuple(legs)
        out = tuple(leg for leg in legs if leg not in self.clean)
        self.clean.difference_update(legs)
        return out

    def __len__(self) -> int:
        return len(self._used)
