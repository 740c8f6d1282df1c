"""IPv6: forwarding (ipv6_lpm + nexthop, hop limit, NDP to the CPU port) and
IPv6 relay sessions (relay6_addr, relay6, leg_rewrite6, relay_guard6, learn6):
the 5-tuple rewrite both ways with the UDP checksum recomputed by scapy from
scratch, RTCP, the zero-checksum rules, per-leg counters and quality
registers, the guard and the learn6 digest."""

from __future__ import annotations

import urllib.request

from learning import LearnBase
from p4rbase import (
    HOST_IP6,
    HOST_MAC,
    RELAY6_ID,
    RELAY_IP6,
    RELAY_PORT_MAX,
    RELAY_PORT_MIN,
    SW_MAC,
    P4RelayTest,
    forwarded6,
    param,
    rtp_payload,
    udp6_packet,
)
from p4relay_switch import pipeline as pl
from scapy.layers.inet import UDP
from scapy.layers.inet6 import ICMPv6EchoRequest, ICMPv6ND_NS, IPv6
from scapy.layers.l2 import Ether
from scapy.packet import Packet, Raw

LEARN_FILTER6 = "pipe.Ingress.learn_filter6"
ATTACKER6 = HOST_IP6[4]


def xdp_relayed6() -> int | None:
    """IPv6 packets the software switch's XDP fast path relayed
    (`p4relay_xdp_relayed6_total` at the test parameter `xdp_metrics`, which
    switch/ptf/run.sh gives when the fast path is on); None without it (a
    Tofino, or the software switch with `--xdp off`)."""
    url = param("xdp_metrics", None)
    if not url:
        return None
    with urllib.request.urlopen(str(url), timeout=5) as r:
        text = r.read().decode()
    for line in text.splitlines():
        if line.startswith("p4relay_xdp_relayed6_total "):
            return int(float(line.split()[1]))
    raise AssertionError(f"{url}: no p4relay_xdp_relayed6_total")


class Ipv6Base(LearnBase):
    """Routes for the four hosts' IPv6 subnets, the relay's IPv6 address with
    its media range, and an empty learn_filter6."""

    def setUp(self) -> None:
        super().setUp()
        self.add_routes6()
        self.add_relay6_addr(RELAY_IP6, RELAY_PORT_MIN, RELAY_PORT_MAX, RELAY6_ID)
        size = self.tables.size(LEARN_FILTER6)
        self.tables.write_register(LEARN_FILTER6, dict.fromkeys(range(size), 0))
        self.drain_notifications()

    def a_to_relay(self, seq: int, *, sport: int = 6000, dport: int = 20000) -> Packet:
        """RTP from A to the relay's IPv6 address."""
        return udp6_packet(
            in_port=1,
            src=HOST_IP6[1],
            dst=RELAY_IP6,
            sport=sport,
            dport=dport,
            payload=rtp_payload(seq, seq * 160),
        )


class Ipv6Forwarding(P4RelayTest):
    """Routed by ipv6_lpm through nexthop: MACs rewritten, hop limit - 1, the
    UDP checksum untouched; hop limit <= 1 and unrouted destinations dropped;
    NDP goes to the CPU port, never out of a front port; ICMPv6 echo is routed."""

    def runTest(self) -> None:
        self.add_routes6()
        pkt = udp6_packet(in_port=1, src=HOST_IP6[1], dst=HOST_IP6[2], sport=1234, dport=5678)
        self.send(1, pkt)
        self.expect(forwarded6(pkt, 2), 2)
        last = udp6_packet(
            in_port=4, src=HOST_IP6[4], dst=HOST_IP6[1], sport=1, dport=2, hlim=2, udp_chksum=0
        )
        self.send(4, last)
        exp = forwarded6(last, 1)
        exp[UDP].chksum = 0  # routed, not relayed: nothing rewrites it
        self.expect(Ether(bytes(exp)), 1)
        for hlim in (1, 0):
            self.send(
                1,
                udp6_packet(
                    in_port=1, src=HOST_IP6[1], dst=HOST_IP6[2], sport=1, dport=2, hlim=hlim
                ),
            )
        self.send(
            1, udp6_packet(in_port=1, src=HOST_IP6[1], dst="2001:db8:99::1", sport=1, dport=2)
        )
        ns = (
            Ether(src=HOST_MAC[1], dst="33:33:ff:00:00:01")
            / IPv6(src=HOST_IP6[1], dst="ff02::1:ff00:1", hlim=255)
            / ICMPv6ND_NS(tgt="2001:db8:1::1")
        )
        self.send(1, ns)
        self.expect_nothing()
        echo = (
            Ether(src=HOST_MAC[2], dst=SW_MAC[2])
            / IPv6(src=HOST_IP6[2], dst=HOST_IP6[1], hlim=64)
            / ICMPv6EchoRequest(id=1, seq=1, data=b"ping")
        )
        self.send(2, echo)
        want = echo.copy()
        want[Ether].src, want[Ether].dst = SW_MAC[1], HOST_MAC[1]
        want[IPv6].hlim = 63
        self.expect(Ether(bytes(want)), 1)
        self.expect_nothing()


