"""The softswitch serves exactly contract.toml's names; the client's names are the contract's."""

from __future__ import annotations

import json
import subprocess
from typing import Any

import pytest
from contract_check import (
    SOFTSWITCH_TARGET,
    SPLIT_SUFFIX,
    TARGETS,
    check_fixed,
    check_program,
    for_target,
    load_contract,
)
from p4relay_switch import pipeline
from p4relay_testsupport import dump_softswitch as dump
from p4relay_testsupport import softswitch_binary


@pytest.fixture(scope="module")
def contract() -> dict[str, Any]:
    """The contract the software switch answers to: Tofino 1's registers."""
    return for_target(load_contract(), SOFTSWITCH_TARGET)


@pytest.fixture(scope="module")
def full() -> dict[str, Any]:
    """Every target's registers."""
    return load_contract()


@pytest.fixture(scope="module")
def bfrt() -> dict[str, Any]:
    return dict(json.loads(dump("--dump-bfrt-json")))


@pytest.fixture(scope="module")
def fixed() -> dict[str, Any]:
    return dict(json.loads(dump("--dump-fixed-bfrt-json")))


SPLIT_ARGS = ("--legs", "131072", "--quality-half-bits", "16")  # large-t2's


def test_softswitch_split_quality_schema_matches_contract(contract: dict[str, Any]) -> None:
    """Started as a build that splits the quality registers, the software
    switch serves both halves of each, as the contract allows."""
    out = subprocess.run(
        [str(softswitch_binary()), "--dump-bfrt-json", *SPLIT_ARGS],
        check=True,
        capture_output=True,
        text=True,
        timeout=30,
    ).stdout
    split = json.loads(out)
    assert check_program(contract, split) == []
    sizes = {t["name"]: t["size"] for t in split["tables"]}
    assert [sizes[pipeline.REG_JITTER], sizes[pipeline.REG_JITTER + SPLIT_SUFFIX]] == [65536] * 2
    # one half missing is a disagreement
    split["tables"] = [t for t in split["tables"] if t["name"] != pipeline.REG_LOSS + SPLIT_SUFFIX]
    assert any("split registers" in e for e in check_program(contract, split))


def test_softswitch_program_schema_matches_contract(
    contract: dict[str, Any], bfrt: dict[str, Any]
) -> None:
    errs = check_program(contract, bfrt)
    assert not errs, "softswitch bfrt.json disagrees with contract.toml:\n" + "\n".join(errs)


def test_softswitch_publishes_tofino_1s_loss_form(
    full: dict[str, Any], bfrt: dict[str, Any]
) -> None:
    """Checked as a Tofino 2 program, the software switch's schema has the
    other loss form; a contract of both targets is refused, not half-checked."""
    assert check_program(for_target(full, "tofino2"), bfrt) == [
        f"bfrt.json has table {pipeline.REG_LOSS} that the contract does not name",
        f"register {pipeline.REG_LOST} missing",
        f"register {pipeline.REG_REORDERED} missing",
    ]
    with pytest.raises(ValueError, match="for_target"):
        check_program(full, bfrt)


def test_softswitch_fixed_schema_matches_contract(
    contract: dict[str, Any], fixed: dict[str, Any]
) -> None:
    errs = check_fixed(contract, fixed)
    assert not errs, "softswitch fixed bfrt.json disagrees with contract.toml:\n" + "\n".join(errs)


def test_ids_unique_and_nonzero(bfrt: dict[str, Any], fixed: dict[str, Any]) -> None:
    ids = [t["id"] for t in bfrt["tables"] + fixed["tables"]]
    # bf-p4c gives an action one id in every table that lists it.
    actions: dict[str, set[int]] = {}
    for t in bfrt["tables"]:
        for a in t.get("action_specs", []):
            actions.setdefault(a["name"], set()).add(a["id"])
    ids += [i for s in actions.values() for i in s]
    ids += [d["id"] for d in bfrt.get("learn_filters", [])]
    assert all(i > 0 for i in ids)
    assert len(ids) == len(set(ids))


def test_checker_catches_disagreements(contract: dict[str, Any], bfrt: dict[str, Any]) -> None:
    """The checker itself: every kind of drift is reported."""
    broken = json.loads(json.dumps(bfrt))
    relay = next(t for t in broken["tables"] if t["name"] == "pipe.Ingress.relay")
    relay["key"][0]["type"]["width"] = 31
    relay["action_specs"][0]["data"][0]["name"] = "leg_idx"
    relay["data"] = relay["data"][:1]
    broken["tables"] = [t for t in broken["tables"] if t["name"] != "pipe.Egress.rtp_jitter"]
    broken["tables"].append({"name": "pipe.Ingress.extra", "key": []})
    broken["learn_filters"][0]["fields"][0]["name"] = "src"
    errs = "\n".join(check_program(contract, broken))
    for needle in (
        "pipe.Ingress.relay: keys",
        "Ingress.relay_leg: params",
        "pipe.Ingress.relay: data fields",
        "register pipe.Egress.rtp_jitter missing",
        "pipe.Ingress.extra",
        "digest pipe.IngressDeparser.learn",
    ):
        assert needle in errs


