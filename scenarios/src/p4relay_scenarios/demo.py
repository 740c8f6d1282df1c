"""`make demo`: the whole system on the testbed with live calls and a live summary.

PostgreSQL (scripts/pg.sh, port 55433) -> server + console -> softswitch ->
RTPProxy + rtpagent -> OpenSIPS (or Kamailio, --sip) -> SIPp calls (a UAC, and
a UAC behind the NAT) for a few minutes, with one congestion episode on the UAS port so the
console's queue and MOS charts move. Ctrl-C tears everything down.
"""

from __future__ import annotations

import argparse
import asyncio
import re
import signal
import subprocess
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from types import FrameType

import httpx
from rich.console import Console, Group
from rich.live import Live
from rich.panel import Panel
from rich.table import Table

from p4relay_scenarios import switchcfg, topology
from p4relay_scenarios.load import PROFILES, Profile, SippStats, run_uac
from p4relay_scenarios.stack import (
    GRPC_ADDR,
    ROOT,
    SERVER_URL,
    SIP_SERVERS,
    SWITCH_METRICS,
    Stack,
    StackConfig,
    sip_server_version,
)

console = Console()
PG_DIR = ROOT / "build" / "demo-pg"
PG_PORT = 55433
# ~45 calls send ~3.9 Mbit/s towards the UAS: 2.5 Mbit/s builds a queue and drops some.
CONGESTED_KBPS = 2500


@dataclass
class LiveState:
    uac: SippStats = field(default_factory=SippStats)
    nat: SippStats = field(default_factory=SippStats)
    sessions: int = 0
    active: int = 0
    offloaded: int = 0
    mos_avg: float | None = None
    switch_rtp: int = 0
    relay_entries: int = 0
    queue: str = "-"  # the UAS port's queue: depth, queueing delay, drops
    note: str = ""
    sip_server: str = ""  # name and version of the SIP server that runs


def start_pg(pg_dir: Path = PG_DIR, port: int = PG_PORT) -> str:
    """A throwaway PostgreSQL cluster (scripts/pg.sh); its database URL."""
    r = subprocess.run(
        [str(ROOT / "scripts" / "pg.sh"), "start", str(pg_dir), str(port)],
        capture_output=True,
        text=True,
        check=False,
    )
    if r.returncode != 0:
        raise SystemExit(f"PostgreSQL on port {port} did not start: {r.stderr.strip()}")
    return r.stdout.strip()


def stop_pg(pg_dir: Path = PG_DIR) -> None:
    subprocess.run([str(ROOT / "scripts" / "pg.sh"), "stop", str(pg_dir)], check=False)


def _metric(text: str, name: str) -> int:
    m = re.search(rf"^{name}(?:{{[^}}]*}})? ([0-9.e+]+)$", text, re.M)
    return int(float(m.group(1))) if m else 0


def poll_system(stack: Stack, live: LiveState, stop: threading.Event) -> None:
    api = stack.api() if stack.creds else None
    while not stop.wait(2.0):
        try:
            text = httpx.get(f"http://{SWITCH_METRICS}/metrics", timeout=2).text
            live.switch_rtp = _metric(text, "p4relay_rtp_packets_total")
            live.relay_entries = _metric(
                text, r"p4relay_table_entries\{table=\"pipe.Ingress.relay\"\}"
            )
        except httpx.HTTPError:
            pass
        if api is None:
            continue
        try:
            items = api.sessions(limit=200)
            live.sessions = len(items)
            live.active = sum(1 for s in items if s["state"] == "active")
            live.offloaded = sum(1 for s in items if s["offloaded"])
            moses = [s["mos_avg"] for s in items if s["mos_avg"] is not None]
            live.mos_avg = sum(moses) / len(moses) if moses else None
            for sw in api.switches():
                for q in api.queues(sw["id"]):
                    if q["dev_port"] != topology.UAS.port:
                        continue
                    # The newest bucket with a reading (the current one may be empty).
                    for p in reversed(q["points"]):
                        # The server reports depth in packets (Tofino) or bytes and queueing
                        # delay (softswitch); 0 is a reading too: an idle queue.
                        if p.get("depth_max_pkts") is not None:
                            live.queue = f"{p['depth_max_pkts']:.0f} pkts"
                        elif p.get("depth_bytes") is not None:
                            live.queue = f"{p['depth_bytes'] / 1000:.0f} kB"
                        else:
                            continue
                        if p.get("queue_delay_max_us") is not None:
                            live.queue += f", {p['queue_delay_max_us'] / 1000:.0f} ms"
                        live.queue += f", {p.get('drops') or 0} drops"
                        break
        except (httpx.HTTPError, KeyError):
            pass


