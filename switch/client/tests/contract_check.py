"""Compare a bfrt.json (program + fixed tables) with switch/contract.toml.

Returns every disagreement as a sentence, so a failing test says all of them
at once. Shared by test_contract.py (softswitch) and test_contract_p4.py (P4).
"""

from __future__ import annotations

import tomllib
from pathlib import Path
from typing import Any

CONTRACT = Path(__file__).resolve().parents[2] / "contract.toml"


# The upper half of a register the contract marks `split`.
SPLIT_SUFFIX = "_hi"

# An indexed counter's data fields by its unit (bf-p4c's names).
COUNTER_UNIT_DATA = {
    "PACKETS": ("$COUNTER_SPEC_PKTS",),
    "BYTES": ("$COUNTER_SPEC_BYTES",),
    "PACKETS_AND_BYTES": ("$COUNTER_SPEC_BYTES", "$COUNTER_SPEC_PKTS"),
}


# A register's `target`: the builds that declare it (contract v10: the loss
# counts' form). The software switch stands in for Tofino 1.
TARGETS = ("tofino", "tofino2")
SOFTSWITCH_TARGET = "tofino"


def target_of(profile: str) -> str:
    """The target of a switch/p4/build.sh profile."""
    return "tofino2" if profile.endswith("-t2") else "tofino"


def for_target(contract: dict[str, Any], target: str) -> dict[str, Any]:
    """The contract a build of `target` answers to: the registers of no
    target and of that one."""
    if target not in TARGETS:
        raise ValueError(f"target {target!r} is none of {TARGETS}")
    out = dict(contract)
    out["register"] = [r for r in contract["register"] if r.get("target", target) == target]
    return out


def load_contract(path: Path = CONTRACT) -> dict[str, Any]:
    with path.open("rb") as f:
        return tomllib.load(f)


def _width(t: dict[str, Any]) -> int | None:
    ty = t.get("type", {})
    if ty.get("type") == "bytes":
        return int(ty["width"])
    return {"uint8": 8, "uint16": 16, "uint32": 32, "uint64": 64}.get(ty.get("type", ""))


def _type_name(t: dict[str, Any]) -> str:
    return str(t.get("type", {}).get("type", ""))