def test_client_pipeline_names_are_the_contracts(full: dict[str, Any]) -> None:
    contract = full
    tables = {t["name"]: t for t in contract["table"]}
    actions = {a["name"] for a in contract["action"]}
    registers = {r["name"] for r in contract["register"]}
    for n in (
        pipeline.IPV4_LPM,
        pipeline.NEXTHOP,
        pipeline.RELAY_ADDR,
        pipeline.RELAY,
        pipeline.RELAY_GUARD,
    ):
        assert n in tables
    assert pipeline.LEG_REWRITE in tables
    for a in (
        pipeline.A_SET_NEXTHOP,
        pipeline.A_FORWARD,
        pipeline.A_DROP,
        pipeline.A_MARK_RELAY,
        pipeline.A_RELAY_LEG,
        pipeline.A_REWRITE,
        pipeline.A_GUARD_DROP,
    ):
        assert a in actions
    assert pipeline.A_GUARD_DROP in tables[pipeline.RELAY_GUARD]["actions"]
    assert [k["name"] for k in tables[pipeline.RELAY_GUARD]["keys"]] == [
        pipeline.K_DST_ADDR,
        pipeline.K_DST_PORT,
    ]
    # contract v5: counted per leg, not per entry
    assert "direct_counter" not in tables[pipeline.RELAY_GUARD]
    assert "direct_counter" not in tables[pipeline.RELAY]
    assert tables[pipeline.LEG_REWRITE]["direct_counter"] is True
    counters = {c["name"]: c for c in contract["counter"]}
    assert counters[pipeline.GUARD_DROPS]["unit"] == "PACKETS"
    drop = next(a for a in contract["action"] if a["name"] == pipeline.A_GUARD_DROP)
    relay_leg = next(a for a in contract["action"] if a["name"] == pipeline.A_RELAY_LEG)
    assert drop["params"] == [p for p in relay_leg["params"] if p["name"] == "leg"]
    assert contract["program"]["contract_version"] == 10
    # contract v8: the reroute digest names the INT hop a sink's notice saw
    reroute = next(d for d in contract["digest"] if d["name"] == "pipe.IngressDeparser.reroute")
    assert [f["name"] for f in reroute["fields"]][-2:] == ["hop_switch_id", "hop_port"]
    # contract v10: the loss counts in each target's form, the client's
    # quality registers those of a program of that target
    for target, form in (("tofino", pipeline.LOSS_FIELDS), ("tofino2", pipeline.LOSS_REGISTERS)):
        regs = {r["name"]: r for r in for_target(contract, target)["register"]}
        quality = pipeline.quality_registers(regs)
        assert pipeline.loss_values(regs) == form
        assert set(quality) <= set(regs)
        # contract v2: quality is measured at egress; learn_filter stays in Ingress
        assert all(r.startswith("pipe.Egress.rtp_") for r in quality)
        for reg, f in form:
            assert regs[reg].get("fields", [pipeline.F_VALUE]) == [
                g for r, g in pipeline.quality_values(regs) if r == reg
            ]
            assert f in regs[reg].get("fields", [pipeline.F_VALUE])
            assert regs[reg]["target"] == target
        # exactly the quality registers may be split, their halves named alike
        assert {n for n, r in regs.items() if r.get("split")} == set(quality)
    assert sorted({r["target"] for r in contract["register"] if "target" in r}) == list(TARGETS)
    assert pipeline.QUALITY_HI_SUFFIX == SPLIT_SUFFIX
    assert "pipe.Ingress.learn_filter" in registers
    assert pipeline.LEARN_DIGEST in {d["name"] for d in contract["digest"]}
    relay_keys = [k["name"] for k in tables[pipeline.RELAY]["keys"]]
    assert relay_keys == [
        pipeline.K_SRC_ADDR,
        pipeline.K_DST_ADDR,
        pipeline.K_SRC_PORT,
        pipeline.K_DST_PORT,
        pipeline.K_BOUND_PORT,
    ]
    assert [k["name"] for k in tables[pipeline.LEG_REWRITE]["keys"]] == [pipeline.K_LEG]
    assert contract["config"]["rtp_clock_hz"] == pipeline.RTP_CLOCK_HZ
    assert contract["config"]["jitter_shift"] == pipeline.JITTER_SHIFT
    # port binding: the parser's phase-0 table, one data field, the unbound key port
    pm = tables[pipeline.PORT_METADATA]
    assert [k["name"] for k in pm["keys"]] == [pipeline.K_PORT_METADATA_PORT]
    assert [d["name"] for d in pm["data"]] == [pipeline.D_UNBOUND]
    assert contract["config"]["unbound_port"] == pipeline.UNBOUND_PORT
    assert pipeline.UNBOUND_PORT >> 9 == 0  # fits the 9-bit key


