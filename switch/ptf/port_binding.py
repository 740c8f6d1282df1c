"""A leg is bound to the switch port its party's packets arrive on: the
party's exact address and ports sent from another port (a spoofed source)
miss the relay entry, so they are never relayed to the other party nor
counted as the party's media. Unguarded they reach the relay server as any
unmatched flow does (with a digest naming the port they came in on); with
the call's relay ports guarded they are dropped and counted there.

Binding is per port (pipe.IngressParser.$PORT_METADATA, field `unbound`):
with it off, a leg installed with UNBOUND_PORT is relayed from any unbound
port; with it on (explicitly, or no entry), only from its own port."""

from __future__ import annotations

from learning import LearnBase
from p4rbase import HOST_IP, RELAY_IP, forwarded, rtp_payload, udp_packet
from p4relay_switch import Endpoint, RelayCall
from p4relay_switch import pipeline as pl
from scapy.packet import Packet

ATTACKER_PORT = 4


def spoof(seq: int, *, src_port: int = 6000, relay_port: int = 20000) -> Packet:
    """The caller's own flow (HOST_IP[1]:6000 -> relay), sent from port 4."""
    return udp_packet(
        in_port=ATTACKER_PORT,
        src=HOST_IP[1],
        dst=RELAY_IP,
        sport=src_port,
        dport=relay_port,
        payload=rtp_payload(seq, seq * 160, ssrc=0xBAD),
        ip_id=seq,
    )


class SpoofedSourceOtherPortNotRelayed(LearnBase):
    def runTest(self) -> None:
        call = self.call()
        self.calls.install(call)
        for seq in range(5):
            bad = spoof(seq)
            self.send(ATTACKER_PORT, bad)
            # to the relay server, unchanged: the callee never sees it
            self.expect(forwarded(bad, 3), 3)
        rtcp = spoof(0, src_port=6001, relay_port=20001)
        self.send(ATTACKER_PORT, rtcp)
        self.expect(forwarded(rtcp, 3), 3)
        self.expect_nothing()
        # reported once per flow, with the port it arrived on
        self.assertEqual(
            sorted(
                (str(e.src.addr), e.src.port, e.dst.port, e.ingress_port) for e in self.learned(1.0)
            ),
            [
                (HOST_IP[1], 6000, 20000, self.dev[ATTACKER_PORT]),
                (HOST_IP[1], 6001, 20001, self.dev[ATTACKER_PORT]),
            ],
        )
        # nothing of it counted as the caller's media
        counts = self.calls.counters(call)
        self.assertEqual(counts[call.a_to_b.leg].packets, 0)
        q = self.calls.quality([call.a_to_b.leg])
        self.assertEqual(q[call.a_to_b.leg].packets, 0)
        # the caller's packets on its own port are relayed
        self.relay_round_trip(1)
        self.expect_nothing()


class SpoofedSourceOtherPortGuarded(LearnBase):
    def runTest(self) -> None:
        call = self.call()
        self.calls.install(call, guard=True)
        for seq in range(5):
            self.send(ATTACKER_PORT, spoof(seq))
        self.expect_nothing()
        drops = self.calls.guard_drops(call)
        self.assertEqual(drops[call.a_to_b.leg], 5)
        self.assertEqual(
            [(e.src.port, e.ingress_port) for e in self.learned(1.0)],
            [(6000, self.dev[ATTACKER_PORT])],
        )
        self.relay_round_trip(1)
        self.expect_nothing()
        self.assertEqual(self.calls.guard_drops(call)[call.a_to_b.leg], 5)


class SpoofedCopyDoesNotSuppressThePartysDigest(LearnBase):
    """The learn filter's flow includes the ingress port: a spoofed copy of a
    party's not yet installed flow, sent first from another port, does not
    silence the party's own digest (which names the party's port)."""

    def runTest(self) -> None:
        bad = spoof(1)
        self.send(ATTACKER_PORT, bad)
        self.expect(forwarded(bad, 3), 3)
        own = udp_packet(
            in_port=1,
            src=HOST_IP[1],
            dst=RELAY_IP,
            sport=6000,
            dport=20000,
            payload=rtp_payload(1, 160),
        )
        self.send(1, own)
        self.expect(forwarded(own, 3), 3)
        self.assertEqual(
            sorted(e.ingress_port for e in self.learned(1.0)),
            sorted([self.dev[ATTACKER_PORT], self.dev[1]]),
        )
        self.expect_nothing()


