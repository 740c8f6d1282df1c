"""The namespace testbed of README's address plan, joined through the switch's ports.

Every host is a network namespace with one veth link whose other end
(`p4r-sw-<host>`) stays in the root namespace as a switch port. The testbed
is dual stack: each host has an IPv4 address and an IPv6 one (ULA, `fd00::/8`,
a /64 per link). Hosts reach each other through their gateway (`.1`, `::1`);
the gateway's MAC is the switch port's MAC, installed as a static neighbour
of both families because the switch answers neither ARP nor neighbour
solicitations (IPv6 addresses skip duplicate address detection, hosts send no
router solicitations: nothing waits on the switch's CPU port). The NAT host
masquerades a private LAN of both families (`p4r-natuac` behind it), and the
relay host has a management link to the root namespace where server and
switch gRPC listen.

`up` is idempotent (ensure semantics: create what is missing, replace
addresses/routes/neighbours) and `down` removes everything named `p4r-*` of
ours, also after a crash. With `forwarder="kernel"` the switch ports are moved
into a router namespace (`p4r-fwd`) instead, for developing without the
software switch; the final tests and the demo use the real switch.
"""

from __future__ import annotations

import ipaddress
import json
import sys
from dataclasses import asdict, dataclass
from typing import Protocol

from p4relay_scenarios.netns import link_exists, mac_of, namespaces, ok, run, sysctl


@dataclass(frozen=True)
class Host:
    name: str  # short name; namespace p4r-<name>, switch port p4r-sw-<name>
    port: int  # switch port number (softswitch --port N=p4r-sw-<name>)
    addr: str  # address on the switch-facing link
    addr6: str  # IPv6 address on that link
    prefix: int = 24
    prefix6: int = 64

    @property
    def netns(self) -> str:
        return f"p4r-{self.name}"

    @property
    def sw_if(self) -> str:
        return f"p4r-sw-{self.name}"

    @property
    def gateway(self) -> str:
        return self.addr.rsplit(".", 1)[0] + ".1"

    @property
    def subnet(self) -> str:
        return self.addr.rsplit(".", 1)[0] + f".0/{self.prefix}"

    @property
    def v6(self) -> V6Link:
        return V6Link(self.addr6, self.prefix6)


@dataclass(frozen=True)
class V6Link:
    """A host's IPv6 side: its address; the gateway is `::1` of its prefix."""

    addr: str
    prefix: int = 64

    @property
    def subnet(self) -> str:
        return str(ipaddress.IPv6Network(f"{self.addr}/{self.prefix}", strict=False))

    @property
    def gateway(self) -> str:
        return str(ipaddress.IPv6Network(self.subnet)[1])


RELAY = Host("relay", 1, "198.18.0.10", "fd00:198:18::10")
UAC = Host("uac", 2, "198.18.1.10", "fd00:198:18:1::10")
UAS = Host("uas", 3, "198.18.2.10", "fd00:198:18:2::10")
NAT = Host("nat", 4, "198.18.3.10", "fd00:198:18:3::10")
ATTACKER = Host("attacker", 5, "198.18.4.10", "fd00:198:18:4::10")
HOSTS: tuple[Host, ...] = (RELAY, UAC, UAS, NAT, ATTACKER)

NATUAC_NS = "p4r-natuac"
NATUAC_ADDR = "100.64.77.10"
NAT_LAN_ADDR = "100.64.77.1"
NATUAC_ADDR6 = "fd00:100:64:77::10"
NAT_LAN_ADDR6 = "fd00:100:64:77::1"
MGMT_IF = "p4r-mgmt"
MGMT_ROOT_ADDR = "198.19.0.1"
MGMT_RELAY_ADDR = "198.19.0.10"
MGMT_ROOT_ADDR6 = "fd00:198:19::1"
MGMT_RELAY_ADDR6 = "fd00:198:19::10"
FWD_NS = "p4r-fwd"
HOST_IF = "eth0"
ALL_NAMESPACES = (*(h.netns for h in HOSTS), NATUAC_NS, FWD_NS)


