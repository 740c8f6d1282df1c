"""p4relay's tables through P4 Studio's BfRt Python client (`bfrt_grpc.client`).

The one place where the suite turns the project's call model
(`p4relay_switch.model`: `RelayCall`, `EntryBatch`) and the contract's table
names into bfrt_grpc keys and data (`make_key` / `make_data`), and turns
bfrt_grpc's reads, digests and idle notifications back into the model's types.
Every write and read goes through `bfrt_grpc.client` as a P4 Studio PTF test
drives bf_switchd, so the suite runs the same on tofino-model, hardware and the
software switch.
"""

from __future__ import annotations

import contextlib
import ipaddress
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import bfrt_grpc.bfruntime_pb2 as bfruntime_pb2
import bfrt_grpc.client as gc
import grpc
from p4relay_switch import names as n
from p4relay_switch.client import Entry
from p4relay_switch.codec import DataValue, KeyValue, Lpm, Range, Ternary, to_int
from p4relay_switch.model import (
    Counters,
    Endpoint,
    EntryBatch,
    FlowKey,
    LearnEvent,
    LegQuality,
    LegRewrite,
    RelayCall,
    RelayIdle,
    ip,
    is_v6,
)

ALL_PIPES = 0xFFFF
_INT_TYPES = {"uint64", "uint32", "uint16", "uint8", "int64", "int32", "int16", "int8", "bytes"}


@dataclass(frozen=True, slots=True)
class Row:
    """An entry as read back: key fields as ints (or `Lpm` / `Range` /
    `Ternary`), data fields as bfrt_grpc presents them (register cells: one
    value per pipe)."""

    key: dict[str, KeyValue]
    action: str | None
    data: dict[str, Any] = field(default_factory=dict)
    is_default: bool = False


def _key_tuple(name: str, v: KeyValue) -> Any:
    if isinstance(v, Lpm):
        return gc.KeyTuple(name, to_int(v.value), prefix_len=v.prefix_len)
    if isinstance(v, Range):
        return gc.KeyTuple(name, low=to_int(v.low), high=to_int(v.high))
    if isinstance(v, Ternary):
        return gc.KeyTuple(name, to_int(v.value), mask=to_int(v.mask))
    return gc.KeyTuple(name, to_int(v))


def _key_value(v: Mapping[str, Any]) -> KeyValue:
    """bfrt_grpc's presentation of one key field -> the codec's value types."""

    def num(x: Any) -> int:
        if isinstance(x, bytes | bytearray):
            return int.from_bytes(x, "big")
        return to_int(x) if isinstance(x, int | str) else int(x)

    if "prefix_len" in v:
        return Lpm(num(v["value"]), int(v["prefix_len"]))
    if "low" in v:
        return Range(num(v["low"]), num(v["high"]))
    if "mask" in v:
        return Ternary(num(v["value"]), num(v["mask"]))
    return num(v["value"])


def error_code(exc: Exception) -> grpc.StatusCode | None:
    """The code of a failed bfrt_grpc call: its first failed update's (what
    bf_switchd lists in the "Write/Read Error Status" details), else the call's."""
    if isinstance(exc, gc.BfruntimeRpcException):
        for _, err in exc.sub_errors_get():
            return _CODES.get(int(err.canonical_code))
        code: grpc.StatusCode = exc.grpc_error_get().code()
        return code
    return None


_CODES = {c.value[0]: c for c in grpc.StatusCode}


def failed_updates(exc: Exception) -> set[int]:
    """Indexes of the updates a failed Write names as failed."""
    if isinstance(exc, gc.BfruntimeRpcException):
        return {int(i) for i, _ in exc.sub_errors_get()}
    return set()