def caller_rtp(in_port: int, seq: int) -> Packet:
    """The caller's RTP flow (HOST_IP[1]:6000 -> relay:20000) sent from `in_port`."""
    return udp_packet(
        in_port=in_port,
        src=HOST_IP[1],
        dst=RELAY_IP,
        sport=6000,
        dport=20000,
        payload=rtp_payload(seq, seq * 160),
        ip_id=seq,
    )


def to_callee(pkt: Packet) -> Packet:
    """`pkt` as the relay sends it on to the callee (port 2)."""
    return forwarded(pkt, 2, src=RELAY_IP, dst=HOST_IP[2], sport=20002, dport=7000)


class BindingOffRelaysFromAnyPort(LearnBase):
    """Binding off on every port (asymmetric routing): the call installed
    with UNBOUND_PORT is relayed whichever port its party's packets take,
    counted as the party's, and an unknown flow reports once however many
    ports it arrives on (the learn filter's flow has the bound port), its
    digest naming the real port."""

    def runTest(self) -> None:
        self.set_port_binding(self.dev.values(), bound=False)
        self.assertEqual(self.read_port_binding(), dict.fromkeys(self.dev.values(), False))
        call = RelayCall.between(
            a=Endpoint.of(HOST_IP[1], 6000),
            relay_a=Endpoint.of(RELAY_IP, 20000),
            b=Endpoint.of(HOST_IP[2], 7000),
            relay_b=Endpoint.of(RELAY_IP, 20002),
            legs=(10, 11),
            ports=(pl.UNBOUND_PORT, pl.UNBOUND_PORT),
        )
        self.calls.install(call)
        for seq, port in enumerate((1, 4, 3, 1), start=1):
            pkt = caller_rtp(port, seq)
            self.send(port, pkt)
            self.expect(to_callee(pkt), 2)
        self.relay_round_trip(9)
        self.expect_nothing()
        counts = self.calls.counters(call)
        self.assertEqual(counts[call.a_to_b.leg].packets, 5)
        self.assertEqual(self.learned(0.5), [])
        # not installed: one digest for the flow, from the first port it took
        self.calls.remove(call)
        for port in (4, 1):
            pkt = caller_rtp(port, 20)
            self.send(port, pkt)
            self.expect(forwarded(pkt, 3), 3)
        self.assertEqual([e.ingress_port for e in self.learned(1.0)], [self.dev[4]])
        self.expect_nothing()


class BindingOnRelaysOnlyFromItsPort(LearnBase):
    """Binding on (written explicitly, as `--port-binding route` does): the
    call bound to port 1 is relayed from port 1 only; the same flow from
    port 4 goes to the relay server. A leg installed unbound matches nothing
    while its ports are bound; one port unbound lets only that port's
    packets reach it."""

    def runTest(self) -> None:
        self.set_port_binding(self.dev.values(), bound=True)
        call = self.call()
        self.calls.install(call)
        own = caller_rtp(1, 1)
        self.send(1, own)
        self.expect(to_callee(own), 2)
        spoofed = caller_rtp(4, 2)
        self.send(4, spoofed)
        self.expect(forwarded(spoofed, 3), 3)
        self.expect_nothing()
        counts = self.calls.counters(call)
        self.assertEqual(counts[call.a_to_b.leg].packets, 1)
        self.calls.remove(call)
        unbound = RelayCall.between(
            a=Endpoint.of(HOST_IP[1], 6000),
            relay_a=Endpoint.of(RELAY_IP, 20000),
            b=Endpoint.of(HOST_IP[2], 7000),
            relay_b=Endpoint.of(RELAY_IP, 20002),
            legs=(10, 11),
            ports=(pl.UNBOUND_PORT, pl.UNBOUND_PORT),
        )
        self.calls.install(unbound)
        for seq, port in ((3, 1), (4, 4)):
            pkt = caller_rtp(port, seq)
            self.send(port, pkt)
            self.expect(forwarded(pkt, 3), 3)
        self.set_port_binding([self.dev[4]], bound=False)
        pkt = caller_rtp(4, 5)
        self.send(4, pkt)
        self.expect(to_callee(pkt), 2)
        pkt = caller_rtp(1, 6)
        self.send(1, pkt)
        self.expect(forwarded(pkt, 3), 3)
        self.expect_nothing()
