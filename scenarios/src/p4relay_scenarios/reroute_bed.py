"""The three-switch testbed of congestion reroute: three software switches,
s1-s2 direct and s1-s3-s2 around. Hosts are built by topology.py's
`setup_host` (the same namespace, veth, gateway and neighbour steps as the
single-switch testbed); this module adds the switch-to-switch links, which
switch owns which port, and the routes.

Two layouts of the same fabric:

`BED` (streams; namespaces `p4r3-<name>`, beside the single-switch testbed):

```
 p4r3-uac  198.18.11.10 ─ 1 ┐          ┌ 1 ─ p4r3-uas  198.18.12.10
 p4r3-xsrc 198.18.13.10 ─ 2 ┤  s1 ─3─3─ s2 ├ 2 ─ p4r3-xdst 198.18.14.10
                            └4          4┘
                              \\        /
                               1─ s3 ─2
```

`STACK` (SIP calls): topology.py's hosts around it — relay, UAC, NAT and
attacker behind s1 (their usual port numbers), the UAS behind s2 — with the
cross-traffic hosts `p4r-xsrc` (s1) and `p4r-xdst` (s2); s1-s2 by port 7,
s1-s3 by s1's port 8, s2-s3 by s2's port 8. The stack (stack.py, `fabric`)
runs s1 as its switch, so rtpagent offloads calls to s1 as on one switch.

The s1-s2 link is the bottleneck (s1's port towards s2 shaped by
`--port-rate`); the cross-traffic hosts (iperf3) share it with the UAC's
media to the UAS. s1 watches the UAS subnet with the backup next hop by s3
(`reroute_config`). Switch-to-switch links are veth pairs in the root
namespace named `<prefix>-<switch>-<peer>`. Addresses stay inside the
namespaces.
"""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass

from p4relay_switch import Entry, Lpm, SwitchClient

from p4relay_scenarios import topology
from p4relay_scenarios.netns import link_exists, mac_of, namespaces, ok, run
from p4relay_scenarios.topology import HOST_IF, quiet_switch_port, setup_host, tx_csum_off


@dataclass(frozen=True)
class BedHost:
    name: str
    switch: str
    port: int
    addr: str
    netns: str
    sw_if: str
    prefix: int = 24

    @property
    def subnet(self) -> str:
        return str(ipaddress.IPv4Network(f"{self.addr}/{self.prefix}", strict=False))

    @property
    def gateway(self) -> str:
        return self.addr.rsplit(".", 1)[0] + ".1"


def _bed_host(name: str, switch: str, port: int, addr: str) -> BedHost:
    return BedHost(name, switch, port, addr, f"p4r3-{name}", f"p4r3-{switch}-{name}")


def _stack_host(h: topology.Host, switch: str) -> BedHost:
    return BedHost(h.name, switch, h.port, h.addr, h.netns, h.sw_if, h.prefix)


# (switch, port, peer switch, peer port); the first link is the bottleneck
Link = tuple[str, int, str, int]


def link_if(switch: str, peer: str, layout: Layout) -> str:
    return f"{layout.link_prefix}-{switch}-{peer}"


def link_port(switch: str, peer: str, layout: Layout) -> int:
    """The port of `switch` on its direct link to `peer`."""
    for a, pa, b, pb in layout.links:
        if (a, b) == (switch, peer):
            return pa
        if (b, a) == (switch, peer):
            return pb
    raise KeyError(f"no link {switch}-{peer}")


@dataclass(frozen=True)
class Layout:
    hosts: tuple[BedHost, ...]
    links: tuple[Link, ...]
    link_prefix: str  # switch-to-switch veths: <prefix>-<switch>-<peer>
    uac: BedHost
    uas: BedHost
    xsrc: BedHost
    xdst: BedHost
    own_hosts: tuple[str, ...]  # hosts this module builds and removes (the rest: topology.py)

    @property
    def bottleneck(self) -> tuple[str, int]:
        return self.links[0][0], self.links[0][1]

    @property
    def backup_nexthop(self) -> int:
        """s1's next hop by s3 (nexthop id = port)."""
        return link_port("s1", "s3", self)


_UAC = _bed_host("uac", "s1", 1, "198.18.11.10")
_XSRC = _bed_host("xsrc", "s1", 2, "198.18.13.10")
_UAS = _bed_host("uas", "s2", 1, "198.18.12.10")
_XDST = _bed_host("xdst", "s2", 2, "198.18.14.10")
BED = Layout(
    hosts=(_UAC, _XSRC, _UAS, _XDST),
    links=(("s1", 3, "s2", 3), ("s1", 4, "s3", 1), ("s2", 4, "s3", 2)),
    link_prefix="p4r3",
    uac=_UAC,
    uas=_UAS,
    xsrc=_XSRC,
    xdst=_XDST,
    own_hosts=("uac", "xsrc", "uas", "xdst"),
)

_SXSRC = BedHost("xsrc", "s1", 6, "198.18.13.10", "p4r-xsrc", "p4r-sw-xsrc")
_SXDST = BedHost("xdst", "s2", 6, "198.18.14.10", "p4r-xdst", "p4r-sw-xdst")
STACK = Layout(
    hosts=(
        *(_stack_host(h, "s2" if h is topology.UAS else "s1") for h in topology.HOSTS),
        _SXSRC,
        _SXDST,
    ),
    links=(("s1", 7, "s2", 7), ("s1", 8, "s3", 1), ("s2", 8, "s3", 2)),
    link_prefix="p4r",
    uac=_stack_host(topology.UAC, "s1"),
    uas=_stack_host(topology.UAS, "s2"),
    xsrc=_SXSRC,
    xdst=_SXDST,
    own_hosts=("xsrc", "xdst"),
)

