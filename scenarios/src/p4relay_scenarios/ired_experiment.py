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

For each buffer reference (Table I) five policies on that port:

  taildrop      the port drops what arrives when its queue holds maxLenQueue
                (iRED's tail-drop mode: the plain buffer of that size)
  ired          iRED (Algorithm 1 + 2): egress decision, ingress drop, any packet
  ired-protect  iRED sparing relay hits (offloaded calls) and DSCP EF
  codel         the egress-drop AQMs the paper compares iRED with, on the same
  pi2           port's queue (the softswitch's --port-aqm: CoDel, RFC 8289, target
                5 ms / interval 100 ms as the paper's Table II; PI2, RFC 9332's
                Classic AQM, target 20 ms as its Table III), each deciding and
                dropping as packets leave the queue, in a buffer of maxLenQueue
                (the tail-drop mode's limit). This kernel has no CoDel or PIE
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
from dataclasses import asdict, dataclass, field
from pathlib import Path

import httpx
import numpy as np
from p4relay_switch import SwitchClient
from p4relay_switch.ired import IredPortState, IredSettings, cells, clear_ired, ired_state, set_ired

from p4relay_scenarios import capture, topology
from p4relay_scenarios.experiment import machine, recorded_command, switch_drops
from p4relay_scenarios.load import Profile, UacResult, run_uac
from p4relay_scenarios.procs import StartError
from p4relay_scenarios.stack import GRPC_ADDR, RELAY_PORTS, ROOT, SWITCH_METRICS, Stack, StackConfig

# Table I of the paper: buffer size reference (packets) -> N.
TABLE_I: dict[int, int] = {64: 4, 128: 8, 256: 16, 512: 32, 1024: 64}
POLICIES = ("taildrop", "ired", "ired-protect", "codel", "pi2")
# The egress-drop AQMs: the softswitch's --port-aqm on the bottleneck port (the
# paper's parameters); the switch restarts between groups of policies.
AQM: dict[str, str] = {"codel": "codel:5000:100000", "pi2": "pi2:20000"}
EGRESS = ("taildrop", "codel", "pi2")  # what iRED is compared with
BOTTLENECK = topology.UAS  # the port towards the callee: calls, TCP and ping share its queue
TCP_SRC = topology.NAT
PING_SRC = topology.ATTACKER
FRAME = 1514  # the paper's packets (and iperf3's full-size segments)
PHYSICAL_QUEUE = 4096  # packets: deeper than any reference, so only the policy drops
MOS_TARGET = 4.2
# TCP's start before the measurement window opens: CUBIC leaves slow start early
# (HyStart) and plateaus near that window for seconds before it probes for more.
TCP_WARMUP_S = 10.0
# Loss-based TCP, the traffic RED and iRED are made for (and the paper's iperf3
# default); BBR paces to its bandwidth estimate and barely fills a buffer.
TCP_CC = "cubic"
CLIENT_ID = 11  # BfRt client id of the experiment's configuration connection


@dataclass
class Row:
    buffer: int  # maxLenQueue, packets
    n: int  # N, packets
    policy: str
    min_thsld: int  # packets (Algorithm 1)
    max_thsld: int
    drop_prob: float  # chance between the thresholds
    rtt_ms_mean: float
    rtt_ms_p50: float
    rtt_ms_p99: float
    ping_loss_pct: float
    tcp_mbps: float  # iperf3 receiver goodput, all flows
    tcp_retransmits: int
    port_packets: int  # packets that reached the port's policy in the window
    policy_drops: int  # iRED ingress drops, tail drops at the buffer, AQM drops
    drop_rate_pct: float
    decisions: int  # iRED decisions (feedback copies)
    spared: int  # protected packets that found the flag and passed
    queue_drops: int  # the physical queue's own tail drops (should stay 0)
    calls: int
    calls_ok: int
    calls_failed: int
    rtp_loss_pct: float  # caller->callee, all calls
    delay_ms_median: float  # one-way, UAC host -> UAS host
    delay_ms_p99: float
    jitter_ms_median: float  # per call: mean |D_i - D_i-1|; median and max over calls
    jitter_ms_max: float
    mos_min: float | None
    mos_median: float | None
    calls_mos_ok: int  # calls at MOS >= MOS_TARGET
    window_s: float
    # The shared machine over the window: its 1-minute load at the end, and frames the
    # softswitch's RX rings dropped (all ports) while its threads waited for a CPU.
    load_1m: float = 0.0
    switch_rx_drops: int = 0
    aqm_drops: int = 0  # CoDel/PI2 drops as packets left the queue (in policy_drops)
    per_call: list[dict[str, float | int | None]] = field(default_factory=list)


def stack_config(run_dir: Path, rate_mbit: float, aqm: str | None = None) -> StackConfig:
    """The stack of the experiment: the bottleneck port shaped, a queue deeper than any
    reference, no server (the figures come from captures, iperf3, ping and the switch);
    with `aqm` (AQM's values) the port's queue runs that egress-drop AQM."""
    return StackConfig(
        run_dir=run_dir,
        collector=False,
        switch_args=[
            "--port-rate",
            f"{BOTTLENECK.port}={int(rate_mbit * 1e6)}",
            "--queue-depth",
            str(PHYSICAL_QUEUE),
            *(["--port-aqm", f"{BOTTLENECK.port}={aqm}"] if aqm else []),
        ],
    )


def settings(buffer: int, n: int, policy: str) -> IredSettings:
    """The port's iRED entry for one cell of the matrix (depths in cells); the
    egress AQMs run in the tail-drop mode's buffer of maxLenQueue."""
    return IredSettings(
        max_len_queue=cells(buffer, FRAME),
        n_drop=cells(n, FRAME),
        ewma_n=1,
        drop_prob=2.0 / (n + 1),
        tail_drop=policy in EGRESS,
        protect=policy == "ired-protect",
    )


async def _configure(buffer: int, n: int, policy: str) -> None:
    async with SwitchClient(GRPC_ADDR, client_id=CLIENT_ID, reconnect=False) as sw:
        await clear_ired(sw, BOTTLENECK.port, reset=True)
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
    stack: Stack,
    buffer: int,
    policy: str,
    *,
    calls: int,
    seconds: float,
    flows: int,
    out_dir: Path,
    warmup_s: float = TCP_WARMUP_S,
    cc: str = TCP_CC,
) -> Row:
    n = TABLE_I[buffer]
    s = settings(buffer, n, policy)
    asyncio.run(_configure(buffer, n, policy))
    # Absolute: SIPp runs in the media directory and writes its files where it is told.
    cell_dir = (out_dir / f"{policy}-{buffer}").resolve()
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
        tcp = json.loads(tcp_out)["end"]
    except (json.JSONDecodeError, KeyError):
        raise StartError(
            f"iperf3 gave no result: {tcp_err.strip()[-500:]} {tcp_out[-500:]}"
        ) from None
    ping = json.loads(pinger.stdout)
    rtts: list[float] = ping["rtt_ms"]
    m = capture.relay_path_metrics(
        capture.read_rtp(caps[0].path), capture.read_rtp(caps[1].path), window_ns=win
    )
    for c in caps:
        c.path.unlink(missing_ok=True)
    if m.streams == 0:
        raise StartError(
            f"{policy}, buffer {buffer}: no call media was measured (SIPp: {cell_dir}/uac.log)"
        )
    aqm_drops = int(
        c_after.get("p4relay_port_aqm_drops_total", 0)
        - c_before.get("p4relay_port_aqm_drops_total", 0)
    )
    drops = (after.drops - before.drops) + (after.tail_drops - before.tail_drops) + aqm_drops
    tx = int(
        c_after.get("p4relay_port_tx_packets_total", 0)
        - c_before.get("p4relay_port_tx_packets_total", 0)
    )
    qdrops = int(
        c_after.get("p4relay_port_queue_drops_total", 0)
        - c_before.get("p4relay_port_queue_drops_total", 0)
    )
    reached = tx + drops + qdrops
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
        tcp_mbps=round(tcp["sum_received"]["bits_per_second"] / 1e6, 2),
        tcp_retransmits=int(tcp["sum_sent"].get("retransmits", 0)),
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


