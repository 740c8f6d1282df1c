"""Typed operations on p4relay's pipeline (switch/contract.toml).

A call relayed by the switch is two directions; each direction has a leg
index. Per direction the switch holds one ``leg_rewrite`` entry (the rewrite)
and two ``relay`` entries (RTP and RTCP = ports + 1) pointing at the leg:

    A --(a:pa -> R:ra)--> switch --(R:rb -> b:pb)--> B      leg a_to_b
    A <--(R:ra -> a:pa)-- switch <--(b:pb -> R:rb)-- B      leg b_to_a

Once the call's media is latched (NAT learning done), ``relay_guard`` entries
on the relay side (R:ra, R:ra+1, R:rb, R:rb+1) drop packets from any other
source to those ports, so they cannot reach RTPProxy and latch its stream.

Every call write is one `EntryBatch` through `Pipeline.write`: the updates
are encoded straight to protobuf wire bytes (`encode.py`, a few microseconds
per entry) and sent as one Write; what a failed batch inserted is deleted
again before the typed error is raised. Reads of counters and quality
registers are one Read each. The model's types are in `model.py`, the
contract's names in `names.py`.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Iterable, Sequence

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
    A_GUARD_DROP,
    A_MARK_RELAY,
    A_RELAY_LEG,
    A_REWRITE,
    A_SET_NEXTHOP,
    COUNTER_BYTES,
    COUNTER_INDEX,
    COUNTER_PKTS,
    D_UNBOUND,
    GUARD_DROPS,
    IPV4_LPM,
    JITTER_SHIFT,
    K_BOUND_PORT,
    K_DST_ADDR,
    K_DST_PORT,
    K_LEG,
    K_NEXTHOP_ID,
    K_PORT_METADATA_PORT,
    K_PRIORITY,
    K_SRC_ADDR,
    K_SRC_PORT,
    LEARN_DIGEST,
    LEG_REWRITE,
    NEXTHOP,
    PORT_METADATA,
    QUALITY_REGISTERS,
    REG_JITTER,
    REG_LAST_SEEN,
    REG_LOST,
    REG_MAX_SEQ,
    REG_PACKETS,
    REG_PAYLOAD_TYPE,
    REG_REORDERED,
    REG_TRANSIT,
    RELAY,
    RELAY_ADDR,
    RELAY_GUARD,
    RTP_CLOCK_HZ,
    TTL,
    UNBOUND_PORT,
)

__all__ = [
    "A_DROP",
    "A_FORWARD",
    "A_GUARD_DROP",
    "A_MARK_RELAY",
    "A_RELAY_LEG",
    "A_REWRITE",
    "A_SET_NEXTHOP",
    "COUNTER_BYTES",
    "COUNTER_INDEX",
    "COUNTER_PKTS",
    "D_UNBOUND",
    "GUARD_DROPS",
    "IPV4_LPM",
    "JITTER_SHIFT",
    "K_BOUND_PORT",
    "K_DST_ADDR",
    "K_DST_PORT",
    "K_LEG",
    "K_NEXTHOP_ID",
    "K_PORT_METADATA_PORT",
    "K_PRIORITY",
    "K_SRC_ADDR",
    "K_SRC_PORT",
    "LEARN_DIGEST",
    "LEG_REWRITE",
    "NEXTHOP",
    "PORT_METADATA",
    "QUALITY_REGISTERS",
    "REG_JITTER",
    "REG_LAST_SEEN",
    "REG_LOST",
    "REG_MAX_SEQ",
    "REG_PACKETS",
    "REG_PAYLOAD_TYPE",
    "REG_REORDERED",
    "REG_TRANSIT",
    "RELAY",
    "RELAY_ADDR",
    "RELAY_GUARD",
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
    "RelayCall",
    "RelayDirection",
    "RelayEntry",
    "RelayIdle",
    "Routes",
]

log = structlog.get_logger("p4relay_switch.pipeline")


def _int(v: object) -> int:
    return v if isinstance(v, int) else int(str(v))


def _ip(v: object) -> str:
    return str(ipaddress.IPv4Address(v)) if isinstance(v, int) else str(v)


class Pipeline:
    """The contract's tables through one SwitchClient."""

    def __init__(self, client: SwitchClient) -> None:
        self.client = client
        self._enc: Encoder | None = None

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
        prefixes: list[tuple[ipaddress.IPv4Network, int | None]] = []
        for e in await self.client.read(IPV4_LPM, from_hw=False):
            k = e.key.get(K_DST_ADDR)
            if e.is_default or not isinstance(k, Lpm):
                continue
            net = ipaddress.IPv4Network((_int(k.value), k.prefix_len), strict=False)
            nh = e.data.get("nexthop_id")
            port = ports.get(_int(nh)) if e.action == A_SET_NEXTHOP and nh is not None else None
            prefixes.append((net, port))
        return Routes(tuple(prefixes))

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

    async def set_relay_addrs(
        self, addrs: Iterable[str | Addr], port_min: int, port_max: int
    ) -> None:
        """The relay server's media ranges (insert or replace)."""
        entries = [
            Entry(
                {K_DST_ADDR: int(ip(a)), K_DST_PORT: Range(port_min, port_max), K_PRIORITY: 0},
                A_MARK_RELAY,
            )
            for a in addrs
        ]
        if entries:
            await self.client.insert_or_modify(RELAY_ADDR, entries)

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
            self._enc = Encoder(schema)  # ids may change when the switch reloads
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
        try:
            enc = self._encoder().batch(batch, ttl_ms)
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
        del_legs = [
            lg.leg for i, lg in zip(enc.add_legs, b.add_legs, strict=True) if i not in failed
        ]
        del_relays = [
            r.key for i, r in zip(enc.add_relays, b.add_relays, strict=True) if i not in failed
        ]
        del_guards = [
            g.key for i, g in zip(enc.add_guards, b.add_guards, strict=True) if i not in failed
        ]
        undo = EntryBatch(
            del_relays=tuple(del_relays), del_legs=tuple(del_legs), del_guards=tuple(del_guards)
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
        """The call's relay_guard entries (action guard_drop), for a caller's own batch."""
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
            EntryBatch(del_relays=b.del_relays, del_legs=b.del_legs), missing_ok=missing_ok
        )

    # ---------------------------------------------------------- calls: reads

    async def read_leg_counters(self, legs: Sequence[int]) -> dict[int, Counters]:
        """Each leg's packets/bytes (leg_rewrite's direct counter: RTP and RTCP
        of the direction), synced from the hardware; legs without an entry are
        left out. One Read; if some entry is gone (NOT_FOUND fails the whole
        Read), leg by leg."""
        legs = list(legs)
        if not legs:
            return {}
        enc = self._encoder()
        try:
            return enc.decode_leg_counters(await self.client.read_encoded(enc.leg_reads(legs)))
        except NotFoundError:
            if len(legs) == 1:
                return {}
            out: dict[int, Counters] = {}
            for leg in legs:
                out.update(await self.read_leg_counters([leg]))
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
        got = await self.read_leg_counters(call.legs)
        return {leg: got.get(leg, Counters(0, 0)) for leg in call.legs}

    async def guard_drops(self, call: RelayCall) -> dict[int, int]:
        """leg -> foreign packets dropped at that direction's relay ports."""
        return await self.read_guard_drops(call.legs)

    async def guard_entry_count(self) -> int:
        return await self.client.usage(RELAY_GUARD)

    async def dump(self) -> EntryDump:
        """Every relay, leg_rewrite and relay_guard entry the switch holds."""
        relays = await self.client.read(RELAY)
        legs = await self.client.read(LEG_REWRITE)
        guards = await self.client.read(RELAY_GUARD)
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
            ],
            [
                LegRewrite(
                    _int(r.key[K_LEG]),
                    _ip(r.data.get("src_addr", 0)),
                    _ip(r.data.get("dst_addr", 0)),
                    _int(r.data.get("src_port", 0)),
                    _int(r.data.get("dst_port", 0)),
                )
                for r in legs
            ],
            [
                GuardEntry(
                    GuardKey(_ip(r.key[K_DST_ADDR]), _int(r.key[K_DST_PORT])),
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
    def relay_idle(n: IdleTimeout, *, active: bool = False) -> RelayIdle | None:
        """A relay entry's idle notification; ``active``: its return to
        activity too (``RelayIdle.idle`` False)."""
        if n.table != RELAY or not (n.idle or active):
            return None
        k = n.key

        def num(name: str) -> int:
            v = k.get(name, 0)
            return v if isinstance(v, int) else 0

        return RelayIdle(
            src=Endpoint(ip(num(K_SRC_ADDR)), num(K_SRC_PORT)),
            dst=Endpoint(ip(num(K_DST_ADDR)), num(K_DST_PORT)),
            ingress_port=num(K_BOUND_PORT),
            pipe=n.pipe,
            idle=n.idle,
        )

    async def relay_entry_count(self) -> int:
        return await self.client.usage(RELAY)
