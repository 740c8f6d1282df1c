"""Direct encoding of the call tables (relay, leg_rewrite, relay_guard, the
quality registers) for `Pipeline`: its writes and reads of calls.

The generic client encodes by name for every update (schema lookups, range
checks, address parsing), too slow for a thousand calls per second on the
agent's event loop. Here ids and widths are resolved once per schema, and
writes are encoded straight to protobuf wire bytes (`wire.py`): an `Update` is
a few joined byte strings, no message objects. Each kind of update is a
`Template` built at start-up, framed as a `WriteRequest.updates` element:
a batch is one list of constant pieces and values, joined once into the
request's updates (no bytes object per update, no second copy to frame it).
Values are valid by construction (IPv4 addresses, 16-bit ports, legs below
the table size). An entry with IPv6 addresses goes to the IPv6 table of its
kind (relay6, relay_guard6, leg_rewrite6), the relay's address replaced by
its relay_id (`Encoder.relay6_ids`, kept by `Pipeline` from relay6_addr).
"""

from __future__ import annotations

import ipaddress
import socket
from collections.abc import Iterable
from dataclasses import dataclass

from p4relay_switch.model import (
    Counters,
    EntryBatch,
    FlowKey,
    GuardEntry,
    GuardKey,
    LegQuality,
    LegRewrite,
    RelayEntry,
    is_v6,
)
from p4relay_switch.names import (
    A_GUARD6_DROP,
    A_GUARD_DROP,
    A_RELAY6_LEG,
    A_RELAY_LEG,
    A_REWRITE,
    A_REWRITE6,
    COUNTER_BYTES,
    COUNTER_INDEX,
    COUNTER_PKTS,
    GUARD_DROPS,
    K6_SRC_ADDR,
    K_BOUND_PORT,
    K_DST_ADDR,
    K_DST_PORT,
    K_LEG,
    K_LEG6,
    K_RELAY_ID,
    K_SRC_ADDR,
    K_SRC_PORT,
    LEG_REWRITE,
    LEG_REWRITE6,
    QUALITY_HI_SUFFIX,
    RELAY,
    RELAY6,
    RELAY_GUARD,
    RELAY_GUARD6,
    TTL,
    quality_registers,
    quality_values,
    register_field,
)
from p4relay_switch.proto import bfruntime_pb2 as pb
from p4relay_switch.schema import FieldInfo, Schema, TableInfo
from p4relay_switch.wire import Template, ld, tag, uint

# Field keys of the messages an update is made of.
_UPD_TYPE, _UPD_ENTITY = tag(pb.Update, "type"), tag(pb.Update, "entity")
_ENT_TE = tag(pb.Entity, "table_entry")
_TE = pb.TableEntry
_TE_ID, _TE_KEY, _TE_DATA = tag(_TE, "table_id"), tag(_TE, "key"), tag(_TE, "data")
_TK_FIELDS = tag(pb.TableKey, "fields")
_KF_ID, _KF_EXACT = tag(pb.KeyField, "field_id"), tag(pb.KeyField, "exact")
_EX_VALUE = tag(pb.KeyField.Exact, "value")
_TD_ACTION, _TD_FIELDS = (
    tag(pb.TableData, "action_id"),
    tag(pb.TableData, "fields"),
)
_DF_ID, _DF_STREAM = (
    tag(pb.DataField, "field_id"),
    tag(pb.DataField, "stream"),
)
_TE_FLAGS, _TF_HW = tag(_TE, "table_flags"), tag(pb.TableFlags, "from_hw")
_WR_UPDATES = tag(pb.WriteRequest, "updates")

INSERT, MODIFY, DELETE = pb.Update.INSERT, pb.Update.MODIFY, pb.Update.DELETE

# Kinds of a batch's updates (`Encoder.batch`), to tell a deletion's NOT_FOUND
# (already gone) apart.
DELETE_KIND, MODIFY_KIND, INSERT_KIND = 0, 1, 2


@dataclass(frozen=True, slots=True)
class Encoded:
    """A batch as a Write's updates: `updates` is the concatenation of the
    framed `WriteRequest.updates` fields (`RawRpc.write_updates`), `kinds`
    each update's kind, in order; the positions of the batch's inserts (its
    `add_legs`, `add_relays` and `add_guards`, item by item), so that a failed
    write can undo what was inserted."""

    updates: bytes
    kinds: list[int]
    add_legs: range = range(0)
    add_relays: range = range(0)
    add_guards: range = range(0)


