"""INT-driven congestion reroute where the congestion is NOT on the rerouting
switch's own port: the three-switch fabric of int_bed.py with the calls'
primary path s1 -> s3 -> s2, the bottleneck on s3's port towards s2, and the
backup s1 -> s2 direct.

```
 intl-uac  ─ 1 ┐                ┌ 1 ─ intl-uas   (the callees)
 intl-xsrc ─ 2 ┤ s1 ──3── 3── s2 ├ 2 ─ intl-xdst (iperf3 server)
               └4  (backup)    4┘└ 5 ─ the sink's reports (root namespace)
                 1 ─ s3 ─ 2  <- the bottleneck (s3's port 2, shaped)
```

s1 relays N concurrent calls (relay entries as rtpagent installs them,
G.711 A-law sized RTP, 50 packets/s, caller -> callee) and is their INT
source; s3 is a transit hop, s2 the sink. iperf3 UDP cross traffic from
xsrc to xdst takes the same primary path at 2x and 4x the bottleneck's rate.
Three ways to detect it, each its own row:

- `local`: today's detection at s1 (m packets over t_q on its own egress
  queue towards s3): s1's port is not the bottleneck, so it sees nothing;
- `int-cp`: the control-plane INT loop (p4relay-controlplane `[int_loop]`):
  s2's telemetry reports go to s1's daemon, which moves the callees' subnet to
  the backup when s3's hop stays over onset (queue depth in cells);
- `int-dp`: the data-plane INT-driven notice (the switches alone).

Per call, over the cross traffic's window (packets sent in it): loss, packets
per second received, the longest inter-arrival gap, one-way delay p99 and
max, and MOS (G.107 E-model, p4relay_server.mos) with the p99 delay (delay
spikes count, not the mean). Per run: time from congestion onset (the
first call packet after the cross traffic's start queued 5 ms over the
calls' lowest one-way delay) to the move (s1's `reroute_active` register
polled every 10 ms), and the number of moves.

  python -m p4relay_scenarios reroute-int --modes local,int-cp --cross 2,4 --runs 3 --calls 50
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import datetime as dt
import ipaddress
import json
import math
import os
import platform
import shutil
import statistics
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
from p4relay_collector.wire import IngestBatch
from p4relay_controlplane.config import Settings
from p4relay_controlplane.daemon import Daemon
from p4relay_runtime.procs import free_port, softswitch_binary, stop, wait_tcp
from p4relay_server.mos import mos
from p4relay_switch import Endpoint, Pipeline, RelayCall, SwitchClient
from p4relay_switch import int_telemetry as it
from p4relay_switch.names import REG_REROUTE_ACTIVE, REG_REROUTE_PORT_HOT
from p4relay_switch.reroute import Reroute, RerouteClass, RerouteWatch

from p4relay_scenarios import int_bed as ib
from p4relay_scenarios import reroute_bed as bed
from p4relay_scenarios.netns import mac_of

ROOT = Path(__file__).resolve().parents[3]
L = ib.LAYOUT
SLOT = 0
RELAY = ib.RELAY
PPS = 50
PAYLOAD = 160  # G.711 20 ms
CELL_BYTES = 80
MODES = ("local", "int-cp", "int-dp")


@dataclass(frozen=True)
class Params:
    calls: int = 50
    rate_bps: int = 8_000_000  # s3's port towards s2
    queue_packets: int = 128
    lead_s: float = 4.0  # calls alone before the cross traffic
    cross_s: float = 15.0
    tail_s: float = 3.0
    # s1's local detection: queueing delay from the 48-bit ingress timestamp
    # (representable on Tofino 1, unlike deq_timedelta's 262 us ceiling)
    t_q_us: float = 20_000.0
    m_local: int = 5
    hold_ms: int = 5000
    # INT: queue depth at dequeue (Tofino 1: 19 bits of 80-byte cells)
    onset_cells: int = 400
    clear_cells: int = 100
    m_int: int = 2  # control-plane loop: reports
    m_sink: int = 5  # data-plane loop: packets with a hop over onset at the sink


def _ns(name: str, *cmd: str) -> list[str]:
    return ["ip", "netns", "exec", name, *cmd]


def call(i: int) -> RelayCall:
    return RelayCall.between(
        Endpoint.of(L.uac.addr, 5000 + 2 * i),
        Endpoint.of(RELAY, 20000 + 4 * i),
        Endpoint.of(L.uas.addr, 6000 + 2 * i),
        Endpoint.of(RELAY, 20002 + 4 * i),
        legs=(2 * i, 2 * i + 1),
        ports=(L.uac.port, bed.link_port("s1", "s3", L)),
    )


# --------------------------------------------------------------- switches


def switch_args(name: str, p: Params) -> list[str]:
    args: list[str] = []
    ports = bed.switch_ports(name, L)
    if name == ib.REPORT_SWITCH:
        ports[ib.REPORT_PORT] = ib.REPORT_IF
    for port, ifname in ports.items():
        args += ["--port", f"{port}={ifname}"]
    if name == "s3":
        args += [
            *("--port-rate", f"{bed.link_port('s3', 's2', L)}={p.rate_bps}"),
            *("--queue-depth", str(p.queue_packets)),
        ]
    return args


def _hop(name: str, p: Params) -> it.IntHop:
    # hop latency not used as a threshold (Tofino 1 saturates it at 262 us):
    # the largest value, which no hop reaches
    return it.IntHop(ib.SWITCH_IDS[name], p.onset_cells, p.clear_cells, 2**32 - 1, 2**32 - 1)


async def program(name: str, address: str, p: Params, report_port: int, mode: str) -> None:
    """Forwarding (the callees' and the cross traffic's subnets by s3 at s1),
    the calls at s1, INT transit at s3 and the sink at s2. s1's INT tables,
    next hops and reroute are its daemon's (`s1_config`)."""
    await bed.program(name, address, L)
    if mode == "int-dp" and name != "s1":
        await _notice_path(name, address, p)
    async with SwitchClient(address, client_id=32) as sw:
        if name == "s1":
            pl = Pipeline(sw)
            by_s3 = bed.link_port("s1", "s3", L)
            await pl.add_routes([(L.uas.subnet, by_s3), (L.xdst.subnet, by_s3)], replace=True)
            await pl.add_relay_addr(RELAY, 20000, 20000 + 4 * p.calls)
            for i in range(p.calls):
                await pl.install_call(call(i))
        elif name == "s3":
            port = bed.link_port("s3", "s2", L)
            await it.set_role(sw, port, "transit")
            await it.set_hop(sw, port, _hop("s3", p))
        else:
            await it.set_role(sw, L.uas.port, "sink")
            await it.set_report_target(
                sw,
                ib.REPORT_PORT,
                it.ReportTarget(
                    src_mac=int(mac_of(ib.REPORT_IF).replace(":", ""), 16),
                    dst_mac=int(mac_of(ib.COLLECTOR_IF).replace(":", ""), 16),
                    src_addr=ipaddress.IPv4Address(ib.REPORT_SRC),
                    dst_addr=ipaddress.IPv4Address(ib.COLLECTOR_ADDR),
                    dst_port=report_port,
                    switch_id=ib.SWITCH_IDS[name],
                ),
            )