PAPER = (
    "Beside the paper (de Almeida et al., iRED, Experiment 1: one TCP flow of 1514-byte "
    "packets through a BMv2 router, 60 s x 5 runs per setting): iRED's mean RTT is up to "
    "2.48x lower than PI2's (the worst egress AQM) at a 64-packet reference, CoDel and PI2 "
    "statistically the same as iRED from 256 packets on, and iRED's throughput up to 0.74x "
    "higher than PI2's; it drops/recirculates 0.038 % of packets at 64 and 0.005 % at 1024. "
    "Here the egress alternatives (tail drop, CoDel, PI2) run in the same switch queue at "
    "the same rate and buffer, the traffic shares the port with relayed calls, and a call's "
    "MOS is what the product needs."
)


def summary(rows: list[Row], rate_mbit: float) -> list[str]:
    """The paper's claim and ours, measured: per buffer, iRED against each egress
    alternative (RTT and throughput ratios, the worst call's MOS)."""
    by = {(r.buffer, r.policy): r for r in rows}
    out: list[str] = []
    for b in sorted({r.buffer for r in rows}):
        for base in EGRESS:
            e = by.get((b, base))
            for pol in ("ired", "ired-protect"):
                r = by.get((b, pol))
                if e is None or r is None or not r.rtt_ms_mean or not e.tcp_mbps:
                    continue
                out.append(
                    f"| {b} | {pol} | {base} | {e.rtt_ms_mean / r.rtt_ms_mean:.2f}x | "
                    f"{e.rtt_ms_p99 / r.rtt_ms_p99:.2f}x | {r.tcp_mbps / e.tcp_mbps:.2f}x | "
                    f"{100 * r.tcp_mbps / rate_mbit:.0f} % | {_f(e.mos_min)} -> {_f(r.mos_min)} "
                    f"| {e.calls_mos_ok}/{len(e.per_call)} -> {r.calls_mos_ok}/{len(r.per_call)} |"
                )
    if not out:
        return []
    return [
        "| buffer | policy | against | RTT mean: against / policy | RTT p99: against / policy | "
        "TCP: policy / against | TCP goodput / port rate | worst call MOS: against -> policy | "
        f"calls at MOS >= {MOS_TARGET}: against -> policy |",
        "|---:|---|---|---:|---:|---:|---:|---|---|",
        *out,
        "",
        "Goodput counts TCP payload only: with its TCP/IP headers (1514-byte frames for "
        "1448 bytes of payload) and the calls' media beside it the port is full.",
    ]


