"""Credentials that end when they should, idempotency keys that cannot drop
data, and values that cannot poison a session."""

from __future__ import annotations

import datetime as dt
import json
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from conftest import T0, VIEWER_PASSWORD, Auth, batch, iso, sample_item, session_item
from fastapi import FastAPI
from fastapi.testclient import TestClient
from p4relay_server import security
from p4relay_server.models import CallSession, User
from p4relay_server.schemas.ingest import MAX_INTERVAL_PACKETS
from sqlalchemy import Engine, select
from starlette.websockets import WebSocketDisconnect


def viewer_id(clean: Engine) -> int:
    with clean.connect() as c:
        return int(c.execute(select(User.id).where(User.username == "viewer")).scalar_one())


# ------------------------------------------------------------ logins (JWTs)
@pytest.mark.parametrize(
    "change",
    [{"password": "another-password-2"}, {"role": "admin"}, {"disabled": True}],
    ids=["password", "role", "disabled"],
)
def test_user_change_ends_existing_logins(
    client: TestClient, auth: Auth, clean: Engine, change: dict[str, Any]
) -> None:
    assert client.get("/api/v1/auth/me", headers=auth.viewer).status_code == 200
    r = client.patch(f"/api/v1/users/{viewer_id(clean)}", json=change, headers=auth.admin)
    assert r.status_code == 200, r.text
    assert client.get("/api/v1/auth/me", headers=auth.viewer).status_code == 401
    assert client.get("/api/v1/auth/me", headers=auth.admin).status_code == 200


def test_patch_without_change_keeps_logins(client: TestClient, auth: Auth, clean: Engine) -> None:
    r = client.patch(
        f"/api/v1/users/{viewer_id(clean)}", json={"role": "viewer"}, headers=auth.admin
    )
    assert r.status_code == 200
    assert client.get("/api/v1/auth/me", headers=auth.viewer).status_code == 200


def test_logout_ends_the_users_logins(client: TestClient, auth: Auth) -> None:
    second = Auth._login(client, "viewer", VIEWER_PASSWORD)
    assert client.post("/api/v1/auth/logout", headers=auth.viewer).status_code == 204
    for token in (auth.viewer_jwt, second):
        assert client.get("/api/v1/auth/me", headers=Auth.h(token)).status_code == 401
    again = Auth._login(client, "viewer", VIEWER_PASSWORD)
    assert client.get("/api/v1/auth/me", headers=Auth.h(again)).status_code == 200
    # API tokens are revoked by an admin, not logged out.
    assert client.post("/api/v1/auth/logout", headers=auth.read).status_code == 403


def test_refresh_renews_until_the_login_is_too_old(
    client: TestClient, auth: Auth, app: FastAPI
) -> None:
    r = client.post("/api/v1/auth/refresh", headers=auth.viewer)
    assert r.status_code == 200, r.text
    fresh = r.json()["access_token"]
    assert client.get("/api/v1/auth/me", headers=Auth.h(fresh)).json()["name"] == "viewer"
    key = app.state.jwt_key
    claims = security.decode_jwt(fresh, key)
    assert claims is not None
    old_login = dt.datetime.now(dt.UTC) - dt.timedelta(hours=13)
    stale, _ = security.issue_jwt(
        claims.user_id, "viewer", claims.version, key, dt.timedelta(minutes=5), old_login
    )
    assert client.get("/api/v1/auth/me", headers=Auth.h(stale)).status_code == 200
    assert client.post("/api/v1/auth/refresh", headers=Auth.h(stale)).status_code == 401
    assert client.post("/api/v1/auth/refresh", headers=auth.read).status_code == 403


def test_default_login_lifetime_is_short(client: TestClient, auth: Auth) -> None:
    r = client.post("/api/v1/auth/login", json={"username": "viewer", "password": VIEWER_PASSWORD})
    expires = dt.datetime.fromisoformat(r.json()["expires_at"])
    assert expires - dt.datetime.now(dt.UTC) <= dt.timedelta(minutes=15)


def test_jwt_without_version_is_refused(client: TestClient, auth: Auth, app: FastAPI) -> None:
    import jwt

    now = dt.datetime.now(dt.UTC)
    legacy = jwt.encode(
        {"sub": "1", "role": "admin", "iat": now, "exp": now + dt.timedelta(minutes=5)},
        app.state.jwt_key,
        algorithm="HS256",
    )
    assert client.get("/api/v1/auth/me", headers=Auth.h(legacy)).status_code == 401


def test_token_expiry_in_the_past_is_refused(client: TestClient, auth: Auth) -> None:
    past = iso(dt.datetime.now(dt.UTC) - dt.timedelta(minutes=1))
    r = client.post(
        "/api/v1/tokens",
        json={"name": "late", "scope": "read", "expires_at": past},
        headers=auth.admin,
    )
    assert r.status_code == 422
    assert r.json()["detail"][0]["loc"] == ["body", "expires_at"]
    future = iso(dt.datetime.now(dt.UTC) + dt.timedelta(days=1))
    ok = client.post(
        "/api/v1/tokens",
        json={"name": "ok", "scope": "read", "expires_at": future},
        headers=auth.admin,
    )
    assert ok.status_code == 201


