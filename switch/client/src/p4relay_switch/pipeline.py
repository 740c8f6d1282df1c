"""Typed operations on p4relay's pipeline (switch/contract.toml).

A call relayed by the switch is two directions; each direction has a leg
index. Per direction the switch holds one ``leg_rewrite`` entry (the rewrite)
and two ``relay`` entries (RTP and RTCP = ports + 1) pointing at the leg:

    A --(a:pa -> R:ra)--> switch --(R:rb -> b:pb)--> B      leg a_to_b
    A <--(R:ra -> a:pa)-- switch <--(b:pb -> R:rb)-- B      leg b_to_a

Once the call's media is latched (NAT learning done), ``relay_guard`` entries
on the relay side (R:ra, R:ra+1, R:rb, R:rb+1) drop packets from any other
source to those ports, so they cannot reach RTPProxy and latch its stream.

Names below are the contract's; tests/test_contract.py checks they match it.
"""

from __future__ import annotations

import contextlib
import ipaddress
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

import grpc

from p4relay_switch.client import Digest, Entry, IdleTimeout, SwitchClient
from p4relay_switch.codec import KeyValue, Lpm, Range
from p4relay_switch.errors import NotFoundError, SwitchError, WriteError
from p4relay_switch.proto import bfruntime_pb2 as pb

IPV4_LPM = "pipe.Ingress.ipv4_lpm"
NEXTHOP = "pipe.Ingress.nexthop"
RELAY_ADDR = "pipe.Ingress.relay_addr"
RELAY = "pipe.Ingress.relay"
RELAY_GUARD = "pipe.Ingress.relay_guard"
LEG_REWRITE = "pipe.Ingress.leg_rewrite"
LEARN_DIGEST = "pipe.IngressDeparser.learn"

A_SET_NEXTHOP = "Ingress.set_nexthop"
A_FORWARD = "Ingress.forward"
A_DROP = "Ingress.drop"
A_MARK_RELAY = "Ingress.mark_relay"
A_RELAY_LEG = "Ingress.relay_leg"
A_REWRITE = "Ingress.rewrite"
A_GUARD_DROP = "Ingress.guard_drop"

# RTP quality per leg, measured as packets leave the egress queue (contract v2),
# so tail drops count as lost and queueing delay variation as jitter.
REG_PACKETS = "pipe.Egress.rtp_packets"
REG_LOST = "pipe.Egress.rtp_lost"
REG_REORDERED = "pipe.Egress.rtp_reordered"
REG_MAX_SEQ = "pipe.Egress.rtp_max_seq"
REG_TRANSIT = "pipe.Egress.rtp_transit"
REG_JITTER = "pipe.Egress.rtp_jitter"
REG_LAST_SEEN = "pipe.Egress.rtp_last_seen"
REG_PAYLOAD_TYPE = "pipe.Egress.rtp_payload_type"
QUALITY_REGISTERS = (
    REG_PACKETS,
    REG_LOST,
    REG_REORDERED,
    REG_MAX_SEQ,
    REG_TRANSIT,
    REG_JITTER,
    REG_LAST_SEEN,
    REG_PAYLOAD_TYPE,
)

K_SRC_ADDR = "hdr.ipv4.src_addr"
K_DST_ADDR = "hdr.ipv4.dst_addr"
K_SRC_PORT = "hdr.udp.src_port"
K_DST_PORT = "hdr.udp.dst_port"
K_NEXTHOP_ID = "ig_md.nexthop_id"
K_LEG = "ig_md.leg"
K_PRIORITY = "$MATCH_PRIORITY"

TTL = "$ENTRY_TTL"
COUNTER_BYTES = "$COUNTER_SPEC_BYTES"
COUNTER_PKTS = "$COUNTER_SPEC_PKTS"

# contract.toml [config]
RTP_CLOCK_HZ = 8000
JITTER_SHIFT = 4

Addr = ipaddress.IPv4Address


def ip(value: str | int | Addr) -> Addr:
    return value if isinstance(value, Addr) else ipaddress.IPv4Address(value)


