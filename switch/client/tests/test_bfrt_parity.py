"""bf-rt.json parity: the software switch serves, for the program's tables,
exactly what bf_switchd serves for the compiled standard profile (ids, names,
types, widths, annotations, action scopes, attributes and, started with the
profile's sizes, sizes), and for the fixed tables bf-drivers' Tofino 1
definitions.

The compiler's side is the fresh compile of the `p4` stage
(build/p4relay-standard/bf-rt.json) when there is one, else the committed
switch/p4/bfrt/standard.bf-rt.json (which the contract tests keep equal to a
fresh compile). Objects only the target has (snapshot, dynamic-hash and debug
tables: no client of ours addresses them, and the software switch has no such
hardware) are the only ones set aside.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Any

import pytest
from contract_check import has_ipv6, without_ipv6
from p4relay_testsupport import softswitch_binary

ROOT = Path(__file__).resolve().parents[3]
BUILD = Path(os.environ.get("P4RELAY_P4_OUT", ROOT / "build"))
COMMITTED = ROOT / "switch" / "p4" / "bfrt" / "standard.bf-rt.json"
CONTRACT_CONFIG = {"relay_entries_p4": 131072, "legs_p4": 65536}
# The IPv6 session tables' standard-profile sizes (contract size_p4).
CONTRACT_SIZES = {"pipe.Ingress.relay6": 16384, "pipe.Ingress.leg_rewrite6": 8192}
TARGET_ONLY_TYPES = {
    "SnapshotCfg",
    "SnapshotTrigger",
    "SnapshotData",
    "SnapshotLiveness",
    "TblDbgCnt",
    "DynHashAlgorithm",
    "DynHashConfigure",
    "DynHashCompute",
}


def compiler_schema() -> dict[str, Any]:
    fresh = BUILD / "p4relay-standard" / "bf-rt.json"
    return dict(json.loads((fresh if fresh.is_file() else COMMITTED).read_text()))


def softswitch_dump(
    flag: str,
    relay_entries: int = CONTRACT_CONFIG["relay_entries_p4"],
    legs: int = CONTRACT_CONFIG["legs_p4"],
    *extra: str,
) -> dict[str, Any]:
    """The software switch's schema, started with these sizes (by default the
    standard profile's) and flags."""
    out = subprocess.run(
        [
            str(softswitch_binary()),
            flag,
            "--relay-entries",
            str(relay_entries),
            "--legs",
            str(legs),
            "--relay6-entries",
            str(CONTRACT_SIZES["pipe.Ingress.relay6"]),
            "--leg6-entries",
            str(CONTRACT_SIZES["pipe.Ingress.leg_rewrite6"]),
            *extra,
        ],
        check=True,
        capture_output=True,
        text=True,
        timeout=30,
    ).stdout
    return dict(json.loads(out))


@pytest.fixture(scope="module")
def compiler() -> dict[str, Any]:
    return compiler_schema()


@pytest.fixture(scope="module")
def soft() -> dict[str, Any]:
    return softswitch_dump("--dump-bfrt-json")


def table_differences(p4: dict[str, Any], soft: dict[str, Any]) -> list[str]:
    """Every table (and learn filter) whose bf-rt.json object differs, with
    the first differing member; tables only one side has."""

    def program(b: dict[str, Any]) -> dict[str, dict[str, Any]]:
        return {t["name"]: t for t in b["tables"] if t["table_type"] not in TARGET_ONLY_TYPES}

    want, got = program(p4), program(soft)
    errs = [f"{n}: only in the compiler's" for n in sorted(set(want) - set(got))]
    errs += [f"{n}: only in the softswitch's" for n in sorted(set(got) - set(want))]
    for n in sorted(set(want) & set(got)):
        for member in sorted(set(want[n]) | set(got[n])):
            if want[n].get(member) != got[n].get(member):
                errs.append(
                    f"{n} {member}: compiler {json.dumps(want[n].get(member))[:300]}"
                    f" != softswitch {json.dumps(got[n].get(member))[:300]}"
                )
    wl = {d["name"]: d for d in p4.get("learn_filters", [])}
    gl = {d["name"]: d for d in soft.get("learn_filters", [])}
    if wl != gl:
        errs.append(f"learn_filters differ: {sorted(wl)} vs {sorted(gl)}")
    return errs


def test_program_tables_are_the_compilers(compiler: dict[str, Any], soft: dict[str, Any]) -> None:
    # the software switch always serves the IPv6 tables; a Tofino 1 build has
    # them only with -DP4RELAY_IPV6 (contract_check.without_ipv6)
    errs = table_differences(compiler, soft if has_ipv6(compiler) else without_ipv6(soft))
    assert not errs, "softswitch bf-rt.json differs from bf-p4c's:\n" + "\n".join(errs)


