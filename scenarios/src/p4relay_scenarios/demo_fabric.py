"""The congestion half of `make demo`: the three-switch fabric (reroute_bed.py,
`STACK` layout) under the whole stack, with the switch features that keep
media healthy switched on, one congestion episode, and what happened told
from the server's data.

```
 relay, UAC, NAT ─ s1 ─7────7─ s2 ─ UAS          s1-s2: the bottleneck (RATE_BPS),
            xsrc ─┘ 8          8 └─ xdst                iRED on s1's port 7
                     \\        /    9 ── p4r-col (the collector's INT report listener)
                      1─ s3 ─2
```

- iRED on s1's port 7 (the bottleneck): cross traffic is dropped early,
  offloaded calls' media is spared.
- INT on every offloaded call: s1 is the source of every relayed session,
  s1 and s3 transit hops, s2 the sink reporting to the collector by port 9.
- Reroute armed on s1: the UAS subnet watched on port 7 with the backup next
  hop by s3; the data plane moves it when the queue's delay stays over t_q,
  and the control plane moves it back once the primary stayed clear.
- IPv6 (the hosts are dual stack; `make demo ARGS=--ipv6`): routed as IPv4,
  over the bottleneck; s1 watches the UAS's IPv6 prefix too (reroute_watch6)
  and moves it by s3 on its own delay (INT traces IPv4 only).

The episode is UDP cross traffic (iperf3, xsrc -> xdst) at CROSS times the
bottleneck's rate. `summarise` reads the server afterwards (every session,
every page) and `Summary.line` says in one line what the switches did.
"""

from __future__ import annotations

import datetime as dt
import re
import statistics
import subprocess
import time
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any

import httpx

from p4relay_scenarios import reroute_bed as bed
from p4relay_scenarios import topology
from p4relay_scenarios.api import ServerApi
from p4relay_scenarios.netns import link_exists, mac_of, run
from p4relay_scenarios.procs import StartError
from p4relay_scenarios.stack import (
    FABRIC_SWITCHES,
    GRPC_ADDR,
    SERVER_URL,
    VENV_BIN,
    SipServer,
    Stack,
    StackConfig,
    toml_tables,
)
from p4relay_scenarios.topology import quiet_switch_port, tx_csum_off

LAYOUT = bed.STACK
NAMES = ("s1", "s2", "s3")
GRPC = {"s1": GRPC_ADDR, **{name: grpc for name, (grpc, _) in FABRIC_SWITCHES.items()}}
SWITCH_IDS = {"s1": 0x51, "s2": 0x52, "s3": 0x53}
CONTROLPLANE_METRICS = {"s1": "127.0.0.1:9104", "s2": "127.0.0.1:9105", "s3": "127.0.0.1:9106"}

# s1-s2 carries ~45 calls (~3.9 Mbit/s towards the UAS) at half its rate; the
# cross traffic alone is twice its rate.
RATE_BPS = 8_000_000
QUEUE_PKTS = 256
CROSS = 2.0
# iRED on the bottleneck, depths in 1514-byte packets: minThsld 64/2 - 16 = 16
# (24 ms at RATE_BPS), maxThsld 2 x 16 = 32 (48 ms).
IRED = {"max_len_queue": 64, "n_drop": 16}
# Reroute: the calls' packets over t_q for m packets in a row move them by s3
# (t_q well above what the calls' own bursts queue on a busy host); back after
# the primary stayed clear for HOLD_MS.
T_Q_US = 50_000.0
M = 2
HOLD_MS = 8_000
# INT hop thresholds (the sink reports a flow's onset and clear, its path changes,
# and each flow once a second): queue depth at dequeue, 250 cells = 20 ms and 62
# cells = 5 ms at RATE_BPS (hop latency stops at 262 us on Tofino 1: not used).
INT_ONSET_CELLS, INT_CLEAR_CELLS = 250, 62

# s2's report port and the link to the collector's listener in the root namespace.
REPORT_PORT = 9
REPORT_IF = "p4r-s2-col"
COLLECTOR_IF = "p4r-col"
COLLECTOR_ADDR, REPORT_SRC = "198.18.96.1", "198.18.96.2"
REPORT_UDP = 32766


def bottleneck_port() -> int:
    return LAYOUT.bottleneck[1]


def backup_port() -> int:
    return LAYOUT.backup_nexthop


