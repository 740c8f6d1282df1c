"""Idle timeout notifications, and the per-leg RTP quality registers."""

from __future__ import annotations

import time

from p4rbase import HOST_IP, RELAY_IP, P4RelayTest, forwarded, rtp_payload, udp_packet
from p4relay_switch import RelayIdle
from p4relay_switch import pipeline as pl
from scapy.packet import Packet

# Jitter tolerance: send timing from Python over veth is noisy by ~1-2 ms;
# 40 RTP units at 8 kHz = 5 ms.
JITTER_TOLERANCE_UNITS = 40


class IdleTimeoutNotify(P4RelayTest):
    """Entries idle for their $ENTRY_TTL are reported once; a busy entry is not."""

    def runTest(self) -> None:
        call = self.call()
        ttl_ms = 1500  # generous: a loaded CI machine may pause the sender
        self.calls.install(call, ttl_ms=ttl_ms)
        rows = self.tables.read(pl.RELAY)
        ttls = [r.data[pl.TTL] for r in rows]
        self.assertTrue(all(isinstance(t, int) and 0 < t <= ttl_ms for t in ttls), rows)
        busy = udp_packet(
            in_port=1,
            src=HOST_IP[1],
            dst=RELAY_IP,
            sport=6000,
            dport=20000,
            payload=rtp_payload(1, 160),
        )
        idle: list[RelayIdle] = []
        end = time.monotonic() + 4.0
        while time.monotonic() < end:
            self.send(1, busy)
            idle.extend(self.idle(0.2))
        self.dataplane.flush()
        got = sorted((str(r.src), str(r.dst)) for r in idle)
        want = sorted(
            (f"{d.src.addr}:{d.src.port + k}", f"{d.relay.addr}:{d.relay.port + k}")
            for d in call.directions
            for k in (0, 1)
            if not (d is call.a_to_b and k == 0)
        )
        self.assertEqual(got, want)
        # now the busy one goes idle too, once
        later = self.idle(3.5)
        self.assertEqual(
            [(str(r.src), str(r.dst)) for r in later],
            [(f"{HOST_IP[1]}:6000", f"{RELAY_IP}:20000")],
        )
        # entries are reported, not deleted: the control plane decides
        self.assertEqual(self.tables.usage(pl.RELAY), 4)


class QualityBase(P4RelayTest):
    def rtp(self, seq: int, ts: int, pt: int = 8) -> Packet:
        return udp_packet(
            in_port=1,
            src=HOST_IP[1],
            dst=RELAY_IP,
            sport=6000,
            dport=20000,
            payload=rtp_payload(seq, ts, pt=pt),
            ip_id=seq,
        )

    def send_rtp(self, seq: int, ts: int, pt: int = 8) -> None:
        pkt = self.rtp(seq, ts, pt)
        self.send(1, pkt)
        self.expect(forwarded(pkt, 2, src=RELAY_IP, dst=HOST_IP[2], sport=20002, dport=7000), 2)


class QualityLossReorder(QualityBase):
    """Loss and reordering exactly, with sequence wrap-around."""

    def runTest(self) -> None:
        call = self.call()
        self.calls.install(call)
        leg = call.a_to_b.leg
        # 100 101 102 [103 104 lost] 105 106 | 104 late (reordered) | 107 [108..110 lost] 111
        seqs = [100, 101, 102, 105, 106, 104, 107, 111]
        for s in seqs:
            self.send_rtp(s, s * 160)
        q = self.calls.quality([leg])[leg]
        self.assertEqual(q.packets, len(seqs))
        self.assertEqual(q.lost, 2 + 3)
        self.assertEqual(q.reordered, 1)
        self.assertEqual(q.max_seq, 111)
        self.assertEqual(q.payload_type, 8)
        self.assertGreater(q.last_seen_ms, 0)
        # the other direction saw nothing
        other = self.calls.quality([call.b_to_a.leg])[call.b_to_a.leg]
        self.assertEqual((other.packets, other.lost, other.reordered), (0, 0, 0))

        # wrap: 65534 65535 0 1 is no loss; a new leg index starts from zero
        call2 = self.call(legs=(20, 21), a_port=6100, b_port=7100)
        self.calls.install(call2)
        for s in (65534, 65535, 0, 1, 3):
            pkt = udp_packet(
                in_port=1,
                src=HOST_IP[1],
                dst=RELAY_IP,
                sport=6100,
                dport=20000,
                payload=rtp_payload(s, s * 160, pt=0),
            )
            self.send(1, pkt)
            self.expect(forwarded(pkt, 2, src=RELAY_IP, dst=HOST_IP[2], sport=20002, dport=7100), 2)
        q2 = self.calls.quality([20])[20]
        self.assertEqual((q2.packets, q2.lost, q2.reordered, q2.max_seq), (5, 1, 0, 3))
        self.assertEqual(q2.payload_type, 0)


class QualityJitter(QualityBase):
    """RFC 3550 jitter: ~0 for evenly paced packets; ~160 units (20 ms) when
    arrivals alternate 0 ms / 40 ms apart for 20 ms of media each."""

    def runTest(self) -> None:
        call = self.call()
        self.calls.install(call)
        leg = call.a_to_b.leg
        t0 = time.monotonic()
        for i in range(30):  # paced: 20 ms apart, timestamps 160 apart
            while time.monotonic() < t0 + i * 0.020:
                time.sleep(0.0005)
            self.send_rtp(1000 + i, i * 160)
        q = self.calls.quality([leg])[leg]
        self.assertLess(q.jitter_units, JITTER_TOLERANCE_UNITS, q)

        call2 = self.call(legs=(30, 31), a_port=6200, b_port=7200)
        self.calls.install(call2)
        n = 60
        t0 = time.monotonic()
        at = 0.0
        for i in range(n):
            at += 0.0 if i % 2 else 0.040  # pairs: 40 ms gap, then back-to-back
            while time.monotonic() < t0 + at:
                time.sleep(0.0005)
            pkt = udp_packet(
                in_port=1,
                src=HOST_IP[1],
                dst=RELAY_IP,
                sport=6200,
                dport=20000,
                payload=rtp_payload(i, i * 160),
            )
            self.send(1, pkt)
        self.dataplane.flush()
        q2 = self.calls.quality([30])[30]
        # |D| = 160 units every packet; J -> 160 * (1 - (15/16)^(n-1)) ~ 157
        expected = 160 * (1 - (15 / 16) ** (n - 1))
        self.assertAlmostEqual(q2.jitter_units, expected, delta=JITTER_TOLERANCE_UNITS)
        self.assertEqual(q2.packets, n)
