"""Softswitch benchmark: G.711 RTP relayed by the softswitch, by RTPProxy and
forwarded by the kernel bridge, on one veth testbed, side by side.

Testbed (namespaces p4rb-*, addresses inside them only):

    p4rb-a: p4rb-a0 ── p4rb-sa ┐            ┌ p4rb-sb ── p4rb-b0 :p4rb-b
    (trafgen, probe sender)    └─ p4rb-sw ──┘             (receiver, counts)
                                  DUT: softswitch | bridge | RTPProxy

Per DUT: capacity (highest offered rate on a ladder with < 0.1 % loss), CPU
cost per million relayed packets at a fixed rate (generator + DUT + receiver
+ ksoftirqd, from /proc: the generator shares the 2 cores, so cost per packet
is the comparable figure), one-way latency p50/p99 from a 1 kpps timestamped
probe. Softswitch only: resident memory with 1,000,000 sessions and batched
inserts/s over BfRt gRPC. Prints one table and the ratios.

    python switch/softswitch/bench/softswitch_bench.py [--quick]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
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

NS_A, NS_B, NS_SW = "p4rb-a", "p4rb-b", "p4rb-sw"
GW_MAC = "02:00:00:00:00:fe"  # the softswitch's "router MAC" as the hosts see it
A_IP, B_IP, RELAY_IP = "198.18.1.10", "198.18.2.10", "198.18.0.10"
FLOWS = 16
A_PORT, B_PORT = 4000, 6000
TRIAL_S = 3.0
COST_RATE = 50_000
LADDER = [50_000, 100_000, 150_000, 200_000, 250_000, 300_000, 400_000, 500_000, 700_000]
LOSS_MAX = 0.001
SESSIONS = 1_000_000
CTL_PORT = 7723


def sh(*cmd: str, check: bool = True) -> str:
    r = subprocess.run(cmd, capture_output=True, text=True)
    if check and r.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)}: {r.stderr.strip()}")
    return r.stdout


def nsx(ns: str, *cmd: str, check: bool = True) -> str:
    return sh("ip", "netns", "exec", ns, *cmd, check=check)


def mac_of(ns: str, ifname: str) -> str:
    return str(json.loads(nsx(ns, "ip", "-j", "link", "show", ifname))[0]["address"])


def cpu_ticks(pid: int) -> int:
    """utime + stime of a process (all threads), clock ticks."""
    try:
        f = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        return int(f[11]) + int(f[12])
    except (OSError, IndexError, ValueError):
        return 0


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


TICK = os.sysconf("SC_CLK_TCK")
# Every DUT process and the receiver run at the same raised CFS priority, so
# other jobs on a shared host delay them less (the kernel bridge needs no
# wake-up: it runs in the sender's softirq). Not SCHED_FIFO: that starves
# ksoftirqd, which completes the veth transmissions of every DUT.
NICE = ["nice", "-n", os.environ.get("P4RB_NICE", "-10")]


def start_bg(name: str, cmd: list[str], log: Path) -> subprocess.Popen[bytes]:
    p = subprocess.Popen(cmd, stdout=log.open("wb"), stderr=subprocess.STDOUT)
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


def child_pid(p: subprocess.Popen[bytes]) -> int:
    """`ip netns exec` execs the command, so the pid is the program's own."""
    return p.pid


# ------------------------------------------------------------------ testbed


def cleanup() -> None:
    env = {**os.environ, "P4RB_FORCE_CLEANUP": "1"}
    subprocess.run(["bash", str(ROOT / "scripts/cleanup.d/softswitch.sh")], check=False, env=env)