@dataclass(frozen=True)
class PortInfo:
    """What the switch needs to forward to a host: port, its MACs, its subnet."""

    host: str
    port: int
    ifname: str
    subnet: str
    host_addr: str
    switch_mac: str  # the switch port (gateway) MAC: source MAC of frames to the host
    host_mac: str  # destination MAC of frames to the host
    subnet6: str | None = None  # the host's IPv6 prefix (None: an IPv4-only host)
    host_addr6: str | None = None


def _ensure_ns(name: str) -> None:
    if name not in namespaces():
        run(["ip", "netns", "add", name])
    run(["ip", "link", "set", "lo", "up"], netns=name)


def _ensure_veth(root_end: str, ns: str, ns_end: str) -> None:
    """A veth with root_end in the root namespace and ns_end inside ns."""
    if link_exists(root_end) and link_exists(ns_end, netns=ns):
        return
    if link_exists(root_end):
        run(["ip", "link", "del", root_end])
    tmp = f"{root_end[:11]}-h"
    if link_exists(tmp):
        run(["ip", "link", "del", tmp])
    run(["ip", "link", "add", root_end, "type", "veth", "peer", "name", tmp])
    run(["ip", "link", "set", tmp, "netns", ns])
    run(["ip", "link", "set", tmp, "name", ns_end], netns=ns)


def tx_csum_off(ns: str | None, dev: str) -> None:
    run([sys.executable, "-m", "p4relay_scenarios.ethtool", dev], netns=ns)


def quiet_switch_port(ifname: str) -> None:
    """A switch port is not a root-namespace interface: no IPv6, no ARP, no forwarding."""
    sysctl(f"net.ipv6.conf.{ifname}.disable_ipv6", "1")
    sysctl(f"net.ipv4.conf.{ifname}.forwarding", "0")
    sysctl(f"net.ipv4.conf.{ifname}.arp_ignore", "8")
    run(["ip", "link", "set", ifname, "mtu", "1500", "up"])


class HostPlan(Protocol):
    """What a host namespace is made from (Host here; reroute_bed's hosts too)."""

    @property
    def netns(self) -> str: ...
    @property
    def sw_if(self) -> str: ...
    @property
    def addr(self) -> str: ...
    @property
    def prefix(self) -> int: ...
    @property
    def gateway(self) -> str: ...


def setup_host(h: HostPlan, v6: V6Link | None = None) -> None:
    """A host namespace with one veth to a switch port, its gateway `.1` as
    the default route and the gateway's MAC (the switch port's) as a static
    neighbour (idempotent); with `v6`, the same for IPv6 (gateway `::1`)."""
    _ensure_ns(h.netns)
    _ensure_veth(h.sw_if, h.netns, HOST_IF)
    quiet_switch_port(h.sw_if)
    run(["ip", "addr", "replace", f"{h.addr}/{h.prefix}", "dev", HOST_IF], netns=h.netns)
    enable_ipv6(h.netns, HOST_IF, v6 is not None)
    run(["ip", "link", "set", HOST_IF, "up"], netns=h.netns)
    gw_mac = mac_of(h.sw_if)
    _default_via(h.netns, h.gateway, gw_mac)
    if v6 is not None:
        run(
            ["ip", "-6", "addr", "replace", f"{v6.addr}/{v6.prefix}", "dev", HOST_IF, "nodad"],
            netns=h.netns,
        )
        _default_via(h.netns, v6.gateway, gw_mac)
    tx_csum_off(h.netns, HOST_IF)


