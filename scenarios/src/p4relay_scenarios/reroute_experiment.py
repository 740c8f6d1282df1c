"""Congestion reroute, Tables I and II of the MRI port-forwarding paper on the three-switch testbed:
media streams UAC -> UAS (G.711 sized: 172-byte payloads, 50 packets/s each)
share the shaped s1-s2 link with iperf3 UDP cross traffic at 2x and 4x its
rate, without and with data-plane reroute; per stream: loss, max
inter-arrival delta, packets/s received, one-way delay and MOS (G.107, the
server's E-model); and when the reroute happened after the cross traffic
started.

  python -m p4relay_scenarios reroute-experiment --cross 2,4 --streams 4 \\
      --out scenarios/results/reroute

Media is plain UDP from a paced sender (a sequence number and the send time
in each payload; all namespaces share one monotonic clock), not SIP calls.
"""

from __future__ import annotations

import argparse
import asyncio
import datetime as dt
import itertools
import json
import os
import platform
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import asdict, dataclass
from pathlib import Path

from p4relay_collector.reroute import RerouteAgent, RerouteConfig
from p4relay_collector.wire import IngestBatch
from p4relay_server.mos import mos

from p4relay_scenarios import reroute_bed as bed

ROOT = Path(__file__).resolve().parents[3]
SOFTSWITCH = ROOT / "switch/target/release/p4relay-softswitch"

RECEIVER = """
import json, socket, sys, time
port, quiet = int(sys.argv[1]), float(sys.argv[2])
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
s.bind(("198.18.12.10", port))
s.settimeout(quiet)
rows = []
try:
    while True:
        d, _ = s.recvfrom(2048)
        rows.append((int.from_bytes(d[:4], "big"), int.from_bytes(d[4:12], "big"), time.monotonic_ns()))
except socket.timeout:
    pass
print(json.dumps(rows))
"""

SENDER = """
import socket, sys, time
port, n, pps = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
t0 = time.monotonic()
for i in range(n):
    time.sleep(max(0.0, t0 + i / pps - time.monotonic()))
    s.sendto(i.to_bytes(4, "big") + time.monotonic_ns().to_bytes(8, "big") + b"m" * 160,
             ("198.18.12.10", port))
"""


@dataclass
class Row:
    cross: float
    reroute: bool
    streams: int
    loss_pct_mean: float
    loss_pct_max: float
    max_interarrival_ms: float
    pps_mean: float
    delay_ms_median: float
    delay_ms_max: float
    mos_min: float
    mos_median: float
    reroute_after_ms: float | None
    cross_loss_pct: float


def _ns(name: str, *cmd: str) -> list[str]:
    return ["ip", "netns", "exec", name, *cmd]


def _wait_port(addr: str, within: float = 20.0) -> None:
    host, port = addr.rsplit(":", 1)
    end = time.monotonic() + within
    while time.monotonic() < end:
        try:
            socket.create_connection((host, int(port)), timeout=0.5).close()
            return
        except OSError:
            time.sleep(0.1)
    raise RuntimeError(f"softswitch on {addr} did not come up")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def start_switches(
    run_dir: Path, rate_bps: int
) -> tuple[dict[str, subprocess.Popen[bytes]], dict[str, str]]:
    """The bed with its three softswitches running and programmed."""
    bed.down()
    bed.up()
    procs: dict[str, subprocess.Popen[bytes]] = {}
    addrs: dict[str, str] = {}
    try:
        for name in bed.SWITCHES:
            addr = f"127.0.0.1:{_free_port()}"
            args = [
                str(SOFTSWITCH),
                "--grpc-listen",
                addr,
                "--metrics-listen",
                f"127.0.0.1:{_free_port()}",
            ]
            for p, ifname in bed.switch_ports(name).items():
                args += ["--port", f"{p}={ifname}"]
            if name == bed.BOTTLENECK[0]:
                args += ["--port-rate", f"{bed.BOTTLENECK[1]}={rate_bps}", "--queue-depth", "128"]
            log = (run_dir / f"{name}.log").open("wb")
            procs[name] = subprocess.Popen(args, stdout=log, stderr=subprocess.STDOUT)
            addrs[name] = addr
        for name, addr in addrs.items():
            _wait_port(addr)
            asyncio.run(bed.program(name, addr))
    except BaseException:
        stop_switches(procs)
        raise
    return procs, addrs


def stop_switches(procs: dict[str, subprocess.Popen[bytes]]) -> None:
    for proc in procs.values():
        proc.terminate()
        try:
            proc.wait(5)
        except subprocess.TimeoutExpired:
            proc.kill()
    bed.down()


