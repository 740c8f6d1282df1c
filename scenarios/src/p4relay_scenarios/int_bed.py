"""INT telemetry live, from the data plane to the server: the three-switch
fabric of reroute_bed.py (its own namespaces `intl-*`, beside the reroute
bed's) with INT on, a relayed call's media traced through it, and the real
collector receiving the sink's reports.

```
 intl-uac 198.18.11.10 ─ 1 ┐          ┌ 1 ─ intl-uas 198.18.12.10
                           │ s1 ─3─3─ s2 ├ 5 ─ intl-col 198.18.95.1 (root namespace:
                           └4          4┘                 the collector's report listener)
                             1─ s3 ─2
```

s1 relays the call (UAC -> relay 198.18.10.1:20000, rewritten to relay
:20002 -> UAS :6000, the way rtpagent installs it) and is the INT source of
every relayed session (`watch_relay_sessions`), s3 a transit hop, s2 the
sink: it strips INT before the UAS and sends its Telemetry Reports by port 5
to the collector. The media first takes s1-s2; `detour` routes the UAS
subnet by s3, so the sink reports a new path (s1 by port 4, s3, s2). s1's
port towards s2 is shaped so that its queue, not only the hop's existence,
shows in the samples.

  python -m p4relay_scenarios int-live --server-url URL --token-file F [--seconds N]

runs it against a server for the console's end-to-end suite: one JSON line
per step on stdout (`ready` with the call's session key, `detour` with its
time), then media until `--seconds` pass or stdin closes.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import datetime as dt
import ipaddress
import json
import os
import select
import socket
import subprocess
import sys
import time
import urllib.request
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from p4relay_runtime.procs import free_port, softswitch_binary, stop, wait_tcp
from p4relay_switch import Endpoint, Pipeline, RelayCall, SwitchClient
from p4relay_switch import int_telemetry as it

from p4relay_scenarios import reroute_bed as bed
from p4relay_scenarios.netns import link_exists, mac_of, run
from p4relay_scenarios.topology import quiet_switch_port, tx_csum_off

ROOT = Path(__file__).resolve().parents[3]
BIN = Path(sys.executable).parent


def _host(name: str, switch: str, port: int, addr: str) -> bed.BedHost:
    return bed.BedHost(name, switch, port, addr, f"intl-{name}", f"intl-{switch}-{name}")


_UAC = _host("uac", "s1", 1, "198.18.11.10")
_XSRC = _host("xsrc", "s1", 2, "198.18.13.10")
_UAS = _host("uas", "s2", 1, "198.18.12.10")
_XDST = _host("xdst", "s2", 2, "198.18.14.10")
LAYOUT = bed.Layout(
    hosts=(_UAC, _XSRC, _UAS, _XDST),
    links=bed.BED.links,
    link_prefix="intl",
    uac=_UAC,
    uas=_UAS,
    xsrc=_XSRC,
    xdst=_XDST,
    own_hosts=("uac", "xsrc", "uas", "xdst"),
)

SWITCH_IDS = {"s1": 0x51, "s2": 0x52, "s3": 0x53}
REPORT_SWITCH, REPORT_PORT = "s2", 5
REPORT_IF = "intl-s2-col"  # s2's port 5
COLLECTOR_IF = "intl-col"  # its peer in the root namespace
COLLECTOR_ADDR, REPORT_SRC = "198.18.95.1", "198.18.95.2"
REPORT_UDP = 32766
RELAY = "198.18.10.1"
CALLER = (_UAC.addr, 5000)
RELAY_IN, RELAY_OUT = (RELAY, 20000), (RELAY, 20002)
CALLEE = (_UAS.addr, 6000)
# (switch, in, out) as the sink reports the path: its own ports from its
# report's metadata
DIRECT = (("s1", 1, 3), ("s2", 3, 1))
AROUND = (("s1", 1, 4), ("s3", 1, 2), ("s2", 4, 1))
RATE_BPS = 2_000_000  # s1's port towards s2
MEDIA_PPS = 50
# onset above anything this bed queues: reports come on path changes and each second
ONSET_NS, CLEAR_NS = 500_000_000, 250_000_000


def switch_names() -> str:
    """The collector's `int_switch_names`."""
    return ",".join(f"{sid}={name}" for name, sid in SWITCH_IDS.items())


def up() -> None:
    """The fabric's hosts and links, and the report link (idempotent)."""
    bed.up(LAYOUT)
    if not (link_exists(REPORT_IF) and link_exists(COLLECTOR_IF)):
        for i in (REPORT_IF, COLLECTOR_IF):
            if link_exists(i):
                run(["ip", "link", "del", i])
        run(["ip", "link", "add", REPORT_IF, "type", "veth", "peer", "name", COLLECTOR_IF])
    quiet_switch_port(REPORT_IF)
    tx_csum_off(None, REPORT_IF)
    run(["ip", "addr", "replace", f"{COLLECTOR_ADDR}/24", "dev", COLLECTOR_IF])
    run(["ip", "link", "set", COLLECTOR_IF, "up"])


