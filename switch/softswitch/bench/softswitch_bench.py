"""Softswitch benchmark: G.711 RTP relayed by the softswitch (each path), by
RTPProxy and forwarded by the kernel bridge, side by side in one run.

One testbed per variant (namespaces p4rb-<tag>-a|sw|b, addresses inside them only):

    p4rb-X-a: a0 ── sa ┐               ┌ sb ── b0 :p4rb-X-b
    (paced sender)     └─ p4rb-X-sw ───┘       (receiver, counts at b0)
                         softswitch | kernel bridge | RTPProxy (rtp.io)

plus a direct veth pair a0 ── b0 (no device between): the baseline, the cost
of sending and receiving alone, subtracted from every variant.

IPv6 axis (variants g6, u6): the same flows at the same rates over IPv6
(benchtool `--ipv6`: each address a.b.c.d as fd00:7034:7262::a.b.c.d, frames
234 bytes), through the XDP fast path and the user-space path, each against
its IPv4 twin; IPv6 variants subtract an IPv6 direct-veth baseline.

Method, so the figures mean what they say:
- Load: benchtool `send`, a paced sender (1 ms slots, each slot's frames in one
  TX-ring flush), 16 flows of 214-byte RTP frames. The rate it achieved is
  printed beside the offered one; slots it started late are counted.
- Delivered: frames counted at the receiving interface (AF_PACKET ring on b0),
  then dropped at its ingress hook (nftables netdev): neither host's IP stack
  runs, so the receiving end does the same work for IPv4 and IPv6 (each trial
  checks that b0's namespace received nothing: IpInReceives, Ip6InReceives).
- CPU: exact on-CPU time (/proc/<pid>/task/*/schedstat, ns) of the sender, the
  receiver, every thread of the device-under-test process and its children,
  and every ksoftirqd. This kernel has no separate IRQ time accounting, so
  softirq work (the bridge, XDP, veth delivery) is charged to the thread it
  ran on and is inside these sums. The direct-veth baseline's cost per packet
  at the same rate is subtracted: what remains is the device's own cost.
- Every component runs with its default settings; the table names each
  non-default one. Variants are interleaved (their order rotates per round),
  three rounds; medians with the min beside them.

    python switch/softswitch/bench/softswitch_bench.py [--quick] [--skip-memory] [--variants bf,sn]
        [--bin-b PATH]

--bin-b runs every selected softswitch variant a second time with another
build of the switch (its own testbed, named "... [B]"), interleaved with the
first in the same rounds, and adds the ratios B / A: a change measured side
by side on one host under one load.

Environment: P4RB_RATES (comma-separated pps), P4RB_TRIAL_S, P4RB_ROUNDS;
P4RB_PREFIX (namespace prefix, default p4rb: another one, with its own
P4RELAY_BENCH_RUN, runs beside a benchmark on p4rb-*, which it leaves alone).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import platform
import shutil
import signal
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
BIN = ROOT / "switch/target/release/p4relay-softswitch"
TOOL = ROOT / "switch/target/release/examples/benchtool"
RUN = Path(os.environ.get("P4RELAY_BENCH_RUN", "/tmp/p4rb-run"))
PREFIX = os.environ.get("P4RB_PREFIX", "p4rb")
PY = ROOT / ".venv/bin/python"

GW_MAC = "02:00:00:00:00:fe"  # the softswitch's "router MAC" as the hosts see it
A_IP, B_IP, RELAY_IP = "198.18.1.10", "198.18.2.10", "198.18.0.10"
FLOWS = 16
A_PORT, B_PORT = 4000, 6000
RATES = [int(r) for r in os.environ.get("P4RB_RATES", "50000,100000,150000,200000").split(",")]
TRIAL_S = float(os.environ.get("P4RB_TRIAL_S", "1.5"))
ROUNDS = int(os.environ.get("P4RB_ROUNDS", "3"))
LOSS_MAX = 0.001
SESSIONS = 1_000_000
CTL_PORT = 7723
SHAPED_BPS = 1_000_000_000
B_SUFFIX = " [B]"  # a variant run with --bin-b's build


def sh(*cmd: str, check: bool = True) -> str:
    r = subprocess.run(cmd, capture_output=True, text=True)
    if check and r.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)}: {r.stderr.strip()}")
    return r.stdout


def nsx(ns: str, *cmd: str, check: bool = True) -> str:
    return sh("ip", "netns", "exec", ns, *cmd, check=check)


# ------------------------------------------------------------------ CPU accounting


def task_ns(pid: int) -> int:
    """On-CPU ns of every thread of a process (the scheduler's exact sum)."""
    total = 0
    try:
        for t in Path(f"/proc/{pid}/task").iterdir():
            with contextlib.suppress(OSError, IndexError, ValueError):
                total += int((t / "schedstat").read_text().split()[0])
    except OSError:
        pass
    return total


def children(pid: int) -> list[int]:
    """The process and all its descendants."""
    out, todo = [], [pid]
    while todo:
        p = todo.pop()
        out.append(p)
        try:
            for t in Path(f"/proc/{p}/task").iterdir():
                kids = (t / "children").read_text().split()
                todo.extend(int(k) for k in kids)
        except OSError:
            pass
    return out


def tree_ns(pid: int) -> int:
    return sum(task_ns(p) for p in children(pid))


def ksoftirqd_ns() -> int:
    total = 0
    for p in Path("/proc").iterdir():
        if p.name.isdigit():
            try:
                if (p / "comm").read_text().startswith("ksoftirqd"):
                    total += task_ns(int(p.name))
            except OSError:
                pass
    return total


def start_bg(name: str, cmd: list[str]) -> subprocess.Popen[bytes]:
    """`ip netns exec` execs the program, so the pid is the program's."""
    p = subprocess.Popen(cmd, stdout=(RUN / f"{name}.log").open("wb"), stderr=subprocess.STDOUT)
    (RUN / f"{name}.pid").write_text(str(p.pid))
    return p


def stop_bg(name: str, p: subprocess.Popen[bytes]) -> None:
    if p.poll() is None:
        p.send_signal(signal.SIGTERM)
        try:
            p.wait(5)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()
    (RUN / f"{name}.pid").unlink(missing_ok=True)


def cleanup() -> None:
    env = {**os.environ, "P4RB_FORCE_CLEANUP": "1"}
    if PREFIX == "p4rb":
        subprocess.run(
            ["bash", str(ROOT / "scripts/cleanup.d/softswitch.sh")], check=False, env=env
        )
        return
    # Another prefix: this run's processes and namespaces only.
    for f in RUN.glob("*.pid"):
        if f.name != "bench.pid":
            with contextlib.suppress(ValueError, OSError):
                os.kill(int(f.read_text()), signal.SIGKILL)
            f.unlink(missing_ok=True)
    for line in sh("ip", "netns", "list", check=False).splitlines():
        ns = line.split()[0] if line.split() else ""
        if ns.startswith(PREFIX + "-"):
            sh("ip", "netns", "delete", ns, check=False)


# ------------------------------------------------------------------ testbeds


@dataclass
class Testbed:
    tag: str
    direct: bool = False  # a0 and b0 are one veth pair: no device between
    macs: dict[str, str] = field(default_factory=dict)

    @property
    def a(self) -> str:
        return f"{PREFIX}-{self.tag}-a"

    @property
    def b(self) -> str:
        return f"{PREFIX}-{self.tag}-b"

    @property
    def sw(self) -> str:
        return f"{PREFIX}-{self.tag}-sw"

    def build(self) -> Testbed:
        nss = (self.a, self.b) if self.direct else (self.a, self.b, self.sw)
        for ns in nss:
            sh("ip", "netns", "add", ns)
            nsx(ns, "ip", "link", "set", "lo", "up")
            nsx(ns, "sysctl", "-qw", "net.ipv6.conf.all.disable_ipv6=1",
                "net.ipv6.conf.default.disable_ipv6=1")  # fmt: skip
        if self.direct:
            nsx(
                self.a,
                "ip",
                "link",
                "add",
                "a0",
                "type",
                "veth",
                "peer",
                "name",
                "b0",
                "netns",
                self.b,
            )
            nsx(self.a, "ip", "link", "set", "a0", "up")
            nsx(self.b, "ip", "link", "set", "b0", "up")
            ends: tuple[tuple[str, str], ...] = ((self.a, "a0"), (self.b, "b0"))
        else:
            for side, ns in (("a", self.a), ("b", self.b)):
                nsx(ns, "ip", "link", "add", f"{side}0", "type", "veth", "peer", "name", f"s{side}",
                    "netns", self.sw)  # fmt: skip
                nsx(ns, "ip", "link", "set", f"{side}0", "up")
                nsx(self.sw, "ip", "link", "set", f"s{side}", "up")
            ends = ((self.a, "a0"), (self.b, "b0"), (self.sw, "sa"), (self.sw, "sb"))
        for ns, i in ends:
            self.macs[i] = str(json.loads(nsx(ns, "ip", "-j", "link", "show", i))[0]["address"])
        for ns, i in ((self.a, "a0"), (self.b, "b0")):
            host_drops(ns, i)
        return self


# The hosts take frames off the wire and nothing more: their AF_PACKET rings
# (taps, ahead of the protocol handlers) see every frame, then the interface's
# netdev ingress hook drops it. An IP stack would not treat the two families
# alike: IPv4 looks up the (non-local) destination and allocates a route per
# frame, freed through RCU, mostly in ksoftirqd (~0.7 µs a frame here, and
# the most variable part of what is counted), while IPv6, disabled in these
# namespaces, is discarded on arrival; the families' baselines would differ
# by that work and each family's device cost would carry its own noise.
def host_drops(ns: str, ifname: str) -> None:
    nsx(ns, "nft", "add", "table", "netdev", "p4rb_host")
    nsx(ns, "nft", "add", "chain", "netdev", "p4rb_host", "rx",
        f"{{ type filter hook ingress device {ifname} priority 0 ; policy drop ; }}")  # fmt: skip


def stack_frames(ns: str) -> int:
    """Packets the namespace's IPv4 and IPv6 stacks have received (IpInReceives
    + Ip6InReceives): a host's stays 0 while its ingress drop holds."""
    # /proc/net/snmp: "Ip: <names>" then "Ip: <values>"; snmp6: "<name> <value>" lines
    snmp = nsx(ns, "cat", "/proc/net/snmp").splitlines()
    names, values = (ln.split()[1:] for ln in snmp if ln.startswith("Ip: "))
    v4 = dict(zip(names, values, strict=True))
    v6 = dict(ln.split() for ln in nsx(ns, "cat", "/proc/net/snmp6").splitlines() if ln.strip())
    return int(v4["InReceives"]) + int(v6["Ip6InReceives"])


@dataclass
class Dut:
    name: str
    tb: Testbed
    dst_mac: str
    dst_ip: str
    dports: list[int]
    settings: str  # every non-default setting, for the table
    pid: int | None = None  # the device-under-test process, if it is one
    stop: Callable[[], None] = lambda: None
    ipv6: bool = False  # the flows over IPv6 (benchtool --ipv6)


def wait_tcp(ns: str, port: int, proc: subprocess.Popen[bytes], what: str) -> None:
    for _ in range(200):
        r = subprocess.run(
            ["ip", "netns", "exec", ns, "bash", "-c", f"exec 3<>/dev/tcp/127.0.0.1/{port}"],
            capture_output=True,
        )
        if r.returncode == 0:
            return
        if proc.poll() is not None:
            raise RuntimeError(
                f"{what} exited: " + (RUN / f"{what}.log").read_text(errors="replace")
            )
        time.sleep(0.1)
    raise RuntimeError(f"{what} did not start")


# `ethtool -K IF gro on` without ethtool: SIOCETHTOOL with ETHTOOL_SGRO.
GRO_ON = (
    "import ctypes,fcntl,socket,struct,sys;v=ctypes.create_string_buffer(struct.pack('II',0x2c,1));"
    "r=struct.pack('16sP',sys.argv[1].encode(),ctypes.addressof(v))+bytes(16);"
    "fcntl.ioctl(socket.socket(socket.AF_INET,socket.SOCK_DGRAM),0x8946,r)"
)


def hosts_gro_on(tb: Testbed) -> None:
    """GRO on the hosts' veth ends: their NAPI runs, so frames a native XDP
    program redirects into the device's ends reach them."""
    for ns, i in ((tb.a, "a0"), (tb.b, "b0")):
        nsx(ns, str(PY), "-c", GRO_ON, i)


def xdp_mode(tb: Testbed) -> str:
    """The softswitch's p4relay_xdp_mode as its /metrics shows it."""
    code = (
        "import urllib.request;print(urllib.request.urlopen('http://127.0.0.1:9101/metrics',"
        "timeout=5).read().decode())"
    )
    for line in nsx(tb.sw, str(PY), "-c", code).splitlines():
        if line.startswith('p4relay_xdp_mode{mode="'):
            return line.split('"')[1]
    return "none"


def direct(tb: Testbed, ipv6: bool = False) -> Dut:
    name = "direct veth (baseline), IPv6" if ipv6 else "direct veth (baseline)"
    return Dut(name, tb, tb.macs["b0"], B_IP,
               [B_PORT + 2 * i for i in range(FLOWS)], "—", ipv6=ipv6)  # fmt: skip


# iRED on the shaped port with thresholds above any queue the bench builds:
# every packet pays the decision, none is dropped (relay hits are protected).
IRED_ON = """
import asyncio
from p4relay_switch import SwitchClient
from p4relay_switch.ired import IredSettings, set_ired

async def main() -> None:
    async with SwitchClient("127.0.0.1:50052", client_id=9) as sw:
        s = IredSettings(max_len_queue=(1 << 19) - 1, n_drop=1000, drop_prob=0.0)
        await set_ired(sw, 2, s)

asyncio.run(main())
"""


# INT on the relayed sessions' egress port: every offloaded session is watched
# and port 2 leads to another INT switch, so this switch is the source of every
# packet's INT (shim + MD header + its hop: more work than a transit's hop),
# thresholds above any queue.
INT_ON = """
import asyncio
from p4relay_switch import SwitchClient
from p4relay_switch import int_telemetry as it

async def main() -> None:
    async with SwitchClient("127.0.0.1:50052", client_id=9) as sw:
        await it.set_hop(sw, 2, it.IntHop(1, 1 << 19, 1 << 18, 1 << 31, 1 << 30))
        await it.set_role(sw, 2, "transit")
        await it.watch_relay_sessions(sw)

asyncio.run(main())
"""


def softswitch(
    tb: Testbed,
    xdp: str | None,
    name: str,
    shaped: bool = False,
    ired: bool = False,
    int_transit: bool = False,
    user_io: str | None = None,
    hosts_gro: bool = False,
    ipv6: bool = False,
) -> Dut:
    # Defaults for everything but the ports (and the XDP mode or a port rate, where named).
    args = ["--port", "1=sa", "--port", "2=sb"]
    settings = "`--port 1=sa,2=sb`"
    if shaped:
        # A shaped egress port: every packet to it takes the user-space pipeline,
        # its FIFO and shaper, with the egress quality registers (as under congestion).
        args += ["--port-rate", f"2={SHAPED_BPS}"]
        settings += (
            f", `--port-rate 2={SHAPED_BPS}` (above the offered load: nothing is shaped away)"
        )
    if xdp is not None:
        args += ["--xdp", xdp]
        settings += f", `--xdp {xdp}`"
    if user_io is not None:
        args += ["--user-io", user_io]
        settings += f", `--user-io {user_io}`"
    else:
        settings += " (`--user-io auto` picks AF_XDP)"
    if hosts_gro:
        hosts_gro_on(tb)
        settings += "; hosts' veth ends: GRO on"
    log = f"softswitch-{tb.tag}"
    p = start_bg(log, ["ip", "netns", "exec", tb.sw, str(BIN), *args])
    wait_tcp(tb.sw, 50052, p, log)
    if xdp == "native" and "drops natively redirected" in (RUN / f"{log}.log").read_text(
        errors="replace"
    ):
        raise RuntimeError(f"{name}: a port's peer drops native redirects (see {log}.log)")
    if xdp is None:
        # What auto chose here, as the switch reports it.
        settings = settings.replace(
            "`--port 1=sa,2=sb`", f"`--port 1=sa,2=sb` (`--xdp auto` picks {xdp_mode(tb)})", 1
        )
    nsx(
        tb.sw, str(TOOL), "program", "--calls", str(FLOWS), "--a-ip", A_IP, "--a-port", str(A_PORT),
        "--b-ip", B_IP, "--b-port", str(B_PORT), "--relay-ip", RELAY_IP,
        "--route", f"1,{GW_MAC},{tb.macs['a0']},198.18.1.0/24",
        "--route", f"2,{GW_MAC},{tb.macs['b0']},198.18.2.0/24",
        *(["--ipv6"] if ipv6 else []),
    )  # fmt: skip
    if ipv6:
        settings += "; the calls and flows over IPv6"
    if ired:
        nsx(tb.sw, str(PY), "-c", IRED_ON)
        settings += (
            ", iRED on port 2 (thresholds above any queue: every packet decides, none dropped)"
        )
    if int_transit:
        nsx(tb.sw, str(PY), "-c", INT_ON)
        settings += (
            ", INT on port 2 (every relayed session watched, next hop 2 in the INT domain: "
            "each packet gets shim + MD header + this switch's hop)"
        )
    dports = [20000 + 4 * i for i in range(FLOWS)]
    return Dut(
        name, tb, GW_MAC, RELAY_IP, dports, settings, p.pid, lambda: stop_bg(log, p), ipv6=ipv6
    )


def bridge(tb: Testbed, netfilter: bool, hosts_gro: bool = False) -> Dut:
    if hosts_gro:
        hosts_gro_on(tb)
    nsx(tb.sw, "ip", "link", "add", "br0", "type", "bridge")
    for i in ("sa", "sb"):
        nsx(tb.sw, "ip", "link", "set", i, "master", "br0")
    nsx(tb.sw, "ip", "link", "set", "br0", "up")
    v = "1" if netfilter else "0"
    for t in ("iptables", "ip6tables", "arptables"):
        nsx(tb.sw, "sysctl", "-qw", f"net.bridge.bridge-nf-call-{t}={v}")
    name = "bridge, netfilter on" if netfilter else "bridge, netfilter off"
    settings = (
        "defaults (bridge-nf-call-* = 1)" if netfilter else "`bridge-nf-call-{ip,ip6,arp}tables=0`"
    )
    if hosts_gro:
        name += ", hosts' GRO on"
        settings += "; hosts' veth ends: GRO on"
    # Bridged frames are addressed to B itself; no rewrite.
    return Dut(name, tb, tb.macs["b0"], B_IP, [B_PORT + 2 * i for i in range(FLOWS)], settings)


def rtpp_command(ns: str, cmd: str) -> str:
    # The control socket lives in the DUT namespace: talk to it from there.
    code = (
        "import socket,sys;s=socket.socket(socket.AF_INET,socket.SOCK_DGRAM);s.settimeout(3);"
        f"s.sendto(sys.argv[1].encode(),('127.0.0.1',{CTL_PORT}));print(s.recv(4096).decode())"
    )
    return nsx(ns, str(PY), "-c", code, cmd).strip()


def rtpproxy(tb: Testbed) -> Dut:
    nsx(tb.sw, "ip", "addr", "add", "198.18.1.1/24", "dev", "sa")
    nsx(tb.sw, "ip", "addr", "add", "198.18.2.1/24", "dev", "sb")
    nsx(tb.sw, "ip", "addr", "add", f"{RELAY_IP}/32", "dev", "lo")
    for ip, mac, dev in ((B_IP, tb.macs["b0"], "sb"), (A_IP, tb.macs["a0"], "sa")):
        nsx(tb.sw, "ip", "neigh", "replace", ip, "lladdr", mac, "dev", dev, "nud", "permanent")
    args = ["-m", "rtpagent.embedded", "--control", f"udp:127.0.0.1:{CTL_PORT}", "--listen", RELAY_IP,
            "--ports", "30000-30999", "--workdir", str(RUN), "--", "-T", "3600"]  # fmt: skip
    p = start_bg("rtpproxy", ["ip", "netns", "exec", tb.sw, str(PY), *args])
    for _ in range(200):
        if "rtpproxy ready" in (RUN / "rtpproxy.log").read_text(errors="replace"):
            break
        if p.poll() is not None:
            raise RuntimeError(
                "rtpproxy exited: " + (RUN / "rtpproxy.log").read_text(errors="replace")
            )
        time.sleep(0.1)
    dports = []
    for i in range(FLOWS):
        call, ftag, ttag = f"bench{i}", f"f{i}", f"t{i}"
        # U: caller A's SDP; L: callee B's SDP → the port A must send to (relayed to B).
        rtpp_command(tb.sw, f"u{i} U {call} {A_IP} {A_PORT + 2 * i} {ftag}")
        reply = rtpp_command(tb.sw, f"l{i} L {call} {B_IP} {B_PORT + 2 * i} {ftag} {ttag}")
        dports.append(int(reply.split()[1]))
    settings = "`-T 3600` (session timeout beyond the run); static neighbours"
    return Dut("RTPProxy", tb, tb.macs["sa"], RELAY_IP, dports, settings, p.pid,
               lambda: stop_bg("rtpproxy", p))  # fmt: skip


# ------------------------------------------------------------------ trials


@dataclass
class Trial:
    rate: int
    sent: int
    achieved_pps: float
    late_slots: int
    received: int
    ring_drops: int
    cpu: dict[str, float]  # seconds: gen, recv, dut, ksoftirqd
    xdp_ns: float | None = None  # the XDP program's own time per run (bpf_stats)

    @property
    def loss(self) -> float:
        return 1 - self.received / self.sent if self.sent else 1.0

    @property
    def total_s(self) -> float:
        return sum(self.cpu.values())

    @property
    def us_per_pkt(self) -> float:
        """CPU µs per delivered packet, everything counted."""
        return self.total_s / self.received * 1e6 if self.received else float("inf")


def flow_args(dut: Dut) -> list[str]:
    return ["--src-mac", dut.tb.macs["a0"], "--dst-mac", dut.dst_mac, "--src", A_IP, "--dst", dut.dst_ip,
            "--sport", str(A_PORT), "--dport", str(dut.dports[0]),
            "--dports", ",".join(map(str, dut.dports)), "--flows", str(FLOWS)] + (
                ["--ipv6"] if dut.ipv6 else [])  # fmt: skip


def recv_proc(dut: Dut, secs: float) -> subprocess.Popen[bytes]:
    args = ["recv", "--ifname", "b0", "--secs", str(secs), "--idle-stop", "0.5"]
    args += ["--dport-min", str(B_PORT), "--dport-max", str(B_PORT + 2 * FLOWS)]
    cmd = ["ip", "netns", "exec", dut.tb.b, str(TOOL), *args]
    return subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE)


