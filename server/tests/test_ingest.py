"""Ingest: idempotency, per-session order, unknown sessions, limits, bad input."""

from __future__ import annotations

import datetime as dt
from typing import Any

import pytest
from conftest import T0, Auth, batch, iso, sample_item, session_item
from fastapi import FastAPI
from fastapi.testclient import TestClient
from p4relay_server.models import CallSession, Event, QualitySample, SessionLeg
from sqlalchemy import Engine, func, select, text


def post(client: TestClient, auth: Auth, body: dict[str, Any]) -> Any:
    return client.post("/api/v1/ingest", json=body, headers=auth.ingest)


def count(engine: Engine, model: Any) -> int:
    with engine.connect() as c:
        return int(c.execute(select(func.count()).select_from(model)).scalar_one())


def test_replayed_batch_changes_nothing(client: TestClient, auth: Auth, clean: Engine) -> None:
    body = batch(
        agent={"name": "relay-1"},
        sessions=[session_item("c1;a")],
        samples=[sample_item("c1;a", T0 + dt.timedelta(seconds=i)) for i in range(5)],
        events=[
            {
                "event_id": "ev-00000001",
                "type": "offload_installed",
                "ts": iso(T0),
                "session_key": "c1;a",
            }
        ],
    )
    first = post(client, auth, body)
    assert first.status_code == 200, first.text
    assert first.json()["samples_stored"] == 5
    assert first.json()["replayed"] is False
    with clean.connect() as c:
        snapshot = c.execute(text("SELECT updated_at, mos_samples FROM sessions")).all()
    again = post(client, auth, body)
    assert again.status_code == 200
    assert again.json() == {**first.json(), "replayed": True}
    assert count(clean, QualitySample) == 5
    assert count(clean, Event) == 1
    with clean.connect() as c:
        assert c.execute(text("SELECT updated_at, mos_samples FROM sessions")).all() == snapshot


def test_items_dedupe_across_batches(client: TestClient, auth: Auth, clean: Engine) -> None:
    items = [sample_item("c1;a", T0)]
    ev = [{"event_id": "ev-dup-0001", "type": "agent_up", "ts": iso(T0)}]
    post(client, auth, batch(sessions=[session_item("c1;a")], samples=items, events=ev))
    r = post(client, auth, batch(samples=items, events=ev)).json()
    assert (r["samples_stored"], r["samples_duplicate"]) == (0, 1)
    assert (r["events_stored"], r["events_duplicate"]) == (0, 1)
    assert count(clean, QualitySample) == 1


def test_event_resent_with_other_content_is_409(
    client: TestClient, auth: Auth, clean: Engine
) -> None:
    """An event_id is an idempotency key: the same id with other content is
    refused whole (nothing of the batch stored), as a reused batch key is."""
    ev = {
        "event_id": "ev-conflict-01",
        "type": "fallback",
        "ts": iso(T0),
        "payload": {"reason": "a"},
    }
    assert post(client, auth, batch(events=[ev])).status_code == 200
    same = post(client, auth, batch(events=[ev]))
    assert same.status_code == 200 and same.json()["events_duplicate"] == 1
    for change in (
        {"payload": {"reason": "b"}},
        {"ts": iso(T0 + dt.timedelta(seconds=1))},
        {"severity": "warning"},
        {"session_key": "c9;z"},
    ):
        r = post(client, auth, batch(sessions=[session_item("c9;z")], events=[{**ev, **change}]))
        assert r.status_code == 409, (change, r.text)
        assert "ev-conflict-01" in r.json()["detail"]
    # Twice in one batch with other content: refused as well.
    twin = {**ev, "event_id": "ev-conflict-02"}
    r = post(client, auth, batch(events=[twin, {**twin, "payload": {"reason": "c"}}]))
    assert r.status_code == 409, r.text
    assert count(clean, Event) == 1
    assert count(clean, CallSession) == 0  # the refused batches stored nothing
    with clean.connect() as c:
        assert c.execute(select(Event.payload)).scalar_one() == {"reason": "a"}


