"""Direct protobuf encoding of the hot tables (relay, leg_rewrite, relay_guard).

The generic client encodes by name for every update (schema lookups, range
checks, address parsing); at a thousand calls per second that was most of the
agent's CPU. Ids and widths are resolved once per schema here, and a relay
key is encoded once per entry: the same `TableKey` serves its insert, its
counter reads and its delete. Values are valid by construction (IPv4
addresses, 16-bit ports, legs below the table size).
"""

from __future__ import annotations

import socket

from p4relay_switch.pipeline import (
    A_GUARD_DROP,
    A_RELAY_LEG,
    A_REWRITE,
    COUNTER_BYTES,
    COUNTER_PKTS,
    K_DST_ADDR,
    K_DST_PORT,
    K_LEG,
    K_SRC_ADDR,
    K_SRC_PORT,
    LEG_REWRITE,
    RELAY,
    RELAY_GUARD,
    TTL,
)
from p4relay_switch.proto import bfruntime_pb2 as pb
from p4relay_switch.schema import Schema

from .switchport import FlowCounters, FlowKey, GuardKey, LegRewrite, RelayEntry


def _ip(addr: str) -> bytes:
    return socket.inet_aton(addr)


def _hw_read(table_id: int, key: pb.TableKey) -> pb.Entity:
    """A Read of one entry with its counters synced from the hardware."""
    te = pb.TableEntry(table_id=table_id, key=key, table_flags=pb.TableFlags(from_hw=True))
    return pb.Entity(table_entry=te)


def _counters(te: pb.TableEntry, pkts_id: int, bytes_id: int) -> FlowCounters:
    """An entry's direct counters ($COUNTER_SPEC_PKTS / _BYTES) as read back."""
    pk = by = 0
    for f in te.data.fields:
        if f.field_id == pkts_id:
            pk = int.from_bytes(f.stream, "big")
        elif f.field_id == bytes_id:
            by = int.from_bytes(f.stream, "big")
    return FlowCounters(pk, by)


