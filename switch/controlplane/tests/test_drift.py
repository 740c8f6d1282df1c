"""Drift: the daemon keeps the switch as its configuration says. Entries
deleted, changed or added behind its back (another BfRt client) are set back
within its reconcile period, each counted in
`p4relay_controlplane_drift_repaired_total{table,kind}` and logged with the
table and key; a softswitch restart (empty tables) is repaired the same way."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest
from conftest import ROOT_ONLY, Bed, daemon, restart
from p4relay_switch import Entry, Lpm, Ternary
from p4relay_switch.names import (
    A_FORWARD,
    A_SET_NEXTHOP,
    INT_HOP_CONFIG,
    INT_REPORT,
    INT_ROLE,
    INT_WATCH,
    IPV4_LPM,
    K_DST_ADDR,
    K_NEXTHOP_ID,
    NEXTHOP,
)
from p4relay_testsupport import wait_for

RECONCILE_S = 1.0
# A pass reads every managed table back: on a loaded 2-core runner, allow it
# this long beyond the reconcile period.
SLACK_S = 3.0
DRIFT = "p4relay_controlplane_drift_repaired_total"

CONFIG = f"""
switch = "drift-sw"
grpc_address = "{{address}}"
reconcile_interval_s = {RECONCILE_S}
log_level = "info"

[[ports]]
port = 2
rate_kbps = 10000

[[nexthops]]
id = 1
port = 1
src_mac = "02:00:00:00:00:01"
dst_mac = "02:00:00:00:00:11"
int_role = "sink"
[[nexthops]]
id = 2
port = 2
src_mac = "02:00:00:00:00:01"
dst_mac = "02:00:00:00:00:12"
int_role = "transit"

[[routes]]
prefix = "198.18.1.0/24"
nexthop = 1
[[routes]]
prefix = "198.18.2.0/24"
nexthop = 2
[[routes]]
prefix = "0.0.0.0/0"
nexthop = 2

