"""The Tofino program's bf-rt.json, as the compiler writes it, against the contract
and the software switch.

bf-p4c (or its open-source build, `switch/p4/build.sh`) writes `bf-rt.json`, the
schema bf_switchd serves in GetForwardingPipelineConfig. The `p4` test stage
compiles every profile into build/p4relay-<profile>/; this test reads those
files. The standard profile's schema is committed as
switch/p4/bfrt/standard.bf-rt.json (what the software switch can be compared
against without a compiler) and must equal a fresh compile.

Where no compile output exists (a machine without the compiler), the tests that
need one are skipped, except under CI=true, where they fail.
"""

from __future__ import annotations

import copy
import json
import os
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from contract_check import (
    IPV6_TABLES,
    SPLIT_SUFFIX,
    check_program,
    contract_for,
    for_target,
    has_ipv6,
    load_contract,
    target_of,
    without_ipv6,
)
from p4relay_testsupport import dump_softswitch as dump

ROOT = Path(__file__).resolve().parents[3]
P4_ROOT = ROOT / "switch" / "p4"
COMMITTED = P4_ROOT / "bfrt" / "standard.bf-rt.json"
COMMITTED_T2 = P4_ROOT / "bfrt" / "standard-t2.bf-rt.json"
BUILD = Path(os.environ.get("P4RELAY_P4_OUT", ROOT / "build"))
PROFILES = ("standard", "lean", "large")

# Objects bf-p4c adds to every program, which no client of ours addresses: the
# snapshot (debug capture) tables, the table debug counters, the dynamic-hash
# tables of each Hash extern, and the hit-state field of a table with idle
# timeout. (The parser's port metadata table is the contract's port binding.)
TARGET_TABLE_TYPES = {
    "SnapshotCfg",
    "SnapshotTrigger",
    "SnapshotData",
    "SnapshotLiveness",
    "TblDbgCnt",
    "DynHashAlgorithm",
    "DynHashConfigure",
    "DynHashCompute",
}
TARGET_DATA_FIELDS = frozenset({"$ENTRY_HIT_STATE"})


def compiled(profile: str) -> dict[str, Any]:
    path = BUILD / f"p4relay-{profile}" / "bf-rt.json"
    if not path.is_file():
        msg = f"{path} missing: run the p4 stage (scripts/test-stages/05-p4.sh) or switch/p4/build.sh {profile}"
        if os.environ.get("CI") == "true":
            pytest.fail(msg)
        pytest.skip(msg)
    return dict(json.loads(path.read_text()))


def strip_target_objects(
    bfrt: dict[str, Any], data_fields: frozenset[str] = TARGET_DATA_FIELDS
) -> tuple[dict[str, Any], list[str]]:
    """The program's own objects, and a sorted list of what was set aside
    (target tables, and the given target-generated data fields)."""
    out = json.loads(json.dumps(bfrt))
    removed: list[str] = []
    kept = []
    for t in out["tables"]:
        if t.get("table_type") in TARGET_TABLE_TYPES:
            removed.append(f"{t['table_type']} {t['name']}")
            continue
        data = []
        for d in t.get("data", []):
            name = d.get("singleton", {}).get("name")
            if name in data_fields:
                removed.append(f"{t['name']}: {name}")
                continue
            data.append(d)
        t["data"] = data
        kept.append(t)
    out["tables"] = kept
    return out, sorted(removed)