def run_one(
    cross: float,
    reroute: bool,
    *,
    streams: int,
    seconds: float,
    rate_bps: int,
    t_q_us: float,
    m: int,
    run_dir: Path,
) -> Row:
    procs, addrs = start_switches(run_dir, rate_bps)
    try:
        events: list[IngestBatch] = []
        moved_at: list[float] = []

        async def submit(b: IngestBatch) -> None:
            events.append(b)
            moved_at.append(time.monotonic())

        stop = asyncio.Event()
        loop = asyncio.new_event_loop()
        cp: threading.Thread | None = None
        if reroute:
            cfg = RerouteConfig.model_validate(
                bed.reroute_config(addrs["s1"], t_q_us=t_q_us, m=m, hold_ms=600_000)
            )
            agent = RerouteAgent(cfg, submit)
            cp = threading.Thread(
                target=loop.run_until_complete, args=(agent.run(stop),), daemon=True
            )
            cp.start()
            end = time.monotonic() + 10
            while not agent.client.connected and time.monotonic() < end:
                time.sleep(0.05)
            time.sleep(0.5)
        n = int(seconds * 50)
        iperf_s = subprocess.Popen(
            _ns(bed.XDST.netns, "iperf3", "-s", "-1", "-B", bed.XDST.addr),
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        recvs = [
            subprocess.Popen(
                _ns(bed.UAS.netns, sys.executable, "-c", RECEIVER, str(4000 + 2 * i), "3"),
                stdout=subprocess.PIPE,
                text=True,
            )
            for i in range(streams)
        ]
        time.sleep(0.3)
        sends = [
            subprocess.Popen(
                _ns(bed.UAC.netns, sys.executable, "-c", SENDER, str(4000 + 2 * i), str(n), "50")
            )
            for i in range(streams)
        ]
        time.sleep(2.0)
        t_cross = time.monotonic()
        cross_run = subprocess.run(
            [
                *_ns(bed.XSRC.netns, "iperf3", "-c", bed.XDST.addr, "-u"),
                *("-b", str(int(cross * rate_bps)), "-l", "1000", "-t", str(int(seconds - 4))),
                "--json",
            ],
            capture_output=True,
            text=True,
            timeout=seconds + 30,
        )
        for s in sends:
            s.wait(seconds + 30)
        rows = [json.loads(r.communicate(timeout=60)[0]) for r in recvs]
        iperf_s.wait(10)
        if cp is not None:
            loop.call_soon_threadsafe(stop.set)
            cp.join(15)
        loop.close()
        cross_loss = float(json.loads(cross_run.stdout)["end"]["sum"]["lost_percent"])
        return _row(cross, reroute, rows, n, seconds, cross_loss, moved_at, t_cross)
    finally:
        stop_switches(procs)


def _row(
    cross: float,
    reroute: bool,
    rows: list[list[list[int]]],
    n: int,
    seconds: float,
    cross_loss: float,
    moved_at: list[float],
    t_cross: float,
) -> Row:
    losses, gaps, ppss, delays, moses, dmax = [], [], [], [], [], []
    for r in rows:
        got = {seq for seq, _, _ in r}
        lost = n - len(got)
        losses.append(100.0 * lost / n)
        arr = sorted(t for _, _, t in r)
        gaps.append(max((b - a for a, b in itertools.pairwise(arr)), default=0) / 1e6)
        ppss.append(len(got) / seconds)
        d = [(t - ts) / 1e6 for _, ts, t in r]
        med = statistics.median(d) if d else 0.0
        delays.append(med)
        dmax.append(max(d, default=0.0))
        q = mos("PCMA", packets=len(got), lost=lost, delay_ms=med)
        moses.append(q[1] if q else 1.0)
    return Row(
        cross=cross,
        reroute=reroute,
        streams=len(rows),
        loss_pct_mean=round(statistics.fmean(losses), 2),
        loss_pct_max=round(max(losses), 2),
        max_interarrival_ms=round(max(gaps), 1),
        pps_mean=round(statistics.fmean(ppss), 1),
        delay_ms_median=round(statistics.median(delays), 1),
        delay_ms_max=round(max(dmax), 1),
        mos_min=round(min(moses), 2),
        mos_median=round(statistics.median(moses), 2),
        reroute_after_ms=round((moved_at[0] - t_cross) * 1000, 1) if moved_at else None,
        cross_loss_pct=round(cross_loss, 1),
    )


PAPERS = (
    "Beside the papers: Tables I and II of Esquivel Morel et al. (MRI + port-forwarding "
    "reroute) report 59.8 % and 66.5 % loss without and 0 % with reroute; Turkovic et al. move the "
    "flow on the m-th packet over the threshold in the data plane. Here the streams lose the share "
    "the cross traffic leaves them without reroute, and nothing with it: the data plane moves them "
    "m packets after the queue passes t_q (the `reroute after` column counts from the start of the "
    "cross traffic, so it includes the time the queue takes to build).\n"
)


def table(rows: list[Row]) -> str:
    head = (
        "| cross traffic | reroute | streams | loss % mean / max | max inter-arrival ms | "
        "pps / stream | delay ms median / max | MOS min / median | reroute after ms | cross loss % |\n"
        "|---|---|---|---|---|---|---|---|---|---|\n"
    )
    body = "".join(
        f"| {r.cross:g}x | {'on' if r.reroute else 'off'} | {r.streams} | {r.loss_pct_mean} / "
        f"{r.loss_pct_max} | {r.max_interarrival_ms} | {r.pps_mean} | {r.delay_ms_median} / "
        f"{r.delay_ms_max} | {r.mos_min} / {r.mos_median} | "
        f"{'' if r.reroute_after_ms is None else r.reroute_after_ms} | {r.cross_loss_pct} |\n"
        for r in rows
    )
    return head + body


def plot(rows: list[Row], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    labels = [f"{r.cross:g}x {'on' if r.reroute else 'off'}" for r in rows]
    fig, (a, b) = plt.subplots(1, 2, figsize=(9, 3.5))
    a.bar(
        labels,
        [r.loss_pct_mean for r in rows],
        color=["tab:red" if not r.reroute else "tab:green" for r in rows],
    )
    a.set_ylabel("media loss, % (mean of streams)")
    a.set_title("loss without / with reroute")
    b.bar(
        labels,
        [r.mos_min for r in rows],
        color=["tab:red" if not r.reroute else "tab:green" for r in rows],
    )
    b.set_ylim(1, 4.6)
    b.set_ylabel("MOS (worst stream)")
    b.set_title("MOS without / with reroute")
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
    ap.add_argument("--streams", type=int, default=4, help="media streams (default 4)")
    ap.add_argument(
        "--seconds", type=float, default=12.0, help="media duration per run (default 12)"
    )
    ap.add_argument(
        "--rate-bps", type=int, default=2_000_000, help="bottleneck rate (default 2 Mbit/s)"
    )
    ap.add_argument(
        "--t-q-us", type=float, default=2000.0, help="reroute threshold t_q (default 2000 us)"
    )
    ap.add_argument("--m", type=int, default=5, help="consecutive packets over t_q (default 5)")
    ap.add_argument(
        "--out", type=Path, required=True, help="folder for README.md, results.json, loss_mos.png"
    )
    a = ap.parse_args(argv)
    if os.geteuid() != 0:
        print("reroute-experiment: needs root (network namespaces)", file=sys.stderr)
        return 2
    if not SOFTSWITCH.exists() or shutil.which("iperf3") is None:
        print(
            "reroute-experiment: needs the release softswitch and iperf3 (make setup)",
            file=sys.stderr,
        )
        return 2
    try:
        crosses = [float(x) for x in a.cross.split(",") if x]
    except ValueError:
        print(f"reroute-experiment: --cross {a.cross!r}: comma-separated numbers", file=sys.stderr)
        return 2
    a.out.mkdir(parents=True, exist_ok=True)
    rows: list[Row] = []
    with tempfile.TemporaryDirectory(prefix="p4r3-") as tmp:
        for c in crosses:
            for rr in (False, True):
                row = run_one(
                    c,
                    rr,
                    streams=a.streams,
                    seconds=a.seconds,
                    rate_bps=a.rate_bps,
                    t_q_us=a.t_q_us,
                    m=a.m,
                    run_dir=Path(tmp),
                )
                print(json.dumps(asdict(row)), flush=True)
                rows.append(row)
    md = table(rows)
    print(md)
    commit = subprocess.run(
        ["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"],
        capture_output=True,
        text=True,
        check=False,
    ).stdout.strip()
    cmd = "python -m p4relay_scenarios reroute-experiment " + " ".join(argv or sys.argv[1:])
    (a.out / "results.json").write_text(json.dumps([asdict(r) for r in rows], indent=2) + "\n")
    plot(rows, a.out / "loss_mos.png")
    (a.out / "README.md").write_text(
        "# Congestion reroute: loss and MOS without / with data-plane reroute\n\n"
        f"Command: `{cmd}`  \nMachine: {platform.machine()}, {os.cpu_count()} CPUs, {platform.platform()}  \n"
        f"Commit: {commit}  \nDate: {dt.datetime.now(dt.UTC):%Y-%m-%d %H:%M} UTC  \n"
        f"Bottleneck s1-s2: {a.rate_bps / 1e6:g} Mbit/s, 128-packet queue; t_q {a.t_q_us:g} us, m = {a.m}; "
        f"{a.streams} streams of 50 packets/s (172-byte payloads) for {a.seconds:g} s; iperf3 UDP cross "
        "traffic (1000-byte datagrams) for the middle of the run.\n\n"
        + md
        + "\n![loss and MOS](loss_mos.png)\n\n"
        + PAPERS
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