BPF_STATS = Path("/proc/sys/kernel/bpf_stats_enabled")


def xdp_run(pid: int | None) -> tuple[int, int]:
    """(run time ns, runs) of the process's XDP programs (kernel bpf_stats,
    which the bench turns on while it runs)."""
    ns = runs = 0
    if pid is None:
        return 0, 0
    with contextlib.suppress(OSError):
        for fd in Path(f"/proc/{pid}/fdinfo").iterdir():
            with contextlib.suppress(OSError, ValueError):
                info = dict(ln.split(":", 1) for ln in fd.read_text().splitlines() if ":" in ln)
                if info.get("prog_type", "").strip() == "6":  # BPF_PROG_TYPE_XDP
                    ns += int(info.get("run_time_ns", "0"))
                    runs += int(info.get("run_cnt", "0"))
    return ns, runs


def trial(
    dut: Dut, rate: int, secs: float = TRIAL_S, stamp: bool = False
) -> tuple[Trial, dict[str, float]]:
    stack0 = stack_frames(dut.tb.b)
    rx = recv_proc(dut, secs * 4 + 5)
    time.sleep(0.3)
    dut0 = tree_ns(dut.pid) if dut.pid else 0
    x0 = xdp_run(dut.pid)
    k0 = ksoftirqd_ns()
    cmd = ["ip", "netns", "exec", dut.tb.a, str(TOOL), "send", "--ifname", "a0", *flow_args(dut),
           "--pps", str(rate), "--secs", str(secs)] + (["--stamp"] if stamp else [])  # fmt: skip
    gen = subprocess.run(cmd, capture_output=True, text=True)
    if gen.returncode != 0:
        rx.kill()
        raise RuntimeError(f"sender failed: {gen.stderr.strip()}")
    out, err = rx.communicate(timeout=secs * 4 + 10)
    dut1 = tree_ns(dut.pid) if dut.pid else 0
    x1 = xdp_run(dut.pid)
    k1 = ksoftirqd_ns()
    if rx.returncode != 0:
        raise RuntimeError(f"receiver failed: {err.decode(errors='replace').strip()}")
    if stacked := stack_frames(dut.tb.b) - stack0:
        raise RuntimeError(
            f"{dut.name}: {stacked} frames reached the receiving host's IP stack "
            "(its ingress drop is gone): the trial would count the stack's work"
        )
    s, r = json.loads(gen.stdout), json.loads(out)
    cpu = {
        "sender": s["cpu_ns"] / 1e9,
        "receiver": r["cpu_ns"] / 1e9,
        "device": (dut1 - dut0) / 1e9,
        "ksoftirqd": (k1 - k0) / 1e9,
    }
    t = Trial(rate, int(s["sent"]), float(s["achieved_pps"]), int(s["late_slots"]),
              int(r["packets"]), int(r["ring_drops"]), cpu)  # fmt: skip
    if x1[1] > x0[1]:
        t.xdp_ns = (x1[0] - x0[0]) / (x1[1] - x0[1])
    return t, {"p50_us": float(r["p50_us"]), "p99_us": float(r["p99_us"])}


