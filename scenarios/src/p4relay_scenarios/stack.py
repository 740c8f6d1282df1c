"""Bring the whole p4relay system up on the testbed, in dependency order.

    testbed -> softswitch (+ routes) -> server (migrate, admin, tokens) + collector
            -> RTPProxy (rtp.io) -> rtpagent -> SIP server -> SIPp UAS

With `fabric`, the switch is the three-switch reroute fabric of reroute_bed.py
(`STACK` layout): the stack's softswitch is s1 (relay, UAC, NAT, attacker),
the UAS sits behind s2, s3 is the way around; `reroute()` starts s1's
switch control plane (`p4relay-controlplane`, its `[reroute]` section only)
against the stack's server.

The SIP server is OpenSIPS (the default) or Kamailio (`StackConfig.sip`); with
Kamailio the media-timeout listener runs next to it. Each piece can be left
out (no switch: the kernel forwarder; no server; no agent: the SIP server
talks to RTPProxy directly), which the experiment and the fallback tests use.
Addresses and ports follow README's plan.
"""

from __future__ import annotations

import asyncio
import fcntl
import ipaddress
import json
import os
import re
import secrets
import shutil
import subprocess
import sys
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import IO, Literal, get_args

import httpx

from p4relay_scenarios import reroute_bed, switchcfg, topology
from p4relay_scenarios.agent_metrics import AgentMetrics
from p4relay_scenarios.api import ServerApi
from p4relay_scenarios.media import write_alaw_raw
from p4relay_scenarios.procs import (
    StartError,
    Supervisor,
    tcp_open,
    tcp_probe_in,
    udp_bound_in,
    udp_control_probe,
)

ROOT = Path(os.environ.get("P4RELAY_ROOT", Path(__file__).resolve().parents[3]))
SCENARIOS = ROOT / "scenarios"
SOFTSWITCH_BIN = ROOT / "switch" / "target" / "release" / "p4relay-softswitch"
VENV_BIN = Path(sys.executable).parent

MGMT = topology.MGMT_ROOT_ADDR
GRPC_ADDR = f"{MGMT}:50052"
SWITCH_NAME = "sw1"  # rtpagent's --switch-name default
SWITCH_METRICS = f"{MGMT}:9101"
# The fabric's other switches (StackConfig.fabric): name -> (gRPC, metrics)
FABRIC_SWITCHES = {"s2": (f"{MGMT}:50053", f"{MGMT}:9111"), "s3": (f"{MGMT}:50054", f"{MGMT}:9112")}
SERVER_PORT = 8000
SERVER_URL = f"http://{MGMT}:{SERVER_PORT}"
AGENT_CONTROL = "udp:127.0.0.1:22222"
RTPPROXY_CONTROL_PORT = 22223
RTPPROXY_CONTROL = f"udp:127.0.0.1:{RTPPROXY_CONTROL_PORT}"
AGENT_NOTIFY = "tcp:127.0.0.1:22224"
SIP_TIMEOUT_SOCK = "tcp:127.0.0.1:22225"
RELAY_ADDR = topology.RELAY.addr
RELAY_ADDR6 = topology.RELAY.addr6
RELAY_PORTS = (20000, 29999)
SIP_PORT = 5060
UAS_URI = f"sip:{topology.UAS.addr}:{SIP_PORT}"
UAS_URI6 = f"sip:[{topology.UAS.addr6}]:{SIP_PORT}"

# rtpagent's default nat_nets (the stack adds the NAT66 LAN to them)
NAT_NETS_V4 = ("10.0.0.0/8", "172.16.0.0/12", "192.168.0.0/16", "100.64.0.0/10", "169.254.0.0/16")

SipServer = Literal["opensips", "kamailio"]
SIP_SERVERS: tuple[SipServer, ...] = get_args(SipServer)
# What each SIP server runs as in the supervisor (the Kamailio side has a helper).
SIP_PROCS: dict[SipServer, tuple[str, ...]] = {
    "opensips": ("opensips",),
    "kamailio": ("kamailio", "timeout-listener"),
}
# Held (flock) by the process running a stack: cleanup hooks of other runs leave
# a live testbed alone; a crashed run releases it with its death.
LOCK_FILE = Path("/run/p4relay-testbed.lock")


