"""INT for IPv6 media (int_telemetry.py's roles, hop and collector): the
source inserts shim, MD header and its hop, a transit adds its hop, the sink
strips and restores, and at every step the UDP checksum stays valid (RFC 8200
8.1 forbids a zero one): each hop folds in what it adds. scapy verifies the
checksum of every packet on the wire between the switches and after the
sink; the stack is checked byte for byte (the hop fields only a switch
knows are read from the packet and checked for range). A sink seeing a hop
over onset in an IPv6 flow's stack sends its notice upstream with the
flow's IPv6 header; the switch with the backup moves the flow.
"""

from __future__ import annotations

import ipaddress
import struct

import ptf.testutils as tu
from int_telemetry import (
    FLAG_ONSET,
    FLAG_ONSET_HOP2,
    INT_DSCP,
    REPORT_PORT,
    SWITCH_ID,
    UPSTREAM_ID,
    IntTest,
    hop,
    payload,
    stack,
)
from p4rbase import HOST_IP6, NET6, forwarded6, udp6_packet
from p4relay_switch import int_telemetry as it
from p4relay_switch.names import A_INT_SINK, INT_WATCH6, REG_INT_HOP_LIMIT
from p4relay_switch.reroute import MOVED, NOTIFIED
from reroute import (
    FROM_INT,
    IP_AT,
    NOTICE,
    NOTICE_UPSTREAM,
    SOURCE_ID,
    IntSinkTest,
    M,
)
from reroute6 import SLOT6, Reroute6Test
from scapy.layers.inet import UDP
from scapy.layers.inet6 import IPv6
from scapy.layers.l2 import Ether
from scapy.packet import Packet

L4 = 14 + 40  # UDP header offset (no VLAN, UDP right after the fixed header)
SHIM = L4 + 8
HOP0 = SHIM + 16  # the newest hop


def udp6_ok(frame: bytes) -> bool:
    """scapy's own sum of the datagram equals the checksum it carries."""
    e = Ether(frame)
    carried = e[UDP].chksum
    del e[UDP].chksum
    return bool(carried != 0 and Ether(bytes(e))[UDP].chksum == carried)


def rechecksum(frame: bytes | bytearray) -> bytes:
    e = Ether(bytes(frame))
    del e[UDP].chksum
    return bytes(Ether(bytes(e)))


def with_int6(pkt: Packet, st: bytes) -> bytes:
    """`pkt` carrying the INT stack `st`: DSCP INT_DSCP in the traffic class
    (ECN kept), lengths grown, the UDP checksum valid."""
    raw = bytes(pkt)
    out = bytearray(raw[:SHIM] + st + raw[SHIM:])
    tc = (INT_DSCP << 2) | (pkt[IPv6].tc & 3)
    struct.pack_into("!I", out, 14, (6 << 28) | (tc << 20) | pkt[IPv6].fl)
    struct.pack_into("!H", out, 18, pkt[IPv6].plen + len(st))
    struct.pack_into("!H", out, L4 + 4, pkt[UDP].len + len(st))
    return rechecksum(out)


def push_hop6(frame: bytes, new_hop: bytes, word: int) -> bytes:
    """A transit's work on an IPv6 INT frame: its hop on top, shim length
    and remaining hops, its word into the path signature, lengths."""
    out = bytearray(frame[:HOP0] + new_hop + frame[HOP0:])
    out[SHIM + 1] += 5
    out[SHIM + 7] -= 1
    flags = struct.unpack_from("!H", out, SHIM + 14)[0] ^ word
    struct.pack_into("!H", out, SHIM + 14, flags)
    for at in (18, L4 + 4):
        struct.pack_into("!H", out, at, struct.unpack_from("!H", out, at)[0] + len(new_hop))
    return rechecksum(out)


def to_host6(
    port: int, *, sport: int = 6000, dport: int = 7000, seq: int = 1, tc: int = 0
) -> Packet:
    p = udp6_packet(
        in_port=1,
        src=HOST_IP6[1],
        dst=HOST_IP6[port],
        sport=sport,
        dport=dport,
        payload=payload(seq),
        tc=tc,
    )
    return Ether(bytes(p))  # checksum filled in


class Int6Test(IntTest):
    """int_telemetry.py's set-up, the hosts' IPv6 routes, host 2's IPv6
    subnet traced (int_watch6)."""

    def setUp(self) -> None:
        super().setUp()
        if not self.tables.has(INT_WATCH6):
            self.skipTest("the target's program has no IPv6 INT watch (no IPv6)")
        self.add_routes6()
        self.tables.insert(INT_WATCH6, [it.flow_watch6(ipaddress.IPv6Network(NET6[2]))])

    def clear_int(self) -> None:
        super().clear_int()
        if self.tables.has(INT_WATCH6):
            self.tables.clear(INT_WATCH6)

    def assert_int6(self, got: bytes, want: bytes) -> None:
        """`got` is `want` but for the newest hop's switch-only fields
        (latency, occupancy, tx bytes: plausible), its checksum valid."""
        self.assertTrue(udp6_ok(got), "UDP checksum on the wire")
        exp = bytearray(want)
        self.assertEqual(len(got), len(exp), "length")
        latency, occ, _tx = struct.unpack_from("!III", got, HOP0 + 8)
        self.assertLess(latency, 1_000_000_000, "hop latency (ns)")
        self.assertLess(occ, 1 << 19, "queue occupancy (cells)")
        exp[HOP0 + 8 : HOP0 + 20] = got[HOP0 + 8 : HOP0 + 20]
        self.assertEqual(got.hex(), rechecksum(exp).hex())