def stack_config(run_dir: Path, database_url: str | None, sip: SipServer) -> StackConfig:
    """The stack on the fabric, s1 named as the paths show it, its bottleneck
    at RATE_BPS, s2's report port, the collector hearing the INT reports; the
    switches' control planes (`control_plane`) write their routes."""
    names = ",".join(f"{sid:#x}={name}" for name, sid in SWITCH_IDS.items())
    return StackConfig(
        run_dir=run_dir,
        database_url=database_url,
        sip=sip,
        fabric=True,
        fabric_routes=False,
        switch_name="s1",
        switch_args=[
            "--port-rate",
            f"{bottleneck_port()}={RATE_BPS}",
            "--queue-depth",
            str(QUEUE_PKTS),
        ],
        fabric_ports={"s2": {REPORT_PORT: REPORT_IF}},
        collector_args=[
            "--int-report-listen",
            f"{COLLECTOR_ADDR}:{REPORT_UDP}",
            "--int-switch-names",
            names,
        ],
    )


def report_link_up() -> None:
    """s2's port towards the collector (a veth whose root-namespace end holds
    the listener's address); idempotent."""
    if not (link_exists(REPORT_IF) and link_exists(COLLECTOR_IF)):
        for i in (REPORT_IF, COLLECTOR_IF):
            if link_exists(i):
                run(["ip", "link", "del", i])
        run(["ip", "link", "add", REPORT_IF, "type", "veth", "peer", "name", COLLECTOR_IF])
    quiet_switch_port(REPORT_IF)
    tx_csum_off(None, REPORT_IF)
    run(["ip", "addr", "replace", f"{COLLECTOR_ADDR}/24", "dev", COLLECTOR_IF])
    run(["ip", "link", "set", COLLECTOR_IF, "up"])


def report_link_down() -> None:
    if link_exists(REPORT_IF):
        run(["ip", "link", "del", REPORT_IF], check=False)


def _hop(port: int) -> dict[str, object]:
    return {
        "port": port,
        "onset_cells": INT_ONSET_CELLS,
        "clear_cells": INT_CLEAR_CELLS,
    }


def _nexthops(name: str) -> list[dict[str, object]]:
    """One next hop per port (id = port), with its INT role: towards another
    switch of the fabric transit, towards the UAS (s2) the sink."""
    out: list[dict[str, object]] = []
    peers = {bed.link_port(name, peer, LAYOUT) for peer in NAMES if peer != name}
    for port, ifname in bed.switch_ports(name, LAYOUT).items():
        hop: dict[str, object] = {
            "id": port,
            "port": port,
            "src_mac": mac_of(ifname),
            "dst_mac": bed.peer_mac(name, port, LAYOUT),
        }
        if port in peers:
            hop["int_role"] = "transit"
        elif name == "s2" and port == LAYOUT.uas.port:
            hop["int_role"] = "sink"
        out.append(hop)
    return out


def v6_nexthop(name: str, host: bed.BedHost) -> int:
    """The port `name` routes `host`'s IPv6 prefix to: its IPv4 one. IPv6
    calls cross the bottleneck too; s1 watches the UAS's IPv6 prefix
    (reroute_watch6) and moves it by s3 as it moves the IPv4 one, and iRED
    there spares SIP (CS3/CS5, UDP 5060/5061) beside the media."""
    return bed.routes(name, LAYOUT)[host.subnet]


def v6_watch(ipv4_watch: dict[str, object]) -> dict[str, object]:
    """s1's watch of the UAS's IPv6 prefix: the IPv4 watch's class, primary
    and backup, its own slot (the next one)."""
    slot = ipv4_watch["slot"]
    assert isinstance(slot, int)
    return ipv4_watch | {"prefix": v6_prefix(), "slot": slot + 1}


def _routes(name: str) -> list[dict[str, object]]:
    """reroute_bed's routes, and the dual-stack hosts' IPv6 prefixes
    (`v6_nexthop`; the cross-traffic hosts are IPv4 only)."""
    v4 = bed.routes(name, LAYOUT)
    out: list[dict[str, object]] = [{"prefix": p, "nexthop": port} for p, port in v4.items()]
    v6 = {h.name: h.v6.subnet for h in topology.HOSTS}
    out += [
        {"prefix": v6[h.name], "nexthop": v6_nexthop(name, h)} for h in LAYOUT.hosts if h.name in v6
    ]
    return out


