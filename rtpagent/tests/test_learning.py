"""Which source a stream latches to (RTP Bleed): early media, a slow caller, a
NAT'd caller, and an attacker racing each, through the offloader's public
interface (the switch's learn digests in, entries and events out)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass, field

import pytest
from fakeswitch import FakeSwitch, port_of
from p4relay_switch import Endpoint as SwEndpoint
from p4relay_switch import FlowKey, LearnEvent
from p4relay_testsupport import wait_for
from prometheus_client import REGISTRY
from rtpagent.learning import Learner, LearnPolicy, Verdict
from rtpagent.offload import Offloader
from rtpagent.planner import PortBinding
from rtpagent.state import Endpoint, OffloadState, Session, SessionTable, Stream

RELAY = "127.0.0.1"
CALLER_PORT, CALLEE_PORT = 36002, 36000  # relay ports the caller / callee send to
ATTACKER = ("198.18.4.10", 4000)
WINDOW_MS = 300


@dataclass
class Rig:
    fake: FakeSwitch
    table: SessionTable
    off: Offloader
    events: list[tuple[str, dict[str, object]]] = field(default_factory=list)
    digests: int = 0  # learn digests put in the switch's event queue
    digests_before: float = field(default_factory=lambda: digests_handled())

    def call(self, caller: tuple[str, int], callee: tuple[str, int]) -> Session:
        """A call whose callee (stream 0) and caller (stream 1) are both signalled."""
        s = Session("bleed", "f;1", to_tag="t;1")
        s.streams = [
            Stream(port=CALLEE_PORT, laddr=RELAY, sdp=Endpoint(*callee)),
            Stream(port=CALLER_PORT, laddr=RELAY, sdp=Endpoint(*caller)),
        ]
        self.table.add(s)
        self.off.touch(s)
        return s

    def packet(self, src: tuple[str, int], relay_port: int, port: int | None = None) -> None:
        """The switch's learn digest for a packet from `src` to a relay port
        that no relay entry matched, arriving on switch port `port` (default:
        the port `src` is routed to)."""
        self.digests += 1
        self.fake.queue.put_nowait(
            LearnEvent(
                SwEndpoint.of(*src),
                SwEndpoint.of(RELAY, relay_port),
                port_of(src[0]) if port is None else port,
            )
        )

    def refused(self) -> list[dict[str, object]]:
        return [p for k, p in self.events if k == "learn_refused"]

    def caller_relay(self) -> FlowKey | None:
        return next(
            (k for k, r in self.fake.relays.items() if k.dst_port == CALLER_PORT and not r.rtcp),
            None,
        )


async def rig_with(
    learn_policy: LearnPolicy = LearnPolicy.STRICT, port_binding: PortBinding = PortBinding.ROUTE
) -> Rig:
    fake = FakeSwitch()
    table = SessionTable()
    off = Offloader(
        table,
        fake,
        learn_window_ms=WINDOW_MS,
        learn_policy=learn_policy,
        port_binding=port_binding,
    )
    r = Rig(fake, table, off)
    off.listeners.append(lambda kind, _s, payload: r.events.append((kind, payload)))
    off.start()
    await off.refresh_routes()
    return r


@pytest.fixture
async def rig() -> AsyncIterator[Rig]:
    r = await rig_with()
    yield r
    await r.off.stop()


def refused_total() -> float:
    return sum(
        REGISTRY.get_sample_value("rtpagent_learn_refused_total", {"reason": why}) or 0.0
        for why in ("not_signalled_address", "several_sources")
    )


def digests_handled() -> float:
    return REGISTRY.get_sample_value("rtpagent_learn_digests_total") or 0.0


async def settle(rig: Rig) -> None:
    """Every digest sent so far handled, and what it changed on the switch:
    the switch's events are handled one after another, so once a last digest
    (for no relay port) is taken up, the ones before it are done."""
    rig.packet(ATTACKER, 1)
    await wait_for(lambda: digests_handled() - rig.digests_before >= rig.digests)
    await rig.off.drained()


async def test_early_media_attacker_before_caller_is_refused(rig: Rig) -> None:
    """The callee's media starts first; a stranger sends to the caller's relay
    port before the caller: the stream is not handed to him, the guard keeps
    dropping his packets, and the refusal is reported."""
    before = refused_total()
    s = rig.call(caller=("198.18.1.10", 6000), callee=("198.18.2.10", 7000))
    await rig.off.drained()
    assert s.state is OffloadState.OFFLOADED  # signalled addresses are trusted
    rig.packet(ATTACKER, CALLER_PORT)
    await wait_for(lambda: rig.refused())
    await settle(rig)
    assert s.streams[1].learned is None
    assert rig.caller_relay() == FlowKey(
        "198.18.1.10", RELAY, 6000, CALLER_PORT, port_of("198.18.1.10")
    )
    assert len(rig.fake.guards) == 4  # the guard keeps the stranger out
    ev = rig.refused()[0]
    assert ev["source"] == "198.18.4.10:4000" and ev["expected"] == "198.18.1.10:6000"
    assert ev["policy"] == "strict" and ev["relay_port"] == CALLER_PORT
    assert refused_total() - before == 1
    # The caller's own first packet, from another port of its address (a NAT): latched.
    rig.packet(("198.18.1.10", 61000), CALLER_PORT)
    await wait_for(
        lambda: (
            rig.caller_relay()
            == FlowKey("198.18.1.10", RELAY, 61000, CALLER_PORT, port_of("198.18.1.10"))
        )
    )
    assert s.streams[1].learned == Endpoint("198.18.1.10", 61000)


async def test_slow_caller_attacker_never_latched(rig: Rig) -> None:
    """A caller silent for longer than the learning window: a stranger sending
    all along is still refused (a signalled public address is never replaced
    by another address)."""
    s = rig.call(caller=("198.18.1.10", 6000), callee=("198.18.2.10", 7000))
    await rig.off.drained()
    for _ in range(3):
        rig.packet(ATTACKER, CALLER_PORT)  # the learn filter reports a flow again
        await asyncio.sleep(WINDOW_MS / 1000 * 1.5)  # the caller's silence outlasts a window
    await settle(rig)
    assert s.streams[1].learned is None
    assert rig.caller_relay() == FlowKey(
        "198.18.1.10", RELAY, 6000, CALLER_PORT, port_of("198.18.1.10")
    )
    assert [e["source"] for e in rig.refused()] == ["198.18.4.10:4000"]  # reported once


async def test_natted_caller_latches_after_the_window(rig: Rig) -> None:
    """A signalled address inside the NAT nets: the party's real source is the
    only one seen over the window, then it is latched and offloaded."""
    s = rig.call(caller=("10.0.0.5", 6000), callee=("198.18.2.10", 7000))
    await rig.off.drained()
    assert s.state is OffloadState.LEARNING and not rig.fake.relays
    sent = time.monotonic()
    rig.packet(("198.18.3.10", 40000), CALLER_PORT)
    await settle(rig)
    # The window opens when the packet's digest is handled, after `sent`: a
    # busy host may take the window's length to settle, and then it may latch.
    if time.monotonic() - sent < WINDOW_MS / 1000:
        assert s.streams[1].learned is None  # not before the window closes
    await wait_for(lambda: rig.caller_relay() is not None, within=WINDOW_MS / 1000 + 2)
    assert rig.caller_relay() == FlowKey(
        "198.18.3.10", RELAY, 40000, CALLER_PORT, port_of("198.18.3.10")
    )
    assert next(iter(rig.table)).state is OffloadState.OFFLOADED and not rig.refused()


async def test_attacker_racing_natted_caller_refused_both(rig: Rig) -> None:
    """A stranger and the NAT'd caller in the same window: neither is latched
    (the call stays on RTPProxy); a later window with only the caller latches."""
    s = rig.call(caller=("10.0.0.5", 6000), callee=("198.18.2.10", 7000))
    await rig.off.drained()
    rig.packet(ATTACKER, CALLER_PORT)
    rig.packet(("198.18.3.10", 40000), CALLER_PORT)
    await wait_for(lambda: len(rig.refused()) == 2, within=WINDOW_MS / 1000 + 2)
    assert s.streams[1].learned is None and not rig.fake.relays
    assert {e["reason"] for e in rig.refused()} == {"several_sources"}
    rig.packet(("198.18.3.10", 40000), CALLER_PORT)  # the stranger gave up
    await wait_for(lambda: rig.caller_relay() is not None, within=WINDOW_MS / 1000 + 2)
    assert s.streams[1].learned == Endpoint("198.18.3.10", 40000)


async def test_strangers_rtcp_does_not_latch_a_learning_stream(rig: Rig) -> None:
    s = rig.call(caller=("10.0.0.5", 6000), callee=("198.18.2.10", 7000))
    await rig.off.drained()
    rig.packet((ATTACKER[0], ATTACKER[1] + 1), CALLER_PORT + 1)
    await settle(rig)
    assert s.streams[1].learned_rtcp is None


async def test_first_policy_latches_the_first_source() -> None:
    """`--learn-policy first`: RTPProxy's own rule (the stranger wins the race)."""
    rig = await rig_with(learn_policy=LearnPolicy.FIRST)
    try:
        s = rig.call(caller=("198.18.1.10", 6000), callee=("198.18.2.10", 7000))
        await rig.off.drained()
        rig.packet(ATTACKER, CALLER_PORT)
        await wait_for(lambda: s.streams[1].learned is not None)
        assert s.streams[1].learned == Endpoint(*ATTACKER)
    finally:
        await rig.off.stop()


