"""Read side for the overview: calls over time, congestion episodes, fleet metrics,
and the congestion overlay of a session's detail."""

from __future__ import annotations

import datetime as dt
import uuid
from typing import Any

from conftest import T0, Auth, batch, iso, sample_item, session_item
from fastapi.testclient import TestClient
from prometheus_client.metrics_core import Metric
from prometheus_client.parser import text_string_to_metric_families


def ingest(client: TestClient, auth: Auth, **parts: Any) -> None:
    r = client.post("/api/v1/ingest", json=batch(**parts), headers=auth.ingest)
    assert r.status_code == 200, r.text


def get(client: TestClient, auth: Auth, path: str, **params: Any) -> Any:
    r = client.get(path, params=params, headers=auth.viewer)
    assert r.status_code == 200, r.text
    return r.json()


def ev(type_: str, t: dt.datetime, port: Any, **kw: Any) -> dict[str, Any]:
    return {
        "event_id": str(uuid.uuid4()),
        "type": type_,
        "ts": iso(t),
        "severity": "warning",
        "switch": kw.pop("switch", "sw1"),
        "payload": {"dev_port": port, **kw},
    }


def m(minutes: float) -> dt.datetime:
    return T0 + dt.timedelta(minutes=minutes)


def test_congestion_episodes_pair_onset_and_clear_per_port(client: TestClient, auth: Auth) -> None:
    ingest(
        client,
        auth,
        switch={"name": "sw1"},
        events=[
            ev("congestion_onset", m(-30), 1, queue_delay_us=800000.0),  # before the window
            ev("congestion_clear", m(5), 1),
            ev("congestion_onset", m(10), 2),
            ev("congestion_onset", m(12), 2),  # repeated onset: same episode
            ev("congestion_clear", m(20), 2),
            ev("congestion_clear", m(21), 3),  # clear with nothing open: ignored
            ev("congestion_onset", m(40), 3, queue=1),
            ev("congestion_onset", m(41), 3, switch="sw2"),
            ev("congestion_onset", m(-90), 4),  # closed long before the window
            ev("congestion_clear", m(-80), 4),
        ],
    )
    eps = get(client, auth, "/api/v1/congestion", since=iso(m(0)), until=iso(m(60)))
    got = [(e["switch"], e["dev_port"], e["queue"], e["started_at"], e["ended_at"]) for e in eps]

    def z(t: dt.datetime) -> str:
        return t.isoformat().replace("+00:00", "Z")

    assert got == [
        ("sw1", 1, 0, z(m(-30)), z(m(5))),
        ("sw1", 2, 0, z(m(10)), z(m(20))),
        ("sw1", 3, 1, z(m(40)), None),
        ("sw2", 3, 0, z(m(41)), None),
    ]
    assert eps[0]["queue_delay_us"] == 800000.0
    open_sw1 = get(
        client, auth, "/api/v1/congestion", since=iso(m(0)), until=iso(m(60)), switch="sw1",
        open_only=True,
    )  # fmt: skip
    assert [(e["dev_port"], e["queue"]) for e in open_sw1] == [(3, 1)]
    assert get(client, auth, "/api/v1/congestion", switch="nope") == []
    r = client.get(
        "/api/v1/congestion",
        params={"since": iso(m(5)), "until": iso(m(1))},
        headers=auth.viewer,
    )
    assert r.status_code == 422


def test_congestion_ignores_malformed_payloads(client: TestClient, auth: Auth) -> None:
    ingest(
        client,
        auth,
        events=[
            ev("congestion_onset", m(1), {"x": 1}, queue="high"),
            ev("congestion_onset", m(2), "7", queue_delay_us="slow"),
            ev("congestion_clear", m(3), True),
        ],
    )
    eps = get(client, auth, "/api/v1/congestion", since=iso(m(0)), until=iso(m(10)))
    assert [(e["dev_port"], e["queue"], e["ended_at"], e["queue_delay_us"]) for e in eps] == [
        (None, 0, z, None) for z in (iso(m(3)).replace("+00:00", "Z"),)
    ] + [(7, 0, None, None)]