async def _notice_path(name: str, address: str, p: Params) -> None:
    """The data-plane INT loop's watches down the path: the sink s2 counts the
    callees' packets whose INT stack has a hop over onset (m_sink in a row ->
    a notice upstream); s3, without a backup, passes a notice that came by its
    primary port on upstream. Their own-queue detection is off (m = 0 at s3),
    so only INT moves the calls."""
    sink = name == "s2"
    # the port towards the sink (the sink: towards the callees)
    primary = L.uas.port if sink else bed.link_port("s3", "s2", L)
    async with SwitchClient(address, client_id=32) as sw:
        rr = Reroute(sw)
        m = p.m_sink if sink else 0
        await rr.set_classes([RerouteClass(1, round(p.t_q_us * 1000), m)])
        await rr.watch(
            [RerouteWatch(ipaddress.IPv4Network(L.uas.subnet), SLOT, 1, primary_port=primary)]
        )


def s1_config(address: str, mode: str, p: Params, report_port: int) -> Settings:
    """s1's p4relay-controlplane: next hops (INT roles), INT source and hops,
    the callees' subnet watched with the backup by s2 direct, and per mode the
    INT loop."""
    nexthops = []
    for port, ifname in bed.switch_ports("s1", L).items():
        nh: dict[str, Any] = {
            "id": port,
            "port": port,
            "src_mac": mac_of(ifname),
            "dst_mac": bed.peer_mac("s1", port, L),
        }
        if port in (bed.link_port("s1", "s2", L), bed.link_port("s1", "s3", L)):
            nh["int_role"] = "transit"
        nexthops.append(nh)
    primary, backup = bed.link_port("s1", "s3", L), bed.link_port("s1", "s2", L)
    hop = {"onset_cells": p.onset_cells, "clear_cells": p.clear_cells}
    hop |= {"onset_us": 0, "clear_us": 0}  # latency not used (Tofino 1 saturates it)
    doc: dict[str, Any] = {
        "switch": "s1",
        "grpc_address": address,
        "client_id": 41,
        "metrics_listen": "",
        "reconcile_interval_s": 60,
        "nexthops": nexthops,
        "reroute": {
            "poll_ms": 50,
            "classes": [
                {"flow_class": 0, "t_q_us": p.t_q_us, "m": 1, "hold_ms": p.hold_ms},
                {"flow_class": 1, "t_q_us": p.t_q_us, "m": p.m_local, "hold_ms": p.hold_ms},
            ],
            "watch": [
                {
                    "prefix": L.uas.subnet,
                    "slot": SLOT,
                    "flow_class": 1,
                    "primary_port": primary,
                    "backup_nexthop_id": backup,
                    "backup_port": backup,
                }
            ],
            # the hop a sink's notice names, by name in the events
            "switch_names": {str(v): k for k, v in ib.SWITCH_IDS.items()},
        },
        "int": {
            "switch_id": ib.SWITCH_IDS["s1"],
            "calls": "all",
            "hops": [{"port": primary, **hop}, {"port": backup, **hop}],
        },
    }
    if mode == "int-cp":
        doc["int_loop"] = {
            "listen": f"{ib.COLLECTOR_ADDR}:{report_port}",
            "sources": [ib.REPORT_SRC],
            "onset_cells": p.onset_cells,
            "clear_cells": p.clear_cells,
            "m": p.m_int,
            "hold_ms": p.hold_ms,
            "switch_names": {str(v): k for k, v in ib.SWITCH_IDS.items()},
        }
    return Settings.model_validate(doc)


