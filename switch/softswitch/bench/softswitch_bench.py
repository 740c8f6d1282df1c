"""Softswitch benchmark: G.711 RTP relayed by the softswitch, by RTPProxy and
forwarded by the kernel bridge, side by side in one run.

One testbed per DUT (namespaces p4rb-<dut>-a|sw|b, addresses inside them only):

    p4rb-X-a: a0 ── sa ┐               ┌ sb ── b0 :p4rb-X-b
    (trafgen, probe)   └─ p4rb-X-sw ───┘       (receiver, counts)
                         DUT: softswitch | kernel bridge | RTPProxy (rtp.io)

All three testbeds exist at once, so the cost trials are interleaved
(softswitch, bridge, RTPProxy, softswitch, ...) and a change of load on a
shared host hits every DUT alike; medians are reported. Per DUT: CPU cost per
million relayed packets at a fixed offered rate (generator + DUT + receiver +
ksoftirqd, from /proc: the generator shares the cores, so cost per packet is
the comparable figure), the best relayed rate with < 0.1 % loss on a ladder of
offered rates, one-way latency p50/p99 of a 1 kpps timestamped probe.
Softswitch only: resident memory with 1,000,000 sessions and batched inserts/s
over BfRt gRPC.

    python switch/softswitch/bench/softswitch_bench.py [--quick] [--skip-memory]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
BIN = ROOT / "switch/target/release/p4relay-softswitch"
TOOL = ROOT / "switch/target/release/examples/benchtool"
RUN = Path(os.environ.get("P4RELAY_BENCH_RUN", "/tmp/p4rb-run"))
PY = ROOT / ".venv/bin/python"

GW_MAC = "02:00:00:00:00:fe"  # the softswitch's "router MAC" as the hosts see it
A_IP, B_IP, RELAY_IP = "198.18.1.10", "198.18.2.10", "198.18.0.10"
FLOWS = 16
A_PORT, B_PORT = 4000, 6000
TRIAL_S = 3.0
COST_RATE = 50_000
COST_REPEATS = 3
LADDER = [50_000, 100_000, 150_000, 200_000, 300_000, 400_000, 500_000, 700_000]
LOSS_MAX = 0.001
SESSIONS = 1_000_000
CTL_PORT = 7723
TICK = os.sysconf("SC_CLK_TCK")
# Every DUT process and the receiver run at the same raised CFS priority, so
# other jobs on a shared host delay them less (the kernel bridge needs no
# wake-up: it runs in the sender's softirq). Not SCHED_FIFO: that starves
# ksoftirqd, which completes the veth transmissions of every DUT.
NICE = ["nice", "-n", os.environ.get("P4RB_NICE", "-10")]


def sh(*cmd: str, check: bool = True) -> str:
    r = subprocess.run(cmd, capture_output=True, text=True)
    if check and r.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)}: {r.stderr.strip()}")
    return r.stdout


def nsx(ns: str, *cmd: str, check: bool = True) -> str:
    return sh("ip", "netns", "exec", ns, *cmd, check=check)


def cpu_ticks(pid: int) -> int:
    """utime + stime of a process (all threads), clock ticks."""
    try:
        f = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        return int(f[11]) + int(f[12])
    except (OSError, IndexError, ValueError):
        return 0


def ctx_switches(pid: int) -> int:
    """Voluntary + involuntary context switches of all a process's threads: its wake-ups."""
    total = 0
    try:
        for t in Path(f"/proc/{pid}/task").iterdir():
            for ln in (t / "status").read_text().splitlines():
                if ln.startswith(("voluntary_ctxt_switches", "nonvoluntary_ctxt_switches")):
                    total += int(ln.split()[1])
    except OSError:
        pass
    return total


def ksoftirqd_ticks() -> int:
    total = 0
    for p in Path("/proc").iterdir():
        if p.name.isdigit():
            try:
                if (p / "comm").read_text().startswith("ksoftirqd"):
                    total += cpu_ticks(int(p.name))
            except OSError:
                pass
    return total