def check_program(contract: dict[str, Any], bfrt: dict[str, Any]) -> list[str]:
    """`contract`: one target's (`for_target`)."""
    targets = {r["target"] for r in contract.get("register", []) if "target" in r}
    if len(targets) > 1:
        raise ValueError(f"a contract of targets {sorted(targets)}: check one (for_target)")
    errs: list[str] = []
    tables = {t["name"]: t for t in bfrt.get("tables", [])}
    actions = {a["name"]: a for a in contract.get("action", [])}
    want_tables = (
        {t["name"] for t in contract.get("table", [])}
        | {r["name"] for r in contract.get("register", [])}
        | {c["name"] for c in contract.get("counter", [])}
    )
    # A register the contract marks `split` may come as two (QUALITY_SPLIT):
    # then every split register has its "<name>_hi", with the same field.
    split = [r for r in contract.get("register", []) if r.get("split")]
    his = {r["name"] + SPLIT_SUFFIX for r in split}
    if his & set(tables) and not his <= set(tables):
        errs.append(f"split registers: only {sorted(his & set(tables))} of {sorted(his)}")
    want_tables |= his & set(tables)
    for extra in sorted(set(tables) - want_tables):
        errs.append(f"bfrt.json has table {extra} that the contract does not name")

    for ct in contract.get("table", []):
        name = ct["name"]
        t = tables.get(name)
        if t is None:
            errs.append(f"table {name} missing")
            continue
        keys = [(k["name"], k.get("match_type"), _width(k)) for k in t.get("key", [])]
        want_keys = [(k["name"], k["match"], k.get("bits")) for k in ct["keys"]]
        if keys != want_keys:
            errs.append(f"table {name}: keys {keys} != contract {want_keys}")
        specs = {a["name"]: a for a in t.get("action_specs", [])}
        if sorted(specs) != sorted(ct["actions"]):
            errs.append(
                f"table {name}: actions {sorted(specs)} != contract {sorted(ct['actions'])}"
            )
        for an, spec in specs.items():
            ca = actions.get(an)
            if ca is None:
                errs.append(f"action {an} (table {name}) is not declared in the contract")
                continue
            params = [(p["name"], _width(p)) for p in spec.get("data", [])]
            want = [(p["name"], p["bits"]) for p in ca["params"]]
            if params != want:
                errs.append(f"table {name} action {an}: params {params} != contract {want}")
        data = {
            d["singleton"]["name"]: d["singleton"] for d in t.get("data", []) if "singleton" in d
        }
        want_data: set[str] = set()
        optional: set[str] = set()
        if ct.get("direct_counter"):
            want_data |= {"$COUNTER_SPEC_BYTES", "$COUNTER_SPEC_PKTS"}
        want_data |= {d["name"] for d in ct.get("data", [])}
        for d in ct.get("data", []):
            got = data.get(d["name"])
            if got is not None and _width(got) != d["bits"]:
                errs.append(f"table {name}: data field {d['name']} width != {d['bits']}")
        if ct.get("table_type") and t.get("table_type") != ct["table_type"]:
            errs.append(f"table {name}: table_type {t.get('table_type')!r} != {ct['table_type']!r}")
        if ct.get("idle_timeout"):
            want_data.add("$ENTRY_TTL")
            optional.add("$ENTRY_HIT_STATE")  # bf-p4c lists it on idle-timeout tables
        if set(data) - optional != want_data:
            errs.append(f"table {name}: data fields {sorted(data)} != contract {sorted(want_data)}")
        attrs = set(t.get("attributes", []))
        want_attrs: set[str] = set()
        if ct.get("idle_timeout"):
            want_attrs.add("IdleTimeout")
        if ct.get("entry_scope"):
            want_attrs.add("EntryScope")
        if not want_attrs <= attrs:
            errs.append(
                f"table {name}: attributes {sorted(attrs)} lack {sorted(want_attrs - attrs)}"
            )

    halves = [
        {**cr, "name": cr["name"] + SPLIT_SUFFIX}
        for cr in split
        if cr["name"] + SPLIT_SUFFIX in tables
    ]
    for cr in [*contract.get("register", []), *halves]:
        name = cr["name"]
        t = tables.get(name)
        if t is None:
            errs.append(f"register {name} missing")
            continue
        if t.get("table_type") != "Register":
            errs.append(f"register {name}: table_type {t.get('table_type')!r} != 'Register'")
        reg_keys = [k["name"] for k in t.get("key", [])]
        if reg_keys != ["$REGISTER_INDEX"]:
            errs.append(f"register {name}: key {reg_keys} != ['$REGISTER_INDEX']")
        # `f1`, or a struct register's fields in declaration order
        short = name.removeprefix("pipe.")
        reg_want = [(f"{short}.{f}", cr["bits"]) for f in cr.get("fields", ["f1"])]
        reg_data = [(d["singleton"]["name"], _width(d["singleton"])) for d in t.get("data", [])]
        if reg_data != reg_want:
            errs.append(f"register {name}: data {reg_data} != {reg_want}")

    for cc in contract.get("counter", []):
        name = cc["name"]
        t = tables.get(name)
        if t is None:
            errs.append(f"counter {name} missing")
            continue
        if t.get("table_type") != "Counter":
            errs.append(f"counter {name}: table_type {t.get('table_type')!r} != 'Counter'")
        ctr_keys = [k["name"] for k in t.get("key", [])]
        if ctr_keys != ["$COUNTER_INDEX"]:
            errs.append(f"counter {name}: key {ctr_keys} != ['$COUNTER_INDEX']")
        ctr_data = sorted(d["singleton"]["name"] for d in t.get("data", []) if "singleton" in d)
        want_ctr = sorted(COUNTER_UNIT_DATA[cc["unit"]])
        if ctr_data != want_ctr:
            errs.append(f"counter {name}: data {ctr_data} != {want_ctr} (unit {cc['unit']})")

    learns = {d["name"]: d for d in bfrt.get("learn_filters", [])}
    want_learns = {d["name"] for d in contract.get("digest", [])}
    if set(learns) != want_learns:
        errs.append(f"digests {sorted(learns)} != contract {sorted(want_learns)}")
    for cd in contract.get("digest", []):
        d = learns.get(cd["name"])
        if d is None:
            continue
        fields = [(f["name"], _width(f)) for f in d.get("fields", [])]
        want = [(f["name"], f["bits"]) for f in cd["fields"]]
        if fields != want:
            errs.append(f"digest {cd['name']}: fields {fields} != contract {want}")
    return errs


