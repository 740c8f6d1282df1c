"""The one-writer check of `make lint` (scripts/check_table_owners.py): it
finds every way production code could write the control plane's tables, and
leaves reads and the other tables alone."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
CHECK = ROOT / "scripts" / "check_table_owners.py"

WRITES = """
from p4relay_switch import Pipeline, int_telemetry
from p4relay_switch.ired import set_ired
from p4relay_switch.names import IPV4_LPM, INT_WATCH

T_NEXTHOP = "pipe.Ingress.nexthop"


async def f(sw, p, e, s):
    await sw.insert_or_modify("pipe.Ingress.ipv4_lpm", [e])
    await sw.delete(IPV4_LPM, [e])
    await sw.insert(T_NEXTHOP, [e])
    await set_ired(sw, 1, s)
    await int_telemetry.set_hop(sw, 2, s)
    await p.add_routes([("10.0.0.0/8", 1)])
    await sw.set_port_shaping(3, 1000)
    for table, rows in {INT_WATCH: [e]}.items():
        await sw.modify(table, rows)


def bfshell(program):
    return (program, "pipe", "Ingress", "nexthop", "add_with_forward")
"""

READS = """
from p4relay_switch.names import IPV4_LPM, IRED_PORT, RELAY


async def f(sw, p, e, batch):
    await sw.read(IPV4_LPM)
    await sw.read("tf1.tm.port.sched_shaping", [{"dev_port": 1}])
    await sw.read(IRED_PORT)
    await sw.insert(RELAY, [e])
    await p.write(batch)
"""


def _check(tmp_path: Path, text: str) -> subprocess.CompletedProcess[str]:
    f = tmp_path / "mod.py"
    f.write_text(text)
    return subprocess.run(
        [sys.executable, str(CHECK), str(f)], capture_output=True, text=True, timeout=30
    )


def test_every_kind_of_write_is_found(tmp_path: Path) -> None:
    r = _check(tmp_path, WRITES)
    assert r.returncode == 1
    found = r.stderr
    for what in (
        ":10: insert_or_modify() on pipe.Ingress.ipv4_lpm",
        ":11: delete() on IPV4_LPM",
        ":12: insert() on pipe.Ingress.nexthop",
        ":13: calls set_ired()",
        ":14: calls set_hop()",
        ":15: calls add_routes()",
        ":16: calls set_port_shaping()",
        ":17: names INT_WATCH in a module that writes",
        ":22: bfrt_python write into",
    ):
        assert what in found, (what, found)
    assert "only the switch control plane" in found


def test_reads_and_rtpagents_tables_pass(tmp_path: Path) -> None:
    r = _check(tmp_path, READS)
    assert r.returncode == 0, r.stderr


def test_the_product_has_one_writer() -> None:
    r = subprocess.run(
        [sys.executable, str(CHECK)], capture_output=True, text=True, timeout=60, cwd=ROOT
    )
    assert r.returncode == 0, r.stderr