def test_activity_counts_calls_up_at_each_step(client: TestClient, auth: Auth) -> None:
    calls = [
        session_item("a;t", started_at=iso(m(0)), offloaded=True),
        session_item("b;t", started_at=iso(m(2)), offloaded=False, offload_reason="codec"),
        session_item(
            "c;t", started_at=iso(m(1)), state="ended", ended_at=iso(m(3)), offloaded=True
        ),
        session_item("d;t", started_at=iso(m(9)), state="failed", ended_at=iso(m(9))),
    ]
    ingest(client, auth, sessions=calls)
    act = get(client, auth, "/api/v1/overview/activity", **{"from": iso(m(0)), "to": iso(m(4))})
    assert act["step_s"] == 60
    assert [(p["active"], p["offloaded"]) for p in act["points"]] == [
        (1, 1),  # a
        (2, 2),  # a, c
        (3, 2),  # a, b, c
        (2, 1),  # c ended at 3
        (2, 1),
    ]
    big = get(
        client, auth, "/api/v1/overview/activity",
        **{"from": iso(m(0)), "to": iso(m(60 * 24 * 7)), "step_s": 1},
    )  # fmt: skip
    assert len(big["points"]) <= 1001 and big["step_s"] == 605
    r = client.get(
        "/api/v1/overview/activity",
        params={"from": iso(m(5)), "to": iso(m(1))},
        headers=auth.viewer,
    )
    assert r.status_code == 422


def test_session_detail_carries_its_switch_congestion(client: TestClient, auth: Auth) -> None:
    ingest(
        client,
        auth,
        sessions=[session_item("call;t", started_at=iso(m(0)), state="ended", ended_at=iso(m(10)))],
        events=[
            ev("congestion_onset", m(-5), 2),
            ev("congestion_clear", m(3), 2),
            ev("congestion_onset", m(8), 4),
            ev("congestion_onset", m(20), 5),  # after the call
            ev("congestion_onset", m(1), 2, switch="sw9"),  # another switch
        ],
    )
    sid = get(client, auth, "/api/v1/sessions")["items"][0]["id"]
    d = get(client, auth, f"/api/v1/sessions/{sid}")
    assert [(e["dev_port"], e["ended_at"] is None) for e in d["congestion"]] == [
        (2, False),
        (4, True),
    ]


def test_fleet_metrics(client: TestClient, auth: Auth) -> None:
    now = dt.datetime.now(dt.UTC)
    calls = [
        session_item(
            f"c{i};t", offloaded=i != 0, offload_reason="relay table full" if i == 0 else None
        )
        for i in range(4)
    ]
    samples = [
        sample_item(f"c{i};t", now - dt.timedelta(seconds=5), lost=20 if i == 3 else 0)
        for i in range(4)
    ]
    ingest(
        client,
        auth,
        switch={"name": "sw1", "relay_table_used": 900, "relay_table_capacity": 1000},
        agent={"name": "relay-1", "switch": "sw1"},
        sessions=calls,
        samples=samples,
        events=[ev("congestion_onset", now - dt.timedelta(minutes=1), 2)],
    )
    r = client.get("/api/v1/overview/metrics", headers=auth.read)
    assert r.status_code == 200, r.text
    assert r.headers["content-type"].startswith("text/plain")
    lines = {
        ln.rsplit(" ", 1)[0]: float(ln.rsplit(" ", 1)[1])
        for ln in r.text.splitlines()
        if ln and not ln.startswith("#")
    }
    assert lines["p4relay_calls_active"] == 4
    assert lines["p4relay_calls_offloaded"] == 3
    assert lines['p4relay_calls_not_offloaded{reason="relay table full"}'] == 1
    assert lines["p4relay_calls_sampled"] == 4
    assert lines["p4relay_calls_mos_degraded"] == 1
    assert (
        lines['p4relay_calls_mos{quantile="0.1"}']
        < 3.6
        < lines['p4relay_calls_mos{quantile="0.5"}']
    )
    assert lines['p4relay_calls_loss_ratio{quantile="0.99"}'] > 0.2
    assert lines['p4relay_switch_up{switch="sw1"}'] == 1
    assert lines['p4relay_switch_relay_table_used{switch="sw1"}'] == 900
    assert lines['p4relay_switch_relay_table_capacity{switch="sw1"}'] == 1000
    assert 0 <= lines['p4relay_agent_last_seen_age_seconds{agent="relay-1"}'] < 60
    assert lines['p4relay_congestion_open{switch="sw1"}'] == 1
    assert client.get("/api/v1/overview/metrics").status_code == 401