@dataclass(frozen=True, slots=True)
class Endpoint:
    addr: Addr
    port: int

    @classmethod
    def of(cls, addr: str | int | Addr, port: int) -> Endpoint:
        if not 0 < port < 0xFFFF:  # RTCP needs port + 1
            raise ValueError(f"port {port} out of range")
        return cls(ip(addr), port)

    def __str__(self) -> str:
        return f"{self.addr}:{self.port}"


@dataclass(frozen=True, slots=True)
class RelayDirection:
    """Packets ``src -> relay`` leave as ``out_src -> out_dst``; quality by ``leg``."""

    leg: int
    src: Endpoint
    relay: Endpoint
    out_src: Endpoint
    out_dst: Endpoint

    def match_key(self, rtcp: bool = False) -> dict[str, int]:
        d = 1 if rtcp else 0
        return {
            K_SRC_ADDR: int(self.src.addr),
            K_DST_ADDR: int(self.relay.addr),
            K_SRC_PORT: self.src.port + d,
            K_DST_PORT: self.relay.port + d,
        }

    def guard_key(self, rtcp: bool = False) -> dict[str, int]:
        """The relay port this direction's sender uses, as a relay_guard key."""
        return {K_DST_ADDR: int(self.relay.addr), K_DST_PORT: self.relay.port + (1 if rtcp else 0)}


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
    ) -> RelayCall:
        """``relay_a``: the relay's address:port facing A (A sends RTP there);
        ``relay_b`` the one facing B. ``legs``: (a_to_b, b_to_a) leg indexes."""
        return cls(
            a_to_b=RelayDirection(legs[0], a, relay_a, relay_b, b),
            b_to_a=RelayDirection(legs[1], b, relay_b, relay_a, a),
        )

    @property
    def directions(self) -> tuple[RelayDirection, RelayDirection]:
        return (self.a_to_b, self.b_to_a)

    def guard_keys(self) -> list[dict[str, int]]:
        """The call's 4 relay_guard keys: each leg's relay port and port + 1."""
        return [d.guard_key(r) for d in self.directions for r in (False, True)]


@dataclass(frozen=True, slots=True)
class Nexthop:
    id: int
    port: int
    src_mac: str
    dst_mac: str


@dataclass(frozen=True, slots=True)
class Counters:
    packets: int
    bytes: int


@dataclass(frozen=True, slots=True)
class DirectionCounters:
    rtp: Counters
    rtcp: Counters


@dataclass(frozen=True, slots=True)
class LegQuality:
    """One direction's RTP quality as the data plane measured it at egress
    (packets that left the switch; tail drops count as lost)."""

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


@dataclass(frozen=True, slots=True)
class LearnEvent:
    """A UDP flow to a relay address that matched no session (NAT latching)."""

    src: Endpoint
    dst: Endpoint
    ingress_port: int


@dataclass(frozen=True, slots=True)
class RelayIdle:
    """A relay entry saw no packet for its TTL."""

    src: Endpoint
    dst: Endpoint
    pipe: int


class LegAllocator:
    """Free list of leg indexes [first, first + size)."""

    def __init__(self, size: int, first: int = 0) -> None:
        self._free = list(range(first + size - 1, first - 1, -1))
        self._used: set[int] = set()

    def allocate(self) -> int:
        if not self._free:
            raise SwitchError("no free leg index", code=grpc.StatusCode.RESOURCE_EXHAUSTED)
        leg = self._free.pop()
        self._used.add(leg)
        return leg

    def release(self, leg: int) -> None:
        if leg in self._used:
            self._used.remove(leg)
            self._free.append(leg)

    def __len__(self) -> int:
        return len(self._used)


def _counters(data: Mapping[str, object]) -> Counters:
    p, b = data.get(COUNTER_PKTS, 0), data.get(COUNTER_BYTES, 0)
    return Counters(p if isinstance(p, int) else 0, b if isinstance(b, int) else 0)


