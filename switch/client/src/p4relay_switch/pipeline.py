"""Typed operations on p4relay's pipeline (switch/contract.toml).

A call relayed by the switch is two directions; each direction has a leg
index. Per direction the switch holds one ``leg_rewrite`` entry (the rewrite)
and two ``relay`` entries (RTP and RTCP = ports + 1) pointing at the leg:

    A --(a:pa -> R:ra)--> switch --(R:rb -> b:pb)--> B      leg a_to_b
    A <--(R:ra -> a:pa)-- switch <--(b:pb -> R:rb)-- B      leg b_to_a

Once the call's media is latched (NAT learning done), ``relay_guard`` entries
on the relay side (R:ra, R:ra+1, R:rb, R:rb+1) drop packets from any other
source to those ports, so they cannot reach RTPProxy and latch its stream.

An IPv6 call has the same entries in the IPv6 tables (relay6, leg_rewrite6,
relay_guard6), where the relay's address is its relay_id: `add_relay_addr`
gives each relay IPv6 address one (relay6_addr) and the Pipeline keeps the
map, read back from the switch on first use.

Every call write is one `EntryBatch` through `Pipeline.write`: the updates
are encoded straight to protobuf wire bytes (`encode.py`, a few microseconds
per entry) and sent as one Write; what a failed batch inserted is deleted
again before the typed error is raised. Reads of counters and quality
registers are one Read each. The model's types are in `model.py`, the
contract's names in `names.py`.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Iterable, Mapping, Sequence

import grpc
import structlog

from p4relay_switch.client import Digest, Entry, IdleTimeout, SwitchClient
from p4relay_switch.codec import KeyValue, Lpm, Range
from p4relay_switch.encode import DELETE_KIND, Encoded, Encoder
from p4relay_switch.errors import NotFoundError, SwitchError, WriteError, write_error
from p4relay_switch.model import (
    Addr,
    Counters,
    Endpoint,
    EntryBatch,
    EntryDump,
    FlowKey,
    GuardEntry,
    GuardKey,
    LearnEvent,
    LegAllocator,
    LegQuality,
    LegRewrite,
    Nexthop,
    RelayCall,
    RelayDirection,
    RelayEntry,
    RelayIdle,
    Routes,
    ip,
)
from p4relay_switch.names import (
    A_DROP,
    A_FORWARD,
    A_GUARD6_DROP,
    A_GUARD_DROP,
    A_MARK_RELAY,
    A_MARK_RELAY6,
    A_RELAY6_LEG,
    A_RELAY_LEG,
    A_REWRITE,
    A_REWRITE6,
    A_SET_NEXTHOP,
    COUNTER_BYTES,
    COUNTER_INDEX,
    COUNTER_PKTS,
    D_UNBOUND,
    F_LOST,
    F_REORDERED,
    F_VALUE,
    GUARD_DROPS,
    IPV4_LPM,
    IPV6_LPM,
    JITTER_SHIFT,
    K6_DST_ADDR,
    K6_SRC_ADDR,
    K_BOUND_PORT,
    K_DST_ADDR,
    K_DST_PORT,
    K_LEG,
    K_LEG6,
    K_NEXTHOP_ID,
    K_PORT_METADATA_PORT,
    K_PRIORITY,
    K_RELAY_ID,
    K_SRC_ADDR,
    K_SRC_PORT,
    LEARN6_DIGEST,
    LEARN_DIGEST,
    LEG_REWRITE,
    LEG_REWRITE6,
    LOSS_FIELDS,
    LOSS_REGISTERS,
    NEXTHOP,
    PORT_METADATA,
    QUALITY_HI_SUFFIX,
    REG_JITTER,
    REG_LAST_SEEN,
    REG_LOSS,
    REG_LOST,
    REG_MAX_SEQ,
    REG_PACKETS,
    REG_PAYLOAD_TYPE,
    REG_REORDERED,
    REG_TRANSIT,
    RELAY,
    RELAY6,
    RELAY6_ADDR,
    RELAY6_IDS,
    RELAY_ADDR,
    RELAY_GUARD,
    RELAY_GUARD6,
    RTP_CLOCK_HZ,
    TTL,
    UNBOUND_PORT,
    RegisterValue,
    loss_values,
    quality_registers,
    quality_values,
    register_field,
)

__all__ = [
    "A_DROP",
    "A_FORWARD",
    "A_GUARD6_DROP",
    "A_GUARD_DROP",
    "A_MARK_RELAY",
    "A_MARK_RELAY6",
    "A_RELAY6_LEG",
    "A_RELAY_LEG",
    "A_REWRITE",
    "A_REWRITE6",
    "A_SET_NEXTHOP",
    "COUNTER_BYTES",
    "COUNTER_INDEX",
    "COUNTER_PKTS",
    "D_UNBOUND",
    "F_LOST",
    "F_REORDERED",
    "F_VALUE",
    "GUARD_DROPS",
    "IPV4_LPM",
    "IPV6_LPM",
    "JITTER_SHIFT",
    "K6_DST_ADDR",
    "K6_SRC_ADDR",
    "K_BOUND_PORT",
    "K_DST_ADDR",
    "K_DST_PORT",
    "K_LEG",
    "K_LEG6",
    "K_NEXTHOP_ID",
    "K_PORT_METADATA_PORT",
    "K_PRIORITY",
    "K_RELAY_ID",
    "K_SRC_ADDR",
    "K_SRC_PORT",
    "LEARN6_DIGEST",
    "LEARN_DIGEST",
    "LEG_REWRITE",
    "LEG_REWRITE6",
    "LOSS_FIELDS",
    "LOSS_REGISTERS",
    "NEXTHOP",
    "PORT_METADATA",
    "QUALITY_HI_SUFFIX",
    "REG_JITTER",
    "REG_LAST_SEEN",
    "REG_LOSS",
    "REG_LOST",
    "REG_MAX_SEQ",
    "REG_PACKETS",
    "REG_PAYLOAD_TYPE",
    "REG_REORDERED",
    "REG_TRANSIT",
    "RELAY",
    "RELAY6",
    "RELAY6_ADDR",
    "RELAY6_IDS",
    "RELAY_ADDR",
    "RELAY_GUARD",
    "RELAY_GUARD6",
    "RTP_CLOCK_HZ",
    "TTL",
    "UNBOUND_PORT",
    "Counters",
    "Endpoint",
    "EntryBatch",
    "EntryDump",
    "FlowKey",
    "GuardEntry",
    "GuardKey",
    "LearnEvent",
    "LegAllocator",
    "LegQuality",
    "LegRewrite",
    "Nexthop",
    "Pipeline",
    "RegisterValue",
    "RelayCall",
    "RelayDirection",
    "RelayEntry",
    "RelayIdle",
    "Routes",
    "loss_values",
    "quality_registers",
    "quality_values",
    "register_field",
]

log = structlog.get_logger("p4relay_switch.pipeline")


def _int(v: object) -> int:
    return v if isinstance(v, int) else int(str(v))


def _ip(v: object) -> str:
    return str(ipaddress.IPv4Address(v)) if isinstance(v, int) else str(v)


def _ip6(v: object) -> str:
    return str(ipaddress.IPv6Address(v)) if isinstance(v, int) else str(v)


def _net(
    prefix: str | ipaddress.IPv4Network | ipaddress.IPv6Network,
) -> ipaddress.IPv4Network | ipaddress.IPv6Network:
    return prefix if not isinstance(prefix, str) else ipaddress.ip_network(prefix)


class Pipeline:
    """The contract's tables through one SwitchClient."""

    def __init__(self, client: SwitchClient) -> None:
        self.client = client
        self._enc: Encoder | None = None
        # relay6_addr's ids: the relay's IPv6 address (canonical) -> relay_id,
        # loaded from the switch on first use (`_relay6_map`).
        self._relay6_ids: dict[str, int] = {}
        self._relay6_loaded = False

    @property
    def has_v6(self) -> bool:
        """The switch's program has the IPv6 tables."""
        return RELAY6 in self.client.schema.tables

    @property
    def relay6_addrs(self) -> dict[int, str]:
        """relay_id -> the relay's IPv6 address (for `relay_idle` of relay6 entries)."""
        return {rid: a for a, rid in self._relay6_ids.items()}

    async def load_relay6_addrs(self) -> dict[int, str]:
        """relay_id -> relay IPv6 address, read from relay6_addr if not yet known
        (what `relay_idle` and a reader of relay6 keys need)."""
        await self._relay6_map()
        return self.relay6_addrs

    async def _relay6_map(self) -> dict[str, int]:
        """The relay_id of each relay IPv6 address, as relay6_addr holds them."""
        if not self._relay6_loaded and self.has_v6:
            ids: dict[str, int] = {}
            for e in await self.client.read(RELAY6_ADDR, from_hw=False):
                if e.is_default or e.action != A_MARK_RELAY6:
                    continue
                ids[_ip6(e.key[K6_DST_ADDR])] = _int(e.data.get("relay_id", 0))
            self._relay6_ids.clear()
            self._relay6_ids.update(ids)
            self._relay6_loaded = True
        return self._relay6_ids

    async def _relay_id(self, addr: ipaddress.IPv6Address) -> int:
        """The relay_id of this relay address: its own, or the lowest free one."""
        ids = await self._relay6_map()
        host = str(addr)
        if host in ids:
            return ids[host]
        used = set(ids.values())
        free = next((i for i in range(RELAY6_IDS) if i not in used), None)
        if free is None:
            raise SwitchError(
                f"{host}: every relay_id is taken ({RELAY6_IDS} relay IPv6 addresses)",
                code=grpc.StatusCode.RESOURCE_EXHAUSTED,
            )
        return free

    async def setup(
        self, *, idle_notify: bool = True, ttl_query_interval_ms: int = 1000, min_ttl_ms: int = 1000
    ) -> None:
        """Idle-timeout notifications on the relay tables (relay, relay6)."""
        for table in (RELAY, RELAY6) if self.has_v6 else (RELAY,):
            await self.client.set_idle_table(
                table,
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

    @staticmethod
    def _route_entries(
        routes: Iterable[tuple[str | ipaddress.IPv4Network | ipaddress.IPv6Network, int | None]],
    ) -> dict[str, list[Entry]]:
        """Routes (or, nexthop None, route keys) by table: ipv4_lpm, ipv6_lpm."""
        out: dict[str, list[Entry]] = {IPV4_LPM: [], IPV6_LPM: []}
        for prefix, nh in routes:
            net = _net(prefix)
            table, key = (IPV6_LPM, K6_DST_ADDR) if net.version == 6 else (IPV4_LPM, K_DST_ADDR)
            k: dict[str, KeyValue] = {key: Lpm(int(net.network_address), net.prefixlen)}
            out[table].append(
                Entry(k) if nh is None else Entry(k, A_SET_NEXTHOP, {"nexthop_id": nh})
            )
        return out

    async def add_routes(
        self,
        routes: Iterable[tuple[str | ipaddress.IPv4Network | ipaddress.IPv6Network, int]],
        *,
        replace: bool = False,
    ) -> None:
        """(prefix, nexthop_id), IPv4 (ipv4_lpm) or IPv6 (ipv6_lpm); ``0.0.0.0/0``
        and ``::/0`` are the default routes."""
        for table, entries in self._route_entries(routes).items():
            if not entries:
                continue
            if replace:
                await self.client.insert_or_modify(table, entries)
            else:
                await self.client.insert(table, entries)

    async def read_routes(self) -> Routes:
        """Every route with the port its next hop sends to (reverse-path
        lookups: `Routes.port_for`)."""
        ports: dict[int, int | None] = {}
        for e in await self.client.read(NEXTHOP, from_hw=False):
            if e.is_default:
                continue
            ports[_int(e.key[K_NEXTHOP_ID])] = (
                _int(e.data["port"]) if e.action == A_FORWARD and "port" in e.data else None
            )
        prefixes: list[tuple[ipaddress.IPv4Network | ipaddress.IPv6Network, int | None]] = []
        tables = [(IPV4_LPM, K_DST_ADDR, 4)] + ([(IPV6_LPM, K6_DST_ADDR, 6)] if self.has_v6 else [])
        for table, key, version in tables:
            for e in await self.client.read(table, from_hw=False):
                k = e.key.get(key)
                if e.is_default or not isinstance(k, Lpm):
                    continue
                net: ipaddress.IPv4Network | ipaddress.IPv6Network = (
                    ipaddress.IPv6Network((_int(k.value), k.prefix_len), strict=False)
                    if version == 6
                    else ipaddress.IPv4Network((_int(k.value), k.prefix_len), strict=False)
                )
                nh = e.data.get("nexthop_id")
                port = ports.get(_int(nh)) if e.action == A_SET_NEXTHOP and nh is not None else None
                prefixes.append((net, port))
        return Routes(tuple(prefixes))

    async def delete_routes(
        self, prefixes: Iterable[str | ipaddress.IPv4Network | ipaddress.IPv6Network]
    ) -> None:
        for table, entries in self._route_entries((p, None) for p in prefixes).items():
            if entries:
                await self.client.delete(table, entries)

    async def _relay_addr_entry(
        self, addr: str | Addr, port_min: int, port_max: int, priority: int
    ) -> tuple[str, Entry]:
        """The relay_addr (IPv4) or relay6_addr (IPv6, with its relay_id) entry."""
        a = ip(addr)
        rng = Range(port_min, port_max)
        if a.version == 6:
            rid = await self._relay_id(a)
            key: dict[str, KeyValue] = {K6_DST_ADDR: int(a), K_DST_PORT: rng, K_PRIORITY: priority}
            return RELAY6_ADDR, Entry(key, A_MARK_RELAY6, {"relay_id": rid})
        key = {K_DST_ADDR: int(a), K_DST_PORT: rng, K_PRIORITY: priority}
        return RELAY_ADDR, Entry(key, A_MARK_RELAY)

    def _note_relay6(self, table: str, e: Entry, addr: str | Addr) -> None:
        if table == RELAY6_ADDR and e.data is not None:
            self._relay6_ids[str(ip(addr))] = _int(e.data["relay_id"])

    async def add_relay_addr(
        self, addr: str | Addr, port_min: int, port_max: int, *, priority: int = 0
    ) -> None:
        """A relay address (IPv4 or IPv6) and its media port range."""
        table, e = await self._relay_addr_entry(addr, port_min, port_max, priority)
        await self.client.insert(table, [e])
        self._note_relay6(table, e, addr)

    async def delete_relay_addr(
        self, addr: str | Addr, port_min: int, port_max: int, *, priority: int = 0
    ) -> None:
        table, e = await self._relay_addr_entry(addr, port_min, port_max, priority)
        await self.client.delete(table, [Entry(e.key)])
        if table == RELAY6_ADDR:
            self._relay6_loaded = False  # its id is free again if no range is left

    async def set_relay_addrs(
        self, addrs: Iterable[str | Addr], port_min: int, port_max: int
    ) -> None:
        """The relay server's media ranges (insert or replace), either family."""
        for a in addrs:
            table, e = await self._relay_addr_entry(a, port_min, port_max, 0)
            await self.client.insert_or_modify(table, [e])
            self._note_relay6(table, e, a)

    # ---------------------------------------------------------- port binding

    async def set_port_binding(self, ports: Iterable[int], *, bound: bool) -> None:
        """Port binding of each dev port (the port's phase-0 data). Bound (the
        default of a port without an entry): relay entries match only packets
        arriving on the port they name. Unbound: packets from the port key
        relay on UNBOUND_PORT, so an entry installed with it matches the flow
        from every unbound port (asymmetric routing; a spoofed source on an
        unbound port is then relayed too)."""
        entries = [
            Entry({K_PORT_METADATA_PORT: p}, None, {D_UNBOUND: 0 if bound else 1}) for p in ports
        ]
        if entries:
            await self.client.insert_or_modify(PORT_METADATA, entries)

    async def read_port_binding(self) -> dict[int, bool]:
        """dev port -> bound, for every port with an entry (a port without one is bound)."""
        out: dict[int, bool] = {}
        for e in await self.client.read(PORT_METADATA, from_hw=False):
            if e.is_default or K_PORT_METADATA_PORT not in e.key:
                continue
            out[_int(e.key[K_PORT_METADATA_PORT])] = _int(e.data.get(D_UNBOUND, 0)) == 0
        return out

    # ---------------------------------------------------------- calls: writes

    def _encoder(self) -> Encoder:
        schema = self.client.schema
        if self._enc is None or self._enc.schema is not schema:
            # ids may change when the switch reloads; so may relay6_addr
            self._enc = Encoder(schema, self._relay6_ids)
            self._relay6_loaded = False
        return self._enc

    async def write(self, batch: EntryBatch, ttl_ms: int = 0, *, missing_ok: bool = True) -> None:
        """One Write of the batch, in its order. Deleting an absent entry is
        fine unless ``missing_ok`` is False. On any other failure, what this
        batch inserted is deleted again (never an entry whose own insert
        failed, e.g. ALREADY_EXISTS: it is someone else's) and the first failed
        update's typed error is raised (TableFullError: leave the call on the
        relay server). ``ttl_ms``: the relay entries' idle TTL (0: none)."""
        if not batch:
            return
        encoder = self._encoder()
        if encoder.has_v6:
            await self._relay6_map()
        try:
            enc = encoder.batch(batch, ttl_ms)
        except (ValueError, OverflowError, OSError) as exc:  # a bad address, port or leg
            raise SwitchError(
                f"cannot encode the batch: {exc}", code=grpc.StatusCode.INVALID_ARGUMENT
            ) from exc
        kinds = enc.kinds
        try:
            await self.client.write_updates(enc.updates, len(kinds))
            return
        except WriteError as exc:
            failed = [
                e
                for e in exc.errors
                if not (
                    missing_ok
                    and 0 <= e.index < len(kinds)
                    and kinds[e.index] == DELETE_KIND
                    and e.code is grpc.StatusCode.NOT_FOUND
                )
            ]
            if exc.errors and not failed:
                return  # only deletions of entries already gone
            log.warning("switch.batch_failed", error=str(exc), failed=len(failed) or len(kinds))
            await self._undo(batch, enc, {e.index for e in exc.errors} if exc.errors else set())
            if failed:
                # Every failed update, each by its index in the batch.
                msg = f"Write: {len(failed)} of {len(kinds)} updates failed"
                raise write_error(failed[0].code, msg, tuple(failed)) from exc
            raise

    async def _undo(self, b: EntryBatch, enc: Encoded, failed: set[int]) -> None:
        """Delete what this batch inserted, but never an entry whose own insert
        failed (`enc` says which update inserted what). Without per-update
        detail every insert of the batch is undone."""
        added = [lg for i, lg in zip(enc.add_legs, b.add_legs, strict=True) if i not in failed]
        del_legs = [lg.leg for lg in added if not lg.v6]
        del_legs6 = [lg.leg for lg in added if lg.v6]
        del_relays = [
            r.key for i, r in zip(enc.add_relays, b.add_relays, strict=True) if i not in failed
        ]
        del_guards = [
            g.key for i, g in zip(enc.add_guards, b.add_guards, strict=True) if i not in failed
        ]
        undo = EntryBatch(
            del_relays=tuple(del_relays),
            del_legs=tuple(del_legs),
            del_legs6=tuple(del_legs6),
            del_guards=tuple(del_guards),
        )
        if not undo:
            return
        undo_enc = self._encoder().batch(undo, 0)
        try:
            await self.client.write_updates(undo_enc.updates, len(undo_enc.kinds))
        except SwitchError as exc:  # absent entries, or the switch went away
            log.info("switch.undo_incomplete", error=str(exc))

    async def install_call(
        self, call: RelayCall, *, ttl_ms: int | None = None, guard: bool = False
    ) -> None:
        """Reset the legs' quality registers, write both rewrites, the four relay
        entries and, with ``guard`` (only once NAT learning is done: the first
        packet must reach RTPProxy to latch it), the four relay_guard entries
        after them, in one write. On failure what this call wrote is removed
        again (never an entry that was there before, e.g. on ALREADY_EXISTS) and
        the typed error (TableFullError: leave the call on RTPProxy) is raised."""
        await self.write(call.install(guard=guard), ttl_ms or 0)

    async def update_call(self, call: RelayCall) -> None:
        """Re-point both legs' rewrites (the far end moved, e.g. re-INVITE). The
        relay keys (who sends to which relay port) identify the call and must
        be unchanged; if they change, remove_call + install_call."""
        await self.write(EntryBatch(mod_legs=tuple(d.rewrite() for d in call.directions)))

    def guard_entries(self, call: RelayCall) -> list[Entry]:
        """The call's relay_guard entries (action guard_drop; an IPv6 call's:
        relay_guard6, guard6_drop by relay_id), for a caller's own batch."""
        if call.v6:
            enc = self._encoder()
            return [
                Entry(
                    {
                        K_RELAY_ID: int.from_bytes(enc.relay_id_of(g.key.dst_addr), "big"),
                        K_DST_PORT: g.key.dst_port,
                    },
                    A_GUARD6_DROP,
                    {"leg": g.leg},
                )
                for g in call.guards()
            ]
        return [
            Entry(
                {K_DST_ADDR: int(ip(g.key.dst_addr)), K_DST_PORT: g.key.dst_port},
                A_GUARD_DROP,
                {"leg": g.leg},
            )
            for g in call.guards()
        ]

    async def guard_call(self, call: RelayCall) -> None:
        """Insert the call's four relay_guard entries (its relay entries are
        installed and its media latched). On failure the ones inserted are
        removed again and the typed error is raised (TableFullError: the call can
        stay offloaded unguarded or go back to RTPProxy, the caller's choice)."""
        await self.write(EntryBatch(add_guards=tuple(call.guards())))

    async def unguard_call(self, call: RelayCall, *, missing_ok: bool = True) -> None:
        """Delete the call's relay_guard entries (before its relay entries, so a
        legitimate packet is never dropped). Absent entries are fine by default:
        a call may never have been guarded."""
        await self.write(EntryBatch(del_guards=tuple(call.guard_keys())), missing_ok=missing_ok)

    async def remove_call(self, call: RelayCall, *, missing_ok: bool = False) -> None:
        """Guard entries first (absent ones are fine: not every call is guarded),
        then relay entries (no packet can find a leg without rewrite), then
        rewrites, in one write. ``missing_ok`` False: NotFoundError if a relay
        entry or rewrite was absent (the others are removed all the same)."""
        await self.unguard_call(call)
        b = call.removal()
        await self.write(
            EntryBatch(del_relays=b.del_relays, del_legs=b.del_legs, del_legs6=b.del_legs6),
            missing_ok=missing_ok,
        )

    # ---------------------------------------------------------- calls: reads

    async def read_leg_counters(
        self, legs: Sequence[int], *, v6: bool = False
    ) -> dict[int, Counters]:
        """Each leg's packets/bytes (leg_rewrite's direct counter, ``v6``:
        leg_rewrite6's: RTP and RTCP of the direction), synced from the
        hardware; legs without an entry are left out. One Read; if some entry
        is gone (NOT_FOUND fails the whole Read), leg by leg."""
        legs = list(legs)
        if not legs:
            return {}
        enc = self._encoder()
        try:
            return enc.decode_leg_counters(
                await self.client.read_encoded(enc.leg_reads(legs, v6=v6))
            )
        except NotFoundError:
            if len(legs) == 1:
                return {}
            out: dict[int, Counters] = {}
            for leg in legs:
                out.update(await self.read_leg_counters([leg], v6=v6))
            return out

    async def read_guard_drops(self, legs: Sequence[int]) -> dict[int, int]:
        """Foreign packets the guards of each leg dropped (`guard_drops[leg]`,
        summed over the pipes), in one Read."""
        legs = list(legs)
        if not legs:
            return {}
        enc = self._encoder()
        return enc.decode_guard_drops(await self.client.read_encoded(enc.guard_drop_reads(legs)))

    async def call_counters(self, call: RelayCall) -> dict[int, Counters]:
        """leg -> packets/bytes of that direction, RTP and RTCP (zero for a leg
        whose rewrite is absent)."""
        got = await self.read_leg_counters(call.legs, v6=call.v6)
        return {leg: got.get(leg, Counters(0, 0)) for leg in call.legs}

    async def guard_drops(self, call: RelayCall) -> dict[int, int]:
        """leg -> foreign packets dropped at that direction's relay ports."""
        return await self.read_guard_drops(call.legs)

    async def guard_entry_count(self) -> int:
        """relay_guard (and relay_guard6) entries."""
        n = await self.client.usage(RELAY_GUARD)
        return n + (await self.client.usage(RELAY_GUARD6) if self.has_v6 else 0)

    async def dump(self) -> EntryDump:
        """Every relay, leg_rewrite and relay_guard entry the switch holds."""
        relays = await self.client.read(RELAY)
        legs = await self.client.read(LEG_REWRITE)
        guards = await self.client.read(RELAY_GUARD)
        dump6 = await self._dump6() if self.has_v6 else EntryDump([], [], [])
        return EntryDump(
            [
                RelayEntry(
                    FlowKey(
                        _ip(r.key[K_SRC_ADDR]),
                        _ip(r.key[K_DST_ADDR]),
                        _int(r.key[K_SRC_PORT]),
                        _int(r.key[K_DST_PORT]),
                        _int(r.key[K_BOUND_PORT]),
                    ),
                    _int(r.data.get("leg", 0)),
                    bool(_int(r.data.get("rtcp", 0))),
                )
                for r in relays
            ]
            + dump6.relays,
            [
                LegRewrite(
                    _int(r.key[K_LEG]),
                    _ip(r.data.get("src_addr", 0)),
                    _ip(r.data.get("dst_addr", 0)),
                    _int(r.data.get("src_port", 0)),
                    _int(r.data.get("dst_port", 0)),
                )
                for r in legs
            ]
            + dump6.legs,
            [
                GuardEntry(
                    GuardKey(_ip(r.key[K_DST_ADDR]), _int(r.key[K_DST_PORT])),
                    _int(r.data.get("leg", 0)),
                )
                for r in guards
            ]
            + dump6.guards,
        )

    async def _dump6(self) -> EntryDump:
        """The IPv6 tables' entries, relay_ids as the relay addresses."""
        addrs = {rid: a for a, rid in (await self._relay6_map()).items()}

        def relay_addr(rid: object) -> str:
            a = addrs.get(_int(rid))
            return a if a is not None else f"relay_id:{_int(rid)}"

        relays = await self.client.read(RELAY6)
        legs = await self.client.read(LEG_REWRITE6)
        guards = await self.client.read(RELAY_GUARD6)
        return EntryDump(
            [
                RelayEntry(
                    FlowKey(
                        _ip6(r.key[K6_SRC_ADDR]),
                        relay_addr(r.key[K_RELAY_ID]),
                        _int(r.key[K_SRC_PORT]),
                        _int(r.key[K_DST_PORT]),
                        _int(r.key[K_BOUND_PORT]),
                    ),
                    _int(r.data.get("leg", 0)),
                    bool(_int(r.data.get("rtcp", 0))),
                )
                for r in relays
            ],
            [
                LegRewrite(
                    _int(r.key[K_LEG6]),
                    _ip6(r.data.get("src_addr", 0)),
                    _ip6(r.data.get("dst_addr", 0)),
                    _int(r.data.get("src_port", 0)),
                    _int(r.data.get("dst_port", 0)),
                )
                for r in legs
            ],
            [
                GuardEntry(
                    GuardKey(relay_addr(r.key[K_RELAY_ID]), _int(r.key[K_DST_PORT])),
                    _int(r.data.get("leg", 0)),
                )
                for r in guards
            ],
        )

    # ---------------------------------------------------------- quality

    async def read_quality(self, legs: Sequence[int]) -> dict[int, LegQuality]:
        """Each leg's quality registers, in one Read."""
        legs = list(legs)
        if not legs:
            return {}
        enc = self._encoder()
        return enc.decode_quality(await self.client.read_encoded(enc.register_reads(legs)), legs)

    async def reset_quality(self, legs: Sequence[int]) -> None:
        await self.write(EntryBatch(reset_legs=tuple(legs)))

    # ---------------------------------------------------------- notifications

    @staticmethod
    def learn_events(d: Digest) -> list[LearnEvent]:
        """The flows of a learn (IPv4) or learn6 (IPv6) digest."""
        if d.learn == LEARN6_DIGEST:
            addr: type[ipaddress.IPv4Address | ipaddress.IPv6Address] = ipaddress.IPv6Address
        elif d.learn == LEARN_DIGEST:
            addr = ipaddress.IPv4Address
        else:
            return []
        return [
            LearnEvent(
                src=Endpoint(addr(r.get("src_addr", 0)), r.get("src_port", 0)),
                dst=Endpoint(addr(r.get("dst_addr", 0)), r.get("dst_port", 0)),
                ingress_port=r.get("ingress_port", 0),
            )
            for r in d.entries
        ]

    @staticmethod
    def relay_idle(
        n: IdleTimeout, *, active: bool = False, relay6_addrs: Mapping[int, str] | None = None
    ) -> RelayIdle | None:
        """A relay (or relay6) entry's idle notification; ``active``: its
        return to activity too (``RelayIdle.idle`` False). A relay6 entry names
        its relay address by relay_id: ``relay6_addrs`` (`Pipeline.relay6_addrs`)
        maps it back; an id it does not know gives None."""
        if n.table not in (RELAY, RELAY6) or not (n.idle or active):
            return None
        k = n.key

        def num(name: str) -> int:
            v = k.get(name, 0)
            return v if isinstance(v, int) else 0

        if n.table == RELAY6:
            relay = (relay6_addrs or {}).get(num(K_RELAY_ID))
            if relay is None:
                return None
            src = Endpoint(ipaddress.IPv6Address(num(K6_SRC_ADDR)), num(K_SRC_PORT))
            dst = Endpoint(ipaddress.IPv6Address(relay), num(K_DST_PORT))
        else:
            src = Endpoint(ip(num(K_SRC_ADDR)), num(K_SRC_PORT))
            dst = Endpoint(ip(num(K_DST_ADDR)), num(K_DST_PORT))
        return RelayIdle(src=src, dst=dst, ingress_port=num(K_BOUND_PORT), pipe=n.pipe, idle=n.idle)

    async def relay_entry_count(self) -> int:
        """relay (and relay6) entries."""
        n = await self.client.usage(RELAY)
        return n + (await self.client.usage(RELAY6) if self.has_v6 else 0)