def show(dut: Dut, t: Trial) -> None:
    c = t.cpu
    print(
        f"  {dut.name:24s} {t.rate:>7,d} pps offered ({t.achieved_pps:>9,.0f} sent, {t.late_slots} late slots): "
        f"delivered {t.received:>7,d}, loss {t.loss * 100:6.3f} %, CPU {t.total_s:5.3f} s "
        f"(send {c['sender']:.3f} recv {c['receiver']:.3f} device {c['device']:.3f} "
        f"ksoftirqd {c['ksoftirqd']:.3f}) = {t.us_per_pkt:.2f} µs/pkt"
        + (f"  [receiver ring drops {t.ring_drops}]" if t.ring_drops else ""),
        flush=True,
    )


@dataclass
class Result:
    dut: Dut
    trials: dict[int, list[Trial]] = field(default_factory=dict)
    p50_us: float = -1
    p99_us: float = -1

    def at(self, rate: int) -> list[Trial]:
        return self.trials.get(rate, [])

    def loss(self, rate: int) -> list[float]:
        return [t.loss for t in self.at(rate)]

    def us(self, rate: int) -> list[float]:
        return [t.us_per_pkt for t in self.at(rate) if t.received]


def med(xs: Iterable[float]) -> float | None:
    v = list(xs)
    return statistics.median(v) if v else None


