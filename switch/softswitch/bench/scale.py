"""Softswitch at real call counts: cost per packet, loss, latency and the fast
path's maps from 16 to 100,000 concurrent calls, side by side with the kernel
bridge, RTPProxy and rtpengine (user space), on the testbeds of softswitch_bench.py.

Each call has its 2 flows, A→B on one side and B→A on the other: two paced
senders (a0 and b0) and two receivers (b0 and a0) run at once. G.711 runs at
50 pps per flow; no host here carries 200,000 such flows, so every call count
gets the same total rate (P4RB_SCALE_RATE, default 100 kpps: 50 kpps each
way) spread over its flows round robin. Where a flow gets fewer than 50 pps
each packet meets a table entry the previous packets did not warm, which is
the case that costs at scale. The direct veth baseline runs with the same
flows at each call count, so what the senders and receivers pay for their own
larger working set is subtracted. The XDP path runs twice: with its relay
map at the default size (every relay entry the switch holds) and sized to the
calls (`--xdp-entries` 4 per call), which separates the map's sparse bucket
array from the rest of the per-packet working set.

    python switch/softswitch/bench/scale.py [--calls 16,256,...] [--quick] [--skip-memory]
        [--variants bf,sg,sz,su,rp,re] [--plots DIR]

Environment: P4RB_SCALE_RATE (total pps), P4RB_TRIAL_S, P4RB_ROUNDS.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import platform
import resource
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import softswitch_bench as sb
from softswitch_bench import (
    A_IP,
    A_PORT,
    B_IP,
    B_PORT,
    BPF_STATS,
    GW_MAC,
    RELAY_IP,
    RUN,
    Testbed,
    fmt,
    med,
    nsx,
    xdp_run,
)

CALLS = [16, 256, 4096, 32768, 100_000]
RATE = int(os.environ.get("P4RB_SCALE_RATE", "100000"))
TRIAL_S = float(os.environ.get("P4RB_TRIAL_S", "2.0"))
ROUNDS = int(os.environ.get("P4RB_ROUNDS", "3"))
TARGET = 1.2  # cost per packet at the most calls / at the fewest, both paths
MEMORY_TARGET_MIB = 512.0
# benchtool's call layout (examples/benchtool.rs call_ends)
CALL_BLOCK, RELAY_BLOCK = 16384, 8192
# RTPProxy holds a call in 4 sockets on one address: its port range and its
# open-file limit (inherited) bound the calls.
RTPP_PORTS = (20000, 65000)
RTPP_MAX_CALLS = (
    min(
        (RTPP_PORTS[1] - RTPP_PORTS[0]) // 4,
        (resource.getrlimit(resource.RLIMIT_NOFILE)[0] - 200) // 4,
    )
    - 16
)
CTL_PORT = sb.CTL_PORT
DOCS = sb.ROOT / "docs/benchmarks"
STAGE = "11-softswitch-scale"


@dataclass
class Side:
    """One direction: a paced sender on one host, the receiver on the other."""

    tx_ns: str
    tx_if: str
    rx_ns: str
    rx_if: str
    flow: list[str]
    dport_min: int
    dport_max: int


@dataclass
class ScaleDut:
    name: str
    tb: Testbed
    sides: list[Side]
    settings: str
    pid: int | None = None
    stop: Callable[[], None] = lambda: None
    metrics_ns: str | None = None  # a softswitch: /metrics on 127.0.0.1:9101 in this namespace


@dataclass
class Trial:
    sent: int
    achieved_pps: float
    received: int
    cpu_s: float
    xdp_share: float | None  # relay hits the kernel relayed / all relay hits
    xdp_ns: float | None = None  # the XDP program's own run time per packet (bpf_stats)

    @property
    def loss(self) -> float:
        return 1 - self.received / self.sent if self.sent else 1.0

    @property
    def us_per_pkt(self) -> float:
        return self.cpu_s / self.received * 1e6 if self.received else float("inf")


@dataclass
class Point:
    """One variant at one call count."""

    trials: list[Trial] = field(default_factory=list)
    p50_us: float = -1.0
    p99_us: float = -1.0
    maps: dict[str, float] = field(default_factory=dict)
    setup_s: float = 0.0


def ip_plus(ip: str, n: int) -> str:
    a = [int(x) for x in ip.split(".")]
    v = (a[0] << 24 | a[1] << 16 | a[2] << 8 | a[3]) + n
    return ".".join(str(v >> s & 0xFF) for s in (24, 16, 8, 0))


def flow(src_mac: str, dst_mac: str, src: str, dst: str, sport: int, dport: int,
         calls: int, dst_block: int, step: int, extra: list[str] | None = None) -> list[str]:  # fmt: skip
    return ["--src-mac", src_mac, "--dst-mac", dst_mac, "--src", src, "--dst", dst,
            "--sport", str(sport), "--dport", str(dport), "--flows", str(calls),
            "--src-block", str(CALL_BLOCK), "--dst-block", str(dst_block),
            "--dport-step", str(step), *(extra or [])]  # fmt: skip


def rx_range(base: int, calls: int) -> tuple[int, int]:
    return base, base + 2 * (min(calls, CALL_BLOCK) - 1)


def hosts_sides(tb: Testbed, calls: int, a_mac: str, b_mac: str) -> list[Side]:
    """Host to host (the bridge, the direct pair): A's flows to B's addresses and back."""
    m = tb.macs
    return [
        Side(tb.a, "a0", tb.b, "b0",
             flow(m["a0"], b_mac, A_IP, B_IP, A_PORT, B_PORT, calls, CALL_BLOCK, 2),
             *rx_range(B_PORT, calls)),
        Side(tb.b, "b0", tb.a, "a0",
             flow(m["b0"], a_mac, B_IP, A_IP, B_PORT, A_PORT, calls, CALL_BLOCK, 2),
             *rx_range(A_PORT, calls)),
    ]  # fmt: skip


def direct(tb: Testbed, calls: int) -> ScaleDut:
    return ScaleDut("direct veth (baseline)", tb,
                    hosts_sides(tb, calls, tb.macs["a0"], tb.macs["b0"]), "—")  # fmt: skip


def bridge(tb: Testbed, calls: int) -> ScaleDut:
    """The netfilter-off bridge with its forwarding database at the call
    count's scale: a static entry per flow (2 per call) beside the hosts' own."""
    nsx(tb.sw, "ip", "link", "add", "br0", "type", "bridge")
    for i in ("sa", "sb"):
        nsx(tb.sw, "ip", "link", "set", i, "master", "br0")
    nsx(tb.sw, "ip", "link", "set", "br0", "up")
    for t in ("iptables", "ip6tables", "arptables"):
        nsx(tb.sw, "sysctl", "-qw", f"net.bridge.bridge-nf-call-{t}=0")
    lines = []
    for k in range(2 * calls):
        mac = f"02:fd:{k >> 24 & 0xFF:02x}:{k >> 16 & 0xFF:02x}:{k >> 8 & 0xFF:02x}:{k & 0xFF:02x}"
        lines.append(f"fdb add {mac} dev {'sa' if k % 2 else 'sb'} master static\n")
    subprocess.run(["ip", "netns", "exec", tb.sw, "bridge", "-batch", "-"], input="".join(lines),
                   text=True, check=True, capture_output=True)  # fmt: skip
    fdb = len(nsx(tb.sw, "bridge", "fdb", "show", "br", "br0", "static").splitlines())
    d = ScaleDut("bridge, netfilter off", tb, hosts_sides(tb, calls, tb.macs["a0"], tb.macs["b0"]),
                 "`bridge-nf-call-{ip,ip6,arp}tables=0`; a static fdb entry per flow")  # fmt: skip
    d.settings += f" ({fdb:,d} static fdb entries)"
    return d


def softswitch(
    tb: Testbed, calls: int, xdp: str | None, name: str, extra: list[str] | None = None
) -> ScaleDut:
    extra = extra or []
    args = ["--port", "1=sa", "--port", "2=sb"] + (["--xdp", xdp] if xdp else []) + extra
    log = f"softswitch-{tb.tag}"
    p = sb.start_bg(log, ["ip", "netns", "exec", tb.sw, str(sb.BIN), *args])
    sb.wait_tcp(tb.sw, 50052, p, log)
    settings = "`--port 1=sa,2=sb`" + (f", `--xdp {xdp}`" if xdp else "")
    if xdp is None:
        settings += f" (`--xdp auto` picks {sb.xdp_mode(tb)})"
    if extra:
        settings += ", `" + " ".join(extra) + "`"
    nsx(
        tb.sw, str(sb.TOOL), "program", "--calls", str(calls), "--a-ip", A_IP,
        "--a-port", str(A_PORT), "--b-ip", B_IP, "--b-port", str(B_PORT), "--relay-ip", RELAY_IP,
        "--route", f"1,{GW_MAC},{tb.macs['a0']},198.18.1.0/24",
        "--route", f"2,{GW_MAC},{tb.macs['b0']},198.18.2.0/24",
    )  # fmt: skip
    m = tb.macs
    sides = [
        Side(tb.a, "a0", tb.b, "b0",
             flow(m["a0"], GW_MAC, A_IP, RELAY_IP, A_PORT, 20000, calls, RELAY_BLOCK, 4),
             *rx_range(B_PORT, calls)),
        Side(tb.b, "b0", tb.a, "a0",
             flow(m["b0"], GW_MAC, B_IP, RELAY_IP, B_PORT, 20002, calls, RELAY_BLOCK, 4),
             *rx_range(A_PORT, calls)),
    ]  # fmt: skip
    return ScaleDut(name, tb, sides, settings, p.pid, lambda: sb.stop_bg(log, p), tb.sw)


RTPP_SETUP = """
import socket, sys
calls, a_ip, b_ip, a_port, b_port, block, port, out_a, out_b = sys.argv[1:]
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
s.settimeout(5)

