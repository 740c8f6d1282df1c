"""Call churn through rtpagent while media flows through the software switch.

The software switch owns two veth ports of its own namespaces (A's and B's
hosts behind ports 1 and 2, the XDP path as `--xdp auto` picks it). Another
client installs N calls in it (the calls of other agents sharing the switch)
and two paced senders run G.711 frames over them, both ways, at a fixed total
rate. Meanwhile rtpagent (embedded RTPProxy, real RTPProxy commands) takes new
calls at 0, 100 and 1,000 calls/s: each call's U, then its L (the answer, which
offloads it), its caller sending a frame to the relay every PROBE_MS from the
L's reply until the callee's socket gets the first one the switch relayed,
then D after HOLD_S. So relay, leg and guard entries are written, mirrored
into the XDP maps and removed while media flows.

Per call count and churn rate: setup time (L sent → first relayed frame at
the callee) p50/p99, calls whose first frame never came, U/L/D round trips,
and the media's CPU cost per delivered packet (senders + receivers + the
switch process + ksoftirqd) and loss, against the same without churn.
One plot per figure against the churn rate in docs/benchmarks/45-rtpagent-churn/.

    python rtpagent/bench/churn.py [--calls 10000,100000] [--rates 0,100,1000]

Environment: P4RB_CHURN_PPS (media, total pps); P4RB_AGENT_LOG (a file for the
agent's log, else discarded) and P4RB_AGENT_LOG_LEVEL (default error).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import ctypes
import json
import os
import platform
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import bench as b

DOCS = b.ROOT / "docs" / "benchmarks"
STAGE = "45-rtpagent-churn"
TOOL = b.ROOT / "switch" / "target" / "release" / "examples" / "benchtool"
PY = Path(sys.executable)
GW_MAC = "02:00:00:00:00:fe"
# benchtool's call layout (examples/benchtool.rs call_ends)
A_IP, B_IP, RELAY_IP = "198.18.1.10", "198.18.2.10", "198.18.0.10"
A_PORT, B_PORT = 4000, 6000
CALL_BLOCK, RELAY_BLOCK = 16384, 8192
# The churned calls: their own hosts and the agent's relay address, outside
# the background's relay addresses (198.18.0.10 on, one per RELAY_BLOCK calls:
# up to .73 at the most calls): sharing one, the agent's relay ports collide
# with the background's entries and the switch refuses its calls.
A_HOST, B_HOST, AGENT_RELAY = "198.18.1.200", "198.18.2.200", "198.18.0.250"
CHURN_PORT0, SLOTS = 40000, 4000  # each churned call's party ports: 40000 + 2 slot
AGENT_CTL = 22222
AGENT_PORTS = "10000-65000"
AGENT_LEGS = 65536  # the agent's legs: [0, 65536); the background's above
MEDIA_PPS = int(os.environ.get("P4RB_CHURN_PPS", "50000"))
PROBE_MS = 5.0
FIRST_WAIT_S = 3.0
HOLD_S = 1.0
NS = {"a": "p4rch-a", "b": "p4rch-b", "sw": "p4rch-sw"}

_libc = ctypes.CDLL(None, use_errno=True)
CLONE_NEWNET = 0x40000000


def enter(name: str) -> None:
    """This thread into network namespace `name` (threads it starts later too)."""
    fd = os.open(f"/run/netns/{name}", os.O_RDONLY)
    try:
        if _libc.setns(fd, CLONE_NEWNET) != 0:
            raise OSError(ctypes.get_errno(), f"setns {name}")
    finally:
        os.close(fd)


@contextlib.contextmanager
def netns(name: str) -> Iterator[None]:
    """This thread in namespace `name` for a moment (sockets made meanwhile stay in it)."""
    own = os.open("/proc/thread-self/ns/net", os.O_RDONLY)
    try:
        enter(name)
        yield
    finally:
        _libc.setns(own, CLONE_NEWNET)
        os.close(own)


def sh(*cmd: str, check: bool = True) -> str:
    r = subprocess.run(cmd, capture_output=True, text=True)
    if check and r.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)}: {r.stderr.strip()}")
    return r.stdout


def nsx(ns: str, *cmd: str, check: bool = True) -> str:
    return sh("ip", "netns", "exec", NS[ns], *cmd, check=check)


def teardown() -> None:
    for ns in NS.values():
        for pid in sh("ip", "netns", "pids", ns, check=False).split():
            with contextlib.suppress(ProcessLookupError, ValueError):
                if int(pid) != os.getpid():  # the bench runs in the switch's
                    os.kill(int(pid), signal.SIGKILL)
        sh("ip", "netns", "del", ns, check=False)


def build() -> dict[str, str]:
    """A ─ sa [switch] sb ─ B; the churned parties' addresses on the hosts."""
    for ns in NS.values():
        sh("ip", "netns", "add", ns)
        sh("ip", "netns", "exec", ns, "ip", "link", "set", "lo", "up")
        sh("ip", "netns", "exec", ns, "sysctl", "-qw", "net.ipv6.conf.all.disable_ipv6=1")
    macs = {}
    for side in ("a", "b"):
        nsx(side, "ip", "link", "add", f"{side}0", "type", "veth", "peer", "name", f"s{side}",
            "netns", NS["sw"])  # fmt: skip
        nsx(side, "ip", "link", "set", f"{side}0", "up")
        nsx("sw", "ip", "link", "set", f"s{side}", "up")
    for ns, i in (("a", "a0"), ("b", "b0"), ("sw", "sa"), ("sw", "sb")):
        macs[i] = str(json.loads(nsx(ns, "ip", "-j", "link", "show", i))[0]["address"])
    for side, host in (("a", A_HOST), ("b", B_HOST)):
        # The parties' frames leave complete, as from a NIC: with the veth's
        # checksum offload on a local socket's UDP checksum is left partial,
        # which a relay that rewrites it (in XDP) cannot finish.
        nsx(side, "ethtool", "-K", f"{side}0", "tx", "off")
        nsx(side, "ip", "addr", "add", f"{host}/32", "dev", f"{side}0")
        nsx(side, "ip", "route", "add", f"{AGENT_RELAY}/32", "dev", f"{side}0")
        nsx(side, "ip", "neigh", "replace", AGENT_RELAY, "lladdr", GW_MAC, "dev", f"{side}0",
            "nud", "permanent")  # fmt: skip
    # The embedded RTPProxy's media sockets (-l): never reached, the switch relays.
    nsx("sw", "ip", "addr", "add", f"{AGENT_RELAY}/32", "dev", "lo")
    return macs