def start_bg(name: str, cmd: list[str]) -> subprocess.Popen[bytes]:
    """`ip netns exec` and `nice` exec the program, so the pid is the program's."""
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
    subprocess.run(["bash", str(ROOT / "scripts/cleanup.d/softswitch.sh")], check=False, env=env)


# ------------------------------------------------------------------ testbeds


@dataclass
class Testbed:
    tag: str
    macs: dict[str, str] = field(default_factory=dict)

    @property
    def a(self) -> str:
        return f"p4rb-{self.tag}-a"

    @property
    def b(self) -> str:
        return f"p4rb-{self.tag}-b"

    @property
    def sw(self) -> str:
        return f"p4rb-{self.tag}-sw"

    def build(self) -> Testbed:
        for ns in (self.a, self.b, self.sw):
            sh("ip", "netns", "add", ns)
            nsx(ns, "ip", "link", "set", "lo", "up")
            nsx(
                ns,
                "sysctl",
                "-qw",
                "net.ipv6.conf.all.disable_ipv6=1",
                "net.ipv6.conf.default.disable_ipv6=1",
            )
        for side, ns in (("a", self.a), ("b", self.b)):
            nsx(
                ns,
                "ip",
                "link",
                "add",
                f"{side}0",
                "type",
                "veth",
                "peer",
                "name",
                f"s{side}",
                "netns",
                self.sw,
            )
            nsx(ns, "ip", "link", "set", f"{side}0", "up")
            nsx(self.sw, "ip", "link", "set", f"s{side}", "up")
        for ns, i in ((self.a, "a0"), (self.b, "b0"), (self.sw, "sa"), (self.sw, "sb")):
            self.macs[i] = str(json.loads(nsx(ns, "ip", "-j", "link", "show", i))[0]["address"])
        return self


@dataclass
class Dut:
    name: str
    tb: Testbed
    dst_mac: str
    dst_ip: str
    dports: list[int]
    pid: int | None = None  # the DUT process, if it is one
    stop: Callable[[], None] = lambda: None


def wait_tcp(ns: str, port: int, proc: subprocess.Popen[bytes], what: str) -> None:
    for _ in range(100):
        r = subprocess.run(
            ["ip", "netns", "exec", ns, "bash", "-c", f"exec 3<>/dev/tcp/127.0.0.1/{port}"],
            capture_output=True,
        )
        if r.returncode == 0:
            return
        if proc.poll() is not None:
            raise RuntimeError(f"{what} exited")
        time.sleep(0.1)
    raise RuntimeError(f"{what} did not start")


def softswitch(tb: Testbed, xdp: str = "generic") -> Dut:
    args = ["--port", "1=sa", "--port", "2=sb", "--grpc-listen", "127.0.0.1:50052", "--xdp", xdp]
    args += ["--metrics-listen", "127.0.0.1:9101", "--workers", os.environ.get("P4RB_WORKERS", "2")]
    # Deep rings and queue: the bench measures forwarding cost, not buffering; a
    # loaded host stalls the workers for tens of ms at times.
    args += [
        "--rx-ring-frames",
        os.environ.get("P4RB_RX_RING", "16384"),
        "--queue-depth",
        os.environ.get("P4RB_QUEUE", "16384"),
        "--relay-entries",
        "65536",
        "--legs",
        "32768",
        "--rx-coalesce-us",
        os.environ.get("P4RB_RX_COALESCE_US", "200"),
    ]
    p = start_bg("softswitch", ["ip", "netns", "exec", tb.sw, *NICE, str(BIN), *args])
    wait_tcp(tb.sw, 50052, p, "softswitch")
    nsx(
        tb.sw, str(TOOL), "program", "--calls", str(FLOWS), "--a-ip", A_IP, "--a-port", str(A_PORT),
        "--b-ip", B_IP, "--b-port", str(B_PORT), "--relay-ip", RELAY_IP,
        "--route", f"1,{GW_MAC},{tb.macs['a0']},198.18.1.0/24",
        "--route", f"2,{GW_MAC},{tb.macs['b0']},198.18.2.0/24",
    )  # fmt: skip
    dports = [20000 + 4 * i for i in range(FLOWS)]
    name = "softswitch" if xdp != "off" else "ss user space"
    return Dut(name, tb, GW_MAC, RELAY_IP, dports, p.pid, lambda: stop_bg("softswitch", p))


