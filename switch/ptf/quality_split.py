"""A call on legs of the quality registers' upper halves (a program that
splits them, switch/p4 QUALITY_SPLIT: the large-t2 profile, and the software
switch as run.sh starts it): its RTP is relayed and measured, and its quality
reads the same through P4 Studio's client and through the project's."""

from __future__ import annotations

import asyncio

from p4rbase import HOST_IP, RELAY_IP, P4RelayTest, forwarded, param, rtp_payload, udp_packet
from p4relay_switch import LegQuality, Pipeline, SwitchClient
from p4relay_switch import pipeline as pl


async def project_quality(legs: list[int]) -> dict[int, LegQuality]:
    """The legs' quality as rtpagent reads it (`Pipeline.read_quality`)."""
    host, port = param("grpc_server", "localhost"), param("bfrt_grpc_port", "50052")
    c = SwitchClient(f"{host}:{port}", client_id=9, timeout_s=5)
    await c.connect()
    try:
        return await Pipeline(c).read_quality(legs)
    finally:
        await c.close()


class QualityUpperHalfLeg(P4RelayTest):
    """Legs 2^16 + 10 and 2^16 + 11: relayed, counted in their upper-half
    cells (loss and reordering exact), zeroed by the next call's reset."""

    def runTest(self) -> None:
        split = self.calls.quality_split
        if split is None:
            self.skipTest("the target's program does not split the quality registers")
            return
        call = self.call(legs=(split + 10, split + 11), a_port=6400, b_port=7400)
        self.calls.install(call)
        leg = call.a_to_b.leg
        # the lower half's cell of the same index (another test's leg)
        lower_before = self.tables.register_total(pl.REG_PACKETS, leg - split)
        seqs = [1, 2, 4, 3, 5, 8]  # 3 late, 6 and 7 lost
        for s in seqs:
            pkt = udp_packet(
                in_port=1,
                src=HOST_IP[1],
                dst=RELAY_IP,
                sport=6400,
                dport=20000,
                payload=rtp_payload(s, s * 160, pt=0),
                ip_id=s,
            )
            self.send(1, pkt)
            self.expect(forwarded(pkt, 2, src=RELAY_IP, dst=HOST_IP[2], sport=20002, dport=7400), 2)
        q = self.calls.quality([leg])[leg]
        self.assertEqual((q.packets, q.lost, q.reordered, q.max_seq), (6, 1 + 2, 1, 8))
        self.assertEqual(q.payload_type, 0)
        # the cell is the upper half's, index leg - split; the lower half's
        # cell of that index is left as it was
        hi = pl.REG_PACKETS + pl.QUALITY_HI_SUFFIX
        self.assertEqual(self.tables.register_total(hi, leg - split), 6)
        self.assertEqual(self.tables.register_total(pl.REG_PACKETS, leg - split), lower_before)
        ours = asyncio.run(project_quality([leg, call.b_to_a.leg]))
        self.assertEqual(ours[leg], q)
        self.assertEqual(ours[call.b_to_a.leg].packets, 0)
        # reinstalling resets the legs' cells (the call model's reset_legs)
        self.calls.remove(call)
        self.calls.install(call)
        self.assertEqual(self.calls.quality([leg])[leg].packets, 0)