def contract_errors(contract: dict[str, Any], bfrt: dict[str, Any]) -> list[str]:
    """check_program plus the Tofino sizes (size_p4) and the [config] sizes."""
    program, _ = strip_target_objects(bfrt)
    errs = check_program(contract, program)
    tables = {t["name"]: t for t in program["tables"]}
    for ct in contract["table"] + contract["register"] + contract["counter"]:
        t = tables.get(ct["name"])
        if t is None:
            continue
        size = t.get("size")
        hi = tables.get(ct["name"] + SPLIT_SUFFIX)
        if ct.get("split") and hi is not None and isinstance(size, int):
            size += hi.get("size", 0)  # a split register: both halves' cells
        if size != ct["size_p4"]:
            errs.append(f"{ct['name']}: size {size} != contract size_p4 {ct['size_p4']}")
    cfg = contract["config"]
    for table, key in (
        ("pipe.Ingress.relay", "relay_entries_p4"),
        ("pipe.Ingress.leg_rewrite", "legs_p4"),
    ):
        t = tables.get(table)
        if t is not None and t.get("size") != cfg[key]:
            errs.append(f"{table}: size {t.get('size')} != [config] {key} {cfg[key]}")
    lf = tables.get("pipe.Ingress.learn_filter")
    if lf is not None and lf.get("size") != cfg["learn_filter_size"]:
        errs.append(f"learn_filter: size {lf.get('size')} != [config] learn_filter_size")
    return errs


def _field(f: dict[str, Any]) -> tuple[str, str, Any]:
    ty = f.get("type", {})
    return (f["name"], ty.get("type", ""), ty.get("width"))


def schema_shape(bfrt: dict[str, Any], data_fields: frozenset[str] = frozenset()) -> dict[str, Any]:
    """Everything a client resolves by name, without ids and sizes: per table its
    keys (name, match type, type, width), data fields, actions and their
    parameters, attributes; per digest its fields. Target-generated data
    fields (e.g. $ENTRY_HIT_STATE) are kept unless named in data_fields."""
    program, _ = strip_target_objects(bfrt, data_fields)
    shape: dict[str, Any] = {}
    for t in program["tables"]:
        shape[t["name"]] = {
            "type": t.get("table_type"),
            "keys": [(*_field(k), k["match_type"]) for k in t.get("key", [])],
            "data": sorted(_field(d["singleton"]) for d in t.get("data", []) if "singleton" in d),
            "actions": sorted(
                (a["name"], tuple(_field(p) for p in a.get("data", [])))
                for a in t.get("action_specs", [])
            ),
            "attributes": sorted(t.get("attributes", [])),
        }
    for d in program.get("learn_filters", []):
        shape[d["name"]] = {"digest": [_field(f) for f in d["fields"]]}
    return shape


def schema_ids(bfrt: dict[str, Any]) -> dict[str, int]:
    """Every id a client sends, by a path of names (target tables aside)."""
    program, _ = strip_target_objects(bfrt, frozenset())
    ids: dict[str, int] = {}
    for t in program["tables"]:
        ids[t["name"]] = t["id"]
        for k in t.get("key", []):
            ids[f"{t['name']} key {k['name']}"] = k["id"]
        for d in t.get("data", []):
            if "singleton" in d:
                ids[f"{t['name']} data {d['singleton']['name']}"] = d["singleton"]["id"]
        for a in t.get("action_specs", []):
            ids[f"{t['name']} action {a['name']}"] = a["id"]
            for p in a.get("data", []):
                ids[f"{t['name']} action {a['name']} param {p['name']}"] = p["id"]
    for d in program.get("learn_filters", []):
        ids[d["name"]] = d["id"]
        for f in d["fields"]:
            ids[f"{d['name']} field {f['name']}"] = f["id"]
    return ids


def shape_differences(a: dict[str, Any], b: dict[str, Any]) -> list[str]:
    errs = [f"{n}: only in the first" for n in sorted(set(a) - set(b))]
    errs += [f"{n}: only in the second" for n in sorted(set(b) - set(a))]
    for n in sorted(set(a) & set(b)):
        for part in a[n]:
            if a[n][part] != b[n].get(part):
                errs.append(f"{n} {part}: {a[n][part]} != {b[n].get(part)}")
    return errs


@pytest.fixture(scope="module")
def contract() -> dict[str, Any]:
    return load_contract()


@pytest.fixture(scope="module")
def committed() -> dict[str, Any]:
    return dict(json.loads(COMMITTED.read_text()))


@pytest.fixture(scope="module")
def softswitch() -> dict[str, Any]:
    return dict(json.loads(dump("--dump-bfrt-json")))


