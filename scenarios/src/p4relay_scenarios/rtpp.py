"""Ask RTPProxy itself (not through rtpagent) over its control socket."""

from __future__ import annotations

import subprocess

from p4relay_scenarios import topology


def command(cmd: str, port: int = 22223, netns: str = topology.RELAY.netns) -> str:
    """Send one control command from inside the relay host; returns the reply body."""
    # A fresh cookie each time: RTPProxy answers a repeated cookie from its reply cache.
    code = (
        "import os,socket,sys;s=socket.socket(socket.AF_INET,socket.SOCK_DGRAM);s.settimeout(2);"
        "c=os.urandom(6).hex().encode();"
        f"s.sendto(c + b' ' + sys.argv[1].encode(),('127.0.0.1',{port}));"
        "r=s.recv(65536).decode();assert r.startswith(c.decode()+' '),r;"
        "print(r.split(' ',1)[1].strip())"
    )
    r = subprocess.run(
        ["ip", "netns", "exec", netns, "python3", "-c", code, cmd],
        capture_output=True,
        text=True,
        timeout=10,
        check=False,
    )
    if r.returncode != 0:
        raise RuntimeError(f"RTPProxy did not answer {cmd!r}: {r.stderr.strip()[-300:]}")
    return r.stdout.strip()


def stats(*names: str, port: int = 22223) -> dict[str, int]:
    """RTPProxy's `G` counters by name (e.g. npkts_rcvd, npkts_relayed, nsess_created)."""
    reply = command("G " + " ".join(names), port=port)
    values = reply.split()
    if len(values) != len(names) or not all(v.lstrip("-").isdigit() for v in values):
        raise RuntimeError(f"unexpected reply to G: {reply!r}")
    return dict(zip(names, (int(v) for v in values), strict=True))