def enable_ipv6(netns: str, dev: str, on: bool) -> None:
    """IPv6 on (a static address plan: no duplicate address detection, no
    router solicitations or advertisements) or off in a namespace."""
    if not on:
        sysctl("net.ipv6.conf.all.disable_ipv6", "1", netns=netns)
        return
    for scope in ("default", "all", dev):
        sysctl(f"net.ipv6.conf.{scope}.accept_dad", "0", netns=netns)
        sysctl(f"net.ipv6.conf.{scope}.router_solicitations", "0", netns=netns)
        sysctl(f"net.ipv6.conf.{scope}.accept_ra", "0", netns=netns)
    for scope in ("all", "default", dev):
        sysctl(f"net.ipv6.conf.{scope}.disable_ipv6", "0", netns=netns)


def _default_via(netns: str, gateway: str, mac: str) -> None:
    """Default route of the gateway's family and the gateway as a static neighbour."""
    fam = "-6" if ":" in gateway else "-4"
    run(["ip", fam, "route", "replace", "default", "via", gateway, "dev", HOST_IF], netns=netns)
    run(
        ["ip", fam, "neigh", "replace", gateway, "lladdr", mac, "dev", HOST_IF,
         "nud", "permanent"],
        netns=netns,
    )  # fmt: skip


def _setup_nat() -> None:
    _ensure_ns(NATUAC_NS)
    lan_root = "p4r-natlan"  # created in the root ns, then both ends moved
    if not link_exists("lan0", netns=NAT.netns):
        if link_exists(lan_root):
            run(["ip", "link", "del", lan_root])
        run(["ip", "link", "add", lan_root, "type", "veth", "peer", "name", "p4r-natlan-h"])
        run(["ip", "link", "set", lan_root, "netns", NAT.netns])
        run(["ip", "link", "set", lan_root, "name", "lan0"], netns=NAT.netns)
        if link_exists(HOST_IF, netns=NATUAC_NS):
            run(["ip", "link", "del", HOST_IF], netns=NATUAC_NS)
        run(["ip", "link", "set", "p4r-natlan-h", "netns", NATUAC_NS])
        run(["ip", "link", "set", "p4r-natlan-h", "name", HOST_IF], netns=NATUAC_NS)
    run(["ip", "addr", "replace", f"{NAT_LAN_ADDR}/24", "dev", "lan0"], netns=NAT.netns)
    enable_ipv6(NAT.netns, "lan0", True)
    run(["ip", "-6", "addr", "replace", f"{NAT_LAN_ADDR6}/64", "dev", "lan0", "nodad"],
        netns=NAT.netns)  # fmt: skip
    run(["ip", "link", "set", "lan0", "up"], netns=NAT.netns)
    run(["ip", "addr", "replace", f"{NATUAC_ADDR}/24", "dev", HOST_IF], netns=NATUAC_NS)
    enable_ipv6(NATUAC_NS, HOST_IF, True)
    run(["ip", "-6", "addr", "replace", f"{NATUAC_ADDR6}/64", "dev", HOST_IF, "nodad"],
        netns=NATUAC_NS)  # fmt: skip
    run(["ip", "link", "set", HOST_IF, "up"], netns=NATUAC_NS)
    run(["ip", "route", "replace", "default", "via", NAT_LAN_ADDR], netns=NATUAC_NS)
    run(["ip", "-6", "route", "replace", "default", "via", NAT_LAN_ADDR6], netns=NATUAC_NS)
    tx_csum_off(NATUAC_NS, HOST_IF)
    tx_csum_off(NAT.netns, "lan0")
    sysctl("net.ipv4.ip_forward", "1", netns=NAT.netns)
    sysctl("net.ipv6.conf.all.forwarding", "1", netns=NAT.netns)
    # Masquerade with random source ports so the relay sees a port the phone never
    # advertised: exactly what RTPProxy's latching (and the switch's learning) is for.
    # IPv6 the same (NAT66, as a carrier-grade or enterprise firewall may do).
    ruleset = f"""
table inet p4r_nat
delete table inet p4r_nat
table inet p4r_nat {{
  chain post {{
    type nat hook postrouting priority srcnat; policy accept;
    ip saddr 100.64.77.0/24 oifname "{HOST_IF}" masquerade random
    ip6 saddr {NATUAC_ADDR6}/64 oifname "{HOST_IF}" masquerade random
  }}
}}
"""
    run(["sh", "-c", f"printf '%s' '{ruleset}' | nft -f -"], netns=NAT.netns)