class _Agent:
    """s1's daemon in a thread of its own; keeps the events it would send."""

    def __init__(self, cfg: Settings) -> None:
        self.events: list[tuple[float, dict[str, Any]]] = []
        self.daemon = Daemon(cfg, self._submit)
        self.stop = asyncio.Event()
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(
            target=self.loop.run_until_complete, args=(self.daemon.run(self.stop),), daemon=True
        )
        self.thread.start()
        end = time.monotonic() + 20
        while self.daemon.last_report is None:
            if time.monotonic() > end or not self.thread.is_alive():
                raise RuntimeError("s1's control plane did not apply its configuration")
            time.sleep(0.05)
        if self.daemon.last_report.refused:
            raise RuntimeError(f"s1 refused: {self.daemon.last_report.refused}")

    async def _submit(self, b: IngestBatch) -> None:
        now = time.monotonic()
        self.events += [(now, dict(e.payload)) for e in b.events]

    def close(self) -> None:
        self.loop.call_soon_threadsafe(self.stop.set)
        self.thread.join(15)


class _ActiveWatch:
    """Polls s1's reroute_active[SLOT] every 10 ms: the moves' times; and
    s1's reroute_port_hot stamp of the calls' primary port: the times it
    changed (a departure there over t_q, s1's own delay)."""

    def __init__(self, address: str) -> None:
        self.address = address
        self.moves: list[float] = []
        self.returns: list[float] = []
        self.port_hot: list[float] = []
        self._stop = threading.Event()
        self.thread = threading.Thread(target=lambda: asyncio.run(self._run()), daemon=True)
        self.thread.start()

    async def _run(self) -> None:
        primary = bed.link_port("s1", "s3", L)
        async with SwitchClient(self.address, client_id=43) as sw:
            last = 0
            stamp = 0
            while not self._stop.is_set():
                got = await sw.read_register(REG_REROUTE_ACTIVE, [SLOT])
                now = time.monotonic()
                v = 1 if any(got[SLOT]) else 0
                if v != last:
                    (self.moves if v else self.returns).append(now)
                    last = v
                hot = max((await sw.read_register(REG_REROUTE_PORT_HOT, [primary]))[primary])
                if hot != stamp:
                    self.port_hot.append(now)
                    stamp = hot
                await asyncio.sleep(0.01)

    def close(self) -> None:
        self._stop.set()
        self.thread.join(5)


# ------------------------------------------------------------------ media

