"""INT live, data plane to server (int_bed.py): three real softswitches with
INT on (s1 source of a relayed call's media, s3 transit, s2 sink), the real
collector (`p4relay-collector --int-report-listen`) receiving s2's Telemetry
Reports, the real server. The server's per-hop queues (`GET /api/v1/queues`)
and the call's path (`GET /api/v1/sessions/{id}`) must come from those
reports: the hops the media crossed, with their ports, before and after s1
routes it around by s3."""

from __future__ import annotations

import asyncio
import datetime as dt
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from p4relay_scenarios import int_bed
from p4relay_testsupport import Server, running_server, wait_until


@pytest.fixture
def server(database_url: str, tmp_path: Path) -> Iterator[Server]:
    with running_server(database_url, tmp_path / "server.log") as srv:
        yield srv


def _hops(p: dict[str, Any]) -> list[tuple[str, int | None, int | None]]:
    return [(h["switch"], h["ingress_port"], h["egress_port"]) for h in p["hops"]]


def test_queues_and_the_calls_path_come_from_the_sinks_reports(
    server: Server, tmp_path: Path
) -> None:
    if os.geteuid() != 0:
        pytest.fail("the INT bed builds network namespaces: run as root")
    token = tmp_path / "ingest.token"
    token.write_text(server.ingest_token + "\n")
    started = dt.datetime.now(dt.UTC)
    flow = {"src": int_bed.RELAY_OUT, "dst": int_bed.CALLEE}

    def paths() -> list[dict[str, Any]]:
        got: list[dict[str, Any]] = server.get("/api/v1/paths", addr=int_bed.CALLEE[0])
        return [
            p
            for p in got
            if (p["src"]["addr"], p["src"]["port"]) == flow["src"]
            and (p["dst"]["addr"], p["dst"]["port"]) == flow["dst"]
        ]

    with int_bed.running(server.url, token, tmp_path / "bed") as bed:
        int_bed.post_session(server.url, server.ingest_token, started)
        wait_until(lambda: len(paths()) >= 1, within=15, what="the first path record")
        # the switch applies the new route before its Write answers: the
        # record may be stamped before detour() returns
        moved = dt.datetime.now(dt.UTC)
        asyncio.run(int_bed.detour(bed.addresses["s1"]))
        wait_until(lambda: len(paths()) >= 2, within=15, what="the path record after the detour")

        def hops_seen() -> set[tuple[str, int]]:
            series = server.get("/api/v1/queues", **{"from": started.isoformat()})
            return {(s["switch"], s["dev_port"]) for s in series if s["points"]}

        # s1's port 4 and s3's port 2 carry the media only after the detour
        wait_until(
            lambda: {("s1", 3), ("s1", 4), ("s3", 2)} <= hops_seen(),
            within=10,
            what="queue samples of every hop the media crossed",
        )
    # the path records: direct, then around by s3; the sink (s2) last
    records = sorted(paths(), key=lambda p: p["ts"])
    assert [_hops(p) for p in records] == [list(int_bed.DIRECT), list(int_bed.AROUND)]
    assert {p["sink"] for p in records} == {"s2"}
    assert dt.datetime.fromisoformat(records[1]["ts"]) >= moved
    # the call's path is INT's, not a reroute event's
    sid = server.get("/api/v1/sessions", call_id=int_bed.session_key().split(";")[0])["items"][0][
        "id"
    ]
    detail = server.get(f"/api/v1/sessions/{sid}")
    assert [(g["source"], g["path"]) for g in detail["path"]] == [
        ("int", "s1 (1>3) > s2 (3>1)"),
        ("int", "s1 (1>4) > s3 (1>2) > s2 (4>1)"),
    ]
    assert detail["path"][0]["until"] == detail["path"][1]["since"] == records[1]["ts"]
    assert detail["reroutes"] == []
    # per-hop depth and delay are the reports': every hop the media crossed
    # holds it a while in its egress queue (shaped s1-s2: ~20 us here)
    series = server.get("/api/v1/queues", **{"from": started.isoformat()})
    by_hop = {(s["switch"], s["dev_port"]): s["points"] for s in series}
    for hop in (("s1", 3), ("s1", 4), ("s3", 2)):
        assert by_hop[hop], hop
        assert all(p["depth_bytes"] is not None for p in by_hop[hop]), by_hop[hop]
        assert max(p["queue_delay_us"] or 0 for p in by_hop[hop]) > 0, by_hop[hop]
    # and no sample names a port the media did not leave by
    assert not {h for h in by_hop if h[0] in ("s1", "s3")} - {("s1", 3), ("s1", 4), ("s3", 2)}
