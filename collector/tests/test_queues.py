"""Queue samples from two readings: the arithmetic and counter resets."""

from __future__ import annotations

import datetime as dt

import pytest
from p4relay_collector.queues import PortReading, derive_sample, line_rate

T = dt.datetime(2026, 1, 1, tzinfo=dt.UTC)


def test_derive_sample_arithmetic() -> None:
    prev = PortReading(
        1, "p", True, 1e6, tx_packets=10, tx_bytes=1000, usage_cells=0, queue_drops=5
    )
    cur = PortReading(
        1, "p", True, 1e6, tx_packets=60, tx_bytes=63_500, usage_cells=25, queue_drops=7
    )
    s = derive_sample("sw", prev, cur, 0.5, T)
    assert s.depth_bytes == 25 * 80
    assert s.queue_delay_us == pytest.approx(2000 * 8 / 1e6 * 1e6)  # 16 ms at 1 Mbit/s
    assert s.utilisation == pytest.approx(62_500 * 8 / 0.5 / 1e6)
    assert (s.drops, s.tx_packets, s.tx_bytes) == (2, 50, 62_500)


def test_reset_counters_and_unknown_rate() -> None:
    cur = PortReading(1, "p", True, 1e6, 60, 63_500, 25, 7)
    reset = derive_sample("sw", cur, PortReading(1, "p", True, None, 3, 300, 0, 1), 1.0, T)
    assert (reset.drops, reset.tx_packets, reset.utilisation, reset.queue_delay_us) == (
        1,
        3,
        None,
        None,
    )
    first = derive_sample("sw", None, cur, 0.0, T)
    assert (first.utilisation, first.drops, first.tx_packets) == (None, 0, None)


def test_utilisation_is_capped_at_line_rate() -> None:
    prev = PortReading(1, None, None, 1e6, 0, 0, 0, 0)
    cur = PortReading(1, None, None, 1e6, 10, 1_000_000, 0, 0)
    assert derive_sample("sw", prev, cur, 1.0, T).utilisation == 1.0


def test_line_rate_prefers_shaping() -> None:
    assert line_rate("BF_SPEED_100G", 10_000) == 10e6
    assert line_rate("BF_SPEED_100G", None) == 100e9
    assert line_rate("BF_SPEED_100G", 0) == 100e9
    assert line_rate("SOMETHING_ELSE", None) is None
    assert line_rate(None, None) is None