def ip_plus(ip, n):
    a = [int(x) for x in ip.split(".")]
    v = (a[0] << 24 | a[1] << 16 | a[2] << 8 | a[3]) + n
    return ".".join(str(v >> k & 255) for k in (24, 16, 8, 0))

def ask(cookie, body):
    s.sendto(f"{cookie} {body}".encode(), ("127.0.0.1", int(port)))
    while True:
        got = s.recv(4096).decode().split()
        if got[0] == cookie:
            return got[1:]

to_a, to_b = [], []
for c in range(int(calls)):
    b_, o = c // int(block), 2 * (c % int(block))
    ua = ask(f"u{c}", f"U s{c} {ip_plus(a_ip, b_)} {int(a_port) + o} f{c}")
    lb = ask(f"l{c}", f"L s{c} {ip_plus(b_ip, b_)} {int(b_port) + o} f{c} t{c}")
    to_a.append(ua[0])  # B sends here: relayed to A
    to_b.append(lb[0])  # A sends here: relayed to B
open(out_a, "w").write("\\n".join(to_a) + "\\n")
open(out_b, "w").write("\\n".join(to_b) + "\\n")
"""


def relay_host(tb: Testbed, calls: int) -> None:
    """The switch namespace as a relay server: the relay address, a subnet
    on each side, the parties' neighbours static."""
    for a in ("198.18.1.1/24", "198.18.2.1/24"):
        nsx(tb.sw, "ip", "addr", "add", a, "dev", "sa" if ".1.1/" in a else "sb")
    nsx(tb.sw, "ip", "addr", "add", f"{RELAY_IP}/32", "dev", "lo")
    blocks = (calls - 1) // CALL_BLOCK + 1
    for k in range(blocks):
        for ip, mac, dev in ((ip_plus(B_IP, k), tb.macs["b0"], "sb"),
                             (ip_plus(A_IP, k), tb.macs["a0"], "sa")):  # fmt: skip
            nsx(tb.sw, "ip", "neigh", "replace", ip, "lladdr", mac, "dev", dev, "nud", "permanent")


