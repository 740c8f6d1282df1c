"""bfrt.json: names -> ids, widths and types, as bf-p4c and the SDE write it.

The client never hard-codes an id: every table, key, action, data field and
learn object is resolved here from the schema the switch serves through
GetForwardingPipelineConfig (the program's bfrt.json plus the device's non-P4
bfrt.json of fixed tables such as ``$PORT`` and ``tf1.tm.*``).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from p4relay_switch.errors import SchemaError

# bfrt.json "type" names whose byte width is fixed (others are "bytes" + width).
_FIXED_WIDTH_BITS = {"uint8": 8, "uint16": 16, "uint32": 32, "uint64": 64, "int32": 32}


@dataclass(frozen=True, slots=True)
class FieldInfo:
    """A key field, action parameter, common data field or learn field."""

    id: int
    name: str
    type: str  # "bytes", "uint32", "uint64", "bool", "string", "float", ...
    bits: int  # 0 for non-integer types
    match_type: str = ""  # key fields: Exact, Ternary, LPM, Range, Optional
    repeated: bool = False
    read_only: bool = False
    mandatory: bool = False
    choices: tuple[str, ...] = ()

    @property
    def nbytes(self) -> int:
        return (self.bits + 7) // 8

    @property
    def is_int(self) -> bool:
        return self.bits > 0


@dataclass(frozen=True, slots=True)
class ActionInfo:
    id: int
    name: str
    params: Mapping[str, FieldInfo]

    def param(self, name: str) -> FieldInfo:
        try:
            return self.params[name]
        except KeyError:
            raise SchemaError(
                f"action {self.name} has no parameter {name!r} (has {sorted(self.params)})"
            ) from None


@dataclass(frozen=True, slots=True)
class TableInfo:
    id: int
    name: str
    table_type: str
    size: int
    keys: Mapping[str, FieldInfo]
    actions: Mapping[str, ActionInfo]
    data: Mapping[str, FieldInfo]  # common data fields ($COUNTER_SPEC_*, $ENTRY_TTL, register .f1)
    attributes: tuple[str, ...]
    _key_by_id: Mapping[int, FieldInfo] = field(repr=False, default_factory=dict)
    _action_by_id: Mapping[int, ActionInfo] = field(repr=False, default_factory=dict)

    def key(self, name: str) -> FieldInfo:
        try:
            return self.keys[name]
        except KeyError:
            raise SchemaError(
                f"table {self.name} has no key field {name!r} (has {sorted(self.keys)})"
            ) from None

    def key_by_id(self, field_id: int) -> FieldInfo:
        try:
            return self._key_by_id[field_id]
        except KeyError:
            raise SchemaError(f"table {self.name} has no key field id {field_id}") from None

    def action(self, name: str) -> ActionInfo:
        found = self.actions.get(name)
        if found is None:
            # bfrt clients accept the short name when it is unique ("forward").
            matches = [a for n, a in self.actions.items() if n.rsplit(".", 1)[-1] == name]
            if len(matches) != 1:
                raise SchemaError(
                    f"table {self.name} has no action {name!r} (has {sorted(self.actions)})"
                )
            found = matches[0]
        return found

    def action_by_id(self, action_id: int) -> ActionInfo | None:
        return self._action_by_id.get(action_id)

    def data_field(self, name: str, action: ActionInfo | None = None) -> FieldInfo:
        """A data field by name: the action's parameter or a common data field."""
        if action is not None and name in action.params:
            return action.params[name]
        try:
            return self.data[name]
        except KeyError:
            where = f"action {action.name} or " if action else ""
            raise SchemaError(
                f"table {self.name}: no data field {name!r} in {where}its data"
            ) from None

    def data_field_by_id(self, field_id: int, action: ActionInfo | None) -> FieldInfo | None:
        if action is not None:
            for f in action.params.values():
                if f.id == field_id:
                    return f
        for f in self.data.values():
            if f.id == field_id:
                return f
        return None


@dataclass(frozen=True, slots=True)
class LearnInfo:
    id: int
    name: str
    fields: Mapping[str, FieldInfo]

    def field_by_id(self, field_id: int) -> FieldInfo | None:
        for f in self.fields.values():
            if f.id == field_id:
                return f
        return None


def _type_bits(t: Mapping[str, Any]) -> tuple[str, int]:
    tname = str(t.get("type", "bytes"))
    if tname == "bytes":
        return tname, int(t.get("width", 0))
    return tname, _FIXED_WIDTH_BITS.get(tname, 0)