class Encoder:
    def __init__(self, schema: Schema) -> None:
        self.schema = schema
        r = schema.table(RELAY)
        self.relay_id = r.id
        self.k_src, self.k_dst = r.key(K_SRC_ADDR).id, r.key(K_DST_ADDR).id
        self.k_sport, self.k_dport = r.key(K_SRC_PORT).id, r.key(K_DST_PORT).id
        a = r.action(A_RELAY_LEG)
        self.relay_action = a.id
        self.p_leg, self.p_rtcp = a.param("leg"), a.param("rtcp")
        self.ttl = r.data_field(TTL, a)
        lr = schema.table(LEG_REWRITE)
        self.leg_table = lr.id
        self.k_leg = lr.key(K_LEG)
        w = lr.action(A_REWRITE)
        self.rewrite_action = w.id
        self.p = {n: w.param(n) for n in ("src_addr", "dst_addr", "src_port", "dst_port")}
        self._keys: dict[FlowKey, pb.TableKey] = {}
        self.c_pkts = r.data_field(COUNTER_PKTS).id
        self.c_bytes = r.data_field(COUNTER_BYTES).id
        g = schema.table(RELAY_GUARD)
        self.guard_id = g.id
        self.g_dst, self.g_dport = g.key(K_DST_ADDR).id, g.key(K_DST_PORT).id
        self.guard_action = g.action(A_GUARD_DROP).id
        self.gc_pkts = g.data_field(COUNTER_PKTS).id
        self.gc_bytes = g.data_field(COUNTER_BYTES).id

    def relay_key(self, k: FlowKey) -> pb.TableKey:
        tk = self._keys.get(k)
        if tk is None:
            tk = pb.TableKey(
                fields=[
                    pb.KeyField(
                        field_id=self.k_src, exact=pb.KeyField.Exact(value=_ip(k.src_addr))
                    ),
                    pb.KeyField(
                        field_id=self.k_dst, exact=pb.KeyField.Exact(value=_ip(k.dst_addr))
                    ),
                    pb.KeyField(
                        field_id=self.k_sport,
                        exact=pb.KeyField.Exact(value=k.src_port.to_bytes(2, "big")),
                    ),
                    pb.KeyField(
                        field_id=self.k_dport,
                        exact=pb.KeyField.Exact(value=k.dst_port.to_bytes(2, "big")),
                    ),
                ]
            )
            self._keys[k] = tk
        return tk

    def forget(self, k: FlowKey) -> None:
        self._keys.pop(k, None)

    def relay_insert(self, r: RelayEntry, ttl_ms: int) -> pb.Update:
        data = pb.TableData(
            action_id=self.relay_action,
            fields=[
                pb.DataField(
                    field_id=self.p_leg.id, stream=r.leg.to_bytes(self.p_leg.nbytes, "big")
                ),
                pb.DataField(
                    field_id=self.p_rtcp.id, stream=int(r.rtcp).to_bytes(self.p_rtcp.nbytes, "big")
                ),
                pb.DataField(field_id=self.ttl.id, stream=ttl_ms.to_bytes(self.ttl.nbytes, "big")),
            ],
        )
        te = pb.TableEntry(table_id=self.relay_id, key=self.relay_key(r.key), data=data)
        return pb.Update(type=pb.Update.INSERT, entity=pb.Entity(table_entry=te))

    def relay_delete(self, k: FlowKey) -> pb.Update:
        te = pb.TableEntry(table_id=self.relay_id, key=self.relay_key(k))
        self.forget(k)
        return pb.Update(type=pb.Update.DELETE, entity=pb.Entity(table_entry=te))

    def relay_read(self, k: FlowKey) -> pb.Entity:
        return _hw_read(self.relay_id, self.relay_key(k))

    def decode_counters(self, ents: list[pb.Entity]) -> dict[FlowKey, FlowCounters]:
        """Relay entries as read back -> their direct counters (no generic decode)."""
        out: dict[FlowKey, FlowCounters] = {}
        for e in ents:
            te = e.table_entry
            if te.table_id != self.relay_id:
                continue
            kv = {f.field_id: f.exact.value for f in te.key.fields}
            try:
                key = FlowKey(
                    socket.inet_ntoa(kv[self.k_src]),
                    socket.inet_ntoa(kv[self.k_dst]),
                    int.from_bytes(kv[self.k_sport], "big"),
                    int.from_bytes(kv[self.k_dport], "big"),
                )
            except (KeyError, OSError):
                continue
            out[key] = _counters(te, self.c_pkts, self.c_bytes)
        return out

    def guard_key(self, k: GuardKey) -> pb.TableKey:
        return pb.TableKey(
            fields=[
                pb.KeyField(field_id=self.g_dst, exact=pb.KeyField.Exact(value=_ip(k.dst_addr))),
                pb.KeyField(
                    field_id=self.g_dport,
                    exact=pb.KeyField.Exact(value=k.dst_port.to_bytes(2, "big")),
                ),
            ]
        )

    def guard_insert(self, k: GuardKey) -> pb.Update:
        te = pb.TableEntry(
            table_id=self.guard_id,
            key=self.guard_key(k),
            data=pb.TableData(action_id=self.guard_action),
        )
        return pb.Update(type=pb.Update.INSERT, entity=pb.Entity(table_entry=te))

    def guard_delete(self, k: GuardKey) -> pb.Update:
        te = pb.TableEntry(table_id=self.guard_id, key=self.guard_key(k))
        return pb.Update(type=pb.Update.DELETE, entity=pb.Entity(table_entry=te))

    def guard_read(self, k: GuardKey) -> pb.Entity:
        return _hw_read(self.guard_id, self.guard_key(k))

    def decode_guard_counters(self, ents: list[pb.Entity]) -> dict[GuardKey, FlowCounters]:
        out: dict[GuardKey, FlowCounters] = {}
        for e in ents:
            te = e.table_entry
            if te.table_id != self.guard_id:
                continue
            kv = {f.field_id: f.exact.value for f in te.key.fields}
            try:
                key = GuardKey(
                    socket.inet_ntoa(kv[self.g_dst]), int.from_bytes(kv[self.g_dport], "big")
                )
            except (KeyError, OSError):
                continue
            out[key] = _counters(te, self.gc_pkts, self.gc_bytes)
        return out

    def _leg_key(self, leg: int) -> pb.TableKey:
        f = self.k_leg
        return pb.TableKey(
            fields=[
                pb.KeyField(
                    field_id=f.id, exact=pb.KeyField.Exact(value=leg.to_bytes(f.nbytes, "big"))
                )
            ]
        )

    def leg_write(self, lg: LegRewrite, kind: pb.Update.Type) -> pb.Update:
        p = self.p
        data = pb.TableData(
            action_id=self.rewrite_action,
            fields=[
                pb.DataField(field_id=p["src_addr"].id, stream=_ip(lg.src_addr)),
                pb.DataField(field_id=p["dst_addr"].id, stream=_ip(lg.dst_addr)),
                pb.DataField(field_id=p["src_port"].id, stream=lg.src_port.to_bytes(2, "big")),
                pb.DataField(field_id=p["dst_port"].id, stream=lg.dst_port.to_bytes(2, "big")),
            ],
        )
        te = pb.TableEntry(table_id=self.leg_table, key=self._leg_key(lg.leg), data=data)
        return pb.Update(type=kind, entity=pb.Entity(table_entry=te))

    def leg_delete(self, leg: int) -> pb.Update:
        te = pb.TableEntry(table_id=self.leg_table, key=self._leg_key(leg))
        return pb.Update(type=pb.Update.DELETE, entity=pb.Entity(table_entry=te))
