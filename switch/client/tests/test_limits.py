"""Thresholds against what the target measures (switch/contract.toml)."""

from __future__ import annotations

import pytest
from p4relay_switch import limits


def test_ceilings_come_from_the_contracts_widths() -> None:
    assert limits.HOP_LATENCY_MAX_NS == 262_143  # deq_timedelta: 18 bits of ns
    assert limits.QUEUE_DEPTH_MAX_CELLS == 524_287  # enq/deq_qdepth: 19 bits of cells
    assert limits.REROUTE_TICK_NS == 65_536  # the timestamps' bits 47..16


def test_int_hop_thresholds() -> None:
    limits.check_int_hop(524_287, 0, 262_143, 0)
    limits.check_int_hop(limits.NEVER, limits.NEVER, limits.NEVER, limits.NEVER)  # off
    with pytest.raises(limits.UnrepresentableThreshold, match=r"onset_ns 262,144 .*262,143"):
        limits.check_int_hop(10, 0, 262_144, 0)
    with pytest.raises(limits.UnrepresentableThreshold, match="tna_qdepth_bits = 19"):
        limits.check_int_hop(10, 524_288, 0, 0)


def test_reroute_t_q() -> None:
    limits.check_reroute_t_q(65_536)
    limits.check_reroute_t_q(50_000_000)
    limits.check_reroute_t_q(2**32 - 1)
    for bad in (0, 65_535, 2**32):
        with pytest.raises(limits.UnrepresentableThreshold, match="reroute_delay_shift = 16"):
            limits.check_reroute_t_q(bad)