def testbed_in_use() -> bool:
    """True while some live process holds the testbed lock."""
    try:
        with LOCK_FILE.open("a") as f:
            try:
                fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                return True
            fcntl.flock(f, fcntl.LOCK_UN)
    except OSError:
        return False
    return False


@dataclass
class StackConfig:
    run_dir: Path
    switch: bool = True  # False: Linux kernel forwarder in place of the softswitch
    offload: bool = True  # rtpagent writes entries (False: server-based relay)
    agent: bool = True  # False: the SIP server talks to RTPProxy directly
    sip: SipServer = "opensips"
    database_url: str | None = None  # None: no server, no reporting
    collector: bool = True
    collector_metrics_port: int = 9103  # 0: off (tests, where other suites may hold 9103)
    rtpproxy_ttl_s: int = 60
    switch_args: list[str] = field(default_factory=list)
    sip_workers: int = 4  # OpenSIPS UDP workers / Kamailio children
    # rtpagent's switch idle timeout (a call whose media stopped both ways is
    # ended after it); None: rtpagent's default (RTPProxy's TTL)
    idle_ttl_ms: int | None = None
    # The three-switch reroute fabric (reroute_bed.STACK) instead of one switch;
    # switch_args go to s1 (the stack's switch: where the bottleneck is shaped)
    fabric: bool = False
    # More ports per fabric switch (name -> dev_port -> interface), e.g. s2's port
    # towards the collector's INT report listener
    fabric_ports: dict[str, dict[int, str]] = field(default_factory=dict)
    # False: the fabric's switches start without routes, their control planes
    # (p4relay-controlplane, demo_fabric.py) write them
    fabric_routes: bool = True
    switch_name: str = SWITCH_NAME  # the stack's switch at the server and in rtpagent
    collector_args: list[str] = field(default_factory=list)  # more collector flags


@dataclass
class Credentials:
    admin_user: str
    admin_password: str
    ingest_token: str
    read_token: str