def softswitch_user_space(tb: Testbed) -> Dut:
    """The same switch with the XDP fast path off: every packet in user space."""
    return softswitch(tb, xdp="off")


def bridge(tb: Testbed) -> Dut:
    nsx(tb.sw, "ip", "link", "add", "br0", "type", "bridge")
    for i in ("sa", "sb"):
        nsx(tb.sw, "ip", "link", "set", i, "master", "br0")
    nsx(tb.sw, "ip", "link", "set", "br0", "up")
    # Bridged frames are addressed to B itself; no rewrite.
    return Dut("kernel bridge", tb, tb.macs["b0"], B_IP, [B_PORT + 2 * i for i in range(FLOWS)])


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
    nsx(
        tb.sw,
        "ip",
        "neigh",
        "replace",
        B_IP,
        "lladdr",
        tb.macs["b0"],
        "dev",
        "sb",
        "nud",
        "permanent",
    )
    nsx(
        tb.sw,
        "ip",
        "neigh",
        "replace",
        A_IP,
        "lladdr",
        tb.macs["a0"],
        "dev",
        "sa",
        "nud",
        "permanent",
    )
    args = [
        "-m",
        "rtpagent.embedded",
        "--control",
        f"udp:127.0.0.1:{CTL_PORT}",
        "--listen",
        RELAY_IP,
    ]
    p = start_bg(
        "rtpproxy",
        [
            "ip",
            "netns",
            "exec",
            tb.sw,
            *NICE,
            str(PY),
            *args,
            "--ports",
            "30000-30999",
            "--",
            "-T",
            "3600",
        ],
    )
    for _ in range(100):
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
    return Dut(
        "RTPProxy", tb, tb.macs["sa"], RELAY_IP, dports, p.pid, lambda: stop_bg("rtpproxy", p)
    )


# ------------------------------------------------------------------ trials


@dataclass
class Trial:
    rate: int
    sent: int
    received: int
    cpu_s: float
    dut_cpu_s: float
    achieved_pps: float
    dut_switches: int = 0

    @property
    def loss(self) -> float:
        return 1 - self.received / self.sent if self.sent else 1.0

    @property
    def cost(self) -> float:
        """CPU-seconds per million relayed packets, everything included."""
        return self.cpu_s / self.received * 1e6 if self.received else float("inf")

    @property
    def dut_cost(self) -> float:
        return self.dut_cpu_s / self.received * 1e6 if self.received else float("inf")

    @property
    def switches_per_pkt(self) -> float:
        return self.dut_switches / self.received if self.received else float("inf")


def frames_conf(dut: Dut) -> Path:
    conf = RUN / f"frames-{dut.tb.tag}.cfg"
    out = sh(
        str(TOOL), "frames", "--src-mac", dut.tb.macs["a0"], "--dst-mac", dut.dst_mac, "--src", A_IP,
        "--dst", dut.dst_ip, "--sport", str(A_PORT), "--dport", str(dut.dports[0]),
        "--dports", ",".join(map(str, dut.dports)), "--flows", str(FLOWS),
    )  # fmt: skip
    conf.write_text(out)
    return conf


def recv_cmd(dut: Dut, secs: float) -> list[str]:
    args = ["recv", "--ifname", "b0", "--secs", str(secs)]
    args += ["--dport-min", str(B_PORT), "--dport-max", str(B_PORT + 2 * FLOWS)]
    return ["ip", "netns", "exec", dut.tb.b, *NICE, str(TOOL), *args]