def check_fixed(contract: dict[str, Any], fixed: dict[str, Any]) -> list[str]:
    errs: list[str] = []
    tables = {t["name"]: t for t in fixed.get("tables", [])}
    for cf in contract.get("fixed_table", []):
        name = cf["name"]
        t = tables.get(name)
        if t is None:
            errs.append(f"fixed table {name} missing")
            continue
        keys = [(k["name"], k.get("match_type"), _type_name(k)) for k in t.get("key", [])]
        want_keys = [(k["name"], k["match"], k["type"]) for k in cf.get("keys", [])]
        if keys != want_keys:
            errs.append(f"fixed table {name}: keys {keys} != contract {want_keys}")
        data = {d["singleton"]["name"]: _type_name(d["singleton"]) for d in t.get("data", [])}
        for cd in cf.get("data", []):
            if data.get(cd["name"]) != cd["type"]:
                errs.append(
                    f"fixed table {name}: data {cd['name']} is {data.get(cd['name'])!r}, contract {cd['type']!r}"
                )
    return errs


# IPv6 (contract v6): the objects WITH_IPV6 adds. A build without it (lean,
# large, Tofino 1 without -DP4RELAY_IPV6) is checked against the contract
# without them, and the software switch (which always serves them) is compared
# with it without them.
IPV6_TABLES = frozenset(
    {
        "pipe.Ingress.ipv6_lpm",
        "pipe.Ingress.relay6_addr",
        "pipe.Ingress.relay6",
        "pipe.Ingress.relay_guard6",
        "pipe.Ingress.leg_rewrite6",
        "pipe.Ingress.learn_filter6",
        "pipe.Ingress.reroute_watch6",
        "pipe.Ingress.int_watch6",
    }
)
IPV6_DIGESTS = frozenset({"pipe.IngressDeparser.learn6"})


def _ipv6_object(name: str) -> bool:
    return name in IPV6_TABLES or name.startswith("pipe.Ingress.learning6.")


def has_ipv6(bfrt: dict[str, Any]) -> bool:
    return any(t["name"] == "pipe.Ingress.relay6" for t in bfrt.get("tables", []))


def without_ipv6(bfrt: dict[str, Any]) -> dict[str, Any]:
    """A bf-rt.json without the IPv6 tables and digest."""
    out = dict(bfrt)
    out["tables"] = [t for t in bfrt.get("tables", []) if not _ipv6_object(t["name"])]
    out["learn_filters"] = [
        d for d in bfrt.get("learn_filters", []) if d["name"] not in IPV6_DIGESTS
    ]
    return out


def contract_for(contract: dict[str, Any], bfrt: dict[str, Any], target: str) -> dict[str, Any]:
    """The contract a build of `target` answers to: its target's registers,
    without the IPv6 objects if it has none."""
    contract = for_target(contract, target)
    if has_ipv6(bfrt):
        return contract
    out = dict(contract)
    out["table"] = [t for t in contract["table"] if t["name"] not in IPV6_TABLES]
    out["register"] = [r for r in contract["register"] if r["name"] not in IPV6_TABLES]
    out["digest"] = [d for d in contract["digest"] if d["name"] not in IPV6_DIGESTS]
    return out
