"""The iRED experiment's results: one `Row` per cell and run, the table (mean and
95 % interval per cell over its runs), the side-by-side comparison with the
paper's claim, and the plots with error bars; written from a run or again from
its results.json."""

from __future__ import annotations

import json
import math
import statistics
from collections.abc import Callable, Iterable
from dataclasses import asdict, dataclass, field
from operator import attrgetter
from pathlib import Path

# Table I of the paper: buffer size reference (packets) -> N.
TABLE_I: dict[int, int] = {64: 4, 128: 8, 256: 16, 512: 32, 1024: 64}
POLICIES = ("taildrop", "ired", "ired-enq", "ired-protect", "codel", "pi2")
EGRESS = ("taildrop", "codel", "pi2")  # what iRED is compared with: no iRED, a limited buffer
FRAME = 1514  # the paper's packets (and iperf3's full-size segments)
PHYSICAL_QUEUE = 4096  # packets: deeper than any reference, so only iRED drops in its cells
MOS_TARGET = 4.2
# The egress-drop AQMs: the softswitch's --port-aqm on the bottleneck port, with the
# paper's parameters (CoDel: Table II; PI2: Table III, target 20 ms, PI update every
# 33 ms, alpha 0.3125 Hz, beta 3.125 Hz).
AQM: dict[str, str] = {"codel": "codel:5000:100000", "pi2": "pi2:20000:33000:0.3125:3.125"}
TCP_WARMUP_S = 10.0
# The bottleneck's rate (--rate-mbit's default) and why: the experiment is specified
# for 20-50 Mbit/s and the paper gives no rate.
RATE_MBIT = 50.0
RATE_WHY = (
    "Rate: 50 Mbit/s, the top of the range this experiment is specified for (20-50 "
    "Mbit/s), because it is the nearest to the paper's regime, which the paper does not "
    "state but implies: it finds iRED's RTT below CoDel's at the 128-packet reference, "
    "where iRED's queue sits near minThsld, 56 full frames, and CoDel's near its 5 ms "
    "target plus TCP's swings around it. 56 frames of 1514 bytes take 22.6 ms at 30 "
    "Mbit/s and 13.6 ms at 50; under 10 ms only above 68 Mbit/s. The testbed keeps up "
    "at 50: the switch drops no frame at its RX rings (switch RX drops) and TCP's "
    "goodput stays at the port rate less its headers. The rate is the one parameter set "
    "after seeing a result: a probe at 30 Mbit/s (64 packets, one run, with the egress "
    "AQMs in the tail-drop mode's buffer, a queue model since replaced) put CoDel's RTT "
    "level with iRED's, where the paper has iRED's lower. Nothing else is chosen from the "
    "results."
)
MAX_RUNS = 10
# Student's t, 97.5th percentile, by degrees of freedom 1..MAX_RUNS-1: the 95 %
# interval of a mean over a few runs (a table: scipy is not a dependency for nine numbers).
T975 = (12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262)


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
    queue_drops: int  # the queue's own tail drops: the baselines' buffer; 0 in iRED's cells
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
    run: int = 1  # which pass over the matrix (1..runs)
    per_call: list[dict[str, float | int | None]] = field(default_factory=list)


@dataclass(frozen=True)
class Stat:
    """A figure over a cell's runs: mean and the half-width of its 95 % interval
    (Student's t; 0 for one run)."""

    mean: float
    half: float
    n: int

    def text(self, digits: int = 1) -> str:
        if self.n < 2:
            return f"{self.mean:.{digits}f}"
        return f"{self.mean:.{digits}f} ± {self.half:.{digits}f}"


def stat(values: Iterable[float]) -> Stat:
    xs = [x for x in values if not math.isnan(x)]
    if not xs:
        return Stat(float("nan"), 0.0, 0)
    if len(xs) < 2:
        return Stat(xs[0], 0.0, 1)
    t = T975[min(len(xs), MAX_RUNS) - 2]
    return Stat(statistics.fmean(xs), t * statistics.stdev(xs) / math.sqrt(len(xs)), len(xs))


def by_cell(rows: list[Row]) -> dict[tuple[int, str], list[Row]]:
    """Each cell's runs, cells in table order (buffer, then POLICIES)."""
    order = {p: i for i, p in enumerate(POLICIES)}
    out: dict[tuple[int, str], list[Row]] = {}
    for r in sorted(rows, key=lambda r: (r.buffer, order[r.policy], r.run)):
        out.setdefault((r.buffer, r.policy), []).append(r)
    return out


