"""The three-switch testbed of congestion reroute, built with topology.py's
helpers: three software switches, s1-s2 direct and s1-s3-s2 around.

```
 p4r3-uac  198.18.11.10 ─ 1 ┐          ┌ 1 ─ p4r3-uas  198.18.12.10
 p4r3-xsrc 198.18.13.10 ─ 2 ┤  s1 ─3─3─ s2 ├ 2 ─ p4r3-xdst 198.18.14.10
                            └4          4┘
                              \\        /
                               1─ s3 ─2
```

The s1-s2 link is the bottleneck (s1's port 3 shaped by `--port-rate`); the
cross-traffic hosts (iperf3) share it with the UAC's media to the UAS. s1
watches the UAS subnet with the backup next hop by s3 (`reroute_config`).
Hosts are namespaces `p4r3-<name>`; switch ports are veths in the root
namespace named `p4r3-<switch>-<peer>`, so this bed lives beside the
single-switch one (`p4r-*`). Addresses stay inside the namespaces.
"""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass

from p4relay_switch import Entry, Lpm, SwitchClient

from p4relay_scenarios.netns import link_exists, mac_of, namespaces, run, sysctl
from p4relay_scenarios.topology import (
    HOST_IF,
    _ensure_ns,
    _ensure_veth,
    _quiet_switch_port,
    _tx_csum_off,
)


@dataclass(frozen=True)
class BedHost:
    name: str
    switch: str
    port: int
    addr: str

    @property
    def netns(self) -> str:
        return f"p4r3-{self.name}"

    @property
    def sw_if(self) -> str:
        return f"p4r3-{self.switch}-{self.name}"

    @property
    def subnet(self) -> str:
        return str(ipaddress.IPv4Network(f"{self.addr}/24", strict=False))

    @property
    def gateway(self) -> str:
        return self.addr.rsplit(".", 1)[0] + ".1"


UAC = BedHost("uac", "s1", 1, "198.18.11.10")
XSRC = BedHost("xsrc", "s1", 2, "198.18.13.10")
UAS = BedHost("uas", "s2", 1, "198.18.12.10")
XDST = BedHost("xdst", "s2", 2, "198.18.14.10")
HOSTS = (UAC, XSRC, UAS, XDST)
# (switch, port, peer switch, peer port)
LINKS = (("s1", 3, "s2", 3), ("s1", 4, "s3", 1), ("s2", 4, "s3", 2))
SWITCHES = ("s1", "s2", "s3")
BOTTLENECK = ("s1", 3)
BACKUP_NEXTHOP = 4  # s1's next hop by s3 (nexthop id = port)


def link_if(switch: str, peer: str) -> str:
    return f"p4r3-{switch}-{peer}"


def switch_ports(switch: str) -> dict[int, str]:
    """dev_port -> interface of one switch (its softswitch's --port N=IF)."""
    ports = {h.port: h.sw_if for h in HOSTS if h.switch == switch}
    for a, pa, b, pb in LINKS:
        if a == switch:
            ports[pa] = link_if(a, b)
        if b == switch:
            ports[pb] = link_if(b, a)
    return dict(sorted(ports.items()))


def up() -> None:
    """Creates what is missing (idempotent)."""
    for h in HOSTS:
        _ensure_ns(h.netns)
        _ensure_veth(h.sw_if, h.netns, HOST_IF)
        _quiet_switch_port(h.sw_if)
        run(["ip", "addr", "replace", f"{h.addr}/24", "dev", HOST_IF], netns=h.netns)
        run(["ip", "link", "set", HOST_IF, "up"], netns=h.netns)
        sysctl("net.ipv6.conf.all.disable_ipv6", "1", netns=h.netns)
        run(["ip", "route", "replace", "default", "via", h.gateway, "dev", HOST_IF], netns=h.netns)
        run(
            [
                "ip",
                "neigh",
                "replace",
                h.gateway,
                "lladdr",
                mac_of(h.sw_if),
                "dev",
                HOST_IF,
                "nud",
                "permanent",
            ],
            netns=h.netns,
        )
        _tx_csum_off(h.netns, HOST_IF)
    for a, _, b, _ in LINKS:
        ia, ib = link_if(a, b), link_if(b, a)
        if not (link_exists(ia) and link_exists(ib)):
            for i in (ia, ib):
                if link_exists(i):
                    run(["ip", "link", "del", i])
            run(["ip", "link", "add", ia, "type", "veth", "peer", "name", ib])
        for i in (ia, ib):
            _quiet_switch_port(i)
            _tx_csum_off(None, i)