class Tables:
    """The program's and the fixed tables by name, written and read through
    bfrt_grpc on one target (device 0, all pipes unless a call names one)."""

    def __init__(self, bfrt_info: Any, target: Any | None = None) -> None:
        self.info = bfrt_info
        self.target = target or gc.Target(device_id=0, pipe_id=ALL_PIPES)
        self._tables: dict[str, Any] = {}

    def has(self, name: str) -> bool:
        try:
            self.table(name)
        except KeyError:
            return False
        return True

    def __contains__(self, name: object) -> bool:
        return isinstance(name, str) and self.has(name)

    def table(self, name: str) -> Any:
        t = self._tables.get(name)
        if t is None:
            t = self.info.table_get(name)  # KeyError for an unknown table
            self._tables[name] = t
        return t

    def on(self, pipe: int | None) -> Any:
        return self.target if pipe is None else gc.Target(device_id=0, pipe_id=pipe)

    def size(self, name: str) -> int:
        return int(self.table(name).info.size_get())

    # ------------------------------------------------------------ keys, data

    def key(self, name: str, fields: Mapping[str, KeyValue]) -> Any:
        return self.table(name).make_key([_key_tuple(k, v) for k, v in fields.items()])

    def data(
        self, name: str, fields: Mapping[str, DataValue] | None = None, action: str | None = None
    ) -> Any:
        t = self.table(name)
        tuples = []
        for f, v in (fields or {}).items():
            kind = t.info.data_field_type_get(f, action)
            if t.info.data_field_repeated_get(f, action):
                vals: list[Any] = list(v) if isinstance(v, list | tuple) else [v]
                if kind == "bool":
                    tuples.append(gc.DataTuple(f, bool_arr_val=[bool(x) for x in vals]))
                else:
                    tuples.append(gc.DataTuple(f, int_arr_val=[int(x) for x in vals]))
            elif kind == "bool":
                tuples.append(gc.DataTuple(f, bool_val=bool(v)))
            elif kind == "string":
                tuples.append(gc.DataTuple(f, str_val=str(v)))
            elif kind == "float":
                tuples.append(gc.DataTuple(f, float_val=float(v)))  # type: ignore[arg-type]
            elif kind in _INT_TYPES:
                tuples.append(gc.DataTuple(f, to_int(v)))  # type: ignore[arg-type]
            else:
                raise TypeError(f"{name}: data field {f} has type {kind}")
        return t.make_data(tuples, action)

    # ------------------------------------------------------------ writes

    def _split(self, name: str, entries: Sequence[Entry]) -> tuple[list[Any], list[Any]]:
        return (
            [self.key(name, e.key) for e in entries],
            [self.data(name, e.data, e.action) for e in entries],
        )

    def _tgt(self, entries: Sequence[Entry]) -> Any:
        pipes = {e.pipe for e in entries}
        if len(pipes) != 1:
            raise ValueError("one write names one target pipe")
        return self.on(pipes.pop())

    def insert(self, name: str, entries: Sequence[Entry], *, batch: int = 0) -> None:
        """Inserts, ``batch`` entries a Write (0: all in one)."""
        step = batch or len(entries)
        for i in range(0, len(entries), step or 1):
            part = entries[i : i + step]
            keys, data = self._split(name, part)
            self.table(name).entry_add(self._tgt(part), keys, data)

    def modify(self, name: str, entries: Sequence[Entry]) -> None:
        if entries:
            keys, data = self._split(name, entries)
            self.table(name).entry_mod(self._tgt(entries), keys, data)

    def insert_or_modify(self, name: str, entries: Sequence[Entry]) -> None:
        if entries:
            keys, data = self._split(name, entries)
            self.table(name).entry_add_or_mod(self._tgt(entries), keys, data)

    def delete(self, name: str, keys: Sequence[Mapping[str, KeyValue]]) -> None:
        if keys:
            self.table(name).entry_del(self.target, [self.key(name, k) for k in keys])

    def set_default(
        self, name: str, action: str, data: Mapping[str, DataValue] | None = None
    ) -> None:
        self.table(name).default_entry_set(self.target, self.data(name, data, action))

    def clear(self, name: str) -> None:
        """Every entry deleted, every register cell zeroed: a delete without a
        key (bf_switchd's table clear, bfrt_grpc's `entry_del(target)`)."""
        self.table(name).entry_del(self.target)

    # ------------------------------------------------------------ reads

    def read(
        self,
        name: str,
        keys: Sequence[Mapping[str, KeyValue]] | None = None,
        *,
        fields: Sequence[str] | None = None,
        from_hw: bool = True,
        pipe: int | None = None,
    ) -> list[Row]:
        """Entries (all of them without ``keys``), with only ``fields`` when named."""
        t = self.table(name)
        required = t.make_data([gc.DataTuple(f) for f in fields], get=True) if fields else None
        got = t.entry_get(
            self.on(pipe),
            [self.key(name, k) for k in keys] if keys else None,
            {"from_hw": from_hw},
            required,
        )
        out: list[Row] = []
        for data, key in got:
            d = data.to_dict() if data is not None else {}
            action = d.pop("action_name", None)
            is_default = bool(d.pop("is_default_entry", False))
            k = {f: _key_value(v) for f, v in key.to_dict().items()} if key is not None else {}
            out.append(Row(k, action, d, is_default))
        return out

    def usage(self, name: str) -> int:
        return sum(
            int(u) for u in self.table(name).usage_get(self.target, flags={"from_hw": False})
        )

    # ------------------------------------------------------------ registers

    def read_register(
        self,
        name: str,
        indexes: Iterable[int],
        *,
        field: str = n.F_VALUE,
        from_hw: bool = True,
    ) -> dict[int, list[int]]:
        """index -> one value per pipe (of the register's field `field`)."""
        f = register_field(name, field)
        rows = self.read(name, [{"$REGISTER_INDEX": i} for i in indexes], from_hw=from_hw)
        out: dict[int, list[int]] = {}
        for r in rows:
            v = r.data[f]
            out[key_int(r.key["$REGISTER_INDEX"])] = [
                int(x) for x in (v if isinstance(v, list) else [v])
            ]
        return out

    def write_register(self, name: str, values: Mapping[int, int]) -> None:
        f = register_field(name)
        self.modify(name, [Entry({"$REGISTER_INDEX": i}, None, {f: v}) for i, v in values.items()])

    def write_register_fields(self, name: str, values: Mapping[int, Mapping[str, int]]) -> None:
        """Cells of a register of several fields (`rtp_loss`), every field of
        each: index -> {field: value}."""
        self.modify(
            name,
            [
                Entry(
                    {"$REGISTER_INDEX": i},
                    None,
                    {register_field(name, f): v for f, v in cell.items()},
                )
                for i, cell in values.items()
            ],
        )

    def register_total(self, name: str, index: int) -> int:
        return sum(self.read_register(name, [index])[index])

    # ------------------------------------------------------------- counters

    def read_counter(self, name: str, indexes: Iterable[int]) -> dict[int, list[int]]:
        """An indexed packet counter: index -> its packets (a list: one value,
        or one per pipe where the target reports them so)."""
        rows = self.read(name, [{"$COUNTER_INDEX": i} for i in indexes])
        out: dict[int, list[int]] = {}
        for r in rows:
            v = r.data["$COUNTER_SPEC_PKTS"]
            out[key_int(r.key["$COUNTER_INDEX"])] = [
                int(x) for x in (v if isinstance(v, list) else [v])
            ]
        return out

    def write_counter(self, name: str, values: Mapping[int, int]) -> None:
        """Sets packet counter cells (0 resets them)."""
        self.modify(
            name,
            [
                Entry({"$COUNTER_INDEX": i}, None, {"$COUNTER_SPEC_PKTS": v})
                for i, v in values.items()
            ],
        )

    # ------------------------------------------------------------ ports, TM

    def ports(self) -> dict[int, dict[str, Any]]:
        """dev_port -> $PORT's data ($PORT_NAME, $SPEED, $PORT_UP, ...)."""
        return {key_int(r.key["$DEV_PORT"]): r.data for r in self.read("$PORT")}

    def port_stats(self, ports: Iterable[int]) -> dict[int, dict[str, int]]:
        rows = self.read("$PORT_STAT", [{"$DEV_PORT": p} for p in ports])
        return {
            key_int(r.key["$DEV_PORT"]): {
                k: int(v) for k, v in r.data.items() if isinstance(v, int)
            }
            for r in rows
        }

    def port_queue(self, dev_port: int, qid: int = 0) -> tuple[int | None, int, int]:
        """(pipe, pg_id, pg_queue) of a port's egress queue. Tofino 1 (the tm
        tables with tf1.tm.port.cfg): pipe = port >> 7, pg_id = (port & 0x7f)
        >> 2, pg_queue = (port & 3) * 8 + qid (8 queues per channel). The
        software switch has one pipe and a port group per port."""
        if self.has("tf1.tm.port.cfg"):
            local = dev_port & 0x7F
            return dev_port >> 7, local >> 2, (local & 3) * 8 + qid
        return None, dev_port, qid

    def queue_stats(self, dev_port: int, qid: int = 0) -> dict[str, int]:
        """usage_cells, watermark_cells, drop_count_packets of a port's egress queue."""
        pipe, pg_id, pg_queue = self.port_queue(dev_port, qid)
        rows = self.read(
            "tf1.tm.counter.queue", [{"pg_id": pg_id, "pg_queue": pg_queue}], pipe=pipe
        )
        if not rows:
            raise KeyError(f"no egress queue for dev port {dev_port}")
        return {k: int(v) for k, v in rows[0].data.items() if isinstance(v, int)}

    def set_port_shaping(self, dev_port: int, max_rate_kbps: int, *, enable: bool = True) -> None:
        """Egress line rate of a port (tf1.tm.port.sched_shaping, kbit/s)."""
        name = "tf1.tm.port.sched_shaping"
        fields = set(self.table(name).info.data_field_name_list_get())
        data: dict[str, DataValue] = {"max_rate": max_rate_kbps}
        for f, v in (("unit", "BPS"), ("max_burst_size", 9000), ("provisioning", "UPPER")):
            if f in fields:
                data[f] = v
        pipe = dev_port >> 7 if self.has("tf1.tm.port.cfg") else None
        self.modify(name, [Entry({"dev_port": dev_port}, None, data, pipe=pipe)])
        cfg = "tf1.tm.port.sched_cfg"
        if self.has(cfg) and "max_rate_enable" in self.table(cfg).info.data_field_name_list_get():
            self.modify(
                cfg, [Entry({"dev_port": dev_port}, None, {"max_rate_enable": enable}, pipe=pipe)]
            )