def down() -> None:
    bed.down(LAYOUT)
    if link_exists(REPORT_IF):
        run(["ip", "link", "del", REPORT_IF], check=False)


def switch_args(name: str) -> list[str]:
    """The softswitch's port flags (and s1's shaped port)."""
    args: list[str] = []
    ports = bed.switch_ports(name, LAYOUT)
    if name == REPORT_SWITCH:
        ports[REPORT_PORT] = REPORT_IF
    for p, ifname in ports.items():
        args += ["--port", f"{p}={ifname}"]
    if name == "s1":
        args += ["--port-rate", f"{bed.link_port('s1', 's2', LAYOUT)}={RATE_BPS}"]
    return args


def _hop(name: str) -> it.IntHop:
    return it.IntHop(SWITCH_IDS[name], 1 << 20, 1 << 19, ONSET_NS, CLEAR_NS)


def relay_call() -> RelayCall:
    return RelayCall.between(
        Endpoint.of(*CALLER),
        Endpoint.of(*RELAY_IN),
        Endpoint.of(*CALLEE),
        Endpoint.of(*RELAY_OUT),
        legs=(0, 1),
        ports=(_UAC.port, bed.link_port("s1", "s2", LAYOUT)),
    )


async def program(name: str, address: str) -> None:
    """Forwarding as the reroute bed's, then this switch's INT role: s1 relays
    the call and is its source, s3 transit, s2 the sink reporting by port 5."""
    await bed.program(name, address, LAYOUT)
    async with SwitchClient(address, client_id=32) as sw:
        if name == "s1":
            p = Pipeline(sw)
            await p.add_relay_addr(RELAY, 20000, 20999)
            await p.install_call(relay_call())
            await it.watch_relay_sessions(sw)
            for peer in ("s2", "s3"):
                port = bed.link_port("s1", peer, LAYOUT)
                await it.set_role(sw, port, "transit")  # next hop id = port
                await it.set_hop(sw, port, _hop("s1"))
        elif name == "s3":
            port = bed.link_port("s3", "s2", LAYOUT)
            await it.set_role(sw, port, "transit")
            await it.set_hop(sw, port, _hop("s3"))
        else:
            await it.set_role(sw, _UAS.port, "sink")
            await it.set_report_target(
                sw,
                REPORT_PORT,
                it.ReportTarget(
                    src_mac=int(mac_of(REPORT_IF).replace(":", ""), 16),
                    dst_mac=int(mac_of(COLLECTOR_IF).replace(":", ""), 16),
                    src_addr=ipaddress.IPv4Address(REPORT_SRC),
                    dst_addr=ipaddress.IPv4Address(COLLECTOR_ADDR),
                    dst_port=REPORT_UDP,
                    switch_id=SWITCH_IDS[name],
                ),
            )


async def detour(s1_address: str) -> None:
    """s1 sends the UAS subnet by s3: the traced media's path changes."""
    async with SwitchClient(s1_address, client_id=32) as sw:
        await Pipeline(sw).add_routes(
            [(_UAS.subnet, bed.link_port("s1", "s3", LAYOUT))], replace=True
        )


def session_key() -> str:
    return "int-live@198.18.11.10;ft-int"


def session_upsert(started: dt.datetime, seq: int = 1) -> dict[str, Any]:
    """The call as rtpagent reports it: offloaded to s1, both directions' rewrites."""

    def ep(e: tuple[str, int]) -> dict[str, Any]:
        return {"addr": e[0], "port": e[1]}

    legs = [
        ("caller_to_callee", CALLER, RELAY_IN, RELAY_OUT, CALLEE),
        ("callee_to_caller", CALLEE, RELAY_OUT, RELAY_IN, CALLER),
    ]
    return {
        "session_key": session_key(),
        "seq": seq,
        "call_id": session_key().split(";")[0],
        "from_tag": "ft-int",
        "state": "active",
        "offloaded": True,
        "codec": "PCMA",
        "switch": "s1",
        "started_at": started.isoformat(),
        "answered_at": started.isoformat(),
        "legs": [
            {
                "direction": d,
                "switch_leg": i,
                "src": ep(src),
                "relay_in": ep(rin),
                "relay_out": ep(rout),
                "dst": ep(dst),
                "installed": True,
                "installed_at": started.isoformat(),
            }
            for i, (d, src, rin, rout, dst) in enumerate(legs)
        ],
    }


def post_session(server_url: str, token: str, started: dt.datetime) -> None:
    body = json.dumps(
        {
            "idempotency_key": f"int-live-{uuid.uuid4()}",
            "agent": {"name": "int-live-agent", "switch": "s1"},
            "sessions": [session_upsert(started)],
        }
    ).encode()
    req = urllib.request.Request(
        server_url + "/api/v1/ingest",
        data=body,
        headers={"Authorization": f"Bearer {token}", "Content-Type": "application/json"},
    )
    with urllib.request.urlopen(req, timeout=10) as r:
        if r.status != 200:
            raise RuntimeError(f"ingest: {r.status}")