def test_the_comparison_sees_a_changed_scope_size_or_annotation(
    compiler: dict[str, Any],
) -> None:
    """The comparison itself: one changed member of each kind shows."""
    broken = json.loads(json.dumps(compiler))
    by_name = {t["name"]: t for t in broken["tables"]}
    by_name["pipe.Ingress.relay"]["action_specs"][1]["action_scope"] = "TableAndDefault"
    by_name["pipe.Egress.ired_port"]["size"] = 64
    f1 = by_name["pipe.Egress.rtp_packets"]["data"][0]
    f1["singleton"]["annotations"] = []
    assert [e.split(":")[0] for e in table_differences(compiler, broken)] == [
        "pipe.Egress.ired_port size",
        "pipe.Egress.rtp_packets data",
        "pipe.Ingress.relay action_specs",
    ]


# The objects whose sizes are a build's capacity: a call has 4 relay and 4
# guard entries and 2 legs (leg_rewrite, guard_drops, the quality registers);
# an IPv6 call 4 relay6 and 4 relay_guard6 entries and 2 leg_rewrite6 legs
# (a build with IPv6: the contract's sizes, as the software switch is started).
# A build that splits the quality registers (large-t2) names each upper half
# "<name>_hi"; the software switch does so when started with
# --quality-half-bits (the lower half's size is 2^bits).
CAPACITY = {
    "pipe.Ingress.relay6",
    "pipe.Ingress.relay_guard6",
    "pipe.Ingress.leg_rewrite6",
    "pipe.Ingress.relay",
    "pipe.Ingress.relay_guard",
    "pipe.Ingress.leg_rewrite",
    "pipe.Ingress.guard_drops",
    *(
        f"pipe.Egress.rtp_{r}"
        for r in (
            "packets",
            "max_seq",
            "transit",
            "jitter",
            "last_seen",
            "payload_type",
        )
    ),
}
# The loss counts in either target's form (contract v10): Tofino 1's one
# register of two fields, which the software switch has, or Tofino 2's two.
LOSS = {"pipe.Egress.rtp_loss", "pipe.Egress.rtp_lost", "pipe.Egress.rtp_reordered"}
PROFILES = subprocess.run(
    [str(ROOT / "switch" / "p4" / "build.sh"), "--list-all"],
    check=True,
    capture_output=True,
    text=True,
    timeout=30,
).stdout.split()


def capacity(bfrt: dict[str, Any], names: set[str]) -> dict[str, tuple[int, str]]:
    """Cells per capacity object (and per upper half of a split one), with
    its data fields."""
    return {
        str(t["name"]): (int(t["size"]), json.dumps(t["data"], sort_keys=True))
        for t in bfrt["tables"]
        if t["name"] in names or str(t["name"]).removesuffix("_hi") in names
    }


@pytest.mark.parametrize("profile", PROFILES)
def test_softswitch_started_with_a_builds_sizes_has_its_capacity(profile: str) -> None:
    """Every profile's capacity is what the software switch models when started
    with that build's relay entries and legs (and, where the build splits the
    quality registers, its split): the same cells in every relay, leg and
    quality object the build has, under the same names and fields."""
    fresh = BUILD / f"p4relay-{profile}" / "bf-rt.json"
    if not fresh.is_file():
        pytest.skip(
            f"{profile} is not compiled here (build.sh {profile}; the p4 stage compiles --list)"
        )
    want = capacity(json.loads(fresh.read_text()), CAPACITY | LOSS)
    relay, legs = want["pipe.Ingress.relay"][0], want["pipe.Ingress.leg_rewrite"][0]
    split: tuple[str, ...] = ()
    if "pipe.Egress.rtp_packets_hi" in want:
        lower = want["pipe.Egress.rtp_packets"][0]
        split = ("--quality-half-bits", str(lower.bit_length() - 1))
    loss = LOSS if any(loss_of(n) for n in want) else set()
    got = capacity(softswitch_dump("--dump-bfrt-json", relay, legs, *split), set(want) | loss)
    assert without_loss(got) == without_loss(want)
    # the same loss cells per half, in the build's form or Tofino 1's
    assert loss_cells(got) == loss_cells(want)
    if "pipe.Egress.rtp_loss" in want:
        assert got == want


def loss_of(name: str) -> bool:
    return name.removesuffix("_hi") in LOSS


