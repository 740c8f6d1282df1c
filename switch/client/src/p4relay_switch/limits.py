"""What the target measures, and therefore which thresholds it can reach.

A threshold compared with a measurement the ASIC saturates can never be
crossed beyond the measurement's ceiling: a Tofino 1 hop latency
(``deq_timedelta``) stops at 2^18 - 1 ns, so an INT latency onset of 1 ms
never fires there. Reroute's delay has no such ceiling (the 48-bit timestamps
apart) but a resolution: ticks of 65,536 ns, so a t_q below one tick means
nothing. The limits come from ``switch/contract.toml`` (``tna_*_bits``,
``reroute_delay_*``); the software switch measures at the same widths, so a
threshold refused here would not work on it either. The control plane's
configuration validation calls these checks and refuses the configuration
with the limit's name.
"""

from __future__ import annotations

from p4relay_switch.contract_config import (
    REROUTE_DELAY_SHIFT,
    TNA_DEQ_TIMEDELTA_BITS,
    TNA_QDEPTH_BITS,
)

HOP_LATENCY_MAX_NS = (1 << TNA_DEQ_TIMEDELTA_BITS) - 1
"""INT hop latency: ``eg_intr_md.deq_timedelta`` (ns in the egress queue)."""
QUEUE_DEPTH_MAX_CELLS = (1 << TNA_QDEPTH_BITS) - 1
"""INT queue occupancy and iRED: ``enq_qdepth`` / ``deq_qdepth`` (80-byte cells)."""
REROUTE_TICK_NS = 1 << REROUTE_DELAY_SHIFT
"""Reroute detection's delay (ingress MAC to egress, the 48-bit timestamps
apart) is measured in these, and t_q compared in whole ones."""
NEVER = (1 << 32) - 1
"""A 32-bit threshold at its maximum: the feature is off (a hop is never at
or over it; the ASIC's measurements all stay below)."""


class UnrepresentableThreshold(ValueError):
    """A threshold beyond what the target measures."""


def _reachable(what: str, value: int, ceiling: int, limit: str) -> None:
    if value > ceiling and value != NEVER:
        raise UnrepresentableThreshold(
            f"{what} {value:,} is beyond what the switch measures: {limit} "
            f"saturates at {ceiling:,} (use at most {ceiling:,}, or {NEVER} for never)"
        )


def check_reroute_t_q(t_q_ns: int) -> None:
    """A packet is hot when its delay from ingress to egress exceeds
    ``t_q_ns``, in whole ticks of ``REROUTE_TICK_NS``: no ceiling below the
    32-bit field, a floor of one tick."""
    if not REROUTE_TICK_NS <= t_q_ns < 1 << 32:
        raise UnrepresentableThreshold(
            f"reroute t_q {t_q_ns:,} ns is outside what the switch measures: the delay "
            f"comes in ticks of {REROUTE_TICK_NS:,} ns (reroute_delay_shift = "
            f"{REROUTE_DELAY_SHIFT}), so t_q must be {REROUTE_TICK_NS:,} to {(1 << 32) - 1:,} ns"
        )


def check_int_hop(onset_cells: int, clear_cells: int, onset_ns: int, clear_ns: int) -> None:
    """INT hop thresholds: a hop is at/over onset when its queue depth or its
    latency reaches the threshold. Depths stop at ``QUEUE_DEPTH_MAX_CELLS``,
    latency at ``HOP_LATENCY_MAX_NS`` (Tofino 1 and 2 alike)."""
    depth = f"the queue depth (deq_qdepth, tna_qdepth_bits = {TNA_QDEPTH_BITS}, cells)"
    latency = (
        f"the hop latency (deq_timedelta, tna_deq_timedelta_bits = {TNA_DEQ_TIMEDELTA_BITS}, ns)"
    )
    _reachable("INT onset_cells", onset_cells, QUEUE_DEPTH_MAX_CELLS, depth)
    _reachable("INT clear_cells", clear_cells, QUEUE_DEPTH_MAX_CELLS, depth)
    _reachable("INT onset_ns", onset_ns, HOP_LATENCY_MAX_NS, latency)
    _reachable("INT clear_ns", clear_ns, HOP_LATENCY_MAX_NS, latency)