def _of(rs: list[Row], attr: str) -> Stat:
    return stat(float(getattr(r, attr)) for r in rs)


PAPER = (
    "The paper (de Almeida et al., iRED, Experiment 1: one TCP flow of 1514-byte packets "
    "through a BMv2 router, 60 s x 5 runs per setting) finds iRED's mean RTT up to 2.48x "
    "lower than PI2's at a 64-packet reference, CoDel and PI2 statistically the same as "
    "iRED from 256 packets on, iRED's throughput up to 0.74x higher than PI2's, and "
    "0.038 % of packets dropped/recirculated at 64, 0.005 % at 1024."
)


def aqm_params(spec: str) -> dict[str, float]:
    """An AQM's `--port-aqm` values in ms and Hz: codel:TARGET_US:INTERVAL_US or
    pi2:TARGET_US:TUPDATE_US:ALPHA_HZ:BETA_HZ (the experiment passes them all)."""
    kind, *vals = spec.split(":")
    names = {"codel": ("target", "interval"), "pi2": ("target", "tupdate", "alpha", "beta")}
    if kind not in names or len(vals) != len(names[kind]):
        raise ValueError(f"{spec!r}: not an AQM spec the experiment writes")
    return {
        k: float(v) / 1000 if k in ("target", "interval", "tupdate") else float(v)
        for k, v in zip(names[kind], vals, strict=True)
    }


def aqm_text(aqm: dict[str, str]) -> str:
    """The egress AQMs as they ran: CoDel's and PI2's values."""
    c, p = aqm_params(aqm["codel"]), aqm_params(aqm["pi2"])
    return (
        f"CoDel (RFC 8289) at target {c['target']:g} ms / interval {c['interval']:g} ms "
        "(the paper's Table II), PI2 (RFC 9332's Classic AQM, drop chance p'^2) at target "
        f"{p['target']:g} ms with its PI controller updated every {p['tupdate']:g} ms, "
        f"alpha {p['alpha']:g} Hz, beta {p['beta']:g} Hz (the paper's Table III; RFC 9332's "
        "defaults are 16 ms, 0.16 Hz and 3.2 Hz)"
    )


def _vs_targets(ms: float, codel_ms: float, pi2_ms: float) -> str:
    def rel(target: float, name: str) -> str:
        return f"{'below' if ms < target else 'above'} {name}'s {target:g} ms"

    return f"{rel(pi2_ms, 'PI2')} and {rel(codel_ms, 'CoDel')}"