def test_committed_schema_matches_contract(
    contract: dict[str, Any], committed: dict[str, Any]
) -> None:
    """The standard profile builds everything the contract names (IPv6 only
    where the build has it: Tofino 2, or Tofino 1 with -DP4RELAY_IPV6)."""
    errs = contract_errors(contract_for(contract, committed, "tofino"), committed)
    assert not errs, "switch/p4 (bf-rt.json) disagrees with contract.toml:\n" + "\n".join(errs)


def test_committed_t2_schema_is_tofino_2s_form(contract: dict[str, Any]) -> None:
    """Tofino 2's standard build answers to the contract with the loss counts
    in two registers (rtp_lost, rtp_reordered); checked as a Tofino 1 build,
    exactly the loss form disagrees."""
    t2 = dict(json.loads(COMMITTED_T2.read_text()))
    errs = contract_errors(contract_for(contract, t2, "tofino2"), t2)
    assert not errs, "standard-t2.bf-rt.json disagrees with contract.toml:\n" + "\n".join(errs)
    as_t1 = contract_errors(contract_for(contract, t2, "tofino"), t2)
    assert sorted(as_t1) == [
        "bfrt.json has table pipe.Egress.rtp_lost that the contract does not name",
        "bfrt.json has table pipe.Egress.rtp_reordered that the contract does not name",
        "register pipe.Egress.rtp_loss missing",
    ]


@pytest.mark.parametrize("profile", ["standard", "standard-t2"])
def test_committed_schema_is_the_compilers(profile: str) -> None:
    """switch/p4/bfrt/<profile>.bf-rt.json is what the current source compiles
    to (the snapshot debug tables aside: the compiler orders them differently
    from one run to the next). The software switch takes its ids from both:
    Tofino 2's build is the one with the IPv6 objects."""
    path = P4_ROOT / "bfrt" / f"{profile}.bf-rt.json"
    fresh = _resources().program_schema(compiled(profile))
    assert fresh == _resources().program_schema(json.loads(path.read_text())), (
        f"{path.relative_to(ROOT)} is stale: "
        "P4RELAY_UPDATE_BFRT=1 bash scripts/test-stages/05-p4.sh regenerates it"
    )


def test_only_known_target_objects_are_set_aside(committed: dict[str, Any]) -> None:
    """What the contract comparison ignores is exactly this (report it if it grows)."""
    _, removed = strip_target_objects(committed)
    assert removed == [
        "DynHashAlgorithm pipe.Egress.ired.widen_deq.algorithm",
        "DynHashAlgorithm pipe.Egress.ired.widen_enq.algorithm",
        "DynHashAlgorithm pipe.Ingress.int_source.slot_hash.algorithm",
        "DynHashAlgorithm pipe.Ingress.learning.flow_hash.algorithm",
        "DynHashCompute pipe.Egress.ired.widen_deq.compute",
        "DynHashCompute pipe.Egress.ired.widen_enq.compute",
        "DynHashCompute pipe.Ingress.int_source.slot_hash.compute",
        "DynHashCompute pipe.Ingress.learning.flow_hash.compute",
        "DynHashConfigure pipe.Egress.ired.widen_deq.configure",
        "DynHashConfigure pipe.Egress.ired.widen_enq.configure",
        "DynHashConfigure pipe.Ingress.int_source.slot_hash.configure",
        "DynHashConfigure pipe.Ingress.learning.flow_hash.configure",
        "SnapshotCfg pipe.snapshot.cfg",
        "SnapshotData pipe.snapshot.egress_data",
        "SnapshotData pipe.snapshot.ingress_data",
        "SnapshotLiveness pipe.snapshot.egress_liveness",
        "SnapshotLiveness pipe.snapshot.ingress_liveness",
        "SnapshotTrigger pipe.snapshot.egress_trigger",
        "SnapshotTrigger pipe.snapshot.ingress_trigger",
        "TblDbgCnt tbl_dbg_counter",
        "pipe.Ingress.relay: $ENTRY_HIT_STATE",
    ]