[int]
switch_id = 7
calls = "all"
[[int.hops]]
port = 2
[int.report]
port = 3
src_mac = "02:00:00:00:00:01"
dst_mac = "02:00:00:00:00:50"
src_addr = "198.19.0.1"
dst_addr = "198.19.0.50"
"""

ROUTE_2 = {K_DST_ADDR: Lpm(0xC6120200, 24)}  # 198.18.2.0/24


SHAPING = "tf1.tm.port.sched_shaping"


async def _rate(b: Bed, port: int) -> object:
    (e,) = await b.probe.read(SHAPING, [{"dev_port": port}])
    return e.data.get("max_rate")


async def _counts(b: Bed) -> dict[str, int]:
    return {
        t: len(await b.probe.read(t))
        for t in (NEXTHOP, IPV4_LPM, INT_ROLE, INT_HOP_CONFIG, INT_REPORT, INT_WATCH)
    }


FULL = {NEXTHOP: 2, IPV4_LPM: 3, INT_ROLE: 2, INT_HOP_CONFIG: 1, INT_REPORT: 1, INT_WATCH: 1}


@ROOT_ONLY
@pytest.mark.timeout(120)
async def test_drift_and_a_switch_restart_are_repaired_and_counted(
    bed: Bed, tmp_path: Path
) -> None:
    conf = tmp_path / "s.toml"
    conf.write_text(CONFIG.format(address=bed.sw.address))
    with daemon(conf, tmp_path / "daemon.log") as d:

        async def full() -> bool:
            return await _counts(bed) == FULL

        async def applied() -> bool:
            # A pass writes the tables before the ports' shaping: wait for both.
            return await full() and await _rate(bed, 2) == 10000

        await wait_for(applied, within=30, interval=0.1, what="the configuration applied")
        # The first pass applies the configuration: nothing is drift yet.
        assert d.sample(DRIFT, table=IPV4_LPM, kind="missing") is None

        # Port 2's shaping changed behind its back: set back, counted.
        await bed.probe.set_port_shaping(2, 5000)

        async def reshaped() -> bool:
            return await _rate(bed, 2) == 10000

        await wait_for(reshaped, within=RECONCILE_S + SLACK_S, interval=0.05, what="shaping")
        await wait_for(
            lambda: d.sample(DRIFT, table=SHAPING, kind="changed") == 1, within=5, what="counted"
        )

        # Behind the daemon's back: a route and the INT watch entry deleted, a next
        # hop changed, a route added.
        (watch,) = await bed.probe.read(INT_WATCH)
        await bed.probe.delete(IPV4_LPM, [Entry(ROUTE_2)])
        await bed.probe.delete(INT_WATCH, [Entry(watch.key)])
        await bed.probe.modify(
            NEXTHOP,
            [Entry({K_NEXTHOP_ID: 1}, A_FORWARD, {"port": 3, "src_mac": 1, "dst_mac": 2})],
        )
        await bed.probe.insert(
            IPV4_LPM, [Entry({K_DST_ADDR: Lpm(0x0A000000, 8)}, A_SET_NEXTHOP, {"nexthop_id": 1})]
        )
        t0 = time.monotonic()

        async def repaired() -> bool:
            got = await bed.probe.read(IPV4_LPM)
            keys = {e.key[K_DST_ADDR] for e in got}
            (nh1,) = await bed.probe.read(NEXTHOP, [{K_NEXTHOP_ID: 1}])
            return (
                keys == {Lpm(0xC6120100, 24), Lpm(0xC6120200, 24), Lpm(0, 0)}
                and len(await bed.probe.read(INT_WATCH)) == 1
                and nh1.data["port"] == 1
            )

        await wait_for(repaired, within=RECONCILE_S + SLACK_S, interval=0.05, what="repair")
        took = time.monotonic() - t0
        assert took <= RECONCILE_S + SLACK_S, took
        (restored,) = await bed.probe.read(INT_WATCH)
        assert restored.key[K_DST_ADDR] == Ternary(0, 0)
        assert restored.key["hdr.bridged.relay"] == Ternary(1, 1)

        async def counted() -> bool:
            return (
                d.sample(DRIFT, table=IPV4_LPM, kind="missing") == 1
                and d.sample(DRIFT, table=IPV4_LPM, kind="extra") == 1
                and d.sample(DRIFT, table=INT_WATCH, kind="missing") == 1
                and d.sample(DRIFT, table=NEXTHOP, kind="changed") == 1
            )

        await wait_for(counted, within=5, interval=0.1, what="drift counted")
        logged = [json.loads(ln) for ln in d.log_lines("drift_repaired")]
        seen = {(e["table"], e["key"], e["kind"]) for e in logged}
        assert (IPV4_LPM, "hdr.ipv4.dst_addr=198.18.2.0/24", "missing") in seen, seen
        assert (IPV4_LPM, "hdr.ipv4.dst_addr=10.0.0.0/8", "extra") in seen, seen
        assert (NEXTHOP, "ig_md.nexthop_id=1", "changed") in seen, seen
        assert any(t == INT_WATCH and k == "missing" for t, _, k in seen), seen

        # The switch restarts: every table empty. The daemon reconnects and
        # sets everything again, each entry counted as drift.
        # (The daemon may be back before the probe looks: the counts below
        # say that every entry was missing.)
        await restart(bed)
        await wait_for(full, within=RECONCILE_S + 10 + SLACK_S, interval=0.1, what="re-applied")

        async def restart_counted() -> bool:
            return (
                d.sample(DRIFT, table=IPV4_LPM, kind="missing") == 1 + 3
                and d.sample(DRIFT, table=INT_WATCH, kind="missing") == 1 + 1
                and d.sample(DRIFT, table=INT_ROLE, kind="missing") == 2
                and d.sample("p4relay_controlplane_switch_connected") == 1
            )

        await wait_for(restart_counted, within=5, interval=0.1, what="restart counted")

        # Then the passes find nothing to repair: what was written reads back the same.
        def drift_total() -> float:
            return sum(
                float(line.rsplit(" ", 1)[1])
                for line in d.metrics().splitlines()
                if line.startswith(DRIFT + "{")
            )

        before = drift_total()
        clean = d.sample("p4relay_controlplane_reconciles_total", result="clean") or 0.0
        await wait_for(
            lambda: (
                (d.sample("p4relay_controlplane_reconciles_total", result="clean") or 0)
                >= clean + 2
            ),
            within=RECONCILE_S * 2 + SLACK_S * 2,
            interval=0.1,
            what="two clean passes",
        )
        assert drift_total() == before
        assert d.proc.poll() is None


@ROOT_ONLY
@pytest.mark.timeout(60)
async def test_once_applies_and_says_what_it_did(bed: Bed, tmp_path: Path) -> None:
    """The one-shot mode (a bootstrap): exit 0 with what it wrote; run again,
    nothing to write; `--diff` names a route deleted behind its back and writes
    nothing; a port the switch does not have is exit 1, named."""
    import asyncio
    import subprocess
    import sys

    def once(text: str, mode: str = "--once") -> subprocess.CompletedProcess[str]:
        conf = tmp_path / "once.toml"
        conf.write_text(text)
        cmd = [sys.executable, "-m", "p4relay_controlplane.cli", "--config", str(conf), mode]
        return subprocess.run(cmd, capture_output=True, text=True, timeout=60, check=False)

    text = CONFIG.format(address=bed.sw.address)
    first = await asyncio.to_thread(once, text)
    assert first.returncode == 0, first.stderr
    assert f"{IPV4_LPM}: 3 missing" in first.stdout and "0 refused" in first.stdout
    assert await _counts(bed) == FULL
    again = await asyncio.to_thread(once, text)
    assert again.returncode == 0 and "0 written, 0 refused" in again.stdout, again.stdout
    # --diff reads and compares, writing nothing
    await bed.probe.delete(IPV4_LPM, [Entry(ROUTE_2)])
    diff = await asyncio.to_thread(once, text, "--diff")
    assert diff.returncode == 1, diff.stderr
    assert f"missing  {IPV4_LPM}: hdr.ipv4.dst_addr=198.18.2.0/24" in diff.stdout, diff.stdout
    assert "1 difference" in diff.stderr
    assert len(await bed.probe.read(IPV4_LPM)) == 2
    await asyncio.to_thread(once, text)
    clean = await asyncio.to_thread(once, text, "--diff")
    assert clean.returncode == 0 and clean.stdout == "", clean.stdout
    bad = await asyncio.to_thread(
        once, text.replace("[[int.hops]]\nport = 2", "[[int.hops]]\nport = 9")
    )
    assert bad.returncode == 1
    assert f"REFUSED {INT_HOP_CONFIG}: eg_intr_md.egress_port=9: port 9 is not a port" in bad.stdout


@ROOT_ONLY
@pytest.mark.timeout(60)
async def test_undelivered_events_are_retried_at_each_pass(bed: Bed) -> None:
    """Reroute events the server did not take wait in the ingest backlog; the
    daemon re-sends them at every reconcile pass, not only at the next event."""
    import asyncio

    from p4relay_controlplane.config import Settings
    from p4relay_controlplane.daemon import Daemon

    flushed: list[float] = []

    async def flush() -> None:
        flushed.append(time.monotonic())

    cfg = Settings.model_validate(
        {"grpc_address": bed.sw.address, "metrics_listen": "", "reconcile_interval_s": 0.2}
    )
    d = Daemon(cfg, flush=flush)
    stop = asyncio.Event()
    task = asyncio.create_task(d.run(stop))
    try:
        await wait_for(lambda: len(flushed) >= 3, within=10, what="three retries")
    finally:
        stop.set()
        await task