def key_int(v: KeyValue) -> int:
    """An exact key field's value as read back."""
    if isinstance(v, Lpm | Range | Ternary):
        raise TypeError(f"not an exact key value: {v!r}")
    return to_int(v)


# ---------------------------------------------------------------- the call model


def quality_cell(name: str, leg: int, split: int | None) -> tuple[str, int]:
    """A leg's cell of a quality register: (table, index). A program that
    splits them (``split``: the lower half's size) holds the legs from there
    in ``<name>_hi`` at index leg - split."""
    if split is not None and leg >= split:
        return name + n.QUALITY_HI_SUFFIX, leg - split
    return name, leg


def batch_writes(
    b: EntryBatch,
    ttl_ms: int = 0,
    relay6_ids: Mapping[str, int] | None = None,
    quality_split: int | None = None,
    *,
    quality_values: Sequence[n.RegisterValue],
) -> list[tuple[str, str, list[Entry]]]:
    """An `EntryBatch` as bfrt_grpc writes, in the batch's order (guards and
    relays removed first, legs last; legs added first, guards last):
    (operation, table, entries). The one mapping from the call model to the
    program's entries. IPv6 entries go to the IPv6 tables, their relay
    address as its relay_id (``relay6_ids``: relay6_addr's, by address); a
    quality register's cells of a split program to their half
    (``quality_split``, `quality_cell`); the quality values in the program's
    form (``quality_values``: `names.quality_values` of its tables)."""
    writes: list[tuple[str, str, list[Entry]]] = []
    ids = relay6_ids or {}

    def add(op: str, table: str, entries: list[Entry]) -> None:
        if entries:
            writes.append((op, table, entries))

    def guard_key(dst_addr: str, dst_port: int) -> dict[str, KeyValue]:
        if is_v6(dst_addr):
            return {n.K_RELAY_ID: relay_id(ids, dst_addr), n.K_DST_PORT: dst_port}
        return {n.K_DST_ADDR: dst_addr, n.K_DST_PORT: dst_port}

    def by_family(table: str, table6: str, items: Iterable[Any], v6: Any, entry: Any) -> None:
        items = list(items)
        add_op = [(table, [x for x in items if not v6(x)]), (table6, [x for x in items if v6(x)])]
        for t, xs in add_op:
            add(op_now, t, [entry(x) for x in xs])

    op_now = "delete"
    by_family(
        n.RELAY_GUARD,
        n.RELAY_GUARD6,
        b.del_guards,
        lambda g: is_v6(g.dst_addr),
        lambda g: Entry(guard_key(g.dst_addr, g.dst_port)),
    )
    by_family(
        n.RELAY,
        n.RELAY6,
        b.del_relays,
        lambda k: is_v6(k.dst_addr),
        lambda k: Entry(flow_key(k, ids)),
    )
    for reg in dict.fromkeys(r for r, _ in quality_values):
        cells = [quality_cell(reg, leg, quality_split) for leg in b.reset_legs]
        fields = [f for r, f in quality_values if r == reg]
        for half in dict.fromkeys(t for t, _ in cells):
            add(
                "modify",
                half,
                [
                    Entry(
                        {"$REGISTER_INDEX": i},
                        None,
                        {register_field(half, f): 0 for f in fields},
                    )
                    for t, i in cells
                    if t == half
                ],
            )
    add(
        "modify",
        n.GUARD_DROPS,
        [
            Entry({n.COUNTER_INDEX: leg}, None, {n.COUNTER_PKTS: 0})  # a packets counter
            for leg in b.reset_legs
        ],
    )
    op_now = "modify"
    by_family(n.LEG_REWRITE, n.LEG_REWRITE6, b.mod_legs, lambda lg: lg.v6, leg_entry)
    op_now = "insert"
    by_family(n.LEG_REWRITE, n.LEG_REWRITE6, b.add_legs, lambda lg: lg.v6, leg_entry)
    ttl = {n.TTL: ttl_ms} if ttl_ms else {}
    by_family(
        n.RELAY,
        n.RELAY6,
        b.add_relays,
        lambda r: is_v6(r.key.dst_addr),
        lambda r: Entry(
            flow_key(r.key, ids),
            n.A_RELAY6_LEG if is_v6(r.key.dst_addr) else n.A_RELAY_LEG,
            {"leg": r.leg, "rtcp": int(r.rtcp), **ttl},
        ),
    )
    by_family(
        n.RELAY_GUARD,
        n.RELAY_GUARD6,
        b.add_guards,
        lambda g: is_v6(g.key.dst_addr),
        lambda g: Entry(
            guard_key(g.key.dst_addr, g.key.dst_port),
            n.A_GUARD6_DROP if is_v6(g.key.dst_addr) else n.A_GUARD_DROP,
            {"leg": g.leg},
        ),
    )
    add("delete", n.LEG_REWRITE, [Entry({n.K_LEG: leg}) for leg in b.del_legs])
    add("delete", n.LEG_REWRITE6, [Entry({n.K_LEG6: leg}) for leg in b.del_legs6])
    return writes