@pytest.mark.parametrize("profile", ["standard", "standard-t2"])
def test_standard_profile_is_the_contract(contract: dict[str, Any], profile: str) -> None:
    """Every feature in one program: relay, guard, RTP quality, reroute, INT, iRED;
    the Tofino 2 build publishes the same objects at the same sizes."""
    build = compiled(profile)
    if profile == "standard-t2":
        assert has_ipv6(build), "Tofino 2's standard build relays IPv6"
    errs = contract_errors(contract_for(contract, build, target_of(profile)), build)
    assert not errs, errs


def int_objects(contract: dict[str, Any]) -> list[str]:
    """What WITH_INT adds: its tables and registers, as contract_errors names them missing."""
    tables = [
        t["name"]
        for t in contract["table"]
        if ".int_" in t["name"] and t["name"] not in IPV6_TABLES
    ]
    regs = [r["name"] for r in contract["register"] if ".int_" in r["name"]]
    assert len(tables) == 4 and len(regs) == 9
    return [f"table {n} missing" for n in tables] + [f"register {n} missing" for n in regs]


def _reroute_missing(contract: dict[str, Any]) -> list[str]:
    """What a build without congestion reroute lacks, as contract_errors says it."""
    tables = [t["name"] for t in contract["table"] if ".reroute_" in t["name"]]
    regs = [r["name"] for r in contract["register"] if ".reroute_" in r["name"]]
    assert len(tables) == 2 and len(regs) == 4
    digests = sorted(d["name"] for d in contract["digest"])
    without = sorted(d for d in digests if not d.endswith(".reroute"))
    return (
        [f"table {n} missing" for n in tables]
        + [f"register {n} missing" for n in regs]
        + [f"digests {without} != contract {digests}"]
    )


def ired_objects(contract: dict[str, Any]) -> list[str]:
    """What WITH_IRED adds: its tables (per port, the spared class), registers and
    counters, as contract_errors names them missing."""
    tables = [t["name"] for t in contract["table"] if ".ired_" in t["name"]]
    regs = [r["name"] for r in contract["register"] if ".ired_" in r["name"]]
    counters = [c["name"] for c in contract["counter"] if ".ired_" in c["name"]]
    assert len(tables) == 2 and len(regs) == 4 and len(counters) == 5
    return (
        [f"table {n} missing" for n in tables]
        + [f"register {n} missing" for n in regs]
        + [f"counter {n} missing" for n in counters]
    )


def _quality_missing(contract: dict[str, Any]) -> list[str]:
    quality = [r["name"] for r in contract["register"] if r["name"].startswith("pipe.Egress.rtp_")]
    assert len(quality) == 7, "Tofino 1's: the loss counts in one register"
    return [f"register {n} missing" for n in quality]


def test_lean_profile_drops_quality_registers_reroute_and_ired(contract: dict[str, Any]) -> None:
    """Lean: IPv4 relay only, at its own (larger) sizes: the freed stages hold more calls."""
    lean = compiled("lean")
    assert not has_ipv6(lean)
    contract = contract_for(contract, lean, "tofino")
    errs = contract_errors(contract, lean)
    want = (
        _quality_missing(contract)
        + _reroute_missing(contract)
        + ired_objects(contract)
        + int_objects(contract)
    )
    sized = [e for e in errs if e not in want]
    assert sized, "the lean build has other sizes than the contract's defaults"
    assert all("size" in e for e in sized), errs
    assert sorted(set(errs) - set(sized)) == sorted(want)


