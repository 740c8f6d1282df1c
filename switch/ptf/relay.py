"""Relay sessions: 5-tuple rewrite both ways, RTCP (port + 1), checksums, leg counters."""

from __future__ import annotations

from p4rbase import (
    HOST_IP,
    HOST_MAC,
    RELAY_IP,
    SW_MAC,
    P4RelayTest,
    forwarded,
    rtp_payload,
    udp_packet,
)
from p4relay_switch import pipeline as pl
from scapy.layers.inet import IP, UDP, IPOption_RR
from scapy.layers.l2 import Ether
from scapy.packet import Raw


class RelayBothWays(P4RelayTest):
    """A -> R:20000 leaves as R:20002 -> B; B -> R:20002 leaves as R:20000 -> A."""

    def runTest(self) -> None:
        call = self.call()
        self.calls.install(call)
        for seq in range(3):
            self.relay_round_trip(seq, ip_ids=(seq, 100 + seq))
        self.expect_nothing()
        # no digest for installed flows
        self.assertEqual(self.digests(0.5), [])


class RelayRtcp(P4RelayTest):
    """RTCP on RTP port + 1 both ways is rewritten to the other side's ports + 1."""

    def runTest(self) -> None:
        call = self.call()
        self.calls.install(call)
        rtcp = b"\x81\xc9\x00\x07" + b"\x00" * 28  # RR
        a = udp_packet(
            in_port=1, src=HOST_IP[1], dst=RELAY_IP, sport=6001, dport=20001, payload=rtcp
        )
        self.send(1, a)
        self.expect(forwarded(a, 2, src=RELAY_IP, dst=HOST_IP[2], sport=20003, dport=7001), 2)
        b = udp_packet(
            in_port=2, src=HOST_IP[2], dst=RELAY_IP, sport=7001, dport=20003, payload=rtcp
        )
        self.send(2, b)
        self.expect(forwarded(b, 1, src=RELAY_IP, dst=HOST_IP[1], sport=20001, dport=6001), 1)
        self.expect_nothing()
        # RTCP does not touch the quality registers
        q = self.calls.quality([call.a_to_b.leg, call.b_to_a.leg])
        self.assertEqual(q[call.a_to_b.leg].packets, 0)
        self.assertEqual(q[call.b_to_a.leg].packets, 0)


class RelayZeroUdpChecksum(P4RelayTest):
    """A UDP checksum of 0 (none) stays 0 after the rewrite; others stay valid."""

    def runTest(self) -> None:
        self.calls.install(self.call())
        a = udp_packet(
            in_port=1,
            src=HOST_IP[1],
            dst=RELAY_IP,
            sport=6000,
            dport=20000,
            payload=rtp_payload(1, 160),
            udp_chksum=0,
        )
        self.send(1, a)
        exp = forwarded(a, 2, src=RELAY_IP, dst=HOST_IP[2], sport=20002, dport=7000)
        self.assertEqual(exp["UDP"].chksum, 0)
        self.expect(exp, 2)
        # odd-length payload: the incremental update must still be exact
        b = udp_packet(
            in_port=2, src=HOST_IP[2], dst=RELAY_IP, sport=7000, dport=20002, payload=b"x" * 171
        )
        self.send(2, b)
        self.expect(forwarded(b, 1, src=RELAY_IP, dst=HOST_IP[1], sport=20000, dport=6000), 1)
        self.expect_nothing()


class RelayOtherTrafficUntouched(P4RelayTest):
    """Only the exact 5-tuple is relayed: another source port, address or a
    non-UDP packet to the relay is forwarded to the relay server unchanged."""

    def runTest(self) -> None:
        self.calls.install(self.call())
        for src, sport in ((HOST_IP[1], 6002), (HOST_IP[4], 6000)):
            in_port = 1 if src == HOST_IP[1] else 4
            pkt = udp_packet(in_port=in_port, src=src, dst=RELAY_IP, sport=sport, dport=20000)
            self.send(in_port, pkt)
            self.expect(forwarded(pkt, 3), 3)
        self.expect_nothing()