def markdown(rows: list[Row], meta: dict[str, object]) -> str:
    mach = meta.get("machine")
    lines = [
        "# iRED vs tail drop, CoDel and PI2: a congested port carrying TCP bulk flows, ping "
        "and relayed calls",
        "",
        f"Command: `{meta['command']}`",
        "",
        "Machine: "
        + (", ".join(f"{k} {v}" for k, v in mach.items()) if isinstance(mach, dict) else str(mach)),
        "",
        f"Bottleneck: the softswitch's port {BOTTLENECK.port} (towards the UAS host) at "
        f"{meta['rate_mbit']} Mbit/s; its physical queue {PHYSICAL_QUEUE} packets, so only the "
        f"policy drops. Through it: {meta['flows']} iperf3 TCP flows "
        f"({meta.get('cc', 'the system default congestion control')}; NAT host -> UAS host), "
        "ping every 50 ms (attacker host -> UAS host) and the caller->callee media of "
        f"{meta['calls']} SIPp calls (G.711, 50 packets/s) relayed by the switch. Each cell: "
        f"{meta['seconds']} s measured after {meta.get('warmup_s', TCP_WARMUP_S)} s of TCP "
        "start-up (the paper: 60 s x 5). The testbed runs at nice "
        f"{meta.get('nice', -10)}"
        + (
            ", the softswitch's threads on SCHED_RR (it stands in for a pipeline that never "
            "waits for a CPU)"
            if meta.get("switch_priority") == "rt"
            else ""
        )
        + ". maxThsld follows Algorithm 1 (2 x minThsld: 896 for the "
        "1024 row, where Table I prints 832). Buffer, N and thresholds in full-size frames "
        f"({FRAME} bytes; the switch counts 80-byte cells); the coin between the thresholds "
        "is the paper's, 2 / (N + 1).",
        "",
        "Policies: taildrop = the port drops what arrives when it holds the buffer "
        "(iRED's tail-drop mode); ired = iRED, any packet; ired-protect = iRED sparing relay "
        "hits and DSCP EF; codel / pi2 = the egress-drop AQMs of the paper's comparison in "
        "the same switch queue (softswitch `--port-aqm`, restarted for them): CoDel (RFC 8289) "
        "at target 5 ms / interval 100 ms (the paper's Table II), PI2 (RFC 9332's Classic "
        "AQM: Tupdate 16 ms, alpha 0.16 Hz, beta 3.2 Hz, drop chance p'^2) at target 20 ms "
        "(Table III), each deciding and dropping as a packet leaves the queue, in the same "
        "buffer (the tail-drop mode's limit; its drops count with the AQM's). The kernel "
        "here has no CoDel or PIE qdisc, and the switch's port is the bottleneck of every "
        "policy. " + "One run per cell.",
        "",
        "Drop rate: the policy's drops (iRED's ingress drops, the tail drops at the buffer, "
        "the AQM's drops) "
        "over the packets that reached the port. Jitter: per call, the mean |D_i - D_i-1| of "
        "its one-way delay; MOS: G.107 E-model per call (G.711 with PLC) from its loss, "
        "delay and jitter. Load 1m and switch RX drops say how busy the shared 2-core "
        "machine was: iRED decides when a packet leaves the queue, so a softswitch starved "
        "of CPU decides late while TCP keeps filling the queue (tail drop limits the depth at "
        "enqueue and is not delayed that way).",
        "",
        "| buffer | N | min/max thsld | policy | RTT ms mean | RTT ms p99 | ping loss % | "
        "TCP Mbit/s | retransmits | drop rate % | decisions | spared | calls ok | RTP loss % | "
        "delay ms p50 / p99 | jitter ms p50 / max | MOS min / p50 | "
        f"calls MOS >= {MOS_TARGET} | load 1m | switch RX drops |",
        "|---:|---:|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|---|---|---:|"
        "---:|---:|",
    ]
    for r in rows:
        lines.append(
            f"| {r.buffer} | {'-' if r.policy in EGRESS else r.n} | "
            f"{'-' if r.policy in EGRESS else f'{r.min_thsld}/{r.max_thsld}'} | {r.policy} | "
            f"{r.rtt_ms_mean:.1f} | {r.rtt_ms_p99:.1f} | {r.ping_loss_pct:.1f} | "
            f"{r.tcp_mbps:.1f} | {r.tcp_retransmits} | {r.drop_rate_pct:.3f} | {r.decisions} | "
            f"{r.spared} | {r.calls_ok}/{r.calls} | {r.rtp_loss_pct:.2f} | "
            f"{r.delay_ms_median:.1f} / {r.delay_ms_p99:.1f} | "
            f"{r.jitter_ms_median:.2f} / {r.jitter_ms_max:.2f} | {_f(r.mos_min)} / "
            f"{_f(r.mos_median)} | {r.calls_mos_ok}/{len(r.per_call)} | {r.load_1m:.1f} | "
            f"{r.switch_rx_drops} |"
        )
    s = summary(rows, float(str(meta["rate_mbit"])))
    if s:
        lines += ["", "Side by side (each buffer's policies measured in one run):", "", *s]
    lines += [
        "",
        PAPER,
        "",
        *[f"Run: `{c}`" for c in _runs(meta)],
        "",
        "Plots: `rtt.png` (RTT mean and p99), `throughput.png` (TCP goodput), "
        "`drops.png` (policy drop rate), `calls.png` (RTP loss, jitter and MOS per call). "
        "Per-call figures are in `results.json`.",
    ]
    return "\n".join(lines) + "\n"


