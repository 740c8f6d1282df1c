"""IPv4 forwarding: LPM -> next hop, MAC rewrite, TTL, default route, port stats."""

from __future__ import annotations

import bfrt_grpc.client as gc
from p4rbase import HOST_IP, P4RelayTest, forwarded, udp_packet
from p4relay_switch import pipeline as pl
from scapy.layers.inet import IP
from scapy.layers.l2 import Dot1Q, Ether


class Forward(P4RelayTest):
    """Port 1 -> 198.18.2.10 leaves port 2 with next-hop MACs, TTL - 1, valid checksum."""

    def runTest(self) -> None:
        for ttl in (64, 2, 255):
            pkt = udp_packet(
                in_port=1, src=HOST_IP[1], dst=HOST_IP[2], sport=5000, dport=5001, ttl=ttl
            )
            self.send(1, pkt)
            self.expect(forwarded(pkt, 2), 2)
        # and the other way, and to the relay server's subnet
        pkt = udp_packet(in_port=2, src=HOST_IP[2], dst=HOST_IP[1], sport=9, dport=9)
        self.send(2, pkt)
        self.expect(forwarded(pkt, 1), 1)
        pkt = udp_packet(in_port=4, src=HOST_IP[4], dst=HOST_IP[3], sport=9, dport=9)
        self.send(4, pkt)
        self.expect(forwarded(pkt, 3), 3)
        self.expect_nothing()


class LongestPrefixWins(P4RelayTest):
    """A /32 beats the /24 it lies in; deleting it falls back to the /24."""

    def runTest(self) -> None:
        # As a P4 Studio test writes it: the address as a string, by annotation.
        lpm = self.bfrt_info.table_get(pl.IPV4_LPM)
        lpm.info.key_field_annotation_add(pl.K_DST_ADDR, "ipv4")
        key = lpm.make_key([gc.KeyTuple(pl.K_DST_ADDR, HOST_IP[2], prefix_len=32)])
        data = lpm.make_data([gc.DataTuple("nexthop_id", 4)], pl.A_SET_NEXTHOP)
        lpm.entry_add(self.target, [key], [data])
        pkt = udp_packet(in_port=1, src=HOST_IP[1], dst=HOST_IP[2], sport=1, dport=2)
        self.send(1, pkt)
        self.expect(forwarded(pkt, 4), 4)
        lpm.entry_del(self.target, [key])
        self.send(1, pkt)
        self.expect(forwarded(pkt, 2), 2)
        self.expect_nothing()


class TtlExpiry(P4RelayTest):
    """TTL 1 and 0 are dropped (never forwarded with TTL 0 or wrapped to 255)."""

    def runTest(self) -> None:
        for ttl in (1, 0):
            pkt = udp_packet(
                in_port=1, src=HOST_IP[1], dst=HOST_IP[2], sport=5000, dport=5001, ttl=ttl
            )
            self.send(1, pkt)
        self.expect_nothing(1.0)
        # the switch still forwards afterwards
        ok = udp_packet(in_port=1, src=HOST_IP[1], dst=HOST_IP[2], sport=5000, dport=5001)
        self.send(1, ok)
        self.expect(forwarded(ok, 2), 2)


class DefaultRoute(P4RelayTest):
    """No route: dropped. With 0.0.0.0/0 -> port 4: forwarded there."""

    def runTest(self) -> None:
        dst = "198.18.99.10"
        pkt = udp_packet(in_port=1, src=HOST_IP[1], dst=dst, sport=1, dport=2)
        self.send(1, pkt)
        self.expect_nothing(1.0)
        self.add_routes([("0.0.0.0/0", 4)])
        self.send(1, pkt)
        self.expect(forwarded(pkt, 4), 4)
        # specific routes still win over the default
        pkt2 = udp_packet(in_port=1, src=HOST_IP[1], dst=HOST_IP[2], sport=1, dport=2)
        self.send(1, pkt2)
        self.expect(forwarded(pkt2, 2), 2)
        self.expect_nothing()


class DropAction(P4RelayTest):
    """A route to a next hop whose action is drop, and a route to an absent next hop."""

    def runTest(self) -> None:
        nexthop = self.bfrt_info.table_get(pl.NEXTHOP)
        nexthop.entry_add(
            self.target,
            [nexthop.make_key([gc.KeyTuple(pl.K_NEXTHOP_ID, 77)])],
            [nexthop.make_data([], pl.A_DROP)],
        )
        self.add_routes([("198.18.77.0/24", 77), ("198.18.78.0/24", 78)])
        for dst in ("198.18.77.1", "198.18.78.1"):
            self.send(1, udp_packet(in_port=1, src=HOST_IP[1], dst=dst, sport=1, dport=2))
        self.expect_nothing(1.0)


class VlanTagged(P4RelayTest):
    """An 802.1Q-tagged IPv4 frame is parsed and routed; the tag is kept."""

    def runTest(self) -> None:
        inner = udp_packet(in_port=1, src=HOST_IP[1], dst=HOST_IP[2], sport=1, dport=2)
        pkt = Ether(src=inner[Ether].src, dst=inner[Ether].dst) / Dot1Q(vlan=10) / inner[IP]
        self.send(1, pkt)
        exp = forwarded(inner, 2)
        exp = Ether(src=exp[Ether].src, dst=exp[Ether].dst) / Dot1Q(vlan=10) / exp[IP]
        self.expect(exp, 2)
        self.expect_nothing()


class PortStats(P4RelayTest):
    """$PORT_STAT counts frames and octets in on port 1 and out on port 2."""

    def runTest(self) -> None:
        d1, d2 = self.dev[1], self.dev[2]
        before = self.tables.port_stats([d1, d2])
        pkt = udp_packet(in_port=1, src=HOST_IP[1], dst=HOST_IP[2], sport=1, dport=2)
        n = 20
        for _ in range(n):
            self.send(1, pkt)
            self.expect(forwarded(pkt, 2), 2)
        after = self.tables.port_stats([d1, d2])

        def delta(port: int, name: str) -> int:
            return after[port][name] - before[port][name]

        self.assertEqual(delta(d1, "$FramesReceivedOK"), n)
        self.assertEqual(delta(d2, "$FramesTransmittedOK"), n)
        # octets: the frame, with or without the 4-byte FCS depending on the target
        self.assertIn(delta(d1, "$OctetsReceived"), (n * len(pkt), n * (len(pkt) + 4)))
        self.assertIn(delta(d2, "$OctetsTransmittedTotal"), (n * len(pkt), n * (len(pkt) + 4)))


class PortTable(P4RelayTest):
    """$PORT lists the switch's ports, enabled and up."""

    def runTest(self) -> None:
        ports = self.tables.ports()
        for p in self.dev.values():
            self.assertIn(p, ports)
            self.assertIs(ports[p].get("$PORT_UP"), True, ports[p])
            self.assertIs(ports[p].get("$PORT_ENABLE"), True, ports[p])