def wait_tcp(port: int, proc: subprocess.Popen[bytes]) -> None:
    for _ in range(200):
        if proc.poll() is not None:
            raise RuntimeError("the software switch exited")
        with socket.socket() as s:
            s.settimeout(0.2)
            if s.connect_ex(("127.0.0.1", port)) == 0:
                return
        time.sleep(0.05)
    raise RuntimeError("the software switch did not listen")


async def preload(n: int) -> None:
    """n calls in the switch as another client writes them, in benchtool's
    layout (its senders hit them), with legs above the agent's."""
    from p4relay_switch import Endpoint, RelayCall

    def plus(ip: str, k: int) -> str:
        a = [int(x) for x in ip.split(".")]
        v = (a[0] << 24 | a[1] << 16 | a[2] << 8 | a[3]) + k
        return ".".join(str(v >> s & 0xFF) for s in (24, 16, 8, 0))

    def call(c: int) -> RelayCall:
        ra = 20000 + 4 * (c % RELAY_BLOCK)
        relay = plus(RELAY_IP, c // RELAY_BLOCK)
        off = 2 * (c % CALL_BLOCK)
        return RelayCall.between(
            Endpoint.of(plus(A_IP, c // CALL_BLOCK), A_PORT + off),
            Endpoint.of(relay, ra),
            Endpoint.of(plus(B_IP, c // CALL_BLOCK), B_PORT + off),
            Endpoint.of(relay, ra + 2),
            legs=(AGENT_LEGS + 2 * c, AGENT_LEGS + 2 * c + 1),
            ports=(1, 2),
        )

    await b.install_calls("127.0.0.1:50052", call, 0, n)


@dataclass
class Window:
    rate: int
    calls: int = 0
    setup_ms: list[float] = field(default_factory=list)
    never: int = 0  # calls whose first frame did not come in FIRST_WAIT_S
    unanswered: int = 0  # commands with no answer in 5 s
    rtt: dict[str, list[float]] = field(default_factory=lambda: {"U": [], "L": [], "D": []})
    sent: int = 0
    received: int = 0
    media_cpu_s: float = 0.0  # senders + receivers + switch + ksoftirqd
    switch_cpu_s: float = 0.0
    agent_cpu_s: float = 0.0
    secs: float = 0.0
    xdp_writes: float = 0.0  # relay entries mirrored into the XDP map meanwhile
    outcomes: dict[str, float] = field(default_factory=dict)  # the agent's offloads, fallbacks
    churn_secs: float = 0.0  # how long calls were started

    @property
    def loss(self) -> float:
        return 1 - self.received / self.sent if self.sent else 1.0

    @property
    def us_per_pkt(self) -> float:
        return self.media_cpu_s / self.received * 1e6 if self.received else float("inf")


class Rx(asyncio.DatagramProtocol):
    def __init__(self, driver: Driver, slot: int) -> None:
        self.driver, self.slot = driver, slot

    def datagram_received(self, data: bytes, addr: tuple[str, int]) -> None:
        self.driver.arrived(self.slot)


class Driver:
    """Calls through the agent at a rate; each call's setup to its first relayed frame."""

    def __init__(self) -> None:
        self.a: list[socket.socket] = []
        self.rx: list[asyncio.BaseTransport] = []
        self.free = list(range(SLOTS))
        self.pending: dict[int, tuple[int, float, asyncio.Future[float]]] = {}
        self.frame = bytes([0x80, 0]) + bytes(170)

    async def open(self) -> None:
        loop = asyncio.get_running_loop()
        with netns(NS["a"]):
            for k in range(SLOTS):
                s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
                s.bind((A_HOST, CHURN_PORT0 + 2 * k))
                s.setblocking(False)
                self.a.append(s)
        with netns(NS["b"]):
            bs = []
            for k in range(SLOTS):
                s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
                s.bind((B_HOST, CHURN_PORT0 + 2 * k))
                bs.append(s)
        for k, s in enumerate(bs):
            t, _ = await loop.create_datagram_endpoint(lambda k=k: Rx(self, k), sock=s)  # type: ignore[misc]
            self.rx.append(t)
        self.ctl = await b.endpoint(AGENT_CTL)
        self.prober = asyncio.create_task(self.probe())

    def close(self) -> None:
        self.prober.cancel()
        self.ctl[0].close()
        for t in self.rx:
            t.close()
        for s in self.a:
            s.close()

    def arrived(self, slot: int) -> None:
        p = self.pending.pop(slot, None)
        if p is not None and not p[2].done():
            p[2].set_result(time.perf_counter())

    async def probe(self) -> None:
        """Every PROBE_MS one frame from each waiting caller to its relay port."""
        while True:
            await asyncio.sleep(PROBE_MS / 1000)
            for slot, (port, _, _) in list(self.pending.items()):
                with contextlib.suppress(BlockingIOError):
                    self.a[slot].sendto(self.frame, (AGENT_RELAY, port))

    async def call(self, w: Window, cid: str, slot: int) -> None:
        t, p = self.ctl
        try:
            pa = pb = CHURN_PORT0 + 2 * slot
            steps = (
                ("U", f"U {cid} {A_HOST} {pa} f;1"),
                ("L", f"L {cid} {B_HOST} {pb} f;1 t;1"),
            )
            for k, body in steps:
                t0 = time.perf_counter()
                try:
                    r = await b.cmd(t, p, body)
                except TimeoutError:
                    w.unanswered += 1
                    return
                w.rtt[k].append((time.perf_counter() - t0) * 1000)
            try:
                port = int(r.split()[0])
            except (ValueError, IndexError):
                w.unanswered += 1
                return
            first: asyncio.Future[float] = asyncio.get_running_loop().create_future()
            self.pending[slot] = (port, t0, first)
            with contextlib.suppress(BlockingIOError):
                self.a[slot].sendto(self.frame, (AGENT_RELAY, port))
            try:
                got = await asyncio.wait_for(first, FIRST_WAIT_S)
                w.setup_ms.append((got - t0) * 1000)
            except TimeoutError:
                w.never += 1
            finally:
                self.pending.pop(slot, None)
            await asyncio.sleep(max(0.0, HOLD_S - (time.perf_counter() - t0)))
            t0 = time.perf_counter()
            try:
                await b.cmd(t, p, f"D {cid} f t")
                w.rtt["D"].append((time.perf_counter() - t0) * 1000)
            except TimeoutError:
                w.unanswered += 1
        finally:
            self.free.append(slot)

    async def churn(self, w: Window, stop: asyncio.Event, tag: str) -> None:
        loop = asyncio.get_running_loop()
        tasks: list[asyncio.Task[None]] = []
        start = loop.time()
        k = 0
        while not stop.is_set() and w.rate:
            due = start + k / w.rate
            if (wait := due - loop.time()) > 0:
                await asyncio.sleep(wait)
            if not self.free:  # every party socket in a call: the rate falls behind
                await asyncio.sleep(0.001)
                continue
            k += 1
            tasks.append(asyncio.create_task(self.call(w, f"ch{tag}-{k}", self.free.pop())))
        w.calls = k
        w.churn_secs = loop.time() - start
        await asyncio.gather(*tasks)


def metrics(port: int) -> dict[str, float]:
    """The switch's /metrics (this process runs in its namespace)."""
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))  # never a proxy
    text = opener.open(f"http://127.0.0.1:{port}/metrics", timeout=5).read().decode()
    out: dict[str, float] = {}
    for line in text.splitlines():
        if line and not line.startswith("#") and "{" not in line:
            name, _, v = line.partition(" ")
            with contextlib.suppress(ValueError):
                out[name] = float(v)
    return out


def agent_outcomes(port: int = 9102) -> dict[str, float]:
    """The agent's offload outcomes so far: offloads and fallbacks by reason
    (this process runs in its namespace)."""
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))  # never a proxy
    text = opener.open(f"http://127.0.0.1:{port}/metrics", timeout=5).read().decode()
    out: dict[str, float] = {}
    for line in text.splitlines():
        if line.startswith(("rtpagent_offloads_total ", "rtpagent_fallbacks_total{")):
            name, _, v = line.rpartition(" ")
            with contextlib.suppress(ValueError):
                out[name.replace("rtpagent_", "").replace("_total", "")] = float(v)
    return out


def ksoftirqd_ns() -> int:
    total = 0
    for p in Path("/proc").iterdir():
        if p.name.isdigit():
            with contextlib.suppress(OSError):
                if (p / "comm").read_text().startswith("ksoftirqd"):
                    total += int(b.cpu_seconds(int(p.name)) * 1e9)
    return total


def receivers(secs: float, calls: int) -> list[subprocess.Popen[bytes]]:
    """Counting the background calls' frames at B (A→B) and at A (B→A)."""
    hi = min(calls, CALL_BLOCK)
    return [
        subprocess.Popen(["ip", "netns", "exec", NS[ns], str(TOOL), "recv", "--ifname", i,
                          "--secs", str(secs * 3 + 5), "--idle-stop", "0.5",
                          "--dport-min", str(base), "--dport-max", str(base + 2 * (hi - 1))],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        for ns, i, base in (("b", "b0", B_PORT), ("a", "a0", A_PORT))
    ]  # fmt: skip


def start(cmd: list[str], log: Path | None = None) -> subprocess.Popen[bytes]:
    out = log.open("ab") if log is not None else subprocess.DEVNULL
    return subprocess.Popen(cmd, stdout=out, stderr=out)


async def window(d: Driver, rate: int, secs: float, calls: int, macs: dict[str, str],
                 sw_pid: int, agent_pid: int, tag: str) -> Window:  # fmt: skip
    """Media for `secs` over the background calls, churn at `rate` throughout
    (started HOLD_S before, so calls end at the rate too)."""
    w = Window(rate)
    stop = asyncio.Event()
    o0 = await asyncio.to_thread(agent_outcomes)
    churn = asyncio.create_task(d.churn(w, stop, tag))
    await asyncio.sleep(HOLD_S if rate else 0)
    rxs = receivers(secs, calls)
    await asyncio.sleep(0.3)
    m0 = await asyncio.to_thread(metrics, 9101)
    s0, a0, k0 = b.cpu_seconds(sw_pid), b.cpu_seconds(agent_pid), ksoftirqd_ns()
    t0 = time.monotonic()
    flows = (
        ("a", "a0", macs["a0"], A_IP, A_PORT, 20000),
        ("b", "b0", macs["b0"], B_IP, B_PORT, 20002),
    )
    txs = [
        await asyncio.create_subprocess_exec(
            "ip", "netns", "exec", NS[ns], str(TOOL), "send", "--ifname", i, "--src-mac", mac,
            "--dst-mac", GW_MAC, "--src", src, "--dst", RELAY_IP, "--sport", str(sport),
            "--dport", str(dport), "--flows", str(calls), "--src-block", str(CALL_BLOCK),
            "--dst-block", str(RELAY_BLOCK), "--dport-step", "4", "--pps", str(MEDIA_PPS // 2),
            "--secs", str(secs), stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        for ns, i, mac, src, sport, dport in flows
    ]  # fmt: skip
    sent = [await t.communicate() for t in txs]
    w.secs = time.monotonic() - t0
    s1, a1, k1 = b.cpu_seconds(sw_pid), b.cpu_seconds(agent_pid), ksoftirqd_ns()
    stop.set()
    got = [await asyncio.to_thread(r.communicate, None, secs * 3 + 15) for r in rxs]
    m1 = await asyncio.to_thread(metrics, 9101)
    await churn
    o1 = await asyncio.to_thread(agent_outcomes)
    w.outcomes = {k: v - o0.get(k, 0.0) for k, v in o1.items() if v - o0.get(k, 0.0)}
    for tx, (_, err) in zip(txs, sent, strict=True):
        if tx.returncode != 0:
            raise RuntimeError(f"sender failed: {err.decode(errors='replace').strip()}")
    for r, (_, err) in zip(rxs, got, strict=True):
        if r.returncode != 0:
            raise RuntimeError(f"receiver failed: {err.decode(errors='replace').strip()}")
    ss = [json.loads(o) for o, _ in sent]
    rr = [json.loads(o) for o, _ in got]
    w.sent = sum(int(x["sent"]) for x in ss)
    w.received = sum(int(x["packets"]) for x in rr)
    w.switch_cpu_s = s1 - s0
    w.agent_cpu_s = a1 - a0
    w.media_cpu_s = sum(x["cpu_ns"] for x in ss + rr) / 1e9 + w.switch_cpu_s + (k1 - k0) / 1e9
    w.xdp_writes = m1.get("p4relay_xdp_relay_mirrored_total", 0) - m0.get(
        "p4relay_xdp_relay_mirrored_total", 0
    )
    return w


@dataclass
class Point:
    calls: int
    preload_s: float = 0.0
    windows: dict[int, list[Window]] = field(default_factory=dict)


async def run_point(a: argparse.Namespace, calls: int, macs: dict[str, str]) -> Point:
    pt = Point(calls)
    sw = start([str(b.SOFTSWITCH), "--port", "1=sa", "--port", "2=sb"])
    agent = None
    try:
        wait_tcp(50052, sw)
        nsx("sw", str(TOOL), "program", "--calls", "0", "--a-ip", A_IP, "--a-port", str(A_PORT),
            "--b-ip", B_IP, "--b-port", str(B_PORT), "--relay-ip", RELAY_IP,
            "--route", f"1,{GW_MAC},{macs['a0']},198.18.1.0/24",
            "--route", f"2,{GW_MAC},{macs['b0']},198.18.2.0/24")  # fmt: skip
        with tempfile.TemporaryDirectory() as tmp:
            agent = start(
                [str(PY), "-m", "rtpagent.cli", "--rtpproxy", "embedded", "--listen", f"udp:127.0.0.1:{AGENT_CTL}",
                 "--embedded-ports", AGENT_PORTS, "--relay-ports", AGENT_PORTS,
                 "--relay-addr", AGENT_RELAY, "--notify-listen", "tcp:127.0.0.1:22300",
                 "--state-file", f"{tmp}/state.sqlite", "--metrics-listen", "127.0.0.1:9102",
                 "--log-level", os.environ.get("P4RB_AGENT_LOG_LEVEL", "error"), "--switch", "127.0.0.1:50052",
                 "--legs", str(AGENT_LEGS)],
                Path(os.environ["P4RB_AGENT_LOG"]) if os.environ.get("P4RB_AGENT_LOG") else None,
            )  # fmt: skip
            await b.wait_ready(AGENT_CTL)
            t0 = time.monotonic()
            await preload(calls)
            pt.preload_s = time.monotonic() - t0
            d = Driver()
            await d.open()
            await window(d, 0, 0.5, calls, macs, sw.pid, agent.pid, "w")  # warm-up
            for rnd in range(a.rounds):
                order = a.rates if rnd % 2 == 0 else a.rates[::-1]
                for rate in order:
                    w = await window(
                        d, rate, a.secs, calls, macs, sw.pid, agent.pid, f"{rnd}-{rate}"
                    )
                    pt.windows.setdefault(rate, []).append(w)
                    sp = (f", setup p50 {statistics.median(w.setup_ms):.1f} / p99 "
                          f"{b.pct(w.setup_ms, 99):.1f} ms" if w.setup_ms else "")  # fmt: skip
                    print(f"  {calls:,d} calls, churn {rate:>5,d}/s: {w.calls:,d} calls, loss "
                          f"{w.loss:.3%}, {w.us_per_pkt:.2f} µs/pkt (switch {w.switch_cpu_s:.2f} s)"
                          f"{sp}, never {w.never}, unanswered {w.unanswered}; agent "
                          f"{', '.join(f'{k} {v:,.0f}' for k, v in sorted(w.outcomes.items())) or '-'}",
                          flush=True)  # fmt: skip
            d.close()
    finally:
        for p in (agent, sw):
            if p is not None and p.poll() is None:
                p.terminate()
                try:
                    p.wait(10)
                except subprocess.TimeoutExpired:
                    p.kill()
    return pt


def _med(xs: list[float]) -> float | None:
    return statistics.median(xs) if xs else None


def setup_q(ws: list[Window], q: float) -> float | None:
    xs = [x for w in ws for x in w.setup_ms]
    return (statistics.median(xs) if q == 50 else b.pct(xs, q)) if xs else None


def report(pts: list[Point], a: argparse.Namespace, load: tuple[float, float]) -> tuple[str, bool]:
    lines: list[str] = []
    w = lines.append
    w(
        f"Software switch (`--port 1=sa,2=sb`, `--xdp auto`: generic XDP on veth) with N calls "
        f"installed by another client, G.711 frames over all of them both ways at "
        f"{MEDIA_PPS / 1000:g} kpps in total (benchtool's paced senders); rtpagent (embedded "
        f"RTPProxy, media ports {AGENT_PORTS}) takes new calls at each churn rate: U, L (the "
        f"answer: offloaded), the caller sending a frame every {PROBE_MS:g} ms from the L's "
        f"reply until the callee gets the first one relayed, D {HOLD_S:g} s after the L. "
        f"{a.rounds} rounds of {a.secs:g} s windows per rate, rates interleaved; "
        f"{os.cpu_count()} CPUs shared by everything (other work ran on this host too); host "
        f"load average {load[0]:.2f} at the start, {load[1]:.2f} at the end; kernel "
        f"{platform.release()}. Setup time: the L sent → the first relayed frame at the callee "
        f"(resolution {PROBE_MS:g} ms). Media CPU: senders + receivers + the switch process + "
        "ksoftirqd, per delivered packet."
    )
    w("")
    cols = [(p, r) for p in pts for r in a.rates]
    w("| | " + " | ".join(f"{p.calls:,d} calls, {r:,d}/s" for p, r in cols) + " |")
    w("|---|" + "---|" * len(cols))

    def row(title: str, cell) -> None:  # type: ignore[no-untyped-def]
        w(f"| {title} | " + " | ".join(cell(p.windows.get(r, [])) for p, r in cols) + " |")

    def fmt(v: float | None, f: str = "{:.2f}") -> str:
        return f.format(v) if v is not None else "—"

    row("calls set up and torn down", lambda ws: f"{sum(x.calls for x in ws):,d}")
    row("calls started per s (offered)",
        lambda ws: fmt(_med([x.calls / x.churn_secs for x in ws if x.churn_secs]), "{:,.0f}"))  # fmt: skip
    row("setup, L → first relayed frame p50 / p99, ms",
        lambda ws: f"{fmt(setup_q(ws, 50), '{:.1f}')} / {fmt(setup_q(ws, 99), '{:.1f}')}")  # fmt: skip
    row(f"calls with no relayed frame in {FIRST_WAIT_S:g} s", lambda ws: f"{sum(x.never for x in ws):,d}")  # fmt: skip
    row("commands unanswered in 5 s", lambda ws: f"{sum(x.unanswered for x in ws):,d}")
    row("the agent's offloads / calls left on RTPProxy (its fallbacks)",
        lambda ws: f"{sum(x.outcomes.get('offloads', 0) for x in ws):,.0f} / "
                   f"{sum(v for x in ws for k, v in x.outcomes.items() if k != 'offloads'):,.0f}")  # fmt: skip
    for k in "ULD":
        row(f"{k} round trip p50 / p99, ms",
            lambda ws, k=k: (f"{statistics.median(xs):.2f} / {b.pct(xs, 99):.2f}"
                             if (xs := [x for v in ws for x in v.rtt[k]]) else "—"))  # fmt: skip
    row("media: delivered / sent, kpps",
        lambda ws: f"{fmt(_med([x.received / x.secs / 1000 for x in ws]), '{:.1f}')} / "
                   f"{fmt(_med([x.sent / x.secs / 1000 for x in ws]), '{:.1f}')}")  # fmt: skip
    row("media loss, %", lambda ws: fmt(_med([100 * x.loss for x in ws]), "{:.3f}"))
    row("media CPU per delivered packet, µs (median [min])",
        lambda ws: f"{fmt(_med([x.us_per_pkt for x in ws]))} [{fmt(min((x.us_per_pkt for x in ws), default=None))}]")  # fmt: skip
    row("of which the switch process, µs per packet",
        lambda ws: fmt(_med([x.switch_cpu_s / x.received * 1e6 for x in ws if x.received])))  # fmt: skip
    row("agent + RTPProxy CPU, % of a core",
        lambda ws: fmt(_med([100 * x.agent_cpu_s / x.secs for x in ws]), "{:.1f}"))  # fmt: skip
    row("relay entries mirrored into the XDP map, per s",
        lambda ws: fmt(_med([x.xdp_writes / x.secs for x in ws]), "{:,.0f}"))  # fmt: skip
    w("| installing the background calls (another client, 250 a Write), s | "
      + " | ".join(f"{p.preload_s:.1f}" for p, _ in cols) + " |")  # fmt: skip
    w("")
    ok = True
    for p in pts:
        base = _med([x.us_per_pkt for x in p.windows.get(0, [])])
        for r in a.rates:
            ws = p.windows.get(r, [])
            ok &= not any(x.unanswered or x.never for x in ws)
            v = _med([x.us_per_pkt for x in ws])
            if r and base and v:
                w(f"- {p.calls:,d} calls, churn {r:,d}/s: media cost per packet {v / base:.2f}x "
                  "the same without churn")  # fmt: skip
    w(f"- every command answered and every churned call's media relayed: {'yes' if ok else 'NO'}")
    w("")
    if not a.no_plots:
        for f in draw(pts, a):
            w(f"![{f.stem}]({os.path.relpath(f, DOCS)})")
            w("")
    return "\n".join(lines), ok


# A plot's lines for one call count: (label suffix, the figure from a rate's windows).
Lines = Callable[[Point], list[tuple[str, Callable[[list[Window]], float | None]]]]


def draw(pts: list[Point], a: argparse.Namespace) -> list[Path]:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    out = DOCS / STAGE
    out.mkdir(parents=True, exist_ok=True)
    files = []

    def fig(name: str, title: str, ylabel: str, value: Lines, rates: list[int], logy: bool = False) -> None:  # fmt: skip
        f, ax = plt.subplots(figsize=(7, 4))
        if logy:
            ax.set_yscale("log")
        for p in pts:
            for label, fn in value(p):
                xy = [(r, v) for r in rates if (v := fn(p.windows.get(r, []))) is not None]
                if xy:
                    ax.plot([x for x, _ in xy], [y for _, y in xy], marker="o",
                            label=f"{p.calls:,d} calls{label}")  # fmt: skip
        ax.set_xticks(rates, [f"{r:,}" for r in rates])
        ax.set_xlabel("churn, calls/s through rtpagent")
        ax.set_ylabel(ylabel)
        ax.set_title(title)
        ax.grid(True, alpha=0.3)
        ax.legend(fontsize=8)
        f.tight_layout()
        path = out / name
        f.savefig(path, dpi=100)
        plt.close(f)
        files.append(path)

    churned = [r for r in a.rates if r]
    fig("setup.png", "setup: L sent → first relayed frame", "ms",
        lambda p: [(" p50", lambda ws: setup_q(ws, 50)), (" p99", lambda ws: setup_q(ws, 99))],
        churned, logy=True)  # fmt: skip
    fig("cost.png", "media CPU per delivered packet (senders, receivers, switch, ksoftirqd)", "µs",
        lambda p: [("", lambda ws: _med([x.us_per_pkt for x in ws]))], a.rates)  # fmt: skip
    fig("loss.png", "media loss", "% of sent",
        lambda p: [("", lambda ws: _med([100 * x.loss for x in ws]))], a.rates)  # fmt: skip
    fig("agent-cpu.png", "agent + RTPProxy CPU", "% of a core",
        lambda p: [("", lambda ws: _med([100 * x.agent_cpu_s / x.secs for x in ws]))], a.rates)  # fmt: skip
    return files


async def main_async(a: argparse.Namespace, macs: dict[str, str]) -> tuple[str, bool]:
    load0 = os.getloadavg()[0]
    pts = []
    for n in a.calls:
        print(f"== {n:,d} calls up, churn {', '.join(map(str, a.rates))} calls/s", flush=True)
        pts.append(await run_point(a, n, macs))
    return report(pts, a, (load0, os.getloadavg()[0]))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)  # fmt: skip
    ap.add_argument("--calls", default="10000,100000", help="background calls, comma separated")
    ap.add_argument("--rates", default="0,100,1000", help="churn, calls/s, comma separated")
    ap.add_argument("--secs", type=float, default=4.0, help="media seconds per window")
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--no-plots", action="store_true")
    a = ap.parse_args()
    try:
        a.calls = sorted({int(x) for x in a.calls.split(",")})
        a.rates = sorted({int(x) for x in a.rates.split(",")})
    except ValueError:
        print("--calls and --rates: comma-separated integers", file=sys.stderr)
        return 2
    if not a.calls or a.calls[0] < 1 or a.calls[-1] > 4 * CALL_BLOCK * 8:
        print(f"--calls: 1..{4 * CALL_BLOCK * 8:,d}", file=sys.stderr)
        return 2
    if not a.rates or a.rates[0] < 0 or a.rates[-1] > 2000:
        print("--rates: 0..2,000 calls/s", file=sys.stderr)
        return 2
    if os.geteuid() != 0:
        print("needs root (network namespaces, AF_PACKET, XDP)", file=sys.stderr)
        return 2
    for f in (b.SOFTSWITCH, TOOL):
        if not f.is_file():
            print(f"{f} missing: cargo build --release --all-targets in switch/", file=sys.stderr)
            return 2
    teardown()
    try:
        macs = build()
        # The whole run in the switch's namespace: the switch's gRPC and
        # /metrics, the agent's control socket; the parties' sockets are
        # made in theirs.
        enter(NS["sw"])
        table, ok = asyncio.run(main_async(a, macs))
    finally:
        teardown()
    print()
    print(table)
    if out := os.environ.get("BENCH_TABLE"):
        Path(out).write_text(table + "\n")
    return 0 if ok else 3


if __name__ == "__main__":
    sys.exit(main())