class Stack:
    def __init__(self, cfg: StackConfig) -> None:
        cfg.run_dir = cfg.run_dir.resolve()  # daemons chdir; paths handed to them are absolute
        self.cfg = cfg
        self.sup = Supervisor(cfg.run_dir)
        self.creds: Credentials | None = None
        self.media_dir = cfg.run_dir / "sipp"
        self._lock: IO[str] | None = None

    def lock(self) -> None:
        """Take the testbed for this run (before touching it); up() does it too."""
        if self._lock is None:
            self._take_lock()

    def _take_lock(self) -> None:
        f = LOCK_FILE.open("a")
        try:
            fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            f.close()
            raise StartError(
                "another p4relay testbed run is live on this machine (demo, e2e or experiment); "
                "stop it first (or wait)"
            ) from None
        self._lock = f

    # ------------------------------------------------------------ pieces

    def testbed(self) -> list[topology.PortInfo]:
        if self.cfg.fabric and not self.cfg.switch:
            raise StartError("the reroute fabric needs the software switch")
        ports = topology.up("switch" if self.cfg.switch else "kernel")
        if self.cfg.fabric:
            reroute_bed.up(reroute_bed.STACK)
        return ports

    def softswitch(self, ports: list[topology.PortInfo]) -> None:
        if not SOFTSWITCH_BIN.exists():
            raise StartError(
                f"{SOFTSWITCH_BIN} missing: build it (cd switch && cargo build --release)"
            )
        if self.cfg.fabric:
            self._fabric()
            return
        cmd = [str(SOFTSWITCH_BIN)]
        for p in ports:
            cmd += ["--port", f"{p.port}={p.ifname}"]
        cmd += ["--grpc-listen", GRPC_ADDR, "--metrics-listen", SWITCH_METRICS, "--log-json"]
        cmd += self.cfg.switch_args
        self.sup.start("softswitch", cmd)
        self.sup.wait_ready("softswitch", lambda: tcp_open(MGMT, 50052), 30, "BfRt gRPC port")
        asyncio.run(
            switchcfg.program(
                GRPC_ADDR, ports, relay_port_min=RELAY_PORTS[0], relay_port_max=RELAY_PORTS[1]
            )
        )

    def _fabric(self) -> None:
        """s1 (`softswitch`, the stack's switch), s2 and s3 with reroute_bed's
        routes; the relay range on s1."""
        layout = reroute_bed.STACK
        where = {"s1": (GRPC_ADDR, SWITCH_METRICS), **FABRIC_SWITCHES}
        for name, (grpc, metrics) in where.items():
            cmd = [str(SOFTSWITCH_BIN)]
            ports = reroute_bed.switch_ports(name, layout) | self.cfg.fabric_ports.get(name, {})
            for port, ifname in sorted(ports.items()):
                cmd += ["--port", f"{port}={ifname}"]
            cmd += ["--grpc-listen", grpc, "--metrics-listen", metrics, "--log-json"]
            if name == "s1":
                cmd += self.cfg.switch_args
            proc = "softswitch" if name == "s1" else f"softswitch-{name}"
            self.sup.start(proc, cmd)
            port_no = int(grpc.rsplit(":", 1)[1])
            self.sup.wait_ready(proc, partial(tcp_open, MGMT, port_no), 30, "BfRt gRPC port")
            if self.cfg.fabric_routes:
                asyncio.run(reroute_bed.program(name, grpc, layout))
        asyncio.run(
            switchcfg.program(
                GRPC_ADDR, [], relay_port_min=RELAY_PORTS[0], relay_port_max=RELAY_PORTS[1]
            )
        )

    def reroute(self, t_q_us: float, m: int, hold_ms: int) -> None:
        """s1's switch control plane (`p4relay-controlplane`) with only its
        reroute section, reporting to the stack's server: the UAS subnet
        watched, its backup by s3."""
        if not self.cfg.fabric or self.creds is None:
            raise StartError("reroute needs the fabric and a server (fabric=True, database_url)")
        token_file = self.cfg.run_dir / "reroute.token"
        token_file.write_text(self.creds.ingest_token)
        token_file.chmod(0o600)
        cp = reroute_bed.reroute_controlplane(
            GRPC_ADDR,
            t_q_us=t_q_us,
            m=m,
            hold_ms=hold_ms,
            switch_name=self.cfg.switch_name,
            layout=reroute_bed.STACK,
        )
        reroute = cp.pop("reroute")
        assert isinstance(reroute, dict)
        cfg = self.cfg.run_dir / "reroute.toml"
        cfg.write_text(
            toml_tables(
                {
                    "controlplane": {
                        **cp,
                        "server_url": SERVER_URL,
                        "token_file": str(token_file),
                    },
                    "controlplane.reroute": reroute,
                }
            )
        )
        self.sup.start("reroute", [str(VENV_BIN / "p4relay-controlplane"), "--config", str(cfg)])

    def _server_cli(self, *args: str, stdin: str | None = None) -> str:
        assert self.cfg.database_url is not None
        env = {**os.environ, "P4RELAY_SERVER_DATABASE_URL": self.cfg.database_url}
        r = subprocess.run(
            [str(VENV_BIN / "p4relay-server"), *args],
            input=stdin,
            capture_output=True,
            text=True,
            env=env,
            check=False,
        )
        if r.returncode != 0:
            raise StartError(f"p4relay-server {' '.join(args)}: {r.stderr.strip()[-2000:]}")
        return r.stdout.strip()

    def server(self) -> Credentials:
        assert self.cfg.database_url is not None
        self._server_cli("migrate")
        user = f"admin-{secrets.token_hex(3)}"
        password = secrets.token_urlsafe(12)
        self._server_cli("create-admin", "--username", user, "--password-stdin", stdin=password)
        ingest = self._server_cli("create-token", "--name", "rtpagent-relay", "--scope", "ingest")
        read = self._server_cli("create-token", "--name", "scenarios", "--scope", "read")
        self.creds = Credentials(user, password, ingest.split()[-1], read.split()[-1])
        env = {"P4RELAY_SERVER_DATABASE_URL": self.cfg.database_url}
        self.sup.start(
            "server",
            [str(VENV_BIN / "p4relay-server"), "serve", "--host", MGMT, "--port", str(SERVER_PORT)],
            env=env,
            cwd=ROOT,
        )
        self.sup.wait_ready("server", lambda: _http_ok(f"{SERVER_URL}/healthz"), 60, "HTTP")
        if self.cfg.switch:
            admin = ServerApi.login(SERVER_URL, user, password)
            try:
                admin.register_switch(self.cfg.switch_name, GRPC_ADDR)
            finally:
                admin.close()
        if self.cfg.collector and self.cfg.switch:
            token_file = self.cfg.run_dir / "collector.token"
            token_file.write_text(self.creds.ingest_token)
            token_file.chmod(0o600)
            port = self.cfg.collector_metrics_port
            self.sup.start(
                "collector",
                [
                    str(VENV_BIN / "p4relay-collector"),
                    "--server-url",
                    SERVER_URL,
                    "--token-file",
                    str(token_file),
                    "--metrics-listen",
                    f"127.0.0.1:{port}" if port else "",
                    *self.cfg.collector_args,
                ],
            )
        return self.creds

    def rtpproxy(self) -> None:
        lo, hi = RELAY_PORTS
        extra = ["-T", str(self.cfg.rtpproxy_ttl_s), "-n", AGENT_NOTIFY, "-n", SIP_TIMEOUT_SOCK]
        # Dual stack in bridging mode: the IPv4 address is the first interface
        # (`i`), the IPv6 one the second (`e`). Calls of one family need no
        # flag (`U` takes the IPv4 side, `U6` the IPv6 one); a bridged call's
        # offers and answers name both sides (the SIP server's config).
        extra += ["-6", f"/{RELAY_ADDR6}"]
        self.sup.start(
            "rtpproxy",
            [
                str(VENV_BIN / "python"),
                "-m",
                "rtpagent.embedded",
                "--control",
                RTPPROXY_CONTROL,
                "--listen",
                RELAY_ADDR,
                "--ports",
                f"{lo}-{hi}",
                # RTPProxy's accounting CSV lands in its working directory: keep it in the run.
                "--workdir",
                str(self.cfg.run_dir),
                "--",
                *extra,
            ],
            netns=topology.RELAY.netns,
        )
        self.sup.wait_ready(
            "rtpproxy",
            lambda: udp_control_probe(topology.RELAY.netns, "127.0.0.1", RTPPROXY_CONTROL_PORT),
            20,
            "control socket",
        )

    def rtpagent(self, *, loaded: bool = True) -> None:
        """Start rtpagent; return when its control socket answers and, with
        `loaded`, when the agent is loaded (`agent_loaded`)."""
        lo, hi = RELAY_PORTS
        cmd = [
            str(VENV_BIN / "rtpagent"),
            "--listen",
            AGENT_CONTROL,
            "--rtpproxy",
            RTPPROXY_CONTROL,
        ]
        cmd += ["--relay-addr", RELAY_ADDR, "--relay-addr", RELAY_ADDR6]
        cmd += ["--relay-ports", f"{lo}-{hi}"]
        # Signalled addresses behind a NAT (media latched from where it comes):
        # rtpagent's IPv4 private ranges and the NAT66 LAN of the testbed.
        natlan6 = ipaddress.IPv6Network(f"{topology.NATUAC_ADDR6}/64", strict=False)
        for net in (*NAT_NETS_V4, str(natlan6)):
            cmd += ["--nat-nets", net]
        cmd += ["--notify-listen", AGENT_NOTIFY, "--rtpproxy-ttl", str(self.cfg.rtpproxy_ttl_s)]
        # The SIP server's timeout socket for sessions whose U names none: Kamailio's
        # rtpproxy module names its timeout_socket only on a U with a to-tag, so the
        # agent tells this socket (the Kamailio listener) "<call-id> <from-tag>". OpenSIPS
        # names its socket in every offer and answer (`n`); this changes nothing for it.
        cmd += ["--sip-notify", SIP_TIMEOUT_SOCK]
        cmd += ["--switch", GRPC_ADDR if (self.cfg.offload and self.cfg.switch) else ""]
        cmd += ["--switch-name", self.cfg.switch_name]
        cmd += ["--state-file", str(self.cfg.run_dir / "rtpagent.db")]
        # RTPProxy's accounting (its working directory is the run's): ends the agent
        # missed, RTPProxy-relayed packets, calls placed while the agent was away
        cmd += ["--rtpproxy-acct", str(self.cfg.run_dir / "rtpproxy_acct.csv")]
        cmd += ["--metrics-listen", f"{topology.MGMT_RELAY_ADDR}:9102", "--log-json"]
        if self.cfg.idle_ttl_ms is not None:
            cmd += ["--idle-ttl-ms", str(self.cfg.idle_ttl_ms)]
        if self.creds is not None:
            cmd += ["--server-url", SERVER_URL, "--server-token", self.creds.ingest_token]
        self.sup.start("rtpagent", cmd, netns=topology.RELAY.netns)
        self.sup.wait_ready(
            "rtpagent",
            lambda: udp_control_probe(topology.RELAY.netns, "127.0.0.1", 22222),
            30,
            "control socket",
        )
        if loaded:
            self.sup.wait_ready("rtpagent", self.agent_loaded, 90, "loaded (/metrics)")

    def agent_loaded(self) -> bool:
        """The control socket answers from the agent process's first moment
        (commands are relayed to RTPProxy while it loads); loaded: its /metrics
        answers and, offloading, it is connected to the switch."""
        try:
            m = AgentMetrics.read(timeout_s=1.0)
        except httpx.HTTPError:
            return False
        offload = self.cfg.offload and self.cfg.switch
        return not offload or m.value("rtpagent_switch_connected") == 1.0

    def _rtpproxy_sock(self) -> str:
        return AGENT_CONTROL if self.cfg.agent else RTPPROXY_CONTROL

    def sip_server(self) -> None:
        """Start the configured SIP server (and its helpers)."""
        if self.cfg.sip == "opensips":
            self.opensips()
        elif self.cfg.sip == "kamailio":
            self.kamailio()
        else:
            raise StartError(
                f"unknown SIP server {self.cfg.sip!r}; one of {', '.join(SIP_SERVERS)}"
            )

    def stop_sip_server(self) -> None:
        for name in (n for procs in SIP_PROCS.values() for n in procs):
            self.sup.stop(name)

    def use_sip_server(self, sip: SipServer) -> None:
        """Swap the running SIP server for another (the rest of the stack stays)."""
        running = [n for n in SIP_PROCS[sip] if n in self.sup.procs and self.sup.procs[n].alive()]
        if self.cfg.sip == sip and len(running) == len(SIP_PROCS[sip]):
            return
        self.stop_sip_server()
        self.cfg.sip = sip
        self.sip_server()

    def _sip_endpoints(self) -> SipEndpoints:
        return SipEndpoints(rtpproxy_sock=self._rtpproxy_sock())

    def opensips(self) -> None:
        cmd = opensips_command(
            self.cfg.run_dir / "opensips", self._sip_endpoints(), self.cfg.sip_workers
        )
        self.sup.start(
            "opensips", cmd, netns=topology.RELAY.netns, cwd=self.cfg.run_dir / "opensips"
        )
        self.sup.wait_ready(
            "opensips",
            lambda: tcp_probe_in(topology.RELAY.netns, RELAY_ADDR, SIP_PORT),
            20,
            f"SIP on {SIP_PORT}",
        )

    def kamailio(self) -> None:
        kdir = self.cfg.run_dir / "kamailio"
        ep = self._sip_endpoints()
        cmd = kamailio_command(kdir, ep, self.cfg.sip_workers)
        self.sup.start(
            "timeout-listener",
            [
                str(VENV_BIN / "python"),
                "-m",
                "p4relay_scenarios.timeout_listener",
                "--listen",
                ep.notify_sock,
                "--rpc",
                str(kdir / "jsonrpc.sock"),
                "--rtpproxy",
                ep.rtpproxy_sock,
            ],
            netns=topology.RELAY.netns,
        )
        self.sup.start("kamailio", cmd, netns=topology.RELAY.netns)
        self.sup.wait_ready(
            "kamailio",
            lambda: tcp_probe_in(topology.RELAY.netns, RELAY_ADDR, SIP_PORT),
            20,
            f"SIP on {SIP_PORT}",
        )

    def sipp_uas(self, scenario: str = "uas.xml", *, ipv6: bool = False) -> None:
        """(Re)start the UAS with one of our SIPp scenarios (sipp/): `sipp-uas`
        on the UAS's IPv4 address, or with `ipv6` `sipp-uas6` on its IPv6 one
        (SIPp listens on one address)."""
        self.prepare_media()
        name, addr = ("sipp-uas6", topology.UAS.addr6) if ipv6 else ("sipp-uas", topology.UAS.addr)
        cmd = ["sipp", "-sf", str(SCENARIOS / "sipp" / scenario)]
        cmd += ["-i", addr, "-mi", addr, "-p", str(SIP_PORT)]
        cmd += ["-nostdin", "-max_socket", "65000", "-trace_err"]
        cmd += ["-error_file", str(self.cfg.run_dir / "logs" / f"{name}-errors.log")]
        self.sup.start(name, cmd, netns=topology.UAS.netns, cwd=self.media_dir)
        self.sup.wait_ready(
            name,
            partial(udp_bound_in, topology.UAS.netns, SIP_PORT, addr),
            20,
            f"SIP on UDP [{addr}]:{SIP_PORT}",
        )

    def prepare_media(self) -> Path:
        f = self.media_dir / "media" / "tone.alaw"
        if not f.exists():
            write_alaw_raw(f, seconds=10.0)
        return self.media_dir

    # ------------------------------------------------------------ whole

    def up(self) -> None:
        if self._lock is None:
            self._take_lock()
        ports = self.testbed()
        if self.cfg.switch:
            self.softswitch(ports)
        if self.cfg.database_url:
            self.server()
        self.rtpproxy()
        if self.cfg.agent:
            self.rtpagent()
        self.sip_server()
        self.sipp_uas()
        self.sipp_uas(ipv6=True)
        (self.cfg.run_dir / "stack.json").write_text(
            json.dumps(
                {
                    "switch": self.cfg.switch,
                    "offload": self.cfg.offload,
                    "sip": self.cfg.sip,
                    "server": SERVER_URL if self.cfg.database_url else None,
                    "admin_user": self.creds.admin_user if self.creds else None,
                },
                indent=2,
            )
        )

    def api(self) -> ServerApi:
        """A read-scoped client of the server API (the stack must run a server)."""
        if self.creds is None:
            raise StartError("this stack runs no server")
        return ServerApi(SERVER_URL, self.creds.read_token)

    def down(self, *, keep_testbed: bool = False) -> None:
        self.sup.stop_all()
        if not keep_testbed:
            if self.cfg.fabric:
                reroute_bed.down(reroute_bed.STACK)
            topology.down()
            if self._lock is not None:
                self._lock.close()
                self._lock = None

    def dead(self) -> list[str]:
        return self.sup.check_alive()


