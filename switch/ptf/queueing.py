"""Egress queues: a port shaped below the offered load builds a queue, drains
at the set rate, and tail-drops beyond its depth; every packet is accounted.
The RTP quality registers are in Egress (contract v2): a relayed call through
such a port counts exactly its tail-dropped packets as lost."""

from __future__ import annotations

import ptf.testutils as tu
from p4rbase import HOST_IP, RELAY_IP, P4RelayTest, param, rtp_payload, udp_packet

RATE_KBPS = 1000  # 1 Mbit/s: 125 packets/s of 1000 bytes
FRAME = 1000  # bytes on the wire per packet
SENT = 300


class ShapedPortTest(P4RelayTest):
    def tearDown(self) -> None:
        try:
            # 0: unshaped on the softswitch; on Tofino pass line_rate_kbps.
            self.tables.set_port_shaping(self.dev[2], int(param("line_rate_kbps", 0)))
        finally:
            super().tearDown()


class QueueBuildupTailDrop(ShapedPortTest):
    def runTest(self) -> None:
        d2 = self.dev[2]
        depth = int(param("queue_depth", 64))
        self.tables.set_port_shaping(d2, RATE_KBPS)
        q0 = self.tables.queue_stats(d2)
        d1 = self.dev[1]
        s0 = self.tables.port_stats([d1, d2])
        pkt = udp_packet(
            in_port=1,
            src=HOST_IP[1],
            dst=HOST_IP[2],
            sport=1,
            dport=2,
            payload=b"q" * (FRAME - 42),
        )
        self.assertEqual(len(pkt), FRAME)
        for _ in range(SENT):
            self.send(1, pkt)
        during = self.tables.queue_stats(d2)
        # drain and count, keeping arrival times to measure the drain rate
        times: list[float] = []
        while True:
            r = tu.dp_poll(self, device_number=0, port_number=2, timeout=1.0)
            if not isinstance(r, self.dataplane.PollSuccess):
                break
            times.append(r.time)
        q1 = self.tables.queue_stats(d2)
        s1 = self.tables.port_stats([d1, d2])
        received = len(times)
        drops = q1["drop_count_packets"] - q0["drop_count_packets"]

        accepted = s1[d1]["$FramesReceivedOK"] - s0[d1]["$FramesReceivedOK"]
        self.assertGreater(drops, 0, "no tail drop at 1 Mbit/s")
        # every frame the switch took in left or was counted as a tail drop
        self.assertEqual(received + drops, accepted, "packets lost without being counted")
        self.assertEqual(accepted, SENT)
        # the queue held up to its depth (plus what drained while we sent)
        self.assertGreaterEqual(received, depth)
        self.assertLess(received, depth + SENT // 2)
        self.assertGreater(during["usage_cells"], 0)
        self.assertGreaterEqual(q1["watermark_cells"], (depth - 1) * ((FRAME + 79) // 80))
        self.assertEqual(q1["usage_cells"], 0)
        tx = s1[d2]["$FramesTransmittedOK"] - s0[d2]["$FramesTransmittedOK"]
        self.assertEqual(tx, received)
        self.assertEqual(
            s1[d2]["$FramesDroppedBufferFull"] - s0[d2]["$FramesDroppedBufferFull"], drops
        )
        # drain rate: packets left at the shaped rate (within 20%)
        if received > 10:
            span = times[-1] - times[0]
            rate_kbps = (received - 1) * FRAME * 8 / span / 1000
            self.assertAlmostEqual(rate_kbps, RATE_KBPS, delta=RATE_KBPS * 0.2)


class QualityAtEgressCountsTailDrops(ShapedPortTest):
    """A call's RTP burst into a port shaped below its load: rtp_packets counts
    only the packets that left, rtp_loss.lost exactly the ones the queue dropped."""

    def runTest(self) -> None:
        d2 = self.dev[2]
        call = self.call()
        self.calls.install(call)
        leg = call.a_to_b.leg
        self.tables.set_port_shaping(d2, RATE_KBPS)
        q0 = self.tables.queue_stats(d2)

        def rtp(seq: int) -> bytes:
            pkt = udp_packet(
                in_port=1,
                src=HOST_IP[1],
                dst=RELAY_IP,
                sport=6000,
                dport=20000,
                payload=rtp_payload(seq, seq * 160, size=FRAME - 54),
                ip_id=seq,
            )
            return bytes(pkt)

        self.assertEqual(len(rtp(0)), FRAME)
        for seq in range(SENT):
            tu.send_packet(self, 1, rtp(seq))
        received = self.count_received(2, timeout=1.0)
        # One more after the queue drained: its sequence number exposes every
        # gap, including drops at the very end of the burst.
        tu.send_packet(self, 1, rtp(SENT))
        received += self.count_received(2, timeout=1.0)
        q1 = self.tables.queue_stats(d2)
        drops = q1["drop_count_packets"] - q0["drop_count_packets"]
        self.assertGreater(drops, 0, "no tail drop at 1 Mbit/s")
        self.assertEqual(received + drops, SENT + 1)
        q = self.calls.quality([leg])[leg]
        self.assertEqual(q.packets, received, q)
        self.assertEqual(q.lost, drops, q)
        self.assertEqual(q.reordered, 0, q)
        self.assertEqual(q.max_seq, SENT)
        self.assertGreater(q.loss_ratio, 0.0)
        # the queue's delay grew while it filled: jitter far above a paced flow's
        self.assertGreater(q.jitter_ms, 5.0, q)