# The streams bed's names, as its experiments use them.
UAC, XSRC, UAS, XDST = BED.uac, BED.xsrc, BED.uas, BED.xdst
HOSTS = BED.hosts
LINKS = BED.links
SWITCHES = ("s1", "s2", "s3")
BOTTLENECK = BED.bottleneck
BACKUP_NEXTHOP = BED.backup_nexthop


def switch_ports(switch: str, layout: Layout = BED) -> dict[int, str]:
    """dev_port -> interface of one switch (its softswitch's --port N=IF)."""
    ports = {h.port: h.sw_if for h in layout.hosts if h.switch == switch}
    for a, pa, b, pb in layout.links:
        if a == switch:
            ports[pa] = link_if(a, b, layout)
        if b == switch:
            ports[pb] = link_if(b, a, layout)
    return dict(sorted(ports.items()))


def up(layout: Layout = BED) -> None:
    """Creates what is missing (idempotent). With `STACK`, topology.up() has
    built topology.py's hosts; this adds the cross-traffic hosts and links."""
    for h in layout.hosts:
        if h.name in layout.own_hosts:
            setup_host(h)
    for a, _, b, _ in layout.links:
        ia, ib = link_if(a, b, layout), link_if(b, a, layout)
        if not (link_exists(ia) and link_exists(ib)):
            for i in (ia, ib):
                if link_exists(i):
                    run(["ip", "link", "del", i])
            run(["ip", "link", "add", ia, "type", "veth", "peer", "name", ib])
        for i in (ia, ib):
            quiet_switch_port(i)
            tx_csum_off(None, i)


def down(layout: Layout = BED) -> None:
    """Removes this module's hosts and links (also after a crash)."""
    present = set(namespaces())
    for h in layout.hosts:
        if h.name not in layout.own_hosts:
            continue
        if link_exists(h.sw_if):
            run(["ip", "link", "del", h.sw_if], check=False)
        if h.netns in present:
            for pid in run(["ip", "netns", "pids", h.netns], check=False).split():
                ok(["kill", "-KILL", pid])
            run(["ip", "netns", "del", h.netns], check=False)
    for a, _, b, _ in layout.links:
        if link_exists(link_if(a, b, layout)):
            run(["ip", "link", "del", link_if(a, b, layout)], check=False)


def peer_mac(switch: str, port: int, layout: Layout) -> str:
    """MAC of what is at the other end of a switch port (host or switch)."""
    for h in layout.hosts:
        if h.switch == switch and h.port == port:
            return mac_of(HOST_IF, netns=h.netns)
    for a, pa, b, pb in layout.links:
        if a == switch and pa == port:
            return mac_of(link_if(b, a, layout))
        if b == switch and pb == port:
            return mac_of(link_if(a, b, layout))
    raise KeyError(f"{switch} has no port {port}")


def routes(switch: str, layout: Layout = BED) -> dict[str, int]:
    """subnet -> port: hosts on their own switch; another switch's hosts by
    the direct link to it (s1-s2 for each other's, s3 to either)."""
    return {
        h.subnet: h.port if h.switch == switch else link_port(switch, h.switch, layout)
        for h in layout.hosts
    }


async def program(switch: str, address: str, layout: Layout = BED) -> None:
    """One next hop per port (id = port) and the routes of `routes`."""
    ports = switch_ports(switch, layout)
    async with SwitchClient(address, client_id=31) as sw:
        await sw.insert_or_modify(
            "pipe.Ingress.nexthop",
            [
                Entry(
                    {"ig_md.nexthop_id": p},
                    "Ingress.forward",
                    {"port": p, "src_mac": mac_of(ifname), "dst_mac": peer_mac(switch, p, layout)},
                )
                for p, ifname in ports.items()
            ],
        )
        await sw.insert_or_modify(
            "pipe.Ingress.ipv4_lpm",
            [
                Entry(
                    {"hdr.ipv4.dst_addr": Lpm(net.split("/")[0], int(net.split("/")[1]))},
                    "Ingress.set_nexthop",
                    {"nexthop_id": port},
                )
                for net, port in routes(switch, layout).items()
            ],
        )


def reroute_controlplane(
    address: str,
    *,
    t_q_us: float,
    m: int,
    hold_ms: int,
    switch_name: str = "s1",
    layout: Layout = BED,
) -> dict[str, object]:
    """s1's `p4relay-controlplane` settings with only its `[reroute]` section
    (`program` writes the bed's routes; a section left out is not managed)."""
    rr = reroute_config(
        address, t_q_us=t_q_us, m=m, hold_ms=hold_ms, switch_name=switch_name, layout=layout
    )
    return {
        "switch": rr.pop("switch"),
        "grpc_address": rr.pop("grpc_address"),
        "metrics_listen": "",
        "reroute": rr,
    }


def reroute_config(
    address: str,
    *,
    t_q_us: float,
    m: int,
    hold_ms: int,
    switch_name: str = "s1",
    layout: Layout = BED,
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
                "prefix": layout.uas.subnet,
                "slot": 0,
                "flow_class": 1,
                "primary_port": layout.bottleneck[1],
                "backup_nexthop_id": layout.backup_nexthop,
                "backup_port": layout.backup_nexthop,
            }
        ],
    }