def relay_sides(tb: Testbed, calls: int, to_a: Path, to_b: Path) -> list[Side]:
    """A relay server's two directions: each party sends to the relay ports
    its peer's answers named (one per call, in a file), the relay to the party."""
    m = tb.macs
    return [
        Side(tb.a, "a0", tb.b, "b0",
             flow(m["a0"], m["sa"], A_IP, RELAY_IP, A_PORT, 0, calls, CALL_BLOCK, 2,
                  ["--dports-file", str(to_b)]),
             *rx_range(B_PORT, calls)),
        Side(tb.b, "b0", tb.a, "a0",
             flow(m["b0"], m["sb"], B_IP, RELAY_IP, B_PORT, 0, calls, CALL_BLOCK, 2,
                  ["--dports-file", str(to_a)]),
             *rx_range(A_PORT, calls)),
    ]  # fmt: skip


def rtpproxy(tb: Testbed, calls: int) -> ScaleDut:
    """RTPProxy (rtp.io's engine, as rtpagent embeds it) with a U and an L per call."""
    relay_host(tb, calls)
    log = f"rtpproxy-{tb.tag}"
    args = ["-m", "rtpagent.embedded", "--control", f"udp:127.0.0.1:{CTL_PORT}", "--listen", RELAY_IP,
            "--ports", f"{RTPP_PORTS[0]}-{RTPP_PORTS[1]}", "--workdir", str(RUN), "--", "-T", "3600"]  # fmt: skip
    p = sb.start_bg(log, ["ip", "netns", "exec", tb.sw, str(sb.PY), *args])
    for _ in range(200):
        if "rtpproxy ready" in (RUN / f"{log}.log").read_text(errors="replace"):
            break
        if p.poll() is not None:
            raise RuntimeError(
                f"rtpproxy exited: {(RUN / f'{log}.log').read_text(errors='replace')}"
            )
        time.sleep(0.1)
    to_a, to_b = RUN / f"{tb.tag}-to-a.ports", RUN / f"{tb.tag}-to-b.ports"
    nsx(tb.sw, str(sb.PY), "-c", RTPP_SETUP, str(calls), A_IP, B_IP, str(A_PORT), str(B_PORT),
        str(CALL_BLOCK), str(CTL_PORT), str(to_a), str(to_b))  # fmt: skip
    sides = relay_sides(tb, calls, to_a, to_b)
    nofile = resource.getrlimit(resource.RLIMIT_NOFILE)[0]
    settings = (f"`-T 3600`, ports {RTPP_PORTS[0]}-{RTPP_PORTS[1]} (with {nofile:,d} open files "
                f"it holds {RTPP_MAX_CALLS:,d} calls); static neighbours")  # fmt: skip
    return ScaleDut("RTPProxy", tb, sides, settings, p.pid, lambda: sb.stop_bg(log, p))