def test_large_profile_changes_sizes_only_and_has_no_reroute_or_ired(
    contract: dict[str, Any],
) -> None:
    """Large: every ingress stage goes to the relay tables, so no reroute, iRED or IPv6;
    its quality registers are split (the upper halves only in it)."""
    large = compiled("large")
    assert not has_ipv6(large)
    contract = contract_for(contract, large, "tofino")
    errs = contract_errors(contract, large)
    missing = _reroute_missing(contract) + ired_objects(contract) + int_objects(contract)
    sized = [e for e in errs if e not in missing]
    assert sized, "the large build has other sizes than the contract's defaults"
    assert all("size" in e for e in sized), errs
    assert sorted(set(errs) - set(sized)) == sorted(missing)
    standard = compiled("standard")
    diffs = shape_differences(
        schema_shape(large),
        schema_shape(standard if has_ipv6(large) else without_ipv6(standard)),
    )
    assert diffs and all(
        (any(f in d for f in ("reroute", ".ired_", ".int_")) and "only in the second" in d)
        or (d.startswith("pipe.Egress.rtp_") and "_hi: only in the first" in d)
        for d in diffs
    ), diffs


def test_softswitch_schema_is_the_compilers(
    committed: dict[str, Any], softswitch: dict[str, Any]
) -> None:
    """Table, key and data field names (incl. $ENTRY_HIT_STATE), types, widths,
    match types, actions and their parameters, attributes, registers and digest
    fields: the software switch serves what bf_switchd serves for this program
    (sizes differ by design)."""
    if not has_ipv6(committed):
        softswitch = without_ipv6(softswitch)
    diffs = shape_differences(schema_shape(committed), schema_shape(softswitch))
    assert not diffs, "softswitch schema differs from bf-p4c's:\n" + "\n".join(diffs)


def test_softswitch_ids(committed: dict[str, Any], softswitch: dict[str, Any]) -> None:
    """Every id a client sends (table, key, data field, action, parameter,
    digest, digest field) is bf-p4c's."""
    p4 = schema_ids(committed)
    soft = schema_ids(softswitch if has_ipv6(committed) else without_ipv6(softswitch))
    assert set(p4) == set(soft), sorted(set(p4) ^ set(soft))
    differing = [
        f"{k}: bf-p4c {p4[k]}, softswitch {soft[k]}" for k in sorted(p4) if p4[k] != soft[k]
    ]
    assert not differing, "ids differ from bf-p4c's:\n" + "\n".join(differing)


def test_id_comparison_catches_a_changed_id(softswitch: dict[str, Any]) -> None:
    """The id comparison itself: a changed action id, field id or table id shows."""
    ids = schema_ids(softswitch)
    broken = json.loads(json.dumps(softswitch))
    relay = _table(broken, "pipe.Ingress.relay")
    relay["id"] += 1
    relay["action_specs"][0]["id"] += 1
    ttl = next(d for d in relay["data"] if d["singleton"]["name"] == "$ENTRY_TTL")
    ttl["singleton"]["id"] = 65555
    changed = schema_ids(broken)
    assert sorted(k for k in ids if ids[k] != changed[k]) == [
        "pipe.Ingress.relay",
        "pipe.Ingress.relay action Ingress.relay_leg",
        "pipe.Ingress.relay data $ENTRY_TTL",
    ]


def test_checker_catches_disagreements(contract: dict[str, Any], committed: dict[str, Any]) -> None:
    """The comparison itself: every kind of drift is reported."""
    broken = json.loads(json.dumps(committed))
    relay = next(t for t in broken["tables"] if t["name"] == "pipe.Ingress.relay")
    relay["key"][0]["type"]["width"] = 31
    relay["action_specs"][0]["data"][0]["name"] = "leg_idx"
    relay["size"] = 1024
    broken["tables"] = [t for t in broken["tables"] if t["name"] != "pipe.Egress.rtp_jitter"]
    broken["learn_filters"][0]["fields"][0]["name"] = "src"
    errs = "\n".join(contract_errors(for_target(contract, "tofino"), broken))
    for needle in (
        "pipe.Ingress.relay: keys",
        "Ingress.relay_leg: params",
        "pipe.Ingress.relay: size 1024",
        "register pipe.Egress.rtp_jitter missing",
        "digest pipe.IngressDeparser.learn",
    ):
        assert needle in errs
    diffs = shape_differences(schema_shape(committed), schema_shape(broken))
    assert any("pipe.Egress.rtp_jitter" in d for d in diffs)
    assert any(d.startswith("pipe.Ingress.relay keys") for d in diffs)


