"""A switch out of service: 100 offloaded calls with media flowing both ways
move back to RTPProxy when an operator takes their switch out of service
through the server's API (the agent polls it), losing at most one packet
per call and direction at the receivers; the switch holds none of their
entries after; back in service, calls are offloaded again.

The figures (evacuation time, packets lost per call, largest gap a receiver
saw) are printed with the test's output."""

from __future__ import annotations

import asyncio
import json
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Any

import pytest
from p4relay_scenarios import rtpp, topology
from p4relay_scenarios.agent_metrics import agent_count
from p4relay_scenarios.api import ServerApi
from p4relay_scenarios.stack import (
    GRPC_ADDR,
    RELAY_ADDR,
    SERVER_URL,
    SWITCH_NAME,
    Stack,
)
from p4relay_switch import Pipeline, Subscription, SwitchClient
from p4relay_testsupport import wait_until

CALLS = 100
MEDIA_PORT = 40000  # the parties' own media ports: 40000 + 2 i
CALL_TABLES = ("pipe.Ingress.relay", "pipe.Ingress.leg_rewrite", "pipe.Ingress.relay_guard")


@pytest.fixture(scope="module")
def base_stack(own_stack: Callable[..., AbstractContextManager[Stack]]) -> Iterator[Stack]:
    """The module's own stack, as conftest's but with the switch's default egress
    queues (conftest's are 64 packets deep for the shaping case: with two
    cores shared by every daemon, 10,000 packets a second through the relay
    port would overflow them, and the figures would be the queue's, not the
    move's), and its agent polling the server every 0.25 s."""
    with pytest.MonkeyPatch.context() as env:
        env.setenv("P4RELAY_RTPAGENT_MAINTENANCE_POLL_S", "0.25")
        with own_stack(idle_ttl_ms=None, switch_args=[]) as s:
            yield s