def down() -> None:
    for h in HOSTS:
        if link_exists(h.sw_if):
            run(["ip", "link", "del", h.sw_if], check=False)
    for a, _, b, _ in LINKS:
        if link_exists(link_if(a, b)):
            run(["ip", "link", "del", link_if(a, b)], check=False)
    for ns in namespaces():
        if ns.startswith("p4r3-"):
            run(["ip", "netns", "del", ns], check=False)


def _peer_mac(switch: str, port: int) -> str:
    """MAC of what is at the other end of a switch port (host or switch)."""
    for h in HOSTS:
        if h.switch == switch and h.port == port:
            return mac_of(HOST_IF, netns=h.netns)
    for a, pa, b, pb in LINKS:
        if a == switch and pa == port:
            return mac_of(link_if(b, a))
        if b == switch and pb == port:
            return mac_of(link_if(a, b))
    raise KeyError(f"{switch} has no port {port}")


def routes(switch: str) -> dict[str, int]:
    """subnet -> port: hosts on their own switch; s1 and s2 reach each
    other's hosts directly, s3 by the port towards the host's switch."""
    out: dict[str, int] = {}
    for h in HOSTS:
        if h.switch == switch:
            out[h.subnet] = h.port
        elif switch == "s3":
            out[h.subnet] = 1 if h.switch == "s1" else 2
        else:
            out[h.subnet] = 3
    return out


async def program(switch: str, address: str) -> None:
    """One next hop per port (id = port) and the routes of `routes`."""
    ports = switch_ports(switch)
    async with SwitchClient(address, client_id=31) as sw:
        await sw.insert_or_modify(
            "pipe.Ingress.nexthop",
            [
                Entry(
                    {"ig_md.nexthop_id": p},
                    "Ingress.forward",
                    {"port": p, "src_mac": mac_of(ifname), "dst_mac": _peer_mac(switch, p)},
                )
                for p, ifname in ports.items()
            ],
        )
        await sw.insert_or_modify(
            "pipe.Ingress.ipv4_lpm",
            [
                Entry(
                    {"hdr.ipv4.dst_addr": Lpm(net.split("/")[0], 24)},
                    "Ingress.set_nexthop",
                    {"nexthop_id": port},
                )
                for net, port in routes(switch).items()
            ],
        )


def reroute_config(
    address: str, *, t_q_us: float, m: int, hold_ms: int, switch_name: str = "s1"
) -> dict[str, object]:
    """s1's `[reroute]` table: the UAS subnet watched, backup by s3; class 0
    marks the bottleneck hot for cross traffic too."""
    return {
        "switch": switch_name,
        "grpc_address": address,
        "poll_ms": 50,
        "classes": [
            {"flow_class": 0, "t_q_us": t_q_us, "m": 1, "hold_ms": hold_ms},
            {"flow_class": 1, "t_q_us": t_q_us, "m": m, "hold_ms": hold_ms},
        ],
        "watch": [
            {
                "prefix": UAS.subnet,
                "slot": 0,
                "flow_class": 1,
                "primary_port": BOTTLENECK[1],
                "backup_nexthop_id": BACKUP_NEXTHOP,
                "backup_port": BACKUP_NEXTHOP,
            }
        ],
    }