# Each mutation of the committed schema with what the checker's complaint must name.
SCHEMA_MUTATIONS: list[Any] = []
Mutation = Callable[[dict[str, Any]], None]


def mutation(case: str, needle: str) -> Callable[[Mutation], Mutation]:
    """Registers a schema mutation (test id `case`) the checker must refuse, naming `needle`."""

    def register(mutate: Mutation) -> Mutation:
        SCHEMA_MUTATIONS.append(pytest.param(mutate, needle, id=case))
        return mutate

    return register


def _table(bfrt: dict[str, Any], name: str) -> dict[str, Any]:
    return next(t for t in bfrt["tables"] if t["name"] == name)


@mutation("table-renamed", "pipe.Ingress.relay")
def _rename_table(b: dict[str, Any]) -> None:
    _table(b, "pipe.Ingress.relay")["name"] = "pipe.Ingress.relays"


@mutation("key-width", "pipe.Ingress.leg_rewrite: keys")
def _key_width(b: dict[str, Any]) -> None:
    _table(b, "pipe.Ingress.leg_rewrite")["key"][0]["type"]["width"] = 20


@mutation("key-match-type", "pipe.Ingress.relay_guard: keys")
def _key_match(b: dict[str, Any]) -> None:
    _table(b, "pipe.Ingress.relay_guard")["key"][1]["match_type"] = "Ternary"


@mutation("key-order", "pipe.Ingress.relay: keys")
def _key_order(b: dict[str, Any]) -> None:
    keys = _table(b, "pipe.Ingress.relay")["key"]
    keys[0], keys[1] = keys[1], keys[0]


@mutation("key-name", "pipe.Ingress.nexthop: keys")
def _key_name(b: dict[str, Any]) -> None:
    _table(b, "pipe.Ingress.nexthop")["key"][0]["name"] = "meta.nexthop_id"


@mutation("action-renamed", "pipe.Ingress.ipv4_lpm: actions")
def _action_renamed(b: dict[str, Any]) -> None:
    _table(b, "pipe.Ingress.ipv4_lpm")["action_specs"][0]["name"] = "Ingress.set_next_hop"


@mutation("action-missing", "pipe.Ingress.relay_guard: actions")
def _action_missing(b: dict[str, Any]) -> None:
    t = _table(b, "pipe.Ingress.relay_guard")
    t["action_specs"] = [a for a in t["action_specs"] if a["name"] != "Ingress.guard_drop"]


@mutation("param-width", "Ingress.forward: params")
def _param_width(b: dict[str, Any]) -> None:
    _table(b, "pipe.Ingress.nexthop")["action_specs"][0]["data"][0]["type"]["width"] = 8


@mutation("param-renamed", "Ingress.rewrite: params")
def _param_renamed(b: dict[str, Any]) -> None:
    _table(b, "pipe.Ingress.leg_rewrite")["action_specs"][0]["data"][2]["name"] = "sport"


@mutation("param-missing", "Ingress.relay_leg: params")
def _param_missing(b: dict[str, Any]) -> None:
    _table(b, "pipe.Ingress.relay")["action_specs"][0]["data"].pop()


@mutation("counter-missing", "pipe.Ingress.leg_rewrite: data fields")
def _counter_missing(b: dict[str, Any]) -> None:
    t = _table(b, "pipe.Ingress.leg_rewrite")
    t["data"] = [d for d in t["data"] if d["singleton"]["name"] != "$COUNTER_SPEC_PKTS"]


@mutation("guard-drops-bytes", "counter pipe.Ingress.guard_drops: data")
def _guard_drops_bytes(b: dict[str, Any]) -> None:
    t = _table(b, "pipe.Ingress.guard_drops")
    d = json.loads(json.dumps(t["data"][0]))
    d["singleton"]["name"] = "$COUNTER_SPEC_BYTES"
    t["data"].append(d)