SENDER = """
import socket, struct, sys, time
calls, seconds, addr, pps = int(sys.argv[1]), float(sys.argv[2]), sys.argv[3], int(sys.argv[4])
socks = []
for i in range(calls):
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.bind(("{src}", 5000 + 2 * i))
    socks.append(s)
t0 = time.monotonic() + 0.2
n = int(seconds * pps)
pad = bytes({payload} - 8)
for k in range(n):
    for i, s in enumerate(socks):
        due = t0 + k / pps + i * (1.0 / pps / calls)
        d = due - time.monotonic()
        if d > 0:
            time.sleep(d)
        hdr = struct.pack("!BBHII", 0x80, 8, k & 0xFFFF, k * 160, 0x10000 + i)
        s.sendto(hdr + time.monotonic_ns().to_bytes(8, "big") + pad, (addr, 20000 + 4 * i))
"""

RECEIVER = """
import selectors, socket, struct, sys, time
calls, until, out = int(sys.argv[1]), float(sys.argv[2]), sys.argv[3]
sel = selectors.DefaultSelector()
for i in range(calls):
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 1 << 20)
    s.bind(("{dst}", 6000 + 2 * i))
    s.setblocking(False)
    sel.register(s, selectors.EVENT_READ, i)
rows = bytearray()
end = time.monotonic() + until
while time.monotonic() < end:
    for key, _ in sel.select(0.2):
        while True:
            try:
                d = key.fileobj.recv(2048)
            except BlockingIOError:
                break
            if len(d) >= 20:
                rows += struct.pack("<iiqq", key.data, struct.unpack_from("!H", d, 2)[0],
                                    int.from_bytes(d[12:20], "big"), time.monotonic_ns())
open(out, "wb").write(rows)
"""


def read_rows(path: Path) -> np.ndarray:
    """(call, seq, sent_ns, received_ns) per packet."""
    raw = np.frombuffer(
        path.read_bytes(), dtype=np.dtype([("c", "<i4"), ("s", "<i4"), ("t", "<i8"), ("r", "<i8")])
    )
    return raw


@dataclass
class CallResult:
    call: int
    sent: int
    received: int
    loss_pct: float
    pps: float
    max_gap_ms: float
    delay_p99_ms: float
    delay_max_ms: float
    mos: float


def call_metrics(rows: np.ndarray, calls: int, start_ns: int, window_s: float) -> list[CallResult]:
    """Per call over the packets sent in [start_ns, start_ns + window) (monotonic
    clock, shared by every namespace); a call's packet k was due at its first
    packet's send time + k / PPS, so lost ones are counted too."""
    out = []
    n = int(window_s * PPS)
    for c in range(calls):
        r = rows[rows["c"] == c]
        seqs = r["s"].astype(np.int64)
        if len(r):
            i = int(np.argmin(seqs))
            t0 = int(r["t"][i]) - int(seqs[i]) * 1_000_000_000 // PPS
            k0 = math.ceil((start_ns - t0) * PPS / 1e9)
        else:
            k0 = 0
        sel = (seqs >= k0) & (seqs < k0 + n)
        got = r[sel]
        uniq = np.unique(got["s"])
        recv = len(uniq)
        d = (got["r"] - got["t"]) / 1e6
        # gaps between the call's arrivals (the whole run's) that overlap the
        # window: a silence running past the window's end counts in full
        arrivals = np.sort(r["r"])
        end_ns = start_ns + int(window_s * 1e9)
        if len(arrivals) > 1:
            prev, nxt = arrivals[:-1], arrivals[1:]
            over = (prev < end_ns) & (nxt > start_ns)
            max_gap = float((nxt[over] - prev[over]).max()) / 1e6 if over.any() else window_s * 1e3
        else:
            max_gap = window_s * 1000
        p99 = float(np.percentile(d, 99)) if recv else float("nan")
        jitter = float(np.abs(np.diff(d)).mean()) if recv > 2 else 0.0
        q = mos(
            "PCMA", packets=recv, lost=n - recv, jitter_ms=jitter, delay_ms=p99 if recv else None
        )
        out.append(
            CallResult(
                c,
                n,
                recv,
                100.0 * (n - recv) / n,
                recv / window_s,
                max_gap,
                p99,
                float(d.max()) if recv else float("nan"),
                q[1] if q else 1.0,
            )
        )
    return out


ONSET_QUEUE_MS = 5.0  # a call packet this much over the calls' lowest one-way delay met a queue