# ------------------------------------------------------------------ memory and inserts


def bpf_map_mib(pid: int) -> float:
    """Kernel memory of the process's BPF maps (the XDP fast path's) that is
    not mapped into it, MiB: the mmapped quality registers (BPF_F_MMAPABLE)
    are already in the resident figure."""
    total = 0
    for fd in Path(f"/proc/{pid}/fdinfo").iterdir():
        try:
            info = dict(ln.split(":", 1) for ln in fd.read_text().splitlines() if ":" in ln)
        except OSError:
            continue
        if "memlock" in info and not int(info.get("map_flags", "0").strip(), 16) & 0x400:
            total += int(info["memlock"].strip())
    return total / 2**20


def memory_and_inserts() -> tuple[float, float, float, float]:
    """RSS (MiB) before/after 1M sessions, inserts/s, and the BPF maps' kernel
    memory (MiB), on a default softswitch with two ports and routes to both
    parties, so the XDP fast path holds every session (relay entries and legs)."""
    tb = Testbed("mm").build()
    p = start_bg("softswitch-mem", ["ip", "netns", "exec", tb.sw, str(BIN), "--port", "1=sa", "--port", "2=sb"])  # fmt: skip
    try:
        wait_tcp(tb.sw, 50052, p, "softswitch-mem")
        # `insert`'s parties: A in 198.18/16 behind port 1, B in 198.19/16 behind port 2.
        nsx(tb.sw, str(TOOL), "program", "--calls", "0", "--a-ip", A_IP, "--a-port", str(A_PORT),
            "--b-ip", B_IP, "--b-port", str(B_PORT), "--relay-ip", RELAY_IP,
            "--route", f"1,{GW_MAC},{tb.macs['a0']},198.18.0.0/16",
            "--route", f"2,{GW_MAC},{tb.macs['b0']},198.19.0.0/16")  # fmt: skip

        def rss() -> float:
            status = Path(f"/proc/{p.pid}/status").read_text().splitlines()
            return int(next(ln.split()[1] for ln in status if ln.startswith("VmRSS"))) / 1024

        before = rss()
        out = nsx(tb.sw, str(TOOL), "insert", "--grpc", "http://127.0.0.1:50052",
                  "--sessions", str(SESSIONS), "--batch", "2000")  # fmt: skip
        got = json.loads(out)
        return before, rss(), float(got["inserts_per_s"]), bpf_map_mib(p.pid)
    finally:
        stop_bg("softswitch-mem", p)