@mutation("ttl-missing", "pipe.Ingress.relay: data fields")
def _ttl_missing(b: dict[str, Any]) -> None:
    t = _table(b, "pipe.Ingress.relay")
    t["data"] = [d for d in t["data"] if d["singleton"]["name"] != "$ENTRY_TTL"]


@mutation("idle-attribute-missing", "IdleTimeout")
def _idle_attribute_missing(b: dict[str, Any]) -> None:
    _table(b, "pipe.Ingress.relay")["attributes"] = ["EntryScope"]


@mutation("scope-attribute-missing", "EntryScope")
def _scope_attribute_missing(b: dict[str, Any]) -> None:
    _table(b, "pipe.Ingress.leg_rewrite")["attributes"] = []


@mutation("register-width", "register pipe.Egress.rtp_max_seq: data")
def _register_width(b: dict[str, Any]) -> None:
    _table(b, "pipe.Egress.rtp_max_seq")["data"][0]["singleton"]["type"]["width"] = 32


@mutation("register-field", "register pipe.Egress.rtp_loss: data")
def _register_field(b: dict[str, Any]) -> None:
    _table(b, "pipe.Egress.rtp_loss")["data"][0]["singleton"]["name"] = "Egress.rtp_loss.lo"


@mutation("register-field-missing", "register pipe.Egress.rtp_loss: data")
def _register_field_missing(b: dict[str, Any]) -> None:
    del _table(b, "pipe.Egress.rtp_loss")["data"][1]


@mutation("register-one-value", "register pipe.Egress.rtp_packets: data")
def _register_one_value(b: dict[str, Any]) -> None:
    t = _table(b, "pipe.Egress.rtp_packets")
    t["data"].append(copy.deepcopy(t["data"][0]))
    t["data"][1]["singleton"]["name"] = "Egress.rtp_packets.f2"


@mutation("register-size", "pipe.Egress.rtp_jitter: size 16384")
def _register_size(b: dict[str, Any]) -> None:
    _table(b, "pipe.Egress.rtp_jitter")["size"] = 16384


@mutation("register-missing", "register pipe.Ingress.learn_filter missing")
def _register_missing(b: dict[str, Any]) -> None:
    b["tables"] = [t for t in b["tables"] if t["name"] != "pipe.Ingress.learn_filter"]


@mutation("table-size", "pipe.Ingress.relay_guard: size 61440")
def _table_size(b: dict[str, Any]) -> None:
    _table(b, "pipe.Ingress.relay_guard")["size"] = 61440


@mutation("extra-table", "pipe.Ingress.nexthop2")
def _extra_table(b: dict[str, Any]) -> None:
    b["tables"].append(dict(_table(b, "pipe.Ingress.nexthop"), name="pipe.Ingress.nexthop2"))


@mutation("digest-field-width", "digest pipe.IngressDeparser.learn")
def _digest_field_width(b: dict[str, Any]) -> None:
    b["learn_filters"][0]["fields"][4]["type"]["width"] = 16


@mutation("digest-field-order", "digest pipe.IngressDeparser.learn")
def _digest_field_order(b: dict[str, Any]) -> None:
    f = b["learn_filters"][0]["fields"]
    f[2], f[3] = f[3], f[2]


@mutation("digest-renamed", "digests")
def _digest_renamed(b: dict[str, Any]) -> None:
    b["learn_filters"][0]["name"] = "pipe.IngressDeparser.learning"


@pytest.mark.parametrize(("mutate", "needle"), SCHEMA_MUTATIONS)
def test_mutated_schema_fails(
    contract: dict[str, Any], committed: dict[str, Any], mutate: Any, needle: str
) -> None:
    """Each kind of drift in a compiled schema is reported against the contract,
    and (sizes aside) against the schema it came from."""
    broken = json.loads(json.dumps(committed))
    mutate(broken)
    errs = contract_errors(for_target(contract, "tofino"), broken)
    assert any(needle in e for e in errs), errs
    if "size" not in needle:
        assert shape_differences(schema_shape(committed), schema_shape(broken))