def relay_id(ids: Mapping[str, int], addr: str) -> int:
    """The relay_id of a relay IPv6 address (KeyError: no relay6_addr entry)."""
    rid = ids.get(str(ipaddress.IPv6Address(addr)))
    if rid is None:
        raise KeyError(f"{addr} has no relay6_addr entry")
    return rid


def register_field(register: str, field: str = n.F_VALUE) -> str:
    """A register's data field as bf-p4c names it: `pipe.Egress.r` -> `Egress.r.f1`
    (a struct register's: `pipe.Egress.rtp_loss`, `lost` -> `Egress.rtp_loss.lost`)."""
    return n.register_field(register, field)


def flow_key(k: FlowKey, relay6_ids: Mapping[str, int] | None = None) -> dict[str, KeyValue]:
    if is_v6(k.dst_addr):
        return {
            n.K6_SRC_ADDR: k.src_addr,
            n.K_RELAY_ID: relay_id(relay6_ids or {}, k.dst_addr),
            n.K_SRC_PORT: k.src_port,
            n.K_DST_PORT: k.dst_port,
            n.K_BOUND_PORT: k.ingress_port,
        }
    return {
        n.K_SRC_ADDR: k.src_addr,
        n.K_DST_ADDR: k.dst_addr,
        n.K_SRC_PORT: k.src_port,
        n.K_DST_PORT: k.dst_port,
        n.K_BOUND_PORT: k.ingress_port,
    }