def exact(field_id: int, value: bytes) -> bytes:
    """One exact-match `KeyField`, as a `TableKey.fields` element."""
    return ld(_TK_FIELDS, uint(_KF_ID, field_id) + ld(_KF_EXACT, ld(_EX_VALUE, value)))


def stream(field_id: int, value: bytes) -> bytes:
    """One `DataField` with a big-endian value, as a `TableData.fields` element."""
    return ld(_TD_FIELDS, uint(_DF_ID, field_id) + ld(_DF_STREAM, value))


def update(kind: int, table_id: int, key: bytes, data: bytes | None = None) -> bytes:
    """An `Update` message; `key` is a `TableKey`'s bytes, `data` a `TableData`'s."""
    te = uint(_TE_ID, table_id) + ld(_TE_KEY, key)
    if data is not None:
        te += ld(_TE_DATA, data)
    return uint(_UPD_TYPE, kind) + ld(_UPD_ENTITY, ld(_ENT_TE, te))


aton = socket.inet_aton  # dotted IPv4 -> 4 bytes (OSError if it is not one)


def aton6(host: str) -> bytes:
    """An IPv6 address -> 16 bytes (OSError if it is not one)."""
    return socket.inet_pton(socket.AF_INET6, host)


class Ipv6Unsupported(ValueError):
    """An IPv6 entry for a switch whose program has no IPv6 tables."""


def hw_read(table_id: int, key: bytes) -> bytes:
    """An `Entity` reading one entry, its counters synced from the hardware."""
    te = uint(_TE_ID, table_id) + ld(_TE_KEY, key) + ld(_TE_FLAGS, uint(_TF_HW, 1))
    return ld(_ENT_TE, te)


def _counters(te: pb.TableEntry, pkts_id: int, bytes_id: int) -> Counters:
    """An entry's direct counter ($COUNTER_SPEC_PKTS / _BYTES) as read back."""
    pk = by = 0
    for f in te.data.fields:
        if f.field_id == pkts_id:
            pk = int.from_bytes(f.stream, "big")
        elif f.field_id == bytes_id:
            by = int.from_bytes(f.stream, "big")
    return Counters(pk, by)


def _key_int(te: pb.TableEntry, field_id: int) -> int | None:
    """An exact key field of an entry as read back, as an integer."""
    for f in te.key.fields:
        if f.field_id == field_id:
            return int.from_bytes(f.exact.value, "big")
    return None