# ------------------------------------------------------------------ report


def fmt(v: float | None, f: str = "{:.2f}") -> str:
    return f.format(v) if v is not None else "n/a"


def report(
    results: list[Result],
    base: Result,
    mem: tuple[float, float, float, float] | None,
    load: tuple[float, float],
    base6: Result | None = None,
) -> str:
    """The Markdown table (also printed)."""
    lines: list[str] = []
    w = lines.append
    w(
        f"G.711 RTP, 214-byte frames{' (234 over IPv6)' if base6 else ''}, {FLOWS} flows, paced sender (1 ms slots) → device → receiver over veth; "
        f"{os.cpu_count()} CPUs shared by everything (load average {load[0]:.1f} before, {load[1]:.1f} after); "
        f"kernel {platform.release()}; {ROUNDS} interleaved rounds of {TRIAL_S:g} s trials; median [min]. "
        "The receiver counts frames in an AF_PACKET ring on its interface, which then drops them "
        "(nftables netdev ingress): no IP stack runs on either host, so the IPv4 and IPv6 "
        "baselines measure the same work (an IPv4 stack would look up and allocate a route "
        "per frame, freed later in ksoftirqd, where IPv6, disabled there, discards on arrival)."
    )
    w("")
    w("Settings (everything else at its default):")
    w("")
    w("| variant | non-default settings |")
    w("|---|---|")
    bases = [base, base6] if base6 else [base]
    for r in [*bases, *results]:
        w(f"| {r.dut.name} | {r.dut.settings} |")
    w("")

    def rate_table(title: str, cell: Callable[[Result, int], str], rows: list[Result]) -> None:
        w(f"**{title}**")
        w("")
        w("| variant | " + " | ".join(f"{k // 1000} kpps" for k in RATES) + " |")
        w("|---|" + "---|" * len(RATES))
        for r in rows:
            w(f"| {r.dut.name} | " + " | ".join(cell(r, k) for k in RATES) + " |")
        w("")

    def sent_cell(r: Result, k: int) -> str:
        ts = r.at(k)
        if not ts:
            return "n/a"
        a = med(t.achieved_pps for t in ts) or 0
        d = med(t.received / (t.sent / t.achieved_pps) for t in ts if t.achieved_pps) or 0
        return f"{a / 1000:.1f} / {d / 1000:.1f}"

    def loss_cell(r: Result, k: int) -> str:
        ls = r.loss(k)
        return f"{fmt(med(ls), '{:.3%}')} [{fmt(min(ls), '{:.3%}')}]" if ls else "n/a"

    def base_us(k: int, ipv6: bool = False) -> float | None:
        return med((base6 if ipv6 and base6 else base).us(k))

    def net(r: Result, k: int) -> list[float]:
        b = base_us(k, r.dut.ipv6)
        return [u - b for u in r.us(k)] if b is not None else []

    def net_cell(r: Result, k: int) -> str:
        n = net(r, k)
        return f"{fmt(med(n))} [{fmt(min(n))}]" if n else "n/a"

    rate_table(
        "offered / delivered, kpps (sender's achieved rate / receiver's count)",
        sent_cell,
        [*bases, *results],
    )
    rate_table("loss, % of sent", loss_cell, results)
    w("**baseline: CPU µs per packet, direct veth (sender + receiver + ksoftirqd)**")
    w("")
    w("| | " + " | ".join(f"{k // 1000} kpps" for k in RATES) + " |")
    w("|---|" + "---|" * len(RATES))
    for bl in bases:
        w(
            f"| {bl.dut.name.replace(' (baseline)', '')} | "
            + " | ".join(
                f"{fmt(med(bl.us(k)))} [{fmt(min(bl.us(k), default=None))}]" for k in RATES
            )
            + " |"
        )
    w("")
    rate_table(
        "device's CPU µs per delivered packet (everything counted, minus the baseline)",
        net_cell,
        results,
    )

    by = {r.dut.name: r for r in results}

    def ratio_row(label: str, num: str, den: str) -> None:
        a, b = by.get(num), by.get(den)
        if a is None or b is None:
            return  # a variant --variants left out
        cells = []
        for k in RATES:
            x = med(net(a, k)) if a else None
            y = med(net(b, k)) if b else None
            cells.append(f"{x / y:.2f}" if x is not None and y and y > 0 else "n/a")
        w(f"| {label} | " + " | ".join(cells) + " |")

    w("**ratios of the device's cost per packet (medians above)**")
    w("")
    w("| ratio | " + " | ".join(f"{k // 1000} kpps" for k in RATES) + " |")
    w("|---|" + "---|" * len(RATES))
    names = (
        "softswitch, default (XDP generic)",
        "softswitch, XDP native",
        "softswitch, user space (AF_XDP)",
        "softswitch, user space (AF_PACKET)",
        "softswitch, shaped port",
        "softswitch, shaped port (AF_PACKET)",
    )
    for num in names:
        for den in ("bridge, netfilter on", "bridge, netfilter off", "RTPProxy"):
            ratio_row(f"{num} / {den}", num, den)
    # Native XDP needs the hosts' GRO on: against the bridge on the same hosts too.
    native, gro_bridge = "softswitch, XDP native", "bridge, netfilter off, hosts' GRO on"
    ratio_row(f"{native} / {gro_bridge}", native, gro_bridge)
    ratio_row(f"{native} / softswitch, default (XDP generic)", native, names[0])
    # AF_XDP against AF_PACKET for the user-space path, side by side in this run
    for a, b in (
        ("softswitch, user space (AF_XDP)", "softswitch, user space (AF_PACKET)"),
        ("softswitch, shaped port", "softswitch, shaped port (AF_PACKET)"),
    ):
        ratio_row(f"{a} / {b}", a, b)
    # iRED's cost per relayed packet, side by side in this run
    ired, plain = "softswitch, shaped port + iRED", "softswitch, shaped port"
    ratio_row(f"{ired} / {plain}", ired, plain)
    # INT's cost per relayed packet (target: at most 1.3x), side by side in this run
    with_int, relay_only = "softswitch, user space + INT", "softswitch, user space (AF_XDP)"
    ratio_row(f"{with_int} / {relay_only}", with_int, relay_only)
    # IPv6 against IPv4 (target: at most 1.1x), same flows and rate, each path
    for v4 in ("softswitch, default (XDP generic)", "softswitch, user space (AF_XDP)"):
        ratio_row(f"{v4}, IPv6 / {v4}", f"{v4}, IPv6", v4)
    w("")
    # Each rate's figure is the difference of two totals that vary by a few
    # tenths of a µs from trial to trial; over every rate's trials at once the
    # IPv6 / IPv4 ratio settles with fewer rounds.
    pooled = []
    for v4 in ("softswitch, default (XDP generic)", "softswitch, user space (AF_XDP)"):
        r6, r4 = by.get(f"{v4}, IPv6"), by.get(v4)
        if r6 is None or r4 is None:
            continue
        x, y = med(n for k in RATES for n in net(r6, k)), med(n for k in RATES for n in net(r4, k))
        if x is not None and y:
            pooled.append(f"{v4} {x / y:.2f} ({fmt(x)} / {fmt(y)} µs)")
    if pooled:
        w(
            "IPv6 / IPv4, the device's cost per packet over every rate's trials at once "
            "(median of all, each less its rate's baseline): " + "; ".join(pooled) + "."
        )
        w("")
    w(
        "**the XDP program's own time per packet it ran on, ns (kernel bpf_stats; the fast "
        "path's relay hits, and the hand-off to user space on the `--xdp off` variants)**"
    )
    w("")
    w("| variant | " + " | ".join(f"{k // 1000} kpps" for k in RATES) + " |")
    w("|---|" + "---|" * len(RATES))
    xdp_rows = [
        r for r in results if any(t.xdp_ns is not None for ts in r.trials.values() for t in ts)
    ]
    for r in xdp_rows:
        cells = [
            fmt(med(t.xdp_ns for t in r.at(k) if t.xdp_ns is not None), "{:.0f}") for k in RATES
        ]
        w(f"| {r.dut.name} | " + " | ".join(cells) + " |")
    for v4 in ("softswitch, default (XDP generic)", "softswitch, user space (AF_XDP)"):
        r6, r4 = by.get(f"{v4}, IPv6"), by.get(v4)
        if r6 is None or r4 is None:
            continue
        cells = []
        for k in RATES:
            x = med(t.xdp_ns for t in r6.at(k) if t.xdp_ns is not None)
            y = med(t.xdp_ns for t in r4.at(k) if t.xdp_ns is not None)
            cells.append(f"{x / y:.2f}" if x is not None and y else "n/a")
        w(f"| ratio {v4}, IPv6 / {v4} | " + " | ".join(cells) + " |")
    w("")
    # --bin-b: the other build against this one, variant by variant
    for r in results:
        if r.dut.name.endswith(B_SUFFIX):
            a = r.dut.name.removesuffix(B_SUFFIX)
            ratio_row(f"{r.dut.name} / {a}", r.dut.name, a)
    w("")
    k0 = RATES[0]
    w(
        f"**where the CPU goes at {k0 // 1000} kpps: µs per delivered packet, median, before subtracting the baseline**"
    )
    w("")
    w("| variant | sender | receiver | device process | ksoftirqd | total |")
    w("|---|---|---|---|---|---|")
    for r in [*bases, *results]:
        ts = [t for t in r.at(k0) if t.received]

        def part(key: str, ts: list[Trial] = ts) -> str:
            return fmt(med(t.cpu[key] / t.received * 1e6 for t in ts))

        dev = part("device") if r.dut.pid else "(none)"
        w(f"| {r.dut.name} | {part('sender')} | {part('receiver')} | {dev} | {part('ksoftirqd')} | "
          f"{fmt(med(t.us_per_pkt for t in ts))} |")  # fmt: skip
    w("")
    w("**capacity and latency**")
    w("")
    w(
        f"| variant | loss-free (median loss < {LOSS_MAX:.1%}) up to: highest such offered rate, and the rate "
        "the sender reached there | one-way latency p50 / p99 µs @ 1 kpps |"
    )
    w("|---|---|---|")
    for r in [*bases, *results]:
        ok = [k for k in RATES if (m := med(r.loss(k))) is not None and m < LOSS_MAX]
        if ok:
            top = max(ok)
            got = med(t.achieved_pps for t in r.at(top)) or 0.0
            cap = f"{top:,d} offered, {got:,.0f} sent"
            if got < 0.95 * top:
                cap += " (sender-limited: the host gave the sender too little CPU)"
            elif top == RATES[-1]:
                cap += " (top of the ladder)"
        else:
            cap = f"none (lossy at {RATES[0]:,d})"
        w(f"| {r.dut.name} | {cap} | {r.p50_us:.1f} / {r.p99_us:.1f} |")
    w("")
    if mem:
        before, after, ips, bpf = mem
        w(
            f"Memory, default softswitch with {SESSIONS:,d} sessions ({4 * SESSIONS:,d} relay + {2 * SESSIONS:,d} leg + "
            f"{4 * SESSIONS:,d} relay_guard entries; two ports and routes to both parties, so the XDP fast path "
            f"holds every relay entry and leg): {after:.0f} MiB resident ({before:.0f} MiB empty) + {bpf:.0f} MiB "
            f"kernel memory in the fast path's maps = {after + bpf:.0f} MiB. Batched inserts over BfRt gRPC with the "
            f"Rust bench tool (2,000 per Write, every relay entry mirrored into the kernel): {ips:,.0f} entries/s."
        )
        w("")
    w(
        "CPU not counted: kworker threads and softirq work that runs on an idle CPU's interrupt "
        "or in an unrelated thread (veth delivers on the sending CPU; a veth NAPI already "
        "scheduled on the other CPU polls there, in whatever thread runs)."
    )
    return "\n".join(lines)