# rtpengine's ng protocol: a cookie, then one bencoded dictionary each way. The
# SDP offers G.711 A-law (payload type 8), what benchtool's frames carry.
# Bencoding is hand-written: a few lines, and no Debian or PyPI package of it
# is a dependency of the project.
RTPE_SETUP = """
import socket, sys
calls, a_ip, b_ip, a_port, b_port, block, port, out_a, out_b = sys.argv[1:]
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
s.settimeout(10)

def enc(v):
    if isinstance(v, dict):
        return b"d" + b"".join(enc(k) + enc(x) for k, x in sorted(v.items())) + b"e"
    if isinstance(v, list):
        return b"l" + b"".join(enc(x) for x in v) + b"e"
    b = v.encode() if isinstance(v, str) else v
    return str(len(b)).encode() + b":" + b

def dec(b, i=0):
    c = b[i:i + 1]
    if c == b"d" or c == b"l":
        i += 1
        out = []
        while b[i:i + 1] != b"e":
            v, i = dec(b, i)
            out.append(v)
        return (dict(zip(out[::2], out[1::2])) if c == b"d" else out), i + 1
    if c == b"i":
        j = b.index(b"e", i)
        return int(b[i + 1:j]), j + 1
    j = b.index(b":", i)
    n = int(b[i:j])
    return b[j + 1:j + 1 + n].decode(errors="replace"), j + 1 + n

def ip_plus(ip, n):
    a = [int(x) for x in ip.split(".")]
    v = (a[0] << 24 | a[1] << 16 | a[2] << 8 | a[3]) + n
    return ".".join(str(v >> k & 255) for k in (24, 16, 8, 0))

def sdp(ip, p):
    return (f"v=0\\r\\no=- 1 1 IN IP4 {ip}\\r\\ns=-\\r\\nc=IN IP4 {ip}\\r\\nt=0 0\\r\\n"
            f"m=audio {p} RTP/AVP 8\\r\\na=rtpmap:8 PCMA/8000\\r\\na=sendrecv\\r\\n")

def ask(cookie, msg):
    s.sendto(cookie.encode() + b" " + enc(msg), ("127.0.0.1", int(port)))
    while True:
        got = s.recv(65536)
        c, _, body = got.partition(b" ")
        if c.decode() == cookie:
            r, _ = dec(body)
            if r.get("result") != "ok":
                sys.exit(f"rtpengine refused {msg['command']} {msg['call-id']}: {r}")
            for line in r["sdp"].split("\\n"):
                if line.startswith("m=audio "):
                    return line.split()[1]
            sys.exit(f"no m=audio in rtpengine's {msg['command']} reply")

to_a, to_b = [], []
for c in range(int(calls)):
    b_, o = c // int(block), 2 * (c % int(block))
    a, b = ip_plus(a_ip, b_), ip_plus(b_ip, b_)
    call = {"call-id": f"s{c}", "from-tag": f"f{c}", "replace": ["origin"]}
    to_a.append(ask(f"o{c}", {**call, "command": "offer", "sdp": sdp(a, int(a_port) + o)}))
    to_b.append(ask(f"a{c}", {**call, "command": "answer", "to-tag": f"t{c}",
                              "sdp": sdp(b, int(b_port) + o)}))
open(out_a, "w").write("\\n".join(to_a) + "\\n")
open(out_b, "w").write("\\n".join(to_b) + "\\n")
"""
RTPE_BIN = Path("/usr/bin/rtpengine")
# rtpengine holds a call in 4 sockets too (an RTP and an RTCP port per side).
RTPE_MAX_CALLS = RTPP_MAX_CALLS


def rtpengine(tb: Testbed, calls: int) -> ScaleDut:
    """rtpengine (Debian's rtpengine-daemon, user space: no kernel table)
    with a real offer and answer per call over its ng control protocol."""
    if not RTPE_BIN.exists():
        raise RuntimeError(f"{RTPE_BIN} missing: make setup installs rtpengine-daemon")
    relay_host(tb, calls)
    log = f"rtpengine-{tb.tag}"
    args = ["--config-file=none", "--foreground", "--log-stderr", "--log-level=3", "--table=-1",
            f"--interface={RELAY_IP}", f"--listen-ng=127.0.0.1:{CTL_PORT}",
            f"--port-min={RTPP_PORTS[0]}", f"--port-max={RTPP_PORTS[1]}", "--timeout=3600",
            "--silent-timeout=3600"]  # fmt: skip
    p = sb.start_bg(log, ["ip", "netns", "exec", tb.sw, str(RTPE_BIN), *args])
    ping = (
        "import socket,sys;s=socket.socket(socket.AF_INET,socket.SOCK_DGRAM);s.settimeout(0.2);"
        f"s.sendto(b'p d7:command4:pinge',('127.0.0.1',{CTL_PORT}));"
        "sys.exit(0 if b'pong' in s.recv(4096) else 1)"
    )
    for _ in range(100):
        if p.poll() is not None:
            raise RuntimeError(f"rtpengine exited: {(RUN / f'{log}.log').read_text(errors='replace')}")  # fmt: skip
        ping_cmd = ["ip", "netns", "exec", tb.sw, str(sb.PY), "-c", ping]
        if subprocess.run(ping_cmd, capture_output=True).returncode == 0:
            break
    else:
        raise RuntimeError("rtpengine's ng socket never answered a ping")
    to_a, to_b = RUN / f"{tb.tag}-to-a.ports", RUN / f"{tb.tag}-to-b.ports"
    nsx(tb.sw, str(sb.PY), "-c", RTPE_SETUP, str(calls), A_IP, B_IP, str(A_PORT), str(B_PORT),
        str(CALL_BLOCK), str(CTL_PORT), str(to_a), str(to_b))  # fmt: skip
    version = sh_out([str(RTPE_BIN), "--version"]).split()[-1]
    settings = (f"rtpengine {version}, `--table=-1` (user space), `--timeout 3600`, ports "
                f"{RTPP_PORTS[0]}-{RTPP_PORTS[1]} (holds {RTPE_MAX_CALLS:,d} calls with "
                f"{resource.getrlimit(resource.RLIMIT_NOFILE)[0]:,d} open files); static neighbours")  # fmt: skip
    return ScaleDut("rtpengine", tb, relay_sides(tb, calls, to_a, to_b), settings, p.pid,
                    lambda: sb.stop_bg(log, p))  # fmt: skip


def sh_out(cmd: list[str]) -> str:
    r = subprocess.run(cmd, capture_output=True, text=True, check=False)
    return (r.stdout or r.stderr).strip() or "?"


# ------------------------------------------------------------------ measuring


def metrics(ns: str) -> dict[str, float]:
    code = (
        "import urllib.request;print(urllib.request.urlopen('http://127.0.0.1:9101/metrics',"
        "timeout=5).read().decode())"
    )
    out: dict[str, float] = {}
    for line in nsx(ns, str(sb.PY), "-c", code).splitlines():
        if line and not line.startswith("#") and "{" not in line:
            name, _, v = line.partition(" ")
            with contextlib.suppress(ValueError):
                out[name] = float(v)
    return out


