"""Maintenance and capacity: operators drain agents and take switches out of
service (operator role, audited), agents poll for it and report their
figures, which the switch view sums; bad input refused."""

from __future__ import annotations

from typing import Any

from conftest import Auth
from fastapi import FastAPI
from fastapi.testclient import TestClient
from p4relay_server.db import make_sessionmaker
from p4relay_server.services import accounts


def poll(client: TestClient, auth: Auth, **kw: Any) -> Any:
    body = {
        "agent": "rtpagent-1",
        "switch": "sw1",
        "mode": "active",
        "offloaded": 40,
        "capacity": 100,
        "by_pipe": {"0": 30, "1": 10},
        **kw,
    }
    return client.post("/api/v1/maintenance/poll", json=body, headers=auth.ingest)


def operator(client: TestClient, app: FastAPI) -> dict[str, str]:
    with make_sessionmaker(app.state.engine)() as db:
        accounts.create_user(db, "noc", "operator-password-1", "operator")
    r = client.post(
        "/api/v1/auth/login", json={"username": "noc", "password": "operator-password-1"}
    )
    assert r.status_code == 200 and r.json()["role"] == "operator", r.text
    return Auth.h(r.json()["access_token"])


def view(client: TestClient, auth: Auth) -> dict[str, Any]:
    r = client.get("/api/v1/maintenance", headers=auth.viewer)
    assert r.status_code == 200, r.text
    got: dict[str, Any] = r.json()
    return got


def test_out_of_service_reaches_the_agent_and_is_audited(
    client: TestClient, auth: Auth, app: FastAPI
) -> None:
    r = poll(client, auth)
    assert r.status_code == 200, r.text
    assert r.json() == {"agent_mode": "active", "switch_mode": "active", "switch_cap": None}
    (sw,) = view(client, auth)["switches"]
    assert (sw["name"], sw["offloaded"], sw["capacity"], sw["headroom"]) == ("sw1", 40, 100, 60)
    assert sw["utilisation"] == 0.4 and sw["by_pipe"] == {"0": 30, "1": 10}
    noc = operator(client, app)
    url = f"/api/v1/maintenance/switches/{sw['id']}"
    # A viewer may look, not act; an ingest token neither.
    assert client.put(url, json={"state": "out_of_service"}, headers=auth.viewer).status_code == 403
    assert client.put(url, json={"state": "out_of_service"}, headers=auth.ingest).status_code == 403
    r = client.put(url, json={"state": "out_of_service", "offload_cap": 50}, headers=noc)
    assert r.status_code == 200, r.text
    got = r.json()
    assert got["maintenance"] == "out_of_service" and got["offload_cap"] == 50
    assert got["maintenance_changed_by"] == "noc" and not got["evacuated"]
    assert poll(client, auth).json() == {
        "agent_mode": "active",
        "switch_mode": "out_of_service",
        "switch_cap": 50,
    }
    # The agent reports it evacuated: the switch shows it.
    poll(client, auth, mode="evacuated", offloaded=0, by_pipe={})
    (sw,) = view(client, auth)["switches"]
    assert sw["evacuated"] and sw["agents"][0]["reported_mode"] == "evacuated"
    # Setting the same state again changes nothing and is not recorded twice.
    assert client.put(url, json={"state": "out_of_service"}, headers=noc).status_code == 200
    ev = client.get("/api/v1/events", params={"type": "maintenance_set"}, headers=auth.viewer)
    assert ev.status_code == 200, ev.text
    (audit,) = ev.json()["items"]
    assert audit["payload"]["by"] == "noc" and audit["payload"]["target"] == "switch:sw1"
    assert audit["payload"]["state"] == "out_of_service" and audit["payload"]["offload_cap"] == 50
    r = client.put(url, json={"state": "active", "clear_cap": True}, headers=auth.admin)
    assert r.status_code == 200 and r.json()["offload_cap"] is None
    assert poll(client, auth).json()["switch_mode"] == "active"


def test_agent_drain_by_an_operator(client: TestClient, auth: Auth, app: FastAPI) -> None:
    poll(client, auth)
    (agent,) = view(client, auth)["switches"][0]["agents"]
    noc = operator(client, app)
    url = f"/api/v1/maintenance/agents/{agent['id']}"
    r = client.put(url, json={"state": "draining"}, headers=noc)
    assert r.status_code == 200, r.text
    assert r.json()["maintenance"] == "draining" and r.json()["switch"] == "sw1"
    assert poll(client, auth).json()["agent_mode"] == "draining"
    r = client.put(url, json={"state": "evacuated"}, headers=noc)
    assert poll(client, auth).json()["agent_mode"] == "evacuated"
    ev = client.get("/api/v1/events", params={"type": "maintenance_set"}, headers=auth.viewer)
    assert [e["payload"]["state"] for e in ev.json()["items"]] == ["evacuated", "draining"]


def test_bad_input_is_refused(client: TestClient, auth: Auth, app: FastAPI) -> None:
    noc = operator(client, app)
    assert client.put("/api/v1/maintenance/switches/999", json={}, headers=noc).status_code == 404
    assert (
        client.put("/api/v1/maintenance/agents/999", json={"state": "active"}, headers=noc)
    ).status_code == 404
    poll(client, auth)
    (sw,) = view(client, auth)["switches"]
    url = f"/api/v1/maintenance/switches/{sw['id']}"
    for body in (
        {"state": "off"},
        {"offload_cap": -1},
        {"offload_cap": 2**40},
        {"state": "active", "extra": 1},
    ):
        assert client.put(url, json=body, headers=noc).status_code == 422, body
    for kw in (
        {"mode": "sleeping"},
        {"offloaded": -1},
        {"by_pipe": {"../x": 1}},
        {"by_pipe": {str(i): 1 for i in range(65)}},
        {"agent": ""},
        {"agent": "a\x00b"},
    ):
        assert poll(client, auth, **kw).status_code == 422, kw
    # Only an ingest token may poll.
    r = client.post(
        "/api/v1/maintenance/poll",
        json={"agent": "x", "mode": "active", "offloaded": 0, "capacity": 0},
        headers=auth.viewer,
    )
    assert r.status_code == 403
    assert view(client, auth)["switches"][0]["maintenance"] == "active"
