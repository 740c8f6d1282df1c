"""Congestion reroute of a SIP call end to end: the whole stack on the
three-switch fabric (stack.py `fabric`, reroute_bed.STACK), one SIPp call
through OpenSIPS + rtpagent + RTPProxy, offloaded to s1; cross traffic at
twice the s1-s2 rate; s1's data plane moves the call's media to s1-s3-s2,
s1's `p4relay-controlplane` records it at the server, the server links the call to the
reroute, and the call loses under 1 %. The experiment's own run
(reroute_experiment.run_one), cut to one call and a few seconds."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from p4relay_scenarios import reroute_experiment, stack


def test_call_moves_off_the_congested_link_and_the_server_links_it(
    database_url: str, tmp_path: Path
) -> None:
    if os.geteuid() != 0:
        pytest.fail("the reroute fabric builds network namespaces: run as root")
    if not stack.SOFTSWITCH_BIN.exists():
        pytest.fail(f"{stack.SOFTSWITCH_BIN} missing: cargo build --release in switch/")
    assert not stack.testbed_in_use(), "another testbed run is live"
    row, calls = reroute_experiment.run_one(
        2.0,
        True,
        calls=1,
        lead_s=4.0,
        cross_s=6.0,
        tail_s=2.0,
        rate_bps=2_000_000,
        t_q_us=50_000.0,
        m=5,
        sip="opensips",
        run_dir=tmp_path / "run",
        database_url=database_url,
    )
    print(f"reroute call e2e: {row}")
    assert (row.calls_ok, row.calls_failed) == (1, 0)
    assert row.cross_loss_pct > 20, "the cross traffic did not congest the bottleneck"
    [call] = calls
    assert call.sent > 500  # 12 s at 50 packets/s, from the capture at the UAC
    assert call.loss_pct < 1.0, call
    assert call.mos is not None and call.mos >= 4.0, call
    assert row.reroute_events >= 1
    assert row.sessions_with_reroute == 1
