"""Fault drills: the records stay exact when a component dies with calls up.

SIPp calls through OpenSIPS -> rtpagent -> RTPProxy with the media in the
software switch, on the namespace testbed, while one part is killed
(`kill -9`) and started again:

* the agent, with the calls' BYEs in its outage (OpenSIPS sends them to
  RTPProxy directly, the second node of its rtpproxy set);
* the agent, with calls placed during its outage (relayed by RTPProxy
  directly, recorded by the restarted agent from RTPProxy's accounting);
* the switch, with every call up (its routes come back after the agent
  reconnected, as when a control plane restores them).

Each drill checks every call's record against the SIP truth (the INVITE, its
200 and the BYE as captured at the caller: within 2 s), the packets the
records hold against what the parties received from the relay (within 1 %),
and that no switch entry is left an idle period after the last BYE. It
prints its figures: control socket time, timestamp errors, packet error,
media gap per call.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import os
import signal
import struct
import subprocess
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest
from p4relay_scenarios import capture, rtpp, switchcfg, topology
from p4relay_scenarios.load import Profile, UacResult, run_uac
from p4relay_scenarios.stack import GRPC_ADDR, RELAY_PORTS, Stack
from p4relay_testsupport import wait_until

TIME_TOLERANCE_S = 2.0
PACKET_TOLERANCE = 0.01


def entries() -> tuple[int, int]:
    return asyncio.run(switchcfg.relay_entry_count(GRPC_ADDR))


def _ts(text: object) -> float:
    return datetime.fromisoformat(str(text)).timestamp()


# ------------------------------------------------------------------ what the parties saw
@dataclass
class Sip:
    invite: float
    answer: float | None = None
    bye: float | None = None


def sip_truth(pcap: Path) -> dict[str, Sip]:
    """Per Call-ID: when the caller sent its INVITE, got the 200 to it and sent the BYE."""
    out = subprocess.run(
        [
            "tshark",
            "-r",
            str(pcap),
            "-Y",
            "sip",
            "-T",
            "fields",
            "-E",
            "separator=|",
            "-e",
            "frame.time_epoch",
            "-e",
            "sip.Call-ID",
            "-e",
            "sip.Method",
            "-e",
            "sip.Status-Code",
            "-e",
            "sip.CSeq.method",
        ],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    calls: dict[str, Sip] = {}
    for line in out.splitlines():
        t, call_id, method, status, cseq = (line.split("|") + [""] * 5)[:5]
        at = float(t)
        if method == "INVITE" and call_id not in calls:
            calls[call_id] = Sip(at)
        c = calls.get(call_id)
        if c is None:
            continue
        if status == "200" and cseq == "INVITE" and c.answer is None:
            c.answer = at
        elif method == "BYE" and c.bye is None:
            c.bye = at
    return calls


def media_streams(pcap: Path) -> dict[tuple[int, int], list[float]]:
    """Arrival times per (relay source port, party's port) of what a party received."""
    data = pcap.read_bytes()
    magic = struct.unpack_from("<I", data, 0)[0]
    scale = 1e-9 if magic == capture.PCAP_NS_MAGIC else 1e-6
    streams: dict[tuple[int, int], list[float]] = {}
    off = 24
    while off + 16 <= len(data):
        sec, frac, caplen, _ = struct.unpack_from("<IIII", data, off)
        off += 16
        pkt = data[off : off + caplen]
        off += caplen
        if len(pkt) >= 38 and pkt[12:14] == b"\x08\x00":
            ihl = (pkt[14] & 0x0F) * 4
            sport, dport = struct.unpack_from("!HH", pkt, 14 + ihl)
            streams.setdefault((sport, dport), []).append(sec + frac * scale)
    return streams


def largest_gaps(streams: dict[tuple[int, int], list[float]]) -> list[float]:
    return sorted(
        max((b - a for a, b in itertools.pairwise(ts)), default=0.0) for ts in streams.values()
    )


@contextmanager
def captured(stack: Stack, tmp: Path, tag: str) -> Iterator[tuple[Path, list[Path]]]:
    """SIP at the caller; RTP from the relay at both parties."""
    lo, hi = RELAY_PORTS
    sip = tmp / f"{tag}-sip.pcap"
    media = [tmp / f"{tag}-uac.pcap", tmp / f"{tag}-uas.pcap"]
    caps = [
        capture.PortCapture(
            f"cap-{tag}-sip", topology.HOST_IF, "udp port 5060", sip, netns=topology.UAC.netns
        ),
        *(
            capture.PortCapture(
                f"cap-{tag}-{host.name}",
                topology.HOST_IF,
                f"udp and src host {topology.RELAY.addr} and src portrange {lo}-{hi} "
                f"and dst host {host.addr}",
                path,
                netns=host.netns,
            )
            for host, path in ((topology.UAC, media[0]), (topology.UAS, media[1]))
        ),
    ]
    for c in caps:
        stack.sup.start(
            c.name,
            [
                "tcpdump",
                "-i",
                c.ifname,
                "-Q",
                "in" if c.name != f"cap-{tag}-sip" else "inout",
                "-n",
                "-s",
                "1500" if "sip" in c.name else "64",
                "--immediate-mode",
                "-U",
                "-w",
                str(c.path),
                c.bpf,
            ],
            netns=c.netns,
        )
    capture.wait_capturing(stack.sup, [c.name for c in caps])
    try:
        yield sip, media
    finally:
        capture.stop_captures(stack.sup, caps)  # each packet is in its file as it arrives


# ------------------------------------------------------------------ faults
def _kill(stack: Stack, name: str) -> None:
    proc = stack.sup.procs.pop(name)
    os.killpg(proc.popen.pid, signal.SIGKILL)
    proc.popen.wait(10)
    proc.pidfile.unlink(missing_ok=True)


CONTROL_SOCKET_S = 1.0  # the agent's control socket is open this soon after its process started


def _restart_agent(stack: Stack) -> tuple[float, float]:
    """Start the agent again on its state file: seconds from its process's
    start until its control socket was open (the agent's own account, its
    `control_socket_open` line; the probe from the testbed's namespace adds
    a process start of its own), and until the agent was loaded."""
    t = time.monotonic()
    stack.rtpagent(loaded=False)  # waits for the control socket to answer
    log = stack.sup.procs["rtpagent"].log.read_text().splitlines()
    opened = [json.loads(ln) for ln in log if '"control_socket_open"' in ln]
    assert opened, "the agent did not report its control socket open"
    open_s = float(opened[-1]["after_s"])
    assert open_s <= CONTROL_SOCKET_S, open_s
    wait_until(stack.agent_loaded, within=90.0, interval=0.1, what="rtpagent loaded")
    return open_s, time.monotonic() - t


@contextmanager
def _calls(stack: Stack, prof: Profile, tag: str) -> Iterator[dict[str, UacResult]]:
    """SIPp places the profile's calls from the UAC host meanwhile; the result
    is in the box once they ended. A drill that fails midway stops SIPp."""
    box: dict[str, UacResult] = {}
    pids: list[int] = []

    def place() -> None:
        box["r"] = run_uac(
            prof, stack.media_dir, stack.cfg.run_dir / "load", tag=tag, on_spawn=pids.append
        )

    t = threading.Thread(target=place)
    t.start()
    try:
        yield box
        t.join(prof.duration_s + 60)
    finally:
        if t.is_alive():
            for pid in pids:
                os.kill(pid, signal.SIGKILL)
            t.join(30)


# ------------------------------------------------------------------ checks
@dataclass
class Figures:
    started: float
    answered: float
    ended: float
    reported: int
    received: int

    @property
    def packet_error(self) -> float:
        return (self.reported - self.received) / max(1, self.received)


def check_records(
    stack: Stack, truth: dict[str, Sip], media: list[Path]
) -> tuple[Figures, list[dict[str, Any]]]:
    """Every call's record ended, its times within TIME_TOLERANCE_S of the SIP
    truth, the packets within PACKET_TOLERANCE of what the parties received."""
    api = stack.api()
    got: dict[str, dict[str, Any]] = {}

    def all_ended() -> bool:
        got.clear()
        for s in api.all_sessions():
            if s["call_id"] in truth:
                got[s["call_id"]] = s
        return len(got) == len(truth) and all(s["state"] == "ended" for s in got.values())

    try:
        wait_until(all_ended, within=30.0, interval=1.0, what=f"{len(truth)} records ended")
    finally:
        api.close()
    err = {"started": 0.0, "answered": 0.0, "ended": 0.0}
    for call_id, sip in truth.items():
        s = got[call_id]
        assert sip.answer is not None and sip.bye is not None, (call_id, sip)
        for field, want in (("started", sip.invite), ("answered", sip.answer), ("ended", sip.bye)):
            have = s[f"{field}_at"]
            assert have is not None, (call_id, field, s)
            e = abs(_ts(have) - want)
            assert e <= TIME_TOLERANCE_S, (call_id, field, have, want)
            err[field] = max(err[field], e)
    received = sum(len(ts) for p in media for ts in media_streams(p).values())
    reported = sum(int(s["packets"] or 0) for s in got.values())
    fig = Figures(err["started"], err["answered"], err["ended"], reported, received)
    assert abs(fig.packet_error) <= PACKET_TOLERANCE, (reported, received)
    return fig, list(got.values())


def no_entry_left(stack: Stack, last_bye: float) -> float:
    """Seconds after the last BYE until the switch held no entry (at most the idle period)."""
    idle_s = (stack.cfg.idle_ttl_ms or 60000) / 1000.0
    wait_until(
        lambda: entries() == (0, 0), within=idle_s + 3.0, interval=0.25, what="no entry left"
    )
    return time.monotonic() - last_bye


def _print(
    name: str, calls: int, restart: tuple[float, float] | None, fig: Figures, extra: str
) -> None:
    sock = (
        f"control socket open {restart[0]:.2f} s after the agent's process started (agent "
        f"loaded {restart[1]:.1f} s after the restart); "
        if restart is not None
        else ""
    )
    print(
        f"\n{name}: {calls} calls; {sock}timestamp error max started {fig.started:.2f} s, "
        f"answered {fig.answered:.2f} s, ended {fig.ended:.2f} s; packets recorded "
        f"{fig.reported} vs received {fig.received} ({100 * fig.packet_error:+.2f} %); {extra}"
    )


# ------------------------------------------------------------------ the drills
pytestmark = pytest.mark.timeout(300)


def test_agent_killed_with_byes_in_its_outage(stack: Stack, tmp_path: Path) -> None:
    """Calls up on the switch; the agent is killed before their BYEs and
    started again after them: each record ends when its BYE was sent."""
    prof = Profile("drill-byes", rate=10.0, calls=20, hold_s=8.0)
    with captured(stack, tmp_path, "byes") as (sip, media):
        with _calls(stack, prof, "drill-byes") as box:
            wait_until(lambda: entries()[0] >= 4 * prof.calls, within=20.0, what="offloaded")
            _kill(stack, "rtpagent")
            time.sleep(prof.hold_s)  # the BYEs go out while the agent is away
            restart_s = _restart_agent(stack)
        last_bye = time.monotonic()
        gone_s = no_entry_left(stack, last_bye)
    r = box["r"]
    assert r.stats.successful == prof.calls and r.stats.failed == 0, r.stats
    truth = sip_truth(sip)
    assert len(truth) == prof.calls
    fig, _ = check_records(stack, truth, media)
    _print(
        "agent killed, BYEs in its outage",
        prof.calls,
        restart_s,
        fig,
        f"no entry {gone_s:.1f} s after the last BYE",
    )


def test_calls_placed_while_the_agent_is_away(stack: Stack, tmp_path: Path) -> None:
    """The agent is killed; calls placed meanwhile go to RTPProxy directly
    (relayed), and the restarted agent records them (reason agent_away) with
    RTPProxy's packets, their ends through the agent again."""
    prof = Profile("drill-away", rate=5.0, calls=10, hold_s=6.0)
    with captured(stack, tmp_path, "away") as (sip, media):
        _kill(stack, "rtpagent")
        killed = time.time()
        complete0 = rtpp.stats("nsess_complete")["nsess_complete"]
        with _calls(stack, prof, "drill-away") as box:
            # every call placed and answered (its RTPProxy session complete)
            wait_until(
                lambda: rtpp.stats("nsess_complete")["nsess_complete"] >= complete0 + prof.calls,
                within=prof.calls / prof.rate + 15.0,
                interval=0.2,
                what="every call answered through RTPProxy",
            )
            back_t = time.time()
            restart_s = _restart_agent(stack)
        last_bye = time.monotonic()
        gone_s = no_entry_left(stack, last_bye)
    r = box["r"]
    assert r.stats.successful == prof.calls and r.stats.failed == 0, r.stats
    truth = sip_truth(sip)
    assert len(truth) == prof.calls
    fig, records = check_records(stack, truth, media)
    away = [s for s in records if killed <= truth[s["call_id"]].invite < back_t]
    assert len(away) == prof.calls
    assert all(s["offload_reason"] == "agent_away" for s in away), [
        s["offload_reason"] for s in away
    ]
    _print(
        "calls placed while the agent is away",
        prof.calls,
        restart_s,
        fig,
        f"{len(away)} recorded agent_away; no entry {gone_s:.1f} s after the last BYE",
    )


@pytest.mark.restarts_switch
def test_switch_killed_with_calls_up(stack: Stack, tmp_path: Path) -> None:
    """The switch is killed with every call up and started again empty; its
    routes come back after the agent reconnected. Calls resume (offloaded
    again as soon as their route is there) and the records keep the packets
    counted before the kill and those RTPProxy relayed meanwhile."""
    prof = Profile("drill-switch", rate=10.0, calls=20, hold_s=20.0)
    down_s = 2.0
    # The counters are read (and carried over a restart) every 0.2 s here, not every
    # second: what a crash loses is what the switch counted since the last read.
    os.environ["P4RELAY_RTPAGENT_SAMPLE_INTERVAL"] = "0.2"
    try:
        _kill(stack, "rtpagent")
        _restart_agent(stack)
    finally:
        del os.environ["P4RELAY_RTPAGENT_SAMPLE_INTERVAL"]
    with captured(stack, tmp_path, "switch") as (sip, media):
        with _calls(stack, prof, "drill-switch") as box:
            wait_until(lambda: entries()[0] >= 4 * prof.calls, within=20.0, what="offloaded")
            _kill(stack, "softswitch")
            killed, killed_wall = time.monotonic(), time.time()
            time.sleep(down_s)  # the outage's length (the scenario), not a wait
            stack.softswitch(topology.ports())  # empty tables; routes programmed once it answers
            back_s = time.monotonic() - killed
            wait_until(
                lambda: entries()[0] >= 4 * prof.calls,
                within=20.0,
                interval=0.25,
                what="calls offloaded again",
            )
            reoffload_s = time.monotonic() - killed
        last_bye = time.monotonic()
        gone_s = no_entry_left(stack, last_bye)
    r = box["r"]
    assert r.stats.successful == prof.calls and r.stats.failed == 0, r.stats
    truth = sip_truth(sip)
    streams = [ts for p in media for ts in media_streams(p).values() if ts[0] < killed_wall]
    assert len(streams) >= 2 * prof.calls, len(streams)
    # Every call's both directions resumed after the switch came back.
    assert all(ts[-1] > killed_wall + down_s for ts in streams)
    gaps = largest_gaps({(0, n): ts for n, ts in enumerate(streams)})
    fig, _ = check_records(stack, truth, media)
    _print(
        "switch killed with calls up",
        prof.calls,
        None,
        fig,
        f"switch back after {back_s:.1f} s, all calls offloaded again {reoffload_s:.1f} s after "
        f"the kill; media gap per call min {gaps[0]:.2f} s, median {gaps[len(gaps) // 2]:.2f} s, "
        f"max {gaps[-1]:.2f} s; no entry {gone_s:.1f} s after the last BYE",
    )
