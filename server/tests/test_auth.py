"""Auth rules: logins, roles, token scopes, revocation, CORS, bootstrap command."""

from __future__ import annotations

import datetime as dt

import pytest
from conftest import ADMIN_PASSWORD, Auth, batch
from fastapi import FastAPI
from fastapi.testclient import TestClient
from p4relay_server import security
from p4relay_server.models import ApiToken, User
from sqlalchemy import Engine, select

READ_PATHS = [
    "/api/v1/sessions",
    "/api/v1/events",
    "/api/v1/switches",
    "/api/v1/agents",
    "/api/v1/sessions/export.csv",
]


@pytest.mark.parametrize(
    "path", [*READ_PATHS, "/api/v1/users", "/api/v1/tokens", "/api/v1/auth/me", "/metrics"]
)
def test_everything_but_health_and_login_needs_auth(
    client: TestClient, auth: Auth, path: str
) -> None:
    r = client.get(path)
    assert r.status_code == 401
    assert r.headers.get("www-authenticate") == "Bearer"
    assert client.get(path, headers={"Authorization": "Bearer nonsense"}).status_code == 401


def test_health_is_public(client: TestClient) -> None:
    assert client.get("/healthz").json() == {"status": "ok", "detail": None}
    assert client.get("/readyz").status_code == 200


def test_login(client: TestClient, auth: Auth) -> None:
    bad = client.post(
        "/api/v1/auth/login", json={"username": "admin", "password": "wrong-password"}
    )
    assert bad.status_code == 401
    nobody = client.post(
        "/api/v1/auth/login", json={"username": "ghost", "password": ADMIN_PASSWORD}
    )
    assert nobody.status_code == 401
    assert nobody.json()["detail"] == bad.json()["detail"]  # same answer: names are not revealed
    me = client.get("/api/v1/auth/me", headers=auth.admin).json()
    assert me["kind"] == "user" and me["role"] == "admin" and me["name"] == "admin"


def test_passwords_are_argon2_hashed(clean: Engine, auth: Auth) -> None:
    with clean.connect() as c:
        h = c.execute(select(User.password_hash).where(User.username == "admin")).scalar_one()
    assert h.startswith("$argon2id$")
    assert ADMIN_PASSWORD not in h


@pytest.mark.parametrize("path", READ_PATHS)
def test_viewer_and_read_token_can_read(client: TestClient, auth: Auth, path: str) -> None:
    assert client.get(path, headers=auth.viewer).status_code == 200
    assert client.get(path, headers=auth.read).status_code == 200


@pytest.mark.parametrize("path", READ_PATHS)
def test_ingest_token_cannot_read(client: TestClient, auth: Auth, path: str) -> None:
    r = client.get(path, headers=auth.ingest)
    assert r.status_code == 403
    assert "ingest" in r.json()["detail"]


def test_only_ingest_tokens_can_ingest(client: TestClient, auth: Auth) -> None:
    body = batch()
    for who in (auth.admin, auth.viewer, auth.read):
        r = client.post("/api/v1/ingest", json=body, headers=who)
        assert r.status_code == 403
    assert client.post("/api/v1/ingest", json=body, headers=auth.ingest).status_code == 200


def test_admin_endpoints_need_admin(client: TestClient, auth: Auth) -> None:
    new_user = {"username": "ops", "password": "long-enough-pw", "role": "viewer"}
    for who in (auth.viewer, auth.read, auth.ingest):
        assert client.get("/api/v1/users", headers=who).status_code == 403
        assert client.post("/api/v1/users", json=new_user, headers=who).status_code == 403
        assert (
            client.post(
                "/api/v1/tokens", json={"name": "x", "scope": "read"}, headers=who
            ).status_code
            == 403
        )
    r = client.post("/api/v1/users", json=new_user, headers=auth.admin)
    assert r.status_code == 201 and r.json()["role"] == "viewer"
    assert client.post("/api/v1/users", json=new_user, headers=auth.admin).status_code == 409
    short = {**new_user, "username": "ops2", "password": "short"}
    assert client.post("/api/v1/users", json=short, headers=auth.admin).status_code == 422