class Pipeline:
    """The contract's tables through one SwitchClient."""

    def __init__(self, client: SwitchClient, *, pipe: int | None = None) -> None:
        self.client = client
        self.pipe = pipe  # for per-pipe (asymmetric) relay/leg_rewrite entries

    async def setup(
        self, *, idle_notify: bool = True, ttl_query_interval_ms: int = 1000, min_ttl_ms: int = 1000
    ) -> None:
        """Idle-timeout notifications on the relay table."""
        await self.client.set_idle_table(
            RELAY,
            enable=True,
            notify=idle_notify,
            ttl_query_interval_ms=ttl_query_interval_ms,
            min_ttl_ms=min_ttl_ms,
        )

    # ---------------------------------------------------------- forwarding

    async def add_nexthops(self, nexthops: Iterable[Nexthop], *, replace: bool = False) -> None:
        entries = [
            Entry(
                {K_NEXTHOP_ID: n.id},
                A_FORWARD,
                {"port": n.port, "src_mac": n.src_mac, "dst_mac": n.dst_mac},
            )
            for n in nexthops
        ]
        if replace:
            await self.client.insert_or_modify(NEXTHOP, entries)
        else:
            await self.client.insert(NEXTHOP, entries)

    async def delete_nexthops(self, ids: Iterable[int]) -> None:
        await self.client.delete(NEXTHOP, [Entry({K_NEXTHOP_ID: i}) for i in ids])

    async def add_routes(
        self, routes: Iterable[tuple[str | ipaddress.IPv4Network, int]], *, replace: bool = False
    ) -> None:
        """(prefix, nexthop_id); ``0.0.0.0/0`` is the default route."""
        entries = []
        for prefix, nh in routes:
            net = ipaddress.IPv4Network(prefix)
            entries.append(
                Entry(
                    {K_DST_ADDR: Lpm(int(net.network_address), net.prefixlen)},
                    A_SET_NEXTHOP,
                    {"nexthop_id": nh},
                )
            )
        if replace:
            await self.client.insert_or_modify(IPV4_LPM, entries)
        else:
            await self.client.insert(IPV4_LPM, entries)

    async def delete_routes(self, prefixes: Iterable[str | ipaddress.IPv4Network]) -> None:
        entries = []
        for prefix in prefixes:
            net = ipaddress.IPv4Network(prefix)
            entries.append(Entry({K_DST_ADDR: Lpm(int(net.network_address), net.prefixlen)}))
        await self.client.delete(IPV4_LPM, entries)

    async def add_relay_addr(
        self, addr: str | Addr, port_min: int, port_max: int, *, priority: int = 0
    ) -> None:
        await self.client.insert(
            RELAY_ADDR,
            [
                Entry(
                    {
                        K_DST_ADDR: int(ip(addr)),
                        K_DST_PORT: Range(port_min, port_max),
                        K_PRIORITY: priority,
                    },
                    A_MARK_RELAY,
                )
            ],
        )

    async def delete_relay_addr(
        self, addr: str | Addr, port_min: int, port_max: int, *, priority: int = 0
    ) -> None:
        key: dict[str, KeyValue] = {
            K_DST_ADDR: int(ip(addr)),
            K_DST_PORT: Range(port_min, port_max),
            K_PRIORITY: priority,
        }
        await self.client.delete(RELAY_ADDR, [Entry(key)])

    # ---------------------------------------------------------- calls

    def _rewrite_entry(self, d: RelayDirection) -> Entry:
        return Entry(
            {K_LEG: d.leg},
            A_REWRITE,
            {
                "src_addr": int(d.out_src.addr),
                "dst_addr": int(d.out_dst.addr),
                "src_port": d.out_src.port,
                "dst_port": d.out_dst.port,
            },
            pipe=self.pipe,
        )

    def _relay_entries(self, d: RelayDirection, ttl_ms: int | None) -> list[Entry]:
        out = []
        for rtcp in (False, True):
            data: dict[str, int] = {"leg": d.leg, "rtcp": int(rtcp)}
            if ttl_ms is not None:
                data[TTL] = ttl_ms
            out.append(Entry(d.match_key(rtcp), A_RELAY_LEG, data, pipe=self.pipe))
        return out

    def guard_entries(self, call: RelayCall) -> list[Entry]:
        """The call's relay_guard entries (action guard_drop), for a caller's own batch."""
        return [Entry(k, A_GUARD_DROP, pipe=self.pipe) for k in call.guard_keys()]

    async def install_call(
        self, call: RelayCall, *, ttl_ms: int | None = None, guard: bool = False
    ) -> None:
        """Reset the legs' quality registers, write both rewrites, then the four relay
        entries and, with ``guard`` (only once NAT learning is done: the first
        packet must reach RTPProxy to latch it), the four relay_guard entries after
        them in the same write. On failure what this call wrote is removed again
        (never an entry that was there before, e.g. on ALREADY_EXISTS) and the
        typed error (TableFullError: leave the call on RTPProxy) is raised."""
        await self.reset_quality([d.leg for d in call.directions])
        c = self.client
        rewrites = [
            c.update(pb.Update.INSERT, LEG_REWRITE, self._rewrite_entry(d)) for d in call.directions
        ]
        relays = [
            c.update(pb.Update.INSERT, RELAY, e)
            for d in call.directions
            for e in self._relay_entries(d, ttl_ms)
        ]
        if guard:
            relays += [c.update(pb.Update.INSERT, RELAY_GUARD, e) for e in self.guard_entries(call)]
        try:
            await c.write(rewrites)
        except WriteError as e:
            await self._undo(rewrites, e)
            raise
        try:
            await c.write(relays)
        except WriteError as e:
            await self._undo(relays, e)
            await self._undo(rewrites, None)
            raise

    async def _undo(self, inserts: Sequence[pb.Update], err: WriteError | None) -> None:
        """Delete the inserts of a batch that succeeded. ``err`` None: all did. When
        the switch did not say which updates failed, every insert is deleted."""
        failed = {u.index for u in err.errors} if err is not None else set()
        known = err is None or (bool(err.errors) and -1 not in failed)
        c = self.client
        for i, u in enumerate(inserts):
            if known and i in failed:
                continue
            te = pb.TableEntry()
            te.CopyFrom(u.entity.table_entry)
            te.ClearField("data")
            with contextlib.suppress(NotFoundError):
                await c.write([pb.Update(type=pb.Update.DELETE, entity=pb.Entity(table_entry=te))])

    async def update_call(self, call: RelayCall) -> None:
        """Re-point both legs' rewrites (the far end moved, e.g. re-INVITE). The
        relay keys (who sends to which relay port) identify the call and must
        be unchanged; if they change, remove_call + install_call."""
        c = self.client
        await c.write(
            [
                c.update(pb.Update.MODIFY, LEG_REWRITE, self._rewrite_entry(d))
                for d in call.directions
            ]
        )

    async def guard_call(self, call: RelayCall) -> None:
        """Insert the call's four relay_guard entries (its relay entries are
        installed and its media latched). On failure the ones inserted are
        removed again and the typed error is raised (TableFullError: the call can
        stay offloaded unguarded or go back to RTPProxy, the caller's choice)."""
        c = self.client
        guards = [c.update(pb.Update.INSERT, RELAY_GUARD, e) for e in self.guard_entries(call)]
        try:
            await c.write(guards)
        except WriteError as e:
            await self._undo(guards, e)
            raise

    async def unguard_call(self, call: RelayCall, *, missing_ok: bool = True) -> None:
        """Delete the call's relay_guard entries (before its relay entries, so a
        legitimate packet is never dropped). Absent entries are fine by default:
        a call may never have been guarded."""
        c = self.client
        for e in self.guard_entries(call):
            try:
                await c.write([c.update(pb.Update.DELETE, RELAY_GUARD, Entry(e.key, pipe=e.pipe))])
            except NotFoundError:
                if not missing_ok:
                    raise

    async def remove_call(self, call: RelayCall, *, missing_ok: bool = False) -> None:
        """Guard entries first (absent ones are fine: not every call is guarded),
        then relay entries (no packet can find a leg without rewrite), then rewrites."""
        await self.unguard_call(call)
        c = self.client
        for table, entries in (
            (
                RELAY,
                [
                    Entry(d.match_key(r), pipe=self.pipe)
                    for d in call.directions
                    for r in (False, True)
                ],
            ),
            (LEG_REWRITE, [Entry({K_LEG: d.leg}, pipe=self.pipe) for d in call.directions]),
        ):
            for e in entries:
                # One at a time so one absent entry does not hide the others.
                try:
                    await c.write([c.update(pb.Update.DELETE, table, e)])
                except NotFoundError:
                    if not missing_ok:
                        raise

    async def call_counters(self, call: RelayCall) -> dict[int, DirectionCounters]:
        """leg -> RTP and RTCP packet/byte counters of that direction."""
        keys = [d.match_key(r) for d in call.directions for r in (False, True)]
        got = await self.client.read(RELAY, keys)
        by_key = {tuple(sorted((k, v) for k, v in e.key.items())): e for e in got}
        out: dict[int, DirectionCounters] = {}
        for d in call.directions:
            pair = []
            for r in (False, True):
                e = by_key.get(tuple(sorted(d.match_key(r).items())))
                pair.append(_counters(e.data) if e else Counters(0, 0))
            out[d.leg] = DirectionCounters(pair[0], pair[1])
        return out

    async def guard_counters(self, call: RelayCall) -> dict[int, Counters]:
        """Guarded relay port -> foreign packets/bytes dropped there (absent
        entries: the port is not guarded, so not listed)."""
        out: dict[int, Counters] = {}
        for k in call.guard_keys():
            # One read per key: a read naming an absent entry fails as a whole.
            with contextlib.suppress(NotFoundError):
                for e in await self.client.read(RELAY_GUARD, [k], pipe=self.pipe):
                    out[k[K_DST_PORT]] = _counters(e.data)
        return out

    async def guard_entry_count(self) -> int:
        return await self.client.usage(RELAY_GUARD)

    # ---------------------------------------------------------- quality

    async def read_quality(self, legs: Sequence[int]) -> dict[int, LegQuality]:
        regs: dict[str, dict[int, list[int]]] = {}
        for name in QUALITY_REGISTERS:
            regs[name] = await self.client.read_register(name, legs)
        out: dict[int, LegQuality] = {}
        for leg in legs:
            pkts = regs[REG_PACKETS].get(leg, [0])
            # Counts add over pipes; the rest come from the pipe that saw the leg.
            best = max(range(len(pkts)), key=lambda i: pkts[i])

            def val(name: str, leg: int = leg, best: int = best) -> int:
                v = regs[name].get(leg, [0])
                return v[best] if best < len(v) else v[0]

            def total(name: str, leg: int = leg) -> int:
                return sum(regs[name].get(leg, [0]))

            out[leg] = LegQuality(
                leg=leg,
                packets=total(REG_PACKETS),
                lost=total(REG_LOST),
                reordered=total(REG_REORDERED),
                max_seq=val(REG_MAX_SEQ),
                transit=val(REG_TRANSIT),
                jitter_raw=val(REG_JITTER),
                last_seen_ms=val(REG_LAST_SEEN),
                payload_type=val(REG_PAYLOAD_TYPE),
            )
        return out

    async def reset_quality(self, legs: Sequence[int]) -> None:
        for name in QUALITY_REGISTERS:
            await self.client.write_register(name, dict.fromkeys(legs, 0))

    # ---------------------------------------------------------- notifications

    @staticmethod
    def learn_events(d: Digest) -> list[LearnEvent]:
        if d.learn != LEARN_DIGEST:
            return []
        return [
            LearnEvent(
                src=Endpoint(ip(r.get("src_addr", 0)), r.get("src_port", 0)),
                dst=Endpoint(ip(r.get("dst_addr", 0)), r.get("dst_port", 0)),
                ingress_port=r.get("ingress_port", 0),
            )
            for r in d.entries
        ]

    @staticmethod
    def relay_idle(n: IdleTimeout) -> RelayIdle | None:
        if n.table != RELAY or not n.idle:
            return None
        k = n.key

        def num(name: str) -> int:
            v = k.get(name, 0)
            return v if isinstance(v, int) else 0

        return RelayIdle(
            src=Endpoint(ip(num(K_SRC_ADDR)), num(K_SRC_PORT)),
            dst=Endpoint(ip(num(K_DST_ADDR)), num(K_DST_PORT)),
            pipe=n.pipe,
        )

    async def relay_entry_count(self) -> int:
        return await self.client.usage(RELAY)
