"""One-way media events: the session's silent direction, set and cleared, in
the API and on the live stream; bad payloads refused."""

from __future__ import annotations

import datetime as dt
from typing import Any

from conftest import T0, Auth, batch, iso, session_item
from fastapi.testclient import TestClient


def one_way(n: int, key: str, kind: str, direction: str, at: int) -> dict[str, Any]:
    return {
        "event_id": f"ev-oneway-{n:04d}",
        "type": kind,
        "ts": iso(T0 + dt.timedelta(seconds=at)),
        "severity": "warning" if kind == "one_way_media" else "info",
        "session_key": key,
        "payload": {"direction": direction, "silent_s": 5.0},
    }


def post(client: TestClient, auth: Auth, body: dict[str, Any]) -> Any:
    return client.post("/api/v1/ingest", json=body, headers=auth.ingest)


def summary(client: TestClient, auth: Auth, call_id: str) -> dict[str, Any]:
    r = client.get("/api/v1/sessions", params={"call_id": call_id}, headers=auth.viewer)
    assert r.status_code == 200, r.text
    (item,) = r.json()["items"]
    return dict(item)


def test_silent_direction_set_then_cleared(client: TestClient, auth: Auth) -> None:
    assert post(client, auth, batch(sessions=[session_item("ow1;a")])).status_code == 200
    assert summary(client, auth, "ow1")["one_way"] is None
    ev = one_way(1, "ow1;a", "one_way_media", "callee_to_caller", 10)
    assert post(client, auth, batch(events=[ev])).status_code == 200
    s = summary(client, auth, "ow1")
    assert s["one_way"] == "callee_to_caller"
    detail = client.get(f"/api/v1/sessions/{s['id']}", headers=auth.viewer).json()
    assert detail["one_way"] == "callee_to_caller"
    assert [e["type"] for e in detail["events"]] == ["one_way_media"]
    # A clearing of the other direction leaves this one.
    other = one_way(2, "ow1;a", "one_way_media_cleared", "caller_to_callee", 11)
    assert post(client, auth, batch(events=[other])).status_code == 200
    assert summary(client, auth, "ow1")["one_way"] == "callee_to_caller"
    # A session update (the agent's full state) does not touch it.
    assert post(client, auth, batch(sessions=[session_item("ow1;a", seq=2)])).status_code == 200
    assert summary(client, auth, "ow1")["one_way"] == "callee_to_caller"
    done = one_way(3, "ow1;a", "one_way_media_cleared", "callee_to_caller", 12)
    assert post(client, auth, batch(events=[done])).status_code == 200
    assert summary(client, auth, "ow1")["one_way"] is None


def test_set_and_cleared_in_one_batch_apply_in_time_order(client: TestClient, auth: Auth) -> None:
    evs = [
        one_way(12, "ow2;a", "one_way_media", "caller_to_callee", 30),
        one_way(11, "ow2;a", "one_way_media_cleared", "caller_to_callee", 20),
        one_way(10, "ow2;a", "one_way_media", "caller_to_callee", 10),
    ]
    assert (
        post(client, auth, batch(sessions=[session_item("ow2;a")], events=evs)).status_code == 200
    )
    assert summary(client, auth, "ow2")["one_way"] == "caller_to_callee"


def test_live_stream_hears_the_sessions_state(client: TestClient, auth: Auth) -> None:
    assert post(client, auth, batch(sessions=[session_item("ow3;a")])).status_code == 200
    with client.websocket_connect(f"/api/v1/live?token={auth.viewer_jwt}&topics=sessions") as ws:
        assert ws.receive_json()["topic"] == "hello"
        ev = one_way(20, "ow3;a", "one_way_media", "caller_to_callee", 5)
        assert post(client, auth, batch(events=[ev])).status_code == 200
        msg = ws.receive_json()
        assert msg["topic"] == "sessions"
        (item,) = msg["items"]
        assert (item["session_key"], item["state"], item["one_way"]) == (
            "ow3;a",
            "active",
            "caller_to_callee",
        )


def test_bad_one_way_events_refused(client: TestClient, auth: Auth) -> None:
    ev = one_way(30, "ow4;a", "one_way_media", "callee_to_caller", 1)
    no_dir = {**ev, "payload": {"silent_s": 5.0}}
    r = post(client, auth, batch(events=[no_dir]))
    assert r.status_code == 422 and "direction" in r.text
    # An unknown direction is stored as an event but names no direction of the session.
    odd = {**ev, "event_id": "ev-oneway-odd1", "payload": {"direction": "sideways"}}
    assert (
        post(client, auth, batch(sessions=[session_item("ow4;a")], events=[odd])).status_code == 200
    )
    assert summary(client, auth, "ow4")["one_way"] is None