def test_writeback_session_base_matches_bootstrap() -> None:
    """The program's JITTER_WRITEBACK_SESSION_BASE is the bootstrap's default."""
    text = (P4_ROOT / "include" / "defines.p4").read_text()
    m = re.search(r"#define JITTER_WRITEBACK_SESSION_BASE (\d+)", text)
    assert m is not None
    site = json.loads((ROOT / "switch" / "bfrt" / "site.example.json").read_text())
    wb = site.get("jitter_writeback") or {}
    assert int(m.group(1)) == wb.get("session_base", int(m.group(1)))


def _resources() -> Any:
    import importlib.util
    import sys

    if "p4relay_p4_resources" in sys.modules:
        return sys.modules["p4relay_p4_resources"]
    spec = importlib.util.spec_from_file_location("p4relay_p4_resources", P4_ROOT / "resources.py")
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod  # dataclasses look their module up there
    spec.loader.exec_module(mod)
    return mod


@pytest.mark.parametrize("profile", [*PROFILES, "standard-v6", "standard-t2"])
def test_resources_from_compiler_logs(profile: str) -> None:
    """switch/p4/resources.py reads the compiler's logs of a profile: it fits the
    target's stages (12 on Tofino 1, 20 on Tofino 2), and its calls per pipe
    follow from the compiled table sizes."""
    bfrt = compiled(profile)
    res = _resources().load(BUILD / f"p4relay-{profile}")
    assert res.ok, res.error
    stages = 20 if profile.endswith("-t2") else 12
    assert res.target == ("tofino2" if stages == 20 else "tofino")
    assert 0 < res.ingress_stages <= stages and 0 < res.egress_stages <= stages
    assert 0 < res.sram <= 80 * stages and 0 < res.tcam <= 24 * stages
    sizes = {t["name"]: t["size"] for t in bfrt["tables"]}
    want = min(
        sizes["pipe.Ingress.relay"] // 4,
        sizes["pipe.Ingress.relay_guard"] // 4,
        sizes["pipe.Ingress.leg_rewrite"] // 2,
    )
    assert res.calls_per_pipe == want
    stage_map = "\n".join(_resources().stage_lines(res))
    for table in ("relay", "relay_guard", "leg_rewrite", "ipv4_lpm", "nexthop", "learn_filter"):
        assert f"| {table} " in stage_map or f", {table} " in stage_map, table


def test_resources_reports_a_failed_compile(tmp_path: Path) -> None:
    """A profile the compiler rejects: its error in the summary, a failing JUnit case."""
    res_mod = _resources()
    bad = tmp_path / "p4relay-broken"
    bad.mkdir()
    (bad / "compile.log").write_text(
        "warning: something\nerror: tofino supports up to 12 stages, using 13\n1 error generated.\n"
    )
    (bad / "compile.rc").write_text("1 12\n")
    res = res_mod.load(bad)
    assert not res.ok and "using 13" in res.error
    assert "FAIL" in "\n".join(res_mod.summary_lines([res]))
    out = tmp_path / "p4.xml"
    res_mod.junit(out, "05-p4", [res])
    xml = out.read_text()
    assert 'tests="1" failures="1"' in xml and "using 13" in xml


def test_resources_rejects_a_placement_beyond_12_stages(tmp_path: Path) -> None:
    """Placed by the compiler but in more stages than a pipe has: not a fit,
    even when no compile.rc says so."""
    res_mod = _resources()
    d = tmp_path / "p4relay-big"
    (d / "pipe" / "logs").mkdir(parents=True)
    (d / "pipe" / "logs" / "table_summary.log").write_text(
        "Number of stages for ingress table allocation: 15\n"
        "Number of stages for egress table allocation: 3\n"
    )
    (d / "pipe" / "logs" / "metrics.json").write_text(
        json.dumps({"mau": {"srams": 631, "tcams": 34, "map_rams": 334}})
    )
    res = res_mod.load(d)
    assert not res.ok
    assert res.error == "needs 15 ingress / 3 egress stages of 12"
    assert "does not fit" in "\n".join(res_mod.table_lines([res]))
