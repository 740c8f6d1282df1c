"""Calls through the testbed reported to Homer: SIPp calls offloaded to the
switch; the server's HEP export goes to Homer 5's capture server (Kamailio's
sipcapture storing into PostgreSQL), which must file every call's two legs
under the call's SIP Call-ID with the figures the server shows for the call
(within 1 %)."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import pytest
from p4relay_scenarios.load import Profile, run_uac
from p4relay_scenarios.stack import Stack
from p4relay_testsupport import homer as homer_support
from p4relay_testsupport import wait_until

CALLS = 4


@pytest.fixture
def capture(homer: homer_support.HomerCapture | None) -> homer_support.HomerCapture:
    """The capture server the shared stack's server exports to (conftest)."""
    if homer is None:
        pytest.fail("Kamailio's sipcapture and db_postgres modules missing (make setup)")
    return homer


def _close(a: float, b: float) -> bool:
    return abs(a - b) <= 0.01 * max(abs(a), abs(b)) + 1e-9


def _ts(iso: str) -> float:
    import datetime as dt

    return dt.datetime.fromisoformat(iso.replace("Z", "+00:00")).timestamp()


def _final_reports(capture: homer_support.HomerCapture) -> dict[str, dict[str, dict[str, Any]]]:
    """Call-ID -> direction -> the final report as the capture server stored it."""
    out: dict[str, dict[str, dict[str, Any]]] = {}
    for row in capture.rows():
        doc = json.loads(row["msg"])
        if doc["p4relay"]["final"]:
            out.setdefault(row["correlation_id"], {})[doc["p4relay"]["direction"]] = {
                "row": row,
                "doc": doc,
            }
    return out


def test_offloaded_calls_reach_homer_under_their_call_id(
    stack: Stack, capture: homer_support.HomerCapture, tmp_path: Path
) -> None:
    t0 = time.time() - 1
    prof = Profile("homer", rate=5.0, calls=CALLS, hold_s=6.0, limit=CALLS)
    result = run_uac(prof, stack.media_dir, tmp_path / "load", tag="homer")
    assert result.stats.successful == CALLS, f"SIPp: {result.stats} (log {result.log})"

    api = stack.api()
    try:
        box: dict[str, list[dict[str, Any]]] = {}

        def ended() -> bool:
            got = [
                s
                for s in api.sessions()
                if _ts(s["started_at"]) >= t0 and s["state"] == "ended" and s["mos_avg"]
            ]
            box["s"] = got
            return len(got) >= CALLS

        wait_until(ended, within=30, interval=0.5, what=f"{CALLS} ended sessions with MOS")
        sessions = box["s"]
        assert all(s["offloaded"] for s in sessions), [s["offload_reason"] for s in sessions]
        call_ids = {s["call_id"] for s in sessions}
        wait_until(
            lambda: all(len(_final_reports(capture).get(c, {})) == 2 for c in call_ids),
            within=30,
            interval=0.5,
            what="final reports of both legs of every call in the capture server",
        )
        reports = _final_reports(capture)
        interval_reports = sum(
            1 for r in capture.rows() if r["correlation_id"] in call_ids
        ) - 2 * len(call_ids)
        matched = 0
        for s in sessions:
            detail = api.session(s["id"])
            for series in detail["quality"]:
                got = reports[s["call_id"]][series["direction"]]
                row, mine = got["row"], got["doc"]["p4relay"]
                points = series["points"]
                packets = sum(p["packets"] for p in points)
                lost = sum(p["lost"] for p in points)
                mos = [p["mos"] for p in points if p["mos"] is not None]
                assert (row["family"], row["proto"], row["type"]) == (2, 17, 5)
                assert row["capture_id"] == homer_support.E2E_CAPTURE_ID
                assert mine["packets"] == packets and mine["lost"] == lost
                assert mine["packets"] > 4 * 50, "a 6 s call's leg at 50 packets/s"
                assert _close(mine["mos"], sum(mos) / len(mos))
                leg = next(leg for leg in detail["legs"] if leg["direction"] == series["direction"])
                assert (row["destination_ip"], row["destination_port"]) == (
                    leg["dst"]["addr"],
                    leg["dst"]["port"],
                )
                matched += 1
    finally:
        api.close()
    assert matched == 2 * CALLS
    print(
        f"\nHomer: {len(call_ids)} Call-IDs, {matched} final leg reports matched the server's "
        f"figures, {interval_reports} interval reports while the calls were up"
    )
