"""Congestion reroute with SIP calls, Tables I and II of Esquivel Morel et al.
(MRI + port-forwarding reroute) on the three-switch fabric.

The whole stack runs as for the relay experiment (stack.py: server,
collector, RTPProxy + rtpagent, OpenSIPS or Kamailio, SIPp) with its switch
replaced by the fabric of reroute_bed.py (`STACK`): the UAC and the relay
behind s1, the UAS behind s2, s1-s2 shaped to `--rate-bps`, s1-s3-s2 around.
SIPp places `--calls` concurrent G.711 calls through the SIP server;
rtpagent offloads each to s1, which relays its media to the UAS over the
bottleneck. After the calls are up, iperf3 UDP cross traffic at 2x and 4x
the bottleneck's rate shares the s1-s2 link for `--cross-seconds`. Without
reroute the calls lose what the cross traffic leaves them; with it, s1's
switch control plane (`p4relay-controlplane`) has the UAS subnet watched (t_q, m) with the
backup by s3, and the data plane moves the calls there.

Per call, its caller->callee RTP stream (the direction over the bottleneck),
captured as the UAC sends and as the UAS receives (capture.py): loss %, the
longest gap between arrivals, packets/s arrived, one-way delay and MOS
(G.107 E-model, the server's). The server's side: the reroute events it
stored, and the calls whose session detail lists the reroute.

  python -m p4relay_scenarios reroute-experiment --cross 2,4 --calls 4 \\
      --out scenarios/results/reroute
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import math
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import asdict, dataclass
from pathlib import Path

from p4relay_scenarios import capture
from p4relay_scenarios import reroute_bed as bed
from p4relay_scenarios.demo import start_pg, stop_pg
from p4relay_scenarios.experiment import machine, recorded_command, switch_drops
from p4relay_scenarios.load import Profile, UacResult, run_uac
from p4relay_scenarios.stack import (
    FABRIC_SWITCHES,
    RELAY_PORTS,
    ROOT,
    SIP_SERVERS,
    SWITCH_METRICS,
    SipServer,
    Stack,
    StackConfig,
)

LAYOUT = bed.STACK
PG_DIR = ROOT / "build" / "reroute-pg"
PG_PORT = 55439


@dataclass
class Call:
    cross: float
    reroute: bool
    call: int
    sent: int
    received: int
    loss_pct: float
    max_interarrival_ms: float
    pps: float
    delay_ms_mean: float
    delay_ms_max: float
    mos: float | None


@dataclass
class Row:
    cross: float
    reroute: bool
    calls_ok: int
    calls_failed: int
    streams: int
    loss_pct_mean: float
    loss_pct_max: float
    max_interarrival_ms: float
    pps_mean: float
    delay_ms_median: float
    delay_ms_max: float
    mos_min: float | None
    mos_median: float | None
    reroute_after_ms: float | None  # first reroute event's time after the cross traffic started
    cross_loss_pct: float
    reroute_events: int  # reroute events the server stored
    sessions_with_reroute: int  # calls whose session detail lists a reroute
    # Frames the three softswitches lost from their RX rings while their threads
    # waited for a CPU (the shared machine, not the congestion)
    rx_ring_drops: int


def _ns(name: str, *cmd: str) -> list[str]:
    return ["ip", "netns", "exec", name, *cmd]


def _f(x: float, nd: int = 1) -> float:
    return x if math.isnan(x) else round(x, nd)


def run_one(
    cross: float,
    reroute: bool,
    *,
    calls: int,
    lead_s: float,
    cross_s: float,
    tail_s: float,
    rate_bps: int,
    t_q_us: float,
    m: int,
    sip: SipServer,
    run_dir: Path,
    database_url: str,
    queue_depth: int = 128,
) -> tuple[Row, list[Call]]:
    stack = Stack(
        StackConfig(
            run_dir=run_dir,
            database_url=database_url,
            sip=sip,
            fabric=True,
            collector_metrics_port=0,
            switch_args=[
                "--port-rate",
                f"{LAYOUT.bottleneck[1]}={rate_bps}",
                "--queue-depth",
                str(queue_depth),
            ],
        )
    )
    # One database serves every run: this run's events and calls are those after its start.
    run_start = dt.datetime.now(dt.UTC)
    try:
        stack.up()
        if reroute:
            stack.reroute(t_q_us=t_q_us, m=m, hold_ms=600_000)
            stack.sup.wait_ready(
                "reroute",
                lambda: '"config_applied"' in stack.sup.procs["reroute"].log_tail(50),
                30,
                "flow classes and watch installed",
            )
        caps = capture.start_captures(stack.sup, run_dir / "pcap", RELAY_PORTS)
        iperf_s = subprocess.Popen(
            _ns(LAYOUT.xdst.netns, "iperf3", "-s", "-1", "-B", LAYOUT.xdst.addr),
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        hold_s = lead_s + cross_s + tail_s
        profile = Profile("reroute", rate=float(calls), calls=calls, hold_s=hold_s, limit=calls)
        uac: list[UacResult] = []
        t_uac = threading.Thread(
            target=lambda: uac.append(run_uac(profile, stack.media_dir, run_dir / "sipp")),
            daemon=True,
        )
        t_uac.start()
        time.sleep(1.0 + lead_s)  # the calls are placed (1 s) and offloaded
        t_cross = dt.datetime.now(dt.UTC)
        cross_run = subprocess.run(
            [
                *_ns(LAYOUT.xsrc.netns, "iperf3", "-c", LAYOUT.xdst.addr, "-u"),
                *("-b", str(int(cross * rate_bps)), "-l", "1000", "-t", str(int(cross_s))),
                "--json",
            ],
            capture_output=True,
            text=True,
            timeout=cross_s + 30,
            check=False,
        )
        t_uac.join(hold_s + 90)
        iperf_s.wait(10)
        time.sleep(2.0)  # the last packets reach the far end's capture
        capture.stop_captures(stack.sup, caps)
        rx_drops = sum(
            max(0, switch_drops(m)[0])
            for m in (SWITCH_METRICS, *(x for _, x in FABRIC_SWITCHES.values()))
        )
        metrics = capture.relay_path_metrics(
            capture.read_rtp(caps[0].path), capture.read_rtp(caps[1].path), settle_ms=500
        )
        try:
            cross_loss = float(json.loads(cross_run.stdout)["end"]["sum"]["lost_percent"])
        except (ValueError, KeyError) as e:
            raise RuntimeError(f"iperf3 cross traffic failed: {cross_run.stderr[-500:]}") from e
        api = stack.api()
        try:
            # the server has the last reroute events and session updates within a flush or two
            time.sleep(3.0)
            events = [
                e for e in api.events("reroute") if dt.datetime.fromisoformat(e["ts"]) >= run_start
            ]
            linked = 0
            for s in api.sessions():
                if dt.datetime.fromisoformat(s["started_at"]) < run_start:
                    continue
                detail = api.session(int(s["id"]))
                if detail.get("reroutes"):
                    linked += 1
        finally:
            api.close()
        moved = sorted(
            dt.datetime.fromisoformat(e["ts"])
            for e in events
            if e["payload"].get("direction") == "to_backup"
        )
        per_call = [
            Call(
                cross=cross,
                reroute=reroute,
                call=i + 1,
                sent=st.sent,
                received=st.received,
                loss_pct=_f(100.0 * (st.sent - st.received) / st.sent, 2) if st.sent else 0.0,
                max_interarrival_ms=_f(st.max_gap_ms),
                pps=_f(st.pps),
                delay_ms_mean=_f(st.delay_ms_mean),
                delay_ms_max=_f(st.delay_ms_max),
                mos=None if st.mos is None else round(st.mos, 2),
            )
            for i, st in enumerate(metrics.per_stream)
        ]
        stats = uac[0].stats if uac else None
        moses = [c.mos for c in per_call if c.mos is not None]
        row = Row(
            cross=cross,
            reroute=reroute,
            calls_ok=stats.successful if stats else 0,
            calls_failed=stats.failed if stats else calls,
            streams=len(per_call),
            loss_pct_mean=_f(statistics.fmean(c.loss_pct for c in per_call), 2)
            if per_call
            else 100.0,
            loss_pct_max=max((c.loss_pct for c in per_call), default=100.0),
            max_interarrival_ms=max((c.max_interarrival_ms for c in per_call), default=0.0),
            pps_mean=_f(statistics.fmean(c.pps for c in per_call)) if per_call else 0.0,
            delay_ms_median=_f(metrics.delay_ms_median),
            delay_ms_max=max((c.delay_ms_max for c in per_call), default=0.0),
            mos_min=min(moses) if moses else None,
            mos_median=round(statistics.median(moses), 2) if moses else None,
            reroute_after_ms=round((moved[0] - t_cross).total_seconds() * 1000, 1)
            if moved
            else None,
            cross_loss_pct=round(cross_loss, 1),
            reroute_events=len(events),
            sessions_with_reroute=linked,
            rx_ring_drops=rx_drops,
        )
        return row, per_call
    finally:
        stack.down()


PAPERS = (
    "Beside the papers: Tables I and II of Esquivel Morel et al. (MRI + port-forwarding reroute, "
    "one video stream, 400 and 800 Mbit/s cross traffic on a 200 Mbit/s link) report 59.8 % and "
    "66.5 % loss, 17.4 and 14.5 packets/s and max deltas of 1067 and 2535 ms without reroute; "
    "0 % loss, 32.2 packets/s and a 137 ms max delta with it. Turkovic et al. move the flow on "
    "the m-th packet over the threshold in the data plane, as s1 does here. The `reroute after` "
    "column counts from the start of the cross traffic to the server's reroute event, so it "
    "includes the time the queue takes to build past t_q.\n\n"
    "Limits. Tofino 1: `deq_timedelta` (18 bits of ns) saturates at 262 us, so a t_q of 50 "
    "ms is measured from the 48-bit ingress timestamp (exact up to 2^32 - 1 ns), and the "
    "control plane refuses a threshold the target cannot represent; the software switch has"
    " no such ceiling and models the ASIC's widths. One hop: s1 detects congestion on its "
    "own egress port only; congestion further down the path is the INT-driven reroute's "
    "(`scenarios/results/reroute-int/`).\n"
)


def table(rows: list[Row]) -> str:
    head = (
        "| cross traffic | reroute | calls ok / failed | loss % mean / max | max inter-arrival ms | "
        "pps / call | delay ms median / max | MOS min / median | reroute after ms | "
        "reroute events / calls showing it | cross loss % | switch RX-ring drops |\n"
        "|---|---|---|---|---|---|---|---|---|---|---|---|\n"
    )
    body = "".join(
        f"| {r.cross:g}x | {'on' if r.reroute else 'off'} | {r.calls_ok} / {r.calls_failed} | "
        f"{r.loss_pct_mean} / {r.loss_pct_max} | {r.max_interarrival_ms} | {r.pps_mean} | "
        f"{r.delay_ms_median} / {r.delay_ms_max} | {r.mos_min} / {r.mos_median} | "
        f"{'' if r.reroute_after_ms is None else r.reroute_after_ms} | "
        f"{r.reroute_events} / {r.sessions_with_reroute} | {r.cross_loss_pct} | "
        f"{r.rx_ring_drops} |\n"
        for r in rows
    )
    return head + body


def call_table(calls: list[Call]) -> str:
    head = (
        "| cross traffic | reroute | call | RTP sent / received | loss % | max inter-arrival ms | "
        "pps | delay ms mean / max | MOS |\n|---|---|---|---|---|---|---|---|---|\n"
    )
    return head + "".join(
        f"| {c.cross:g}x | {'on' if c.reroute else 'off'} | {c.call} | {c.sent} / {c.received} | "
        f"{c.loss_pct} | {c.max_interarrival_ms} | {c.pps} | {c.delay_ms_mean} / "
        f"{c.delay_ms_max} | {c.mos} |\n"
        for c in calls
    )


def plot(rows: list[Row], calls: list[Call], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    confs = [(r.cross, r.reroute) for r in rows]
    labels = [f"{c:g}x {'on' if rr else 'off'}" for c, rr in confs]
    colors = ["tab:green" if rr else "tab:red" for _, rr in confs]
    fig, axes = plt.subplots(1, 3, figsize=(12, 3.6))
    for ax, key, ylabel, title in (
        (axes[0], "loss_pct", "RTP loss, %", "loss per call"),
        (axes[1], "mos", "MOS", "MOS per call"),
        (axes[2], "max_interarrival_ms", "ms", "max inter-arrival per call"),
    ):
        for x, (conf, color) in enumerate(zip(confs, colors, strict=True)):
            ys = [getattr(c, key) for c in calls if (c.cross, c.reroute) == conf]
            ys = [y for y in ys if y is not None]
            ax.scatter([x] * len(ys), ys, color=color, alpha=0.7, zorder=3)
            if ys:
                ax.hlines(statistics.fmean(ys), x - 0.3, x + 0.3, color=color)
        ax.set_xticks(range(len(labels)), labels)
        ax.set_ylabel(ylabel)
        ax.set_title(title)
        ax.grid(axis="y", alpha=0.3)
    axes[1].set_ylim(1, 4.6)
    axes[1].axhline(4.3, color="gray", linestyle="--", linewidth=0.8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        prog="python -m p4relay_scenarios reroute-experiment",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    ap.add_argument(
        "--cross", default="2,4", help="cross traffic, multiples of the bottleneck (default 2,4)"
    )
    ap.add_argument("--calls", type=int, default=4, help="concurrent SIPp calls (default 4)")
    ap.add_argument(
        "--lead-seconds", type=float, default=6.0, help="calls alone before the cross traffic"
    )
    ap.add_argument(
        "--cross-seconds", type=float, default=12.0, help="cross traffic duration (default 12)"
    )
    ap.add_argument(
        "--tail-seconds", type=float, default=4.0, help="calls after the cross traffic (default 4)"
    )
    ap.add_argument(
        "--rate-bps", type=int, default=2_000_000, help="bottleneck rate (default 2 Mbit/s)"
    )
    ap.add_argument(
        "--t-q-us",
        type=float,
        default=50_000.0,
        help="reroute threshold t_q (default 50000 us: above what a call's own sender "
        "bursts queue on the 2 Mbit/s link: SIPp catching up after a scheduling stall on a "
        "loaded machine sends 20 packets at once, 17 ms there)",
    )
    ap.add_argument(
        "--m",
        type=int,
        default=2,
        help="consecutive packets over t_q (default 2: detection sees a call packet only as "
        "it leaves the queue, one every ~21 ms at 4x cross traffic, so the move comes t_q + "
        "(m - 1) x 21 ms after the queue passes t_q; with m = 5 that is after a 128-packet "
        "queue has filled (~135 ms) and the calls lose packets to tail drop before it)",
    )
    ap.add_argument(
        "--queue-depth",
        type=int,
        default=128,
        help="the bottleneck's egress queue, packets (default 128)",
    )
    ap.add_argument("--sip", choices=SIP_SERVERS, default="opensips", help="SIP server")
    ap.add_argument(
        "--database-url",
        default=None,
        help=f"the server's database (default: a throwaway cluster on port {PG_PORT})",
    )
    ap.add_argument(
        "--out", type=Path, required=True, help="folder for README.md, results.json, loss_mos.png"
    )
    a = ap.parse_args(argv)
    if os.geteuid() != 0:
        print("reroute-experiment: needs root (network namespaces)", file=sys.stderr)
        return 2
    missing = [t for t in ("iperf3", "sipp", "tcpdump", a.sip) if shutil.which(t) is None]
    if missing:
        print(f"reroute-experiment: needs {', '.join(missing)} (make setup)", file=sys.stderr)
        return 2
    try:
        crosses = [float(x) for x in a.cross.split(",") if x]
    except ValueError:
        print(f"reroute-experiment: --cross {a.cross!r}: comma-separated numbers", file=sys.stderr)
        return 2
    if a.calls < 1 or not crosses:
        print("reroute-experiment: --calls >= 1 and one --cross value at least", file=sys.stderr)
        return 2
    a.out.mkdir(parents=True, exist_ok=True)
    db = a.database_url or start_pg(PG_DIR, PG_PORT)
    rows: list[Row] = []
    calls: list[Call] = []
    try:
        with tempfile.TemporaryDirectory(prefix="p4r-reroute-") as tmp:
            for c in crosses:
                for rr in (False, True):
                    row, per_call = run_one(
                        c,
                        rr,
                        calls=a.calls,
                        lead_s=a.lead_seconds,
                        cross_s=a.cross_seconds,
                        tail_s=a.tail_seconds,
                        rate_bps=a.rate_bps,
                        t_q_us=a.t_q_us,
                        m=a.m,
                        sip=a.sip,
                        run_dir=Path(tmp) / f"{c:g}x-{'on' if rr else 'off'}",
                        database_url=db,
                        queue_depth=a.queue_depth,
                    )
                    print(json.dumps(asdict(row)), flush=True)
                    rows.append(row)
                    calls += per_call
    finally:
        if a.database_url is None:
            stop_pg(PG_DIR)
    md = table(rows)
    print(md)
    print(call_table(calls))
    meta = machine()
    cmd = recorded_command(
        "python -m p4relay_scenarios reroute-experiment", argv if argv is not None else sys.argv[1:]
    )
    (a.out / "results.json").write_text(
        json.dumps(
            {"machine": meta, "command": cmd, "rows": [asdict(r) for r in rows],
             "calls": [asdict(c) for c in calls]},
            indent=2,
        )
        + "\n"
    )  # fmt: skip
    plot(rows, calls, a.out / "loss_mos.png")
    (a.out / "README.md").write_text(
        "# Congestion reroute with SIP calls: loss and MOS per call without / with data-plane "
        "reroute\n\n"
        f"Command: `{cmd}`  \nMachine: {meta['cpu']}, {meta['cores']} cores, "
        f"{meta['memory_gib']} GiB, Linux {meta['kernel']}  \n"
        f"Commit: {meta['commit']}  \nDate: {meta['date_utc']}  \n"
        f"Fabric: s1-s2 {a.rate_bps / 1e6:g} Mbit/s (s1's port rate, {a.queue_depth}-packet queue), "
        f"s1-s3-s2 unshaped; t_q {a.t_q_us:g} us, m = {a.m}. {a.calls} concurrent SIPp calls "
        f"(G.711 A-law, 50 packets/s each way) through {a.sip} + rtpagent + RTPProxy, offloaded "
        f"to s1; iperf3 UDP cross traffic (1000-byte datagrams) for {a.cross_seconds:g} s, "
        f"{a.lead_seconds:g} s after the calls start, calls {a.lead_seconds + a.cross_seconds + a.tail_seconds:g} s "
        "long. Loss, gaps, packets/s, delay and MOS of each call's caller->callee stream (the "
        "direction over the bottleneck) from captures at the UAC and the UAS. Switch RX-ring "
        "drops: frames the three softswitches lost from their receive rings while waiting for a "
        "CPU of the shared machine, not to the congestion.\n\n"
        + md
        + "\n![loss, MOS and max inter-arrival per call](loss_mos.png)\n\nPer call:\n\n"
        + call_table(calls)
        + "\n"
        + PAPERS
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
