"""The paper's relay experiment (Kfoury et al.): server-based relay against switch-based relay.

For each mode (server: rtpagent installs no entries and RTPProxy relays every
packet; switch: rtpagent offloads each call to the switch) and each
concurrency level, the stack runs N calls of G.711 both ways; captures at the
switch's UAC- and UAS-facing ports give per-packet delay across the relay
path, its variation, loss and MOS (p4relay_scenarios.capture), and the relay
server's CPU comes from RTPProxy's process counters over the same window.
Results: a table (markdown, CSV, JSON) and PNG plots, with the machine and the
exact command recorded.
"""

from __future__ import annotations

import json
import os
import platform
import shlex
import signal
import subprocess
import sys
import time
from dataclasses import asdict, dataclass
from pathlib import Path

import httpx
import psutil
from rich.console import Console
from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from p4relay_scenarios import capture, cpuacct
from p4relay_scenarios.load import Profile, SippStats, run_uac
from p4relay_scenarios.stack import (
    RELAY_PORTS,
    ROOT,
    SIP_SERVERS,
    SWITCH_METRICS,
    SipServer,
    Stack,
    StackConfig,
    sip_server_version,
)

console = Console(width=None if sys.stdout.isatty() else 160)  # logs keep whole tables


@dataclass
class Row:
    mode: str  # "server" | "switch"
    calls: int  # concurrency level
    calls_ok: int
    calls_failed: int
    streams: int
    packets_in: int
    packets_out: int
    loss_pct: float
    delay_ms_median: float
    delay_ms_p99: float
    variation_ms_median: float
    variation_ms_p99: float
    mos_median: float | None
    mos_min: float | None
    relay_cpu_pct: float  # RTPProxy process, % of one core, over the window
    window_s: float
    loadavg_1m: float  # the machine's load at the level's end (shared machine: context)
    # Where the rest of the machine's CPU went over the window, % of one core (2 cores: 200):
    uac_cpu_pct: float  # SIPp UAC (load generator: calls + caller RTP)
    uas_cpu_pct: float  # SIPp UAS (load generator: callee RTP)
    switch_cpu_pct: float  # softswitch
    capture_cpu_pct: float  # the two tcpdumps at the switch's ports
    signalling_cpu_pct: float  # SIP server + rtpagent (+ Kamailio's timeout listener)
    ksoftirqd_pct: float  # kernel packet work deferred to ksoftirqd
    softirq_pct: float  # all softirq time (already inside the figures above)
    other_cpu_pct: float  # busy time of everything else on the shared machine
    machine_busy_pct: float
    # Packets the softswitch itself dropped over the window (all ports): its RX rings
    # overflowing while its threads wait for a CPU, and its egress queues tail-dropping.
    switch_rx_drops: int
    switch_queue_drops: int
    # The host's 1-minute load average sampled each second over the window (mean, max):
    # what the shared machine carried while the level was measured.
    load_1m_mean: float = float("nan")
    load_1m_max: float = float("nan")


def recorded_command(program: str, argv: list[str]) -> str:
    """The command line a results file names, without --database-url's value
    (it names a local database and may carry a password)."""
    shown: list[str] = []
    skip = False
    for arg in argv:
        if skip:
            skip = False
            continue
        if arg == "--database-url":
            skip = True
            continue
        if arg.startswith("--database-url="):
            continue
        shown.append(arg)
    return shlex.join([*program.split(), *shown])


