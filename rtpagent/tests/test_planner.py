"""The offload policy as pure functions: which entries carry a session, and
what makes the switch hold exactly the planned entries."""

from __future__ import annotations

from p4relay_switch import EntryDump, FlowKey, GuardKey, LegRewrite, RelayEntry
from rtpagent.planner import Planner, reconciliation
from rtpagent.state import Endpoint, OffloadState, Session, Stream


def session(caller: str = "198.18.1.10") -> Session:
    s = Session("plan", "f;1", to_tag="t;1")
    s.streams = [
        Stream(port=36000, laddr="127.0.0.1", sdp=Endpoint("198.18.2.10", 7000)),
        Stream(port=36002, laddr="127.0.0.1", sdp=Endpoint(caller, 6000)),
    ]
    return s


def test_plan_of_a_call() -> None:
    p = Planner().plan(session(), [1, 2])
    # Leg 1 carries what the callee (stream 0) sends, to the caller.
    assert p.legs == (
        LegRewrite(1, "127.0.0.1", "198.18.1.10", 36002, 6000),
        LegRewrite(2, "127.0.0.1", "198.18.2.10", 36000, 7000),
    )
    assert [r.key for r in p.relays] == [
        FlowKey("198.18.2.10", "127.0.0.1", 7000, 36000),
        FlowKey("198.18.2.10", "127.0.0.1", 7001, 36001),
        FlowKey("198.18.1.10", "127.0.0.1", 6000, 36002),
        FlowKey("198.18.1.10", "127.0.0.1", 6001, 36003),
    ]
    assert set(p.guards) == {GuardKey("127.0.0.1", q) for q in (36000, 36001, 36002, 36003)}
    assert Planner(guard=False).plan(session(), [1, 2]).guards == ()


def test_desired_state() -> None:
    pl = Planner()
    assert pl.desired(session(), switch_connected=True) == (OffloadState.OFFLOADED, None)
    assert pl.desired(session(), switch_connected=False) == (
        OffloadState.FALLBACK,
        "switch_unreachable",
    )
    assert pl.desired(session("10.1.2.3"), True) == (OffloadState.LEARNING, None)
    assert Planner(latch_always=True).desired(session(), True)[0] is OffloadState.LEARNING
    assert Planner(enabled=False).desired(session(), True) == (
        OffloadState.FALLBACK,
        "offload_disabled",
    )
    assert not pl.trusted(Endpoint("192.168.1.5", 1)) and pl.trusted(Endpoint("198.18.1.1", 1))


def test_reconciliation_sweeps_stale_and_reinstalls_missing() -> None:
    p = Planner().plan(session(), [1, 2])
    stale_key = FlowKey("198.18.9.9", "127.0.0.1", 1, 36100)
    moved_leg = LegRewrite(2, "127.0.0.1", "198.18.2.99", 36000, 7000)
    have = EntryDump(
        relays=[*p.relays[:3], RelayEntry(stale_key, 9, False)],
        legs=[p.legs[0], moved_leg, LegRewrite(9, "127.0.0.1", "198.18.9.9", 1, 1)],
        guards=[*p.guards[:2], GuardKey("127.0.0.1", 36100)],
    )
    fix = reconciliation([p], have)
    assert fix.stale.del_relays == (stale_key,)
    assert fix.stale.del_legs == (9,)
    assert fix.stale.del_guards == (GuardKey("127.0.0.1", 36100),)
    assert fix.missing.add_relays == (p.relays[3],) and fix.missing.del_relays == ()
    assert fix.missing.mod_legs == (p.legs[1],) and fix.missing.add_legs == ()
    assert set(fix.missing.add_guards) == set(p.guards[2:])
    # A switch that holds exactly the plan: nothing to do.
    exact = reconciliation([p], EntryDump(list(p.relays), list(p.legs), list(p.guards)))
    assert not exact.stale and not exact.missing