class Ipv6RelayBothWays(Ipv6Base):
    """A -> R:20000 leaves as R:20002 -> B and back, RTP and RTCP (ports + 1),
    each checksum valid (scapy recomputes it); the leg counters and quality
    registers of an IPv6 call count as an IPv4 call's."""

    def runTest(self) -> None:
        call = self.call6()
        self.calls.install(call)
        fast0 = xdp_relayed6()
        for seq in range(3):
            a = self.a_to_relay(seq)
            self.send(1, a)
            self.expect(
                forwarded6(a, 2, src=RELAY_IP6, dst=HOST_IP6[2], sport=20002, dport=7000), 2
            )
            b = udp6_packet(
                in_port=2,
                src=HOST_IP6[2],
                dst=RELAY_IP6,
                sport=7000,
                dport=20002,
                payload=rtp_payload(10 + seq, seq * 160, ssrc=7, pt=0),
            )
            self.send(2, b)
            self.expect(
                forwarded6(b, 1, src=RELAY_IP6, dst=HOST_IP6[1], sport=20000, dport=6000), 1
            )
        rtcp = udp6_packet(
            in_port=1,
            src=HOST_IP6[1],
            dst=RELAY_IP6,
            sport=6001,
            dport=20001,
            payload=b"\x81\xc9\x00\x07" + b"\x00" * 27,  # odd length
        )
        self.send(1, rtcp)
        self.expect(forwarded6(rtcp, 2, src=RELAY_IP6, dst=HOST_IP6[2], sport=20003, dport=7001), 2)
        self.expect_nothing()
        counts = self.calls.counters(call)
        self.assertEqual(
            {leg: c.packets for leg, c in counts.items()},
            {call.a_to_b.leg: 4, call.b_to_a.leg: 3},
        )
        q = self.calls.quality(list(call.legs))
        self.assertEqual(
            (
                q[call.a_to_b.leg].packets,
                q[call.a_to_b.leg].max_seq,
                q[call.a_to_b.leg].payload_type,
            ),
            (3, 2, 8),
        )
        self.assertEqual(
            (
                q[call.b_to_a.leg].packets,
                q[call.b_to_a.leg].max_seq,
                q[call.b_to_a.leg].payload_type,
            ),
            (3, 12, 0),
        )
        self.assertEqual(q[call.a_to_b.leg].lost, 0)
        # a sequence gap shows as loss on the leg
        a = self.a_to_relay(5)
        self.send(1, a)
        self.expect(forwarded6(a, 2, src=RELAY_IP6, dst=HOST_IP6[2], sport=20002, dport=7000), 2)
        self.assertEqual(self.calls.quality([call.a_to_b.leg])[call.a_to_b.leg].lost, 2)
        self.assertEqual(self.learned(0.3), [])
        if fast0 is not None:
            # every one of the 8 relayed packets took the XDP fast path
            self.assertEqual((xdp_relayed6() or 0) - fast0, 8)