class Int6SourceTransitSink(Int6Test):
    """An IPv6 call's packet through source, transit (and a transit with no
    hop left: the E bit) and sink: a valid UDP checksum at every hop, the
    stack's hops, and after the sink the datagram the source received."""

    def runTest(self) -> None:
        p = to_host6(2, tc=(46 << 2) | 1)
        self.send(1, p)
        s1 = self.receive(2)
        fw = forwarded6(p, 2)
        st = stack(
            [hop(SWITCH_ID, self.dev[1], self.dev[2])],
            dscp=46,
            udp_csum=fw[UDP].chksum,  # the datagram's own, kept for the sink
            flags=SWITCH_ID & 0x0FFF,
        )
        self.assert_int6(s1, with_int6(fw, st))
        # a transit (next hop 2 still leads to an INT switch): its hop on top
        self.send(1, s1)
        s2 = self.receive(2)
        want = push_hop6(
            bytes(forwarded6(Ether(s1), 2)), hop(SWITCH_ID, self.dev[1], self.dev[2]), SWITCH_ID
        )
        self.assert_int6(s2, want)
        self.assertEqual(s2[HOP0 + 20 : HOP0 + 40], s1[HOP0 : HOP0 + 20], "the source's hop below")
        # no hop left: the E bit, counted, the checksum still valid
        before = self.counter(REG_INT_HOP_LIMIT)
        self.send(1, s2)
        s3 = self.receive(2)
        self.assertTrue(udp6_ok(s3), "UDP checksum with the E bit")
        self.assertEqual(s3[SHIM + 4] & 0x04, 0x04, "E bit")
        self.assertEqual(len(s3), len(s2))
        self.assertEqual(self.counter(REG_INT_HOP_LIMIT), before + 1)
        # the sink: stripped, DSCP and checksum back
        self.set_role(2, A_INT_SINK)
        self.send(1, s2)
        out = self.receive(2)
        want_out = forwarded6(forwarded6(forwarded6(p, 2), 2), 2)
        self.assertTrue(udp6_ok(out), "UDP checksum after the sink")
        self.assertEqual(out.hex(), bytes(want_out).hex())
        self.assertEqual(Ether(out)[UDP].chksum, p[UDP].chksum, "the source's checksum")
        # its report carries the IPv6 INT frame as it left the sink's ingress
        rep = Ether(self.receive(3))
        self.assertEqual(rep[UDP].dport, REPORT_PORT)
        md_len = bytes(rep[UDP].payload)[8 + 2]
        self.assertEqual(rep[UDP].len, 8 + 8 + 12 + 4 * md_len + len(s2))


class Int6SinkNoticeMovesFlow(IntSinkTest, Reroute6Test):
    """An IPv6 flow whose INT stack marks a hop at/over onset is hot at its
    sink: m packets in a row send one notice upstream with the flow's IPv6
    header, from_int and the hop named; the switch with the backup moves the
    flow on it, and its next packet leaves by the backup."""

    def runTest(self) -> None:
        if not self.tables.has(INT_WATCH6):
            self.skipTest("the target's program has no IPv6 INT watch (no IPv6)")
        self.watch6(backup=True)
        self.dataplane.flush()
        flags = (SOURCE_ID ^ UPSTREAM_ID) | FLAG_ONSET | FLAG_ONSET_HOP2
        for i in range(M + 2):
            p = udp6_packet(
                in_port=1,
                src=HOST_IP6[1],
                dst=HOST_IP6[2],
                sport=4000,
                dport=4001,
                payload=payload(i),
            )
            p = Ether(bytes(p))
            up = hop(UPSTREAM_ID, 7, 8, latency=180_000, occ=5000)
            src = hop(SOURCE_ID, 5, 6, latency=180_000, occ=3)
            st = stack([up, src], dscp=0, udp_csum=p[UDP].chksum, flags=flags)
            self.send(1, with_int6(p, st))
            r = tu.dp_poll(self, device_number=0, port_number=2, timeout=2.0)
            self.assertIsInstance(r, self.dataplane.PollSuccess, "the stripped packet")
            out = bytes(r.packet)
            self.assertTrue(udp6_ok(out))
            self.assertEqual(out.hex(), bytes(forwarded6(p, 2)).hex())
        r = tu.dp_poll(self, device_number=0, port_number=1, timeout=2.0)
        self.assertIsInstance(r, self.dataplane.PollSuccess, "no notice upstream")
        n = bytes(r.packet)
        kind, _cls, word, slot, run, _d, hop_id, hop_port = struct.unpack(NOTICE, n[14:IP_AT])
        self.assertEqual(
            (kind, word & FROM_INT, word & 0x1FF, slot, run, hop_id, hop_port),
            (NOTICE_UPSTREAM, FROM_INT, self.dev[1], SLOT6, M, UPSTREAM_ID, 8),
        )
        ip = IPv6(n[IP_AT : IP_AT + 40])
        self.assertEqual((ip.src, ip.dst), (HOST_IP6[1], HOST_IP6[2]))
        self.assertEqual(
            [(e.kind, e.slot, e.from_int, e.hop) for e in self.events(1.0)],
            [(NOTIFIED, SLOT6, True, (UPSTREAM_ID, 8))],
        )
        # upstream: the switch with the backup takes it from the primary's port
        self.send(2, n)
        self.expect_nothing(timeout=0.3)
        self.assertTrue(self.moved(SLOT6))
        self.assertEqual([(e.kind, e.from_int) for e in self.events(1.0)], [(MOVED, True)])
        p = udp6_packet(in_port=1, src=HOST_IP6[1], dst=HOST_IP6[2], sport=4000, dport=4001)
        self.send(1, p)
        self.expect(forwarded6(p, 3), 3)
