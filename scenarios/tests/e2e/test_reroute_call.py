"""Congestion reroute of a SIP call end to end: the whole stack on the
three-switch fabric (stack.py `fabric`, reroute_bed.STACK), one SIPp call
through OpenSIPS + rtpagent + RTPProxy, offloaded to s1; cross traffic at
twice the s1-s2 rate; s1's data plane moves the call's media to s1-s3-s2,
s1's `p4relay-controlplane` records it at the server, the server links the call to the
reroute, and the call loses under 1 %. The experiment's own run
(reroute_experiment.run_one), cut to one call and a few seconds. Then the
same over IPv6 on the fabric demo's own setup, with the move back."""

from __future__ import annotations

import asyncio
import dataclasses
import datetime as dt
import os
import re
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from p4relay_scenarios import capture, demo_fabric, reroute_experiment, stack, switchcfg, topology
from p4relay_scenarios import reroute_bed as bed
from p4relay_scenarios.api import ServerApi
from p4relay_scenarios.load import Profile, UacResult, run_uac
from p4relay_testsupport import wait_until, wait_value


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


# The IPv6 case's timeline: calls offloaded, CROSS_S of cross traffic a moment
# later, the move back the demo's hold after the bottleneck clears, the calls
# up a few seconds beyond.
CROSS_S = 5.0
V6_HOLD_S = 4.0 + CROSS_S + demo_fabric.HOLD_MS / 1000 + 5.0