def trial(dut: Dut, conf: Path, rate: int) -> Trial:
    n = int(rate * TRIAL_S)
    # The receiver stops 1 s after the last frame (trafgen may run slower than offered on a busy host).
    rx = subprocess.Popen(
        recv_cmd(dut, TRIAL_S * 10 + 5), stdout=subprocess.PIPE, stderr=subprocess.PIPE
    )
    time.sleep(0.5)
    t0 = {
        "dut": cpu_ticks(dut.pid) if dut.pid else 0,
        "rx": cpu_ticks(rx.pid),
        "ksirq": ksoftirqd_ticks(),
        "csw": ctx_switches(dut.pid) if dut.pid else 0,
    }
    gen = subprocess.Popen(
        ["ip", "netns", "exec", dut.tb.a, "trafgen", "--dev", "a0", "--conf", str(conf), "--cpus", "1",
         "-b", f"{rate}pps", "-n", str(n), "-Q", "-C", "--no-sock-mem"],
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
    )  # fmt: skip
    gen_ticks = 0
    started = time.monotonic()
    while gen.poll() is None:
        gen_ticks = max(gen_ticks, cpu_ticks(gen.pid))
        time.sleep(0.05)
    if gen.returncode != 0:
        raise RuntimeError(f"trafgen failed: {gen.stderr.read().decode() if gen.stderr else ''}")
    send_s = time.monotonic() - started
    time.sleep(0.3)
    rx_ticks = cpu_ticks(rx.pid)
    out, _ = rx.communicate(timeout=TRIAL_S * 10 + 10)
    t2 = {
        "dut": cpu_ticks(dut.pid) if dut.pid else 0,
        "ksirq": ksoftirqd_ticks(),
        "csw": ctx_switches(dut.pid) if dut.pid else 0,
    }
    got = json.loads(out)
    dut_s = (t2["dut"] - t0["dut"]) / TICK
    total = dut_s + (rx_ticks - t0["rx"] + t2["ksirq"] - t0["ksirq"] + gen_ticks) / TICK
    return Trial(
        rate,
        n,
        int(got["packets"]),
        total,
        dut_s,
        n / send_s if send_s > 0 else 0.0,
        t2["csw"] - t0["csw"],
    )


