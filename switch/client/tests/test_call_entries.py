"""The one call -> entries mapping (`RelayCall.entries` and the batches of
`CallEntries`), as the agent writes it and the PTF suite checks it: which
entries a call needs, and the writes that install, change and remove them."""

from __future__ import annotations

import dataclasses
import ipaddress

import pytest
from p4relay_switch import (
    Endpoint,
    EntryBatch,
    FlowKey,
    GuardEntry,
    GuardKey,
    LegRewrite,
    RelayCall,
    RelayEntry,
    Routes,
)
from p4relay_switch.model import BridgedCallError

RELAY = "127.0.0.1"


def call(a_port: int = 6000, relay_a: int = 20000, legs: tuple[int, int] = (3, 4)) -> RelayCall:
    return RelayCall.between(
        Endpoint.of("198.18.1.10", a_port),
        Endpoint.of(RELAY, relay_a),
        Endpoint.of("198.18.2.10", 7000),
        Endpoint.of(RELAY, 20002),
        legs=legs,
        ports=(1, 2),
    )


def test_a_call_needs_two_rewrites_four_relays_and_four_guards() -> None:
    e = call().entries(guard=True)
    assert e.legs == (
        LegRewrite(3, RELAY, "198.18.2.10", 20002, 7000),
        LegRewrite(4, RELAY, "198.18.1.10", 20000, 6000),
    )
    assert e.relays == (
        RelayEntry(FlowKey("198.18.1.10", RELAY, 6000, 20000, 1), 3, False),
        RelayEntry(FlowKey("198.18.1.10", RELAY, 6001, 20001, 1), 3, True),
        RelayEntry(FlowKey("198.18.2.10", RELAY, 7000, 20002, 2), 4, False),
        RelayEntry(FlowKey("198.18.2.10", RELAY, 7001, 20003, 2), 4, True),
    )
    # Each relay port's drops count on the leg of the party that sends there.
    assert e.guards == tuple(
        GuardEntry(GuardKey(RELAY, port), leg)
        for port, leg in ((20000, 3), (20001, 3), (20002, 4), (20003, 4))
    )
    assert call().entries().guards == ()


def test_rtcp_from_where_a_nat_sends_it() -> None:
    c = call()
    natted = dataclasses.replace(c.a_to_b, rtcp_src=Endpoint.of("203.0.113.5", 41000))
    rtcp = RelayCall(natted, c.b_to_a).entries().relays[1]
    assert rtcp == RelayEntry(FlowKey("203.0.113.5", RELAY, 41000, 20001, 1), 3, True)


def test_install_and_removal_batches() -> None:
    e = call().entries(guard=True)
    install = e.install()
    assert (install.add_legs, install.add_relays, install.add_guards) == (
        e.legs,
        e.relays,
        e.guards,
    )
    assert install.reset_legs == (3, 4)
    assert e.install(reset_legs=[4]).reset_legs == (4,)
    removal = e.removal()
    assert removal.del_guards == tuple(g.key for g in e.guards)
    assert removal.del_relays == tuple(r.key for r in e.relays)
    assert (removal.del_legs, removal.reset_legs) == ((3, 4), ())
    assert e.removal(reset=True).reset_legs == (3, 4)
    # A call's removal takes every guard of its ports, guarded or not.
    assert call().removal().del_guards == tuple(g.key for g in e.guards)
    assert call().install(guard=True) == install


def test_change_from_a_latched_source_rekeys_only_that_flow() -> None:
    old = call().entries(guard=True)
    new = call(a_port=6100).entries(guard=True)
    b = new.change_from(old)
    assert b.del_relays == (old.relays[0].key, old.relays[1].key)
    assert b.add_relays == new.relays[:2]
    # The rewrite towards A changed; the one towards B did not.
    assert b.mod_legs == (new.legs[1],)
    assert (b.add_legs, b.del_legs, b.add_guards, b.del_guards) == ((), (), (), ())
    assert not new.change_from(new)


def test_change_from_a_moved_relay_port_moves_its_guards() -> None:
    old = call().entries(guard=True)
    new = call(relay_a=20010).entries(guard=True)
    b = new.change_from(old)
    assert b.del_guards == (GuardKey(RELAY, 20000), GuardKey(RELAY, 20001))
    assert b.add_guards == (
        GuardEntry(GuardKey(RELAY, 20010), 3),
        GuardEntry(GuardKey(RELAY, 20011), 3),
    )


def test_joined_keeps_each_kind_in_its_place() -> None:
    first = call(legs=(1, 2)).entries(guard=True)
    second = call(legs=(5, 6), relay_a=20100)
    b = EntryBatch.joined([first.removal(reset=True), second.install(guard=True)])
    assert b.del_guards == first.removal().del_guards
    assert b.add_guards == second.entries(guard=True).guards
    assert b.del_legs == (1, 2)
    assert b.add_legs == second.entries().legs
    assert b.reset_legs == (1, 2, 5, 6)
    assert not EntryBatch.joined([]) and not EntryBatch.joined([EntryBatch()])


RELAY6 = "2001:db8::10"


def call6(legs: tuple[int, int] = (5, 6)) -> RelayCall:
    return RelayCall.between(
        Endpoint.of("2001:db8:1::10", 6000),
        Endpoint.of(RELAY6, 20000),
        Endpoint.of("2001:db8:2::10", 7000),
        Endpoint.of(RELAY6, 20002),
        legs=legs,
        ports=(1, 2),
    )


def test_an_ipv6_call_has_the_same_entries_with_ipv6_addresses() -> None:
    c = call6()
    assert c.v6
    e = c.entries(guard=True)
    assert e.v6
    assert e.legs == (
        LegRewrite(5, RELAY6, "2001:db8:2::10", 20002, 7000),
        LegRewrite(6, RELAY6, "2001:db8:1::10", 20000, 6000),
    )
    assert e.relays[1] == RelayEntry(FlowKey("2001:db8:1::10", RELAY6, 6001, 20001, 1), 5, True)
    assert e.guards[3] == GuardEntry(GuardKey(RELAY6, 20003), 6)
    # its rewrites are removed from leg_rewrite6, an IPv4 call's from leg_rewrite
    assert e.removal() == EntryBatch(
        del_guards=tuple(g.key for g in e.guards),
        del_relays=tuple(r.key for r in e.relays),
        del_legs6=(5, 6),
    )
    assert call().entries().removal().del_legs6 == ()
    assert str(c.a_to_b.src) == "[2001:db8:1::10]:6000"


def test_a_call_bridging_ipv4_and_ipv6_is_refused() -> None:
    with pytest.raises(BridgedCallError, match="bridged call"):
        RelayCall.between(
            Endpoint.of("198.18.1.10", 6000),
            Endpoint.of(RELAY, 20000),
            Endpoint.of("2001:db8:2::10", 7000),
            Endpoint.of(RELAY6, 20002),
            legs=(1, 2),
            ports=(1, 2),
        )


def test_routes_look_up_either_family() -> None:
    routes = Routes(
        (
            (ipaddress.ip_network("2001:db8::/32"), 3),
            (ipaddress.ip_network("2001:db8:2::/48"), 2),
            (ipaddress.ip_network("0.0.0.0/0"), 1),
        )
    )
    assert routes.port_for("2001:db8:2::10") == 2
    assert routes.port_for("2001:db8:7::1") == 3
    assert routes.port_for("2001:db9::1") is None
    assert routes.port_for("198.18.2.10") == 1