def render(live: LiveState, stack: Stack, t0: float) -> Group:
    t = Table(show_header=True, header_style="bold")
    for c in ("", "created", "active", "ok", "failed"):
        t.add_column(c, justify="right")
    for name, st in (("UAC", live.uac), ("UAC behind NAT", live.nat)):
        t.add_row(name, str(st.created), str(st.current), str(st.successful), str(st.failed))
    s = Table.grid(padding=(0, 2))
    s.add_row("sessions in the server", str(live.sessions), "active", str(live.active))
    s.add_row(
        "offloaded to the switch",
        str(live.offloaded),
        "MOS (avg)",
        f"{live.mos_avg:.2f}" if live.mos_avg else "-",
    )
    s.add_row(
        "switch relay entries",
        str(live.relay_entries),
        "RTP packets relayed by the switch",
        str(live.switch_rtp),
    )
    s.add_row(
        "UAS port queue",
        live.queue,
        "running",
        f"{time.monotonic() - t0:.0f} s",
    )
    head = f"console: [bold]{SERVER_URL}/[/bold]   SIP server: [bold]{live.sip_server}[/bold]"
    if stack.creds:
        head += f"   login: [bold]{stack.creds.admin_user}[/bold] / [bold]{stack.creds.admin_password}[/bold]"
    return Group(Panel(head, title="p4relay demo"), t, s, live.note)


def congestion_episode(
    stack: Stack, live: LiveState, stop: threading.Event, start_s: float, length_s: float
) -> None:
    if stop.wait(start_s):
        return
    live.note = f"[yellow]congestion: UAS port shaped to {CONGESTED_KBPS} kbit/s for {length_s:.0f} s[/yellow]"
    try:
        asyncio.run(switchcfg.shape_port(GRPC_ADDR, topology.UAS.port, CONGESTED_KBPS))
        stop.wait(length_s)
    finally:
        asyncio.run(switchcfg.shape_port(GRPC_ADDR, topology.UAS.port, None))
        live.note = "congestion over: UAS port unshaped"


def main(argv: list[str]) -> int:
    p = argparse.ArgumentParser(prog="make demo", description=__doc__)
    p.add_argument("what", choices=["demo", "run"], nargs="?", default="demo")
    p.add_argument("--profile", default="demo", choices=sorted(PROFILES))
    p.add_argument(
        "--minutes",
        type=float,
        default=None,
        help="how long calls are placed (demo: 4; run: the profile's own call count)",
    )
    p.add_argument("--no-server", action="store_true", help="run without PostgreSQL/server")
    p.add_argument(
        "--sip", choices=SIP_SERVERS, default="opensips", help="the SIP server (default opensips)"
    )
    args = p.parse_args(argv)

    base = PROFILES[args.profile]
    demo = args.what == "demo"
    minutes = args.minutes if args.minutes is not None else (4.0 if demo else base.duration_s / 60)
    profile = base
    if demo or args.minutes is not None:
        calls = max(1, int(base.rate * minutes * 60))
        profile = Profile(base.name, base.rate, calls, base.hold_s, base.limit, base.about)
    nat_profile = Profile("nat", 0.2, max(1, int(0.2 * minutes * 60)), base.hold_s, 8)
    stopping = threading.Event()

    def on_signal(_sig: int, _frame: FrameType | None) -> None:
        stopping.set()

    signal.signal(signal.SIGINT, on_signal)
    signal.signal(signal.SIGTERM, on_signal)

    db = None if args.no_server else start_pg()
    stack = Stack(StackConfig(run_dir=ROOT / "build" / "demo", database_url=db, sip=args.sip))
    live = LiveState(sip_server=sip_server_version(args.sip))
    try:
        with console.status("building the testbed and starting every component..."):
            stack.up()
        console.print(
            f"[green]up[/green]: console at [bold]{SERVER_URL}/[/bold], "
            f"SIP server {live.sip_server}"
        )
        if stack.creds:
            console.print(
                f"admin login for this run: {stack.creds.admin_user} / {stack.creds.admin_password}"
            )
        console.print(
            f"{profile.name}: {profile.calls} calls at {profile.rate:g}/s, {profile.hold_s:g} s "
            f"each, ~{minutes:.1f} min ({profile.about or 'custom'}); Ctrl-C stops"
        )
        t0 = time.monotonic()
        threads = [
            threading.Thread(target=poll_system, args=(stack, live, stopping), daemon=True),
            threading.Thread(
                target=lambda: run_uac(
                    nat_profile,
                    stack.media_dir,
                    stack.cfg.run_dir / "load",
                    behind_nat=True,
                    on_tick=lambda st: setattr(live, "nat", st),
                    stop=stopping.is_set,
                    tag="nat",
                ),
                daemon=True,
            ),
        ]
        if demo:  # one congestion episode so the console's queue and MOS charts move
            # (40 s in: ~40 calls up, and a newcomer sees it within the first minute)
            threads.append(
                threading.Thread(
                    target=congestion_episode, args=(stack, live, stopping, 40.0, 30.0), daemon=True
                )
            )
        for th in threads:
            th.start()
        with Live(render(live, stack, t0), console=console, refresh_per_second=1) as view:

            def tick(st: SippStats) -> None:
                live.uac = st
                view.update(render(live, stack, t0))

            run_uac(
                profile,
                stack.media_dir,
                stack.cfg.run_dir / "load",
                on_tick=tick,
                stop=stopping.is_set,
            )
        stopping.set()
        console.print(render(live, stack, t0))
    finally:
        stopping.set()
        console.print("tearing down...")
        stack.down()
        if db:
            stop_pg()
    return 0
