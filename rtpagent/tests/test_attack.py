"""Media injection: RTP sprayed at the relay's port range while a call is offloaded.

Real packets end to end: the caller, the callee and the attacker live in one p4ra*
namespace, RTPProxy (rtp.io, its own process) in another; the real softswitch sits
between them on two veth pairs and routes like the production switch (relay
address on one port, parties on the other). The agent runs in the test.

Why a guard is needed (measured against this RTPProxy, see
docs/design/relay-guard.md): once the switch carries a call, RTPProxy never sees its media
again, so its streams stay (or become again) latchable by anyone:
* offloaded before the first packet: RTPProxy never latched;
* offloaded after RTPProxy latched ("latch first", `latch_always`): the agent's
  keep-alive `L` (every ttl/3) re-arms RTPProxy's latch, the next packet from any
  source wins it, and the legitimate party's packets (on the switch) never win it
  back; RTCP ports are never latched at all.
The agent therefore guards an offloaded call's relay ports (`relay_guard`,
contract v2): a packet to them from anyone but the installed sources is dropped
by the switch, counted, and reported. The unguarded control case shows the
attack is real on this testbed (it succeeds without the guard).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import secrets
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from harness import Client, running_agent, settings
from p4relay_switch import Nexthop, Pipeline, Subscription, SwitchClient
from p4relay_testsupport import Softswitch, record_pid, wait_for

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="needs root for network namespaces")

RELAY = "198.18.0.10"
CALLER, CALLEE, ATTACKER = "198.18.1.10", "198.18.2.10", "198.18.9.66"
PORTS = (36100, 36199)
PORT_RANGE = f"{PORTS[0]}-{PORTS[1]}"
SWITCH_MAC = "02:00:00:00:00:01"

# Runs in the parties' namespace: both parties send 20 ms RTP for `secs`; from
# `attack_at` on the attacker sprays every even port of the relay range each tick.
PARTIES = """
import json, socket, struct, sys, time
relay, to_callee, to_caller, secs, attack_at, lo, hi, a_caller, a_callee, a_atk = sys.argv[1:11]
to_callee, to_caller, lo, hi = int(to_callee), int(to_caller), int(lo), int(hi)
secs, attack_at = float(secs), float(attack_at)
def sock(addr, port):
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.bind((addr, port)); s.setblocking(False); return s
caller, callee, atk = sock(a_caller, 6000), sock(a_callee, 7000), sock(a_atk, 0)
got = {"callee": {}, "caller": {}}
def drain(name, s):
    while True:
        try:
            p = s.recv(2048)
        except BlockingIOError:
            return
        if len(p) >= 12:
            k = hex(struct.unpack("!I", p[8:12])[0])
            got[name][k] = got[name].get(k, 0) + 1
t0 = time.monotonic(); seq = 0
while time.monotonic() - t0 < secs:
    seq += 1
    caller.sendto(struct.pack("!BBHII", 0x80, 8, seq, seq * 160, 0x1111) + bytes(160), (relay, to_callee))
    callee.sendto(struct.pack("!BBHII", 0x80, 8, seq, seq * 160, 0x2222) + bytes(160), (relay, to_caller))
    if time.monotonic() - t0 >= attack_at:
        for p in range(lo, hi, 2):
            atk.sendto(struct.pack("!BBHII", 0x80, 8, seq, 0, 0xBADBAD) + bytes(160), (relay, p))
    time.sleep(0.02)  # 50 packets a second each way, as a call
    drain("callee", callee); drain("caller", caller)
