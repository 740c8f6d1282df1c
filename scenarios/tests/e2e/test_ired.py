"""iRED on a congested port, end to end: relayed calls keep their MOS while iRED
drops bulk TCP traffic, where tail drop at the same buffer costs the calls.

The short form of the iRED experiment (p4relay_scenarios.ired_experiment): one
buffer reference (64 packets, Table I's N = 4), tail drop (the port's queue
limited to the buffer) against iRED sparing media (a deep physical queue), on
the experiment's own stack (the UAS port shaped), so both cells see the same
port, flows and calls.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from p4relay_scenarios import ired_experiment as ix
from p4relay_scenarios import topology
from p4relay_scenarios.stack import ROOT, SOFTSWITCH_BIN, Stack

RATE_MBIT = 20.0
CALLS = 6
SECONDS = 8.0


@pytest.fixture(scope="module")
def ired_stack() -> Iterator[Stack]:
    if os.geteuid() != 0:
        pytest.fail("the iRED case builds network namespaces: run as root")
    if not SOFTSWITCH_BIN.exists():
        pytest.fail(f"{SOFTSWITCH_BIN} missing: cargo build --release in switch/")
    s = Stack(ix.stack_config(ROOT / "build" / "e2e-ired-run", RATE_MBIT))
    s.lock()
    try:
        topology.down()
        # as the experiment runs it: the first cell's buffer limit, SCHED_RR
        ix.restart(s, RATE_MBIT, ix.port_setup(64, "taildrop"), running=False)
        yield s
    finally:
        s.down()


def test_ired_spares_calls_and_drops_bulk_traffic(ired_stack: Stack, tmp_path: Path) -> None:
    # warm-up: a 64-packet buffer fills within slow start
    plan = ix.Plan(RATE_MBIT, CALLS, SECONDS, flows=4, warmup_s=3.0)

    def cell(policy: str) -> ix.Row:
        return ix.run_cell(ired_stack, plan, 64, policy, tmp_path)

    tail = cell("taildrop")
    ix.restart(ired_stack, RATE_MBIT, ix.port_setup(64, "ired-protect"), running=True)
    ired = cell("ired-protect")
    for r in (tail, ired):
        assert r.calls_ok == CALLS, r
        assert len(r.per_call) == CALLS, r  # every call's caller->callee stream measured
        # TCP keeps the port busy either way (goodput; the wire carries ~5 % more).
        assert r.tcp_mbps > 0.6 * RATE_MBIT, r
    # Tail drop: the full buffer refuses whatever arrives, the calls' media too; the
    # queue's own drops are the policy's, and iRED is off.
    assert tail.policy_drops == tail.queue_drops > 0 and tail.decisions == 0, tail
    assert ired.queue_drops == 0, ired  # the deep queue: only iRED dropped
    assert tail.rtp_loss_pct > 0.5, tail
    # iRED sparing media: drops happened (bulk traffic), protected packets found
    # the flag and passed, no RTP was lost and every call keeps its MOS.
    assert ired.policy_drops > 0 and ired.decisions > 0 and ired.spared > 0, ired
    assert ired.rtp_loss_pct == 0.0, ired
    assert ired.mos_min is not None and ired.mos_min >= ix.MOS_TARGET, ired
    assert tail.mos_min is not None and tail.mos_min < ired.mos_min, (tail, ired)
    # The queue stays shorter than tail drop's full buffer: RTT lower (the median: a
    # few pings that waited out a stall of the loaded machine weigh on the mean).
    assert ired.rtt_ms_p50 < tail.rtt_ms_p50, (tail, ired)