def congestion_onset(rows: np.ndarray, after_ns: int) -> int:
    """When the calls first met the queue: the send time of the first packet
    sent after `after_ns` (the cross traffic's start) whose one-way delay is
    ONSET_QUEUE_MS over the lowest of the run; `after_ns` if none was."""
    if not len(rows):
        return after_ns
    d = rows["r"] - rows["t"]
    late = (rows["t"] >= after_ns) & (d - d.min() > ONSET_QUEUE_MS * 1e6)
    return int(rows["t"][late].min()) if late.any() else after_ns


# ------------------------------------------------------------------ a run


@dataclass
class Run:
    mode: str
    cross: float
    run: int
    calls: list[CallResult]
    move_after_ms: float | None
    moves: int
    cross_loss_pct: float | None
    hop: str = ""
    returns: int = 0
    port_hot: int = 0  # s1's primary port stamped hot (its own delay over t_q) in the window
    # moves before the cross traffic started: the calls may be on the backup
    # when the congestion begins, and "move after" then counts from the onset
    # to the move after their return
    early_moves: int = 0
    events: list[dict[str, Any]] = field(default_factory=list)


@contextlib.contextmanager
def switches(run_dir: Path, p: Params) -> Iterator[dict[str, str]]:
    procs: list[subprocess.Popen[bytes]] = []
    addrs: dict[str, str] = {}
    try:
        for name in bed.SWITCHES:
            addr = f"127.0.0.1:{free_port()}"
            cmd = [
                str(softswitch_binary()),
                *("--grpc-listen", addr, "--metrics-listen", f"127.0.0.1:{free_port()}"),
                *switch_args(name, p),
            ]
            log = (run_dir / f"{name}.log").open("wb")
            procs.append(subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT))
            wait_tcp(addr, procs[-1], what=f"softswitch {name}")
            addrs[name] = addr
        yield addrs
    finally:
        for proc in reversed(procs):
            stop(proc, 5)


CROSS_SERVER_S = 0.3  # iperf3 -s binding (it has no readiness signal of its own)