# The last packets still in flight (nothing marks the last one): a grace, then read.
time.sleep(0.3); drain("callee", callee); drain("caller", caller)
print(json.dumps(got))
"""


@dataclass
class Bed:
    sw: Softswitch
    parties_ns: str
    relay_ns: str
    rtpp_control: str


def _run(*cmd: str) -> str:
    return subprocess.run(cmd, check=True, capture_output=True, text=True).stdout


def _mac(ns: str, dev: str) -> str:
    return str(json.loads(_run("ip", "-n", ns, "-j", "link", "show", dev))[0]["address"])


@pytest.fixture
def testbed(tmp_path: Path) -> Iterator[Bed]:
    tag = secrets.token_hex(3)
    # The owner's pid in the name: the cleanup hook leaves live runs' namespaces alone.
    pns, rns = f"p4ra-{os.getpid()}-{tag}p", f"p4ra-{os.getpid()}-{tag}r"
    sp, pp, sr, rr = f"p4ra{tag}a", f"p4ra{tag}p", f"p4ra{tag}b", f"p4ra{tag}r"
    rtpp: subprocess.Popen[bytes] | None = None
    sw: Softswitch | None = None
    try:
        for ns, sdev, ndev, addrs, peers in (
            (pns, sp, pp, (CALLER, CALLEE, ATTACKER), (RELAY,)),
            (rns, sr, rr, (RELAY,), (CALLER, CALLEE, ATTACKER)),
        ):
            _run("ip", "netns", "add", ns)
            _run("ip", "link", "add", sdev, "type", "veth", "peer", "name", ndev)
            _run("ip", "link", "set", ndev, "netns", ns)
            _run("ip", "link", "set", sdev, "up")
            _run("ip", "-n", ns, "link", "set", ndev, "up")
            _run("ip", "-n", ns, "link", "set", "lo", "up")
            for a in addrs:
                _run("ip", "-n", ns, "addr", "add", f"{a}/16", "dev", ndev)
            for a in peers:  # the switch answers no ARP; it rewrites MACs on forward
                _run("ip", "-n", ns, "neigh", "add", a, "lladdr", SWITCH_MAC, "dev", ndev)
            # veth leaves UDP checksums to "hardware": the switch would forward them wrong.
            _run("ip", "netns", "exec", ns, sys.executable, "-m", "p4relay_scenarios.ethtool", ndev)
        sw = Softswitch(["--port", f"1={sp}", "--port", f"2={sr}"])
        sw.start()
        asyncio.run(_program_routes(sw.address, _mac(pns, pp), _mac(rns, rr)))
        sock = f"{tempfile.mkdtemp(prefix='p4ra-rtpp-')}/ctl.sock"
        rtpp = subprocess.Popen(
            [
                *("ip", "netns", "exec", rns, sys.executable, "-m", "rtpagent.embedded"),
                *("--control", f"unix:{sock}", "--listen", RELAY, "--ports", PORT_RANGE),
                *("--workdir", str(tmp_path / "rtpp")),
            ],
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
        )
        record_pid(rtpp.pid)
        assert rtpp.stdout is not None
        assert b"ready" in rtpp.stdout.readline(), "RTPProxy did not start"
        yield Bed(sw, pns, rns, f"unix:{sock}")
    finally:
        if rtpp is not None:
            rtpp.terminate()
            with contextlib.suppress(subprocess.TimeoutExpired):
                rtpp.wait(10)
            if rtpp.poll() is None:
                rtpp.kill()
                rtpp.wait()
        if sw is not None:
            sw.stop()
        for dev in (sp, sr):
            subprocess.run(["ip", "link", "del", dev], capture_output=True)
        for ns in (pns, rns):
            subprocess.run(["ip", "netns", "del", ns], capture_output=True)


async def _program_routes(address: str, parties_mac: str, relay_mac: str) -> None:
    c = SwitchClient(
        address, client_id=11, subscription=Subscription(learn=False, idle_timeout=False)
    )
    await c.connect()
    try:
        pl = Pipeline(c)
        await pl.add_nexthops(
            [Nexthop(1, 1, SWITCH_MAC, parties_mac), Nexthop(2, 2, SWITCH_MAC, relay_mac)]
        )
        await pl.add_routes([(f"{RELAY}/32", 2), ("198.18.0.0/16", 1)])
    finally:
        await c.close()


@pytest.mark.parametrize(
    ("latch_first", "guard"),
    [
        pytest.param(False, True, id="offload-at-answer"),
        pytest.param(True, True, id="latch-first"),
        pytest.param(False, False, id="unguarded-control"),
    ],
)
async def test_sprayed_rtp_never_reaches_the_parties(
    tmp_path: Path, testbed: Bed, latch_first: bool, guard: bool
) -> None:
    from prometheus_client import REGISTRY

    def dropped_metric() -> float:
        return REGISTRY.get_sample_value("rtpagent_guard_dropped_packets_total") or 0.0

    cfg = settings(
        tmp_path,
        switch=testbed.sw.address,
        rtpproxy=testbed.rtpp_control,
        relay_addr=[RELAY],
        relay_ports=PORT_RANGE,
        rtpproxy_ttl=3.0,  # keep-alive L every second: the attack starts after two
        latch_always=latch_first,
        relay_guard=guard,
    )
    dropped_before = dropped_metric()
    async with running_agent(cfg) as app:
        cl = Client(int(cfg.listen[0].rsplit(":", 1)[1]))
        try:
            r_u = await cl.cmd(f"U atk1 {CALLER} 6000 ft;1")
            r_l = await cl.cmd(f"L atk1 {CALLEE} 7000 ft;1 tt;1")
            assert r_u and r_l, (r_u, r_l)
            to_caller, to_callee = int(r_u.split()[0]), int(r_l.split()[0])
            t0 = time.monotonic()
            proc = await asyncio.create_subprocess_exec(
                *["ip", "netns", "exec", testbed.parties_ns, sys.executable, "-c", PARTIES],
                *(RELAY, str(to_callee), str(to_caller), "5", "2.5", str(PORTS[0]), str(PORTS[1])),
                *(CALLER, CALLEE, ATTACKER),
                stdout=asyncio.subprocess.PIPE,
            )
            await wait_for(lambda: app.offloader.plans, within=5.0, interval=0.005)
            offload_delay = time.monotonic() - t0
            out, _ = await asyncio.wait_for(proc.communicate(), 30)
            assert proc.returncode == 0
            got = json.loads(out)
            print(f"offload {offload_delay * 1000:.0f} ms after media start; received {got}")
            # The call itself works (relayed first by RTPProxy, then by the switch) ...
            assert got["callee"].get("0x1111", 0) > 150, got
            assert got["caller"].get("0x2222", 0) > 150, got
            assert app.offloader.plans, "the call was not offloaded"
            (s,) = list(app.table)
            if not guard:
                # Without the guard the attacker gets through: the hole is real here.
                assert "0xbadbad" in got["callee"] or "0xbadbad" in got["caller"], got
                return
            # ... and nothing the attacker sent reaches either party.
            assert "0xbadbad" not in got["callee"], got
            assert "0xbadbad" not in got["caller"], got
            # The switch measured the call's RTP as it left its egress queue
            # (pipe.Egress.rtp_* registers): every packet, PCMA, nothing lost.
            assert s.legs is not None
            q = await app.switch.read_quality(list(s.legs))
            for leg in s.legs:
                assert q[leg].packets > 100 and q[leg].payload_type == 8, q
                assert q[leg].lost == 0, q
            # The switch dropped it, and the agent saw who: logged, counted, reported.
            await wait_for(lambda: s.foreign_sources, within=5.0)
            assert all(src.startswith(f"{ATTACKER}:") for src in s.foreign_sources), s
            assert await cl.cmd("D atk1 ft tt") == "0\n"
            await wait_for(lambda: not app.offloader.plans, within=5.0)
            assert s.switch_totals.foreign_dropped > 0, s.switch_totals
            assert dropped_metric() - dropped_before == s.switch_totals.foreign_dropped
            app.store.flush()
            removed = [
                d
                for _, kind, d in app.store.spool_head(10000)
                if kind == "event" and d["type"] == "offload_removed"
            ]
            assert removed and removed[-1]["payload"]["foreign_packets_dropped"] == (
                s.switch_totals.foreign_dropped
            ), removed
            assert removed[-1]["payload"]["foreign_sources"] == s.foreign_sources
        finally:
            cl.close()