def controlplane_config(
    name: str, server_url: str, token_file: Path
) -> dict[str, dict[str, object]]:
    """One switch's `p4relay-controlplane` configuration (TOML tables): its
    next hops and routes (reroute_bed's), INT, and on s1 iRED and reroute."""
    cp: dict[str, object] = {
        "switch": name,
        "grpc_address": GRPC[name],
        "metrics_listen": CONTROLPLANE_METRICS[name],
        "server_url": server_url,
        "token_file": str(token_file),
        "reconcile_interval_s": 5.0,
        "nexthops": _nexthops(name),
        "routes": _routes(name),
    }
    tables: dict[str, dict[str, object]] = {"controlplane": cp}
    if name == "s1":
        cp["ired"] = [{"port": bottleneck_port(), **IRED}]
        rr = bed.reroute_config(GRPC[name], t_q_us=T_Q_US, m=M, hold_ms=HOLD_MS, layout=LAYOUT)
        watches = rr["watch"]
        assert isinstance(watches, list)
        rr["watch"] = [*watches, v6_watch(watches[0])]
        tables["controlplane.reroute"] = {
            k: v for k, v in rr.items() if k not in ("switch", "grpc_address")
        }
        tables["controlplane.int"] = {
            "switch_id": SWITCH_IDS[name],
            "calls": "all",
            "hops": [_hop(bed.link_port("s1", peer, LAYOUT)) for peer in ("s2", "s3")],
        }
    elif name == "s3":
        tables["controlplane.int"] = {
            "switch_id": SWITCH_IDS[name],
            "calls": "none",
            "hops": [_hop(bed.link_port("s3", "s2", LAYOUT))],
        }
    else:
        tables["controlplane.int"] = {"switch_id": SWITCH_IDS[name], "calls": "none"}
        tables["controlplane.int.report"] = {
            "port": REPORT_PORT,
            "src_mac": mac_of(REPORT_IF),
            "dst_mac": mac_of(COLLECTOR_IF),
            "src_addr": REPORT_SRC,
            "dst_addr": COLLECTOR_ADDR,
            "dst_port": REPORT_UDP,
        }
    return tables


def control_plane(stack: Stack) -> None:
    """`p4relay-controlplane` on each switch, its configuration written into
    the run; returns once each has applied it (its `config_applied` line)."""
    if stack.creds is None:
        raise StartError("the fabric demo's control planes report to the server: it must run")
    token_file = stack.cfg.run_dir / "controlplane.token"
    token_file.write_text(stack.creds.ingest_token)
    token_file.chmod(0o600)
    for name in NAMES:
        cfg = stack.cfg.run_dir / f"controlplane-{name}.toml"
        cfg.write_text(toml_tables(controlplane_config(name, SERVER_URL, token_file)))
        proc = f"controlplane-{name}"
        stack.sup.start(proc, [str(VENV_BIN / "p4relay-controlplane"), "--config", str(cfg)])
    for name in NAMES:
        stack.sup.wait_ready(
            f"controlplane-{name}", partial(_applied, name), 60, "configuration applied"
        )


def _applied(name: str) -> bool:
    """The daemon is connected and has been over the switch once (its /metrics)."""
    try:
        text = httpx.get(f"http://{CONTROLPLANE_METRICS[name]}/metrics", timeout=1).text
    except httpx.HTTPError:
        return False
    connected = re.search(r"^p4relay_controlplane_switch_connected 1\.0$", text, re.M)
    passes = re.findall(
        r'^p4relay_controlplane_reconciles_total\{result="(?:clean|repaired)"\} ([0-9.e+]+)$',
        text,
        re.M,
    )
    return connected is not None and sum(float(n) for n in passes) >= 1


def up(stack: Stack) -> None:
    """The stack on the fabric with every congestion feature on."""
    stack.lock()
    report_link_up()
    stack.up()
    control_plane(stack)


def down(stack: Stack) -> None:
    stack.down()
    report_link_down()