def toml_tables(tables: dict[str, dict[str, object]]) -> str:
    """TOML of `[table]`s holding strings, numbers, booleans and lists of
    flat tables (`[[table.key]]`): what the daemons' config files need."""

    def value(v: object) -> str:
        if isinstance(v, bool):
            return "true" if v else "false"
        if isinstance(v, int | float):
            return repr(v)
        if isinstance(v, str):
            return json.dumps(v)  # a TOML basic string: JSON's escapes are TOML's
        raise StartError(f"toml_tables: cannot write {type(v).__name__} {v!r}")

    out: list[str] = []
    for name, table in tables.items():
        out.append(f"[{name}]")
        arrays: list[tuple[str, list[object]]] = []
        for k, v in table.items():
            if isinstance(v, list):
                arrays.append((k, v))
            else:
                out.append(f"{k} = {value(v)}")
        for k, items in arrays:
            for item in items:
                if not isinstance(item, dict):
                    raise StartError(f"toml_tables: {name}.{k} must hold tables")
                out.append(f"[[{name}.{k}]]")
                out += [f"{ik} = {value(iv)}" for ik, iv in item.items()]
        out.append("")
    return "\n".join(out)


def _http_ok(url: str) -> bool:
    try:
        return httpx.get(url, timeout=1.0).status_code < 500
    except httpx.HTTPError:
        return False