def _field(d: Mapping[str, Any], *, match_type: str = "") -> FieldInfo:
    t = d.get("type", {})
    tname, bits = _type_bits(t)
    return FieldInfo(
        id=int(d["id"]),
        name=str(d["name"]),
        type=tname,
        bits=bits,
        match_type=match_type,
        repeated=bool(d.get("repeated", False)),
        read_only=bool(d.get("read_only", False)),
        mandatory=bool(d.get("mandatory", False)),
        choices=tuple(str(c) for c in t.get("choices", ())),
    )


def _data_entry(d: Mapping[str, Any]) -> FieldInfo | None:
    # Table "data" entries wrap the field in "singleton" (or "oneof" for
    # alternatives, which our tables do not use).
    single = d.get("singleton")
    if single is None:
        return None
    f = _field(single)
    return FieldInfo(
        id=f.id,
        name=f.name,
        type=f.type,
        bits=f.bits,
        repeated=f.repeated,
        read_only=bool(d.get("read_only", f.read_only)),
        mandatory=bool(d.get("mandatory", f.mandatory)),
        choices=f.choices,
    )


def _table(d: Mapping[str, Any]) -> TableInfo:
    keys = {
        k["name"]: _field(k, match_type=str(k.get("match_type", "Exact"))) for k in d.get("key", ())
    }
    actions: dict[str, ActionInfo] = {}
    for a in d.get("action_specs", ()):
        params = {p["name"]: _field(p) for p in a.get("data", ())}
        actions[a["name"]] = ActionInfo(id=int(a["id"]), name=str(a["name"]), params=params)
    data: dict[str, FieldInfo] = {}
    for entry in d.get("data", ()):
        f = _data_entry(entry)
        if f is not None:
            data[f.name] = f
    return TableInfo(
        id=int(d["id"]),
        name=str(d["name"]),
        table_type=str(d.get("table_type", "")),
        size=int(d.get("size", 0)),
        keys=keys,
        actions=actions,
        data=data,
        attributes=tuple(str(a) for a in d.get("attributes", ())),
        _key_by_id={k.id: k for k in keys.values()},
        _action_by_id={a.id: a for a in actions.values()},
    )


class Schema:
    """Every table and learn object of one or more bfrt.json documents."""

    def __init__(self, tables: Iterable[TableInfo], learns: Iterable[LearnInfo]) -> None:
        self.tables: dict[str, TableInfo] = {}
        self._tables_by_id: dict[int, TableInfo] = {}
        for t in tables:
            self.tables[t.name] = t
            self._tables_by_id[t.id] = t
        self.learns: dict[str, LearnInfo] = {ln.name: ln for ln in learns}
        self._learns_by_id = {ln.id: ln for ln in self.learns.values()}

    @classmethod
    def from_json(cls, *documents: bytes | str | Mapping[str, Any]) -> Schema:
        tables: list[TableInfo] = []
        learns: list[LearnInfo] = []
        for doc in documents:
            if isinstance(doc, bytes | str):
                if not doc:
                    continue
                try:
                    parsed: Mapping[str, Any] = json.loads(doc)
                except json.JSONDecodeError as e:
                    raise SchemaError(f"bfrt.json is not valid JSON: {e}") from e
            else:
                parsed = doc
            try:
                tables.extend(_table(t) for t in parsed.get("tables", ()))
                for ln in parsed.get("learn_filters", ()):
                    fields = {f["name"]: _field(f) for f in ln.get("fields", ())}
                    learns.append(LearnInfo(id=int(ln["id"]), name=str(ln["name"]), fields=fields))
            except (KeyError, TypeError, ValueError) as e:
                raise SchemaError(f"bfrt.json is malformed: {e!r}") from e
        return cls(tables, learns)

    def table(self, name: str) -> TableInfo:
        """By full name (``pipe.Ingress.relay``) or a unique dotted suffix (``Ingress.relay``)."""
        t = self.tables.get(name)
        if t is not None:
            return t
        matches = [t for n, t in self.tables.items() if n.endswith("." + name)]
        if len(matches) == 1:
            return matches[0]
        if not matches:
            raise SchemaError(f"no table {name!r} in the switch's bfrt.json")
        raise SchemaError(f"table name {name!r} is ambiguous: {sorted(t.name for t in matches)}")

    def table_by_id(self, table_id: int) -> TableInfo | None:
        return self._tables_by_id.get(table_id)

    def learn(self, name: str) -> LearnInfo:
        found = self.learns.get(name)
        if found is None:
            matches = [ln for n, ln in self.learns.items() if n.endswith("." + name)]
            if len(matches) != 1:
                raise SchemaError(f"no learn object {name!r} (has {sorted(self.learns)})")
            found = matches[0]
        return found

    def learn_by_id(self, learn_id: int) -> LearnInfo | None:
        return self._learns_by_id.get(learn_id)