SENDER = """
import socket, sys, time
pps = int(sys.argv[1])
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
s.bind(("{src}", {sport}))
t0, i = time.monotonic(), 0
while True:
    time.sleep(max(0.0, t0 + i / pps - time.monotonic()))
    s.sendto(b"\\x80\\x08" + i.to_bytes(2, "big") + bytes(168), ("{dst}", {dport}))
    i += 1
"""


@dataclass
class Running:
    """The bed with its switches, collector and media running."""

    addresses: dict[str, str]
    procs: list[subprocess.Popen[bytes]]


def _wait_listening(collector: subprocess.Popen[bytes], within: float = 60.0) -> None:
    """Until the collector's report listener is bound (the media's first
    reports must not go unheard): binding the same address then fails."""
    end = time.monotonic() + within
    while time.monotonic() < end:
        if collector.poll() is not None:
            raise RuntimeError(f"p4relay-collector exited with {collector.returncode}")
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
            try:
                s.bind((COLLECTOR_ADDR, REPORT_UDP))
            except OSError:
                return
        time.sleep(0.1)
    raise RuntimeError("p4relay-collector's report listener did not come up")


@contextlib.contextmanager
def running(
    server_url: str, token_file: Path, run_dir: Path, collector_interval_s: float = 0.5
) -> Iterator[Running]:
    """The bed up, its three softswitches programmed, the collector
    (`p4relay-collector`, its report listener on the report link) sending to
    the server, and the call's media flowing; all stopped and removed after."""
    run_dir.mkdir(parents=True, exist_ok=True)
    down()
    up()
    procs: list[subprocess.Popen[bytes]] = []
    addrs: dict[str, str] = {}
    try:
        for name in bed.SWITCHES:
            addr = f"127.0.0.1:{free_port()}"
            cmd = [
                str(softswitch_binary()),
                "--grpc-listen",
                addr,
                "--metrics-listen",
                f"127.0.0.1:{free_port()}",
                "--workers",
                "1",
                *switch_args(name),
            ]
            log = (run_dir / f"{name}.log").open("wb")
            procs.append(subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT))
            wait_tcp(addr, procs[-1], what=f"softswitch {name}")
            addrs[name] = addr
        for name, addr in addrs.items():
            asyncio.run(program(name, addr))
        collector_log = (run_dir / "collector.log").open("wb")
        procs.append(
            subprocess.Popen(
                [
                    str(BIN / "p4relay-collector"),
                    "--server-url",
                    server_url,
                    "--token-file",
                    str(token_file),
                    "--interval-s",
                    str(collector_interval_s),
                    "--metrics-listen",
                    "",
                    "--int-report-listen",
                    f"{COLLECTOR_ADDR}:{REPORT_UDP}",
                    "--int-switch-names",
                    switch_names(),
                ],
                stdout=collector_log,
                stderr=subprocess.STDOUT,
            )
        )
        _wait_listening(procs[-1])
        sender = SENDER.format(src=CALLER[0], sport=CALLER[1], dst=RELAY_IN[0], dport=RELAY_IN[1])
        procs.append(
            subprocess.Popen(
                ["ip", "netns", "exec", _UAC.netns, sys.executable, "-c", sender, str(MEDIA_PPS)]
            )
        )
        yield Running(addrs, procs)
    finally:
        for p in reversed(procs):
            stop(p)
        down()


def _say(**what: Any) -> None:
    print(json.dumps(what), flush=True)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        prog="python -m p4relay_scenarios int-live",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    ap.add_argument("--server-url", required=True)
    ap.add_argument("--token-file", type=Path, required=True, help="an ingest token")
    ap.add_argument("--seconds", type=float, default=120.0, help="run at most this long")
    ap.add_argument("--detour-after", type=float, default=4.0, help="seconds on the direct path")
    ap.add_argument("--run-dir", type=Path, default=ROOT / "build" / "int-live")
    a = ap.parse_args(argv)
    if os.geteuid() != 0:
        print("int-live builds network namespaces: run as root", file=sys.stderr)
        return 2
    token = a.token_file.read_text().strip()
    started = dt.datetime.now(dt.UTC)
    t0 = time.monotonic()
    with running(a.server_url, a.token_file, a.run_dir) as r:
        post_session(a.server_url, token, started)
        _say(ready=True, session_key=session_key(), started_at=started.isoformat())
        time.sleep(a.detour_after)
        asyncio.run(detour(r.addresses["s1"]))
        _say(detour=dt.datetime.now(dt.UTC).isoformat())
        while time.monotonic() - t0 < a.seconds:
            # stdin closed (the suite is done) ends the run early
            readable, _, _ = select.select([sys.stdin], [], [], 0.5)
            if readable and not sys.stdin.readline():
                break
    _say(done=True)
    return 0