@dataclass(frozen=True)
class SipEndpoints:
    """Where a SIP server listens and whom it talks to (README's plan by default)."""

    listen_ip: str = RELAY_ADDR
    port: int = SIP_PORT
    uas_uri: str = UAS_URI  # the trunk every call goes to
    # Dual stack (None: IPv4 only): the server's IPv6 address, the trunk over IPv6
    listen_ip6: str | None = RELAY_ADDR6
    uas_uri6: str | None = UAS_URI6
    rtpproxy_sock: str = AGENT_CONTROL  # its rtpproxy module's socket (rtpagent)
    # RTPProxy's own: the set's fallback node while the agent does not answer
    direct_sock: str = RTPPROXY_CONTROL
    notify_sock: str = SIP_TIMEOUT_SOCK  # media-timeout notifications


def opensips_command(run_dir: Path, ep: SipEndpoints, workers: int = 4) -> list[str]:
    """OpenSIPS's command line; writes its config into run_dir (its runtime directory,
    made here as a service unit would: mi_fifo's FIFO lives there)."""
    run_dir.mkdir(parents=True, exist_ok=True)
    cfg = run_dir / "opensips.cfg"
    values = {
        "SIP_LISTEN_IP": ep.listen_ip,
        "SIP_PORT": str(ep.port),
        "UAS_URI": ep.uas_uri,
        "RTPAGENT_SOCK": ep.rtpproxy_sock,
        "RTPPROXY_SOCK": ep.direct_sock,
        "NOTIFY_SOCK": ep.notify_sock,
        "RUN_DIR": str(run_dir),
        "MODULES_DIR": opensips_modules_dir(),
    }
    if ep.listen_ip6 is not None and ep.uas_uri6 is not None:
        values |= {"SIP_LISTEN_IP6": ep.listen_ip6, "UAS_URI6": ep.uas_uri6}
    cfg.write_text(render_opensips_cfg((SCENARIOS / "sip" / "opensips.cfg").read_text(), values))
    # -F: stay in the foreground (logs go to stderr: stderror_enabled); shared/private memory in MB
    # (the defaults, 32/2, are short of the experiment's 1800 calls); -n UDP workers.
    return [which("opensips"), "-F", "-f", str(cfg), "-m", "256", "-M", "16",
            "-n", str(workers)]  # fmt: skip