class RelayCounters(P4RelayTest):
    """The leg counts its direction exactly, RTP and RTCP together
    (leg_rewrite's direct counter; relay entries have no counters), whichever
    path relays a packet: plain ones may take the software switch's XDP fast
    path, ones with IPv4 options always its user-space pipeline."""

    def runTest(self) -> None:
        call = self.call()
        self.calls.install(call)
        n_rtp, n_rtcp = 7, 3
        a = udp_packet(
            in_port=1,
            src=HOST_IP[1],
            dst=RELAY_IP,
            sport=6000,
            dport=20000,
            payload=rtp_payload(1, 160),
        )
        c = udp_packet(
            in_port=1, src=HOST_IP[1], dst=RELAY_IP, sport=6001, dport=20001, payload=b"r" * 40
        )
        opts = [IPOption_RR(pointer=4, routers=["0.0.0.0"])]
        slow = [
            Ether(
                bytes(
                    Ether(src=HOST_MAC[1], dst=SW_MAC[1])
                    / IP(src=HOST_IP[1], dst=RELAY_IP, ttl=64, options=opts)
                    / UDP(sport=sport, dport=dport)
                    / Raw(payload)
                )
            )
            for sport, dport, payload in (
                (6000, 20000, rtp_payload(2, 320)),
                (6001, 20001, b"r" * 40),
            )
        ]
        for _ in range(n_rtp):
            self.send(1, a)
            self.expect(forwarded(a, 2, src=RELAY_IP, dst=HOST_IP[2], sport=20002, dport=7000), 2)
        for _ in range(n_rtcp):
            self.send(1, c)
            self.expect(forwarded(c, 2, src=RELAY_IP, dst=HOST_IP[2], sport=20003, dport=7001), 2)
        for s_pkt, (sport, dport) in zip(slow, ((20002, 7000), (20003, 7001)), strict=True):
            self.send(1, s_pkt)
            self.expect(
                forwarded(s_pkt, 2, src=RELAY_IP, dst=HOST_IP[2], sport=sport, dport=dport), 2
            )
        got = self.calls.counters(call)
        fwd, back = got[call.a_to_b.leg], got[call.b_to_a.leg]
        self.assertEqual(fwd.packets, n_rtp + n_rtcp + len(slow))
        frames = n_rtp * len(a) + n_rtcp * len(c) + sum(len(x) for x in slow)
        n = n_rtp + n_rtcp + len(slow)
        self.assertIn(fwd.bytes, (frames, frames + 4 * n))  # with or without the FCS
        self.assertEqual((back.packets, back.bytes), (0, 0))
        # a read of every leg_rewrite entry returns the same counters; relay
        # entries carry none
        rows = self.tables.read(pl.LEG_REWRITE)
        self.assertEqual(
            sorted((r.key[pl.K_LEG], r.data[pl.COUNTER_PKTS]) for r in rows),
            [(call.a_to_b.leg, fwd.packets), (call.b_to_a.leg, 0)],
        )
        relays = self.tables.read(pl.RELAY)
        self.assertEqual(len(relays), 4)
        self.assertFalse(any(pl.COUNTER_PKTS in r.data for r in relays))
        # a leg's counter starts at 0 when its entry is added again
        self.calls.remove(call)
        self.calls.install(call)
        self.assertEqual(self.calls.counters(call)[call.a_to_b.leg].packets, 0)


class RelayRemove(P4RelayTest):
    """After remove_call the flow is forwarded normally (to the relay server)."""

    def runTest(self) -> None:
        call = self.call()
        self.calls.install(call)
        a = udp_packet(in_port=1, src=HOST_IP[1], dst=RELAY_IP, sport=6000, dport=20000)
        self.send(1, a)
        self.expect(forwarded(a, 2, src=RELAY_IP, dst=HOST_IP[2], sport=20002, dport=7000), 2)
        self.calls.remove(call)
        self.assertEqual(self.tables.usage(pl.RELAY), 0)
        self.assertEqual(self.tables.usage(pl.LEG_REWRITE), 0)
        self.send(1, a)
        self.expect(forwarded(a, 3), 3)
        self.expect_nothing()


class RelayModify(P4RelayTest):
    """update_call re-points a leg: the next packet follows the new rewrite."""

    def runTest(self) -> None:
        call = self.call()
        self.calls.install(call)
        moved = self.call(b_port=7100)
        self.calls.update(moved)
        a = udp_packet(in_port=1, src=HOST_IP[1], dst=RELAY_IP, sport=6000, dport=20000)
        self.send(1, a)
        self.expect(forwarded(a, 2, src=RELAY_IP, dst=HOST_IP[2], sport=20002, dport=7100), 2)
        self.expect_nothing()