def leg_entry(lg: LegRewrite) -> Entry:
    if lg.v6:
        return Entry(
            {n.K_LEG6: lg.leg},
            n.A_REWRITE6,
            {
                "src_addr": lg.src_addr,
                "dst_addr": lg.dst_addr,
                "src_port": lg.src_port,
                "dst_port": lg.dst_port,
            },
        )
    return Entry(
        {n.K_LEG: lg.leg},
        n.A_REWRITE,
        {
            "src_addr": lg.src_addr,
            "dst_addr": lg.dst_addr,
            "src_port": lg.src_port,
            "dst_port": lg.dst_port,
        },
    )


class Calls:
    """Calls written and read through `Tables` (`Pipeline`'s operations, on
    P4 Studio's client)."""

    def __init__(self, tables: Tables) -> None:
        self.t = tables
        # the relay's IPv6 addresses -> relay_id, as the test wrote relay6_addr
        self.relay6_ids: dict[str, int] = {}
        # the first leg of the quality registers' upper halves, where the
        # program splits them (found in its bf-rt.json, as Pipeline does)
        self.quality_split = (
            tables.size(n.REG_PACKETS) if tables.has(n.REG_PACKETS + n.QUALITY_HI_SUFFIX) else None
        )
        # the loss counts in the program's form (found in its bf-rt.json)
        self.quality_values = n.quality_values(tables)

    def write(self, b: EntryBatch, ttl_ms: int = 0) -> None:
        """The batch's writes in order. When one fails, what this batch
        inserted is deleted again (never an entry whose own insert failed,
        e.g. ALREADY_EXISTS: it is someone else's) and the error is raised."""
        inserted: list[tuple[str, list[Entry]]] = []
        for op, table, entries in batch_writes(
            b, ttl_ms, self.relay6_ids, self.quality_split, quality_values=self.quality_values
        ):
            try:
                if op == "delete":
                    self.t.delete(table, [e.key for e in entries])
                elif op == "modify":
                    self.t.modify(table, entries)
                else:
                    self.t.insert(table, entries)
            except gc.BfruntimeRpcException as exc:
                if op == "insert":
                    failed = failed_updates(exc)
                    done = [e for i, e in enumerate(entries) if failed and i not in failed]
                    inserted.append((table, done))
                self._undo(inserted)
                raise
            if op == "insert":
                inserted.append((table, entries))

    def _undo(self, inserted: list[tuple[str, list[Entry]]]) -> None:
        for table, entries in reversed(inserted):
            for e in entries:
                with contextlib.suppress(gc.BfruntimeRpcException):  # already gone
                    self.t.delete(table, [e.key])

    def install(self, call: RelayCall, *, ttl_ms: int | None = None, guard: bool = False) -> None:
        self.write(call.install(guard=guard), ttl_ms or 0)

    def update(self, call: RelayCall) -> None:
        self.write(EntryBatch(mod_legs=tuple(d.rewrite() for d in call.directions)))

    def guard(self, call: RelayCall) -> None:
        self.write(EntryBatch(add_guards=tuple(call.guards())))

    def unguard(self, call: RelayCall) -> None:
        """The call's guards that are there (a call may never have been guarded)."""
        if call.v6:
            addrs = {rid: a for a, rid in self.relay6_ids.items()}
            present = {
                (addrs.get(key_int(r.key[n.K_RELAY_ID]), ""), key_int(r.key[n.K_DST_PORT]))
                for r in self.t.read(n.RELAY_GUARD6, from_hw=False)
            }
        else:
            present = {
                (str(ip(key_int(r.key[n.K_DST_ADDR]))), key_int(r.key[n.K_DST_PORT]))
                for r in self.t.read(n.RELAY_GUARD, from_hw=False)
            }
        keys = tuple(g for g in call.guard_keys() if (g.dst_addr, g.dst_port) in present)
        self.write(EntryBatch(del_guards=keys))

    def remove(self, call: RelayCall) -> None:
        self.unguard(call)
        b = call.removal()
        self.write(EntryBatch(del_relays=b.del_relays, del_legs=b.del_legs, del_legs6=b.del_legs6))

    def counters(self, call: RelayCall) -> dict[int, Counters]:
        """leg -> packets/bytes of its direction (leg_rewrite's direct counter)."""
        out = {leg: Counters(0, 0) for leg in call.legs}
        table, k_leg = (n.LEG_REWRITE6, n.K_LEG6) if call.v6 else (n.LEG_REWRITE, n.K_LEG)
        present = {key_int(r.key[k_leg]) for r in self.t.read(table, from_hw=False)}
        legs = [leg for leg in call.legs if leg in present]
        if legs:
            for r in self.t.read(table, [{k_leg: leg} for leg in legs]):
                out[key_int(r.key[k_leg])] = Counters(
                    int(r.data[n.COUNTER_PKTS]), int(r.data[n.COUNTER_BYTES])
                )
        return out

    def guard_drops(self, call: RelayCall) -> dict[int, int]:
        rows = self.t.read(n.GUARD_DROPS, [{n.COUNTER_INDEX: leg} for leg in call.legs])
        return {key_int(r.key[n.COUNTER_INDEX]): int(r.data[n.COUNTER_PKTS]) for r in rows}

    def quality(self, legs: Sequence[int]) -> dict[int, LegQuality]:
        split = self.quality_split
        vals: dict[tuple[str, str], dict[int, list[int]]] = {}
        for reg, f in self.quality_values:
            cells = {leg: quality_cell(reg, leg, split) for leg in legs}
            got = {
                half: self.t.read_register(
                    half, [i for t, i in cells.values() if t == half], field=f
                )
                for half in dict.fromkeys(t for t, _ in cells.values())
            }
            vals[reg, f] = {leg: got[t][i] for leg, (t, i) in cells.items()}

        def v(reg: str, leg: int, field: str = n.F_VALUE) -> int:
            return sum(vals[reg, field][leg])

        (lost_reg, lost_f), (reordered_reg, reordered_f) = n.loss_values(self.t)

        return {
            leg: LegQuality(
                leg,
                packets=v(n.REG_PACKETS, leg),
                lost=v(lost_reg, leg, lost_f),
                reordered=v(reordered_reg, leg, reordered_f),
                max_seq=v(n.REG_MAX_SEQ, leg),
                transit=v(n.REG_TRANSIT, leg),
                jitter_raw=v(n.REG_JITTER, leg),
                last_seen_ms=v(n.REG_LAST_SEEN, leg),
                payload_type=v(n.REG_PAYLOAD_TYPE, leg),
            )
            for leg in legs
        }