def _setup_mgmt() -> None:
    _ensure_veth(MGMT_IF, RELAY.netns, "mgmt0")
    for scope in ("accept_dad", "router_solicitations", "accept_ra", "forwarding"):
        sysctl(f"net.ipv6.conf.{MGMT_IF}.{scope}", "0")
    sysctl(f"net.ipv6.conf.{MGMT_IF}.disable_ipv6", "0")
    sysctl(f"net.ipv4.conf.{MGMT_IF}.forwarding", "0")
    run(["ip", "addr", "replace", f"{MGMT_ROOT_ADDR}/24", "dev", MGMT_IF])
    run(["ip", "-6", "addr", "replace", f"{MGMT_ROOT_ADDR6}/64", "dev", MGMT_IF, "nodad"])
    run(["ip", "link", "set", MGMT_IF, "up"])
    run(["ip", "addr", "replace", f"{MGMT_RELAY_ADDR}/24", "dev", "mgmt0"], netns=RELAY.netns)
    enable_ipv6(RELAY.netns, "mgmt0", True)
    run(["ip", "-6", "addr", "replace", f"{MGMT_RELAY_ADDR6}/64", "dev", "mgmt0", "nodad"],
        netns=RELAY.netns)  # fmt: skip
    run(["ip", "link", "set", "mgmt0", "up"], netns=RELAY.netns)


def hand_ports_to_kernel() -> None:
    """The switch is gone: a Linux router namespace takes its ports (fallback tests)."""
    _setup_kernel_forwarder()


def _setup_kernel_forwarder() -> None:
    """Development stand-in for the switch: a Linux router namespace owning the ports."""
    _ensure_ns(FWD_NS)
    sysctl("net.ipv4.ip_forward", "1", netns=FWD_NS)
    sysctl("net.ipv6.conf.all.forwarding", "1", netns=FWD_NS)
    for h in HOSTS:
        if link_exists(h.sw_if):
            run(["ip", "link", "set", h.sw_if, "netns", FWD_NS])
        run(["ip", "addr", "replace", f"{h.gateway}/{h.prefix}", "dev", h.sw_if], netns=FWD_NS)
        enable_ipv6(FWD_NS, h.sw_if, True)
        sysctl(f"net.ipv6.conf.{h.sw_if}.forwarding", "1", netns=FWD_NS)
        v6 = h.v6
        run(["ip", "-6", "addr", "replace", f"{v6.gateway}/{v6.prefix}", "dev", h.sw_if,
             "nodad"], netns=FWD_NS)  # fmt: skip
        run(["ip", "link", "set", h.sw_if, "up"], netns=FWD_NS)
        sysctl(f"net.ipv4.conf.{h.sw_if}.forwarding", "1", netns=FWD_NS)


def up(forwarder: str = "switch") -> list[PortInfo]:
    """Build (or complete) the testbed; returns the switch's port plan."""
    if forwarder not in ("switch", "kernel"):
        raise ValueError(f"forwarder must be 'switch' or 'kernel', not {forwarder!r}")
    if forwarder == "switch" and FWD_NS in namespaces():
        down()  # a kernel-forwarder testbed holds the ports; start over
    for h in HOSTS:
        if forwarder == "kernel" and link_exists(h.sw_if, netns=FWD_NS):
            continue
        setup_host(h, h.v6)
    _setup_nat()
    _setup_mgmt()
    plan = ports()
    if forwarder == "kernel":
        _setup_kernel_forwarder()
    return plan