def trial(d: ScaleDut, pps: int, secs: float, stamp: bool = False) -> tuple[Trial, list[dict[str, float]]]:  # fmt: skip
    """Both directions at once, pps in total; every process's CPU summed."""
    per = max(1, pps // len(d.sides))
    rxs = []
    for s in d.sides:
        cmd = ["ip", "netns", "exec", s.rx_ns, str(sb.TOOL), "recv", "--ifname", s.rx_if,
               "--secs", str(secs * 4 + 5), "--idle-stop", "0.5",
               "--dport-min", str(s.dport_min), "--dport-max", str(s.dport_max)]  # fmt: skip
        rxs.append(subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE))
    time.sleep(0.3)
    m0 = metrics(d.metrics_ns) if d.metrics_ns else {}
    x0 = xdp_run(d.pid)
    dut0 = sb.tree_ns(d.pid) if d.pid else 0
    k0 = sb.ksoftirqd_ns()
    txs = []
    for s in d.sides:
        cmd = ["ip", "netns", "exec", s.tx_ns, str(sb.TOOL), "send", "--ifname", s.tx_if, *s.flow,
               "--pps", str(per), "--secs", str(secs)] + (["--stamp"] if stamp else [])  # fmt: skip
        txs.append(subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True))
    sent = [t.communicate() for t in txs]
    got = [r.communicate(timeout=secs * 4 + 15) for r in rxs]
    dut1 = sb.tree_ns(d.pid) if d.pid else 0
    x1 = xdp_run(d.pid)
    k1 = sb.ksoftirqd_ns()
    m1 = metrics(d.metrics_ns) if d.metrics_ns else {}
    for tx, (_out, err) in zip(txs, sent, strict=True):
        if tx.returncode != 0:
            raise RuntimeError(f"{d.name}: sender failed: {err.strip()}")
    for r, (_rout, rerr) in zip(rxs, got, strict=True):
        if r.returncode != 0:
            raise RuntimeError(
                f"{d.name}: receiver failed: {rerr.decode(errors='replace').strip()}"
            )
    ss = [json.loads(o) for o, _ in sent]
    rr = [json.loads(o) for o, _ in got]
    cpu = sum(x["cpu_ns"] for x in ss + rr) / 1e9 + (dut1 - dut0) / 1e9 + (k1 - k0) / 1e9
    share = None
    hits = m1.get("p4relay_relay_hits_total", 0) - m0.get("p4relay_relay_hits_total", 0)
    if d.metrics_ns and hits > 0:
        share = (
            m1.get("p4relay_xdp_relayed_total", 0) - m0.get("p4relay_xdp_relayed_total", 0)
        ) / hits
    t = Trial(sum(int(x["sent"]) for x in ss), sum(float(x["achieved_pps"]) for x in ss),
              sum(int(x["packets"]) for x in rr), cpu, share,
              (x1[0] - x0[0]) / (x1[1] - x0[1]) if x1[1] > x0[1] else None)  # fmt: skip
    return t, rr


def map_stats(d: ScaleDut) -> dict[str, float]:
    """The fast path's map statistics and the process's memory."""
    if d.pid is None:
        return {}
    st: dict[str, float] = {}
    status = Path(f"/proc/{d.pid}/status").read_text().splitlines()
    st["rss_mib"] = int(next(ln.split()[1] for ln in status if ln.startswith("VmRSS"))) / 1024
    if d.metrics_ns:
        st["bpf_mib"] = sb.bpf_map_mib(d.pid)
        m = metrics(d.metrics_ns)
        for k in ("p4relay_xdp_relay_entries", "p4relay_xdp_relay_full_total",
                  "p4relay_xdp_legs_full_total"):  # fmt: skip
            if k in m:
                st[k] = m[k]
    return st


# ------------------------------------------------------------------ report


VARIANTS: dict[str, tuple[str, Callable[[Testbed, int], ScaleDut]]] = {
    "bf": ("bridge, netfilter off", bridge),
    "sg": ("softswitch, XDP path", lambda tb, n: softswitch(tb, n, None, "softswitch, XDP path")),
    "sz": ("softswitch, XDP path, relay map sized to the calls",
           lambda tb, n: softswitch(tb, n, None, "softswitch, XDP path, relay map sized to the calls",
                                    ["--xdp-entries", str(4 * n)])),
    "su": ("softswitch, user space (AF_XDP)",
           lambda tb, n: softswitch(tb, n, "off", "softswitch, user space (AF_XDP)")),
    "rp": ("RTPProxy", rtpproxy),
    "re": ("rtpengine", rtpengine),
}  # fmt: skip
# The relay servers' own limits on this host (4 sockets per call).
MAX_CALLS = {"rp": RTPP_MAX_CALLS, "re": RTPE_MAX_CALLS}
BASE = "direct veth (baseline)"


def net_us(pts: dict[str, dict[int, Point]], name: str, n: int) -> list[float]:
    base = med(t.us_per_pkt for t in pts[BASE][n].trials if t.received)
    p = pts.get(name, {}).get(n)
    if p is None or base is None:
        return []
    return [t.us_per_pkt - base for t in p.trials if t.received]


