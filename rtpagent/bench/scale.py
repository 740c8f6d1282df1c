"""rtpagent at scale: its control path while the switch holds many calls.

At each occupancy (calls up in the switch: 1,000, 10,000, 100,000 by default)
the agent holds as many of them as its embedded RTPProxy can (4 media ports a
call: its port range and open-file limit bound it), offloaded through
it; the rest are installed in the same switch by another client of the
switch (calls of other agents sharing the switch: its tables, its idle sweep
and its notifications carry them). The agent's sampler reads every one of its
sessions' counters each second, its reports go to the spool, the reaper
removes what ends. Then, with everything up:

* churn at 100 and 1,000 calls/s: U, L and D of new calls started at that
  rate, through the agent and straight to RTPProxy in alternating blocks
  (bench.py's paced latency): added latency p50/p99 per command, and the
  offload time of those calls (answer → switch ack, the agent's histogram);
* calls/s per agent core: U+L+D with 64 calls in flight, the agent's
  event-loop thread's CPU per call;
* the agent's CPU while idle with its calls up (sampler, spool, timers).

Prints a table (Markdown to $BENCH_TABLE) and draws one plot per figure
against the calls up into docs/benchmarks/44-rtpagent-scale/.

    python rtpagent/bench/scale.py [--occupancy 1000,10000,100000] [--rates 100,1000]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

import bench as b
from p4relay_testsupport import free_port

DOCS = b.ROOT / "docs" / "benchmarks"
STAGE = "44-rtpagent-scale"
AGENT_PORTS = (10000, 65000)
# One RTPProxy holds a call in 4 media sockets: its port range and its open-file
# limit (inherited) bound the calls it holds; room is left for the measured calls.
AGENT_MAX = (
    min(
        (AGENT_PORTS[1] - AGENT_PORTS[0]) // 4,
        (resource.getrlimit(resource.RLIMIT_NOFILE)[0] - 200) // 4,
    )
    - 300
)
AGENT_LEGS = 65536
# The agent's calls carry no media: with the default idle TTL (60 s) all of
# them would go idle in one sweep partway through a step, and the step would
# measure that burst of ends instead of the calls it says are up.
AGENT_IDLE_TTL_MS = 900_000
ADDED_P99_MS = 2.0


@dataclass
class Step:
    calls: int  # up in the switch
    agent_calls: int  # of which through the agent
    agent_offloaded: int = 0  # of those, offloaded when the measuring began
    preload_s: float = 0.0
    idle_cpu: float = 0.0  # agent + RTPProxy, cores, with the calls up and no commands
    loop_us_per_call: float = 0.0
    cps: float = 0.0
    churn: dict[int, tuple[b.Samples, b.Samples]] = field(default_factory=dict)
    # The event-loop thread during the churn: share of the time on a CPU, and
    # runnable but waiting for one (the host's other work ahead of it).
    loop_share: dict[int, tuple[float, float]] = field(default_factory=dict)
    offload: dict[int, tuple[float, float, int] | None] = field(default_factory=dict)


async def preload_agent(port: int, n: int, inflight: int = 64) -> None:
    """n calls through the agent (U + L, left up)."""
    t, p = await b.endpoint(port)
    sem = asyncio.Semaphore(inflight)

    async def one(i: int) -> None:
        async with sem:
            host = f"198.18.{1 + i // 60000}.{10 + i // 250 % 240}"
            bhost = f"198.18.{2 + i // 60000}.{10 + i // 250 % 240}"
            await b.cmd(t, p, f"U up{i} {host} {6000 + 2 * (i % 250)} f{i};1")
            await b.cmd(t, p, f"L up{i} {bhost} {7000 + 2 * (i % 250)} f{i};1 t{i};1")

    await asyncio.gather(*(one(i) for i in range(n)))
    t.close()


async def preload_switch(switch: str, first: int, n: int) -> None:
    """Calls first..first+n in the switch as another client writes them
    (legs and relay addresses the agent does not use)."""
    from p4relay_switch import Endpoint, RelayCall

    def call(i: int) -> RelayCall:
        host = f"198.19.{i // 250 % 250}.{i % 250 + 1}"
        relay = f"127.{1 + i // 2_500_000}.{i // 10000 % 250}.{1 + i // 10000 // 250}"
        return RelayCall.between(
            Endpoint.of(host, 10000),
            Endpoint.of(relay, 20000 + 4 * (i % 10000)),
            Endpoint.of(host, 30000),
            Endpoint.of(relay, 20002 + 4 * (i % 10000)),
            legs=(AGENT_LEGS + 2 * i, AGENT_LEGS + 2 * i + 1),
            ports=(1, 2),
        )

    await b.install_calls(switch, call, first, n)


async def offloaded(metrics_port: int) -> float:
    import urllib.request

    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))  # never a proxy
    text = await asyncio.to_thread(
        lambda: opener.open(f"http://127.0.0.1:{metrics_port}/metrics", timeout=5).read().decode()
    )
    for line in text.splitlines():
        if line.startswith("rtpagent_offloaded_sessions "):
            return float(line.split()[1])
    return 0.0


async def run_step(a: argparse.Namespace, calls: int) -> Step:
    st = Step(calls, min(calls, AGENT_MAX))
    sw_proc, sw = b.start_switch()
    if sw_proc is None or sw is None:
        raise RuntimeError("the software switch did not start (switch/target/release)")
    try:
        await b.routes(sw)
        port = b.free_udp_port_pair()
        with tempfile.TemporaryDirectory() as tmp:
            mport = free_port()
            ports = f"{AGENT_PORTS[0]}-{AGENT_PORTS[1]}"
            agent = b.start_agent(
                port,
                sw,
                f"{tmp}/state.sqlite",
                mport,
                ports,
                ("--legs", str(AGENT_LEGS), "--idle-ttl-ms", str(AGENT_IDLE_TTL_MS)),
            )
            try:
                await b.wait_ready(port)
                t0 = time.monotonic()
                await preload_agent(port, st.agent_calls)
                # Offloading follows the answers: measured once it is done (no
                # change for 3 s) or after 180 s, a lagging agent as it is.
                got, since = -1.0, time.monotonic()
                while time.monotonic() - t0 < 180:
                    now = await offloaded(mport)
                    if now >= st.agent_calls or time.monotonic() - since > 3:
                        break
                    if now != got:
                        got, since = now, time.monotonic()
                    await asyncio.sleep(0.2)
                st.agent_offloaded = int(await offloaded(mport))
                if calls > st.agent_calls:
                    await preload_switch(sw, 0, calls - st.agent_calls)
                st.preload_s = time.monotonic() - t0
                c0, w0 = b.cpu_seconds(agent.pid), time.monotonic()
                await asyncio.sleep(a.idle_secs)
                st.idle_cpu = (b.cpu_seconds(agent.pid) - c0) / (time.monotonic() - w0)
                for rate in a.rates:
                    h0 = b.raw_buckets(mport)
                    (r0, q0), w0 = b.loop_sched(agent.pid), time.monotonic()
                    st.churn[rate] = await b.paced_latency(
                        port, port + 1, rate, a.block_secs, a.blocks
                    )
                    (r1, q1), secs = b.loop_sched(agent.pid), time.monotonic() - w0
                    st.loop_share[rate] = ((r1 - r0) / secs, (q1 - q0) / secs)
                    st.offload[rate] = b.quantiles(h0, b.raw_buckets(mport))
                l0 = b.loop_seconds(agent.pid)
                st.cps = await b.throughput(port, a.tp_calls, 64)
                st.loop_us_per_call = (b.loop_seconds(agent.pid) - l0) / a.tp_calls * 1e6
            finally:
                agent.terminate()
                try:
                    # Its state flushed and RTPProxy stopped: long on a loaded host.
                    agent.wait(60)
                except subprocess.TimeoutExpired:
                    agent.kill()
                    agent.wait()
    finally:
        sw_proc.terminate()
        sw_proc.wait(10)
    return st


def added(st: Step, rate: int, k: str) -> tuple[float, float] | None:
    via, direct = st.churn.get(rate, ({}, {}))
    if not via.get(k) or not direct.get(k):
        return None
    return (
        statistics.median(via[k]) - statistics.median(direct[k]),
        b.pct(via[k], 99) - b.pct(direct[k], 99),
    )


def report(steps: list[Step], a: argparse.Namespace, load: tuple[float, float]) -> tuple[str, bool]:
    lines: list[str] = []
    w = lines.append
    w(
        f"rtpagent (embedded RTPProxy, media ports {AGENT_PORTS[0]}-{AGENT_PORTS[1]}) and the "
        f"software switch on one host, {os.cpu_count()} CPUs shared; host load average "
        f"{load[0]:.2f} at the start, {load[1]:.2f} at the end. Calls up: the agent's own "
        f"(offloaded through it; one RTPProxy here holds at most ~{AGENT_MAX + 300:,d}: 4 sockets a "
        f"call, {resource.getrlimit(resource.RLIMIT_NOFILE)[0]:,d} open files) plus calls another "
        "client installed in the same switch. Churn: new calls' U, L, D at the rate, "
        f"{a.blocks} blocks of {a.block_secs:g} s through the agent alternating with as many "
        "straight to RTPProxy; added = via agent minus direct."
    )
    w("")
    head = "| | " + " | ".join(f"{s.calls:,d} up" for s in steps) + " |"
    rule = "|---|" + "---|" * len(steps)
    w(head)
    w(rule)
    w("| of which the agent's | " + " | ".join(f"{s.agent_calls:,d}" for s in steps) + " |")
    w(
        "| of those offloaded when measuring began | "
        + " | ".join(f"{s.agent_offloaded:,d}" for s in steps)
        + " |"
    )
    w("| setting them up, s | " + " | ".join(f"{s.preload_s:.1f}" for s in steps) + " |")
    w(
        "| agent + RTPProxy CPU with the calls up and no commands, % of a core | "
        + " | ".join(f"{100 * s.idle_cpu:.1f}" for s in steps)
        + " |"
    )
    ok = True
    for rate in a.rates:
        for k in "ULD":
            cells = []
            for s in steps:
                v = added(s, rate, k)
                cells.append(f"{v[0]:.3f} / {v[1]:.3f}" if v else "—")
                if v and rate == max(a.rates) and s is steps[-1]:
                    ok &= v[1] <= ADDED_P99_MS
            w(f"| {k} @ {rate:,} calls/s: added p50 / p99, ms | " + " | ".join(cells) + " |")
        cells = []
        for s in steps:
            via = s.churn.get(rate, ({}, {}))[0]
            cells.append(str(len(via.get("lost", []))))
            ok &= not via.get("lost")
        w(f"| {rate:,} calls/s: commands unanswered in 5 s via agent | " + " | ".join(cells) + " |")
        cells = []
        for s in steps:
            share = s.loop_share.get(rate)
            cells.append(f"{100 * share[0]:.0f} / {100 * share[1]:.0f}" if share else "—")
        w(
            f"| {rate:,} calls/s: agent's event-loop thread on a CPU / waiting for one, % of the time | "
            + " | ".join(cells)
            + " |"
        )
        cells = []
        for s in steps:
            q = s.offload.get(rate)
            cells.append(f"≤ {q[0]:.1f} / ≤ {q[1]:.1f} ({q[2]:,d})" if q else "—")
        w(
            f"| {rate:,} calls/s: offload, answer → switch ack p50 / p99 ms (calls) | "
            + " | ".join(cells)
            + " |"
        )
    w("| calls/s through the agent (U+L+D, 64 in flight) | " + " | ".join(f"{s.cps:,.0f}" for s in steps) + " |")  # fmt: skip
    w(
        "| calls/s per agent core (event-loop thread CPU per call) | "
        + " | ".join(
            f"{1e6 / max(s.loop_us_per_call, 1):,.0f} ({s.loop_us_per_call:,.0f} µs)" for s in steps
        )
        + " |"
    )
    w("")
    last = steps[-1]
    w(
        f"Target: added p99 ≤ {ADDED_P99_MS:g} ms for U, L and D at {max(a.rates):,} calls/s with "
        f"{last.calls:,d} calls up, no command unanswered: {'met' if ok else 'NOT met'}."
    )
    w("")
    if not a.no_plots:
        for f in draw(steps, a):
            w(f"![{f.stem}]({os.path.relpath(f, DOCS)})")
            w("")
    return "\n".join(lines), ok


def draw(steps: list[Step], a: argparse.Namespace) -> list[Path]:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    out = DOCS / STAGE
    out.mkdir(parents=True, exist_ok=True)
    xs = [s.calls for s in steps]
    files = []

    def fig(name: str, title: str, ylabel: str, series: dict[str, list[float | None]]) -> None:
        f, ax = plt.subplots(figsize=(7, 4))
        for label, ys in series.items():
            pts = [(x, y) for x, y in zip(xs, ys, strict=True) if y is not None]
            if pts:
                ax.plot([p[0] for p in pts], [p[1] for p in pts], marker="o", label=label)
        ax.set_xscale("log")
        ax.set_xticks(xs, [f"{n:,}" for n in xs])
        ax.minorticks_off()
        ax.set_xlabel("calls up in the switch")
        ax.set_ylabel(ylabel)
        ax.set_title(title)
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize=8)
        f.tight_layout()
        path = out / name
        f.savefig(path, dpi=100)
        plt.close(f)
        files.append(path)

    for rate in a.rates:
        series: dict[str, list[float | None]] = {}
        for k in "ULD":
            vs = [added(s, rate, k) for s in steps]
            series[f"{k} p50"] = [v[0] if v else None for v in vs]
            series[f"{k} p99"] = [v[1] if v else None for v in vs]
        fig(f"added-latency-{rate}.png", f"added latency at {rate:,} calls/s", "ms", series)
    fig(
        "calls-per-core.png",
        "calls/s per agent core",
        "calls/s",
        {"event-loop thread": [1e6 / max(s.loop_us_per_call, 1) for s in steps]},
    )
    fig(
        "idle-cpu.png",
        "agent + RTPProxy CPU with the calls up, no commands",
        "% of a core",
        {"agent + RTPProxy": [100 * s.idle_cpu for s in steps]},
    )
    return files


async def main_async(a: argparse.Namespace) -> tuple[str, bool]:
    load0 = os.getloadavg()[0]
    steps = []
    for n in a.occupancy:
        print(f"== {n:,d} calls up", flush=True)
        st = await run_step(a, n)
        for rate in a.rates:
            for k in "ULD":
                v = added(st, rate, k)
                if v:
                    print(
                        f"  {k} @ {rate:,}/s added p50 {v[0]:.3f} ms, p99 {v[1]:.3f} ms", flush=True
                    )
        for rate, (run, wait) in st.loop_share.items():
            print(f"  {rate:,}/s: event loop on a CPU {run:.0%}, waiting for one {wait:.0%}", flush=True)  # fmt: skip
        print(f"  calls/s {st.cps:,.0f}, loop {st.loop_us_per_call:,.0f} µs/call, idle CPU {st.idle_cpu:.1%}", flush=True)  # fmt: skip
        steps.append(st)
    return report(steps, a, (load0, os.getloadavg()[0]))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)  # fmt: skip
    ap.add_argument("--occupancy", default="1000,10000,100000", help="calls up, comma separated")
    ap.add_argument("--rates", default="100,1000", help="churn rates, calls/s, comma separated")
    ap.add_argument("--block-secs", type=float, default=1.0)
    ap.add_argument("--blocks", type=int, default=3)
    ap.add_argument("--idle-secs", type=float, default=5.0)
    ap.add_argument("--tp-calls", type=int, default=2000, help="calls of the calls/s run")
    ap.add_argument("--no-plots", action="store_true")
    a = ap.parse_args()
    try:
        a.occupancy = sorted({int(x) for x in a.occupancy.split(",")})
        a.rates = sorted({int(x) for x in a.rates.split(",")})
    except ValueError:
        print("--occupancy and --rates: comma-separated integers", file=sys.stderr)
        return 2
    if not a.occupancy or a.occupancy[0] < 1 or a.occupancy[-1] > 1_000_000:
        print("--occupancy: 1..1,000,000", file=sys.stderr)
        return 2
    if not a.rates or a.rates[0] < 1 or a.rates[-1] > 5000:
        print("--rates: 1..5,000 calls/s", file=sys.stderr)
        return 2
    table, ok = asyncio.run(main_async(a))
    print()
    print(table)
    if out := os.environ.get("BENCH_TABLE"):
        Path(out).write_text(table + "\n")
    return 0 if ok else 3


if __name__ == "__main__":
    sys.exit(main())