FLEET_FAMILIES = {
    "p4relay_calls_active",
    "p4relay_calls_offloaded",
    "p4relay_calls_not_offloaded",
    "p4relay_calls_sampled",
    "p4relay_calls_mos_degraded",
    "p4relay_calls_mos",
    "p4relay_calls_loss_ratio",
    "p4relay_calls_jitter_seconds",
    "p4relay_switch_up",
    "p4relay_switch_last_seen_age_seconds",
    "p4relay_switch_relay_table_used",
    "p4relay_switch_relay_table_capacity",
    "p4relay_agent_last_seen_age_seconds",
    "p4relay_congestion_open",
}


def fleet(client: TestClient, auth: Auth) -> dict[str, Metric]:
    r = client.get("/api/v1/overview/metrics", headers=auth.read)
    assert r.status_code == 200, r.text
    return {f.name: f for f in text_string_to_metric_families(r.text)}


def test_fleet_metrics_are_prometheus_text_whatever_the_labels_hold(
    client: TestClient, auth: Auth
) -> None:
    """Every family is declared (a gauge) even with nothing to count, and a label
    value with quotes, backslashes and line breaks (a reason an agent sent) is
    escaped: Prometheus' own parser reads back what was stored."""
    empty = fleet(client, auth)
    assert set(empty) == FLEET_FAMILIES
    assert {f.type for f in empty.values()} == {"gauge"}
    assert [s.value for s in empty["p4relay_calls_active"].samples] == [0]
    assert empty["p4relay_calls_mos"].samples == []
    reason = 'said "no" \\ twice\nthen gave up'
    ingest(
        client,
        auth,
        sessions=[session_item("q;t", offloaded=False, offload_reason=reason)],
    )
    (s,) = fleet(client, auth)["p4relay_calls_not_offloaded"].samples
    assert (s.labels, s.value) == ({"reason": reason}, 1)


def test_sessions_filter_by_loss_and_jitter(client: TestClient, auth: Auth) -> None:
    ingest(
        client,
        auth,
        sessions=[session_item(f"{k};t", started_at=iso(m(i))) for i, k in enumerate("abc")],
        samples=[
            sample_item("a;t", m(1), packets=30, lost=20),  # 40 % lost
            sample_item("b;t", m(2), packets=99, lost=1, jitter_ms=9.0),  # 1 %, jitter 9 ms
        ],
    )

    def keys(**params: Any) -> list[str]:
        return [s["session_key"] for s in get(client, auth, "/api/v1/sessions", **params)["items"]]

    assert keys(loss_min=5) == ["a;t"]
    assert keys(loss_min=1) == ["b;t", "a;t"]
    assert keys(loss_min=0) == ["b;t", "a;t"]  # c has no counters yet
    assert keys(jitter_min=5) == ["b;t"]
    assert keys(jitter_min=5, loss_min=5) == []
    for bad in ({"loss_min": -1}, {"loss_min": 101}, {"jitter_min": "x"}):
        r = client.get("/api/v1/sessions", params=bad, headers=auth.viewer)
        assert r.status_code == 422, bad
    csv_text = client.get(
        "/api/v1/sessions/export.csv", params={"loss_min": 5}, headers=auth.viewer
    ).text
    assert "a;t" in csv_text and "b;t" not in csv_text