def report(pts: dict[str, dict[int, Point]], calls: list[int], settings: dict[str, str],
           load: tuple[float, float], mem: tuple[float, float, float, float] | None,
           plots: Path | None) -> tuple[str, bool]:  # fmt: skip
    lines: list[str] = []
    w = lines.append
    names = [n for n in pts if n != BASE]
    w(f"G.711 RTP, 214-byte frames, 2 flows per call (A→B and B→A, two paced senders at once), "
      f"{RATE // 1000} kpps in total at every call count spread round robin over the flows "
      f"(50 pps per flow would be {100 * calls[-1]:,d} pps at {calls[-1]:,d} calls); "
      f"{os.cpu_count()} CPUs shared by everything; host load average {load[0]:.2f} at the start, "
      f"{load[1]:.2f} at the end; kernel {platform.release()}; {ROUNDS} interleaved rounds of "
      f"{TRIAL_S:g} s trials per call count; median [min]. CPU: senders + receivers + the device's "
      "process + ksoftirqd, minus the direct veth pair's at the same call count.")  # fmt: skip
    w("")
    w("| variant | non-default settings |")
    w("|---|---|")
    for n in [BASE, *names]:
        w(f"| {n} | {settings.get(n, '—')} |")
    w("")
    head = "| variant | " + " | ".join(f"{n:,d} calls" for n in calls) + " |"
    rule = "|---|" + "---|" * len(calls)

    def table(title: str, rows: list[str], cell: Callable[[str, int], str]) -> None:
        w(f"**{title}**")
        w("")
        w(head)
        w(rule)
        for r in rows:
            w(f"| {r} | " + " | ".join(cell(r, n) for n in calls) + " |")
        w("")

    def has(r: str, n: int) -> Point | None:
        return pts.get(r, {}).get(n)

    def cost(r: str, n: int) -> str:
        v = net_us(pts, r, n)
        return f"{fmt(med(v))} [{fmt(min(v))}]" if v else "—"

    def ratio(r: str, n: int) -> str:
        v, v0 = med(net_us(pts, r, n)), med(net_us(pts, r, calls[0]))
        return f"{v / v0:.2f}x" if v is not None and v0 else "—"

    def base_cell(r: str, n: int) -> str:
        v = [t.us_per_pkt for t in pts[BASE][n].trials if t.received]
        return f"{fmt(med(v))} [{fmt(min(v))}]" if v else "—"

    def sent_cell(r: str, n: int) -> str:
        p = has(r, n)
        if p is None or not p.trials:
            return "—"
        a = med(t.achieved_pps for t in p.trials) or 0
        return f"{a / 1000:.1f} / {(med(t.received / t.sent * a for t in p.trials if t.sent) or 0) / 1000:.1f}"

    def loss(r: str, n: int) -> str:
        p = has(r, n)
        if p is None or not p.trials:
            return "—"
        ls = [t.loss for t in p.trials]
        return f"{fmt(med(ls), '{:.3%}')} [{fmt(min(ls), '{:.3%}')}]"

    def lat(r: str, n: int) -> str:
        p = has(r, n)
        return f"{p.p50_us:.1f} / {p.p99_us:.1f}" if p and p.p50_us >= 0 else "—"

    def vs_bridge(r: str, n: int) -> str:
        v, b = med(net_us(pts, r, n)), med(net_us(pts, "bridge, netfilter off", n))
        return f"{v / b:.2f}" if v is not None and b else "—"

    def share(r: str, n: int) -> str:
        p = has(r, n)
        s = [t.xdp_share for t in p.trials if t.xdp_share is not None] if p else []
        return f"{med(s):.1%}" if s else "—"

    def mapc(key: str, f: str = "{:,.0f}") -> Callable[[str, int], str]:
        def c(r: str, n: int) -> str:
            p = has(r, n)
            return f.format(p.maps[key]) if p and key in p.maps else "—"

        return c

    def setup(r: str, n: int) -> str:
        p = has(r, n)
        return f"{p.setup_s:.1f}" if p else "—"

    table("offered / delivered, kpps", [BASE, *names], sent_cell)
    table(
        "baseline: CPU µs per packet, direct veth (senders + receivers + ksoftirqd)",
        [BASE],
        base_cell,
    )
    table("device's CPU µs per delivered packet (minus the baseline)", names, cost)
    table(
        f"cost per packet against {calls[0]:,d} calls (target ≤ {TARGET:g}x on the softswitch's paths)",
        names,
        ratio,
    )
    table("cost per packet against the bridge at the same call count", names, vs_bridge)
    table("loss, % of sent", names, loss)
    table(
        "one-way latency p50 / p99 µs (1 kpps timestamped, spread over every flow)",
        [BASE, *names],
        lat,
    )
    sw = [r for r in names if r.startswith("softswitch")]
    table("relay hits carried by the XDP program (the rest by user space)", sw, share)

    def xdp_ns(r: str, n: int) -> str:
        p = has(r, n)
        v = [t.xdp_ns for t in p.trials if t.xdp_ns is not None] if p else []
        return f"{med(v):.0f} [{min(v):.0f}]" if v else "—"

    table("the XDP program's own time per packet it ran on, ns (kernel bpf_stats: every packet of "
          "both ports, relayed or handed on)", sw, xdp_ns)  # fmt: skip
    table("entries in the XDP relay map (4 per call)", sw, mapc("p4relay_xdp_relay_entries"))
    table(
        "relay entries the XDP map refused (spilled to user space)",
        sw,
        mapc("p4relay_xdp_relay_full_total"),
    )
    table(
        "kernel memory of the XDP maps, MiB (not in the resident figure)",
        sw,
        mapc("bpf_mib", "{:.1f}"),
    )
    table(
        "the device process's resident memory, MiB",
        [r for r in names if r != "bridge, netfilter off"],
        mapc("rss_mib", "{:.0f}"),
    )
    table("testbed setup, s (the calls' table writes or RTPProxy commands included)", names, setup)  # fmt: skip
    ok = True
    verdicts = []

    def spread(n: int) -> float:
        """The direct baseline's own spread over the rounds (max - min), µs."""
        b = [t.us_per_pkt for t in pts[BASE][n].trials if t.received]
        return max(b) - min(b) if b else 0.0

    noise = max(spread(calls[0]), spread(calls[-1]))
    for r in sw:
        v, v0 = med(net_us(pts, r, calls[-1])), med(net_us(pts, r, calls[0]))
        if v is None or v0 is None:
            continue
        # A cost or a difference inside the baseline's own spread is not
        # resolved on this host: not counted as met.
        resolved = v0 > noise and abs(v - v0) > noise
        good = resolved and v / v0 <= TARGET
        ok &= good
        verdict = "met" if good else "NOT met" if resolved else "not resolved (within noise)"
        x = f"{v / v0:.2f}x" if v0 else "n/a"
        verdicts.append(f"{r}: {fmt(v0)} µs at {calls[0]:,d} calls, {fmt(v)} µs at {calls[-1]:,d} "
                        f"({x}; the direct baseline spreads {noise:.2f} µs over the rounds; "
                        f"target ≤ {TARGET:g}x: {verdict})")  # fmt: skip
    if mem:
        before, after, ips, bpf = mem
        good = after + bpf <= MEMORY_TARGET_MIB
        ok &= good
        verdicts.append(
            f"memory, default softswitch with {sb.SESSIONS:,d} calls (4 relay + 2 leg_rewrite + 4 "
            f"relay_guard entries each, every relay entry in the XDP map): {after:.0f} MiB resident "
            f"({before:.0f} MiB empty) + {bpf:.0f} MiB in the XDP maps = {after + bpf:.0f} MiB "
            f"(target ≤ {MEMORY_TARGET_MIB:.0f}: {'met' if good else 'NOT met'}); inserts over BfRt "
            f"gRPC, 2,000 per Write: {ips:,.0f} entries/s"
        )
    w("**targets**")
    w("")
    for line in verdicts:
        w(f"- {line}")
    w("")
    if plots is not None:
        for f in draw(pts, calls, names, plots):
            rel = os.path.relpath(f, DOCS)
            w(f"![{f.stem}]({rel})")
            w("")
    return "\n".join(lines), ok