def opensips_modules_dir() -> str:
    """Where the installed OpenSIPS keeps its modules (its config must name it)."""
    binary = Path(which("opensips")).resolve()
    prefix = binary.parent.parent  # PREFIX/sbin/opensips
    candidates = [
        prefix / "lib64" / "opensips" / "modules",  # a source build under PREFIX
        prefix / "lib" / "opensips" / "modules",
        prefix / "lib" / "x86_64-linux-gnu" / "opensips" / "modules",  # the packages
    ]
    for d in candidates:
        if (d / "tm.so").exists():
            return f"{d}/"
    raise StartError(
        f"no OpenSIPS modules next to {binary} (looked in {', '.join(map(str, candidates))})"
    )


def kamailio_command(run_dir: Path, ep: SipEndpoints, workers: int = 4) -> list[str]:
    """Kamailio's command line (kamailio.cfg's defines set with -A; run_dir: its rundir)."""
    run_dir.mkdir(parents=True, exist_ok=True)
    cmd = [which("kamailio"), "-f", str(SCENARIOS / "sip" / "kamailio.cfg"), "-DD", "-E"]
    cmd += ["-P", str(run_dir / "kamailio.pid"), "-n", str(workers)]
    for k, v in {
        "SIP_UDP": f"udp:{ep.listen_ip}:{ep.port}",
        "SIP_TCP": f"tcp:{ep.listen_ip}:{ep.port}",
        "UAS_URI": f'"{ep.uas_uri}"',
        "RUNDIR": f'"{run_dir}"',
        "JSONRPC_SOCK": f'"{run_dir}/jsonrpc.sock"',
        "CTL_SOCK": f'"unix:{run_dir}/ctl.sock"',
        "RTPPROXY_SOCK": f'"{ep.rtpproxy_sock}"',
        "RTPPROXY_DIRECT_SET": f'"1 == {ep.direct_sock}"',
        "TIMEOUT_SOCK": f'"{ep.notify_sock}"',
    }.items():
        cmd += ["-A", f"{k}={v}"]
    if ep.listen_ip6 is not None and ep.uas_uri6 is not None:
        cmd += ["-A", f"SIP_UDP6=udp:[{ep.listen_ip6}]:{ep.port}"]
        cmd += ["-A", f"SIP_TCP6=tcp:[{ep.listen_ip6}]:{ep.port}"]
        cmd += ["-A", f'UAS_URI6="{ep.uas_uri6}"']
    return cmd


