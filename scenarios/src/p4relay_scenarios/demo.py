"""`make demo`: the whole system on the testbed with live calls and a live summary.

PostgreSQL (scripts/pg.sh, port 55433) -> server + console -> software switch ->
RTPProxy + rtpagent -> OpenSIPS (or Kamailio, --sip) -> SIPp calls (a UAC, and
a UAC behind the NAT) for a few minutes, with one congestion episode.

By default the switch is the three-switch fabric (demo_fabric.py): the calls
cross s1-s2, the bottleneck, with iRED on it, INT on every call and reroute
armed; the episode is cross traffic over s1-s2, and the summary line says what
the switches did (the reroute, the calls it moved, the worst MOS, iRED's drops).
`--plain` runs the single-switch relay demo instead, its episode a shaped UAS
port. `--ipv6` places the UAC's calls over IPv6 (the testbed is dual stack)
while the UAC behind the NAT calls over IPv4: both families side by side, the
view counting the IPv6 calls and those the switch relays (on the fabric,
IPv6 calls cross the bottleneck and are moved as the IPv4 ones; INT traces
IPv4 only). Ctrl-C ends the calls early; the summary follows, then the
teardown.
"""

from __future__ import annotations

import argparse
import asyncio
import datetime as dt
import json
import re
import signal
import subprocess
import sys
import threading
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from types import FrameType
from typing import Any, Literal

import httpx
from rich.console import Console, Group
from rich.live import Live
from rich.panel import Panel
from rich.table import Table

from p4relay_scenarios import demo_fabric, switchcfg, topology
from p4relay_scenarios.api import ServerApi
from p4relay_scenarios.load import PROFILES, Profile, SippStats, run_uac
from p4relay_scenarios.procs import StartError
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

console = Console()  # --json: stderr (stdout carries the JSON lines)
PG_DIR = ROOT / "build" / "demo-pg"
PG_PORT = 55433
# --plain: ~45 calls send ~3.9 Mbit/s towards the UAS: 2.5 Mbit/s builds a queue and drops some.
CONGESTED_KBPS = 2500
CONGESTION_AT_S, CONGESTION_FOR_S = 40.0, 30.0  # ~40 calls up, within a newcomer's first minute


@dataclass
class LiveState:
    uac: SippStats = field(default_factory=SippStats)
    nat: SippStats = field(default_factory=SippStats)
    sessions: int = 0
    active: int = 0
    offloaded: int = 0
    v6_sessions: int = 0  # sessions whose caller is on IPv6 (`[addr]:port`)
    v6_offloaded: int = 0
    mos_avg: float | None = None
    mos_min: float | None = None  # the worst of the active calls
    switch_rtp: int = 0
    relay_entries: int = 0
    queue: str = "-"  # the watched port's queue: depth, queueing delay, drops
    reroute: str = "-"  # the last reroute event
    reroute6: str = "-"  # the last reroute of the UAS's IPv6 prefix (--ipv6)
    int_path: str = "-"  # the path INT last reported for the calls' media
    ired: str = "-"  # iRED's drops and spared packets on the bottleneck
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


def _queue_text(points: list[dict[str, Any]]) -> str | None:
    """The newest bucket with a reading (the current one may be empty)."""
    for p in reversed(points):
        # The server reports depth in packets (Tofino) or bytes and queueing
        # delay (softswitch); 0 is a reading too: an idle queue.
        if p.get("depth_max_pkts") is not None:
            text = f"{p['depth_max_pkts']:.0f} pkts"
        elif p.get("depth_bytes") is not None:
            text = f"{p['depth_bytes'] / 1000:.0f} kB"
        else:
            continue
        if p.get("queue_delay_max_us") is not None:
            text += f", {p['queue_delay_max_us'] / 1000:.0f} ms"
        return text + f", {p.get('drops') or 0} drops"
    return None


