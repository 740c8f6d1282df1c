"""One-way media detection from per-leg packet counts (oneway.py)."""

from __future__ import annotations

from typing import Any

import pytest
from rtpagent.oneway import OneWay
from rtpagent.state import Session

from rtpagent import metrics

CALLER, CALLEE = 1, 0  # stream index = the party that sends


class Events:
    def __init__(self) -> None:
        self.got: list[tuple[str, str, dict[str, Any]]] = []

    def __call__(self, kind: str, s: Session, **payload: Any) -> None:
        self.got.append((kind, s.uid, payload))

    def kinds(self) -> list[tuple[str, str]]:
        return [(k, str(p["direction"])) for k, _, p in self.got]


def run(ow: OneWay, s: Session, seconds: int, caller: bool, callee: bool, t0: float = 0.0) -> float:
    """`seconds` sampling rounds, one a second from t0, with packets as given."""
    t = t0
    for _ in range(seconds):
        t += 1.0
        ow.observe(s, CALLER, 50 if caller else 0, t)
        ow.observe(s, CALLEE, 50 if callee else 0, t)
        ow.evaluate(t, {s.uid})
    return t


def test_callee_silent_reported_after_the_timeout_then_cleared() -> None:
    ev = Events()
    ow = OneWay(5.0, ev)
    s = Session("c1", "f;1")
    t = run(ow, s, 10, caller=True, callee=True)
    assert ev.got == []
    t = run(ow, s, 4, caller=True, callee=False, t0=t)
    assert ev.got == []  # 4 s silent: not yet
    t = run(ow, s, 1, caller=True, callee=False, t0=t)
    assert ev.kinds() == [("one_way_media", "callee_to_caller")]
    assert ev.got[0][2]["silent_s"] == pytest.approx(5.0)
    assert ow.count() == 1
    t = run(ow, s, 3, caller=True, callee=False, t0=t)
    assert len(ev.got) == 1  # reported once
    run(ow, s, 1, caller=True, callee=True, t0=t)
    assert ev.kinds()[1] == ("one_way_media_cleared", "callee_to_caller")
    assert ev.got[1][2]["silent_s"] == pytest.approx(9.0)  # its last packet at 10 s, again at 19 s
    assert ow.count() == 0


def test_a_direction_that_never_sent_counts_from_the_offload() -> None:
    ev = Events()
    ow = OneWay(5.0, ev)
    s = Session("c2", "f;1")
    run(ow, s, 6, caller=False, callee=True)
    assert ev.kinds() == [("one_way_media", "caller_to_callee")]


def test_both_silent_is_the_idle_timeouts_case() -> None:
    ev = Events()
    ow = OneWay(5.0, ev)
    s = Session("c3", "f;1")
    t = run(ow, s, 3, caller=True, callee=True)
    run(ow, s, 20, caller=False, callee=False, t0=t)
    assert ev.got == []


def test_the_other_side_stopping_too_clears_it() -> None:
    ev = Events()
    ow = OneWay(5.0, ev)
    s = Session("c4", "f;1")
    t = run(ow, s, 2, caller=True, callee=True)
    t = run(ow, s, 6, caller=True, callee=False, t0=t)
    run(ow, s, 6, caller=False, callee=False, t0=t)
    assert [k for k, _ in ev.kinds()] == ["one_way_media", "one_way_media_cleared"]


def test_a_call_on_hold_is_left_alone() -> None:
    ev = Events()
    ow = OneWay(5.0, ev)
    s = Session("c5", "f;1")
    s.streams[CALLER].on_hold = True
    run(ow, s, 10, caller=False, callee=True)
    assert ev.got == []


def test_an_ended_call_is_forgotten_without_an_event() -> None:
    ev = Events()
    ow = OneWay(5.0, ev)
    s = Session("c6", "f;1")
    t = run(ow, s, 7, caller=True, callee=False)
    assert ow.count() == 1
    ow.evaluate(t + 1, set())
    assert ow.count() == 0 and len(ev.got) == 1


def test_sip_server_told_after_the_longer_timeout_once() -> None:
    ev = Events()
    told: list[str] = []
    ow = OneWay(5.0, ev, notify_after_s=10.0, notify_sip=lambda s: told.append(s.call_id))
    s = Session("c7", "f;1")
    t = run(ow, s, 1, caller=True, callee=True)
    t = run(ow, s, 9, caller=True, callee=False, t0=t)
    assert told == []  # the callee silent for 9 s (one-way reported at 5 s)
    run(ow, s, 5, caller=True, callee=False, t0=t)
    assert told == ["c7"]


def test_off_and_bad_settings() -> None:
    ev = Events()
    ow = OneWay(0.0, ev)
    s = Session("c8", "f;1")
    run(ow, s, 20, caller=True, callee=False)
    assert ev.got == [] and ow.count() == 0
    with pytest.raises(ValueError, match="negative"):
        OneWay(-1.0, ev)


def test_counted_per_direction() -> None:
    before = metrics.ONE_WAY.labels("caller_to_callee")._value.get()
    ow = OneWay(5.0, Events())
    run(ow, Session("c9", "f;1"), 6, caller=False, callee=True)
    assert metrics.ONE_WAY.labels("caller_to_callee")._value.get() == before + 1