# ------------------------------------------------------------- live stream
@pytest.fixture
def fast_recheck(app: FastAPI) -> Iterator[None]:
    app.state.settings.live_recheck_s = 0.2
    yield


def _closed_with(ws: Any) -> int:
    with pytest.raises(WebSocketDisconnect) as e:
        while True:
            ws.receive_json()
    return int(e.value.code)


def test_live_closes_when_its_token_is_revoked(client: TestClient, auth: Auth) -> None:
    tokens = client.get("/api/v1/tokens", headers=auth.admin).json()
    read_id = next(t["id"] for t in tokens if t["scope"] == "read")
    with client.websocket_connect(f"/api/v1/live?token={auth.read_token}") as ws:
        assert ws.receive_json()["topic"] == "hello"
        assert client.delete(f"/api/v1/tokens/{read_id}", headers=auth.admin).status_code == 204
        assert _closed_with(ws) == 4401


def test_live_closes_on_logout_and_user_change(
    client: TestClient, auth: Auth, clean: Engine
) -> None:
    with client.websocket_connect(f"/api/v1/live?token={auth.viewer_jwt}") as ws:
        assert ws.receive_json()["topic"] == "hello"
        assert client.post("/api/v1/auth/logout", headers=auth.viewer).status_code == 204
        assert _closed_with(ws) == 4401
    with client.websocket_connect(f"/api/v1/live?token={auth.admin_jwt}") as ws:
        assert ws.receive_json()["topic"] == "hello"
        body = {"password": "a-new-password-3"}
        with clean.connect() as c:
            admin_id = c.execute(select(User.id).where(User.username == "admin")).scalar_one()
        assert client.patch(f"/api/v1/users/{admin_id}", json=body, headers=auth.admin).is_success
        assert _closed_with(ws) == 4401


def test_live_rechecks_periodically(
    client: TestClient, auth: Auth, clean: Engine, fast_recheck: None
) -> None:
    """A credential that ends without the hub hearing of it (here: expiry
    written straight into the database) is noticed by the periodic check."""
    with client.websocket_connect(f"/api/v1/live?token={auth.read_token}") as ws:
        assert ws.receive_json()["topic"] == "hello"
        with clean.begin() as c:
            c.exec_driver_sql(
                "UPDATE api_tokens SET expires_at = now() - interval '1 second' WHERE scope = 'read'"
            )
        assert _closed_with(ws) == 4401


# ------------------------------------------------------------- idempotency
def test_reused_key_with_other_body_is_409_and_keys_are_per_token(
    client: TestClient, auth: Auth, clean: Engine
) -> None:
    key = str(uuid.uuid4())
    first = {"idempotency_key": key, "sessions": [session_item("idem;1")]}
    assert client.post("/api/v1/ingest", json=first, headers=auth.ingest).status_code == 200
    again = client.post("/api/v1/ingest", json=first, headers=auth.ingest)
    assert again.status_code == 200 and again.json()["replayed"] is True
    # The key names one body: even the same content sent differently is refused.
    raw = json.dumps(first, indent=2)
    r = client.post(
        "/api/v1/ingest",
        content=raw,
        headers={**auth.ingest, "Content-Type": "application/json"},
    )
    assert r.status_code == 409
    other = {"idempotency_key": key, "sessions": [session_item("idem;2")]}
    r = client.post("/api/v1/ingest", json=other, headers=auth.ingest)
    assert r.status_code == 409, r.text
    # Another agent's token may use the same key for its own batch.
    created = client.post(
        "/api/v1/tokens", json={"name": "agent-2", "scope": "ingest"}, headers=auth.admin
    ).json()
    r = client.post("/api/v1/ingest", json=other, headers=Auth.h(created["token"]))
    assert r.status_code == 200 and r.json()["replayed"] is False
    with clean.connect() as c:
        keys = sorted(c.execute(select(CallSession.session_key)).scalars())
    assert keys == ["idem;1", "idem;2"]


# ------------------------------------------------------------ value bounds
@pytest.mark.parametrize(
    ("item", "field", "value"),
    [
        ("session", "seq", "1"),
        ("session", "offloaded", "yes"),
        ("session", "offloaded", 1),
        ("session", "seq", 1.0),
        ("session", "packets", 2**63 - 1),
        ("sample", "packets", 2**63 - 1),
        ("sample", "packets", MAX_INTERVAL_PACKETS + 1),
        ("sample", "bytes", 2**63 - 1),
        ("sample", "lost", "5"),
        ("sample", "jitter_ms", "0.5"),
        ("queue", "drops", 2**63 - 1),
        ("queue", "dev_port", "1"),
    ],
)
def test_out_of_range_and_loosely_typed_values_are_refused(
    client: TestClient, auth: Auth, item: str, field: str, value: object
) -> None:
    parts: dict[str, Any] = {
        "session": {"sessions": [{**session_item("bad;1"), field: value}]},
        "sample": {"samples": [{**sample_item("bad;1", T0), field: value}]},
        "queue": {"queue_samples": [{"switch": "sw1", "dev_port": 1, "ts": iso(T0), field: value}]},
    }[item]
    r = client.post("/api/v1/ingest", json=batch(**parts), headers=auth.ingest)
    assert r.status_code == 422, r.text
    assert any(field in d["loc"] for d in r.json()["detail"])