def poll_sessions(api: ServerApi, live: LiveState, since: dt.datetime) -> None:
    """Every session of the run (every page), the active ones' MOS."""
    items = api.all_sessions(started_from=since.isoformat())
    live.sessions = len(items)
    active = [s for s in items if s["state"] == "active"]
    live.active = len(active)
    live.offloaded = sum(1 for s in items if s["offloaded"])
    v6 = [s for s in items if is_v6(s)]
    live.v6_sessions = len(v6)
    live.v6_offloaded = sum(1 for s in v6 if s["offloaded"])
    moses = [s["mos_avg"] for s in active if s["mos_avg"] is not None]
    live.mos_avg = sum(moses) / len(moses) if moses else None
    worst = [s["mos_min"] for s in active if s["mos_min"] is not None]
    live.mos_min = min(worst) if worst else None


def is_v6(session: dict[str, Any]) -> bool:
    """A session whose media is IPv6: the server writes its endpoints `[addr]:port`."""
    return str(session.get("caller") or "").startswith("[")


def v6_text(live: LiveState) -> str:
    return f"{live.v6_sessions} calls, {live.v6_offloaded} relayed by the switch"


def poll_fabric(api: ServerApi, live: LiveState, since: dt.datetime) -> None:
    """The congestion features as the server saw them: the last reroute, the
    calls' INT path, iRED's counts on the bottleneck."""
    iso = since.isoformat()
    reroutes = api.events_since("reroute", iso)
    v6 = demo_fabric.v6_prefix()
    for attr, events in (
        ("reroute", reroutes),
        ("reroute6", [e for e in reroutes if e["payload"].get("flow") == v6]),
    ):
        if events:
            last = max(events, key=lambda e: e["ts"])
            at = (dt.datetime.fromisoformat(last["ts"]) - since).total_seconds()
            what = last.get("message") or last["payload"].get("direction")
            setattr(live, attr, f"{what} at {at:.0f} s")
    paths = api.paths(demo_fabric.LAYOUT.uas.addr, since=iso)
    if paths:
        live.int_path = demo_fabric.path_text(max(paths, key=lambda p: p["ts"]))
    drops = spared = 0
    for e in api.events_since("ired_drop", iso):
        if e["payload"].get("dev_port") == demo_fabric.bottleneck_port():
            drops += int(e["payload"].get("drops") or 0)
            spared += int(e["payload"].get("spared") or 0)
    live.ired = f"{drops} dropped, {spared} of the calls' spared"


def poll_system(
    stack: Stack,
    live: LiveState,
    stop: threading.Event,
    since: dt.datetime,
    *,
    queue_port: int,
    fabric: bool,
) -> None:
    api = stack.api() if stack.creds else None
    while not stop.wait(2.0):
        try:
            text = httpx.get(f"http://{SWITCH_METRICS}/metrics", timeout=2).text
            live.switch_rtp = _metric(text, "p4relay_rtp_packets_total")
            live.relay_entries = sum(
                _metric(text, rf"p4relay_table_entries\{{table=\"pipe.Ingress.{t}\"\}}")
                for t in ("relay", "relay6")
            )
        except httpx.HTTPError:
            pass
        if api is None:
            continue
        try:
            poll_sessions(api, live, since)
            for sw in api.switches():
                if sw["name"] != stack.cfg.switch_name:
                    continue
                for q in api.queues(sw["id"]):
                    if q["dev_port"] == queue_port:
                        live.queue = _queue_text(q["points"]) or live.queue
            if fabric:
                poll_fabric(api, live, since)
        except (httpx.HTTPError, KeyError):
            pass


