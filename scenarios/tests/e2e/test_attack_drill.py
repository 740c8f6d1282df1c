"""Fault drill: an attacker host races a call whose caller starts late (RTP Bleed).

The call is set up through rtpagent's control socket as the SIP server's
rtpproxy module does it (offer `U`, answer `L`), so the media timing is ours:
the callee's media starts at once (early media), a stranger on the attacker
host sends to the caller's relay port from then on, and the caller's own
media starts only seconds later. Real packets through the namespaces, the
software switch, RTPProxy and rtpagent. No attacker packet may reach either
party, the callee's media must not be handed to the attacker, and once the
caller starts, its media reaches the callee.
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import time

from p4relay_scenarios import rtpp, switchcfg, topology
from p4relay_scenarios.stack import GRPC_ADDR, Stack
from p4relay_testsupport import wait_until

AGENT_PORT = 22222  # rtpagent's control socket in the relay host

CALLER = (topology.UAC.addr, 16000)
CALLEE = (topology.UAS.addr, 17000)
STRANGER = (topology.ATTACKER.addr, 14000)
SSRC_CALLER, SSRC_CALLEE, SSRC_STRANGER = 0xCA11E2, 0xCA11EE, 0xBADBAD

# One party: binds its address, sends RTP (50 packets/s) to `dst` from `start`
# to `stop` seconds after launch, counts what it receives by SSRC, prints JSON.
PARTY = r"""
import json, socket, struct, sys, time
addr, port, dst, dport, ssrc, start, stop = sys.argv[1:8]
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
s.bind((addr, int(port)))
s.settimeout(0.005)
got = {}
t0 = time.monotonic()
seq = 0
next_send = t0 + float(start)
while time.monotonic() < t0 + float(stop) + 1.0:
    now = time.monotonic()
    if now >= next_send and now < t0 + float(stop):
        pkt = struct.pack("!BBHII", 0x80, 8, seq & 0xFFFF, seq * 160, int(ssrc)) + bytes(160)
        s.sendto(pkt, (dst, int(dport)))
        seq += 1
        next_send += 0.02
    try:
        data = s.recv(2048)
    except OSError:
        continue
    if len(data) >= 12 and data[0] >> 6 == 2:
        key = "%x" % struct.unpack_from("!I", data, 8)[0]
        got[key] = got.get(key, 0) + 1
print(json.dumps({"sent": seq, "got": got}))
"""


def party(
    host: topology.Host, me: tuple[str, int], dst_port: int, ssrc: int, start: float, stop: float
) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [
            "ip",
            "netns",
            "exec",
            host.netns,
            "python3",
            "-c",
            PARTY,
            me[0],
            str(me[1]),
            topology.RELAY.addr,
            str(dst_port),
            str(ssrc),
            str(start),
            str(stop),
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def result(p: subprocess.Popen[str]) -> dict[str, object]:
    out, err = p.communicate(timeout=60)
    assert p.returncode == 0, err[-500:]
    parsed: dict[str, object] = json.loads(out)
    return parsed


def agent(cmd: str) -> str:
    return rtpp.command(cmd, port=AGENT_PORT)


def test_attacker_races_a_delayed_caller(stack: Stack) -> None:
    call = f"drill-{time.monotonic_ns()}"
    # Offer: the caller's SDP; the reply is the port the callee will send to.
    callee_sends_to = int(agent(f"U {call} {CALLER[0]} {CALLER[1]} fdrill;1").split()[0])
    # Answer: the callee's SDP; the reply is the port the caller will send to.
    caller_sends_to = int(agent(f"L {call} {CALLEE[0]} {CALLEE[1]} fdrill;1 tdrill;1").split()[0])
    assert 20000 <= caller_sends_to <= 29999 and 20000 <= callee_sends_to <= 29999
    # The offload on the switch before anyone sends: the call's 4 relay entries
    # and, written after them, its 4 relay guards.
    wait_until(
        lambda: asyncio.run(switchcfg.guard_entries(GRPC_ADDR)) >= 4,
        within=15,
        interval=0.1,
        what="the call's relay guards on the switch",
    )
    try:
        callee = party(topology.UAS, CALLEE, callee_sends_to, SSRC_CALLEE, 0.0, 9.0)
        stranger = party(topology.ATTACKER, STRANGER, caller_sends_to, SSRC_STRANGER, 0.3, 9.0)
        caller = party(topology.UAC, CALLER, caller_sends_to, SSRC_CALLER, 4.0, 9.0)
        got_callee, got_stranger, got_caller = result(callee), result(stranger), result(caller)
    finally:
        agent(f"D {call} fdrill tdrill")
    callee_in = got_callee["got"]
    caller_in = got_caller["got"]
    stranger_in = got_stranger["got"]
    assert isinstance(callee_in, dict) and isinstance(caller_in, dict)
    assert isinstance(stranger_in, dict)
    bad = f"{SSRC_STRANGER:x}"
    assert callee_in.get(bad, 0) == 0, f"the callee received the stranger's RTP: {callee_in}"
    assert caller_in.get(bad, 0) == 0, f"the caller received the stranger's RTP: {caller_in}"
    assert not stranger_in, f"the stranger received the call's media: {stranger_in}"
    # The late caller is the party: its media reaches the callee (5 s at 50/s).
    assert callee_in.get(f"{SSRC_CALLER:x}", 0) > 150, callee_in
    # And the callee's media reaches the caller once the caller is there.
    assert caller_in.get(f"{SSRC_CALLEE:x}", 0) > 150, caller_in