def test_disabled_user_loses_access(client: TestClient, auth: Auth) -> None:
    users = client.get("/api/v1/users", headers=auth.admin).json()
    viewer_id = next(u["id"] for u in users if u["username"] == "viewer")
    assert (
        client.patch(
            f"/api/v1/users/{viewer_id}", json={"disabled": True}, headers=auth.admin
        ).status_code
        == 200
    )
    assert client.get("/api/v1/sessions", headers=auth.viewer).status_code == 401


def test_token_lifecycle(client: TestClient, auth: Auth, clean: Engine) -> None:
    r = client.post(
        "/api/v1/tokens", json={"name": "agent-2", "scope": "ingest"}, headers=auth.admin
    )
    assert r.status_code == 201
    tok = r.json()
    assert tok["token"].startswith("p4r_")
    with clean.connect() as c:
        stored = c.execute(
            select(ApiToken.secret_hash).where(ApiToken.id == tok["id"])
        ).scalar_one()
    assert tok["token"].split("_", 2)[2] not in stored  # only a hash is kept
    h = {"Authorization": f"Bearer {tok['token']}"}
    assert client.post("/api/v1/ingest", json=batch(), headers=h).status_code == 200
    listed = client.get("/api/v1/tokens", headers=auth.admin).json()
    assert all("token" not in t for t in listed)
    assert client.delete(f"/api/v1/tokens/{tok['id']}", headers=auth.admin).status_code == 204
    assert client.post("/api/v1/ingest", json=batch(), headers=h).status_code == 401
    assert client.delete("/api/v1/tokens/99999", headers=auth.admin).status_code == 404


def test_expired_token_and_jwt(client: TestClient, auth: Auth, app: FastAPI, clean: Engine) -> None:
    soon = (dt.datetime.now(dt.UTC) + dt.timedelta(minutes=1)).isoformat()
    tok = client.post(
        "/api/v1/tokens",
        json={"name": "old", "scope": "read", "expires_at": soon},
        headers=auth.admin,
    ).json()
    h = {"Authorization": f"Bearer {tok['token']}"}
    assert client.get("/api/v1/sessions", headers=h).status_code == 200
    with clean.begin() as c:  # its time has come
        c.exec_driver_sql(
            "UPDATE api_tokens SET expires_at = now() - interval '1 second' WHERE name = 'old'"
        )
    assert client.get("/api/v1/sessions", headers=h).status_code == 401
    jwt_key = app.state.jwt_key
    stale, _ = security.issue_jwt(1, "admin", 0, jwt_key, dt.timedelta(seconds=-5))
    assert (
        client.get("/api/v1/sessions", headers={"Authorization": f"Bearer {stale}"}).status_code
        == 401
    )
    forged, _ = security.issue_jwt(
        1, "admin", 0, "another-key-entirely-0123456789abcdef", dt.timedelta(minutes=5)
    )
    assert (
        client.get("/api/v1/sessions", headers={"Authorization": f"Bearer {forged}"}).status_code
        == 401
    )


def test_tampered_api_token(client: TestClient, auth: Auth) -> None:
    t = auth.read_token
    bad = t[:-2] + ("AA" if not t.endswith("AA") else "BB")
    assert (
        client.get("/api/v1/sessions", headers={"Authorization": f"Bearer {bad}"}).status_code
        == 401
    )


def test_cors_only_configured_origins(client: TestClient, auth: Auth) -> None:
    pre = {
        "Access-Control-Request-Method": "GET",
        "Access-Control-Request-Headers": "authorization",
    }
    ok = client.options("/api/v1/sessions", headers={"Origin": "http://console.example", **pre})
    assert ok.headers.get("access-control-allow-origin") == "http://console.example"
    evil = client.options("/api/v1/sessions", headers={"Origin": "http://evil.example", **pre})
    assert "access-control-allow-origin" not in evil.headers
    r = client.get("/api/v1/sessions", headers={"Origin": "http://evil.example", **auth.viewer})
    assert "access-control-allow-origin" not in r.headers