def render(live: LiveState, stack: Stack, t0: float, *, fabric: bool, ipv6: bool = False) -> Group:
    t = Table(show_header=True, header_style="bold")
    for c in ("", "created", "active", "ok", "failed"):
        t.add_column(c, justify="right")
    uac = "UAC (IPv6)" if ipv6 else "UAC"
    for name, st in ((uac, live.uac), ("UAC behind NAT", live.nat)):
        t.add_row(name, str(st.created), str(st.current), str(st.successful), str(st.failed))
    s = Table.grid(padding=(0, 2))
    s.add_row("sessions in the server", str(live.sessions), "active", str(live.active))
    s.add_row(
        "offloaded to the switch",
        str(live.offloaded),
        "MOS avg / worst (active)",
        f"{live.mos_avg:.2f} / {live.mos_min:.2f}"
        if live.mos_avg is not None and live.mos_min is not None
        else "-",
    )
    s.add_row(
        "switch relay entries",
        str(live.relay_entries),
        "RTP packets relayed by the switch",
        str(live.switch_rtp),
    )
    where = f"s1→s2 queue (port {demo_fabric.bottleneck_port()})" if fabric else "UAS port queue"
    s.add_row(where, live.queue, "running", f"{time.monotonic() - t0:.0f} s")
    if ipv6:
        s.add_row("over IPv6", v6_text(live), *(("IPv6 reroute", live.reroute6) if fabric else ()))
    if fabric:
        s.add_row("calls' INT path", live.int_path, "iRED on s1→s2", live.ired)
        s.add_row("last reroute", live.reroute, "", "")
    head = f"console: [bold]{SERVER_URL}/[/bold]   SIP server: [bold]{live.sip_server}[/bold]"
    if stack.creds:
        head += f"   login: [bold]{stack.creds.admin_user}[/bold] / [bold]{stack.creds.admin_password}[/bold]"
    return Group(Panel(head, title="p4relay demo"), t, s, live.note)


def say(**what: Any) -> None:
    """--json: one JSON line on stdout per step."""
    print(json.dumps(what, default=_json_value), flush=True)


def _json_value(v: object) -> str:
    return v.isoformat() if isinstance(v, dt.datetime) else str(v)


def shaped_episode(live: LiveState, stop: threading.Event, start_s: float, length_s: float) -> None:
    """--plain: the UAS port shaped below the calls' load for a while."""
    if stop.wait(start_s):
        return
    live.note = f"[yellow]congestion: UAS port shaped to {CONGESTED_KBPS} kbit/s for {length_s:.0f} s[/yellow]"
    try:
        asyncio.run(switchcfg.shape_port(GRPC_ADDR, topology.UAS.port, CONGESTED_KBPS))
        stop.wait(length_s)
    finally:
        asyncio.run(switchcfg.shape_port(GRPC_ADDR, topology.UAS.port, None))
        live.note = "congestion over: UAS port unshaped"


def cross_episode(
    cross: demo_fabric.CrossTraffic,
    live: LiveState,
    stop: threading.Event,
    start_s: float,
    json_lines: bool,
) -> None:
    """Fabric: cross traffic over s1-s2 at twice its rate for a while."""
    if stop.wait(start_s):
        return
    failed: str | None = None
    try:
        cross.start()
    except StartError as e:
        failed = str(e)
    else:
        live.note = (
            f"[yellow]congestion: {cross.rate_bps / 1e6:g} Mbit/s of cross traffic over s1→s2 "
            f"({demo_fabric.RATE_BPS / 1e6:g} Mbit/s) for {cross.seconds:.0f} s[/yellow]"
        )
        if json_lines:
            say(congestion=cross.started, rate_bps=cross.rate_bps, seconds=cross.seconds)
        end = time.monotonic() + cross.seconds
        while failed is None and not stop.wait(min(1.0, max(0.0, end - time.monotonic()))):
            if time.monotonic() >= end:
                break
            failed = cross.failure()
    finally:
        cross.stop()
    if failed:
        live.note = f"[red]cross traffic failed: {failed}[/red]"
        if json_lines:
            say(cross_traffic_failed=failed)
        return
    live.note = "congestion over: cross traffic stopped"
    if json_lines:
        say(congestion_over=dt.datetime.now(dt.UTC))


def stdin_closed(stop: threading.Event) -> None:
    """--json: the caller closing our stdin ends the calls early, as Ctrl-C does."""
    while sys.stdin.readline():
        pass
    stop.set()


def plain_summary(api: ServerApi, since: dt.datetime) -> str:
    items = api.all_sessions(started_from=since.isoformat())
    moses = [s["mos_min"] for s in items if s["mos_min"] is not None]
    worst = f", worst MOS {min(moses):.1f}" if moses else ""
    offloaded = sum(1 for s in items if s["offloaded"])
    return f"{len(items)} sessions, {offloaded} offloaded to the switch{worst}"