class Encoder:
    def __init__(self, schema: Schema, relay6_ids: dict[str, int] | None = None) -> None:
        self.schema = schema
        # The relay's IPv6 addresses -> relay_id (relay6_addr's), by the
        # address's canonical string; the owner (Pipeline) keeps it current.
        self.relay6_ids: dict[str, int] = {} if relay6_ids is None else relay6_ids
        r = schema.table(RELAY)
        self.relay_id = r.id
        self.k_src, self.k_dst = r.key(K_SRC_ADDR).id, r.key(K_DST_ADDR).id
        self.k_sport, self.k_dport = r.key(K_SRC_PORT).id, r.key(K_DST_PORT).id
        self.k_port = r.key(K_BOUND_PORT)
        a = r.action(A_RELAY_LEG)
        self.relay_action = a.id
        self.p_leg, self.p_rtcp = a.param("leg"), a.param("rtcp")
        self.ttl = r.data_field(TTL, a)
        lr = schema.table(LEG_REWRITE)
        self.leg_table = lr.id
        self.k_leg = lr.key(K_LEG)
        w = lr.action(A_REWRITE)
        self.rewrite_action = w.id
        self.p = {n: w.param(n).id for n in ("src_addr", "dst_addr", "src_port", "dst_port")}
        # leg_rewrite's direct counter: the call's packets, per direction.
        self.c_pkts = lr.data_field(COUNTER_PKTS).id
        self.c_bytes = lr.data_field(COUNTER_BYTES).id
        g = schema.table(RELAY_GUARD)
        self.guard_id = g.id
        self.g_dst, self.g_dport = g.key(K_DST_ADDR).id, g.key(K_DST_PORT).id
        ga = g.action(A_GUARD_DROP)
        self.guard_action = ga.id
        self.g_leg = ga.param("leg")
        # guard_drops: packets by leg ($COUNTER_INDEX -> $COUNTER_SPEC_PKTS).
        gd = schema.table(GUARD_DROPS)
        self.guard_drops_id = gd.id
        self.gd_index = gd.key(COUNTER_INDEX)
        self.gd_pkts = gd.data_field(COUNTER_PKTS)

        # Quality registers: (table id, $REGISTER_INDEX key, value fields),
        # the fields `quality_values` names in its order (`f1`, or rtp_loss's
        # two: the loss counts in the program's form, names.loss_values). A
        # program that splits them (switch/p4 QUALITY_SPLIT) declares each as
        # `<name>` for the legs below `quality_split` (its size) and
        # `<name>_hi` for the legs from there, index leg - quality_split:
        # `registers_hi`, found in the schema.
        self.quality_values = quality_values(schema.tables)
        self.quality_registers = quality_registers(schema.tables)

        def register(name: str, t: TableInfo) -> tuple[int, FieldInfo, tuple[FieldInfo, ...]]:
            vals = tuple(
                t.data_field(register_field(t.name, f)) for r, f in self.quality_values if r == name
            )
            return (t.id, t.key("$REGISTER_INDEX"), vals)

        self.registers = [register(n, schema.table(n)) for n in self.quality_registers]
        self.registers_hi = [
            register(n, schema.tables[n + QUALITY_HI_SUFFIX])
            for n in self.quality_registers
            if n + QUALITY_HI_SUFFIX in schema.tables
        ]
        self.quality_split: int | None = None
        if self.registers_hi:
            sizes = {schema.table(n).size for n in self.quality_registers}
            if len(self.registers_hi) != len(self.quality_registers) or len(sizes) != 1:
                raise ValueError(
                    "the program splits some quality registers only, or at different legs"
                )
            (self.quality_split,) = sizes

        self.has_v6 = RELAY6 in schema.tables
        if self.has_v6:
            r6 = schema.table(RELAY6)
            self.relay6_table = r6.id
            self.k6_src = r6.key(K6_SRC_ADDR).id
            self.k6_rid = r6.key(K_RELAY_ID)
            self.k6_sport, self.k6_dport = r6.key(K_SRC_PORT).id, r6.key(K_DST_PORT).id
            self.k6_port = r6.key(K_BOUND_PORT)
            a6 = r6.action(A_RELAY6_LEG)
            self.relay6_action = a6.id
            self.p6_leg, self.p6_rtcp = a6.param("leg"), a6.param("rtcp")
            self.ttl6 = r6.data_field(TTL, a6)
            lr6 = schema.table(LEG_REWRITE6)
            self.leg6_table = lr6.id
            self.k6_leg = lr6.key(K_LEG6)
            w6 = lr6.action(A_REWRITE6)
            self.rewrite6_action = w6.id
            self.p6 = {n: w6.param(n).id for n in ("src_addr", "dst_addr", "src_port", "dst_port")}
            self.c6_pkts = lr6.data_field(COUNTER_PKTS).id
            self.c6_bytes = lr6.data_field(COUNTER_BYTES).id
            g6 = schema.table(RELAY_GUARD6)
            self.guard6_table = g6.id
            self.g6_rid, self.g6_dport = g6.key(K_RELAY_ID), g6.key(K_DST_PORT).id
            ga6 = g6.action(A_GUARD6_DROP)
            self.guard6_action = ga6.id
            self.g6_leg = ga6.param("leg")

        self._templates()
        if self.has_v6:
            self._templates6()

    def relay_id_of(self, host: str) -> bytes:
        """The relay_id of a relay IPv6 address, as relay6's key bytes."""
        if not self.has_v6:
            raise Ipv6Unsupported(f"{host}: the switch's program has no IPv6 tables")
        rid = self.relay6_ids.get(host)
        if rid is None:
            rid = self.relay6_ids.get(str(ipaddress.IPv6Address(host)))
        if rid is None:
            raise ValueError(f"{host} is not a relay address (no relay6_addr entry)")
        return rid.to_bytes(self.k6_rid.nbytes, "big")

    def _templates6(self) -> None:
        """The IPv6 tables' updates, as `_templates` (relay_id for the relay address)."""
        leg_n, rtcp_n, ttl_n = self.p6_leg.nbytes, self.p6_rtcp.nbytes, self.ttl6.nbytes
        rid_n = self.k6_rid.nbytes

        def relay_key(v: list[bytes]) -> bytes:
            return (
                exact(self.k6_src, v[0])
                + exact(self.k6_rid.id, v[1])
                + exact(self.k6_sport, v[2])
                + exact(self.k6_dport, v[3])
                + exact(self.k6_port.id, v[4])
            )

        def relay_insert(v: list[bytes]) -> bytes:
            data = (
                uint(_TD_ACTION, self.relay6_action)
                + stream(self.p6_leg.id, v[5])
                + stream(self.p6_rtcp.id, v[6])
                + stream(self.ttl6.id, v[7])
            )
            return update(INSERT, self.relay6_table, relay_key(v), data)

        flow = [16, rid_n, 2, 2, self.k6_port.nbytes]
        self._relay6_insert_t = Template(relay_insert, [*flow, leg_n, rtcp_n, ttl_n])
        self._relay6_insert_by_ttl: dict[int, tuple[tuple[bytes, ...], tuple[bytes, ...]]] = {}
        self._relay6_delete_c = (
            Template(lambda v: update(DELETE, self.relay6_table, relay_key(v)), flow)
            .framed(_WR_UPDATES)
            .constant()
        )

        def guard_key(v: list[bytes]) -> bytes:
            return exact(self.g6_rid.id, v[0]) + exact(self.g6_dport, v[1])

        def guard_insert(v: list[bytes]) -> bytes:
            data = uint(_TD_ACTION, self.guard6_action) + stream(self.g6_leg.id, v[2])
            return update(INSERT, self.guard6_table, guard_key(v), data)

        self._guard6_insert_c = (
            Template(guard_insert, [self.g6_rid.nbytes, 2, self.g6_leg.nbytes])
            .framed(_WR_UPDATES)
            .constant()
        )
        self._guard6_delete_c = (
            Template(
                lambda v: update(DELETE, self.guard6_table, guard_key(v)), [self.g6_rid.nbytes, 2]
            )
            .framed(_WR_UPDATES)
            .constant()
        )

        k_leg = self.k6_leg

        def leg_write(kind: int) -> Template:
            def build(v: list[bytes]) -> bytes:
                p = self.p6
                data = (
                    uint(_TD_ACTION, self.rewrite6_action)
                    + stream(p["src_addr"], v[1])
                    + stream(p["dst_addr"], v[2])
                    + stream(p["src_port"], v[3])
                    + stream(p["dst_port"], v[4])
                )
                return update(kind, self.leg6_table, exact(k_leg.id, v[0]), data)

            return Template(build, [k_leg.nbytes, 16, 16, 2, 2]).framed(_WR_UPDATES)

        self._leg6_insert_c = leg_write(INSERT).constant()
        self._leg6_modify_c = leg_write(MODIFY).constant()
        self._leg6_delete_c = (
            Template(
                lambda v: update(DELETE, self.leg6_table, exact(k_leg.id, v[0])), [k_leg.nbytes]
            )
            .framed(_WR_UPDATES)
            .constant()
        )
        self._leg6_read_t = Template(
            lambda v: hw_read(self.leg6_table, exact(k_leg.id, v[0])), [k_leg.nbytes]
        )

    def _templates(self) -> None:
        """Every hot update as a `Template` over `update`/`exact`/`stream`."""
        leg_n, rtcp_n, ttl_n = self.p_leg.nbytes, self.p_rtcp.nbytes, self.ttl.nbytes

        def relay_key(v: list[bytes]) -> bytes:
            return (
                exact(self.k_src, v[0])
                + exact(self.k_dst, v[1])
                + exact(self.k_sport, v[2])
                + exact(self.k_dport, v[3])
                + exact(self.k_port.id, v[4])
            )

        def relay_insert(v: list[bytes]) -> bytes:
            data = (
                uint(_TD_ACTION, self.relay_action)
                + stream(self.p_leg.id, v[5])
                + stream(self.p_rtcp.id, v[6])
                + stream(self.ttl.id, v[7])
            )
            return update(INSERT, self.relay_id, relay_key(v), data)

        flow = [4, 4, 2, 2, self.k_port.nbytes]
        self._relay_insert_t = Template(relay_insert, [*flow, leg_n, rtcp_n, ttl_n])
        self._relay_insert_by_ttl: dict[int, tuple[tuple[bytes, ...], tuple[bytes, ...]]] = {}
        self._relay_delete_c = (
            Template(lambda v: update(DELETE, self.relay_id, relay_key(v)), flow)
            .framed(_WR_UPDATES)
            .constant()
        )

        def guard_key(v: list[bytes]) -> bytes:
            return exact(self.g_dst, v[0]) + exact(self.g_dport, v[1])

        def guard_insert(v: list[bytes]) -> bytes:
            data = uint(_TD_ACTION, self.guard_action) + stream(self.g_leg.id, v[2])
            return update(INSERT, self.guard_id, guard_key(v), data)

        self._guard_insert_c = (
            Template(guard_insert, [4, 2, self.g_leg.nbytes]).framed(_WR_UPDATES).constant()
        )
        self._guard_delete_c = (
            Template(lambda v: update(DELETE, self.guard_id, guard_key(v)), [4, 2])
            .framed(_WR_UPDATES)
            .constant()
        )

        k_leg = self.k_leg

        def leg_write(kind: int) -> Template:
            def build(v: list[bytes]) -> bytes:
                p = self.p
                data = (
                    uint(_TD_ACTION, self.rewrite_action)
                    + stream(p["src_addr"], v[1])
                    + stream(p["dst_addr"], v[2])
                    + stream(p["src_port"], v[3])
                    + stream(p["dst_port"], v[4])
                )
                return update(kind, self.leg_table, exact(k_leg.id, v[0]), data)

            return Template(build, [k_leg.nbytes, 4, 4, 2, 2]).framed(_WR_UPDATES)

        self._leg_insert_c = leg_write(INSERT).constant()
        self._leg_modify_c = leg_write(MODIFY).constant()
        self._leg_delete_c = (
            Template(
                lambda v: update(DELETE, self.leg_table, exact(k_leg.id, v[0])), [k_leg.nbytes]
            )
            .framed(_WR_UPDATES)
            .constant()
        )

        self._leg_read_t = Template(
            lambda v: hw_read(self.leg_table, exact(k_leg.id, v[0])), [k_leg.nbytes]
        )

        # A leg's resets of every quality register and of its guard_drops
        # cell as one template, each hole the leg (all are indexed by leg):
        # `_resets`. A leg of a split program's upper half has its own, whose
        # register holes are its index there and the last (guard_drops) the leg.
        gd_cell = (self.guard_drops_id, self.gd_index, (self.gd_pkts,))
        cells = [*self.registers, gd_cell]
        widths = {key.nbytes for _, key, _ in [*cells, *self.registers_hi]}
        if len(widths) != 1:
            raise ValueError("quality registers and guard_drops indexed by different widths")
        (self._reset_n,) = widths

        def resets_of(
            cells: list[tuple[int, FieldInfo, tuple[FieldInfo, ...]]],
        ) -> tuple[bytes, ...]:
            def resets(v: list[bytes]) -> bytes:
                return b"".join(
                    ld(_WR_UPDATES, update(MODIFY, tid, exact(key.id, leg), zero(vals)))
                    for (tid, key, vals), leg in zip(cells, v, strict=True)
                )

            return Template(resets, [self._reset_n] * len(cells)).constant()

        def zero(vals: tuple[FieldInfo, ...]) -> bytes:
            # every field of the cell: a struct register's are each mandatory
            return b"".join(stream(val.id, bytes(val.nbytes)) for val in vals)

        self.resets_per_leg = len(cells)  # updates `_resets` writes per leg
        self._resets_c = resets_of(cells)
        self._resets_hi_c: tuple[bytes, ...] = (
            resets_of([*self.registers_hi, gd_cell]) if self.registers_hi else ()
        )
        gd_i = self.gd_index
        self._guard_drops_read_t = Template(
            lambda v: hw_read(self.guard_drops_id, exact(gd_i.id, v[0])), [gd_i.nbytes]
        )

        def reg_read(table_id: int, key: FieldInfo) -> Template:
            return Template(lambda v: hw_read(table_id, exact(key.id, v[0])), [key.nbytes])

        self._reg_read_t = [(reg_read(tid, key), key.nbytes) for tid, key, _ in self.registers]
        self._reg_read_hi_t = [reg_read(tid, key) for tid, key, _ in self.registers_hi]
        # table id -> (key, [(value field, its quality_values column)], first
        # leg of the table)
        cols = {
            name: [c for c, (r, _) in enumerate(self.quality_values) if r == name]
            for name in self.quality_registers
        }

        def columns(i: int, vals: tuple[FieldInfo, ...]) -> list[tuple[int, int]]:
            return [(v.id, c) for v, c in zip(vals, cols[self.quality_registers[i]], strict=True)]

        self._reg_index = {
            tid: (key.id, columns(i, vals), 0) for i, (tid, key, vals) in enumerate(self.registers)
        }
        for i, (tid, key, vals) in enumerate(self.registers_hi):
            self._reg_index[tid] = (key.id, columns(i, vals), self.quality_split or 0)

    # ------------------------------------------------------------------ batches
    def batch(self, b: EntryBatch, ttl_ms: int) -> Encoded:
        """The batch's updates, in `EntryBatch` order: guard deletions, relay
        deletions, quality resets, leg modifications, leg inserts, relay
        inserts, guard inserts, leg deletions; and per update its kind."""
        out: list[bytes] = []
        self._guards(out, self._guard_delete_c, b.del_guards)
        self._relay_keys(out, self._relay_delete_c, b.del_relays)
        n_del = len(b.del_guards) + len(b.del_relays)
        self._resets(out, b.reset_legs)
        self._legs(out, MODIFY, b.mod_legs)
        n_mod = len(b.reset_legs) * self.resets_per_leg + len(b.mod_legs)
        self._legs(out, INSERT, b.add_legs)
        self._relay_inserts(out, b.add_relays, ttl_ms)
        self._guard_inserts(out, b.add_guards)
        legs_at = n_del + n_mod
        relays_at = legs_at + len(b.add_legs)
        guards_at = relays_at + len(b.add_relays)
        n_ins = guards_at + len(b.add_guards) - legs_at
        self._leg_deletes(out, b.del_legs, b.del_legs6)
        kinds = (
            [DELETE_KIND] * n_del
            + [MODIFY_KIND] * n_mod
            + [INSERT_KIND] * n_ins
            + [DELETE_KIND] * (len(b.del_legs) + len(b.del_legs6))
        )
        return Encoded(
            b"".join(out),
            kinds,
            add_legs=range(legs_at, relays_at),
            add_relays=range(relays_at, guards_at),
            add_guards=range(guards_at, guards_at + len(b.add_guards)),
        )

    # Each writer below appends, per update, the framed template's constant
    # pieces interleaved with the update's values (`Template.constant`).

    def _relay_keys(self, out: list[bytes], c: tuple[bytes, ...], keys: Iterable[FlowKey]) -> None:
        pn = self.k_port.nbytes
        for sa, da, sp, dp, port in keys:
            if is_v6(da):
                self._relay6_key(out, FlowKey(sa, da, sp, dp, port))
                continue
            out += (
                c[0], aton(sa), c[1], aton(da), c[2], sp.to_bytes(2, "big"),
                c[3], dp.to_bytes(2, "big"), c[4], port.to_bytes(pn, "big"), c[5],
            )  # fmt: skip

    def _relay6_key(self, out: list[bytes], key: FlowKey) -> None:
        """An IPv6 flow's relay6 deletion (`_relay_keys`' other family)."""
        sa, da, sp, dp, port = key
        c, rid = self._relay6_delete_c, self.relay_id_of(da)
        out += (
            c[0], aton6(sa), c[1], rid, c[2], sp.to_bytes(2, "big"),
            c[3], dp.to_bytes(2, "big"), c[4], port.to_bytes(self.k6_port.nbytes, "big"), c[5],
        )  # fmt: skip

    def _relay_inserts(self, out: list[bytes], relays: Iterable[RelayEntry], ttl_ms: int) -> None:
        rtp, rtcp = self._relay_insert_c(ttl_ms)
        pn, ln = self.k_port.nbytes, self.p_leg.nbytes
        for r in relays:
            sa, da, sp, dp, port = r.key
            if is_v6(da):
                self._relay6_insert(out, r, ttl_ms)
                continue
            c = rtcp if r.rtcp else rtp
            out += (
                c[0], aton(sa), c[1], aton(da), c[2], sp.to_bytes(2, "big"),
                c[3], dp.to_bytes(2, "big"), c[4], port.to_bytes(pn, "big"),
                c[5], r.leg.to_bytes(ln, "big"), c[6],
            )  # fmt: skip

    def _relay6_insert(self, out: list[bytes], r: RelayEntry, ttl_ms: int) -> None:
        sa, da, sp, dp, port = r.key
        rid = self.relay_id_of(da)
        got = self._relay6_insert_by_ttl.get(ttl_ms)
        if got is None:
            t = self._relay6_insert_t.fixing(7, ttl_ms.to_bytes(self.ttl6.nbytes, "big"))
            n = self.p6_rtcp.nbytes

            def flag(v: int) -> tuple[bytes, ...]:
                return t.fixing(6, v.to_bytes(n, "big")).framed(_WR_UPDATES).constant()

            got = (flag(0), flag(1))
            if len(self._relay6_insert_by_ttl) >= 16:
                self._relay6_insert_by_ttl.clear()
            self._relay6_insert_by_ttl[ttl_ms] = got
        c = got[1] if r.rtcp else got[0]
        out += (
            c[0], aton6(sa), c[1], rid, c[2], sp.to_bytes(2, "big"),
            c[3], dp.to_bytes(2, "big"), c[4], port.to_bytes(self.k6_port.nbytes, "big"),
            c[5], r.leg.to_bytes(self.p6_leg.nbytes, "big"), c[6],
        )  # fmt: skip

    def _relay_insert_c(self, ttl_ms: int) -> tuple[tuple[bytes, ...], tuple[bytes, ...]]:
        """The relay insert with this TTL, for RTP and for RTCP entries (a
        batch has one TTL: fixed in the template, like the rtcp flag)."""
        got = self._relay_insert_by_ttl.get(ttl_ms)
        if got is None:
            t = self._relay_insert_t.fixing(7, ttl_ms.to_bytes(self.ttl.nbytes, "big"))
            n = self.p_rtcp.nbytes

            def flag(v: int) -> tuple[bytes, ...]:
                return t.fixing(6, v.to_bytes(n, "big")).framed(_WR_UPDATES).constant()

            got = (flag(0), flag(1))
            if len(self._relay_insert_by_ttl) >= 16:  # TTLs come from configuration
                self._relay_insert_by_ttl.clear()
            self._relay_insert_by_ttl[ttl_ms] = got
        return got

    def _guards(self, out: list[bytes], c: tuple[bytes, ...], keys: Iterable[GuardKey]) -> None:
        for da, dp in keys:
            if is_v6(da):
                c6 = self._guard6_delete_c
                out += (c6[0], self.relay_id_of(da), c6[1], dp.to_bytes(2, "big"), c6[2])
                continue
            out += (c[0], aton(da), c[1], dp.to_bytes(2, "big"), c[2])

    def _guard_inserts(self, out: list[bytes], guards: Iterable[GuardEntry]) -> None:
        c, ln = self._guard_insert_c, self.g_leg.nbytes
        for (da, dp), leg in guards:
            if is_v6(da):
                c6 = self._guard6_insert_c
                out += (
                    c6[0], self.relay_id_of(da), c6[1], dp.to_bytes(2, "big"),
                    c6[2], leg.to_bytes(self.g6_leg.nbytes, "big"), c6[3],
                )  # fmt: skip
                continue
            out += (
                c[0],
                aton(da),
                c[1],
                dp.to_bytes(2, "big"),
                c[2],
                leg.to_bytes(ln, "big"),
                c[3],
            )

    def _legs(self, out: list[bytes], kind: int, legs: Iterable[LegRewrite]) -> None:
        """Leg inserts (``kind`` INSERT) or modifications (MODIFY)."""
        ln = self.k_leg.nbytes
        c = self._leg_insert_c if kind == INSERT else self._leg_modify_c
        for lg in legs:
            if is_v6(lg.dst_addr):
                self._leg6(out, kind, lg)
                continue
            out += (
                c[0], lg.leg.to_bytes(ln, "big"), c[1], aton(lg.src_addr), c[2],
                aton(lg.dst_addr), c[3], lg.src_port.to_bytes(2, "big"),
                c[4], lg.dst_port.to_bytes(2, "big"), c[5],
            )  # fmt: skip

    def _leg6(self, out: list[bytes], kind: int, lg: LegRewrite) -> None:
        if not self.has_v6:
            raise Ipv6Unsupported(f"leg {lg.leg}: the switch's program has no IPv6 tables")
        c = self._leg6_insert_c if kind == INSERT else self._leg6_modify_c
        out += (
            c[0], lg.leg.to_bytes(self.k6_leg.nbytes, "big"), c[1], aton6(lg.src_addr), c[2],
            aton6(lg.dst_addr), c[3], lg.src_port.to_bytes(2, "big"),
            c[4], lg.dst_port.to_bytes(2, "big"), c[5],
        )  # fmt: skip

    def _leg_deletes(self, out: list[bytes], legs: Iterable[int], legs6: Iterable[int]) -> None:
        c, ln = self._leg_delete_c, self.k_leg.nbytes
        for leg in legs:
            out += (c[0], leg.to_bytes(ln, "big"), c[1])
        legs6 = tuple(legs6)
        if legs6 and not self.has_v6:
            raise Ipv6Unsupported("the switch's program has no IPv6 tables")
        for leg in legs6:
            c6 = self._leg6_delete_c
            out += (c6[0], leg.to_bytes(self.k6_leg.nbytes, "big"), c6[1])

    def _resets(self, out: list[bytes], legs: Iterable[int]) -> None:
        """Zero legs' quality registers and guard drops (a MODIFY of each cell).
        Every cell of a leg has the leg as its only value: the leg's updates
        are that value joined with the constant pieces, one join per leg."""
        c, n = self._resets_c, self._reset_n
        split, hi = self.quality_split, self._resets_hi_c
        for leg in legs:
            if split is not None and leg >= split:
                out += (
                    (leg - split).to_bytes(n, "big").join(hi[:-1]),
                    leg.to_bytes(n, "big"),
                    hi[-1],
                )
            else:
                out.append(leg.to_bytes(n, "big").join(c))

    # ------------------------------------------------------------------ relay
    # ------------------------------------------------------------------ legs
    def leg_reads(self, legs: list[int], *, v6: bool = False) -> list[bytes]:
        """Read entities of these legs' leg_rewrite (``v6``: leg_rewrite6)
        entries (their counters synced from the hardware)."""
        if v6:
            if not self.has_v6:
                raise Ipv6Unsupported("the switch's program has no IPv6 tables")
            n6 = self.k6_leg.nbytes
            return [self._leg6_read_t.fill(leg.to_bytes(n6, "big")) for leg in legs]
        n = self.k_leg.nbytes
        return [self._leg_read_t.fill(leg.to_bytes(n, "big")) for leg in legs]

    def decode_leg_counters(self, ents: list[pb.Entity]) -> dict[int, Counters]:
        """leg_rewrite / leg_rewrite6 entries as read back -> each leg's direct counter."""
        out: dict[int, Counters] = {}
        for e in ents:
            te = e.table_entry
            if te.table_id == self.leg_table:
                leg = _key_int(te, self.k_leg.id)
                if leg is not None:
                    out[leg] = _counters(te, self.c_pkts, self.c_bytes)
            elif self.has_v6 and te.table_id == self.leg6_table:
                leg = _key_int(te, self.k6_leg.id)
                if leg is not None:
                    out[leg] = _counters(te, self.c6_pkts, self.c6_bytes)
        return out

    def guard_drop_reads(self, legs: list[int]) -> list[bytes]:
        n = self.gd_index.nbytes
        return [self._guard_drops_read_t.fill(leg.to_bytes(n, "big")) for leg in legs]

    def decode_guard_drops(self, ents: list[pb.Entity]) -> dict[int, int]:
        """guard_drops cells as read back -> packets per leg (a cell read per
        pipe comes back once per pipe: summed)."""
        out: dict[int, int] = {}
        for e in ents:
            te = e.table_entry
            if te.table_id != self.guard_drops_id:
                continue
            leg = _key_int(te, self.gd_index.id)
            if leg is None:
                continue
            pkts = sum(
                int.from_bytes(f.stream, "big")
                for f in te.data.fields
                if f.field_id == self.gd_pkts.id
            )
            out[leg] = out.get(leg, 0) + pkts
        return out

    def register_reads(self, legs: list[int]) -> list[bytes]:
        """Read entities of every quality register's cell of these legs."""
        out: list[bytes] = []
        split = self.quality_split
        for i, (t, n) in enumerate(self._reg_read_t):
            if split is None:
                out.extend(t.fill(leg.to_bytes(n, "big")) for leg in legs)
                continue
            hi = self._reg_read_hi_t[i]
            out.extend(
                hi.fill((leg - split).to_bytes(n, "big"))
                if leg >= split
                else t.fill(leg.to_bytes(n, "big"))
                for leg in legs
            )
        return out

    def decode_quality(self, ents: list[pb.Entity], legs: list[int]) -> dict[int, LegQuality]:
        """Register cells as read back -> each leg's quality. Counts add over
        pipes; the other values come from the pipe that saw most of the leg."""
        n = len(self.quality_values)
        cells: dict[int, list[list[int]]] = {leg: [[0] for _ in range(n)] for leg in legs}
        for e in ents:
            te = e.table_entry
            found = self._reg_index.get(te.table_id)
            if found is None:
                continue
            key_id, val_cols, first = found
            leg = next(
                (
                    first + int.from_bytes(f.exact.value, "big")
                    for f in te.key.fields
                    if f.field_id == key_id
                ),
                None,
            )
            row = cells.get(leg) if leg is not None else None
            if row is None:
                continue
            for val_id, col in val_cols:
                vals = [
                    int.from_bytes(f.stream, "big") for f in te.data.fields if f.field_id == val_id
                ]
                row[col] = vals or [0]
        out: dict[int, LegQuality] = {}
        for leg, row in cells.items():
            pkts = row[0]
            best = max(range(len(pkts)), key=lambda j: pkts[j])

            def val(i: int, row: list[list[int]] = row, best: int = best) -> int:
                v = row[i]
                return v[best] if best < len(v) else v[0]

            out[leg] = LegQuality(
                leg=leg,
                packets=sum(row[0]),
                lost=sum(row[1]),
                reordered=sum(row[2]),
                max_seq=val(3),
                transit=val(4),
                jitter_raw=val(5),
                last_seen_ms=val(6),
                payload_type=val(7),
            )
        return out
