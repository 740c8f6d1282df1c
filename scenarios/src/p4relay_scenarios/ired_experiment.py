"""iRED against tail drop on a congested switch port carrying TCP bulk flows, ping and calls.

The iRED paper's Experiment 1 (iperf3 TCP + ping through one bottleneck, buffer
reference 64..1024 packets with Table I's N), scaled to this machine and with
calls on the same port: the softswitch's port towards the UAS host is shaped
to --rate-mbit (its own port rate; this kernel has no netem), and through it go

  * TCP bulk flows: iperf3 from the NAT host to the UAS host (--flows),
  * ping: ICMP echo from the attacker host to the UAS host every 50 ms (its
    request waits in the port's queue; the reply returns on an idle port),
  * calls: SIPp calls UAC -> OpenSIPS -> UAS, G.711 both ways, the media
    relayed by the switch (rtpagent offloads every call); the caller->callee
    stream leaves through the bottleneck.

For each buffer reference (Table I) six policies on that port:

  taildrop      the port's queue with a buffer of maxLenQueue: a packet arriving
                to a full buffer is never queued (the traffic manager's tail
                drop; the softswitch's --port-queue-cells, restarted per buffer)
  ired          iRED (Algorithm 1 + 2): egress decision, ingress drop, any
                packet; the average of deq_qdepth (the P4 program's)
  ired-enq      the same averaging enq_qdepth (the softswitch's --ired-sample
                enq, the P4 program built with -DIRED_SAMPLE_ENQ): which depth
                to average, side by side
  ired-protect  iRED sparing relay hits (offloaded calls) and DSCP EF
  codel         the egress-drop AQMs the paper compares iRED with, on the same
  pi2           port's queue (the softswitch's --port-aqm: CoDel, RFC 8289, target
                5 ms / interval 100 ms as the paper's Table II; PI2, RFC 9332's
                Classic AQM, target 20 ms, update every 33 ms, alpha 0.3125 Hz and
                beta 3.125 Hz as its Table III), each deciding and
                dropping as packets leave the queue, in the buffer of maxLenQueue
                that taildrop has. This kernel has no CoDel or PIE
                qdisc (CONFIG_NET_SCH_CODEL/PIE/DUALPI2 off), and the softswitch
                sends past the qdisc, so the AQMs run in the switch's own queue:
                the same bottleneck, rate and buffer as the other policies.

maxLenQueue and N are in full-size frames (1514 bytes) converted to the
queue's cells; the physical queue (--queue-depth) is deeper than any
reference, as the paper's 10,000 packets, so only the policy drops. The
thresholds follow Algorithm 1 (maxThsld = 2 x minThsld: 896 for the 1024 row,
where Table I prints 832). The coin between the thresholds is the paper's,
random(0, N) <= registerProb with registerProb = 1: a chance of 2 / (N + 1).

Per run: RTT (mean, p99) and ping loss, TCP goodput (iperf3's receiver),
the port's policy drop rate (iRED ingress drops or tail drops over the
packets that reached the port), and per call (the caller->callee stream,
captured as the UAC sends and as the UAS receives): RTP loss, jitter (mean
|D_i - D_i-1|), one-way delay and MOS (G.107). Table, JSON and PNG plots.

    python -m p4relay_scenarios ired-experiment --out scenarios/results/ired
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import signal
import statistics
import subprocess
import sys
import threading
import time
from dataclasses import asdict, dataclass
from pathlib import Path

import httpx
import numpy as np
from p4relay_switch import SwitchClient
from p4relay_switch.ired import IredPortState, IredSettings, cells, clear_ired, ired_state, set_ired

from p4relay_scenarios import capture, topology
from p4relay_scenarios.experiment import machine, recorded_command, switch_drops
from p4relay_scenarios.ired_report import (
    AQM,
    EGRESS,
    FRAME,
    MAX_RUNS,
    MOS_TARGET,
    PHYSICAL_QUEUE,
    POLICIES,
    RATE_MBIT,
    TABLE_I,
    TCP_WARMUP_S,
    Row,
    markdown,
    merge,
    replot,
    write,
)
from p4relay_scenarios.load import Profile, UacResult, run_uac
from p4relay_scenarios.procs import StartError
from p4relay_scenarios.stack import GRPC_ADDR, RELAY_PORTS, ROOT, SWITCH_METRICS, Stack, StackConfig

__all__ = [
    "AQM",
    "EGRESS",
    "FRAME",
    "MOS_TARGET",
    "POLICIES",
    "TABLE_I",
    "Plan",
    "Row",
    "main",
    "run_cell",
]

BOTTLENECK = topology.UAS  # the port towards the callee: calls, TCP and ping share its queue
TCP_SRC = topology.NAT
PING_SRC = topology.ATTACKER
# Loss-based TCP, the traffic RED and iRED are made for (and the paper's iperf3
# default); BBR paces to its bandwidth estimate and barely fills a buffer.
TCP_CC = "cubic"
CLIENT_ID = 11  # BfRt client id of the experiment's configuration connection
# Passes over the matrix by default: three 20 s runs per cell keep the whole matrix
# near an hour on the 2-core machine (the paper: five 60 s runs).
RUNS = 3


class CellError(StartError):
    """A cell's tool gave no result (iperf3, the captures): the cell is run again once."""


