"""Live stream: WebSocket subscribers get stored changes; auth; overflow."""

from __future__ import annotations

import datetime as dt

import pytest
from conftest import T0, Auth, batch, iso, sample_item, session_item
from fastapi import FastAPI
from fastapi.testclient import TestClient
from starlette.websockets import WebSocketDisconnect


def test_subscriber_receives_changes(client: TestClient, auth: Auth) -> None:
    with client.websocket_connect(f"/api/v1/live?token={auth.viewer_jwt}") as ws:
        assert ws.receive_json() == {
            "topic": "hello",
            "topics": ["events", "queues", "samples", "sessions"],
        }
        body = batch(
            sessions=[session_item("live;1")],
            samples=[sample_item("live;1", T0)],
            queue_samples=[{"switch": "sw1", "dev_port": 1, "ts": iso(T0), "depth_pkts": 7}],
            events=[
                {
                    "event_id": "ev-live-001",
                    "type": "congestion_onset",
                    "ts": iso(T0),
                    "payload": {"dev_port": 1},
                }
            ],
        )
        assert client.post("/api/v1/ingest", json=body, headers=auth.ingest).status_code == 200
        got = {m["topic"]: m["items"] for m in (ws.receive_json() for _ in range(4))}
        assert got["sessions"][0]["session_key"] == "live;1"
        assert got["sessions"][0]["caller"] == "198.18.1.10:6000"
        assert got["sessions"][0]["callee"] == "198.18.2.10:7000"
        assert got["samples"][0]["mos"] == pytest.approx(4.409, abs=1e-3)
        assert got["queues"][0]["depth_pkts"] == 7
        assert got["events"][0]["type"] == "congestion_onset"
        # A replay is stored nowhere and announced nowhere: the next message is new data.
        client.post("/api/v1/ingest", json=body, headers=auth.ingest)
        client.post(
            "/api/v1/ingest",
            json=batch(samples=[sample_item("live;1", T0 + dt.timedelta(seconds=1))]),
            headers=auth.ingest,
        )
        nxt = ws.receive_json()
        assert nxt["topic"] == "samples" and nxt["items"][0]["ts"] == iso(
            T0 + dt.timedelta(seconds=1)
        )


def test_topic_filter(client: TestClient, auth: Auth) -> None:
    with client.websocket_connect(f"/api/v1/live?token={auth.read_token}&topics=events") as ws:
        assert ws.receive_json()["topics"] == ["events"]
        client.post(
            "/api/v1/ingest", json=batch(samples=[sample_item("x;1", T0)]), headers=auth.ingest
        )
        client.post(
            "/api/v1/ingest",
            json=batch(events=[{"event_id": "ev-topic-01", "type": "agent_up", "ts": iso(T0)}]),
            headers=auth.ingest,
        )
        assert ws.receive_json()["topic"] == "events"


@pytest.mark.parametrize(
    "query", ["", "?token=bogus", "?token={ingest}", "?token={read}&topics=gossip"]
)
def test_live_requires_read_credentials(client: TestClient, auth: Auth, query: str) -> None:
    url = "/api/v1/live" + query.format(ingest=auth.ingest_token, read=auth.read_token)
    with pytest.raises(WebSocketDisconnect) as e, client.websocket_connect(url) as ws:
        ws.receive_json()
    assert e.value.code == 1008


def test_slow_subscriber_is_told_and_closed(client: TestClient, auth: Auth, app: FastAPI) -> None:
    app.state.live._queue_size = 2
    with client.websocket_connect(f"/api/v1/live?token={auth.viewer_jwt}&topics=samples") as ws:
        ws.receive_json()
        # Five messages published in one go on the event loop: the sender has
        # no chance to drain in between, as with a client that stopped reading.
        msg = {"topic": "samples", "items": []}
        assert client.portal is not None
        client.portal.call(app.state.live.publish, [msg] * 5)
        msgs = []
        with pytest.raises(WebSocketDisconnect) as e:
            while True:
                msgs.append(ws.receive_json())
        assert e.value.code == 1013
        assert msgs[-1] == {"topic": "overflow"}
        assert [m["topic"] for m in msgs[:-1]] == ["samples", "samples"]