def agent_commands(cmds: list[str]) -> list[str]:
    """Control commands to rtpagent from the relay host (as the SIP server
    sends them), in order, in one process; their replies."""
    code = (
        "import json,os,socket,sys;s=socket.socket(socket.AF_INET,socket.SOCK_DGRAM);"
        "s.settimeout(3);out=[]\n"
        "for cmd in json.load(sys.stdin):\n"
        "  c=os.urandom(6).hex()\n"
        "  s.sendto(f'{c} {cmd}'.encode(),('127.0.0.1',22222))\n"
        "  r=s.recv(65536).decode();assert r.startswith(c+' '),r\n"
        "  out.append(r.split(' ',1)[1].strip())\n"
        "print(json.dumps(out))"
    )
    r = subprocess.run(
        ["ip", "netns", "exec", topology.RELAY.netns, sys.executable, "-c", code],
        input=json.dumps(cmds),
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    got: list[str] = json.loads(r.stdout)
    return got


class SwitchProbe:
    """One BfRt client on the stack's switch for the whole case (a read is a
    table usage: cheap enough to poll while 10,000 packets a second flow)."""

    def __init__(self) -> None:
        self.runner = asyncio.Runner()
        self.client = SwitchClient(
            GRPC_ADDR, client_id=11, subscription=Subscription(learn=False, idle_timeout=False)
        )
        self.runner.run(self.client.connect())

    def entries(self) -> int:
        async def read() -> int:
            return sum([await self.client.usage(t) for t in CALL_TABLES])

        return self.runner.run(read())

    def fewest_leg_packets(self) -> int:
        async def read() -> int:
            legs = [e.key["ig_md.leg"] for e in await self.client.read("pipe.Ingress.leg_rewrite")]
            counts = await Pipeline(self.client).read_leg_counters([int(str(x)) for x in legs])
            return min((x.packets for x in counts.values()), default=0)

        return self.runner.run(read())

    def close(self) -> None:
        self.runner.run(self.client.close())
        self.runner.close()


class Flows:
    """rtpflows in a host namespace, one stream per call."""

    def __init__(self, netns: str, spec: list[list[object]], work: Path, name: str) -> None:
        self.out = work / f"{name}.json"
        spec_file = work / f"{name}-spec.json"
        spec_file.write_text(json.dumps(spec))
        cmd = [sys.executable, "-m", "p4relay_scenarios.rtpflows", "--spec", str(spec_file)]
        self.proc = subprocess.Popen(
            ["ip", "netns", "exec", netns, *cmd, "--out", str(self.out)],
            stdout=subprocess.PIPE,
            text=True,
        )
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline()
        assert line.strip() == "ready", f"rtpflows in {netns}: {line!r}"

    def stop(self) -> list[dict[str, Any]]:
        self.proc.send_signal(signal.SIGTERM)
        self.proc.wait(10)
        got: list[dict[str, Any]] = json.loads(self.out.read_text())
        return got

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()


def relayed_by_rtpproxy() -> int:
    return rtpp.stats("npkts_relayed")["npkts_relayed"]


def test_switch_out_of_service_evacuates_100_calls_to_rtpproxy(
    stack: Stack, tmp_path: Path
) -> None:
    assert stack.creds is not None
    probe = SwitchProbe()
    try:
        run_case(stack, probe, tmp_path)
    finally:
        probe.close()


def run_case(stack: Stack, probe: SwitchProbe, tmp_path: Path) -> None:
    assert stack.creds is not None
    entries = probe.entries
    uac, uas = topology.UAC.addr, topology.UAS.addr
    ids = [f"drain-{i}" for i in range(CALLS)]
    offers = agent_commands([f"U {c} {uac} {MEDIA_PORT + 2 * i} f{i};1" for i, c in enumerate(ids)])
    answers = agent_commands(
        [f"L {c} {uas} {MEDIA_PORT + 2 * i} f{i};1 t{i};1" for i, c in enumerate(ids)]
    )
    port_b = [int(r.split()[0]) for r in offers]  # the callee sends here
    port_a = [int(r.split()[0]) for r in answers]  # the caller sends here
    wait_until(
        lambda: agent_count("rtpagent_offloaded_sessions") == CALLS,
        within=20,
        what="100 calls offloaded",
    )
    assert entries() == 10 * CALLS  # 4 relays, 2 legs, 4 guards a call

    admin = ServerApi.login(SERVER_URL, stack.creds.admin_user, stack.creds.admin_password)
    (sw,) = [s for s in admin._get("/api/v1/maintenance")["switches"] if s["name"] == SWITCH_NAME]
    flows: list[Flows] = []
    try:
        flows.append(
            Flows(
                topology.UAC.netns,
                [[uac, MEDIA_PORT + 2 * i, RELAY_ADDR, port_a[i]] for i in range(CALLS)],
                tmp_path,
                "caller",
            )
        )
        flows.append(
            Flows(
                topology.UAS.netns,
                [[uas, MEDIA_PORT + 2 * i, RELAY_ADDR, port_b[i]] for i in range(CALLS)],
                tmp_path,
                "callee",
            )
        )
        # Every call's media on the switch (each leg counted half a second of it).
        wait_until(lambda: probe.fewest_leg_packets() >= 25, within=15, what="media on the switch")
        on_rtpproxy = relayed_by_rtpproxy()

        t_api = time.time()
        r = admin.http.put(
            f"/api/v1/maintenance/switches/{sw['id']}", json={"state": "out_of_service"}
        )
        assert r.status_code == 200, r.text
        wait_until(
            lambda: entries() == 0, within=20, what="the switch's call entries gone", interval=0.01
        )
        t_empty = time.time()
        evac_s = agent_count("rtpagent_evacuation_seconds_sum")
        assert agent_count("rtpagent_evacuated_calls_total") == CALLS
        # Every call's media now relayed by RTPProxy: a second of it (both ways).
        wait_until(
            lambda: relayed_by_rtpproxy() - on_rtpproxy >= 2 * CALLS * 50,
            within=20,
            what="RTPProxy relaying the calls",
        )
        stats = [f.stop() for f in flows]
    finally:
        for f in flows:
            f.kill()

    # The receivers: every call's every direction continued after the move.
    lost = [st["lost"] for side in stats for st in side]
    gaps = [st["max_gap_ms"] for side in stats for st in side]
    per_call = [a["lost"] + b["lost"] for a, b in zip(stats[0], stats[1], strict=True)]
    dist = {n: per_call.count(n) for n in sorted(set(per_call))}
    print(
        f"\nevacuation of {CALLS} calls: agent {evac_s * 1000:.1f} ms (its mode change to the "
        f"last entry removed), API call to empty tables {(t_empty - t_api) * 1000:.0f} ms "
        f"(includes the agent's 0.25 s poll); packets lost per call (both directions): "
        f"max {max(per_call)}, total {sum(per_call)}, calls by loss {dist}; per direction max "
        f"{max(lost)}; largest gap at a receiver {max(gaps):.1f} ms (median of the per-stream "
        f"maxima {sorted(gaps)[len(gaps) // 2]:.1f} ms; packets every 20 ms)"
    )
    near = sum(1 for side in stats for st in side if abs((st["max_gap_at"] or 0) - t_empty) < 2.0)
    print(f"streams whose largest gap was within 2 s of the move: {near} of {2 * CALLS}")
    for side in stats:
        for st in side:
            assert st["lost"] <= 1, st
            assert st["last_rx"] is not None and st["last_rx"] > t_empty + 0.5, st
            assert st["received"] >= 0.9 * st["sent"] - 30, st  # started after the peer, at most

    # Back in service: calls are offloaded again, a new one among them.
    r = admin.http.put(f"/api/v1/maintenance/switches/{sw['id']}", json={"state": "active"})
    assert r.status_code == 200, r.text
    agent_commands([f"U drain-new {uac} 45000 fn;1", f"L drain-new {uas} 45000 fn;1 tn;1"])
    wait_until(
        lambda: agent_count("rtpagent_offloaded_sessions") == CALLS + 1,
        within=20,
        what="offloaded again",
    )
    assert entries() == 10 * (CALLS + 1)
    view = admin._get("/api/v1/maintenance")
    (sw,) = [s for s in view["switches"] if s["name"] == SWITCH_NAME]
    assert sw["maintenance"] == "active"
    events = admin._get("/api/v1/events", type="evacuated")["items"]
    assert any(e["payload"]["calls"] == CALLS for e in events), events
    agent_commands([f"D {c} f{i} t{i}" for i, c in enumerate(ids)] + ["D drain-new fn tn"])
    wait_until(lambda: entries() == 0, within=20, what="every call ended")