def render_opensips_cfg(text: str, values: dict[str, str]) -> str:
    """opensips.cfg with its __NAME__ placeholders filled (what the compose stack's sed does);
    given SIP_LISTEN_IP6, its `#ipv6` lines too (the dual-stack side)."""
    if "SIP_LISTEN_IP6" in values:
        text = re.sub(r"^#ipv6(?=[ \t])", "", text, flags=re.MULTILINE)
    for name, value in values.items():
        if any(c in value for c in '"\n\r'):
            raise StartError(
                f"{name}={value!r}: quotes and line breaks cannot go into opensips.cfg"
            )
        text = text.replace(f"__{name}__", value)
    code = "\n".join(ln for ln in text.splitlines() if not ln.lstrip().startswith("#"))
    left = sorted(set(re.findall(r"__[A-Z][A-Z0-9_]*__", code)))
    if left:
        raise StartError(f"opensips.cfg placeholders without a value: {', '.join(left)}")
    return text


def sip_server_version(sip: SipServer) -> str:
    """The SIP server's name and version as its binary reports it (e.g. "OpenSIPS 3.6.8")."""
    flag = "-V" if sip == "opensips" else "-v"
    try:
        out = subprocess.run(
            [which(sip), flag], capture_output=True, text=True, timeout=10, check=False
        ).stdout
    except (StartError, OSError, subprocess.TimeoutExpired):
        return sip
    # "version: opensips 3.6.8 (x86_64/linux)" / "version: kamailio 5.6.3 (x86_64/linux) "
    m = re.search(r"version:\s*(\S+)\s+(\S+)", out)
    if m is None:
        return sip
    return f"{'OpenSIPS' if sip == 'opensips' else 'Kamailio'} {m.group(2)}"


def which(tool: str) -> str:
    path = shutil.which(tool)
    if path is None:
        raise StartError(f"{tool} not installed (make setup)")
    return path
