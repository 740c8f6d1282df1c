"""Whose memory a flood of control commands takes, and why: RTPProxy's
resident memory (rtp.io, its own process) before and after N datagrams of a
kind, sent straight to it or through the agent, and the agent process's (the agent runs in this process).

Kinds: the differential test's fuzz corpus (distinct cookies, most commands
refused by RTPProxy), plain `V` with distinct cookies, and `V` over 16
cookies (answered from RTPProxy's reply cache). RTPProxy keeps each answer
under its cookie for retransmissions: what grows is proportional to the
distinct cookies, whatever the commands say. Prints one table.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import re
import socket
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

from differential import corpus
from harness import RtpproxyProcess, free_udp_pair, settings
from p4relay_runtime.logs import configure_logging
from rtpagent.app import App

INFLIGHT = 16


def rss_mb(pid: int) -> float:
    with open(f"/proc/{pid}/status") as f:
        m = re.search(r"VmRSS:\s+(\d+)", f.read())
    return int(m.group(1)) / 1024 if m else 0.0


def workload(kind: str, n: int) -> list[bytes]:
    if kind == "fuzz":
        return corpus(7, n)
    if kind == "V":
        return [b"k%x V" % i for i in range(n)]
    return [b"k%x V" % (i % 16) for i in range(n)]  # "V16"


def send(port: int, dgs: list[bytes]) -> int:
    """Every datagram, INFLIGHT at a time; returns how many went unanswered."""
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.settimeout(1.0)
    lost = inflight = 0
    for d in dgs:
        s.sendto(d, ("127.0.0.1", port))
        inflight += 1
        if inflight >= INFLIGHT:
            try:
                s.recv(65536)
                inflight -= 1
            except TimeoutError:
                lost += inflight
                inflight = 0
    for _ in range(inflight):
        try:
            s.recv(65536)
        except TimeoutError:
            lost += 1
    s.close()
    return lost


async def run(kind: str, n: int, via_agent: bool, settle_s: float, tmp: Path) -> list[str]:
    port = free_udp_pair()
    rtpp = RtpproxyProcess(port + 1, "127.0.0.1", "42000-43999", ["-T", "10", "-d", "ERR"])
    rtpp.start()
    assert rtpp.proc is not None
    app: App | None = None
    try:
        target = port + 1
        if via_agent:
            cfg = settings(
                tmp,
                port=port,
                rtpproxy=f"udp:127.0.0.1:{port + 1}",
                switch="",
                notify_listen="",
                log_level="error",
            )
            app = App(cfg)
            await app.start()
            target = port
        r0, a0 = rss_mb(rtpp.proc.pid), rss_mb(os.getpid())
        t0 = time.monotonic()
        lost = await asyncio.to_thread(send, target, workload(kind, n))
        took = time.monotonic() - t0
        r1, a1 = rss_mb(rtpp.proc.pid), rss_mb(os.getpid())
        await asyncio.sleep(settle_s)
        r2 = rss_mb(rtpp.proc.pid)
    finally:
        if app is not None:
            await app.stop()
        rtpp.stop()
    via = "agent" if via_agent else "direct"
    agent = f"{a0:.0f} -> {a1:.0f}" if via_agent else ""
    return [
        kind,
        via,
        f"{n:,}",
        f"{took:.0f}",
        f"{r0:.0f}",
        f"{r1:.0f}",
        f"{r2:.0f}",
        agent,
        str(lost),
    ]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--datagrams", type=int, default=100_000)
    ap.add_argument("--settle", type=float, default=15.0, help="seconds before the last reading")
    ap.add_argument("--kinds", default="fuzz,V,V16")
    ap.add_argument("--via", default="direct,agent")
    a = ap.parse_args()
    # The agent logs each refused command; only the table belongs in the report.
    configure_logging("error", json=False)
    rows = []
    for kind in a.kinds.split(","):
        for via in a.via.split(","):
            with tempfile.TemporaryDirectory(prefix="p4ra-mem-") as tmp:
                rows.append(
                    asyncio.run(run(kind, a.datagrams, via == "agent", a.settle, Path(tmp)))
                )
    head = ["kind", "sent", "datagrams", "s", "RTPProxy MB before", "after"]
    head += [f"{a.settle:g} s later", "agent process MB", "unanswered"]
    print("| " + " | ".join(head) + " |")
    print("|" + "---|" * len(head))
    for r in rows:
        print("| " + " | ".join(r) + " |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