def draw(pts: dict[str, dict[int, Point]], calls: list[int], names: list[str], out: Path) -> list[Path]:  # fmt: skip
    """One plot per figure against the call count."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    out.mkdir(parents=True, exist_ok=True)
    files = []

    def plot(fname: str, title: str, ylabel: str, rows: list[str],
             value: Callable[[str, int], float | None], logy: bool = False) -> None:  # fmt: skip
        fig, ax = plt.subplots(figsize=(7, 4))
        for r in rows:
            xs = [n for n in calls if value(r, n) is not None]
            ys = [v for n in xs if (v := value(r, n)) is not None]
            if xs:
                ax.plot(xs, ys, marker="o", label=r)
        ax.set_xscale("log")
        ax.set_xticks(calls, [f"{n:,}" for n in calls])
        ax.minorticks_off()
        if logy:
            ax.set_yscale("log")
        ax.set_xlabel("concurrent calls (2 flows each)")
        ax.set_ylabel(ylabel)
        ax.set_title(title)
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize=8)
        fig.tight_layout()
        f = out / fname
        fig.savefig(f, dpi=100)
        plt.close(fig)
        files.append(f)

    def pt(r: str, n: int) -> Point | None:
        return pts.get(r, {}).get(n)

    # Log scale: RTPProxy costs tens of times the others; a median at or below
    # zero (within the baseline's noise) has no point on it.
    plot("cost.png", "device CPU per packet (minus direct veth)", "µs per packet", names,
         lambda r, n: v if (v := med(net_us(pts, r, n))) is not None and v > 0 else None,
         logy=True)  # fmt: skip
    plot("loss.png", "loss", "% of sent", names,
         lambda r, n: (100 * m if (p := pt(r, n)) and (m := med(t.loss for t in p.trials)) is not None else None))  # fmt: skip
    plot("latency-p50.png", "one-way latency p50", "µs", [BASE, *names],
         lambda r, n: p.p50_us if (p := pt(r, n)) and p.p50_us >= 0 else None)  # fmt: skip
    plot("latency-p99.png", "one-way latency p99", "µs", [BASE, *names],
         lambda r, n: p.p99_us if (p := pt(r, n)) and p.p99_us >= 0 else None)  # fmt: skip
    sw = [r for r in names if r.startswith("softswitch")]
    plot("xdp-prog-ns.png", "XDP program's own time per packet (bpf_stats)", "ns", sw,
         lambda r, n: med(v) if (p := pt(r, n)) and (v := [t.xdp_ns for t in p.trials if t.xdp_ns is not None]) else None)  # fmt: skip
    plot("xdp-maps.png", "XDP maps: kernel memory", "MiB", sw,
         lambda r, n: p.maps.get("bpf_mib") if (p := pt(r, n)) else None)  # fmt: skip
    plot("rss.png", "device process resident memory", "MiB", [r for r in names if r != "bridge, netfilter off"],
         lambda r, n: p.maps.get("rss_mib") if (p := pt(r, n)) else None)  # fmt: skip
    return files


# ------------------------------------------------------------------ main


def main() -> int:
    global ROUNDS, TRIAL_S
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument(
        "--calls", default=",".join(map(str, CALLS)), help="call counts, comma separated"
    )
    ap.add_argument(
        "--variants",
        default="bf,sg,sz,su,rp,re",
        help="bf (bridge), sg (XDP), sz (XDP, relay map sized to the calls), su (user space), rp (RTPProxy), re (rtpengine)",
    )
    ap.add_argument("--quick", action="store_true", help="one round of 1 s trials (a smoke run)")
    ap.add_argument("--skip-memory", action="store_true", help="no 1,000,000-call memory figure")
    ap.add_argument("--plots", type=Path, default=DOCS / STAGE, help="where the plots go")
    ap.add_argument("--no-plots", action="store_true")
    args = ap.parse_args()  # fmt: skip
    if os.geteuid() != 0:
        print("needs root (network namespaces, AF_PACKET, XDP)", file=sys.stderr)
        return 2
    try:
        calls = sorted({int(x) for x in args.calls.split(",")})
    except ValueError:
        print(f"--calls {args.calls}: comma-separated integers", file=sys.stderr)
        return 2
    if not calls or calls[0] < 1 or calls[-1] > 4 * CALL_BLOCK * 16:
        print(f"--calls: 1..{4 * CALL_BLOCK * 16:,d}", file=sys.stderr)
        return 2
    tags = args.variants.split(",")
    if unknown := set(tags) - set(VARIANTS):
        print(f"unknown variants: {','.join(sorted(unknown))}", file=sys.stderr)
        return 2
    if args.quick:
        ROUNDS, TRIAL_S = 1, 1.0
    if not sb.BIN.exists() or not sb.TOOL.exists():
        subprocess.run(
            ["cargo", "build", "--release", "--all-targets", "--quiet"],
            cwd=sb.ROOT / "switch",
            check=True,
        )
    RUN.mkdir(parents=True, exist_ok=True)
    sb.cleanup()
    (RUN / "bench.pid").write_text(str(os.getpid()))
    # The kernel's per-program run time (two clock reads per run while on).
    stats0 = BPF_STATS.read_text().strip() if BPF_STATS.exists() else None
    if stats0 is not None:
        BPF_STATS.write_text("1")
    load0 = os.getloadavg()[0]
    pts: dict[str, dict[int, Point]] = {}
    settings: dict[str, str] = {BASE: "—"}
    mem = None
    try:
        for n in calls:
            print(f"== {n:,d} calls", flush=True)
            duts: list[ScaleDut] = []
            try:
                t0 = time.monotonic()
                duts.append(direct(Testbed("dv", direct=True).build(), n))
                pts.setdefault(BASE, {})[n] = Point(setup_s=time.monotonic() - t0)
                for tag in tags:
                    name, make = VARIANTS[tag]
                    if n > MAX_CALLS.get(tag, n):
                        print(
                            f"  {name}: holds at most {MAX_CALLS[tag]:,d} calls here; skipped",
                            flush=True,
                        )
                        continue
                    t0 = time.monotonic()
                    d = make(Testbed(tag).build(), n)
                    duts.append(d)
                    settings[d.name] = d.settings
                    pts.setdefault(d.name, {})[n] = Point(setup_s=time.monotonic() - t0)
                for d in duts:
                    trial(d, 1000, 0.5)  # warm-up: learned state, caches
                for rnd in range(ROUNDS):
                    order = duts[rnd % len(duts) :] + duts[: rnd % len(duts)]
                    for d in order:
                        t, _ = trial(d, RATE, TRIAL_S)
                        pts[d.name][n].trials.append(t)
                        share = f", {t.xdp_share:.1%} in XDP" if t.xdp_share is not None else ""
                        print(
                            f"  {d.name:34s} {t.achieved_pps:>9,.0f} pps sent, delivered {t.received:>8,d}, "
                            f"loss {t.loss:7.3%}, CPU {t.cpu_s:.3f} s = {t.us_per_pkt:.2f} µs/pkt{share}",
                            flush=True,
                        )
                for d in duts:
                    _, rr = trial(d, 1000, 2.0, stamp=True)
                    samples = [r for r in rr if r["latency_samples"] > 0]
                    if samples:
                        p = pts[d.name][n]
                        p.p50_us = max(r["p50_us"] for r in samples)
                        p.p99_us = max(r["p99_us"] for r in samples)
                    pts[d.name][n].maps = map_stats(d)
            finally:
                for d in duts:
                    d.stop()
                sb.cleanup()
        if not args.skip_memory:
            print(f"== memory with {sb.SESSIONS:,d} calls", flush=True)
            mem = sb.memory_and_inserts()
    finally:
        sb.cleanup()
        (RUN / "bench.pid").unlink(missing_ok=True)
        if stats0 is not None:
            BPF_STATS.write_text(stats0)
    table, ok = report(pts, calls, settings, (load0, os.getloadavg()[0]), mem,
                       None if args.no_plots else args.plots)  # fmt: skip
    print()
    print(table)
    if out := os.environ.get("BENCH_TABLE"):
        Path(out).write_text(table + "\n")
    return 0 if ok else 3


if __name__ == "__main__":
    sys.exit(main())