async def test_spoofed_caller_on_another_port_is_refused(rig: Rig) -> None:
    """A stranger behind port 4 sends with the caller's own address and port:
    the relay entries stay bound to the caller's port (1), nothing is
    latched, and the spoof is reported with the port it came in on."""
    s = rig.call(caller=("198.18.1.10", 6000), callee=("198.18.2.10", 7000))
    await rig.off.drained()
    bound = FlowKey("198.18.1.10", RELAY, 6000, CALLER_PORT, 1)
    assert rig.caller_relay() == bound
    rig.packet(("198.18.1.10", 6000), CALLER_PORT, port=4)
    rig.packet(("198.18.1.10", 6001), CALLER_PORT + 1, port=4)
    await wait_for(lambda: len(rig.refused()) == 2)
    await settle(rig)
    assert {(e["reason"], e["ingress_port"]) for e in rig.refused()} == {("ingress_port", 4)}
    assert s.streams[1].learned is None and s.streams[1].learned_rtcp is None
    assert rig.caller_relay() == bound
    assert s.streams[1].ingress_port == 1


async def test_spoofed_natted_source_on_another_port_is_not_latched(rig: Rig) -> None:
    """A NAT'd caller's public source spoofed from port 4 during learning does
    not open or join the window; the real source on its route's port latches."""
    s = rig.call(caller=("10.0.0.5", 6000), callee=("198.18.2.10", 7000))
    await rig.off.drained()
    rig.packet(("198.18.3.10", 40000), CALLER_PORT, port=4)
    rig.packet(("198.18.3.10", 40000), CALLER_PORT)
    await wait_for(lambda: rig.caller_relay() is not None, within=WINDOW_MS / 1000 + 2)
    assert rig.caller_relay() == FlowKey("198.18.3.10", RELAY, 40000, CALLER_PORT, 3)
    assert [e["reason"] for e in rig.refused()] == ["ingress_port"]
    assert s.state is OffloadState.OFFLOADED