def base_testbed() -> dict[str, str]:
    for ns in (NS_A, NS_B, NS_SW):
        sh("ip", "netns", "add", ns)
        nsx(ns, "ip", "link", "set", "lo", "up")
        nsx(
            ns,
            "sysctl",
            "-qw",
            "net.ipv6.conf.all.disable_ipv6=1",
            "net.ipv6.conf.default.disable_ipv6=1",
        )
    for side, ns in (("a", NS_A), ("b", NS_B)):
        nsx(
            ns,
            "ip",
            "link",
            "add",
            f"p4rb-{side}0",
            "type",
            "veth",
            "peer",
            "name",
            f"p4rb-s{side}",
            "netns",
            NS_SW,
        )
        nsx(ns, "ip", "link", "set", f"p4rb-{side}0", "up")
        nsx(NS_SW, "ip", "link", "set", f"p4rb-s{side}", "up")
    return {
        "a0": mac_of(NS_A, "p4rb-a0"),
        "b0": mac_of(NS_B, "p4rb-b0"),
        "sa": mac_of(NS_SW, "p4rb-sa"),
        "sb": mac_of(NS_SW, "p4rb-sb"),
    }


# ------------------------------------------------------------------ DUTs


@dataclass
class Dut:
    name: str
    dst_mac: str
    dst_ip: str
    dports: list[int]
    procs: list[subprocess.Popen[bytes]] = field(default_factory=list)
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


def softswitch(macs: dict[str, str]) -> Dut:
    p = start_bg(
        "softswitch",
        [
            "ip",
            "netns",
            "exec",
            NS_SW,
            *NICE,
            str(BIN),
            "--port",
            "1=p4rb-sa",
            "--port",
            "2=p4rb-sb",
            "--grpc-listen",
            "127.0.0.1:50052",
            "--metrics-listen",
            "127.0.0.1:9101",
            "--workers",
            os.environ.get("P4RB_WORKERS", "2"),
            "--rx-ring-frames",
            "16384",
            "--relay-entries",
            "65536",
            "--legs",
            "32768",
        ],
        RUN / "softswitch.log",
    )
    wait_tcp(NS_SW, 50052, p, "softswitch")
    nsx(
        NS_SW,
        str(TOOL),
        "program",
        "--calls",
        str(FLOWS),
        "--a-ip",
        A_IP,
        "--a-port",
        str(A_PORT),
        "--b-ip",
        B_IP,
        "--b-port",
        str(B_PORT),
        "--relay-ip",
        RELAY_IP,
        "--route",
        f"1,{GW_MAC},{macs['a0']},198.18.1.0/24",
        "--route",
        f"2,{GW_MAC},{macs['b0']},198.18.2.0/24",
    )
    dports = [20000 + 4 * i for i in range(FLOWS)]
    return Dut(
        "softswitch", GW_MAC, RELAY_IP, dports, [p], child_pid(p), lambda: stop_bg("softswitch", p)
    )


def bridge(macs: dict[str, str]) -> Dut:
    nsx(NS_SW, "ip", "link", "add", "p4rb-br", "type", "bridge")
    for i in ("p4rb-sa", "p4rb-sb"):
        nsx(NS_SW, "ip", "link", "set", i, "master", "p4rb-br")
    nsx(NS_SW, "ip", "link", "set", "p4rb-br", "up")

    def stop() -> None:
        nsx(NS_SW, "ip", "link", "del", "p4rb-br", check=False)

    # Bridged frames are addressed to B itself; no rewrite.
    return Dut("kernel bridge", macs["b0"], B_IP, [B_PORT + 2 * i for i in range(FLOWS)], stop=stop)


def rtpp_command(cmd: str) -> str:
    # The control socket lives in the DUT namespace: talk to it from there.
    out = nsx(
        NS_SW,
        str(PY),
        "-c",
        (
            "import socket,sys;s=socket.socket(socket.AF_INET,socket.SOCK_DGRAM);s.settimeout(3);"
            f"s.sendto(sys.argv[1].encode(),('127.0.0.1',{CTL_PORT}));print(s.recv(4096).decode())"
        ),
        cmd,
    )
    return out.strip()