def v6_summary(
    api: ServerApi, since: dt.datetime, cross: demo_fabric.CrossTraffic | None = None
) -> str:
    """--ipv6: the IPv6 calls of the run, how many the switch relayed, their
    MOS and worst sample; on the fabric, what s1 did with the UAS's IPv6
    prefix in the episode (its own queue delay moves it: INT traces IPv4 only)."""
    v6 = [s for s in api.all_sessions(started_from=since.isoformat()) if is_v6(s)]
    offloaded = sum(1 for s in v6 if s["offloaded"])
    moses = [s["mos_avg"] for s in v6 if s["mos_avg"] is not None]
    mos = f", MOS {sum(moses) / len(moses):.1f} (mean)" if moses else ""
    worst = [s["mos_min"] for s in v6 if s["mos_min"] is not None]
    if worst:
        mos += f", worst sample {min(worst):.1f}"
    line = f"over IPv6: {len(v6)} sessions, {offloaded} offloaded{mos}"
    if cross is not None:
        prefix = demo_fabric.v6_prefix()
        moves = demo_fabric.prefix_moves(api, since, cross, prefix)
        line += f", {prefix} {moves or 'not moved'}"
    return line


def main(argv: list[str]) -> int:
    p = argparse.ArgumentParser(
        prog="make demo", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("what", choices=["demo", "run"], nargs="?", default="demo")
    p.add_argument("--profile", default="demo", choices=sorted(PROFILES))
    p.add_argument(
        "--minutes",
        type=float,
        default=None,
        help="how long calls are placed (demo: 4; run: the profile's own call count)",
    )
    p.add_argument(
        "--duration",
        type=float,
        default=None,
        metavar="SECONDS",
        help="how long calls are placed, in seconds (instead of --minutes)",
    )
    p.add_argument(
        "--plain",
        action="store_true",
        help="the single-switch relay demo (its episode: the UAS port shaped)",
    )
    p.add_argument(
        "--congestion-at",
        type=float,
        default=CONGESTION_AT_S,
        metavar="SECONDS",
        help=f"the episode's start after the first call (default {CONGESTION_AT_S:g})",
    )
    p.add_argument(
        "--congestion-for",
        type=float,
        default=CONGESTION_FOR_S,
        metavar="SECONDS",
        help=f"the episode's length (default {CONGESTION_FOR_S:g})",
    )
    p.add_argument(
        "--json",
        action="store_true",
        help="JSON lines on stdout (ready, congestion, summary) instead of the live view; "
        "closing stdin ends the calls early",
    )
    p.add_argument(
        "--ipv6",
        action="store_true",
        help="mixed families: the UAC calls over IPv6, the UAC behind NAT over IPv4 "
        "(the console and the summary show the IPv6 calls)",
    )
    p.add_argument("--no-server", action="store_true", help="run without PostgreSQL/server")
    p.add_argument(
        "--sip", choices=SIP_SERVERS, default="opensips", help="the SIP server (default opensips)"
    )
    args = p.parse_args(argv)
    launched = time.monotonic()
    global console
    if args.json:
        console = Console(stderr=True)
    if args.duration is not None and args.minutes is not None:
        p.error("--duration and --minutes: give one")
    if args.duration is not None:
        args.minutes = args.duration / 60
    if args.minutes is not None and args.minutes <= 0:
        p.error("the calls' time must be positive")
    if args.congestion_at < 0 or args.congestion_for <= 0:
        p.error("--congestion-at must be >= 0 and --congestion-for > 0")

    base = PROFILES[args.profile]
    demo = args.what == "demo"
    fabric = demo and not args.plain
    if fabric and args.no_server:
        p.error(
            "the fabric demo tells what happened from the server: drop --no-server or add --plain"
        )
    if fabric:
        demo_fabric.check_tools()
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
    run_dir = ROOT / "build" / "demo"
    cfg = (
        demo_fabric.stack_config(run_dir, db, args.sip)
        if fabric
        else StackConfig(run_dir=run_dir, database_url=db, sip=args.sip)
    )
    stack = Stack(cfg)
    live = LiveState(sip_server=sip_server_version(args.sip))
    cross = demo_fabric.CrossTraffic(args.congestion_for) if fabric else None
    try:
        with console.status("building the testbed and starting every component..."):
            if fabric:
                demo_fabric.up(stack)
            else:
                stack.up()
        up_s = time.monotonic() - launched
        console.print(
            f"[green]up[/green] in {up_s:.0f} s: console at [bold]{SERVER_URL}/[/bold], "
            f"SIP server {live.sip_server}"
            + (", switches s1, s2, s3 (iRED, INT, reroute on)" if fabric else "")
        )
        if stack.creds:
            console.print(
                f"admin login for this run: {stack.creds.admin_user} / {stack.creds.admin_password}"
            )
        console.print(
            f"{profile.name}: {profile.calls} calls at {profile.rate:g}/s, {profile.hold_s:g} s "
            f"each, ~{minutes:.1f} min ({profile.about or 'custom'}); Ctrl-C stops"
        )
        run_start = dt.datetime.now(dt.UTC)
        if args.json:
            say(
                ready=True,
                console=f"{SERVER_URL}/",
                user=stack.creds.admin_user if stack.creds else None,
                password=stack.creds.admin_password if stack.creds else None,
                fabric=fabric,
                up_s=round(up_s, 1),
                started_at=run_start,
            )
            threading.Thread(target=stdin_closed, args=(stopping,), daemon=True).start()
        t0 = time.monotonic()
        queue_port = demo_fabric.bottleneck_port() if fabric else topology.UAS.port
        threads = [
            threading.Thread(
                target=poll_system,
                args=(stack, live, stopping, run_start),
                kwargs={"queue_port": queue_port, "fabric": fabric},
                daemon=True,
            ),
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
        if cross is not None:
            threads.append(
                threading.Thread(
                    target=cross_episode,
                    args=(cross, live, stopping, args.congestion_at, args.json),
                    daemon=True,
                )
            )
        elif demo:  # one congestion episode so the console's queue and MOS charts move
            threads.append(
                threading.Thread(
                    target=shaped_episode,
                    args=(live, stopping, args.congestion_at, args.congestion_for),
                    daemon=True,
                )
            )
        for th in threads:
            th.start()
        family: Literal[4, 6] = 6 if args.ipv6 else 4
        if args.json:
            run_uac(
                profile,
                stack.media_dir,
                stack.cfg.run_dir / "load",
                on_tick=lambda st: setattr(live, "uac", st),
                stop=stopping.is_set,
                family=family,
            )
        else:
            with Live(
                render(live, stack, t0, fabric=fabric, ipv6=args.ipv6),
                console=console,
                refresh_per_second=1,
            ) as view:

                def tick(st: SippStats) -> None:
                    live.uac = st
                    view.update(render(live, stack, t0, fabric=fabric, ipv6=args.ipv6))

                run_uac(
                    profile,
                    stack.media_dir,
                    stack.cfg.run_dir / "load",
                    on_tick=tick,
                    stop=stopping.is_set,
                    family=family,
                )
        stopping.set()
        if cross is not None:
            cross.stop()
        if not args.json:
            console.print(render(live, stack, t0, fabric=fabric, ipv6=args.ipv6))
        if stack.creds is not None:
            # the agent's last reports and the collector's last events land within a flush or two
            time.sleep(3.0)
            api = stack.api()
            try:
                if fabric:
                    summary = demo_fabric.summarise(api, run_start, cross)
                    line = summary.line()
                    if args.json:
                        say(summary=line, **asdict(summary))
                else:
                    line = plain_summary(api, run_start)
                    if args.json:
                        say(summary=line)
                if args.ipv6:
                    v6_line = v6_summary(api, run_start, cross)
                    line = f"{line}; {v6_line}"
                    if args.json:
                        say(summary_ipv6=v6_line)
            finally:
                api.close()
            console.print(f"[bold]summary[/bold]: {line}")
    finally:
        stopping.set()
        if cross is not None:
            cross.stop()
        console.print("tearing down...")
        if fabric:
            demo_fabric.down(stack)
        else:
            stack.down()
        if db:
            stop_pg()
        if args.json:
            say(done=True)
    return 0
