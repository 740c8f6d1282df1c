"""Where the CPU goes during a run: per component and for the machine as a whole.

On a 2-core machine the load generator (SIPp), the captures and the software
switch compete with the relay under test, so an experiment has to say which of
them was busy. A snapshot holds each component's CPU seconds (its process and
all children: `ip netns exec` execs in place, tcpdump is one process) plus the
kernel's /proc/stat counters (softirq is where veth delivery and AF_PACKET
receive run); the difference of two snapshots gives % of one core per
component over the window.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass, field

import psutil

TICK = os.sysconf("SC_CLK_TCK")


def _tree_seconds(pid: int) -> float:
    try:
        p = psutil.Process(pid)
        t = p.cpu_times()
        total = t.user + t.system
        for c in p.children(recursive=True):
            try:
                ct = c.cpu_times()
            except psutil.Error:
                continue
            total += ct.user + ct.system
        return float(total)
    except psutil.Error:
        return float("nan")


def _proc_stat() -> dict[str, float]:
    """Machine-wide CPU seconds by kind (all cores summed)."""
    with open("/proc/stat") as f:
        parts = f.readline().split()
    names = ("user", "nice", "system", "idle", "iowait", "irq", "softirq", "steal")
    return {n: int(v) / TICK for n, v in zip(names, parts[1:], strict=False)}


def _ksoftirqd_seconds() -> float:
    total = 0.0
    for p in psutil.process_iter(["name", "cpu_times"]):
        if str(p.info["name"] or "").startswith("ksoftirqd"):
            t = p.info["cpu_times"]
            if t is not None:
                total += t.user + t.system
    return total


@dataclass
class Snapshot:
    t: float
    components: dict[str, float]
    machine: dict[str, float]
    ksoftirqd: float


def snapshot(pids: dict[str, list[int]]) -> Snapshot:
    """CPU seconds so far of each named component (a component may be several processes)."""
    return Snapshot(
        t=time.monotonic(),
        components={n: sum(_tree_seconds(p) for p in ps) for n, ps in pids.items()},
        machine=_proc_stat(),
        ksoftirqd=_ksoftirqd_seconds(),
    )


@dataclass
class Usage:
    """% of one core over a window (a 2-core machine has 200 %)."""

    components: dict[str, float] = field(default_factory=dict)
    machine_busy: float = float("nan")  # everything but idle/iowait/steal
    # Time in softirq (veth delivery, AF_PACKET receive). Tick accounting (this kernel
    # has no IRQ_TIME_ACCOUNTING) also charges it to whichever task was running, so it
    # is part of the components' figures, not in addition to them.
    softirq: float = float("nan")
    ksoftirqd: float = float("nan")  # softirq work deferred to the ksoftirqd threads
    other: float = float("nan")  # busy minus the components: other users of the machine


def usage(a: Snapshot, b: Snapshot) -> Usage:
    dt = b.t - a.t
    if dt <= 0:
        return Usage()
    comps = {n: 100.0 * (b.components[n] - a.components[n]) / dt for n in a.components}
    d = {k: b.machine[k] - a.machine[k] for k in a.machine}
    busy = sum(v for k, v in d.items() if k not in ("idle", "iowait", "steal"))
    busy_pct = 100.0 * busy / dt
    known = sum(v for v in comps.values() if v == v)  # NaN-safe
    ksoft = 100.0 * (b.ksoftirqd - a.ksoftirqd) / dt
    return Usage(
        components=comps,
        machine_busy=busy_pct,
        softirq=100.0 * d.get("softirq", 0.0) / dt,
        ksoftirqd=ksoft,
        other=max(0.0, busy_pct - known - ksoft),
    )