def test_session_updates_apply_in_seq_order(client: TestClient, auth: Auth, clean: Engine) -> None:
    key = "c2;b"
    r = post(
        client,
        auth,
        batch(sessions=[session_item(key, seq=1), session_item(key, seq=3, state="ended")]),
    )
    assert r.json()["sessions_applied"] == 2
    # An older update arriving late is ignored, also within one batch.
    r = post(
        client,
        auth,
        batch(sessions=[session_item(key, seq=2, state="active"), session_item(key, seq=3)]),
    )
    assert (r.json()["sessions_applied"], r.json()["sessions_stale"]) == (0, 2)
    with clean.connect() as c:
        state, seq = c.execute(select(CallSession.state, CallSession.seq)).one()
    assert (state, seq) == ("ended", 3)


def test_update_replaces_legs(client: TestClient, auth: Auth, clean: Engine) -> None:
    key = "c3;c"
    post(client, auth, batch(sessions=[session_item(key, seq=1)]))
    assert count(clean, SessionLeg) == 2
    one_leg = session_item(key, seq=2)
    one_leg["legs"] = one_leg["legs"][:1]
    post(client, auth, batch(sessions=[one_leg]))
    assert count(clean, SessionLeg) == 1


def test_unknown_session_samples_kept_and_linked(
    client: TestClient, auth: Auth, clean: Engine
) -> None:
    key = "late;x"
    samples = [sample_item(key, T0 + dt.timedelta(seconds=i), lost=5, packets=45) for i in range(3)]
    events = [
        {
            "event_id": "ev-late-001",
            "type": "fallback",
            "ts": iso(T0),
            "session_key": key,
            "payload": {"reason": "table full"},
        }
    ]
    r = post(client, auth, batch(samples=samples, events=events)).json()
    assert (r["samples_stored"], r["samples_unlinked"]) == (3, 3)
    with clean.connect() as c:
        assert (
            c.execute(select(func.count()).where(QualitySample.session_id.is_(None))).scalar() == 3
        )
    # The session arrives (G.711 without PLC): samples and events get linked, MOS recomputed.
    post(client, auth, batch(sessions=[session_item(key, plc=False)]))
    with clean.connect() as c:
        sid = c.execute(select(CallSession.id)).scalar_one()
        linked = c.execute(select(QualitySample.session_id, QualitySample.mos)).all()
        ev_sid = c.execute(select(Event.session_id)).scalar_one()
        mos_avg, n = c.execute(select(CallSession.mos_avg, CallSession.mos_samples)).one()
    assert {s for s, _ in linked} == {sid}
    assert ev_sid == sid
    expected = 1 + 0.035 * (93.2 - 95 * 10 / (10 + 4.3))
    assert n == 3
    mos = linked[0][1]
    assert mos is not None
    assert mos_avg == pytest.approx(mos)
    assert mos < expected  # Annex B polynomial below the linear term here


def test_mos_summary_updates_incrementally(client: TestClient, auth: Auth, clean: Engine) -> None:
    key = "m;1"
    post(client, auth, batch(sessions=[session_item(key)]))
    post(client, auth, batch(samples=[sample_item(key, T0, lost=0)]))
    post(
        client,
        auth,
        batch(
            samples=[
                sample_item(key, T0 + dt.timedelta(seconds=1), lost=10, packets=40, jitter_ms=9)
            ]
        ),
    )
    with clean.connect() as c:
        mos_avg, mos_min, n, jmax = c.execute(
            select(
                CallSession.mos_avg,
                CallSession.mos_min,
                CallSession.mos_samples,
                CallSession.jitter_ms_max,
            )
        ).one()
        mos_rows = [m for (m,) in c.execute(select(QualitySample.mos))]
    all_mos = [m for m in mos_rows if m is not None]
    assert len(all_mos) == len(mos_rows)  # every sample scored
    assert n == 2
    assert mos_avg == pytest.approx(sum(all_mos) / 2)
    assert mos_min == pytest.approx(min(all_mos))
    assert jmax == 9


def counters(client: TestClient, auth: Auth, call_id: str) -> tuple[Any, Any, Any]:
    r = client.get("/api/v1/sessions", params={"call_id": call_id}, headers=auth.viewer)
    s = r.json()["items"][0]
    return s["packets"], s["bytes"], s["lost"]