class Ipv6RelayChecksumRules(Ipv6Base):
    """The rewritten checksum is never sent as 0 (a sum of 0 goes out as
    0xffff, RFC 8200); a datagram with checksum 0 (invalid over IPv6) is not
    relayed: routed unchanged to the relay address, no digest."""

    def runTest(self) -> None:
        call = self.call6()
        self.calls.install(call)
        # a payload whose rewritten checksum comes to 0: its last two bytes
        # are the checksum the rewritten datagram has with them zero
        body = rtp_payload(1, 160)[:-2] + b"\x00\x00"
        probe = forwarded6(
            self.a_to_relay(1),
            2,
            src=RELAY_IP6,
            dst=HOST_IP6[2],
            sport=20002,
            dport=7000,
        )
        probe[Raw].load = body
        del probe[UDP].chksum
        fill = Ether(bytes(probe))[UDP].chksum
        a = udp6_packet(
            in_port=1,
            src=HOST_IP6[1],
            dst=RELAY_IP6,
            sport=6000,
            dport=20000,
            payload=body[:-2] + fill.to_bytes(2, "big"),
        )
        exp = forwarded6(a, 2, src=RELAY_IP6, dst=HOST_IP6[2], sport=20002, dport=7000)
        self.assertEqual(exp[UDP].chksum, 0xFFFF)
        fast0 = xdp_relayed6()
        self.send(1, a)
        self.expect(exp, 2)
        zero = udp6_packet(
            in_port=1,
            src=HOST_IP6[1],
            dst=RELAY_IP6,
            sport=6000,
            dport=20000,
            payload=rtp_payload(2, 320),
            udp_chksum=0,
        )
        self.send(1, zero)
        unchanged = forwarded6(zero, 3)
        unchanged[UDP].chksum = 0
        self.expect(Ether(bytes(unchanged)), 3)
        self.expect_nothing()
        self.assertEqual(self.learned(0.3), [])
        if fast0 is not None:
            # the 0xffff one relayed in the kernel; the zero one never
            self.assertEqual((xdp_relayed6() or 0) - fast0, 1)


class Ipv6GuardAndLearn(Ipv6Base):
    """A flow to the relay's IPv6 address with no session is forwarded to the
    relay server and reported once (learn6); once the call is guarded, a
    foreign source to its relay port is dropped, counted on the leg, and still
    reported; the call's own flows keep relaying."""

    def runTest(self) -> None:
        first = self.a_to_relay(0, sport=6100, dport=20010)
        for _ in range(3):
            self.send(1, first)
            self.expect(forwarded6(first, 3), 3)
        events = self.learned(1.0)
        self.assertEqual(
            [
                (str(e.src.addr), e.src.port, str(e.dst.addr), e.dst.port, e.ingress_port)
                for e in events
            ],
            [(HOST_IP6[1], 6100, RELAY_IP6, 20010, self.dev[1])],
        )
        call = self.call6()
        self.calls.install(call, guard=True)
        self.assertEqual(self.tables.usage(pl.RELAY_GUARD6), 4)
        for seq in range(4):
            bad = udp6_packet(
                in_port=4,
                src=ATTACKER6,
                dst=RELAY_IP6,
                sport=40000,
                dport=20002,
                payload=rtp_payload(seq, seq * 160, ssrc=0xBAD),
            )
            self.send(4, bad)
        self.expect_nothing()
        # 20002 is the callee-facing port: b_to_a's
        self.assertEqual(self.calls.guard_drops(call), {call.a_to_b.leg: 0, call.b_to_a.leg: 4})
        events = self.learned(1.0)
        self.assertEqual(
            [(str(e.src.addr), e.src.port, e.dst.port, e.ingress_port) for e in events],
            [(ATTACKER6, 40000, 20002, self.dev[4])],
        )
        a = self.a_to_relay(1)
        self.send(1, a)
        self.expect(forwarded6(a, 2, src=RELAY_IP6, dst=HOST_IP6[2], sport=20002, dport=7000), 2)
        self.calls.remove(call)
        self.assertEqual(self.tables.usage(pl.RELAY6), 0)
        self.assertEqual(self.tables.usage(pl.LEG_REWRITE6), 0)
        self.assertEqual(self.tables.usage(pl.RELAY_GUARD6), 0)
        self.expect_nothing()
