"""The offload policy as pure functions: which entries carry a session, and
what makes the switch hold exactly the planned entries."""

from __future__ import annotations

import ipaddress

from fakeswitch import ROUTES, port_of
from p4relay_switch import EntryDump, FlowKey, GuardEntry, GuardKey, LegRewrite, RelayEntry, Routes
from p4relay_switch.names import UNBOUND_PORT
from rtpagent.planner import Planner, PortBinding, reconciliation
from rtpagent.state import Endpoint, OffloadState, Session, Stream


def planner(
    *,
    latch_always: bool = False,
    enabled: bool = True,
    guard: bool = True,
    port_binding: PortBinding = PortBinding.ROUTE,
) -> Planner:
    """A planner that has read the test routes (198.18.N.0/24 behind port N)."""
    p = Planner(latch_always=latch_always, enabled=enabled, guard=guard, port_binding=port_binding)
    p.routes = ROUTES
    return p


def session(caller: str = "198.18.1.10") -> Session:
    s = Session("plan", "f;1", to_tag="t;1")
    s.streams = [
        Stream(port=36000, laddr="127.0.0.1", sdp=Endpoint("198.18.2.10", 7000)),
        Stream(port=36002, laddr="127.0.0.1", sdp=Endpoint(caller, 6000)),
    ]
    return s


def test_plan_of_a_call() -> None:
    p = planner().plan(session(), [1, 2])
    # Leg 1 carries what the callee (stream 0) sends, to the caller.
    assert p.legs == (
        LegRewrite(1, "127.0.0.1", "198.18.1.10", 36002, 6000),
        LegRewrite(2, "127.0.0.1", "198.18.2.10", 36000, 7000),
    )
    assert [r.key for r in p.relays] == [
        FlowKey("198.18.2.10", "127.0.0.1", 7000, 36000, port_of("198.18.2.10")),
        FlowKey("198.18.2.10", "127.0.0.1", 7001, 36001, port_of("198.18.2.10")),
        FlowKey("198.18.1.10", "127.0.0.1", 6000, 36002, port_of("198.18.1.10")),
        FlowKey("198.18.1.10", "127.0.0.1", 6001, 36003, port_of("198.18.1.10")),
    ]
    # Each side's relay ports count their drops on that side's leg.
    assert set(p.guards) == {
        GuardEntry(GuardKey("127.0.0.1", q), leg)
        for q, leg in ((36000, 1), (36001, 1), (36002, 2), (36003, 2))
    }
    assert planner(guard=False).plan(session(), [1, 2]).guards == ()


def test_desired_state() -> None:
    pl = planner()
    assert pl.desired(session(), switch_connected=True) == (OffloadState.OFFLOADED, None)
    assert pl.desired(session(), switch_connected=False) == (
        OffloadState.FALLBACK,
        "switch_unreachable",
    )
    assert pl.desired(session("10.1.2.3"), True) == (OffloadState.LEARNING, None)
    assert planner(latch_always=True).desired(session(), True)[0] is OffloadState.LEARNING
    assert planner(enabled=False).desired(session(), True) == (
        OffloadState.FALLBACK,
        "offload_disabled",
    )
    assert not pl.trusted(Endpoint("192.168.1.5", 1)) and pl.trusted(Endpoint("198.18.1.1", 1))


def test_reconciliation_sweeps_stale_and_reinstalls_missing() -> None:
    p = planner().plan(session(), [1, 2])
    stale_key = FlowKey("198.18.9.9", "127.0.0.1", 1, 36100, port_of("198.18.9.9"))
    moved_leg = LegRewrite(2, "127.0.0.1", "198.18.2.99", 36000, 7000)
    have = EntryDump(
        relays=[*p.relays[:3], RelayEntry(stale_key, 9, False)],
        legs=[p.legs[0], moved_leg, LegRewrite(9, "127.0.0.1", "198.18.9.9", 1, 1)],
        guards=[
            p.guards[0],
            GuardEntry(p.guards[1].key, 9),  # counting on another leg
            GuardEntry(GuardKey("127.0.0.1", 36100), 9),
        ],
    )
    fix = reconciliation([p], have)
    assert fix.stale.del_relays == (stale_key,)
    assert fix.stale.del_legs == (9,)
    assert set(fix.stale.del_guards) == {p.guards[1].key, GuardKey("127.0.0.1", 36100)}
    assert fix.missing.add_relays == (p.relays[3],) and fix.missing.del_relays == ()
    assert fix.missing.mod_legs == (p.legs[1],) and fix.missing.add_legs == ()
    assert set(fix.missing.add_guards) == set(p.guards[1:])
    # A switch that holds exactly the plan: nothing to do.
    exact = reconciliation([p], EntryDump(list(p.relays), list(p.legs), list(p.guards)))
    assert not exact.stale and not exact.missing


def test_relay_entries_are_bound_to_the_route_port() -> None:
    s = session()
    p = planner().plan(s, [1, 2])
    assert {r.key.ingress_port for r in p.relays} == {1, 2}
    assert [st.ingress_port for st in s.streams] == [2, 1]
    # A party the switch has no route for cannot be bound: it stays on RTPProxy.
    pl = planner()
    pl.routes = type(ROUTES)(tuple(x for x in ROUTES.prefixes if x[0].prefixlen))
    assert pl.desired(session("203.0.113.9"), True) == (OffloadState.FALLBACK, "no_ingress_route")
    # Routes not read yet: nothing is bound, the session waits.
    assert Planner().desired(session(), True) == (OffloadState.PENDING, None)