def test_running_counters_on_active_sessions(client: TestClient, auth: Auth, clean: Engine) -> None:
    key = "run;1"
    post(client, auth, batch(sessions=[session_item(key)]))
    assert counters(client, auth, "run") == (None, None, None)
    t = [T0 + dt.timedelta(seconds=i) for i in range(3)]
    first = [
        sample_item(key, t[0], packets=48, lost=2),
        sample_item(key, t[0], direction="callee_to_caller", packets=50, lost=0, bytes=8160),
    ]
    post(client, auth, batch(samples=first))
    assert counters(client, auth, "run") == (98, 16160, 2)
    # A sample sent again (new batch, same natural key) is not counted twice.
    post(client, auth, batch(samples=[*first, sample_item(key, t[1], packets=40, lost=10)]))
    assert counters(client, auth, "run") == (138, 24160, 12)
    # A session update without totals (the agent sends them only at the end) keeps them.
    post(client, auth, batch(sessions=[session_item(key, seq=2, to_tag="tt")]))
    assert counters(client, auth, "run") == (138, 24160, 12)
    # The agent's final totals stand; a late sample does not change them.
    post(
        client,
        auth,
        batch(
            sessions=[
                session_item(
                    key, seq=3, state="ended", ended_at=iso(t[2]), packets=150, bytes=24000, lost=12
                )
            ]
        ),
    )
    post(client, auth, batch(samples=[sample_item(key, t[2], packets=12, lost=0)]))
    assert counters(client, auth, "run") == (150, 24000, 12)


def test_running_counters_include_samples_before_session(
    client: TestClient, auth: Auth, clean: Engine
) -> None:
    key = "early;1"
    early = [sample_item(key, T0 + dt.timedelta(seconds=i), packets=45, lost=5) for i in range(3)]
    post(client, auth, batch(samples=early))
    post(client, auth, batch(sessions=[session_item(key)]))
    assert counters(client, auth, "early") == (135, 24000, 15)
    post(client, auth, batch(samples=[sample_item(key, T0 + dt.timedelta(seconds=3))]))
    assert counters(client, auth, "early") == (185, 32000, 15)


def test_switch_and_queue_samples(client: TestClient, auth: Auth, clean: Engine) -> None:
    body = batch(
        switch={
            "name": "sw9",
            "grpc_address": "198.19.0.1:50052",
            "ports": [{"dev_port": 1, "name": "p4r-sw-1", "speed_mbps": 10000}],
            "relay_table_used": 1200,
            "relay_table_capacity": 65536,
        },
        queue_samples=[
            {
                "switch": "sw9",
                "dev_port": 1,
                "ts": iso(T0),
                "depth_bytes": 800,
                "queue_delay_us": 0.64,
                "utilisation": 0.5,
                "drops": 3,
            },
            {"switch": "sw9", "dev_port": 2, "ts": iso(T0), "drops": 0, "ired_qavg_bytes": 1600},
        ],
    )
    r = post(client, auth, body).json()
    assert r["queue_samples_stored"] == 2
    assert (
        post(client, auth, {**body, "idempotency_key": "another-key-1"}).json()[
            "queue_samples_duplicate"
        ]
        == 2
    )
    sw = client.get("/api/v1/switches", headers=auth.viewer).json()
    assert [p["dev_port"] for p in sw[0]["ports"]] == [1, 2]  # port 2 registered by its sample
    assert (sw[0]["relay_table_used"], sw[0]["relay_table_capacity"]) == (1200, 65536)
    # The switch could not be read (down): the last occupancy stays.
    post(client, auth, batch(switch={"name": "sw9", "up": False}))
    sw = client.get("/api/v1/switches", headers=auth.viewer).json()
    assert (sw[0]["up"], sw[0]["relay_table_used"], sw[0]["relay_table_capacity"]) == (
        False,
        1200,
        65536,
    )
    bad = post(client, auth, batch(switch={"name": "sw9", "relay_table_used": -1}))
    assert bad.status_code == 422
    for qavg in (-1, 1.5, "80", 2**41):  # a queue average is whole bytes, 0..2^40
        q = {"switch": "sw9", "dev_port": 2, "ts": iso(T0), "ired_qavg_bytes": qavg}
        assert post(client, auth, batch(queue_samples=[q])).status_code == 422, qavg