def test_ipv6_calls_move_off_the_congested_link_and_back(database_url: str, tmp_path: Path) -> None:
    """The fabric demo's own setup (demo_fabric.up: a control plane per switch,
    iRED on the bottleneck, INT, s1 watching the UAS's IPv4 and IPv6 prefixes):
    two SIPp calls over IPv6 cross s1-s2, offloaded to s1's IPv6 relay; cross
    traffic at twice the bottleneck's rate; s1's data plane moves the UAS's
    IPv6 prefix to s1-s3-s2 on its own queue delay (`reroute_watch6`; INT
    traces IPv4 only), the server links the calls to that reroute, the calls'
    media keeps flowing through s3 with under 1 % loss, and s1's control plane
    moves the prefix back once the bottleneck stayed clear for the demo's hold,
    while the calls are still up."""
    if os.geteuid() != 0:
        pytest.fail("the reroute fabric builds network namespaces: run as root")
    if not stack.SOFTSWITCH_BIN.exists():
        pytest.fail(f"{stack.SOFTSWITCH_BIN} missing: cargo build --release in switch/")
    assert not stack.testbed_in_use(), "another testbed run is live"
    cfg = dataclasses.replace(
        demo_fabric.stack_config(tmp_path / "run", database_url, "opensips"),
        collector_metrics_port=0,
    )
    st = stack.Stack(cfg)
    v6_prefix = demo_fabric.v6_prefix()
    s3_grpc = stack.FABRIC_SWITCHES["s3"][0]
    s3_to_s2 = bed.link_port("s3", "s2", demo_fabric.LAYOUT)
    s2_grpc, uas_port = stack.FABRIC_SWITCHES["s2"][0], demo_fabric.LAYOUT.uas.port
    cross = demo_fabric.CrossTraffic(CROSS_S)
    box: dict[str, UacResult] = {}
    api: ServerApi | None = None
    calls = threading.Thread(
        target=lambda: box.update(
            r=run_uac(
                Profile("v6-reroute", rate=5.0, calls=2, hold_s=V6_HOLD_S, limit=2),
                st.media_dir,
                st.cfg.run_dir / "load",
                tag="v6-reroute",
                family=6,
            )
        )
    )
    try:
        demo_fabric.up(st)
        since = dt.datetime.now(dt.UTC).isoformat()
        api = st.api()
        caps = capture.start_captures(st.sup, tmp_path / "pcap", stack.RELAY_PORTS, family=6)
        s3_tx0 = _tx(s3_grpc, s3_to_s2)
        calls.start()
        wait_until(
            lambda: _entries6() >= 4, within=15, interval=0.2, what="both IPv6 calls offloaded"
        )
        # a second of both calls' media over the bottleneck before the cross traffic
        uas_tx0 = _tx(s2_grpc, uas_port)
        wait_until(
            lambda: _tx(s2_grpc, uas_port) >= uas_tx0 + 2 * 50,
            within=10,
            interval=0.2,
            what="the calls' media reaching the UAS",
        )
        cross.start()
        assert cross.started is not None

        def v6_reroutes(direction: str) -> list[dict[str, Any]]:
            return [
                e
                for e in api.events_since("reroute", since)
                if e["payload"].get("flow") == v6_prefix
                and e["payload"].get("direction") == direction
            ]

        moved = wait_value(lambda: v6_reroutes("to_backup") or None, 10, "the IPv6 prefix moved")
        assert cross.client is not None
        cross.client.wait(CROSS_S + 30)
        failed = cross.failure()
        assert failed is None, f"cross traffic: {failed}"
        t_clear = time.monotonic()
        back = wait_value(
            lambda: v6_reroutes("to_primary") or None,
            demo_fabric.HOLD_MS / 1000 + 10,
            "the IPv6 prefix back on the primary",
        )
        back_after_clear_s = time.monotonic() - t_clear
        assert calls.is_alive(), "the calls ended before the move back"
        calls.join(V6_HOLD_S + 60)
        capture.stop_captures(st.sup, caps)
        s3_tx = _tx(s3_grpc, s3_to_s2) - s3_tx0
        metrics = capture.relay_path_metrics(
            capture.read_rtp(caps[0].path), capture.read_rtp(caps[1].path), settle_ms=500
        )

        def linked() -> list[dict[str, Any]] | None:
            mine = [
                api.session(int(s["id"]))
                for s in api.all_sessions(started_from=since)
                if str(s["caller"] or "").startswith(f"[{topology.UAC.addr6}]:")
            ]
            done = [d for d in mine if d["state"] == "ended"]
            return done if len(done) == 2 else None

        sessions = wait_value(linked, 20, "the two IPv6 sessions ended in the API")
        told = demo_fabric.prefix_moves(api, dt.datetime.fromisoformat(since), cross, v6_prefix)
        dead = [n for n in st.dead() if not n.startswith("cap")]
    finally:
        cross.stop()
        if calls.is_alive():
            calls.join(V6_HOLD_S + 60)
        if api is not None:
            api.close()
        demo_fabric.down(st)
    after_ms = (_ts(moved[0]["ts"]) - cross.started).total_seconds() * 1000
    streams = metrics.per_stream
    print(
        f"reroute IPv6 e2e: moved after {after_ms:.0f} ms ({moved[0]['payload'].get('trigger')}),"
        f" back {back_after_clear_s:.1f} s after the cross traffic ended"
        f" ({back[0]['payload'].get('trigger')}); {len(streams)} streams, loss"
        f" {[f'{100 * (s.sent - s.received) / s.sent:.2f} %' for s in streams]}, MOS"
        f" {[s.mos for s in streams]}, max gap {[round(s.max_gap_ms) for s in streams]} ms;"
        f" {s3_tx} frames by s3"
    )
    assert not dead, f"components died: {dead}"
    result = box["r"]
    assert (result.stats.successful, result.stats.failed) == (2, 0), result.stats
    assert len(moved) == 1 and moved[0]["payload"]["detected_by"] == "local", moved
    assert moved[0]["payload"]["from_path"] == f"port {demo_fabric.bottleneck_port()}", moved
    assert len(back) == 1, back
    # the demo's summary says so
    assert told is not None and re.fullmatch(r"moved to s1→s3→s2 in \d+ ms, back after \d+ s", told)
    # the media of both calls through s3 while the prefix was away (~50 packets/s each)
    assert s3_tx >= 2 * 50 * 2, f"s3 sent {s3_tx} frames towards s2"
    assert len(streams) == 2, streams
    for s in streams:
        assert s.sent >= 50 * (V6_HOLD_S - 2), s
        assert (s.sent - s.received) / s.sent < 0.01, s
        assert s.mos is not None and s.mos >= 4.0, s
    for d in sessions:
        assert d["offloaded"], d["offload_reason"]
        assert any(r["id"] == moved[0]["id"] for r in d["reroutes"]), d["reroutes"]


def _entries6() -> int:
    return asyncio.run(switchcfg.relay_entry_count(stack.GRPC_ADDR, family=6))[0]


def _tx(grpc: str, port: int) -> int:
    counters = asyncio.run(switchcfg.port_counters(grpc, [port]))[port]
    for key in ("$FramesTransmittedAll", "$FramesTransmittedOK"):
        if key in counters:
            return counters[key]
    raise AssertionError(f"no transmit counter in {sorted(counters)}")


def _ts(iso: str) -> dt.datetime:
    return dt.datetime.fromisoformat(iso.replace("Z", "+00:00"))
