"""Agent restart with a large journal: how soon the control socket answers,
how long one reconciliation pass against RTPProxy takes, and how long the
switch entries of sessions RTPProxy lost meanwhile outlive the restart.

A journal of N sessions (default 10,000) is written as a crashed agent
leaves it, `--offloaded` of them with their entries in the software switch
(installed by an agent that then stopped; the others are held on RTPProxy,
recorded there), and RTPProxy (rtp.io, its own process) still has only
`--alive` of them (created by real `U`/`L`); the rest ended while the agent
was away. The switch routes every address to port 1, as its control plane's
bootstrap does (route port binding installs no party without a route). Then
the agent starts on that state file. Prints one table.
"""

from __future__ import annotations

import argparse
import asyncio
import concurrent.futures
import itertools
import socket
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

from differential import Peer
from harness import (
    RtpproxyProcess,
    free_port,
    free_udp_pair,
    route_all,
    settings,
    softswitch,
    wait_for,
)
from p4relay_runtime.logs import configure_logging
from p4relay_switch import Subscription, SwitchClient
from rtpagent.app import App
from rtpagent.state import Endpoint, OffloadState, Session
from rtpagent.store import Store

RTPP_PORTS = "40000-43999"
SYNTH_PORT0 = 44000  # relay ports of the sessions RTPProxy no longer has


def journalled(call: str, pa: int, pb: int, legs: list[int] | None) -> Session:
    """A complete call; offloaded (entries in the switch, each party bound to
    the port its address is routed to) when given legs, else held on RTPProxy."""
    s = Session(call, "f;1", to_tag="t;1")
    for i, (port, peer) in enumerate(((pb, 7000), (pa, 6000))):
        st = s.streams[i]
        st.port, st.laddr = port, "127.0.0.1"
        st.sdp = Endpoint(f"198.18.{2 - i}.10", peer)
    s.strong = True
    if legs:
        s.state = OffloadState.OFFLOADED
        s.legs = legs
        for st in s.streams:
            st.ingress_port = 1
    else:
        s.recording = True
        s.state = OffloadState.HELD
        s.reason = "recording"
    s.refresh_cmd = f"L {call} 198.18.2.10 7000 f;1 t;1"
    return s


async def main(n: int, alive: int, offloaded: int) -> int:
    configure_logging("error", json=False)
    with softswitch() as sw, tempfile.TemporaryDirectory(prefix="p4ra-restart-") as tmp:
        port = free_udp_pair()
        notify = free_port()
        rtpp = RtpproxyProcess(
            port + 1,
            "127.0.0.1",
            RTPP_PORTS,
            ["-T", "600", "-n", f"tcp:127.0.0.1:{notify}", "-d", "CRIT"],
        )
        rtpp.start()
        probe = SwitchClient(
            sw.address, client_id=9, subscription=Subscription(learn=False, idle_timeout=False)
        )
        await probe.connect()
        await route_all(sw.address)  # the bootstrap's routes: every address to port 1
        kw = dict(
            port=port,
            rtpproxy=f"udp:127.0.0.1:{port + 1}",
            notify_listen=f"tcp:127.0.0.1:{notify}",
            relay_ports="40000-65000",
            switch=sw.address,
            log_level="error",
            legs=2 * n + 16,
        )
        try:
            # The journal a crashed agent leaves: `alive` calls RTPProxy still has.
            store = Store(Path(tmp) / "state.sqlite")
            ctl = Peer(port + 1)
            for i in range(n):
                # Every n/offloaded-th session is on the switch, alive or not.
                legs = [2 * i + 1, 2 * i + 2] if i % (n // offloaded) == 0 else None
                if i < alive:
                    ra = await ctl.ask(f"u{i} U a{i} 198.18.1.10 6000 f;1".encode(), 2.0)
                    rb = await ctl.ask(f"l{i} L a{i} 198.18.2.10 7000 f;1 t;1".encode(), 2.0)
                    assert ra and rb, (ra, rb)
                    pb, pa = int(ra.split()[1]), int(rb.split()[1])
                    s = journalled(f"a{i}", pa, pb, legs)
                else:
                    # Unique ports for those on the switch (their guards), any for the rest.
                    p = (
                        SYNTH_PORT0 + 4 * (i // (n // offloaded))
                        if legs
                        else 60000 + 4 * (i % 1000)
                    )
                    s = journalled(f"g{i}", p, p + 2, legs)
                store.put_session(s.uid, s.to_json)
            ctl.close()
            store.close()
            # Their entries are in the switch (an agent installed them, then
            # died): put there by an agent whose RTPProxy does not answer.
            silent = App(
                settings(
                    Path(tmp),
                    **{**kw, "rtpproxy": f"udp:127.0.0.1:{free_port()}", "notify_listen": ""},
                    reply_timeout=5.0,
                )
            )
            await silent.start()

            async def relays_at_least(k: int) -> bool:
                return len(await probe.read("pipe.Ingress.relay")) >= k

            async def relays_at_most(k: int) -> bool:
                return len(await probe.read("pipe.Ingress.relay")) <= k

            on_switch = len(range(0, n, n // offloaded))
            on_switch_alive = len(range(0, alive, n // offloaded))
            await wait_for(lambda: relays_at_least(4 * on_switch), within=300.0, interval=0.5)
            await silent.stop()

            # The restart being measured.
            t0 = time.monotonic()
            app = App(settings(Path(tmp), **kw))
            first = concurrent.futures.ThreadPoolExecutor(1).submit(_first_answer, port)
            await app.start()
            t_start = time.monotonic() - t0
            t_answer = (await asyncio.wrap_future(first)) - t0
            await app.reconciled.wait()
            t_pass = time.monotonic() - t0
            await wait_for(lambda: relays_at_most(4 * on_switch_alive), within=300.0, interval=0.05)
            t_clean = time.monotonic() - t0
            left = len(app.table)
            await app.stop()
        finally:
            await probe.close()
            rtpp.stop()
    rows = [
        ("journalled sessions", f"{n:,}"),
        ("of which on the switch (4 relay entries each)", f"{on_switch:,}"),
        ("of which RTPProxy still has (on the switch)", f"{alive:,} ({on_switch_alive:,})"),
        ("start() returned after", f"{t_start:.3f} s"),
        ("control socket answered V after", f"{t_answer:.3f} s"),
        ("reconciliation pass done after", f"{t_pass:.2f} s"),
        ("lost sessions' entries gone after", f"{t_clean:.2f} s"),
        ("sessions kept", f"{left:,}"),
    ]
    w = max(len(k) for k, _ in rows)
    print(f"{'rtpagent restart':<{w}}  value")
    for k, v in rows:
        print(f"{k:<{w}}  {v}")
    return 0 if left == alive else 1


def _first_answer(port: int) -> float:
    """From another thread: ask V every 10 ms until the agent answers; when."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
        sock.settimeout(0.01)
        for n in itertools.count():
            sock.sendto(b"v%d V" % n, ("127.0.0.1", port))
            try:
                sock.recv(100)
                return time.monotonic()
            except TimeoutError:
                continue
    raise AssertionError("unreachable")


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--sessions", type=int, default=10000)
    ap.add_argument("--alive", type=int, default=500)
    ap.add_argument("--offloaded", type=int, default=2000)
    args = ap.parse_args()
    sys.exit(asyncio.run(main(args.sessions, args.alive, args.offloaded)))