def _cross(bps: float, seconds: float, log: Path) -> tuple[subprocess.Popen[bytes], float]:
    """iperf3 UDP xsrc -> xdst; returns the client and its start (monotonic s)."""
    # the server ends after its one test (-1)
    subprocess.Popen(
        _ns(L.xdst.netns, "iperf3", "-s", "-1", "-B", L.xdst.addr),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    time.sleep(CROSS_SERVER_S)
    t = time.monotonic()
    client = subprocess.Popen(
        [
            *_ns(L.xsrc.netns, "iperf3", "-c", L.xdst.addr, "-u", "-J"),
            *("-b", str(int(bps)), "-l", "1000", "-t", f"{seconds:g}"),
        ],
        stdout=log.open("wb"),
        stderr=subprocess.STDOUT,
    )
    return client, t


def _cross_loss(log: Path) -> float | None:
    try:
        doc = json.loads(log.read_text())
        return float(doc["end"]["sum"]["lost_percent"])
    except (OSError, ValueError, KeyError, TypeError):
        return None


def run_one(mode: str, cross: float, run: int, p: Params, run_dir: Path) -> Run:
    run_dir.mkdir(parents=True, exist_ok=True)
    report_port = 32766
    with switches(run_dir, p) as addrs:
        for name, addr in addrs.items():
            asyncio.run(program(name, addr, p, report_port, mode))
        agent = _Agent(s1_config(addrs["s1"], mode, p, report_port))
        watch = _ActiveWatch(addrs["s1"])
        try:
            total = p.lead_s + p.cross_s + p.tail_s
            out = run_dir / "rx.bin"
            rx = subprocess.Popen(
                _ns(
                    L.uas.netns,
                    sys.executable,
                    "-c",
                    RECEIVER.replace("{dst}", L.uas.addr),
                    str(p.calls),
                    f"{total + 3:g}",
                    str(out),
                )
            )
            time.sleep(0.5)  # the receiver's sockets bound (it has no readiness signal)
            tx = subprocess.Popen(
                _ns(
                    L.uac.netns,
                    sys.executable,
                    "-c",
                    SENDER.replace("{src}", L.uac.addr).replace("{payload}", str(PAYLOAD)),
                    str(p.calls),
                    f"{total:g}",
                    RELAY,
                    str(PPS),
                )
            )
            time.sleep(p.lead_s + 0.2 - CROSS_SERVER_S)
            xlog = run_dir / "iperf3.json"
            ip, t_cross = _cross(cross * p.rate_bps, p.cross_s, xlog)
            ip.wait(p.cross_s + 30)
            tx.wait(total + 30)
            rx.wait(30)
        finally:
            watch.close()
            agent.close()
    rows = read_rows(out)
    calls = call_metrics(rows, p.calls, int(t_cross * 1e9), p.cross_s)
    onset = congestion_onset(rows, int(t_cross * 1e9)) / 1e9
    moves = [t for t in watch.moves if t >= t_cross]
    early = [t for t in watch.moves if t < t_cross]
    window_end = t_cross + p.cross_s
    returns = [t for t in watch.returns if t_cross <= t <= window_end]
    port_hot = [t for t in watch.port_hot if t_cross <= t <= window_end]
    hop = ""
    evs = [e for _, e in agent.events]
    for e in evs:
        if e.get("direction") == "to_backup" and "hop_switch" in e:
            hop = f"{e['hop_switch']} port {e['hop_port']}"
            break
    return Run(
        mode,
        cross,
        run,
        calls,
        (moves[0] - onset) * 1000 if moves else None,
        len(moves),
        _cross_loss(xlog),
        hop,
        len(returns),
        len(port_hot),
        early_moves=len(early),
        events=evs,
    )


# ------------------------------------------------------------------ report


def _mean(xs: list[float]) -> float:
    xs = [x for x in xs if not math.isnan(x)]
    return statistics.fmean(xs) if xs else float("nan")


def summary(runs: list[Run]) -> list[dict[str, Any]]:
    cells: dict[tuple[str, float], list[Run]] = {}
    for r in runs:
        cells.setdefault((r.mode, r.cross), []).append(r)
    out = []
    for (mode, cross), rs in cells.items():
        cs = [c for r in rs for c in r.calls]
        moved = [r.move_after_ms for r in rs if r.move_after_ms is not None]
        out.append(
            {
                "mode": mode,
                "cross": cross,
                "runs": len(rs),
                "calls": len(cs),
                "loss_mean": _mean([c.loss_pct for c in cs]),
                "loss_max": max(c.loss_pct for c in cs),
                "pps": _mean([c.pps for c in cs]),
                "max_gap_mean": _mean([c.max_gap_ms for c in cs]),
                "max_gap_max": max(c.max_gap_ms for c in cs),
                "p99_delay": _mean([c.delay_p99_ms for c in cs]),
                "mos_min": min(c.mos for c in cs),
                "mos_mean": _mean([c.mos for c in cs]),
                "move_after_ms": _mean(moved) if moved else None,
                "moved_runs": len(moved),
                "moves": sum(r.moves for r in rs),
                "returns": sum(r.returns for r in rs),
                "port_hot": _mean([float(r.port_hot) for r in rs]),
                "early_moves": sum(r.early_moves for r in rs),
                "cross_loss": _mean([r.cross_loss_pct or float("nan") for r in rs]),
                "hop": next((r.hop for r in rs if r.hop), ""),
            }
        )
    return out


def _fmt(x: float | None, nd: int = 1) -> str:
    return "" if x is None or (isinstance(x, float) and math.isnan(x)) else f"{x:.{nd}f}"


def table(rows: list[dict[str, Any]]) -> str:
    head = (
        "| cross | detection | runs x calls | loss % mean / max | pps / call | max gap ms mean / max "
        "| delay p99 ms | MOS min / mean | move after ms | moved runs / moves / returns "
        "| s1 port stamped hot / run | moves before the cross traffic | hop named "
        "| cross loss % |\n" + "|---" * 14 + "|\n"
    )
    lines = [
        f"| {r['cross']:g}x | {r['mode']} | {r['runs']} x {r['calls'] // max(r['runs'], 1)} "
        f"| {_fmt(r['loss_mean'], 2)} / {_fmt(r['loss_max'], 2)} | {_fmt(r['pps'])} "
        f"| {_fmt(r['max_gap_mean'])} / {_fmt(r['max_gap_max'])} | {_fmt(r['p99_delay'])} "
        f"| {_fmt(r['mos_min'], 2)} / {_fmt(r['mos_mean'], 2)} | {_fmt(r['move_after_ms'])} "
        f"| {r['moved_runs']} / {r['moves']} / {r['returns']} | {_fmt(r['port_hot'])} "
        f"| {r.get('early_moves', 0)} | {r['hop']} | {_fmt(r['cross_loss'])} |"
        for r in sorted(rows, key=lambda r: (r["cross"], MODES.index(r["mode"])))
    ]
    return head + "\n".join(lines) + "\n"


def versus_local(rows: list[dict[str, Any]]) -> str:
    """PPS and max gap of each INT row against local-only at the same cross
    traffic, as the paper's Fig. 7/8 state them."""
    base = {r["cross"]: r for r in rows if r["mode"] == "local"}
    out = ["| cross | detection | pps vs local | max gap vs local |", "|---|---|---|---|"]
    for r in sorted(rows, key=lambda r: (r["cross"], MODES.index(r["mode"]))):
        b = base.get(r["cross"])
        if r["mode"] == "local" or b is None:
            continue
        pps = 100 * (r["pps"] / b["pps"] - 1)
        gap = 100 * (r["max_gap_mean"] / b["max_gap_mean"] - 1)
        out.append(f"| {r['cross']:g}x | {r['mode']} | {pps:+.0f} % | {gap:+.0f} % |")
    return "\n".join(out) + "\n"


def plot(runs: list[Run], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    crosses = sorted({r.cross for r in runs})
    modes = [m for m in MODES if any(r.mode == m for r in runs)]
    fig, axes = plt.subplots(1, 4, figsize=(17, 4.2))
    what = [
        ("loss_pct", "media loss % per call"),
        ("pps", "packets/s per call"),
        ("max_gap_ms", "longest inter-arrival gap ms"),
        ("mos", "MOS per call (p99 delay)"),
    ]
    width = 0.8 / max(len(modes), 1)
    for ax, (attr, title) in zip(axes, what, strict=True):
        for j, mode in enumerate(modes):
            data = [
                [getattr(c, attr) for r in runs if r.mode == mode and r.cross == x for c in r.calls]
                for x in crosses
            ]
            pos = [i + (j - (len(modes) - 1) / 2) * width for i in range(len(crosses))]
            bp = ax.boxplot(
                data, positions=pos, widths=width * 0.9, patch_artist=True, showfliers=False
            )
            for b in bp["boxes"]:
                b.set_facecolor(f"C{j}")
            ax.plot([], [], color=f"C{j}", label=mode, linewidth=6)
        ax.set_xticks(range(len(crosses)), [f"{x:g}x" for x in crosses])
        ax.set_title(title)
        ax.set_xlabel("cross traffic")
    if attr == "mos":
        axes[-1].set_ylim(1, 4.6)
    axes[0].legend()
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def write(out: Path, runs: list[Run], p: Params) -> tuple[str, str, str]:
    rows = summary(runs)
    out.mkdir(parents=True, exist_ok=True)
    (out / "results.json").write_text(
        json.dumps(
            {
                "params": asdict(p),
                "summary": rows,
                "runs": [{k: v for k, v in asdict(r).items() if k != "events"} for r in runs],
            },
            indent=1,
        )
    )
    plot(runs, out / "int_reroute.png")
    commit = (
        subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True, cwd=ROOT
        ).stdout.strip()
        or "(not a git checkout)"
    )
    return table(rows), versus_local(rows), commit


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        prog="python -m p4relay_scenarios reroute-int",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    ap.add_argument("--modes", default="local,int-cp", help=f"of {','.join(MODES)}")
    ap.add_argument("--cross", default="2,4", help="cross traffic, multiples of the bottleneck")
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--calls", type=int, default=50)
    ap.add_argument("--cross-seconds", type=float, default=15.0)
    ap.add_argument("--out", type=Path, default=ROOT / "scenarios" / "results" / "reroute-int")
    ap.add_argument("--run-dir", type=Path, default=ROOT / "build" / "reroute-int")
    ap.add_argument(
        "--merge",
        action="store_true",
        help="keep the runs already in OUT/results.json of other cells",
    )
    a = ap.parse_args(argv)
    if os.geteuid() != 0:
        print("reroute-int builds network namespaces: run as root", file=sys.stderr)
        return 2
    if shutil.which("iperf3") is None:
        print("reroute-int needs iperf3", file=sys.stderr)
        return 2
    modes = [m.strip() for m in a.modes.split(",") if m.strip()]
    bad = [m for m in modes if m not in MODES]
    if bad:
        print(f"unknown mode(s) {bad}: {MODES}", file=sys.stderr)
        return 2
    crosses = [float(x) for x in a.cross.split(",")]
    p = Params(calls=a.calls, cross_s=a.cross_seconds)
    runs: list[Run] = []
    if a.merge and (a.out / "results.json").exists():
        runs = load_runs(
            a.out / "results.json",
            keep=lambda r: (r.mode, r.cross) not in {(m, x) for m in modes for x in crosses},
        )
    ib.down()
    ib.up()
    try:
        # passes over the whole matrix, one after the other: a change in the
        # machine's load falls on every cell alike, and a pass cut short
        # leaves every cell with the runs before it
        for k in range(a.runs):
            for x in crosses:
                for mode in modes:
                    r = run_one(mode, x, k, p, a.run_dir / f"{mode}-{x:g}x-{k}")
                    runs.append(r)
                    s = summary([r])[0]
                    print(
                        f"{mode} {x:g}x run {k}: loss {s['loss_mean']:.2f} %, pps {s['pps']:.1f}, "
                        f"max gap {s['max_gap_max']:.0f} ms, MOS min {s['mos_min']:.2f}, "
                        f"moved after {_fmt(r.move_after_ms)} ms ({r.moves} moves, "
                        f"{r.returns} returns, {r.early_moves} before the cross traffic; "
                        f"s1's port stamped hot {r.port_hot} times) {r.hop}",
                        flush=True,
                    )
                    tbl, vs, commit = write(a.out, runs, p)
                    # paths as a reader's checkout names them, not this machine's
                    cmd = " ".join(argv or sys.argv[1:]).replace(f"{Path.cwd()}/", "")
                    readme(a.out, tbl, vs, p, commit, cmd)
    finally:
        ib.down()
    tbl, vs, _ = write(a.out, runs, p)
    print(tbl)
    print(vs)
    return 0


def load_runs(path: Path, keep: Any) -> list[Run]:
    doc = json.loads(path.read_text())
    out = []
    for r in doc.get("runs", []):
        run = Run(
            r["mode"],
            r["cross"],
            r["run"],
            [CallResult(**c) for c in r["calls"]],
            r["move_after_ms"],
            r["moves"],
            r["cross_loss_pct"],
            r.get("hop", ""),
            r.get("returns", 0),
            r.get("port_hot", 0),
            early_moves=r.get("early_moves", 0),
        )
        if keep(run):
            out.append(run)
    return out


def readme(out: Path, tbl: str, vs: str, p: Params, commit: str, cmd: str) -> None:
    """The generated part of the README: between the markers, the rest kept."""
    gen = (
        f"Command: `python -m p4relay_scenarios reroute-int {cmd}`  \n"
        f"Machine: {platform.processor() or platform.machine()}, {os.cpu_count()} cores, "
        f"Linux {platform.release()}  \nCommit: {commit}  \n"
        f"Date: {dt.datetime.now(dt.UTC).strftime('%Y-%m-%dT%H:%M:%SZ')}  \n"
        f"Fabric: primary s1 -> s3 -> s2, bottleneck s3's port to s2 at "
        f"{p.rate_bps / 1e6:g} Mbit/s ({p.queue_packets}-packet queue), backup s1 -> s2 direct "
        f"(unshaped). {p.calls} concurrent relayed calls (G.711 A-law sized RTP, {PPS} packets/s, "
        f"caller -> callee), INT source s1, transit s3, sink s2; iperf3 UDP cross traffic "
        f"(1000-byte datagrams) for {p.cross_s:g} s, {p.lead_s:g} s after the calls start. "
        f"local: t_q {p.t_q_us:g} us, m = {p.m_local}; INT: onset {p.onset_cells} cells "
        f"({p.onset_cells * CELL_BYTES} B), clear {p.clear_cells} cells, m = {p.m_int} reports; "
        f"hold {p.hold_ms} ms.\n\n"
        + tbl
        + "\n![loss, packets/s, longest gap and MOS per call](int_reroute.png)\n\n"
        + "Against local-only detection (the paper's Fig. 7/8 compare with and without reroute):\n\n"
        + vs
    )
    path = out / "README.md"
    begin, end = "<!-- generated:begin -->", "<!-- generated:end -->"
    text = path.read_text() if path.exists() else f"# INT-driven reroute\n\n{begin}\n{end}\n"
    if begin not in text:
        text += f"\n{begin}\n{end}\n"
    pre, _, rest = text.partition(begin)
    _, _, post = rest.partition(end)
    path.write_text(f"{pre}{begin}\n{gen}{end}{post}")


__all__ = ["main"]