def _runs(meta: dict[str, object]) -> list[str]:
    runs = meta.get("runs")
    return [c for c in runs if isinstance(c, str)] if isinstance(runs, list) else []


def _f(x: float | None) -> str:
    return f"{x:.2f}" if x is not None else "-"


COLORS = {
    "taildrop": "tab:red",
    "ired": "tab:orange",
    "ired-protect": "tab:blue",
    "codel": "tab:green",
    "pi2": "tab:purple",
}


def plots(rows: list[Row], out: Path, rate_mbit: float) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    def series(ax: object, attr: str, style: str = "o-", suffix: str = "") -> None:
        for pol in POLICIES:
            rs = sorted((r for r in rows if r.policy == pol), key=lambda r: r.buffer)
            if rs:
                ax.plot(  # type: ignore[attr-defined]
                    [r.buffer for r in rs],
                    [getattr(r, attr) for r in rs],
                    style,
                    color=COLORS[pol],
                    label=pol + suffix,
                )

    def finish(ax: object, ylabel: str) -> None:
        ax.set_xscale("log", base=2)  # type: ignore[attr-defined]
        ax.set_xticks(sorted(TABLE_I), [str(b) for b in sorted(TABLE_I)])  # type: ignore[attr-defined]
        ax.set_xlabel("buffer size reference (packets)")  # type: ignore[attr-defined]
        ax.set_ylabel(ylabel)  # type: ignore[attr-defined]
        ax.grid(True, alpha=0.3)  # type: ignore[attr-defined]
        ax.legend(fontsize=8)  # type: ignore[attr-defined]

    fig, ax = plt.subplots(figsize=(6.4, 4.0))
    series(ax, "rtt_ms_mean", "o-", " mean")
    series(ax, "rtt_ms_p99", "s--", " p99")
    finish(ax, "ping RTT through the port (ms)")
    ax.set_yscale("log")
    fig.tight_layout()
    fig.savefig(out / "rtt.png", dpi=110)
    plt.close(fig)

    fig, ax = plt.subplots(figsize=(6.4, 4.0))
    series(ax, "tcp_mbps")
    ax.axhline(rate_mbit, color="black", lw=0.8, ls="--")
    ax.set_ylim(0, rate_mbit * 1.1)
    finish(ax, "TCP goodput, all flows (Mbit/s)")
    fig.tight_layout()
    fig.savefig(out / "throughput.png", dpi=110)
    plt.close(fig)

    fig, ax = plt.subplots(figsize=(6.4, 4.0))
    series(ax, "drop_rate_pct")
    finish(ax, "policy drops / packets at the port (%)")
    fig.tight_layout()
    fig.savefig(out / "drops.png", dpi=110)
    plt.close(fig)

    fig, axes = plt.subplots(1, 3, figsize=(14, 4.0))
    offs = {"taildrop": 0.8, "codel": 0.9, "pi2": 1.0, "ired": 1.1, "ired-protect": 1.2}
    for ax, key, label in (
        (axes[0], "loss_pct", "RTP loss per call (%)"),
        (axes[1], "jitter_ms", "jitter per call (ms)"),
        (axes[2], "mos", "MOS per call (G.107)"),
    ):
        for pol in POLICIES:
            xs: list[float] = []
            ys: list[float] = []
            for r in (r for r in rows if r.policy == pol):
                for c in r.per_call:
                    v = c.get(key)
                    if v is not None:
                        xs.append(r.buffer * offs[pol])
                        ys.append(float(v))
            if xs:
                ax.scatter(xs, ys, s=10, alpha=0.6, color=COLORS[pol], label=pol)
        if key == "mos":
            ax.axhline(MOS_TARGET, color="black", lw=0.8, ls="--")
        finish(ax, label)
    fig.tight_layout()
    fig.savefig(out / "calls.png", dpi=110)
    plt.close(fig)


