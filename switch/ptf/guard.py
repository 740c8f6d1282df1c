"""relay_guard: a foreign source to an offloaded call's relay port is dropped
(not forwarded to the relay server, where it would latch the call's stream),
counted per leg (guard_drops: the leg of the direction the port belongs to),
and still reported once by the learn digest; the
call's own flows keep relaying; unguarded relay ports behave as before."""

from __future__ import annotations

from learning import LearnBase
from p4rbase import HOST_IP, RELAY_IP, forwarded, rtp_payload, udp_packet
from p4relay_switch import pipeline as pl

ATTACKER = HOST_IP[4]


class GuardDropsForeignSource(LearnBase):
    def runTest(self) -> None:
        call = self.call()
        self.calls.install(call, guard=True)
        # foreign RTP to the caller-facing relay port, 5 times: nothing leaves
        for seq in range(5):
            bad = udp_packet(
                in_port=4,
                src=ATTACKER,
                dst=RELAY_IP,
                sport=40000,
                dport=20000,
                payload=rtp_payload(seq, seq * 160, ssrc=0xBAD),
                ip_id=seq,
            )
            self.send(4, bad)
        # and one to the callee-facing RTCP port
        rtcp = udp_packet(
            in_port=4, src=ATTACKER, dst=RELAY_IP, sport=40001, dport=20003, payload=b"\x81\xc9"
        )
        self.send(4, rtcp)
        self.expect_nothing()
        # 20000 is the caller-facing port (a_to_b's), 20003 the callee's RTCP
        drops = self.calls.guard_drops(call)
        self.assertEqual(drops, {call.a_to_b.leg: 5, call.b_to_a.leg: 1})
        # the digest still fires, once per foreign flow
        events = self.learned(1.0)
        self.assertEqual(
            sorted((str(e.src.addr), e.src.port, e.dst.port, e.ingress_port) for e in events),
            [(ATTACKER, 40000, 20000, self.dev[4]), (ATTACKER, 40001, 20003, self.dev[4])],
        )
        # the legitimate flows still relay, both ways, and are not counted as drops
        self.relay_round_trip(1)
        self.expect_nothing()
        self.assertEqual(self.calls.guard_drops(call), {call.a_to_b.leg: 5, call.b_to_a.leg: 1})
        counts = self.calls.counters(call)
        self.assertEqual({leg: c.packets for leg, c in counts.items()}, dict.fromkeys(call.legs, 1))
        self.assertEqual(self.learned(0.5), [])
        # a leg reused by the next call starts with no drops
        self.calls.remove(call)
        self.calls.install(call, guard=True)
        self.assertEqual(self.calls.guard_drops(call), {call.a_to_b.leg: 0, call.b_to_a.leg: 0})


class GuardMissForwardsToRelayServer(LearnBase):
    """An unguarded relay port, and a guarded one after unguard_call, behave as
    without the guard: forwarded to the relay server, learn digest raised."""

    def runTest(self) -> None:
        call = self.call()
        self.calls.install(call)
        self.calls.guard(call)
        other = udp_packet(in_port=4, src=ATTACKER, dst=RELAY_IP, sport=40000, dport=20010)
        self.send(4, other)
        self.expect(forwarded(other, 3), 3)
        self.assertEqual([e.dst.port for e in self.learned(1.0)], [20010])
        # the guard is per relay address: the same port on another address is not guarded
        to_host = udp_packet(in_port=4, src=ATTACKER, dst=HOST_IP[2], sport=40000, dport=20000)
        self.send(4, to_host)
        self.expect(forwarded(to_host, 2), 2)
        self.calls.unguard(call)
        self.assertEqual(self.tables.usage(pl.RELAY_GUARD), 0)
        bad = udp_packet(in_port=4, src=ATTACKER, dst=RELAY_IP, sport=40002, dport=20000)
        self.send(4, bad)
        self.expect(forwarded(bad, 3), 3)
        self.assertEqual([e.src.port for e in self.learned(1.0)], [40002])
        # the call itself is still relayed
        a = udp_packet(in_port=1, src=HOST_IP[1], dst=RELAY_IP, sport=6000, dport=20000)
        self.send(1, a)
        self.expect(forwarded(a, 2, src=RELAY_IP, dst=HOST_IP[2], sport=20002, dport=7000), 2)
        self.expect_nothing()