# ------------------------------------------------------------------ main


def main() -> int:
    global RATES, ROUNDS, BIN
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--quick", action="store_true", help="one round at two rates, for a smoke run")
    ap.add_argument("--skip-memory", action="store_true")
    ap.add_argument(
        "--variants",
        help="comma-separated testbed tags to run (bn,bf,bg,sg,sn,su,sp,ss,sq,si,sx,g6,u6,rp); default all",
    )
    ap.add_argument(
        "--bin-b",
        type=Path,
        help="another p4relay-softswitch build: each selected softswitch variant also runs with it",
    )
    args = ap.parse_args()
    if args.bin_b is not None and not args.bin_b.is_file():
        print(f"--bin-b {args.bin_b}: no such file", file=sys.stderr)
        return 2
    if os.geteuid() != 0:
        print("needs root (network namespaces, AF_PACKET, XDP)", file=sys.stderr)
        return 2
    for tool in ("ip",):
        if not shutil.which(tool):
            print(f"missing {tool}", file=sys.stderr)
            return 2
    if args.quick:
        RATES, ROUNDS = RATES[:2], 1
    if not BIN.exists() or not TOOL.exists():
        subprocess.run(
            ["cargo", "build", "--release", "--all-targets", "--quiet"],
            cwd=ROOT / "switch",
            check=True,
        )
    RUN.mkdir(parents=True, exist_ok=True)
    cleanup()
    stats0 = BPF_STATS.read_text().strip() if BPF_STATS.exists() else None
    if stats0 is not None:
        BPF_STATS.write_text("1")
    (RUN / "bench.pid").write_text(str(os.getpid()))
    duts: list[Dut] = []
    mem = None
    load0 = os.getloadavg()[0]
    try:
        base_dut = direct(Testbed("dv", direct=True).build())
        makers: list[tuple[str, Callable[[Testbed], Dut]]] = [
            ("bn", lambda tb: bridge(tb, True)),
            ("bf", lambda tb: bridge(tb, False)),
            ("bg", lambda tb: bridge(tb, False, hosts_gro=True)),
            ("sg", lambda tb: softswitch(tb, None, "softswitch, default (XDP generic)")),
            (
                "sn",
                lambda tb: softswitch(tb, "native", "softswitch, XDP native", hosts_gro=True),
            ),
            ("su", lambda tb: softswitch(tb, "off", "softswitch, user space (AF_XDP)")),
            (
                "sp",
                lambda tb: softswitch(
                    tb, "off", "softswitch, user space (AF_PACKET)", user_io="af-packet"
                ),
            ),
            ("ss", lambda tb: softswitch(tb, None, "softswitch, shaped port", shaped=True)),
            (
                "sq",
                lambda tb: softswitch(
                    tb,
                    None,
                    "softswitch, shaped port (AF_PACKET)",
                    shaped=True,
                    user_io="af-packet",
                ),
            ),
            (
                "si",
                lambda tb: softswitch(
                    tb, None, "softswitch, shaped port + iRED", shaped=True, ired=True
                ),
            ),
            (
                "sx",
                lambda tb: softswitch(tb, "off", "softswitch, user space + INT", int_transit=True),
            ),
            (
                "g6",
                lambda tb: softswitch(
                    tb, None, "softswitch, default (XDP generic), IPv6", ipv6=True
                ),
            ),
            (
                "u6",
                lambda tb: softswitch(
                    tb, "off", "softswitch, user space (AF_XDP), IPv6", ipv6=True
                ),
            ),
            ("rp", rtpproxy),
        ]
        only = set(args.variants.split(",")) if args.variants else {t for t, _ in makers}
        if unknown := only - {t for t, _ in makers}:
            print(f"unknown variants: {','.join(sorted(unknown))}", file=sys.stderr)
            return 2
        for tag, make in makers:
            if tag in only:
                duts.append(make(Testbed(tag).build()))
                if args.bin_b is not None and tag.startswith("s"):
                    # The same variant on the other build, in its own testbed.
                    a_bin, BIN = BIN, args.bin_b
                    try:
                        d = make(Testbed(tag + "b").build())
                    finally:
                        BIN = a_bin
                    d.name += B_SUFFIX
                    d.settings += f" — build B: `{args.bin_b}`"
                    duts.append(d)
        base = Result(base_dut)
        base6 = (
            Result(direct(Testbed("d6", direct=True).build(), ipv6=True))
            if any(d.ipv6 for d in duts)
            else None
        )
        results = [Result(d) for d in duts]
        everyone = [base, *([base6] if base6 else []), *results]
        for r in everyone:
            trial(r.dut, 1000, 0.5)  # warm-up: ARP-free paths, caches, learned state
        for rnd in range(ROUNDS):
            print(f"round {rnd + 1}/{ROUNDS}", flush=True)
            for k in RATES:
                order = everyone[rnd % len(everyone) :] + everyone[: rnd % len(everyone)]
                for r in order:
                    t, _ = trial(r.dut, k)
                    show(r.dut, t)
                    r.trials.setdefault(k, []).append(t)
        print("latency probe, 1 kpps timestamped", flush=True)
        for r in everyone:
            _, lat = trial(r.dut, 1000, 2.0, stamp=True)
            r.p50_us, r.p99_us = lat["p50_us"], lat["p99_us"]
        for d in duts:
            d.stop()
        if not args.skip_memory:
            mem = memory_and_inserts()
    finally:
        for d in duts:
            d.stop()
        cleanup()
        (RUN / "bench.pid").unlink(missing_ok=True)
        if stats0 is not None:
            BPF_STATS.write_text(stats0)
    table = report(results, base, mem, (load0, os.getloadavg()[0]), base6)
    print()
    print(table)
    if out := os.environ.get("BENCH_TABLE"):
        Path(out).write_text(table + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