def test_learned_binding_waits_for_the_first_packet() -> None:
    pl = planner(port_binding=PortBinding.LEARNED)
    s = session()
    assert pl.desired(s, True) == (OffloadState.LEARNING, None)
    s.streams[0].ingress_port, s.streams[1].ingress_port = 7, 8
    assert pl.desired(s, True) == (OffloadState.OFFLOADED, None)
    assert {r.key.ingress_port for r in pl.plan(s, [1, 2]).relays} == {7, 8}
    assert pl.accepts_port(s, 0, "198.18.2.10", 7)
    assert not pl.accepts_port(s, 0, "198.18.2.10", 8)


def test_binding_off_installs_every_leg_unbound() -> None:
    """`--port-binding off`: no route and no first packet needed; every relay
    entry carries UNBOUND_PORT, and any port is accepted for a learn."""
    pl = Planner(port_binding=PortBinding.OFF)  # routes never read: not needed
    s = session()
    assert pl.desired(s, True) == (OffloadState.OFFLOADED, None)
    assert {r.key.ingress_port for r in pl.plan(s, [1, 2]).relays} == {UNBOUND_PORT}
    assert pl.accepts_port(s, 0, "198.18.2.10", 4)
    assert pl.accepts_port(s, 0, "203.0.113.9", 1)
    # a port a learn or a restart left on the stream is replaced
    s.streams[1].ingress_port = 3
    assert {r.key.ingress_port for r in pl.plan(s, [1, 2]).relays} == {UNBOUND_PORT}
    # a caller behind NAT still waits for learning (the policy still holds)
    assert pl.desired(session("10.1.2.3"), True) == (OffloadState.LEARNING, None)


def v6_session(caller: str = "2001:db8:1::10", callee: str = "2001:db8:2::10") -> Session:
    """A call whose parties and relay addresses are IPv6 (RTPProxy's `6`)."""
    s = Session("plan6", "f;1", to_tag="t;1")
    s.streams = [
        Stream(port=36000, laddr="2001:db8:ff::1", sdp=Endpoint(callee, 7000)),
        Stream(port=36002, laddr="2001:db8:ff::1", sdp=Endpoint(caller, 6000)),
    ]
    return s


def test_address_families_decide_what_stays_on_rtpproxy() -> None:
    pl = Planner(port_binding=PortBinding.OFF)
    # A program without the IPv6 relay keeps IPv6 calls on RTPProxy.
    assert pl.desired(v6_session(), True) == (OffloadState.FALLBACK, "ipv6")
    pl.ipv6 = True
    assert pl.desired(v6_session(), True) == (OffloadState.OFFLOADED, None)
    # Bridged (the caller on IPv6, the callee on IPv4; RTPProxy translates).
    bridged = v6_session()
    bridged.streams[0] = Stream(port=36000, laddr="127.0.0.1", sdp=Endpoint("198.18.2.10", 7000))
    assert pl.desired(bridged, True) == (OffloadState.FALLBACK, "family_bridge")
    # A party signalled in the other family than the relay address it sends to.
    odd = v6_session()
    odd.streams[1].sdp = Endpoint("198.18.1.10", 6000)
    assert pl.desired(odd, True) == (OffloadState.FALLBACK, "family_mismatch")
    # Addresses a switch never forwards to, though RTPProxy takes them.
    for caller, why in (
        ("fe80::1", "ipv6_link_local"),
        ("fe80::1%eth0", "ipv6_link_local"),
        ("::ffff:198.18.1.10", "ipv4_mapped"),
    ):
        assert pl.desired(v6_session(caller), True) == (OffloadState.FALLBACK, why), caller
    # IPv4 calls are as before.
    assert pl.desired(session(), True) == (OffloadState.OFFLOADED, None)


def test_plan_of_an_ipv6_call_is_bound_to_its_routes() -> None:
    """The same entries as an IPv4 call's, in IPv6 addresses (the switch
    client puts them in its IPv6 tables), bound by the IPv6 routes."""
    pl = Planner()
    pl.ipv6 = True
    pl.routes = Routes(
        tuple(
            (ipaddress.ip_network(net), port)
            for net, port in (("2001:db8:1::/64", 1), ("2001:db8:2::/64", 2), ("0.0.0.0/0", 3))
        )
    )
    s = v6_session()
    assert pl.desired(s, True) == (OffloadState.OFFLOADED, None)
    p = pl.plan(s, [1, 2])
    assert p.legs == (
        LegRewrite(1, "2001:db8:ff::1", "2001:db8:1::10", 36002, 6000),
        LegRewrite(2, "2001:db8:ff::1", "2001:db8:2::10", 36000, 7000),
    )
    assert [r.key for r in p.relays] == [
        FlowKey("2001:db8:2::10", "2001:db8:ff::1", 7000, 36000, 2),
        FlowKey("2001:db8:2::10", "2001:db8:ff::1", 7001, 36001, 2),
        FlowKey("2001:db8:1::10", "2001:db8:ff::1", 6000, 36002, 1),
        FlowKey("2001:db8:1::10", "2001:db8:ff::1", 6001, 36003, 1),
    ]
    # No IPv6 route for a party: it stays on RTPProxy, as an IPv4 one would.
    assert pl.desired(v6_session(caller="2001:db8:9::10"), True) == (
        OffloadState.FALLBACK,
        "no_ingress_route",
    )
