"""Congestion reroute of IPv6 media: a destination watched in reroute_watch6
(the slots and flow classes of reroute_watch) moves to its backup next hop
when m consecutive packets leave the shaped primary over t_q; without a
backup the notice that goes upstream carries the flow's IPv6 header, its
hop limit one less; the upstream switch with the backup moves its flow on
it, only from the primary's port, and a notice whose hop limit ran out ends.
The queue and thresholds are reroute.py's (port 2 shaped to 200 kbit/s)."""

from __future__ import annotations

import ipaddress
import struct

import ptf.testutils as tu
from p4rbase import HOST_IP6, HOST_MAC, SW_MAC, forwarded6, lpm, udp6_packet
from p4relay_switch import Entry
from p4relay_switch.names import (
    A_REROUTE_BACKUP,
    A_REROUTE_NOTIFY,
    K6_DST_ADDR,
    REG_REROUTE_ACTIVE,
    REROUTE_NOTICE_ETHERTYPE,
    REROUTE_WATCH6,
)
from p4relay_switch.reroute import MOVED, NOTIFIED
from reroute import CLASS, FRAME, IP_AT, NOTICE, NOTICE_UPSTREAM, T_Q_NS, M, RerouteTest
from scapy.layers.inet import UDP
from scapy.layers.inet6 import IPv6
from scapy.layers.l2 import Ether

SLOT6 = 6
UAS6 = ipaddress.IPv6Network("2001:db8:2::/64")


class Reroute6Test(RerouteTest):
    """reroute.py's set-up, the hosts' IPv6 routes, an empty reroute_watch6."""

    def setUp(self) -> None:
        super().setUp()
        self.add_routes6()
        self.tables.clear(REROUTE_WATCH6)
        self.tables.write_register(REG_REROUTE_ACTIVE, {SLOT6: 0})

    def tearDown(self) -> None:
        try:
            self.tables.clear(REROUTE_WATCH6)
            self.tables.write_register(REG_REROUTE_ACTIVE, {SLOT6: 0})
        finally:
            super().tearDown()

    def watch6(self, backup: bool) -> None:
        key = {K6_DST_ADDR: lpm(str(UAS6))}
        data = {"slot": SLOT6, "flow_class": CLASS, "primary_port": self.dev[2]}
        if backup:
            e = Entry(key, A_REROUTE_BACKUP, data | {"backup_nexthop_id": 3})
        else:
            e = Entry(key, A_REROUTE_NOTIFY, data)
        self.tables.insert_or_modify(REROUTE_WATCH6, [e])

    def flow6(self, i: int = 0) -> bytes:
        return bytes(
            udp6_packet(
                in_port=1,
                src=HOST_IP6[1],
                dst=HOST_IP6[2],
                sport=4000,
                dport=4001,
                payload=struct.pack("!I", i) + b"6" * (FRAME - 66),
            )
        )

    def burst6(self, k: int) -> None:
        for i in range(k):
            tu.send_packet(self, 1, self.flow6(i))

    def notice6(self, in_port: int, hlim: int = 63) -> bytes:
        ip = IPv6(src=HOST_IP6[1], dst=HOST_IP6[2], hlim=hlim) / UDP(sport=4000, dport=4001)
        body = struct.pack(
            NOTICE, NOTICE_UPSTREAM, CLASS, self.dev[in_port] & 0x1FF, 77, M, 5_000_000, 0, 0
        )
        eth = Ether(src=HOST_MAC[in_port], dst=SW_MAC[in_port], type=REROUTE_NOTICE_ETHERTYPE)
        return bytes(eth) + body + bytes(ip / (b"n" * 40))


class Ipv6FlowMovesByLocalDetection(Reroute6Test):
    """m hot IPv6 packets in a row move the watched IPv6 destination to its
    backup; the digest names the slot (its 32-bit address field is 0 for an
    IPv6 flow); the next packet leaves by the backup, checksum untouched."""

    def runTest(self) -> None:
        self.watch6(backup=True)
        self.dataplane.flush()
        self.burst6(M + 1)
        self.assertEqual(self.count_received(2, timeout=(M + 1) * 0.04 + 1.0), M + 1)
        self.assertTrue(self.moved(SLOT6))
        ev = self.events(1.0)
        self.assertEqual([(e.kind, e.slot, e.run) for e in ev], [(MOVED, SLOT6, M)])
        self.assertEqual(int(ev[0].dst), 0)
        self.assertGreater(ev[0].queue_delay_ns, T_Q_NS)
        p = udp6_packet(in_port=1, src=HOST_IP6[1], dst=HOST_IP6[2], sport=4000, dport=4001)
        self.send(1, p)
        self.expect(forwarded6(p, 3), 3)
        self.assertFalse(self.active(), "the IPv4 watch's slot stays where it was")


class Ipv6NoticeUpstreamAndOn(Reroute6Test):
    """No backup: the notice leaves by the flow's ingress port with the flow's
    IPv6 header (hop limit one less than the packet's). With a backup, an
    upstream IPv6 notice moves the flow from the primary's port only; one
    whose hop limit ran out ends."""

    def runTest(self) -> None:
        self.watch6(backup=False)
        self.dataplane.flush()
        self.burst6(M + 1)
        self.assertEqual(self.count_received(2, timeout=(M + 1) * 0.04 + 1.0), M + 1)
        r = tu.dp_poll(self, device_number=0, port_number=1, timeout=2.0)
        self.assertIsInstance(r, self.dataplane.PollSuccess, "no notice upstream")
        f = bytes(r.packet)
        self.assertEqual(struct.unpack("!H", f[12:14])[0], REROUTE_NOTICE_ETHERTYPE)
        kind, _, port, slot, run, _, _, _ = struct.unpack(NOTICE, f[14:IP_AT])
        self.assertEqual((kind, port & 0x1FF, slot, run), (NOTICE_UPSTREAM, self.dev[1], SLOT6, M))
        ip = IPv6(f[IP_AT : IP_AT + 40])
        self.assertEqual((ip.src, ip.dst), (HOST_IP6[1], HOST_IP6[2]))
        self.assertEqual(ip.hlim, 62, "sent with 64: routed (63), then the notice (62)")
        self.assertEqual([(e.kind, e.slot) for e in self.events(1.0)], [(NOTIFIED, SLOT6)])
        self.assertFalse(self.active(SLOT6))
        # the upstream switch, with the backup
        self.watch6(backup=True)
        self.send(1, self.notice6(1))  # not the primary's port
        self.send(2, self.notice6(2, hlim=1))  # hop limit spent
        self.expect_nothing(timeout=0.3)
        self.assertFalse(self.active(SLOT6))
        self.send(2, self.notice6(2))
        self.expect_nothing(timeout=0.3)  # consumed
        self.assertTrue(self.moved(SLOT6))
        self.assertEqual([(e.kind, e.slot) for e in self.events(1.0)], [(MOVED, SLOT6)])