class CrossTraffic:
    """iperf3 UDP from xsrc to xdst over the bottleneck for `seconds`."""

    def __init__(self, seconds: float, multiple: float = CROSS) -> None:
        self.seconds = seconds
        self.rate_bps = int(multiple * RATE_BPS)
        self.started: dt.datetime | None = None
        self.server: subprocess.Popen[bytes] | None = None
        self.client: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        ns = ["ip", "netns", "exec"]
        self.server = subprocess.Popen(
            [*ns, LAYOUT.xdst.netns, "iperf3", "-s", "-1", "-B", LAYOUT.xdst.addr],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        # The client is refused until the server listens (a probe connection
        # would be the one-off server's one client: look at its socket instead).
        deadline = time.monotonic() + 10
        while not self._listening():
            if self.server.poll() is not None or time.monotonic() > deadline:
                raise StartError("iperf3's server in the cross-traffic sink did not start")
            time.sleep(0.05)
        client = [*ns, LAYOUT.xsrc.netns, "iperf3", "-c", LAYOUT.xdst.addr, "-u"]
        client += ["-b", str(self.rate_bps), "-l", "1000", "-t", str(max(1, round(self.seconds)))]
        self.started = dt.datetime.now(dt.UTC)
        self.client = subprocess.Popen(client, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)

    def _listening(self) -> bool:
        out = subprocess.run(
            ["ip", "netns", "exec", LAYOUT.xdst.netns, "ss", "-Hltn", "sport = :5201"],
            capture_output=True,
            text=True,
            check=False,
        ).stdout
        return bool(out.strip())

    def failure(self) -> str | None:
        """Why the cross traffic ended early (iperf3's error), None while it runs or ran well."""
        if self.client is None or self.client.poll() is None or self.client.returncode == 0:
            return None
        err = self.client.stderr.read().decode(errors="replace") if self.client.stderr else ""
        return err.strip()[-300:] or f"iperf3 exited with {self.client.returncode}"

    def stop(self) -> None:
        for p in (self.client, self.server):
            if p is not None and p.poll() is None:
                p.terminate()
                try:
                    p.wait(5)
                except subprocess.TimeoutExpired:
                    p.kill()
                    p.wait()


# ------------------------------------------------------------------ summary


def _ts(s: str) -> dt.datetime:
    return dt.datetime.fromisoformat(s)


@dataclass
class Summary:
    """What the switches did in the run, from the server's data."""

    sessions: int = 0
    offloaded: int = 0
    congestion_at_s: float | None = None  # the cross traffic's start, seconds into the run
    rerouted_at: dt.datetime | None = None
    reroute_after_ms: float | None = None  # from the cross traffic's start
    moved_calls: int = 0  # calls up at the first reroute whose session lists one of the episode's
    backup_path: str = ""  # as INT saw the moved calls' media, e.g. s1→s3→s2
    back_after_s: float | None = None  # on the backup this long
    mos_moved: float | None = None  # the moved calls' median MOS over the call
    worst_mos_moved: float | None = None  # their worst sample
    worst_mos_all: float | None = None
    ired_drops: int = 0
    ired_spared: int = 0
    max_hop_delay_ms: float | None = None

    def line(self) -> str:
        """One line: what happened."""
        parts: list[str] = []
        if self.congestion_at_s is None:
            return (
                f"no congestion episode ran; {self.sessions} sessions, {self.offloaded} offloaded"
            )
        head = f"congestion on s1→s2 at {self.congestion_at_s:.0f} s"
        if self.rerouted_at is None or self.reroute_after_ms is None:
            parts.append(f"{head}: no reroute")
        else:
            path = self.backup_path or "s1→s3→s2"
            parts.append(
                f"{head}: {self.moved_calls} calls moved to {path} in {self.reroute_after_ms:.0f} ms"
            )
        if self.mos_moved is not None and self.worst_mos_moved is not None:
            parts.append(
                f"their MOS {self.mos_moved:.1f} (median), worst sample {self.worst_mos_moved:.1f}"
            )
        if self.back_after_s is not None:
            parts.append(f"back on s1→s2 after {self.back_after_s:.0f} s")
        parts.append(
            f"iRED on s1 port {bottleneck_port()} dropped {self.ired_drops} packets"
            f" and spared {self.ired_spared} of the calls'"
        )
        if self.max_hop_delay_ms is not None:
            parts.append(f"deepest INT hop delay {self.max_hop_delay_ms:.0f} ms")
        parts.append(f"{self.sessions} sessions, {self.offloaded} offloaded")
        return ", ".join(parts)


def path_text(record: dict[str, Any]) -> str:
    """An INT path record's switches in order, e.g. s1→s3→s2."""
    names = [str(h.get("switch") or h.get("switch_id")) for h in record.get("hops", [])]
    sink = record.get("sink")
    if sink and (not names or names[-1] != sink):
        names.append(str(sink))
    return "→".join(names)


def v6_prefix() -> str:
    """The UAS's IPv6 prefix, the one s1 watches beside its IPv4 subnet."""
    return next(h.v6.subnet for h in topology.HOSTS if h.name == LAYOUT.uas.name)


def prefix_moves(
    api: ServerApi, run_start: dt.datetime, cross: CrossTraffic | None, prefix: str
) -> str | None:
    """What s1 did with one watched prefix in the episode, e.g. `moved to
    s1→s3→s2 in 130 ms, back after 28 s`; None when it did not move."""
    if cross is None or cross.started is None:
        return None
    t_cross = cross.started
    events = [
        e
        for e in api.events_since("reroute", run_start.isoformat())
        if e["payload"].get("flow") == prefix
    ]
    events.sort(key=lambda e: e["ts"])
    moved = [
        e
        for e in events
        if e["payload"].get("direction") == "to_backup" and _ts(e["ts"]) >= t_cross
    ]
    if not moved:
        return None
    at = _ts(moved[0]["ts"])
    text = f"moved to s1→s3→s2 in {max(0.0, (at - t_cross).total_seconds() * 1000):.0f} ms"
    back = [
        e for e in events if e["payload"].get("direction") == "to_primary" and _ts(e["ts"]) > at
    ]
    if back:
        text += f", back after {(_ts(back[0]['ts']) - at).total_seconds():.0f} s"
    return text


def summarise(api: ServerApi, run_start: dt.datetime, cross: CrossTraffic | None) -> Summary:
    """The run's summary from the server: sessions (every page), reroute and
    iRED events, INT path records and hop queues since `run_start`."""
    out = Summary()
    sessions = api.all_sessions(started_from=run_start.isoformat())
    out.sessions = len(sessions)
    out.offloaded = sum(1 for s in sessions if s["offloaded"])
    moses = [s["mos_min"] for s in sessions if s.get("mos_min") is not None]
    out.worst_mos_all = min(moses) if moses else None
    if cross is None or cross.started is None:
        return out
    t_cross = cross.started
    out.congestion_at_s = (t_cross - run_start).total_seconds()
    since = run_start.isoformat()
    for e in api.events_since("ired_drop", since):
        if e["payload"].get("dev_port") == bottleneck_port():
            out.ired_drops += int(e["payload"].get("drops") or 0)
            out.ired_spared += int(e["payload"].get("spared") or 0)
    reroutes = sorted(api.events_since("reroute", since), key=lambda e: e["ts"])
    # the episode's: a reroute before it (a burst of the calls' own) is not its doing
    moved = [
        e
        for e in reroutes
        if e["payload"].get("direction") == "to_backup" and _ts(e["ts"]) >= t_cross
    ]
    if moved:
        at = _ts(moved[0]["ts"])
        out.rerouted_at = at
        out.reroute_after_ms = round(max(0.0, (at - t_cross).total_seconds() * 1000), 1)
        back = [
            e
            for e in reroutes
            if e["payload"].get("direction") == "to_primary" and _ts(e["ts"]) > at
        ]
        if back:
            out.back_after_s = (_ts(back[0]["ts"]) - at).total_seconds()
        up_then = [
            s
            for s in sessions
            if _ts(s["started_at"]) <= at
            and (s.get("ended_at") is None or _ts(s["ended_at"]) >= at)
        ]
        worst: list[float] = []
        avg: list[float] = []
        # each watched prefix (the UAS's IPv4 and IPv6 ones) moves on its own
        moved_ids = {e["id"] for e in moved}
        for s in up_then:
            detail = api.session(int(s["id"]))
            if any(r["id"] in moved_ids for r in detail.get("reroutes", [])):
                out.moved_calls += 1
                if detail.get("mos_min") is not None:
                    worst.append(float(detail["mos_min"]))
                if detail.get("mos_avg") is not None:
                    avg.append(float(detail["mos_avg"]))
        out.worst_mos_moved = min(worst) if worst else None
        out.mos_moved = statistics.median(avg) if avg else None
        paths = api.paths(LAYOUT.uas.addr, since=at.isoformat())
        around = [path_text(p) for p in paths if "s3" in path_text(p)]
        if around:
            out.backup_path = around[0]
    delays = [
        p["queue_delay_us"] / 1000
        for q in api.hop_queues(since)
        for p in q.get("points", [])
        if p.get("queue_delay_us") is not None
    ]
    out.max_hop_delay_ms = max(delays) if delays else None
    return out


def check_tools() -> None:
    """What the episode needs beyond the stack."""
    import shutil

    if shutil.which("iperf3") is None:
        raise StartError("iperf3 not installed (make setup)")
