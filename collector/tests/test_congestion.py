"""Congestion episodes: onset on any threshold, clear only below every clear
threshold for N polls (hysteresis), switch down ends open episodes."""

from __future__ import annotations

import datetime as dt

import pytest
from p4relay_collector.config import ConfigError, Settings, load
from p4relay_collector.congestion import CongestionDetector, Thresholds
from p4relay_collector.wire import Event, QueueSample

T0 = dt.datetime(2026, 1, 1, tzinfo=dt.UTC)


def sample(
    i: int, delay_ms: float | None = 0.0, depth: int = 0, drops: int = 0, port: int = 3
) -> QueueSample:
    return QueueSample(
        switch="sw",
        dev_port=port,
        ts=T0 + dt.timedelta(seconds=i),
        depth_bytes=depth,
        queue_delay_us=None if delay_ms is None else delay_ms * 1000,
        utilisation=0.9,
        drops=drops,
    )


def run(d: CongestionDetector, samples: list[QueueSample]) -> list[Event | None]:
    return [d.observe(s) for s in samples]


def kinds(events: list[Event | None]) -> list[str | None]:
    return [e.type if e else None for e in events]


def test_delay_opens_and_clears_after_quiet_polls() -> None:
    d = CongestionDetector(Thresholds(clear_polls=3))
    got = run(
        d,
        [sample(0, 1), sample(1, 800), sample(2, 600), sample(3, 2), sample(4, 1), sample(5, 0)],
    )
    assert kinds(got) == [None, "congestion_onset", None, None, None, "congestion_clear"]
    onset, clear = got[1], got[5]
    assert onset is not None and clear is not None
    assert onset.severity == "warning" and onset.switch == "sw"
    assert onset.payload["dev_port"] == 3 and onset.payload["queue"] == 0
    assert onset.payload["trigger"] == "delay" and onset.payload["queue_delay_us"] == 800_000
    assert clear.severity == "info"
    assert clear.payload["max_queue_delay_us"] == 800_000
    assert clear.payload["duration_s"] == 4.0
    assert clear.payload["onset_ts"] == (T0 + dt.timedelta(seconds=1)).isoformat()


def test_between_thresholds_neither_opens_nor_clears() -> None:
    """10 ms sits between clear (5 ms) and onset (20 ms): hysteresis, no flapping."""
    d = CongestionDetector(Thresholds(clear_polls=2))
    got = run(d, [sample(i, 10) for i in range(5)])
    assert kinds(got) == [None] * 5
    got = run(d, [sample(5, 25)] + [sample(6 + i, 10 + (i % 2) * 12) for i in range(6)])
    assert kinds(got) == ["congestion_onset"] + [None] * 6  # 10/22 ms alternating: still open
    got = run(d, [sample(20, 4), sample(21, 10), sample(22, 4), sample(23, 4)])
    assert kinds(got) == [None, None, None, "congestion_clear"]  # the count restarts at 10 ms


def test_drops_and_depth_trigger_and_drops_keep_it_open() -> None:
    d = CongestionDetector(Thresholds(clear_polls=2))
    got = run(d, [sample(0, None, drops=7), sample(1, None), sample(2, None, drops=1)])
    assert kinds(got) == ["congestion_onset", None, None]
    got = run(d, [sample(3, None), sample(4, None)])
    assert kinds(got) == [None, "congestion_clear"]
    assert got[1] is not None and got[1].payload["drops"] == 8  # over the episode
    d2 = CongestionDetector(Thresholds())
    (e,) = run(d2, [sample(0, None, depth=200_000)])
    assert e is not None and e.payload["trigger"] == "depth"


def test_onset_polls_and_unused_thresholds() -> None:
    d = CongestionDetector(Thresholds(onset_polls=2, onset_drops=0))
    got = run(d, [sample(0, 30, drops=50), sample(1, 1, drops=50), sample(2, 30), sample(3, 30)])
    assert kinds(got) == [None, None, None, "congestion_onset"]
    assert got[3] is not None and got[3].payload["trigger"] == "delay"


def test_ports_are_independent_and_switch_down_ends_open_episodes() -> None:
    d = CongestionDetector(Thresholds())
    got = run(d, [sample(0, 50, port=1), sample(0, 50, port=2), sample(0, 0, port=4)])
    assert kinds(got) == ["congestion_onset", "congestion_onset", None]
    assert d.open_episodes() == [("sw", 1, 0), ("sw", 2, 0)]
    ended = d.switch_down("sw", T0 + dt.timedelta(seconds=9))
    assert [(e.type, e.payload["dev_port"], e.payload["reason"]) for e in ended] == [
        ("congestion_clear", 1, "switch unreachable"),
        ("congestion_clear", 2, "switch unreachable"),
    ]
    assert d.open_episodes() == [] and d.switch_down("sw", T0) == []


def test_thresholds_from_settings_and_hysteresis_validation() -> None:
    t = Thresholds.from_settings(
        Settings(congestion_onset_delay_ms=30, congestion_clear_delay_ms=10)
    )
    assert (t.onset_delay_us, t.clear_delay_us) == (30_000, 10_000)
    with pytest.raises(ConfigError, match="congestion_clear_delay_ms"):
        load(None, {"congestion_onset_delay_ms": 5.0, "congestion_clear_delay_ms": 10.0})
    with pytest.raises(ConfigError, match="congestion_clear_depth_bytes"):
        load(None, {"congestion_onset_depth_bytes": 100, "congestion_clear_depth_bytes": 200})