def write(rows: list[Row], meta: dict[str, object], out: Path) -> None:
    out.mkdir(parents=True, exist_ok=True)
    (out / "results.json").write_text(
        json.dumps({"meta": meta, "rows": [asdict(r) for r in rows]}, indent=1) + "\n"
    )
    (out / "README.md").write_text(markdown(rows, meta))
    plots(rows, out, float(str(meta["rate_mbit"])))


def replot(out: Path) -> None:
    """README and plots again from a run's results.json (no new measurements)."""
    data = json.loads((out / "results.json").read_text())
    write([Row(**r) for r in data["rows"]], data["meta"], out)


def run(
    buffers: list[int],
    policies: list[str],
    *,
    rate_mbit: float,
    calls: int,
    seconds: float,
    flows: int,
    run_dir: Path,
    switch_rt: bool = True,
    warmup_s: float = TCP_WARMUP_S,
    cc: str = TCP_CC,
) -> list[Row]:
    """The matrix on one testbed: the switch is reconfigured between cells, and the
    stack restarted (the testbed kept, and held) for each egress AQM."""
    groups: dict[str | None, list[str]] = {}
    for pol in policies:
        groups.setdefault(AQM.get(pol), []).append(pol)
    stack = Stack(stack_config(run_dir.resolve(), rate_mbit))
    rows: list[Row] = []
    try:
        for i, (aqm, pols) in enumerate(groups.items()):
            if i:
                stack.down(keep_testbed=True)
            stack.cfg.switch_args = stack_config(run_dir, rate_mbit, aqm).switch_args
            stack.up()
            if switch_rt:
                realtime(stack.sup.procs["softswitch"].popen.pid)
            rows += _group(
                stack, buffers, pols, rate_mbit, calls, seconds, flows, run_dir, warmup_s, cc
            )
    finally:
        stack.down()
    order = {p: i for i, p in enumerate(POLICIES)}
    return sorted(rows, key=lambda r: (r.buffer, order[r.policy]))


