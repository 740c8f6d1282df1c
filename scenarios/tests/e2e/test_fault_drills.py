"""Fault drill: rtpagent is killed (`kill -9`) with 200 calls up and restarted.

SIPp calls through OpenSIPS -> rtpagent -> RTPProxy with the media in the
software switch, on the namespace testbed. While every call is up the agent
is killed without warning and started again on its state file; the calls
then end with their BYEs. Every session record in the server must end, the
packets the server reports must agree with what the parties received (the
first samples after the restart are intervals, not totals), and no switch
entry may be left 5 s after the last BYE.
"""

from __future__ import annotations

import asyncio
import os
import signal
import threading
import time
from datetime import datetime
from pathlib import Path
from typing import Any

from p4relay_scenarios import capture, switchcfg, topology
from p4relay_scenarios.load import Profile, UacResult, run_uac
from p4relay_scenarios.stack import GRPC_ADDR, RELAY_PORTS, Stack
from p4relay_testsupport import wait_until

CALLS = 200
RATE = 40.0  # calls/s: all up after 5 s
HOLD_S = 40.0  # the BYEs come after the restarted agent is back (its start alone takes seconds)
KILL_AT_S = 8.0  # after the last call is up, well before the first BYE
DOWN_S = 1.0  # how long the agent stays dead


def entries() -> tuple[int, int]:
    return asyncio.run(switchcfg.relay_entry_count(GRPC_ADDR))


def drill_sessions(stack: Stack, since: float) -> list[dict[str, Any]]:
    """The server's records of the calls SIPp placed since `since`."""
    api = stack.api()
    try:
        return [
            s
            for s in api.sessions()
            if datetime.fromisoformat(s["started_at"]).timestamp() >= since
            and str(s["call_id"]).endswith(f"@{topology.UAC.addr}")
        ]
    finally:
        api.close()


def _media_capture(name: str, host: topology.Host, out: Path) -> capture.PortCapture:
    """RTP the host receives from the relay (what the switch forwarded to it)."""
    lo, hi = RELAY_PORTS
    return capture.PortCapture(
        name,
        topology.HOST_IF,
        f"udp and src host {topology.RELAY.addr} and src portrange {lo}-{hi} "
        f"and dst host {host.addr}",
        out,
        netns=host.netns,
    )


def _kill_agent(stack: Stack) -> None:
    proc = stack.sup.procs.pop("rtpagent")
    os.killpg(proc.popen.pid, signal.SIGKILL)
    proc.popen.wait(10)
    proc.pidfile.unlink(missing_ok=True)


def test_agent_killed_with_calls_up(stack: Stack, tmp_path: Path) -> None:
    t0 = time.time() - 1
    caps = [
        _media_capture("cap-drill-uas", topology.UAS, tmp_path / "uas.pcap"),
        _media_capture("cap-drill-uac", topology.UAC, tmp_path / "uac.pcap"),
    ]
    for c in caps:
        stack.sup.start(
            c.name,
            ["tcpdump", "-i", c.ifname, "-Q", "in", "-n", "-s", "64", "-w", str(c.path), c.bpf],
            netns=c.netns,
        )
    time.sleep(1.0)  # tcpdump attaches its filter before traffic starts

    box: dict[str, UacResult] = {}
    prof = Profile("drill-kill", rate=RATE, calls=CALLS, hold_s=HOLD_S, limit=CALLS)

    def place() -> None:
        box["r"] = run_uac(prof, stack.media_dir, stack.cfg.run_dir / "load", tag="drill-kill")

    uac = threading.Thread(target=place)
    started = time.monotonic()
    uac.start()
    time.sleep(KILL_AT_S)
    entries_before = entries()
    _kill_agent(stack)
    time.sleep(DOWN_S)
    restart_t = time.monotonic()
    stack.rtpagent()  # same state file; waits for the control socket
    restart_s = time.monotonic() - restart_t
    uac.join(prof.duration_s + 120)
    last_bye = time.monotonic()
    result = box["r"]
    assert result.stats.successful == CALLS, f"SIPp: {result.stats} (log {result.log})"
    assert result.stats.failed == 0
    assert entries_before[0] >= 4 * CALLS, entries_before  # every call was on the switch

    # No entry left 5 s after the last BYE.
    wait_until(lambda: entries() == (0, 0), within=5.0, interval=0.25, what="entries removed")
    gone_s = time.monotonic() - last_bye
    time.sleep(1.0)
    capture.stop_captures(stack.sup, caps)
    received = sum(capture.count_frames(c.path) for c in caps)

    # Every session record ends, with the packets the parties received.
    done: list[dict[str, Any]] = []

    def all_ended() -> bool:
        nonlocal done
        got = drill_sessions(stack, t0)
        done = [s for s in got if s["state"] == "ended" and s["ended_at"]]
        return len(got) == CALLS and len(done) == CALLS

    wait_until(all_ended, within=60.0, interval=1.0, what=f"{CALLS} session records ended")
    reported = sum(int(s["packets"] or 0) for s in done)
    assert abs(reported - received) <= 0.01 * received, (reported, received)
    print(
        f"\ndrill: {CALLS} calls, agent down {DOWN_S:.1f} s + restart {restart_s:.2f} s "
        f"(killed {KILL_AT_S:.0f} s after the first call, {time.monotonic() - started:.0f} s "
        f"run); {len(done)} records ended; packets reported {reported} vs received "
        f"{received} ({100.0 * (reported - received) / max(1, received):+.2f} %); "
        f"entries gone {gone_s:.2f} s after the last BYE"
    )