def test_client_reroute_names_are_the_contracts(contract: dict[str, Any]) -> None:
    from p4relay_switch import names

    tables = {t["name"]: t for t in contract["table"]}
    actions = {a["name"]: a for a in contract["action"]}
    registers = {r["name"] for r in contract["register"]}
    watch = tables[names.REROUTE_WATCH]
    assert [k["name"] for k in watch["keys"]] == [names.K_DST_ADDR]
    assert watch["actions"] == [names.A_REROUTE_BACKUP, names.A_REROUTE_NOTIFY, "NoAction"]
    cls = tables[names.REROUTE_CLASS]
    assert [k["name"] for k in cls["keys"]] == [names.K_RR_CLASS]
    assert cls["actions"] == [names.A_REROUTE_THRESHOLDS, "NoAction"]
    assert [p["name"] for p in actions[names.A_REROUTE_BACKUP]["params"]] == [
        "slot",
        "flow_class",
        "backup_nexthop_id",
        "primary_port",
    ]
    assert [p["name"] for p in actions[names.A_REROUTE_THRESHOLDS]["params"]] == [
        "t_q_ns",
        "m",
    ]
    assert {
        names.REG_REROUTE_ACTIVE,
        names.REG_REROUTE_RUN,
        names.REG_REROUTE_PORT_HOT,
    } <= registers
    assert names.REROUTE_DIGEST in {d["name"] for d in contract["digest"]}
    assert contract["config"]["reroute_slots"] == names.REROUTE_SLOTS
    assert contract["config"]["reroute_notice_ethertype"] == names.REROUTE_NOTICE_ETHERTYPE


def test_client_ired_names_are_the_contracts(contract: dict[str, Any]) -> None:
    from p4relay_switch import names

    tables = {t["name"]: t for t in contract["table"]}
    actions = {a["name"]: a for a in contract["action"]}
    registers = {r["name"] for r in contract["register"]}
    counters = {c["name"]: c for c in contract["counter"]}
    t = tables[names.IRED_PORT]
    assert [k["name"] for k in t["keys"]] == [names.K_EGRESS_PORT]
    assert t["actions"] == [names.A_IRED_SET, "NoAction"]
    assert [p["name"] for p in actions[names.A_IRED_SET]["params"]] == [
        "max_len_queue",
        "n_drop",
        "ewma_n",
        "tail_drop",
        "protect",
    ]
    assert set(names.IRED_REGISTERS) == {r for r in registers if ".ired_" in r}
    # contract v9: iRED's counts are packet Counters by dev_port
    assert set(names.IRED_COUNTERS) == {c for c in counters if ".ired_" in c}
    assert all(counters[c]["unit"] == "PACKETS" for c in names.IRED_COUNTERS)
    assert contract["config"]["ired_ewma_n_max"] == names.IRED_EWMA_N_MAX
    assert contract["config"]["ired_cell_bytes"] == names.IRED_CELL_BYTES


def test_client_int_names_are_the_contracts(contract: dict[str, Any]) -> None:
    from p4relay_switch import names

    tables = {t["name"]: t for t in contract["table"]}
    actions = {a["name"]: a for a in contract["action"]}
    registers = {r["name"] for r in contract["register"]}
    watch = tables[names.INT_WATCH]
    assert [k["name"] for k in watch["keys"]] == [
        names.K_BRIDGED_RELAY,
        names.K_BRIDGED_LEG,
        names.K_SRC_ADDR,
        names.K_DST_ADDR,
        names.K_DST_PORT,
        names.K_PRIORITY,
    ]
    assert all(k["match"] == "Ternary" for k in watch["keys"][:-1])
    assert watch["actions"] == [names.A_INT_WATCH_FLOW, "NoAction"]
    role = tables[names.INT_ROLE]
    assert [k["name"] for k in role["keys"]] == [names.K_NEXTHOP_ID]
    assert role["actions"] == [names.A_INT_TRANSIT, names.A_INT_SINK, "NoAction"]
    for t, a in (
        (names.INT_HOP_CONFIG, names.A_INT_HOP),
        (names.INT_REPORT, names.A_INT_REPORT_ENCAP),
    ):
        assert [k["name"] for k in tables[t]["keys"]] == [names.K_EGRESS_PORT]
        assert tables[t]["actions"] == [a, "NoAction"]
    assert [p["name"] for p in actions[names.A_INT_HOP]["params"]] == [
        "switch_id",
        "onset_cells",
        "clear_cells",
        "onset_ns",
        "clear_ns",
    ]
    assert [p["name"] for p in actions[names.A_INT_REPORT_ENCAP]["params"]] == [
        "src_mac",
        "dst_mac",
        "src_addr",
        "dst_addr",
        "dst_port",
        "switch_id",
    ]
    assert set(names.INT_REGISTERS) == {r for r in registers if ".int_" in r}
    cfg = contract["config"]
    assert cfg["int_dscp"] == names.INT_DSCP
    assert cfg["int_max_hops"] == names.INT_MAX_HOPS
    assert cfg["int_flow_slots"] == names.INT_FLOW_SLOTS
    assert cfg["int_report_interval_ms"] == names.INT_REPORT_INTERVAL_MS