async def test_digest_before_the_routes_are_read_is_deferred(rig: Rig) -> None:
    """Route binding with the switch's routes not read yet: a digest is neither
    latched nor reported as spoofed (the learn filter reports it again)."""
    rig.off.planner.routes = None
    s = rig.call(caller=("10.0.0.5", 6000), callee=("198.18.2.10", 7000))
    await rig.off.drained()
    rig.packet(("198.18.3.10", 40000), CALLER_PORT)
    await asyncio.sleep(WINDOW_MS / 1000 * 1.5)  # a window would have closed by now
    await settle(rig)
    assert s.streams[1].learned is None and not rig.refused() and not rig.fake.relays
    await rig.off.refresh_routes()
    rig.packet(("198.18.3.10", 40000), CALLER_PORT)
    await wait_for(lambda: rig.caller_relay() is not None, within=WINDOW_MS / 1000 + 2)


async def test_learned_binding_takes_the_first_packets_port() -> None:
    """`--port-binding learned`: a signalled caller waits for its first packet
    and is bound to the port it arrived on; the same source on another port
    afterwards is refused."""
    rig = await rig_with(port_binding=PortBinding.LEARNED)
    try:
        s = rig.call(caller=("198.18.1.10", 6000), callee=("198.18.2.10", 7000))
        await rig.off.drained()
        assert s.state is OffloadState.LEARNING and not rig.fake.relays
        rig.packet(("198.18.2.10", 7000), CALLEE_PORT, port=2)
        rig.packet(("198.18.1.10", 6000), CALLER_PORT, port=5)
        await wait_for(lambda: rig.caller_relay() is not None)
        assert rig.caller_relay() == FlowKey("198.18.1.10", RELAY, 6000, CALLER_PORT, 5)
        rig.packet(("198.18.1.10", 6000), CALLER_PORT, port=4)
        await wait_for(lambda: rig.refused())
        assert rig.refused()[0]["reason"] == "ingress_port"
        assert rig.caller_relay() == FlowKey("198.18.1.10", RELAY, 6000, CALLER_PORT, 5)
    finally:
        await rig.off.stop()