@dataclass(frozen=True)
class Plan:
    """What every cell runs: the port's rate and the traffic through it."""

    rate_mbit: float
    calls: int
    seconds: float  # measured per cell and run
    flows: int = 4
    # TCP's start before the measurement window opens: CUBIC leaves slow start early
    # (HyStart) and plateaus near that window for seconds before it probes for more.
    warmup_s: float = TCP_WARMUP_S
    cc: str = TCP_CC


def port_setup(buffer: int, policy: str) -> tuple[str, ...]:
    """What a cell needs of the switch's start-up (its traffic manager and build):
    the baselines' buffer of maxLenQueue cells (an egress AQM beside it), or the
    iRED average's sample; iRED's own cells run in the physical queue."""
    port = BOTTLENECK.port
    args: list[str] = []
    if policy in EGRESS:
        args += ["--port-queue-cells", f"{port}={cells(buffer, FRAME)}"]
    if policy in AQM:
        args += ["--port-aqm", f"{port}={AQM[policy]}"]
    if policy == "ired-enq":
        args += ["--ired-sample", "enq"]
    return tuple(args)


def stack_config(run_dir: Path, rate_mbit: float, setup: tuple[str, ...] = ()) -> StackConfig:
    """The stack of the experiment: the bottleneck port shaped, a queue deeper than any
    reference, no server (the figures come from captures, iperf3, ping and the switch);
    `setup` (port_setup) adds a cell's buffer limit, AQM or iRED sample."""
    return StackConfig(
        run_dir=run_dir,
        collector=False,
        switch_args=[
            "--port-rate",
            f"{BOTTLENECK.port}={int(rate_mbit * 1e6)}",
            "--queue-depth",
            str(PHYSICAL_QUEUE),
            *setup,
        ],
    )


def settings(buffer: int, n: int, policy: str) -> IredSettings:
    """The port's iRED entry for one iRED cell of the matrix (depths in cells)."""
    return IredSettings(
        max_len_queue=cells(buffer, FRAME),
        n_drop=cells(n, FRAME),
        ewma_n=1,
        drop_prob=2.0 / (n + 1),
        tail_drop=False,
        protect=policy == "ired-protect",
    )


async def _configure(buffer: int, n: int, policy: str) -> None:
    """iRED on the port for an iRED cell; off (its registers zeroed) for a baseline."""
    async with SwitchClient(GRPC_ADDR, client_id=CLIENT_ID, reconnect=False) as sw:
        await clear_ired(sw, BOTTLENECK.port, reset=True)
        if policy not in EGRESS:
            await set_ired(sw, BOTTLENECK.port, settings(buffer, n, policy))


async def _read_state() -> IredPortState:
    async with SwitchClient(GRPC_ADDR, client_id=CLIENT_ID, reconnect=False) as sw:
        return (await ired_state(sw, [BOTTLENECK.port]))[BOTTLENECK.port]


def port_counters(port: int) -> dict[str, float]:
    """The softswitch's per-port counters for `port` (its Prometheus endpoint)."""
    text = httpx.get(f"http://{SWITCH_METRICS}/metrics", timeout=5.0).text
    out: dict[str, float] = {}
    for line in text.splitlines():
        if line.startswith("#") or f'port="{port}"' not in line:
            continue
        name = line.split("{", 1)[0]
        out[name] = out.get(name, 0.0) + float(line.rsplit(" ", 1)[1])
    return out