def setup_vs_paper(rate_mbit: float, aqm: dict[str, str]) -> list[str]:
    """How this setup differs from the paper's, and which way each difference leans."""

    def ms(frames: int) -> float:
        return frames * FRAME * 8 / (rate_mbit * 1e3)

    codel_t, pi2_t = aqm_params(aqm["codel"])["target"], aqm_params(aqm["pi2"])["target"]
    # the smallest reference whose full buffer holds PI2's target delay
    pi2_free = next((b for b in TABLE_I if ms(b) > pi2_t), None)
    binds = f"a 64-frame buffer is {ms(64):.1f} ms of queue at {rate_mbit:g} Mbit/s, "
    if ms(64) <= pi2_t:
        binds += (
            f"below PI2's {pi2_t:g} ms target, so PI2 never reaches its target there and "
            "drops as tail drop does"
        )
    else:
        binds += f"close to PI2's {pi2_t:g} ms target, so PI2 at 64 behaves much as tail drop does"
    if pi2_free and pi2_free > 64:
        binds += f"; from {pi2_free} packets on the buffer holds more than the target"
    thresholds = "; ".join(
        f"{ms(b // 2 - n):.1f} ms at {b} ({b // 2 - n} frames), "
        + _vs_targets(ms(b // 2 - n), codel_t, pi2_t)
        for b, n in TABLE_I.items()
        if b <= 256
    )
    return [
        "How this setup differs from the paper's, and which way each difference leans:",
        "",
        "* Buffer of the egress AQMs. The paper ran CoDel and PI2 once, in a 10,000-packet "
        "buffer, and compared that with iRED at each reference; here they run at every "
        "reference in a buffer of maxLenQueue (the same buffer as tail drop and iRED). At "
        f"small references this caps their standing queue by tail drop, which favours them: "
        f"{binds}. Where the buffer no longer binds they run as in the paper.",
        "* Parameters. CoDel's and PI2's are the paper's (Tables II and III); the target "
        "sets the standing delay each AQM steers to, PI2's gains how fast it gets there.",
        "* Rate. iRED's thresholds are in packets, the AQMs' targets in time, so the ratio "
        f"between them depends on the port rate. At {rate_mbit:g} Mbit/s minThsld is "
        f"{thresholds}; "
        "where minThsld is above a target, iRED's RTT is higher than that AQM's, as a RED "
        "with those thresholds must be. The paper's BMv2 rate is not given.",
        "* Where iRED decides. As on Tofino and in the paper: in the egress pipeline, as a "
        "packet leaves the shaped queue, from the queue's depth as it leaves (deq_qdepth; "
        "ired-enq: the depth it found when it was queued, one sojourn older); the "
        "feedback copy reaches ingress one sojourn later and the next packet to the port is "
        "dropped there. CoDel and PI2 decide at the same point and drop the deciding packet "
        "itself. iRED's parameters are the paper's (Table I's N, n = 1, the coin 2 / (N + 1)); "
        "none is tuned here.",
        "* Traffic. Several CUBIC flows (the paper: one), ping every 50 ms and the media of "
        "relayed calls share the port.",
    ]


def as_the_paper(rows: list[Row]) -> list[str]:
    """The paper's own comparison: iRED at each reference against CoDel and PI2 run once
    in a buffer that never binds (its 10,000 packets; here the largest reference
    measured, whose queue time is far above both targets). Ratios of the means, RTT
    egress / iRED and TCP iRED / egress."""
    by = by_cell(rows)
    aqm_buffer = max((b for (b, p) in by if p in ("codel", "pi2")), default=None)
    if aqm_buffer is None:
        return []
    out: list[str] = []
    for b in sorted({b for (b, p) in by if p == "ired"}):
        r = by[b, "ired"]
        cols: list[str] = []
        for base in ("codel", "pi2"):
            e = by.get((aqm_buffer, base))
            if e is None:
                cols += ["-", "-"]
                continue
            rtt = _of(e, "rtt_ms_mean").mean / _of(r, "rtt_ms_mean").mean
            tcp = _of(r, "tcp_mbps").mean / _of(e, "tcp_mbps").mean
            cols += [f"{rtt:.2f}x", f"{tcp:.2f}x"]
        recirc = stat(100.0 * x.decisions / x.port_packets for x in r if x.port_packets)
        out.append(
            f"| {b} | {_of(r, 'rtt_ms_mean').text()} | " + " | ".join(cols) + f" | "
            f"{recirc.text(3)} | {_of(r, 'drop_rate_pct').text(3)} |"
        )
    if not out:
        return []
    return [
        f"As the paper compares: iRED (any packet) at each reference against CoDel and PI2 in "
        f"the {aqm_buffer}-packet buffer, which does not bind them (the paper ran them once, "
        "in 10,000 packets):",
        "",
        "| iRED buffer | iRED RTT ms mean | RTT: CoDel / iRED | TCP: iRED / CoDel | "
        "RTT: PI2 / iRED | TCP: iRED / PI2 | iRED recirculated % | iRED dropped % |",
        "|---:|---:|---:|---:|---:|---:|---:|---:|",
        *out,
    ]


def samples(rows: list[Row]) -> list[str]:
    """iRED's average of deq_qdepth (ired) against enq_qdepth (ired-enq), per buffer:
    ratios of the means, enq / deq, with the range of the single passes' ratios."""
    by = by_cell(rows)
    out: list[str] = []
    for b in sorted({r.buffer for r in rows}):
        d, e = by.get((b, "ired")), by.get((b, "ired-enq"))
        if d is None or e is None:
            continue
        cols = [
            f"{_of(d, a).text(k)} / {_of(e, a).text(k)} | {_ratio(e, d, attrgetter(a))}"
            for a, k in (("rtt_ms_mean", 1), ("rtt_ms_p99", 1), ("drop_rate_pct", 3))
        ]
        out.append(
            f"| {b} | " + " | ".join(cols) + f" | {_of(d, 'tcp_mbps').mean:.1f} / "
            f"{_of(e, 'tcp_mbps').mean:.1f} | {_of(d, 'rtp_loss_pct').mean:.2f} / "
            f"{_of(e, 'rtp_loss_pct').mean:.2f} | {_f(_worst(d))} / {_f(_worst(e))} |"
        )
    if not out:
        return []
    return [
        "iRED's average, side by side in the same passes: deq_qdepth (ired) / enq_qdepth "
        "(ired-enq), and the ratio enq / deq:",
        "",
        "| buffer | RTT ms mean: deq / enq | enq / deq | RTT ms p99: deq / enq | enq / deq | "
        "drop rate %: deq / enq | enq / deq | TCP Mbit/s: deq / enq | RTP loss %: deq / enq | "
        "worst call MOS: deq / enq |",
        "|---:|---|---:|---|---:|---|---:|---|---|---|",
        *out,
        "",
        "The program averages deq_qdepth, the queue as the deciding packet leaves it "
        "(docs/design/ired.md says why, from this table).",
    ]


def summary(rows: list[Row], rate_mbit: float) -> list[str]:
    """The paper's claim and ours, measured: per buffer, iRED against each egress
    alternative: ratios of the means over the runs, with the range of the ratios of
    the runs taken one pass at a time (each pass measures every policy once)."""
    by = by_cell(rows)
    out: list[str] = []
    for b in sorted({r.buffer for r in rows}):
        for base in EGRESS:
            e = by.get((b, base))
            for pol in ("ired", "ired-protect"):
                r = by.get((b, pol))
                if e is None or r is None:
                    continue
                rtt = _ratio(e, r, lambda x: x.rtt_ms_mean)
                p99 = _ratio(e, r, lambda x: x.rtt_ms_p99)
                tcp = _ratio(r, e, lambda x: x.tcp_mbps)
                if not (rtt and p99 and tcp):
                    continue
                out.append(
                    f"| {b} | {pol} | {base} | {rtt} | {p99} | {tcp} | "
                    f"{100 * _of(r, 'tcp_mbps').mean / rate_mbit:.0f} % | "
                    f"{_f(_worst(e))} -> {_f(_worst(r))} | "
                    f"{_mos_ok(e)} -> {_mos_ok(r)} |"
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
        "Ratios are of the means over the runs; [a-b] is the range of the ratios of single "
        "passes (the runs of one pass are measured minutes apart, every policy once). Goodput "
        "counts TCP payload only: with its TCP/IP headers (1514-byte frames for 1448 bytes of "
        "payload) and the calls' media beside it the port is full.",
    ]


def _ratio(num: list[Row], den: list[Row], f: Callable[[Row], float]) -> str:
    a, b = stat(f(x) for x in num).mean, stat(f(x) for x in den).mean
    if not b or math.isnan(a) or math.isnan(b):
        return ""
    dn = {x.run: f(x) for x in den}
    per = [f(x) / dn[x.run] for x in num if dn.get(x.run)]
    span = f" [{min(per):.2f}-{max(per):.2f}]" if len(per) > 1 else ""
    return f"{a / b:.2f}x{span}"


def _worst(rs: list[Row]) -> float | None:
    ms = [r.mos_min for r in rs if r.mos_min is not None]
    return min(ms) if ms else None


def _mos_ok(rs: list[Row]) -> str:
    return f"{sum(r.calls_mos_ok for r in rs)}/{sum(len(r.per_call) for r in rs)}"


def _load(rows: list[Row]) -> str:
    loads = [r.load_1m for r in rows]
    if not loads:
        return "-"
    return (
        f"1-minute load average at the cells' ends: median {statistics.median(loads):.1f}, "
        f"min {min(loads):.1f}, max {max(loads):.1f} (2 cores)"
    )


def markdown(
    rows: list[Row],
    meta: dict[str, object],
    probed: list[tuple[dict[str, object], list[Row]]] | None = None,
) -> str:
    mach = meta.get("machine")
    reps = int(str(meta.get("repetitions", 1)))
    lines = [
        "# iRED vs tail drop, CoDel and PI2: a congested port carrying TCP bulk flows, ping "
        "and relayed calls",
        "",
        f"Command: `{meta['command']}`",
        "",
        "Machine: "
        + (", ".join(f"{k} {v}" for k, v in mach.items()) if isinstance(mach, dict) else str(mach)),
        "",
        f"Load: {_load(rows)}. The machine is shared with other jobs.",
        "",
        f"Bottleneck: the softswitch's port {meta.get('port', 3)} (towards the UAS host) at "
        f"{meta['rate_mbit']} Mbit/s; its physical queue {PHYSICAL_QUEUE} packets, so in "
        f"iRED's cells only iRED drops. Through it: {meta['flows']} iperf3 TCP flows "
        f"({meta.get('cc', 'the system default congestion control')}; NAT host -> UAS host), "
        "ping every 50 ms (attacker host -> UAS host) and the caller->callee media of "
        f"{meta['calls']} SIPp calls (G.711, 50 packets/s) relayed by the switch. Each cell: "
        f"{meta['seconds']} s measured after {meta.get('warmup_s', TCP_WARMUP_S)} s of TCP "
        f"start-up, {reps} run{'s' if reps != 1 else ''} (the paper: 60 s x 5); the runs are "
        "passes over the whole matrix, one after the other, so a change in the machine's "
        "load falls on every policy alike. The testbed runs at nice "
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
        "Queue model: the baselines' buffer is the queue's own limit, as the traffic "
        "manager's: a packet arriving to maxLenQueue cells or more is refused before it is "
        "queued and holds no place in it. iRED's tail-drop mode (a drop in egress of what "
        "found the buffer full) is not a baseline here: on the ASIC as in the softswitch its "
        "doomed packets wait in the queue and count in the depth of those behind them, so it "
        "drops every arrival for a buffer's drain time (docs/design/ired.md).",
        "",
        "Policies: taildrop = the port's queue with a buffer of maxLenQueue: a packet that "
        "arrives to a full buffer is never queued, as the traffic manager's tail drop "
        "(softswitch `--port-queue-cells`, restarted per buffer); ired = iRED, any packet, "
        "averaging deq_qdepth (the P4 program's); ired-enq = the same averaging enq_qdepth "
        "(softswitch `--ired-sample enq`, the program built with -DIRED_SAMPLE_ENQ); "
        "ired-protect = iRED sparing relay hits and DSCP EF; codel / pi2 = the egress-drop "
        "AQMs of the paper's comparison in the same switch queue (softswitch `--port-aqm`): "
        f"{aqm_text(_aqm(meta))}, each deciding and dropping as a packet leaves the queue, "
        "in taildrop's buffer of maxLenQueue (its drops count with the AQM's). The kernel "
        "here has no CoDel or PIE qdisc, and the switch's port is the bottleneck of every "
        "policy.",
        "",
        "Figures: mean ± the half-width of its 95 % interval over the cell's runs (Student's "
        "t); counts are per run (mean), calls and MOS over all runs. Drop rate: the policy's "
        "drops (iRED's ingress drops, the tail drops at the buffer, the AQM's drops) over the "
        "packets that reached the port. Jitter: per call, the mean |D_i - D_i-1| of its "
        "one-way delay (median over calls, max over calls); MOS: G.107 E-model per call "
        "(G.711 with PLC) from its loss, delay and jitter. Load 1m (max over the runs) and "
        "switch RX drops (all runs) say how busy the shared 2-core machine was: iRED decides "
        "when a packet leaves the queue, so a softswitch starved of CPU decides late while "
        "TCP keeps filling the queue (tail drop limits the depth at enqueue and is not "
        "delayed that way).",
        "",
        "| buffer | N | min/max thsld | policy | runs | RTT ms mean | RTT ms p99 | ping loss % | "
        "TCP Mbit/s | retransmits | drop rate % | decisions | spared | calls ok | RTP loss % | "
        "delay ms p50 / p99 | jitter ms p50 / max | MOS min / p50 | "
        f"calls MOS >= {MOS_TARGET} | load 1m | switch RX drops |",
        "|---:|---:|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|---|---|"
        "---:|---:|---:|",
    ]
    for (b, pol), rs in by_cell(rows).items():
        r0 = rs[0]
        egress = pol in EGRESS
        moses = [r.mos_median for r in rs if r.mos_median is not None]
        rx = [r.switch_rx_drops for r in rs]
        lines.append(
            f"| {b} | {'-' if egress else r0.n} | "
            f"{'-' if egress else f'{r0.min_thsld}/{r0.max_thsld}'} | {pol} | {len(rs)} | "
            f"{_of(rs, 'rtt_ms_mean').text()} | {_of(rs, 'rtt_ms_p99').text()} | "
            f"{_of(rs, 'ping_loss_pct').text()} | {_of(rs, 'tcp_mbps').text()} | "
            f"{_of(rs, 'tcp_retransmits').mean:.0f} | {_of(rs, 'drop_rate_pct').text(3)} | "
            f"{_of(rs, 'decisions').mean:.0f} | {_of(rs, 'spared').mean:.0f} | "
            f"{sum(r.calls_ok for r in rs)}/{sum(r.calls for r in rs)} | "
            f"{_of(rs, 'rtp_loss_pct').text(2)} | "
            f"{_of(rs, 'delay_ms_median').mean:.1f} / {_of(rs, 'delay_ms_p99').mean:.1f} | "
            f"{_of(rs, 'jitter_ms_median').mean:.2f} / "
            f"{max(r.jitter_ms_max for r in rs):.2f} | "
            f"{_f(_worst(rs))} / {_f(statistics.median(moses) if moses else None)} | "
            f"{_mos_ok(rs)} | {max(r.load_1m for r in rs):.1f} | "
            f"{'-' if any(x < 0 for x in rx) else sum(rx)} |"
        )
    s = summary(rows, float(str(meta["rate_mbit"])))
    if s:
        lines += ["", "Side by side, at the same buffer:", "", *s]
    if p := as_the_paper(rows):
        lines += ["", *p]
    if sm := samples(rows):
        lines += ["", *sm]
    rate = float(str(meta["rate_mbit"]))
    if rate == RATE_MBIT:
        lines += ["", RATE_WHY]
    if pl := probe_lines(probed or []):
        lines += ["", *pl]
    lines += [
        "",
        PAPER,
        "",
        *setup_vs_paper(rate, _aqm(meta)),
        "",
        *[f"Run: `{c}`" for c in _runs(meta)],
        "",
        "Plots: `rtt.png` (RTT mean and p99), `throughput.png` (TCP goodput), "
        "`drops.png` (policy drop rate), each a cell's mean with its 95 % interval as the "
        "error bar; `calls.png` (RTP loss, jitter and MOS per call, every run). Per-run and "
        "per-call figures are in `results.json`.",
    ]
    return "\n".join(lines) + "\n"


def _aqm(meta: dict[str, object]) -> dict[str, str]:
    """The AQMs' values the run recorded (AQM for results without them)."""
    got = meta.get("aqm")
    return {k: str(v) for k, v in got.items()} if isinstance(got, dict) else AQM


def _runs(meta: dict[str, object]) -> list[str]:
    runs = meta.get("runs")
    return [c for c in runs if isinstance(c, str)] if isinstance(runs, list) else []


def _f(x: float | None) -> str:
    return f"{x:.2f}" if x is not None else "-"


COLORS = {
    "taildrop": "tab:red",
    "ired": "tab:orange",
    "ired-enq": "tab:brown",
    "ired-protect": "tab:blue",
    "codel": "tab:green",
    "pi2": "tab:purple",
}
# Each policy's points a little apart on the (log) buffer axis, so error bars do not overlap.
OFFSETS = {
    "taildrop": 0.88,
    "codel": 0.92,
    "pi2": 0.96,
    "ired": 1.0,
    "ired-enq": 1.04,
    "ired-protect": 1.08,
}


def plots(rows: list[Row], out: Path, rate_mbit: float) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    by = by_cell(rows)

    def series(ax: object, attr: str, style: str = "o-", suffix: str = "") -> None:
        for pol in POLICIES:
            bs = sorted(b for (b, p) in by if p == pol)
            if bs:
                st = [_of(by[b, pol], attr) for b in bs]
                ax.errorbar(  # type: ignore[attr-defined]
                    [b * OFFSETS[pol] for b in bs],
                    [s.mean for s in st],
                    yerr=[s.half for s in st],
                    fmt=style,
                    capsize=3,
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
                        xs.append(r.buffer * OFFSETS[pol])
                        ys.append(float(v))
            if xs:
                ax.scatter(xs, ys, s=10, alpha=0.6, color=COLORS[pol], label=pol)
        if key == "mos":
            ax.axhline(MOS_TARGET, color="black", lw=0.8, ls="--")
        finish(ax, label)
    fig.tight_layout()
    fig.savefig(out / "calls.png", dpi=110)
    plt.close(fig)


PROBES = "probes"  # in the results directory: results.json of short runs at other settings


def probes(out: Path) -> list[tuple[dict[str, object], list[Row]]]:
    """The probe runs kept beside the matrix (`PROBES/*.json`: a run's results.json),
    by rate."""
    got = []
    for f in sorted((out / PROBES).glob("*.json")):
        data = json.loads(f.read_text())
        got.append((data["meta"], [Row(**r) for r in data["rows"]]))
    return sorted(got, key=lambda p: float(str(p[0]["rate_mbit"])))


def probe_lines(found: list[tuple[dict[str, object], list[Row]]]) -> list[str]:
    """The probes as one table: each cell's figures and its RTT against iRED's at
    the same rate and buffer (a probe's single runs, not the matrix's means)."""
    out: list[str] = []
    for meta, rows in found:
        by = by_cell(rows)
        for (b, pol), rs in by.items():
            ired = next((by[b, q] for q in ("ired-protect", "ired") if (b, q) in by), None)
            vs = (
                f"{_of(rs, 'rtt_ms_mean').mean / _of(ired, 'rtt_ms_mean').mean:.2f}x / "
                f"{_of(rs, 'rtt_ms_p99').mean / _of(ired, 'rtt_ms_p99').mean:.2f}x"
                if ired is not None and ired is not rs
                else "-"
            )
            out.append(
                f"| {meta['rate_mbit']} | {b} | {pol} | {len(rs)} | "
                f"{_of(rs, 'rtt_ms_mean').text()} | {_of(rs, 'rtt_ms_p99').text()} | "
                f"{_of(rs, 'tcp_mbps').text()} | {vs} | {_f(_worst(rs))} | "
                f"{max(r.load_1m for r in rs):.1f} |"
            )
    if not out:
        return []
    cmds = "; ".join(f"`{m['command']}`" for m, _ in found)
    return [
        "Probes, not part of the table above (single short runs before the matrix, same "
        f"settings but the rate, kept in `{PROBES}/`): {cmds}",
        "",
        "| rate Mbit/s | buffer | policy | runs | RTT ms mean | RTT ms p99 | TCP Mbit/s | "
        "RTT mean / p99 against iRED's | worst call MOS | load 1m |",
        "|---:|---:|---|---:|---:|---:|---:|---:|---:|---:|",
        *out,
    ]


def write(rows: list[Row], meta: dict[str, object], out: Path) -> None:
    out.mkdir(parents=True, exist_ok=True)
    (out / "results.json").write_text(
        json.dumps({"meta": meta, "rows": [asdict(r) for r in rows]}, indent=1) + "\n"
    )
    (out / "README.md").write_text(markdown(rows, meta, probes(out)))
    plots(rows, out, float(str(meta["rate_mbit"])))


def replot(out: Path) -> None:
    """README and plots again from a run's results.json (no new measurements)."""
    data = json.loads((out / "results.json").read_text())
    write([Row(**r) for r in data["rows"]], data["meta"], out)


def merge(
    out: Path, rows: list[Row], meta: dict[str, object]
) -> tuple[list[Row], dict[str, object]]:
    """This run's rows over those of an earlier run in `out` (other buffers or
    policies), for a matrix measured in several runs of the same settings: a
    cell this run measured takes only this run's passes."""
    f = out / "results.json"
    if not f.exists():
        return rows, {**meta, "runs": [meta["command"]]}
    old = json.loads(f.read_text())
    same = ("rate_mbit", "calls", "seconds", "flows", "warmup_s", "cc", "aqm")
    if diff := [k for k in same if old["meta"].get(k) != meta.get(k)]:
        raise SystemExit(f"ired-experiment: --merge: {out} was run with other {', '.join(diff)}")
    new = {(r.buffer, r.policy) for r in rows}
    kept = [Row(**r) for r in old["rows"] if (r["buffer"], r["policy"]) not in new]
    merged = [r for rs in by_cell(kept + rows).values() for r in rs]
    runs = [c for c in old["meta"].get("runs", [old["meta"]["command"]]) if isinstance(c, str)]
    return merged, {**meta, "runs": [*runs, meta["command"]]}
