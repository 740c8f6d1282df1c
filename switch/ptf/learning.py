"""Learning digest: an unmatched UDP flow to a relay address/port range is
forwarded to the relay server AND reported once; repeats are suppressed until
the suppression ages out (contract: learn_filter_age_ms)."""

from __future__ import annotations

import time
import tomllib
from pathlib import Path

from p4rbase import HOST_IP, RELAY_IP, P4RelayTest, forwarded, udp_packet

_CONTRACT = Path(__file__).resolve().parents[1] / "contract.toml"
LEARN_FILTER = "pipe.Ingress.learn_filter"
with _CONTRACT.open("rb") as _f:
    AGE_S = tomllib.load(_f)["config"]["learn_filter_age_ms"] / 1000.0


class LearnBase(P4RelayTest):
    def setUp(self) -> None:
        super().setUp()
        # Forget flows reported by earlier tests.
        size = self.tables.size(LEARN_FILTER)
        self.tables.write_register(LEARN_FILTER, dict.fromkeys(range(size), 0))
        self.drain_notifications()


class LearnOncePerFlow(LearnBase):
    def runTest(self) -> None:
        pkt = udp_packet(in_port=1, src=HOST_IP[1], dst=RELAY_IP, sport=4242, dport=20010)
        for _ in range(5):
            self.send(1, pkt)
            # still forwarded to the relay server, unchanged but routed
            self.expect(forwarded(pkt, 3), 3)
        events = self.learned(1.0)
        self.assertEqual(len(events), 1, events)
        ev = events[0]
        self.assertEqual(str(ev.src.addr), HOST_IP[1])
        self.assertEqual(ev.src.port, 4242)
        self.assertEqual(str(ev.dst.addr), RELAY_IP)
        self.assertEqual(ev.dst.port, 20010)
        self.assertEqual(ev.ingress_port, self.dev[1])
        # a second flow gets its own digest
        other = udp_packet(in_port=4, src=HOST_IP[4], dst=RELAY_IP, sport=4243, dport=20012)
        self.send(4, other)
        self.expect(forwarded(other, 3), 3)
        events = self.learned(1.0)
        self.assertEqual([(e.src.port, e.ingress_port) for e in events], [(4243, self.dev[4])])
        self.expect_nothing()


class LearnSuppressionAges(LearnBase):
    """The same flow, still not installed, reports again after the age."""

    def runTest(self) -> None:
        pkt = udp_packet(in_port=1, src=HOST_IP[1], dst=RELAY_IP, sport=4300, dport=20020)
        self.send(1, pkt)
        self.assertEqual(len(self.learned(0.5)), 1)
        t0 = time.monotonic()
        self.send(1, pkt)
        self.assertEqual(len(self.learned(0.3)), 0)
        # after the age the flow reports once more
        time.sleep(max(0.0, AGE_S - (time.monotonic() - t0)) + 0.5)
        self.send(1, pkt)
        self.send(1, pkt)
        self.assertEqual(len(self.learned(1.0)), 1)


class LearnOnlyRelayRange(LearnBase):
    """No digest outside the relay port range, to other addresses, or when installed."""

    def runTest(self) -> None:
        outside = udp_packet(in_port=1, src=HOST_IP[1], dst=RELAY_IP, sport=1, dport=19999)
        other_dst = udp_packet(in_port=1, src=HOST_IP[1], dst=HOST_IP[2], sport=1, dport=20000)
        self.send(1, outside)
        self.expect(forwarded(outside, 3), 3)
        self.send(1, other_dst)
        self.expect(forwarded(other_dst, 2), 2)
        call = self.call()
        self.calls.install(call)
        inst = udp_packet(in_port=1, src=HOST_IP[1], dst=RELAY_IP, sport=6000, dport=20000)
        self.send(1, inst)
        self.expect(forwarded(inst, 2, src=RELAY_IP, dst=HOST_IP[2], sport=20002, dport=7000), 2)
        self.assertEqual(self.learned(1.0), [])
        self.expect_nothing()