def realtime(pid: int, priority: int = 10) -> int:
    """Every thread of `pid` on SCHED_RR at `priority`; the number of threads moved.

    The switch stands in for a hardware pipeline that never waits for a CPU: on the
    shared 2-core machine a softswitch that stalls behind other jobs drains its queue
    late, and iRED, which decides as packets leave the queue, would decide late.
    The softswitch sleeps between packets (it does not poll), so this takes only the
    CPU it uses.
    """
    tids = [int(t) for t in os.listdir(f"/proc/{pid}/task")]
    for tid in tids:
        os.sched_setscheduler(tid, os.SCHED_RR, os.sched_param(priority))
    return len(tids)


def _ns(netns: str, *cmd: str) -> list[str]:
    return ["ip", "netns", "exec", netns, *cmd]


def _pct(a: list[float] | np.ndarray, p: float) -> float:
    return float(np.percentile(a, p)) if len(a) else float("nan")


def run_cell(
    stack: Stack, plan: Plan, buffer: int, policy: str, out_dir: Path, run: int = 1
) -> Row:
    """One cell of the matrix, once: the port set, calls, TCP and ping through it."""
    calls, seconds, flows, warmup_s, cc = (
        plan.calls,
        plan.seconds,
        plan.flows,
        plan.warmup_s,
        plan.cc,
    )
    n = TABLE_I[buffer]
    s = settings(buffer, n, policy)
    asyncio.run(_configure(buffer, n, policy))
    # Absolute: SIPp runs in the media directory and writes its files where it is told.
    cell_dir = (out_dir / f"{policy}-{buffer}-{run}").resolve()
    cell_dir.mkdir(parents=True, exist_ok=True)
    rate = 10.0  # calls/s
    ramp_s = calls / rate + 2.0
    hold_s = ramp_s + warmup_s + seconds + 3.0
    caps = capture.start_captures(stack.sup, cell_dir, RELAY_PORTS)
    uac: list[UacResult] = []
    calls_thread = threading.Thread(
        target=lambda: uac.append(
            run_uac(
                Profile(f"ired-{policy}-{buffer}", rate, calls, hold_s, calls),
                stack.media_dir,
                cell_dir,
                grace_s=60,
            )
        ),
        daemon=True,
    )
    calls_thread.start()
    time.sleep(ramp_s)
    iperf_s = subprocess.Popen(
        _ns(BOTTLENECK.netns, "iperf3", "-s", "-1", "-B", BOTTLENECK.addr),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    time.sleep(0.5)
    iperf_c = subprocess.Popen(
        [
            *_ns(TCP_SRC.netns, "iperf3", "-c", BOTTLENECK.addr, "-P", str(flows), "-C", cc),
            *("-t", f"{warmup_s + seconds:g}", "--omit", f"{warmup_s:g}", "--json"),
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    time.sleep(warmup_s)
    # The window: TCP past its slow start until it stops.
    win = (time.time_ns(), time.time_ns() + int(seconds * 1e9))
    before, c_before = asyncio.run(_read_state()), port_counters(BOTTLENECK.port)
    rx_before = switch_drops()[0]
    pinger = subprocess.run(
        _ns(
            PING_SRC.netns,
            sys.executable,
            "-m",
            "p4relay_scenarios.pinger",
            BOTTLENECK.addr,
            *("--interval", "0.05", "--seconds", f"{seconds - 0.5:g}", "--wait", "0.5"),
        ),
        capture_output=True,
        text=True,
        timeout=seconds + 30,
        check=False,
    )
    after, c_after = asyncio.run(_read_state()), port_counters(BOTTLENECK.port)
    rx_after, load_1m = switch_drops()[0], os.getloadavg()[0]
    tcp_out, tcp_err = iperf_c.communicate(timeout=seconds + 30)
    try:
        iperf_s.wait(15)
    except subprocess.TimeoutExpired:
        # The client's JSON has the result; a server still waiting out its
        # connection on a busy machine is only stopped.
        iperf_s.kill()
        iperf_s.wait(5)
    calls_thread.join(hold_s + 120)
    capture.stop_captures(stack.sup, caps)
    if pinger.returncode != 0:
        raise StartError(f"pinger: {pinger.stderr.strip()}")
    try:
        end = json.loads(tcp_out)["end"]
        tcp_bps = float(end["sum_received"]["bits_per_second"])
        retransmits = int(end["sum_sent"].get("retransmits", 0))
    except (json.JSONDecodeError, KeyError, TypeError, ValueError):
        # iperf3 reports its own errors (a refused or reset control connection) in its
        # JSON's "error", with an empty "end"
        raise CellError(
            f"{policy}, buffer {buffer}: iperf3 gave no result: "
            f"{tcp_err.strip()[-300:]} {tcp_out[-300:]}"
        ) from None
    ping = json.loads(pinger.stdout)
    rtts: list[float] = ping["rtt_ms"]
    m = capture.relay_path_metrics(
        capture.read_rtp(caps[0].path), capture.read_rtp(caps[1].path), window_ns=win
    )
    for c in caps:
        c.path.unlink(missing_ok=True)
    if m.streams == 0:
        raise CellError(
            f"{policy}, buffer {buffer}: no call media was measured (SIPp: {cell_dir}/uac.log)"
        )
    aqm_drops = int(
        c_after.get("p4relay_port_aqm_drops_total", 0)
        - c_before.get("p4relay_port_aqm_drops_total", 0)
    )
    tx = int(
        c_after.get("p4relay_port_tx_packets_total", 0)
        - c_before.get("p4relay_port_tx_packets_total", 0)
    )
    qdrops = int(
        c_after.get("p4relay_port_queue_drops_total", 0)
        - c_before.get("p4relay_port_queue_drops_total", 0)
    )
    # A baseline's buffer is the queue's own limit: its tail drops are the policy's.
    drops = (
        (after.drops - before.drops)
        + (after.tail_drops - before.tail_drops)
        + aqm_drops
        + (qdrops if policy in EGRESS else 0)
    )
    reached = tx + drops + (0 if policy in EGRESS else qdrops)
    moses = [x.mos for x in m.per_stream if x.mos is not None]
    jit = [x.variation_ms_mean for x in m.per_stream]
    st = uac[0].stats if uac else None
    return Row(
        buffer=buffer,
        n=n,
        policy=policy,
        min_thsld=buffer // 2 - n,
        max_thsld=2 * (buffer // 2 - n),
        drop_prob=round(s.drop_prob, 4),
        rtt_ms_mean=round(statistics.fmean(rtts), 2) if rtts else float("nan"),
        rtt_ms_p50=round(_pct(rtts, 50), 2),
        rtt_ms_p99=round(_pct(rtts, 99), 2),
        ping_loss_pct=round(100.0 * (1 - len(rtts) / ping["sent"]), 2) if ping["sent"] else 0.0,
        tcp_mbps=round(tcp_bps / 1e6, 2),
        tcp_retransmits=retransmits,
        port_packets=reached,
        policy_drops=drops,
        drop_rate_pct=round(100.0 * drops / reached, 3) if reached else 0.0,
        decisions=after.decisions - before.decisions,
        spared=after.spared - before.spared,
        queue_drops=qdrops,
        calls=calls,
        calls_ok=st.successful if st else 0,
        calls_failed=st.failed if st else calls,
        rtp_loss_pct=round(m.loss_pct, 3),
        delay_ms_median=round(m.delay_ms_median, 2),
        delay_ms_p99=round(m.delay_ms_p99, 2),
        jitter_ms_median=round(statistics.median(jit), 3) if jit else float("nan"),
        jitter_ms_max=round(max(jit), 3) if jit else float("nan"),
        mos_min=round(min(moses), 2) if moses else None,
        mos_median=round(statistics.median(moses), 2) if moses else None,
        calls_mos_ok=sum(1 for x in moses if x >= MOS_TARGET),
        window_s=seconds,
        load_1m=round(load_1m, 2),
        switch_rx_drops=rx_after - rx_before if rx_before >= 0 and rx_after >= 0 else -1,
        aqm_drops=aqm_drops,
        run=run,
        per_call=[
            {
                "ssrc": x.ssrc,
                "sent": x.sent,
                "received": x.received,
                "loss_pct": round(100.0 * (x.sent - x.received) / x.sent, 3) if x.sent else 0.0,
                "delay_ms_mean": round(x.delay_ms_mean, 2),
                "jitter_ms": round(x.variation_ms_mean, 3),
                "mos": None if x.mos is None else round(x.mos, 2),
            }
            for x in m.per_stream
        ],
    )


def run(
    buffers: list[int],
    policies: list[str],
    plan: Plan,
    run_dir: Path,
    *,
    runs: int = 1,
    switch_rt: bool = True,
) -> list[Row]:
    """The matrix on one testbed, `runs` passes over it one after the other (a change
    in the machine's load falls on every policy alike): the switch is reconfigured
    between cells, and the stack restarted (the testbed kept, and held) for each
    start-up the cells need (port_setup: a baseline's buffer, an AQM, iRED's sample)."""
    groups: dict[tuple[str, ...], list[tuple[int, str]]] = {}
    for b in buffers:
        for pol in policies:
            groups.setdefault(port_setup(b, pol), []).append((b, pol))
    stack = Stack(stack_config(run_dir.resolve(), plan.rate_mbit))
    rows: list[Row] = []
    up: tuple[str, ...] | None = None  # the setup of the running stack
    try:
        for n in range(1, runs + 1):
            for setup, cells_ in groups.items():
                if up != setup:
                    restart(stack, plan.rate_mbit, setup, running=up is not None, rt=switch_rt)
                    up = setup
                rows += _group(stack, plan, cells_, run_dir, n)
                _keep(rows, plan, runs, run_dir)
    finally:
        stack.down()
    order = {p: i for i, p in enumerate(POLICIES)}
    return sorted(rows, key=lambda r: (r.buffer, order[r.policy], r.run))


def restart(
    stack: Stack, rate_mbit: float, setup: tuple[str, ...], *, running: bool, rt: bool = True
) -> None:
    """The stack (again, if `running`; the testbed kept, and held) with a cell's
    start-up (port_setup); with `rt` the softswitch's threads on SCHED_RR."""
    if running:
        stack.down(keep_testbed=True)
    stack.cfg.switch_args = stack_config(stack.cfg.run_dir, rate_mbit, setup).switch_args
    stack.up()
    if rt:
        realtime(stack.sup.procs["softswitch"].popen.pid)


def _keep(rows: list[Row], plan: Plan, runs: int, run_dir: Path) -> None:
    """The rows so far, in --run-dir: a run that stops early leaves what it measured
    (`--replot --out RUN_DIR` tables it)."""
    meta = {**asdict(plan), "command": "(partial)", "repetitions": runs, "port": BOTTLENECK.port}
    (run_dir / "results.json").write_text(
        json.dumps({"meta": meta, "rows": [asdict(r) for r in rows]}, indent=1) + "\n"
    )


def _group(
    stack: Stack, plan: Plan, cells_: list[tuple[int, str]], run_dir: Path, run: int
) -> list[Row]:
    rows: list[Row] = []
    for b, pol in cells_:
        try:
            row = run_cell(stack, plan, b, pol, run_dir / "raw", run)
        except CellError as exc:
            print(f"run {run} {b:5} {pol:12} again: {exc}", flush=True)
            time.sleep(3)
            row = run_cell(stack, plan, b, pol, run_dir / "raw", run)
        rows.append(row)
        print(
            f"run {run} {b:5} {pol:12} RTT {row.rtt_ms_mean:7.1f} ms "
            f"(p99 {row.rtt_ms_p99:7.1f}), TCP {row.tcp_mbps:5.1f} Mbit/s, "
            f"drops {row.drop_rate_pct:.3f} %, calls {row.calls_ok}/{row.calls}, "
            f"RTP loss {row.rtp_loss_pct:.2f} %, MOS min "
            f"{'-' if row.mos_min is None else f'{row.mos_min:.2f}'}, load {row.load_1m:.1f}",
            flush=True,
        )
        if dead := stack.dead():
            raise StartError(f"testbed processes died: {', '.join(dead)}")
        time.sleep(3)  # BYEs and deletes drain before the next cell
    return rows


def _stop(signum: int, _frame: object) -> None:
    raise KeyboardInterrupt(f"signal {signum}")


def _ints(text: str, what: str) -> list[int]:
    try:
        return [int(x) for x in text.split(",") if x.strip()]
    except ValueError:
        raise SystemExit(f"ired-experiment: {what} {text!r}: comma-separated integers") from None


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        prog="python -m p4relay_scenarios ired-experiment",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    ap.add_argument(
        "--buffers",
        default=",".join(map(str, TABLE_I)),
        help="buffer size references, packets, from Table I (default all five)",
    )
    ap.add_argument(
        "--policies", default=",".join(POLICIES), help=f"of {', '.join(POLICIES)} (default all)"
    )
    ap.add_argument(
        "--rate-mbit",
        type=float,
        default=RATE_MBIT,
        help=f"bottleneck port rate ({RATE_MBIT:g}; the results README says why)",
    )
    ap.add_argument("--calls", type=int, default=20, help="concurrent calls (20)")
    ap.add_argument(
        "--seconds", type=float, default=20.0, help="measured seconds per cell and run (20)"
    )
    ap.add_argument(
        "--runs",
        type=int,
        default=RUNS,
        help=f"passes over the matrix: runs per cell, for a mean and its 95 %% interval "
        f"(1..{MAX_RUNS}; default {RUNS})",
    )
    ap.add_argument("--flows", type=int, default=4, help="iperf3 TCP flows (4)")
    ap.add_argument(
        "--cc",
        default=TCP_CC,
        help=f"the TCP flows' congestion control (iperf3 -C; default {TCP_CC})",
    )
    ap.add_argument(
        "--warmup",
        type=float,
        default=TCP_WARMUP_S,
        help=f"seconds of TCP before each cell's window opens ({TCP_WARMUP_S:g})",
    )
    ap.add_argument("--out", type=Path, default=ROOT / "scenarios" / "results" / "ired")
    ap.add_argument("--run-dir", type=Path, default=ROOT / "build" / "ired-experiment")
    ap.add_argument(
        "--nice",
        type=int,
        default=-10,
        help="scheduling priority of the testbed (the machine is shared; default -10)",
    )
    ap.add_argument(
        "--switch-priority",
        choices=("rt", "nice"),
        default="rt",
        help="rt: the softswitch's threads on SCHED_RR (a hardware switch never waits for a "
        "CPU; default); nice: only the testbed's --nice",
    )
    ap.add_argument(
        "--replot", action="store_true", help="only rewrite README.md and plots from results.json"
    )
    ap.add_argument(
        "--merge",
        action="store_true",
        help="keep the rows of --out's results.json this run does not measure (a matrix "
        "measured in several runs with the same settings)",
    )
    a = ap.parse_args(argv)
    if a.replot:
        replot(a.out)
        return 0
    buffers = _ints(a.buffers, "--buffers")
    if bad := [b for b in buffers if b not in TABLE_I]:
        ap.error(f"--buffers {bad}: Table I has {', '.join(map(str, TABLE_I))}")
    policies = [p.strip() for p in a.policies.split(",") if p.strip()]
    if bad_p := [p for p in policies if p not in POLICIES]:
        ap.error(f"--policies {bad_p}: one of {', '.join(POLICIES)}")
    if not 1 <= a.calls <= 500 or not 1 <= a.flows <= 32:
        ap.error("--calls 1..500, --flows 1..32")
    if not a.cc.isalnum():
        ap.error(f"--cc {a.cc!r}: a congestion control's name (e.g. cubic, reno, bbr)")
    if not 1 <= a.runs <= MAX_RUNS:
        ap.error(f"--runs 1..{MAX_RUNS}")
    if a.seconds < 5 or not 1 <= a.rate_mbit <= 1000 or not 0 <= a.warmup <= 600:
        ap.error("--seconds at least 5, --rate-mbit 1..1000, --warmup 0..600")
    if os.geteuid() != 0:
        print("ired-experiment: needs root (network namespaces)", file=sys.stderr)
        return 2
    signal.signal(signal.SIGINT, signal.default_int_handler)
    signal.signal(signal.SIGTERM, _stop)
    if a.nice:
        os.setpriority(os.PRIO_PROCESS, 0, a.nice)
    command = recorded_command(
        "python -m p4relay_scenarios ired-experiment", sys.argv[2:] if argv is None else argv
    )
    plan = Plan(a.rate_mbit, a.calls, a.seconds, a.flows, a.warmup, a.cc)
    t0 = time.monotonic()
    try:
        rows = run(
            buffers,
            policies,
            plan,
            a.run_dir,
            runs=a.runs,
            switch_rt=a.switch_priority == "rt",
        )
    except StartError as exc:
        print(f"ired-experiment: {exc}", file=sys.stderr)
        return 1
    meta: dict[str, object] = {
        "command": command,
        "machine": machine(),
        "rate_mbit": a.rate_mbit,
        "calls": a.calls,
        "seconds": a.seconds,
        "flows": a.flows,
        "physical_queue": PHYSICAL_QUEUE,
        "switch_priority": a.switch_priority,
        "warmup_s": a.warmup,
        "cc": a.cc,
        "nice": a.nice,
        "repetitions": a.runs,
        "port": BOTTLENECK.port,
        "aqm": AQM,
        "minutes": round((time.monotonic() - t0) / 60, 1),
    }
    if a.merge:
        rows, meta = merge(a.out, rows, meta)
    write(rows, meta, a.out)
    print(markdown(rows, meta))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