def _group(
    stack: Stack,
    buffers: list[int],
    policies: list[str],
    rate_mbit: float,
    calls: int,
    seconds: float,
    flows: int,
    run_dir: Path,
    warmup_s: float,
    cc: str,
) -> list[Row]:
    rows: list[Row] = []
    for b in buffers:
        for pol in policies:
            row = run_cell(
                stack,
                b,
                pol,
                calls=calls,
                seconds=seconds,
                flows=flows,
                out_dir=run_dir / "raw",
                warmup_s=warmup_s,
                cc=cc,
            )
            rows.append(row)
            print(
                f"{b:5} {pol:12} RTT {row.rtt_ms_mean:7.1f} ms (p99 {row.rtt_ms_p99:7.1f}), "
                f"TCP {row.tcp_mbps:5.1f} Mbit/s, drops {row.drop_rate_pct:.3f} %, "
                f"calls {row.calls_ok}/{row.calls}, RTP loss {row.rtp_loss_pct:.2f} %, "
                f"MOS min {_f(row.mos_min)}",
                flush=True,
            )
            if dead := stack.dead():
                raise StartError(f"testbed processes died: {', '.join(dead)}")
            time.sleep(3)  # BYEs and deletes drain before the next cell
    return rows


def merge(
    out: Path, rows: list[Row], meta: dict[str, object]
) -> tuple[list[Row], dict[str, object]]:
    """This run's rows over those of an earlier run in `out` (other buffers or
    policies), for a matrix measured in several runs of the same settings."""
    f = out / "results.json"
    if not f.exists():
        return rows, {**meta, "runs": [meta["command"]]}
    old = json.loads(f.read_text())
    same = ("rate_mbit", "calls", "seconds", "flows", "warmup_s", "cc")
    if diff := [k for k in same if old["meta"].get(k) != meta.get(k)]:
        raise SystemExit(f"ired-experiment: --merge: {out} was run with other {', '.join(diff)}")
    new = {(r.buffer, r.policy) for r in rows}
    kept = [Row(**r) for r in old["rows"] if (r["buffer"], r["policy"]) not in new]
    order = {p: i for i, p in enumerate(POLICIES)}
    merged = sorted(kept + rows, key=lambda r: (r.buffer, order[r.policy]))
    runs = [c for c in old["meta"].get("runs", [old["meta"]["command"]]) if isinstance(c, str)]
    return merged, {**meta, "runs": [*runs, meta["command"]]}


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
    ap.add_argument("--rate-mbit", type=float, default=30.0, help="bottleneck port rate (30)")
    ap.add_argument("--calls", type=int, default=20, help="concurrent calls (20)")
    ap.add_argument("--seconds", type=float, default=30.0, help="measured seconds per cell (30)")
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
    try:
        rows = run(
            buffers,
            policies,
            rate_mbit=a.rate_mbit,
            calls=a.calls,
            seconds=a.seconds,
            flows=a.flows,
            run_dir=a.run_dir,
            switch_rt=a.switch_priority == "rt",
            warmup_s=a.warmup,
            cc=a.cc,
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
    }
    if a.merge:
        rows, meta = merge(a.out, rows, meta)
    write(rows, meta, a.out)
    print(markdown(rows, meta))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