def without_loss(cap: dict[str, tuple[int, str]]) -> dict[str, tuple[int, str]]:
    return {n: v for n, v in cap.items() if not loss_of(n)}


def loss_cells(cap: dict[str, tuple[int, str]]) -> set[tuple[str, int]]:
    """The loss registers' cells per half (`_hi`: the upper), whichever form."""
    return {
        ("_hi" if n.endswith("_hi") else "", size) for n, (size, _) in cap.items() if loss_of(n)
    }


# bf-drivers' Tofino 1 fixed tables (bf_rt_port_tf1.json, bf_rt_tm_tf1.json,
# bf_rt_dev_tf1.json in P4 Studio's bf-drivers): table id, type, size; per
# key and data field the id, type and (data) read_only. The software switch
# serves a subset of each table's fields, each as defined there.
TF1_FIXED: dict[
    str, tuple[int, str, int, dict[str, tuple[int, str]], dict[str, tuple[int, str, bool]]]
] = {
    "$PORT": (
        4278255617,
        "PortConfigure",
        256,
        {"$DEV_PORT": (1, "uint32")},
        {
            "$SPEED": (1, "string", False),
            "$PORT_ENABLE": (4, "bool", False),
            "$PORT_UP": (25, "bool", True),
            "$PORT_NAME": (26, "string", True),
        },
    ),
    "$PORT_STAT": (
        4278255618,
        "PortStat",
        256,
        {"$DEV_PORT": (1, "uint32")},
        {
            "$FramesReceivedOK": (1, "uint64", False),
            "$OctetsReceived": (6, "uint64", False),
            "$FramesDroppedBufferFull": (20, "uint64", False),
            "$FramesTransmittedOK": (33, "uint64", False),
            "$OctetsTransmittedTotal": (37, "uint64", False),
        },
    ),
    "tf1.tm.port.sched_shaping": (
        4278517783,
        "TmPortSchedShaping",
        288,
        {"dev_port": (1, "uint32")},
        {
            "unit": (1, "string", False),
            "provisioning": (2, "string", False),
            "max_rate": (3, "uint32", False),
            "max_burst_size": (4, "uint32", False),
        },
    ),
    "tf1.tm.counter.queue": (
        4278517827,
        "TmCounterQueue",
        576,
        {"pg_id": (1, "uint8"), "pg_queue": (2, "uint8")},
        {
            "drop_count_packets": (1, "uint64", False),
            "usage_cells": (2, "uint64", True),
            "watermark_cells": (3, "uint64", False),
        },
    ),
    "tf1.dev.device_configuration": (
        4278583297,
        "DevConfigure",
        1,
        {},
        {
            "sku": (1, "string", True),
            "num_pipes": (2, "uint32", True),
            "num_stages": (3, "uint32", True),
            "num_max_ports": (4, "uint32", True),
            "num_front_ports": (5, "uint32", True),
            "eth_cpu_port_list": (7, "uint32", True),
            "internal_port_list": (8, "uint32", True),
            "external_port_list": (9, "uint32", True),
            "recirc_port_list": (10, "uint32", True),
            "intr_based_link_monitoring": (11, "bool", True),
        },
    ),
}


def fixed_differences(fixed: dict[str, Any]) -> list[str]:
    errs: list[str] = []
    got = {t["name"]: t for t in fixed["tables"]}
    for name, (tid, ttype, size, keys, data) in TF1_FIXED.items():
        t = got.get(name)
        if t is None:
            errs.append(f"{name}: missing")
            continue
        if (t["id"], t["table_type"], t["size"]) != (tid, ttype, size):
            errs.append(f"{name}: {(t['id'], t['table_type'], t['size'])} != {(tid, ttype, size)}")
        have_keys = {k["name"]: (k["id"], k["type"]["type"]) for k in t["key"]}
        if have_keys != keys:
            errs.append(f"{name} keys: {have_keys} != {keys}")
        for d in t["data"]:
            s = d["singleton"]
            want = data.get(s["name"])
            have = (s["id"], s["type"]["type"], d["read_only"])
            if want != have:
                errs.append(f"{name} {s['name']}: {have} != bf-drivers {want}")
    errs += [f"{n}: not a bf-drivers tf1 table here" for n in sorted(set(got) - set(TF1_FIXED))]
    return errs


def test_fixed_tables_are_bf_drivers_tf1() -> None:
    errs = fixed_differences(softswitch_dump("--dump-fixed-bfrt-json"))
    assert not errs, "fixed tables differ from bf-drivers' tf1 definitions:\n" + "\n".join(errs)