def ports() -> list[PortInfo]:
    out: list[PortInfo] = []
    for h in HOSTS:
        where = None if link_exists(h.sw_if) else FWD_NS
        out.append(
            PortInfo(
                host=h.name,
                port=h.port,
                ifname=h.sw_if,
                subnet=h.subnet,
                host_addr=h.addr,
                switch_mac=mac_of(h.sw_if, netns=where),
                host_mac=mac_of(HOST_IF, netns=h.netns),
                subnet6=h.v6.subnet,
                host_addr6=h.addr6,
            )
        )
    return out


def down() -> None:
    """Remove every namespace and link of the testbed; safe to run any time."""
    present = set(namespaces())
    for ns in ALL_NAMESPACES:
        if ns in present:
            # Kill what still runs inside (a crashed demo), then the namespace.
            pids = run(["ip", "netns", "pids", ns], check=False).split()
            for pid in pids:
                ok(["kill", "-KILL", pid])
            run(["ip", "netns", "del", ns], check=False)
    for ifname in (*(h.sw_if for h in HOSTS), MGMT_IF, "p4r-natlan", "p4r-natlan-h"):
        if link_exists(ifname):
            run(["ip", "link", "del", ifname], check=False)


def is_up() -> bool:
    present = set(namespaces())
    return all(h.netns in present for h in HOSTS) and NATUAC_NS in present


def set_rate(host: str, rate_kbit: int | None, *, limit_pkts: int = 100) -> None:
    """Shape the switch port towards `host` (egress of p4r-sw-<host>); None removes it.

    A token bucket with a bounded queue: below the offered load the queue fills,
    delay rises and the excess is dropped, as on a congested switch port.
    """
    ifname = f"p4r-sw-{host}"
    where = None if link_exists(ifname) else FWD_NS
    run(["tc", "qdisc", "del", "dev", ifname, "root"], check=False, netns=where)
    if rate_kbit is None:
        return
    if rate_kbit <= 0:
        raise ValueError("rate must be positive (kbit/s)")
    burst = max(1600, rate_kbit * 1000 // 8 // 100)  # ~10 ms worth, at least one frame
    run(
        [
            "tc",
            "qdisc",
            "add",
            "dev",
            ifname,
            "root",
            "handle",
            "1:",
            "tbf",
            "rate",
            f"{rate_kbit}kbit",
            "burst",
            str(burst),
            "limit",
            str(limit_pkts * 1500),
        ],
        netns=where,
    )


def main(argv: list[str] | None = None) -> int:
    import argparse

    p = argparse.ArgumentParser(
        prog="p4relay-testbed",
        description="Build or remove the p4relay namespace testbed (README's address plan).",
    )
    sub = p.add_subparsers(dest="cmd", required=True)
    u = sub.add_parser("up", help="create or complete the testbed; prints the switch port plan")
    u.add_argument(
        "--forwarder",
        choices=["switch", "kernel"],
        default="switch",
        help="switch: ports stay in the root ns for the software switch; "
        "kernel: a Linux router namespace forwards instead (development only)",
    )
    sub.add_parser("down", help="remove the testbed (also after a crash)")
    sub.add_parser("ports", help="print the switch port plan as JSON")
    r = sub.add_parser("rate", help="shape the switch port towards a host (tc tbf)")
    r.add_argument("host", choices=[h.name for h in HOSTS])
    r.add_argument("kbit", help="rate in kbit/s, or 'off'")
    args = p.parse_args(argv)
    if args.cmd == "up":
        print(json.dumps([asdict(x) for x in up(args.forwarder)], indent=2))
    elif args.cmd == "down":
        down()
    elif args.cmd == "ports":
        print(json.dumps([asdict(x) for x in ports()], indent=2))
    elif args.cmd == "rate":
        set_rate(args.host, None if args.kbit == "off" else int(args.kbit))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