@pytest.mark.parametrize(
    ("limit_field", "part", "n"),
    [("max_samples", "samples", 4), ("max_sessions", "sessions", 3), ("max_events", "events", 3)],
)
def test_too_many_items_is_413_and_stores_nothing(
    client: TestClient, auth: Auth, clean: Engine, app: FastAPI, limit_field: str, part: str, n: int
) -> None:
    app.state.settings.limits = app.state.settings.limits.model_copy(update={limit_field: n - 1})
    items = {
        "samples": [sample_item("k;1", T0 + dt.timedelta(seconds=i)) for i in range(n)],
        "sessions": [session_item(f"k;{i}") for i in range(n)],
        "events": [
            {"event_id": f"ev-lim-{i:04d}", "type": "agent_up", "ts": iso(T0)} for i in range(n)
        ],
    }[part]
    r = post(client, auth, batch(**{part: items}))
    assert r.status_code == 413
    assert f"{part}: {n} items, limit {n - 1}" in r.json()["detail"]
    assert count(clean, QualitySample) == count(clean, CallSession) == count(clean, Event) == 0


def test_oversized_body_is_413(client: TestClient, auth: Auth, app: FastAPI) -> None:
    # The body limit is applied by middleware before parsing; the app's is 8 MiB.
    big = batch(
        samples=[sample_item("k;1", T0 + dt.timedelta(milliseconds=i)) for i in range(60_000)]
    )
    r = post(client, auth, big)
    assert r.status_code == 413
    assert "limit" in r.json()["detail"]


@pytest.mark.parametrize(
    ("mutate", "loc_part", "msg_part"),
    [
        (lambda b: b["samples"][0].update(direction="sideways"), "direction", "caller_to_callee"),
        (lambda b: b["samples"][0].update(ts="2026-11-21T10:00:00"), "ts", "timezone"),
        (lambda b: b["samples"][0].update(packets=-1), "packets", "greater than or equal"),
        (lambda b: b["samples"][0].update(ts="0811-08-27T08:26:34-21:25"), "ts", "between 1970"),
        (lambda b: b["samples"][0].update(ts="0001-01-01T00:00:00+05:00"), "ts", "out of range"),
        (lambda b: b["samples"][0].update(surprise=1), "surprise", "Extra inputs"),
        (lambda b: b.update(idempotency_key="x"), "idempotency_key", "at least 8"),
        (lambda b: b["samples"][0].update(session_key="a\x00b"), "body", "NUL"),
        (
            lambda b: b.update(
                events=[
                    {
                        "event_id": "ev-bad-0001",
                        "type": "reroute",
                        "ts": iso(T0),
                        "payload": {"flow": "f"},
                    }
                ]
            ),
            "events",
            "from_path, to_path, trigger",
        ),
        (
            lambda b: b.update(
                events=[{"event_id": "ev-bad-0002", "type": "meteor", "ts": iso(T0)}]
            ),
            "type",
            "offload_installed",
        ),
    ],
)
def test_invalid_payload_is_422_with_message(
    client: TestClient, auth: Auth, clean: Engine, mutate: Any, loc_part: str, msg_part: str
) -> None:
    body = batch(samples=[sample_item("k;1", T0)])
    mutate(body)
    r = post(client, auth, body)
    assert r.status_code == 422, r.text
    detail = r.json()["detail"]
    assert any(loc_part in map(str, d["loc"]) and msg_part in d["msg"] for d in detail), detail
    assert count(clean, QualitySample) == 0


def test_malformed_json_is_422(client: TestClient, auth: Auth) -> None:
    r = client.post(
        "/api/v1/ingest",
        content=b'{"idempotency_key": ',
        headers={**auth.ingest, "Content-Type": "application/json"},
    )
    assert r.status_code == 422
    assert "JSON" in r.text


def test_payload_non_finite_number_is_422(client: TestClient, auth: Auth) -> None:
    body = '{"idempotency_key":"abcdefgh1","events":[{"event_id":"ev-nan-0001","type":"agent_up","ts":"2026-11-21T10:00:00Z","payload":{"x":NaN}}]}'
    r = client.post(
        "/api/v1/ingest",
        content=body.encode(),
        headers={**auth.ingest, "Content-Type": "application/json"},
    )
    assert r.status_code == 422, r.text