def machine() -> dict[str, str | int]:
    model = ""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    try:
        commit = subprocess.run(
            ["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"],
            capture_output=True,
            text=True,
            check=False,
        ).stdout.strip()
    except OSError:
        commit = ""
    return {
        "cpu": model,
        "cores": os.cpu_count() or 0,
        "memory_gib": round(psutil.virtual_memory().total / 2**30, 1),
        "kernel": platform.release(),
        "python": platform.python_version(),
        "commit": commit,
        "date_utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    }


COMPONENTS = {  # experiment component -> Supervisor process names
    "relay": ["rtpproxy"],
    "uas": ["sipp-uas"],
    "switch": ["softswitch"],
    "capture": ["cap-in", "cap-out"],
    "signalling": ["opensips", "kamailio", "rtpagent", "timeout-listener"],
}


QUANTILES = 201  # points of each level's delay distribution kept for the CDF plot


# Deeper softswitch buffers than its defaults (RX ring 4096 frames per worker and port,
# egress queue 1024 packets): a hardware switch never stalls, but the software one
# shares 2 cores with SIPp and RTPProxy and has to ride out the stalls; same in both modes.
SWITCH_ARGS = ["--rx-ring-frames", "8192", "--queue-depth", "2048"]

DROP_COUNTERS = ("p4relay_port_rx_ring_drops_total", "p4relay_port_queue_drops_total")


def switch_drops(metrics: str = SWITCH_METRICS) -> tuple[int, int]:
    """A softswitch's RX-ring and queue drops so far, summed over ports (-1: unknown)."""
    try:
        text = httpx.get(f"http://{metrics}/metrics", timeout=2.0).text
    except httpx.HTTPError:
        return (-1, -1)
    sums = dict.fromkeys(DROP_COUNTERS, 0.0)
    for line in text.splitlines():
        name = line.split("{", 1)[0].split(" ", 1)[0]
        if name in sums:
            sums[name] += float(line.rsplit(" ", 1)[1])
    return (int(sums[DROP_COUNTERS[0]]), int(sums[DROP_COUNTERS[1]]))


def run_level(
    stack: Stack, mode: str, calls: int, hold_s: float, rate: float, out_dir: Path
) -> tuple[Row, list[float]]:
    profile = Profile(f"{mode}-{calls}", rate, calls, hold_s, calls)
    ramp_s = calls / rate
    level_dir = out_dir / f"{mode}-{calls}"
    caps = capture.start_captures(stack.sup, level_dir, RELAY_PORTS)
    pids = {
        comp: [stack.sup.procs[n].popen.pid for n in names if n in stack.sup.procs]
        for comp, names in COMPONENTS.items()
    }
    t0 = time.time_ns()
    # Measurement window: all calls up (ramp + 2 s for answers) to 2 s before the first BYE.
    win = (t0 + int((ramp_s + 2.0) * 1e9), t0 + int((hold_s - 2.0) * 1e9))
    if win[1] - win[0] < 5e9:
        raise ValueError(f"hold {hold_s}s too short for {calls} calls at {rate}/s: no window")
    snaps: dict[str, cpuacct.Snapshot] = {}
    drops: dict[str, tuple[int, int]] = {}
    loads: list[float] = []

    def spawned(pid: int) -> None:
        pids["uac"] = [pid]

    def tick(st: SippStats) -> None:
        now = time.time_ns()
        if "a" not in snaps and now >= win[0]:
            snaps["a"] = cpuacct.snapshot(pids)
            drops["a"] = switch_drops()
        if win[0] <= now <= win[1]:
            loads.append(os.getloadavg()[0])
        if "b" not in snaps and now >= win[1]:
            snaps["b"] = cpuacct.snapshot(pids)
            drops["b"] = switch_drops()

    result = run_uac(
        profile, stack.media_dir, level_dir, on_tick=tick, on_spawn=spawned, grace_s=60
    )
    capture.stop_captures(stack.sup, caps)
    ingress = capture.read_rtp(caps[0].path)
    egress = capture.read_rtp(caps[1].path)
    m = capture.relay_path_metrics(ingress, egress, window_ns=win)
    use = (
        cpuacct.usage(snaps["a"], snaps["b"]) if "a" in snaps and "b" in snaps else cpuacct.Usage()
    )
    nan = float("nan")
    da, db = drops.get("a", (-1, -1)), drops.get("b", (-1, -1))
    sw_drops = [y - x if x >= 0 and y >= 0 else -1 for x, y in zip(da, db, strict=True)]
    # Keep the delay distribution (quantiles) for the CDF plot; drop the bulky captures.
    import numpy as np

    cdf = (
        np.quantile(m.delays_ms, np.linspace(0, 1, QUANTILES)).round(4).tolist()
        if len(m.delays_ms)
        else []
    )
    for c in caps:
        c.path.unlink(missing_ok=True)
    row = Row(
        mode=mode,
        calls=calls,
        calls_ok=result.stats.successful,
        calls_failed=result.stats.failed,
        streams=m.streams,
        packets_in=m.packets_in,
        packets_out=m.packets_out,
        loss_pct=m.loss_pct,
        delay_ms_median=m.delay_ms_median,
        delay_ms_p99=m.delay_ms_p99,
        variation_ms_median=m.variation_ms_median,
        variation_ms_p99=m.variation_ms_p99,
        mos_median=m.mos_median,
        mos_min=m.mos_min,
        relay_cpu_pct=use.components.get("relay", nan),
        window_s=(win[1] - win[0]) / 1e9,
        loadavg_1m=os.getloadavg()[0],
        uac_cpu_pct=use.components.get("uac", nan),
        uas_cpu_pct=use.components.get("uas", nan),
        switch_cpu_pct=use.components.get("switch", nan),
        capture_cpu_pct=use.components.get("capture", nan),
        signalling_cpu_pct=use.components.get("signalling", nan),
        ksoftirqd_pct=use.ksoftirqd,
        softirq_pct=use.softirq,
        other_cpu_pct=use.other,
        machine_busy_pct=use.machine_busy,
        switch_rx_drops=sw_drops[0],
        switch_queue_drops=sw_drops[1],
        load_1m_mean=sum(loads) / len(loads) if loads else nan,
        load_1m_max=max(loads) if loads else nan,
    )
    return row, cdf


def knee(rows: list[Row], mode: str = "server") -> int | None:
    """Lowest level where the mode degrades: loss > 1 %, median delay > 20 ms or MOS < 4.0.

    (p99 figures are not used: on a shared 2-core machine any level has
    scheduling outliers of tens of ms, in both modes.)
    """
    for r in sorted((r for r in rows if r.mode == mode), key=lambda r: r.calls):
        if (
            r.loss_pct > 1.0
            or r.delay_ms_median > 20.0
            or (r.mos_median is not None and r.mos_median < 4.0)
        ):
            return r.calls
    return None


def table(rows: list[Row]) -> Table:
    t = Table(title="relay experiment: server-based vs switch-based relay")
    for col in (
        "mode",
        "calls",
        "ok/failed",
        "delay ms p50",
        "p99",
        "variation ms p50",
        "p99",
        "loss %",
        "MOS p50",
        "relay CPU %",
    ):
        t.add_column(col, justify="right")
    for r in rows:
        t.add_row(
            r.mode,
            str(r.calls),
            f"{r.calls_ok}/{r.calls_failed}",
            f"{r.delay_ms_median:.3f}",
            f"{r.delay_ms_p99:.2f}",
            f"{r.variation_ms_median:.3f}",
            f"{r.variation_ms_p99:.2f}",
            f"{r.loss_pct:.2f}",
            f"{r.mos_median:.2f}" if r.mos_median is not None else "-",
            f"{r.relay_cpu_pct:.1f}",
        )
    return t


def markdown(rows: list[Row], meta: dict[str, object]) -> str:
    lines = ["# Relay experiment: server-based vs switch-based relay", ""]
    parts = meta.get("parts")
    if isinstance(parts, list) and parts:
        lines += [
            "Measured in parts (`--merge`), each part's levels with its own command "
            "(each part's commit and time: `meta.parts` in results.json):",
            "",
        ]
        for part in parts:
            if isinstance(part, dict):
                lines.append(f"- `{part.get('command')}`: {_machine(part.get('machine'))}")
        lines.append("")
    else:
        lines += [
            f"Command: `{meta['command']}`",
            "",
            "Machine: " + _machine(meta.get("machine")),
            "",
            "The run's commit and time: `meta.machine` in results.json.",
            "",
        ]
    lines += [
        f"SIP server: {meta.get('sip_server') or 'not recorded'} (its rtpproxy module talks to "
        "rtpagent in both modes; server-based relay: rtpagent offloads nothing).",
        "",
        f"Calls ramp at {meta['rate']} calls/s and hold {meta['hold_s']} s; each call is one G.711 "
        "A-law stream per direction at 50 packets/s. Metrics are over the window when every call "
        "of a level is up, from captures "
        + (
            "at the UAC host's interface (as sent) and the UAS host's interface (as received), "
            if meta.get("capture") == "hosts"
            else "at the switch's UAC port (in) and UAS port (out), "
        )
        + "caller->callee packets matched by RTP SSRC and sequence number.",
        "",
        "| mode | calls | ok/failed | delay ms p50 | delay ms p99 | variation ms p50 | "
        "variation ms p99 | loss % | MOS p50 | MOS min | relay CPU % | host load 1m mean/max |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for r in rows:
        lines.append(
            f"| {r.mode} | {r.calls} | {r.calls_ok}/{r.calls_failed} | {r.delay_ms_median:.3f} | "
            f"{r.delay_ms_p99:.2f} | {r.variation_ms_median:.3f} | {r.variation_ms_p99:.2f} | "
            f"{r.loss_pct:.2f} | {_f(r.mos_median)} | {_f(r.mos_min)} | {r.relay_cpu_pct:.1f} | "
            f"{_load(r)} |"
        )
    lines += [
        "",
        "Host load: the machine's 1-minute load average (`/proc/loadavg`) sampled each second "
        "over the level's window. The machine is shared; every figure here was measured under "
        "that load, and the `other` column below is the CPU the rest of the machine took.",
    ]
    lines += [
        "",
        "Where the CPU went over the same window, % of one core (the machine has 2 cores: "
        "200 %). UAC/UAS are the load generator (SIPp), capture the two tcpdumps, "
        "SIP+agent the SIP server and rtpagent (with Kamailio also its timeout listener); "
        "other is everything else that ran on the machine.",
        "",
        "| mode | calls | UAC | UAS | RTPProxy | softswitch | capture | SIP+agent | ksoftirqd "
        "| other | machine busy | of which softirq | softswitch drops: RX ring | queues |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for r in rows:
        lines.append(
            f"| {r.mode} | {r.calls} | {r.uac_cpu_pct:.0f} | {r.uas_cpu_pct:.0f} | "
            f"{r.relay_cpu_pct:.0f} | {r.switch_cpu_pct:.0f} | {r.capture_cpu_pct:.0f} | "
            f"{r.signalling_cpu_pct:.0f} | {r.ksoftirqd_pct:.0f} | {r.other_cpu_pct:.0f} | "
            f"{r.machine_busy_pct:.0f} | {r.softirq_pct:.0f} | {r.switch_rx_drops} | "
            f"{r.switch_queue_drops} |"
        )
    k = meta.get("knee_server")
    lines += [
        "",
        f"Knee of server-based relay on this machine: {k if k else 'not reached'} concurrent calls "
        "(first level with loss > 1 %, median delay > 20 ms or median MOS < 4.0).",
        "",
        "Plots: `delay.png`, `variation.png`, `loss.png`, `mos.png`, `cpu.png`, `delay_cdf.png`, "
        "`cpu_breakdown.png` (where the machine's CPU went).",
    ]
    return "\n".join(lines) + "\n"


def cpu_line(r: Row) -> str:
    return (
        f"UAC {r.uac_cpu_pct:.0f}, UAS {r.uas_cpu_pct:.0f}, RTPProxy {r.relay_cpu_pct:.0f}, "
        f"softswitch {r.switch_cpu_pct:.0f}, capture {r.capture_cpu_pct:.0f}, "
        f"SIP+agent {r.signalling_cpu_pct:.0f}, ksoftirqd {r.ksoftirqd_pct:.0f}, "
        f"other {r.other_cpu_pct:.0f}; machine {r.machine_busy_pct:.0f}/200 "
        f"(softirq {r.softirq_pct:.0f}); softswitch drops: RX ring {r.switch_rx_drops}, "
        f"queues {r.switch_queue_drops}"
    )


def _f(x: float | None) -> str:
    return f"{x:.2f}" if x is not None else "-"


def _load(r: Row) -> str:
    if r.load_1m_mean == r.load_1m_mean:  # not NaN: sampled over the window
        return f"{r.load_1m_mean:.1f}/{r.load_1m_max:.1f}"
    return f"{r.loadavg_1m:.1f} (at the end)"


# Provenance of a run (which commit, when) stays in results.json's metadata: the
# README describes the machine and the measurements, not when they were taken.
PROVENANCE_KEYS = ("commit", "date_utc")


def _machine(machine: object) -> str:
    if isinstance(machine, dict):
        return ", ".join(f"{k} {v}" for k, v in machine.items() if k not in PROVENANCE_KEYS)
    return str(machine)


def plots(rows: list[Row], cdfs: dict[str, list[float]], out: Path) -> list[Path]:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    made: list[Path] = []
    series = {
        "delay.png": (
            "delay_ms_median",
            "delay_ms_p99",
            "per-packet delay across the relay path (ms)",
        ),
        "variation.png": (
            "variation_ms_median",
            "variation_ms_p99",
            "delay variation |D_i - D_i-1| (ms)",
        ),
        "loss.png": ("loss_pct", None, "packet loss (%)"),
        "mos.png": ("mos_median", "mos_min", "MOS (G.107 E-model)"),
        "cpu.png": ("relay_cpu_pct", None, "relay server (RTPProxy) CPU, % of a core"),
    }
    for fname, (main, extra, label) in series.items():
        fig, ax = plt.subplots(figsize=(6.4, 4.0))
        for mode, color in (("server", "tab:red"), ("switch", "tab:blue")):
            rs = sorted((r for r in rows if r.mode == mode), key=lambda r: r.calls)
            if not rs:
                continue
            xs = [r.calls for r in rs]
            ax.plot(xs, [getattr(r, main) for r in rs], "o-", color=color, label=f"{mode}-based")
            if extra:
                ax.plot(
                    xs,
                    [getattr(r, extra) for r in rs],
                    "x--",
                    color=color,
                    alpha=0.6,
                    label=f"{mode}-based ({extra.rsplit('_', 1)[-1]})",
                )
        ax.set_xlabel("concurrent calls")
        ax.set_ylabel(label)
        if fname in ("delay.png", "variation.png"):
            ax.set_yscale("log")
        ax.grid(True, alpha=0.3)
        ax.legend()
        fig.tight_layout()
        fig.savefig(out / fname, dpi=110)
        plt.close(fig)
        made.append(out / fname)
    fig, ax = plt.subplots(figsize=(6.4, 4.0))
    for r in rows:
        q = cdfs.get(f"{r.mode}-{r.calls}") or []
        if not q:
            continue
        y = np.linspace(0, 1, len(q))
        ax.plot(
            np.maximum(q, 1e-3), y, "-" if r.mode == "switch" else "--", label=f"{r.mode} {r.calls}"
        )
    ax.set_xscale("log")
    ax.set_xlabel("per-packet delay across the relay path (ms)")
    ax.set_ylabel("CDF")
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=7, ncol=2)
    fig.tight_layout()
    fig.savefig(out / "delay_cdf.png", dpi=110)
    plt.close(fig)
    made.append(out / "delay_cdf.png")
    made.append(_cpu_breakdown(rows, out / "cpu_breakdown.png"))
    return made


CPU_PARTS = (  # Row field, label, colour: the stacked bars of cpu_breakdown.png
    ("uac_cpu_pct", "SIPp UAC", "tab:orange"),
    ("uas_cpu_pct", "SIPp UAS", "tab:brown"),
    ("relay_cpu_pct", "RTPProxy", "tab:red"),
    ("switch_cpu_pct", "softswitch", "tab:blue"),
    ("capture_cpu_pct", "captures", "tab:purple"),
    ("signalling_cpu_pct", "SIP server + rtpagent", "tab:green"),
    ("ksoftirqd_pct", "ksoftirqd", "tab:olive"),
    ("other_cpu_pct", "rest of the machine", "tab:gray"),
)


def _cpu_breakdown(rows: list[Row], path: Path) -> Path:
    """Where the machine's 2 cores went at each level, one panel per mode."""
    import matplotlib.pyplot as plt
    import numpy as np

    modes = [m for m in ("server", "switch") if any(r.mode == m for r in rows)]
    fig, axes = plt.subplots(1, max(len(modes), 1), figsize=(12, 4.2), sharey=True, squeeze=False)
    for ax, mode in zip(axes[0], modes, strict=False):
        rs = sorted((r for r in rows if r.mode == mode), key=lambda r: r.calls)
        x = np.arange(len(rs))
        bottom = np.zeros(len(rs))
        for attr, label, color in CPU_PARTS:
            v = np.nan_to_num(np.array([getattr(r, attr) for r in rs], dtype=float))
            ax.bar(x, v, bottom=bottom, color=color, label=label, width=0.7)
            bottom += v
        ax.axhline(200, color="black", lw=0.8, ls="--")
        ax.set_xticks(x, [str(r.calls) for r in rs])
        ax.set_xlabel("concurrent calls")
        ax.set_title(f"{mode}-based relay")
        ax.grid(True, axis="y", alpha=0.3)
    axes[0][0].set_ylabel("CPU, % of one core (2 cores = 200 %)")
    handles, labels = axes[0][0].get_legend_handles_labels()
    fig.legend(handles[::-1], labels[::-1], fontsize=8, loc="center right")
    fig.tight_layout(rect=(0, 0, 0.83, 1))
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


# A README's own reading of its figures, written by hand after the generated part:
# kept when the README is generated again.
READING = "## Reading the results"


def write_readme(out: Path, rows: list[Row], meta: dict[str, object]) -> None:
    """README.md from the rows, keeping the existing README's reading section."""
    path = out / "README.md"
    text = markdown(rows, meta)
    old = path.read_text() if path.exists() else ""
    if READING in old:
        text = text.rstrip("\n") + "\n\n" + old[old.index(READING) :]
    path.write_text(text)


def replot(out: Path) -> None:
    """README and plots again from a run's results.json (no new measurements)."""
    data = json.loads((out / "results.json").read_text())
    rows = [Row(**r) for r in data["rows"]]
    write_readme(out, rows, data["meta"])
    plots(rows, data["delay_quantiles_ms"], out)


def run(
    levels: list[int],
    modes: list[str],
    *,
    hold_s: float,
    rate: float,
    out: Path,
    run_dir: Path,
    command: str,
    nice: int = 0,
    sip: SipServer = "opensips",
    merge: bool = False,
) -> list[Row]:
    out.mkdir(parents=True, exist_ok=True)
    rows: list[Row] = []
    cdfs: dict[str, list[float]] = {}
    sip_server = sip_server_version(sip)
    earlier = (
        earlier_results(out, rate=rate, hold_s=hold_s, sip_server=sip_server) if merge else None
    )
    console.print(f"SIP server: {sip_server}")
    with Progress(
        TextColumn("[bold]{task.description}"),
        BarColumn(),
        TextColumn("{task.completed}/{task.total} levels"),
        TimeElapsedColumn(),
        console=console,
    ) as prog:
        task = prog.add_task("relay experiment", total=len(levels) * len(modes))
        for mode in modes:
            stack = Stack(
                StackConfig(
                    run_dir=run_dir / mode,
                    offload=(mode == "switch"),
                    sip=sip,
                    collector=False,
                    switch_args=SWITCH_ARGS,
                )
            )
            try:
                prog.update(task, description=f"{mode}: starting the stack")
                stack.up()
                for n in levels:
                    prog.update(task, description=f"{mode}-based relay, {n} calls")
                    row, cdfs[f"{mode}-{n}"] = run_level(
                        stack, mode, n, hold_s, rate, run_dir / "raw"
                    )
                    rows.append(row)
                    prog.console.print(
                        f"{mode:6} {n:5} calls: delay p50 {row.delay_ms_median:.3f} ms, "
                        f"p99 {row.delay_ms_p99:.2f} ms, loss {row.loss_pct:.2f} %, "
                        f"MOS {_f(row.mos_median)}, RTPProxy CPU {row.relay_cpu_pct:.0f} %"
                    )
                    prog.console.print("             CPU % of a core: " + cpu_line(row))
                    prog.advance(task)
                    time.sleep(3)  # let the BYEs and deletes drain
            finally:
                stack.down()
    meta: dict[str, object] = {
        "command": command,
        "machine": machine(),
        "rate": rate,
        "hold_s": hold_s,
        "nice": nice,
        "sip_server": sip_server,
        "softswitch_args": SWITCH_ARGS,
        # Where the relay path is measured (capture.start_captures).
        "capture": "hosts",
        "levels": levels,
        "modes": modes,
    }
    if earlier is not None:
        rows, cdfs, meta = merged(earlier, rows, cdfs, meta)
    meta["knee_server"] = knee(rows, "server")
    meta["knee_switch"] = knee(rows, "switch")
    write(out, rows, cdfs, meta)
    console.print(table(rows))
    console.print(f"knee of server-based relay: {meta['knee_server'] or 'not reached'}")
    return rows


def earlier_results(out: Path, *, rate: float, hold_s: float, sip_server: str) -> dict[str, object]:
    """The results already in out, which a --merge run adds to: refused (before anything
    runs) when they were measured with another call rate, hold time or SIP server."""
    path = out / "results.json"
    if not path.exists():
        return {"meta": {}, "rows": [], "delay_quantiles_ms": {}}
    data = json.loads(path.read_text())
    if not isinstance(data, dict) or not isinstance(data.get("meta"), dict):
        raise ValueError(f"{path}: not an experiment's results")
    old = data["meta"]
    for key, new in (("rate", rate), ("hold_s", hold_s), ("sip_server", sip_server)):
        if old.get(key) != new:
            raise ValueError(
                f"{path}: measured with {key} {old.get(key)!r}, this run {new!r}: "
                "write to another --out or run without --merge"
            )
    return data


def merged(
    earlier: dict[str, object],
    rows: list[Row],
    cdfs: dict[str, list[float]],
    meta: dict[str, object],
) -> tuple[list[Row], dict[str, list[float]], dict[str, object]]:
    """This run's levels added to earlier results (a level measured again replaces the
    earlier one); the meta lists each part's command and machine."""
    new = {(r.mode, r.calls) for r in rows}
    old_rows = earlier.get("rows")
    kept = [
        row
        for row in (Row(**r) for r in (old_rows if isinstance(old_rows, list) else []))
        if (row.mode, row.calls) not in new
    ]
    all_rows = sorted([*kept, *rows], key=lambda r: (r.mode, r.calls))
    old_cdfs = earlier.get("delay_quantiles_ms")
    all_cdfs = {
        k: v
        for k, v in (old_cdfs.items() if isinstance(old_cdfs, dict) else [])
        if any(f"{r.mode}-{r.calls}" == k for r in kept)
    }
    all_cdfs.update(cdfs)
    old_meta = earlier.get("meta")
    old_meta = old_meta if isinstance(old_meta, dict) else {}
    parts = old_meta.get("parts")
    if not isinstance(parts, list):
        parts = [
            {k: old_meta[k] for k in ("command", "machine", "levels", "modes") if k in old_meta}
        ]
        parts = [p for p in parts if p]
    this = {k: meta[k] for k in ("command", "machine", "levels", "modes")}
    out_meta = {
        **meta,
        "parts": [*parts, this],
        "levels": sorted({r.calls for r in all_rows}),
        "modes": [m for m in ("server", "switch") if any(r.mode == m for r in all_rows)],
    }
    return all_rows, all_cdfs, out_meta


def write(
    out: Path, rows: list[Row], cdfs: dict[str, list[float]], meta: dict[str, object]
) -> None:
    """results.json, results.csv, README.md and the plots in out."""
    (out / "results.json").write_text(
        json.dumps(
            {"meta": meta, "rows": [asdict(r) for r in rows], "delay_quantiles_ms": cdfs},
            indent=1,
        )
    )
    with (out / "results.csv").open("w") as f:
        f.write(",".join(asdict(rows[0]).keys()) + "\n" if rows else "")
        for r in rows:
            f.write(",".join(str(v) for v in asdict(r).values()) + "\n")
    write_readme(out, rows, meta)
    plots(rows, cdfs, out)


def _stop(signum: int, _frame: object) -> None:
    raise KeyboardInterrupt(f"signal {signum}")


def main(argv: list[str] | None = None) -> int:
    import argparse

    p = argparse.ArgumentParser(
        prog="python -m p4relay_scenarios.experiment",
        description="Server-based vs switch-based relay at increasing concurrency (the paper's "
        "experiment): delay, delay variation, loss, MOS, relay CPU; table + PNG plots.",
    )
    p.add_argument(
        "--levels",
        default="50,150,300,500,750",
        help="concurrent-call levels, comma separated (the paper: 750,1500,1800)",
    )
    p.add_argument("--modes", default="server,switch", help="server, switch or both")
    p.add_argument("--sip", choices=SIP_SERVERS, default="opensips", help="the SIP server")
    p.add_argument("--hold", type=float, default=25.0, help="seconds each call lasts")
    p.add_argument("--rate", type=float, default=30.0, help="calls per second (the paper: 30)")
    p.add_argument("--out", type=Path, default=ROOT / "scenarios" / "results" / "relay-experiment")
    p.add_argument("--run-dir", type=Path, default=ROOT / "build" / "experiment")
    p.add_argument(
        "--nice",
        type=int,
        default=-10,
        help="scheduling priority of the whole testbed (inherited by every process it starts); "
        "the machine is shared, and unrelated jobs (builds, other benchmarks) would otherwise "
        "starve the relay, the switch and SIPp and be measured instead of them (default -10)",
    )
    p.add_argument(
        "--merge",
        action="store_true",
        help="add this run's levels to the results already in --out (a level measured again "
        "replaces the earlier one), so a long experiment can run as several short parts",
    )
    p.add_argument(
        "--replot",
        action="store_true",
        help="only rewrite README.md and the plots in --out from its results.json",
    )
    args = p.parse_args(argv)
    if args.replot:
        replot(args.out)
        return 0
    # SIGTERM (and SIGINT even when a background shell ignored it) stop the run through
    # the stacks' teardown, so no namespace or daemon outlives it.
    signal.signal(signal.SIGINT, signal.default_int_handler)
    signal.signal(signal.SIGTERM, _stop)
    if args.nice:
        os.setpriority(os.PRIO_PROCESS, 0, args.nice)  # needs root, as the testbed does
    levels = [int(x) for x in args.levels.split(",") if x.strip()]
    modes = [m.strip() for m in args.modes.split(",") if m.strip()]
    if any(m not in ("server", "switch") for m in modes):
        p.error("--modes takes server and/or switch")
    command = recorded_command(
        "python -m p4relay_scenarios.experiment", sys.argv[1:] if argv is None else argv
    )
    run(
        levels,
        modes,
        hold_s=args.hold,
        rate=args.rate,
        out=args.out,
        run_dir=args.run_dir,
        command=command,
        nice=args.nice,
        sip=args.sip,
        merge=args.merge,
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