# ---------------------------------------------------------------- notifications


def learn_events(learn: Any, digest: Any, *, v6: bool = False) -> list[LearnEvent]:
    """A `pipe.IngressDeparser.learn` (``v6``: `learn6`) digest as the model's events."""
    out: list[LearnEvent] = []
    addr: Any = ipaddress.IPv6Address if v6 else ipaddress.IPv4Address
    for d in learn.make_data_list(digest):
        r = d.to_dict()
        out.append(
            LearnEvent(
                src=Endpoint(addr(_num(r["src_addr"])), int(r["src_port"])),
                dst=Endpoint(addr(_num(r["dst_addr"])), int(r["dst_port"])),
                ingress_port=int(r["ingress_port"]),
            )
        )
    return out


def _num(v: Any) -> int:
    """A digest field as bfrt_grpc presents it (an int, or bytes for wide fields)."""
    return int.from_bytes(v, "big") if isinstance(v, bytes | bytearray) else int(v)


def relay_idle(bfrt_info: Any, notification: Any) -> RelayIdle | None:
    """A relay entry's idle-timeout notification as the model's `RelayIdle`."""
    table = bfrt_info.table_from_id_get(notification.table_entry.table_id)
    if table.info.name_get() != n.RELAY:
        return None
    if notification.type != bfruntime_pb2.IdleTimeoutNotification.ENTRY_IDLE:
        return None  # back to active
    k = bfrt_info.key_from_idletime_notification(notification).to_dict()

    def num(name: str) -> int:
        return key_int(_key_value(k[name]))

    return RelayIdle(
        src=Endpoint(ip(num(n.K_SRC_ADDR)), num(n.K_SRC_PORT)),
        dst=Endpoint(ip(num(n.K_DST_ADDR)), num(n.K_DST_PORT)),
        ingress_port=num(n.K_BOUND_PORT),
        pipe=int(notification.target.pipe_id),
    )