def rtpproxy(macs: dict[str, str]) -> Dut:
    nsx(NS_SW, "ip", "addr", "add", "198.18.1.1/24", "dev", "p4rb-sa")
    nsx(NS_SW, "ip", "addr", "add", "198.18.2.1/24", "dev", "p4rb-sb")
    nsx(NS_SW, "ip", "addr", "add", f"{RELAY_IP}/32", "dev", "lo")
    nsx(
        NS_SW,
        "ip",
        "neigh",
        "replace",
        B_IP,
        "lladdr",
        macs["b0"],
        "dev",
        "p4rb-sb",
        "nud",
        "permanent",
    )
    nsx(
        NS_SW,
        "ip",
        "neigh",
        "replace",
        A_IP,
        "lladdr",
        macs["a0"],
        "dev",
        "p4rb-sa",
        "nud",
        "permanent",
    )
    p = start_bg(
        "rtpproxy",
        [
            "ip",
            "netns",
            "exec",
            NS_SW,
            *NICE,
            str(PY),
            "-m",
            "rtpagent.embedded",
            "--control",
            f"udp:127.0.0.1:{CTL_PORT}",
            "--listen",
            RELAY_IP,
            "--ports",
            "30000-30999",
        ],
        RUN / "rtpproxy.log",
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
        rtpp_command(f"u{i} U {call} {A_IP} {A_PORT + 2 * i} {ftag}")
        reply = rtpp_command(f"l{i} L {call} {B_IP} {B_PORT + 2 * i} {ftag} {ttag}")
        dports.append(int(reply.split()[1]))

    def stop() -> None:
        stop_bg("rtpproxy", p)
        for a in (
            "198.18.1.1/24 dev p4rb-sa",
            "198.18.2.1/24 dev p4rb-sb",
            f"{RELAY_IP}/32 dev lo",
        ):
            nsx(NS_SW, "ip", "addr", "del", *a.split(), check=False)

    return Dut("RTPProxy", macs["sa"], RELAY_IP, dports, [p], child_pid(p), stop)


# ------------------------------------------------------------------ trials


@dataclass
class Trial:
    rate: int
    sent: int
    received: int
    cpu_s: float
    dut_cpu_s: float
    achieved_pps: float

    @property
    def loss(self) -> float:
        return 1 - self.received / self.sent if self.sent else 1.0


def frames_conf(dut: Dut, macs: dict[str, str]) -> Path:
    conf = RUN / f"frames-{dut.name.replace(' ', '_')}.cfg"
    out = sh(
        str(TOOL),
        "frames",
        "--src-mac",
        macs["a0"],
        "--dst-mac",
        dut.dst_mac,
        "--src",
        A_IP,
        "--dst",
        dut.dst_ip,
        "--sport",
        str(A_PORT),
        "--dport",
        str(dut.dports[0]),
        "--dports",
        ",".join(map(str, dut.dports)),
        "--flows",
        str(FLOWS),
    )
    conf.write_text(out)
    return conf


def recv_cmd(secs: float) -> list[str]:
    return [
        "ip",
        "netns",
        "exec",
        NS_B,
        *NICE,
        str(TOOL),
        "recv",
        "--ifname",
        "p4rb-b0",
        "--secs",
        str(secs),
        "--dport-min",
        str(B_PORT),
        "--dport-max",
        str(B_PORT + 2 * FLOWS),
    ]


def trial(dut: Dut, conf: Path, rate: int) -> Trial:
    n = int(rate * TRIAL_S)
    # The receiver stops 1 s after the last frame (trafgen may run slower than offered on a busy host).
    rx = subprocess.Popen(
        recv_cmd(TRIAL_S * 10 + 5), stdout=subprocess.PIPE, stderr=subprocess.PIPE
    )
    time.sleep(0.5)
    t0 = {
        "dut": cpu_ticks(dut.pid) if dut.pid else 0,
        "rx": cpu_ticks(rx.pid),
        "ksirq": ksoftirqd_ticks(),
    }
    gen = subprocess.Popen(
        [
            "ip",
            "netns",
            "exec",
            NS_A,
            "trafgen",
            "--dev",
            "p4rb-a0",
            "--conf",
            str(conf),
            "--cpus",
            "1",
            "-b",
            f"{rate}pps",
            "-n",
            str(n),
            "-Q",
            "-C",
            "--no-sock-mem",
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    gen_ticks = 0
    started = time.monotonic()
    while gen.poll() is None:
        gen_ticks = max(gen_ticks, cpu_ticks(gen.pid))
        time.sleep(0.05)
    if gen.returncode != 0:
        raise RuntimeError(f"trafgen failed: {gen.stderr.read().decode() if gen.stderr else ''}")
    send_s = time.monotonic() - started
    time.sleep(0.3)
    t1 = {
        "dut": cpu_ticks(dut.pid) if dut.pid else 0,
        "rx": cpu_ticks(rx.pid),
        "ksirq": ksoftirqd_ticks(),
    }
    out, _ = rx.communicate(timeout=TRIAL_S * 10 + 10)
    t2 = {"dut": cpu_ticks(dut.pid) if dut.pid else 0, "ksirq": ksoftirqd_ticks()}
    got = json.loads(out)
    # The receiver's own CPU is read from its last /proc sample before exit.
    dut_s = (t2["dut"] - t0["dut"]) / TICK
    total = dut_s + (t1["rx"] - t0["rx"] + t2["ksirq"] - t0["ksirq"] + gen_ticks) / TICK
    return Trial(rate, n, int(got["packets"]), total, dut_s, n / send_s if send_s > 0 else 0.0)


def latency(dut: Dut, macs: dict[str, str]) -> tuple[float, float]:
    rx = subprocess.Popen(recv_cmd(10.0), stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    time.sleep(0.5)
    nsx(
        NS_A,
        str(TOOL),
        "send",
        "--ifname",
        "p4rb-a0",
        "--src-mac",
        macs["a0"],
        "--dst-mac",
        dut.dst_mac,
        "--src",
        A_IP,
        "--dst",
        dut.dst_ip,
        "--sport",
        str(A_PORT),
        "--dport",
        str(dut.dports[0]),
        "--dports",
        ",".join(map(str, dut.dports)),
        "--flows",
        str(FLOWS),
        "--pps",
        "1000",
        "--secs",
        "2.5",
    )
    out, _ = rx.communicate(timeout=15)
    got = json.loads(out)
    return float(got["p50_us"]), float(got["p99_us"])


@dataclass
class Result:
    name: str
    capacity: int = 0
    cost: Trial | None = None
    p50_us: float = -1
    p99_us: float = -1
    trials: list[Trial] = field(default_factory=list)


def measure(dut: Dut, macs: dict[str, str], ladder: list[int]) -> Result:
    conf = frames_conf(dut, macs)
    res = Result(dut.name)
    trial(dut, conf, 1000)  # warm-up: ARP-free path, rings, RTPProxy latching
    for rate in ladder:
        t = trial(dut, conf, rate)
        res.trials.append(t)
        print(
            f"  {dut.name:14s} {rate:>8,d} pps offered ({t.achieved_pps:>9,.0f} sent): loss {t.loss * 100:6.3f} %, "
            f"CPU {t.cpu_s:5.2f} s (DUT process {t.dut_cpu_s:5.2f} s)",
            flush=True,
        )
        if rate == COST_RATE:
            res.cost = t
        if t.loss >= LOSS_MAX:
            break
        res.capacity = max(res.capacity, int(t.achieved_pps))
    res.p50_us, res.p99_us = latency(dut, macs)
    return res


def memory_and_inserts() -> tuple[float, float, float]:
    """RSS (MiB) before/after 1M sessions, and inserts/s, on an idle softswitch."""
    p = start_bg(
        "softswitch-mem",
        [
            "ip",
            "netns",
            "exec",
            NS_SW,
            str(BIN),
            "--grpc-listen",
            "127.0.0.1:50053",
            "--metrics-listen",
            "127.0.0.1:9102",
            "--workers",
            "1",
        ],
        RUN / "softswitch-mem.log",
    )
    try:
        wait_tcp(NS_SW, 50053, p, "softswitch")

        def rss() -> float:
            status = Path(f"/proc/{p.pid}/status").read_text().splitlines()
            return int(next(ln.split()[1] for ln in status if ln.startswith("VmRSS"))) / 1024

        before = rss()
        out = nsx(
            NS_SW,
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
        return before, rss(), float(got["inserts_per_s"])
    finally:
        stop_bg("softswitch-mem", p)


def ratio(a: float | None, b: float | None) -> str:
    return f"{a / b:.2f}" if a and b else "n/a"


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
    for tool in ("trafgen", "ip"):
        if not shutil.which(tool):
            print(f"missing {tool}", file=sys.stderr)
            return 2
    if not BIN.exists() or not TOOL.exists():
        subprocess.run(
            ["cargo", "build", "--release", "--all-targets", "--quiet"],
            cwd=ROOT / "switch",
            check=True,
        )
    ladder = LADDER[:4] if args.quick else LADDER
    RUN.mkdir(parents=True, exist_ok=True)
    cleanup()
    (RUN / "bench.pid").write_text(str(os.getpid()))
    results: list[Result] = []
    mem: tuple[float, float, float] | None = None
    try:
        macs = base_testbed()
        for make in (softswitch, bridge, rtpproxy):
            dut = make(macs)
            try:
                results.append(measure(dut, macs, ladder))
            finally:
                dut.stop()
        if not args.skip_memory:
            mem = memory_and_inserts()
    finally:
        cleanup()
        (RUN / "bench.pid").unlink(missing_ok=True)

    per_m = {
        r.name: (r.cost.cpu_s / r.cost.received * 1e6 if r.cost and r.cost.received else None)
        for r in results
    }
    dut_m = {
        r.name: (
            r.cost.dut_cpu_s / r.cost.received * 1e6
            if r.cost and r.cost.received and r.name != "kernel bridge"
            else None
        )
        for r in results
    }
    print()
    print(
        f"softswitch benchmark: G.711 RTP, 214-byte frames, {FLOWS} flows, trafgen → DUT → receiver over veth, "
        f"{os.cpu_count()} CPUs shared by all"
    )
    hdr = f"| {'figure':52s} |" + "".join(f" {r.name:>14s} |" for r in results)
    print(hdr)
    print("|" + "-" * 54 + "|" + "".join("-" * 16 + "|" for _ in results))

    def row(label: str, vals: list[str]) -> None:
        print(f"| {label:52s} |" + "".join(f" {v:>14s} |" for v in vals))

    row(
        f"pps relayed with < {LOSS_MAX * 100:g} % loss (best trial)",
        [f"{r.capacity:,d}" for r in results],
    )
    row(
        f"CPU-s per Mpkt @ {COST_RATE // 1000} kpps (gen+DUT+recv+softirq)",
        [f"{per_m[r.name]:.2f}" if per_m[r.name] else "n/a" for r in results],
    )
    row(
        f"DUT process CPU-s per Mpkt @ {COST_RATE // 1000} kpps",
        [f"{dut_m[r.name]:.2f}" if dut_m[r.name] else "(softirq)" for r in results],
    )
    row("one-way latency p50 µs @ 1 kpps", [f"{r.p50_us:.1f}" for r in results])
    row("one-way latency p99 µs @ 1 kpps", [f"{r.p99_us:.1f}" for r in results])
    ss, br, rp = per_m.get("softswitch"), per_m.get("kernel bridge"), per_m.get("RTPProxy")
    print()
    print(f"cost ratio softswitch / RTPProxy      = {ratio(ss, rp)}  (target ≤ 0.33)")
    print(f"cost ratio softswitch / kernel bridge = {ratio(ss, br)}  (target ≤ 2)")
    lat = {r.name: r for r in results}
    if "softswitch" in lat and "kernel bridge" in lat:
        print(
            f"added latency vs kernel bridge: p50 {lat['softswitch'].p50_us - lat['kernel bridge'].p50_us:+.1f} µs, "
            f"p99 {lat['softswitch'].p99_us - lat['kernel bridge'].p99_us:+.1f} µs"
        )
    if mem:
        before, after, ips = mem
        print(
            f"memory: {after:.0f} MiB resident with {SESSIONS:,d} sessions ({4 * SESSIONS:,d} relay + "
            f"{2 * SESSIONS:,d} leg entries; {before:.0f} MiB empty)  (target ≤ 512 MiB)"
        )
        print(f"batched inserts over BfRt gRPC: {ips:,.0f} entries/s  (target ≥ 50,000)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