def latency(dut: Dut) -> tuple[float, float]:
    rx = subprocess.Popen(recv_cmd(dut, 10.0), stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    time.sleep(0.5)
    nsx(
        dut.tb.a, str(TOOL), "send", "--ifname", "a0", "--src-mac", dut.tb.macs["a0"], "--dst-mac", dut.dst_mac,
        "--src", A_IP, "--dst", dut.dst_ip, "--sport", str(A_PORT), "--dport", str(dut.dports[0]),
        "--dports", ",".join(map(str, dut.dports)), "--flows", str(FLOWS), "--pps", "1000", "--secs", "2.5",
    )  # fmt: skip
    out, _ = rx.communicate(timeout=15)
    got = json.loads(out)
    return float(got["p50_us"]), float(got["p99_us"])


def show(dut: Dut, what: str, t: Trial) -> None:
    print(
        f"  {dut.name:14s} {what:8s} {t.rate:>8,d} pps offered ({t.achieved_pps:>9,.0f} sent): "
        f"loss {t.loss * 100:6.3f} %, CPU {t.cpu_s:5.2f} s (DUT process {t.dut_cpu_s:5.2f} s)",
        flush=True,
    )


@dataclass
class Result:
    dut: Dut
    capacity: int = 0
    costs: list[Trial] = field(default_factory=list)
    p50_us: float = -1
    p99_us: float = -1

    @property
    def cost(self) -> float | None:
        ok = [t.cost for t in self.costs if t.received]
        return statistics.median(ok) if ok else None

    @property
    def dut_cost(self) -> float | None:
        ok = [t.dut_cost for t in self.costs if t.received]
        return statistics.median(ok) if ok and self.dut.pid else None

    @property
    def switches(self) -> float | None:
        ok = [t.switches_per_pkt for t in self.costs if t.received]
        return statistics.median(ok) if ok and self.dut.pid else None

    @property
    def cost_loss(self) -> float:
        return max((t.loss for t in self.costs), default=1.0)


def capacity(dut: Dut, conf: Path, ladder: list[int]) -> int:
    best = 0
    for rate in ladder:
        t = trial(dut, conf, rate)
        show(dut, "ladder", t)
        if t.loss >= LOSS_MAX:
            break
        best = max(best, int(t.achieved_pps))
    return best


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
    memory (MiB), on a softswitch without ports (the fast path still mirrors)."""
    ns = "p4rb-mem"
    sh("ip", "netns", "add", ns)
    nsx(ns, "ip", "link", "set", "lo", "up")
    args = [
        "--grpc-listen",
        "127.0.0.1:50053",
        "--metrics-listen",
        "127.0.0.1:9102",
        "--workers",
        "1",
    ]
    p = start_bg("softswitch-mem", ["ip", "netns", "exec", ns, str(BIN), *args])
    try:
        wait_tcp(ns, 50053, p, "softswitch")

        def rss() -> float:
            status = Path(f"/proc/{p.pid}/status").read_text().splitlines()
            return int(next(ln.split()[1] for ln in status if ln.startswith("VmRSS"))) / 1024

        before = rss()
        out = nsx(
            ns,
            str(TOOL),
            "insert",
            "--grpc",
            "http://127.0.0.1:50053",
            "--sessions",
            str(SESSIONS),
            "--batch",
            "2000",
        )
        got = json.loads(out)
        return before, rss(), float(got["inserts_per_s"]), bpf_map_mib(p.pid)
    finally:
        stop_bg("softswitch-mem", p)


def ratio(a: float | None, b: float | None) -> str:
    return f"{a / b:.2f}" if a and b else "n/a"


def report(results: list[Result], mem: tuple[float, float, float, float] | None) -> None:
    print()
    print(
        f"softswitch benchmark: G.711 RTP, 214-byte frames, {FLOWS} flows, trafgen → DUT → receiver over veth, "
        f"{os.cpu_count()} CPUs shared by everything; cost = median of {COST_REPEATS} interleaved trials"
    )
    names = [r.dut.name for r in results]
    print(f"| {'figure':54s} |" + "".join(f" {n:>14s} |" for n in names))
    print("|" + "-" * 56 + "|" + "".join("-" * 16 + "|" for _ in names))

    def row(label: str, vals: list[str]) -> None:
        print(f"| {label:54s} |" + "".join(f" {v:>14s} |" for v in vals))

    def num(v: float | None, fmt: str = "{:.2f}", none: str = "n/a") -> str:
        return fmt.format(v) if v is not None else none

    k = COST_RATE // 1000
    row(f"CPU-s per Mpkt @ {k} kpps (gen+DUT+recv+softirq)", [num(r.cost) for r in results])
    row(
        f"DUT process CPU-s per Mpkt @ {k} kpps",
        [num(r.dut_cost, none="(softirq)") for r in results],
    )
    row(
        f"DUT context switches per packet @ {k} kpps",
        [num(r.switches, "{:.3f}", none="(softirq)") for r in results],
    )
    row(f"worst loss in the {k} kpps trials, %", [f"{r.cost_loss * 100:.3f}" for r in results])
    row(
        f"best pps relayed with < {LOSS_MAX * 100:g} % loss (ladder)",
        [f"{r.capacity:,d}" for r in results],
    )
    row("one-way latency p50 µs @ 1 kpps", [f"{r.p50_us:.1f}" for r in results])
    row("one-way latency p99 µs @ 1 kpps", [f"{r.p99_us:.1f}" for r in results])
    by = {r.dut.name: r for r in results}
    ss, su, br, rp = (
        by.get(n) for n in ("softswitch", "ss user space", "kernel bridge", "RTPProxy")
    )
    print()
    if ss and rp:
        print(f"cost ratio softswitch / RTPProxy      = {ratio(ss.cost, rp.cost)}  (target ≤ 0.33)")
    if ss and br:
        print(f"cost ratio softswitch / kernel bridge = {ratio(ss.cost, br.cost)}  (target ≤ 2)")
    if su and br and rp:
        print(
            f"  without the XDP fast path (--xdp off): {ratio(su.cost, rp.cost)} of RTPProxy, "
            f"{ratio(su.cost, br.cost)} of the kernel bridge"
        )
    if ss and br:
        print(
            f"added latency vs kernel bridge: p50 {ss.p50_us - br.p50_us:+.1f} µs, p99 {ss.p99_us - br.p99_us:+.1f} µs"
        )
    if mem:
        before, after, ips, bpf = mem
        print(
            f"memory: {after:.0f} MiB resident with {SESSIONS:,d} sessions ({4 * SESSIONS:,d} relay + "
            f"{2 * SESSIONS:,d} leg + {4 * SESSIONS:,d} relay_guard entries; {before:.0f} MiB empty)"
            "  (target ≤ 512 MiB)"
        )
        print(
            f"  plus the XDP fast path's relay and leg maps: {bpf:.0f} MiB kernel memory "
            f"(up to --xdp-entries relay entries) = {after + bpf:.0f} MiB in all  (target ≤ 512 MiB)"
        )
        print(f"batched inserts over BfRt gRPC: {ips:,.0f} entries/s  (target ≥ 50,000)")
    load = os.getloadavg()[0]
    print(
        f"host load average during the run: {load:.1f} on {os.cpu_count()} CPUs (other jobs shift every figure)"
    )


def main() -> int:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--quick", action="store_true", help="shorter ladder, for a smoke run")
    ap.add_argument("--skip-memory", action="store_true")
    args = ap.parse_args()
    if os.geteuid() != 0:
        print("needs root (network namespaces, AF_PACKET)", file=sys.stderr)
        return 2
    for tool in ("trafgen", "ip", "nice"):
        if not shutil.which(tool):
            print(f"missing {tool}", file=sys.stderr)
            return 2
    if not BIN.exists() or not TOOL.exists():
        subprocess.run(
            ["cargo", "build", "--release", "--all-targets", "--quiet"],
            cwd=ROOT / "switch",
            check=True,
        )
    ladder = LADDER[:3] if args.quick else LADDER
    RUN.mkdir(parents=True, exist_ok=True)
    cleanup()
    (RUN / "bench.pid").write_text(str(os.getpid()))
    duts: list[Dut] = []
    results: list[Result] = []
    mem: tuple[float, float, float, float] | None = None
    try:
        for tag, make in (
            ("ss", softswitch),
            ("su", softswitch_user_space),
            ("br", bridge),
            ("rp", rtpproxy),
        ):
            duts.append(make(Testbed(tag).build()))
        confs = {d.name: frames_conf(d) for d in duts}
        results = [Result(d) for d in duts]
        for d in duts:
            trial(d, confs[d.name], 1000)  # warm-up
        print(f"cost: {COST_REPEATS} interleaved rounds at {COST_RATE:,d} pps", flush=True)
        for _ in range(COST_REPEATS):
            for r in results:
                t = trial(r.dut, confs[r.dut.name], COST_RATE)
                show(r.dut, "cost", t)
                r.costs.append(t)
        print("capacity ladder and latency", flush=True)
        for r in results:
            r.capacity = capacity(r.dut, confs[r.dut.name], ladder)
            r.p50_us, r.p99_us = latency(r.dut)
        for d in duts:
            d.stop()
        if not args.skip_memory:
            mem = memory_and_inserts()
    finally:
        for d in duts:
            d.stop()
        cleanup()
        (RUN / "bench.pid").unlink(missing_ok=True)
    report(results, mem)
    return 0


if __name__ == "__main__":
    sys.exit(main())