def test_addresses_that_cannot_be_stored_are_refused(client: TestClient, auth: Auth) -> None:
    """An IPv6 zone, a prefix or a port glued on: a clear 422 naming the field."""
    for addr in ("fe80::1%eth0", "fd00::10%1", "198.18.1.10/24", "::ffff:1.2.3.4:5"):
        item = session_item("scoped;1")
        item["legs"][0]["src"]["addr"] = addr
        r = client.post("/api/v1/ingest", json=batch(sessions=[item]), headers=auth.ingest)
        assert r.status_code == 422, (addr, r.text)
        assert any("addr" in d["loc"] for d in r.json()["detail"]), addr


def test_largest_values_cannot_poison_a_session(
    client: TestClient, auth: Auth, clean: Engine
) -> None:
    """Samples at the per-interval maximum keep being accepted, and a session
    whose running sums are already near the column's maximum saturates there
    instead of failing every later batch."""
    key = "big;1"
    assert client.post(
        "/api/v1/ingest", json=batch(sessions=[session_item(key)]), headers=auth.ingest
    ).is_success
    huge = {"packets": MAX_INTERVAL_PACKETS, "bytes": MAX_INTERVAL_PACKETS * 9216}
    samples = [sample_item(key, T0 + dt.timedelta(seconds=j), **huge) for j in range(50)]
    r = client.post("/api/v1/ingest", json=batch(samples=samples), headers=auth.ingest)
    assert r.status_code == 200, r.text
    with clean.connect() as c:
        packets, nbytes = c.execute(select(CallSession.packets, CallSession.bytes)).one()
    assert (packets, nbytes) == (50 * MAX_INTERVAL_PACKETS, 50 * MAX_INTERVAL_PACKETS * 9216)
    with clean.begin() as c:  # a session that has run for a very long time
        c.exec_driver_sql(f"UPDATE sessions SET bytes = {2**63 - 100}")
    for i in range(2):
        late = [sample_item(key, T0 + dt.timedelta(hours=1 + i), **huge)]
        r = client.post("/api/v1/ingest", json=batch(samples=late), headers=auth.ingest)
        assert r.status_code == 200, r.text
    with clean.connect() as c:
        packets, nbytes = c.execute(select(CallSession.packets, CallSession.bytes)).one()
    assert nbytes == 2**63 - 1
    assert packets == 52 * MAX_INTERVAL_PACKETS


def test_chunked_body_over_the_limit_is_413(client: TestClient, auth: Auth, app: FastAPI) -> None:
    limit = app.state.settings.limits.max_body_bytes

    def chunks() -> Iterator[bytes]:
        yield b'{"idempotency_key": "chunked-0001", "events": ['
        piece = b'{"event_id": "x", "type": "fallback"},' * 1000
        sent = 0
        while sent <= limit:
            yield piece
            sent += len(piece)
        yield b"{}]}"

    r = client.post(
        "/api/v1/ingest",
        content=chunks(),
        headers={**auth.ingest, "Content-Type": "application/json"},
    )
    assert r.status_code == 413, r.text[:300]
    small = client.post(
        "/api/v1/ingest",
        content=iter([b'{"idempotency_key": "chunked-0002"', b"}"]),
        headers={**auth.ingest, "Content-Type": "application/json"},
    )
    assert small.status_code == 200, small.text


# ------------------------------------------------------- a restarted agent
def test_end_from_a_restarted_agent_ends_the_session(
    client: TestClient, auth: Auth, clean: Engine
) -> None:
    """An agent that lost its journal numbers its updates from 1 again: its
    end of a session must still end it (with the final totals); other stale
    updates stay ignored, and nothing reopens an ended session."""
    key = "restart;1"

    def post(**kw: Any) -> dict[str, Any]:
        r = client.post(
            "/api/v1/ingest", json=batch(sessions=[session_item(key, **kw)]), headers=auth.ingest
        )
        assert r.status_code == 200, r.text
        body: dict[str, Any] = r.json()
        return body

    assert post(seq=57)["sessions_applied"] == 1
    assert post(seq=1, codec="PCMA")["sessions_stale"] == 1  # restarted agent, still active
    end = {"state": "ended", "ended_at": iso(T0 + dt.timedelta(minutes=2)), "packets": 12000}
    assert post(seq=2, **end)["sessions_applied"] == 1
    assert post(seq=3, state="active")["sessions_stale"] == 1
    assert post(seq=4, state="failed")["sessions_stale"] == 1
    with clean.connect() as c:
        state, seq, ended_at, packets, codec = c.execute(
            select(
                CallSession.state,
                CallSession.seq,
                CallSession.ended_at,
                CallSession.packets,
                CallSession.codec,
            )
        ).one()
    assert (state, seq, packets, codec) == ("ended", 57, 12000, "PCMU")
    assert ended_at == T0 + dt.timedelta(minutes=2)