def test_learner_windows() -> None:
    caller, other = Endpoint("198.18.3.10", 40000), Endpoint("198.18.4.10", 4000)
    nat = Endpoint("10.0.0.5", 6000)
    ln = Learner(LearnPolicy.STRICT, window_s=1.0)
    # Same address as signalled (any port): at once.
    assert ln.judge("u", 1, Endpoint("10.0.0.5", 1), nat, False, 0.0).verdict is Verdict.LATCH
    # Untrusted: a window; one source -> latch; a window that expired starts over.
    first = ln.judge("u", 1, caller, nat, False, 0.0)
    assert first.verdict is Verdict.WAIT and first.opened == 0.0
    assert ln.judge("u", 1, caller, nat, False, 0.5).opened is None  # same window
    assert ln.candidate("u", 1) == caller
    j = ln.window_closed("u", 1, 0.0)
    assert j is not None and j.verdict is Verdict.LATCH
    assert ln.window_closed("u", 1, 0.0) is None
    ln.judge("u", 1, caller, nat, False, 0.0)
    again = ln.judge("u", 1, other, nat, False, 2.0)  # after the window: a new one
    assert again.opened == 2.0 and ln.candidate("u", 1) == other
    # The first window's timer, late: it must not close the second window.
    assert ln.window_closed("u", 1, 0.0) is None
    ln.judge("u", 1, caller, nat, False, 2.5)
    j = ln.window_closed("u", 1, 2.0)
    assert j is not None and j.verdict is Verdict.REFUSE and list(j.refused) == [other, caller]
    # Trusted and different: refused at once.
    pub = Endpoint("198.18.1.10", 6000)
    assert ln.judge("u", 1, other, pub, True, 0.0).verdict is Verdict.REFUSE
    assert ln.note_refused("u", "a", 2) and not ln.note_refused("u", "a", 2)
    assert ln.note_refused("u", "b", 2) and not ln.note_refused("u", "c", 2)
    ln.forget("u")
    assert ln.refused("u") == []
