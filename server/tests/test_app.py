"""Health, readiness, metrics, the console at /, bad input never a 500, CLI."""

from __future__ import annotations

import ast
import json
import os
import subprocess
import sys
import tomllib
from pathlib import Path
from typing import Any

import pytest
from conftest import Auth, batch
from fastapi.testclient import TestClient
from p4relay_server.app import create_app
from p4relay_server.config import Settings
from p4relay_server.models import ApiToken, User
from p4relay_server.openapi import openapi_json
from sqlalchemy import Engine, select, text

REPO = Path(__file__).resolve().parents[2]


def test_openapi_json_is_current() -> None:
    committed = (REPO / "server" / "openapi.json").read_text()
    assert committed == openapi_json(), (
        "server/openapi.json is stale: run `p4relay-server openapi -o server/openapi.json`"
    )


def test_readyz_reports_database_down(settings: Settings) -> None:
    down = settings.model_copy(
        update={"database_url": "postgresql+psycopg://nobody@127.0.0.1:1/none"}
    )
    with TestClient(create_app(down)) as c:
        r = c.get("/readyz")
        assert r.status_code == 503
        assert r.json()["status"] == "unavailable"
        assert c.get("/healthz").status_code == 200
        # Any data route answers 503 with a clear message rather than crashing.
        r = c.post("/api/v1/auth/login", json={"username": "a", "password": "b"})
        assert r.status_code == 503
        assert "database unavailable" in r.json()["detail"]


def test_readyz_reports_schema_behind(settings: Settings, clean: Engine) -> None:
    with clean.begin() as c:
        head = c.execute(text("SELECT version_num FROM alembic_version")).scalar_one()
        c.execute(text("UPDATE alembic_version SET version_num = 'old'"))
    try:
        with TestClient(create_app(settings, clean)) as cl:
            r = cl.get("/readyz")
        assert r.status_code == 503
        assert "migrate" in r.json()["detail"]
    finally:
        with clean.begin() as c:
            c.execute(text("UPDATE alembic_version SET version_num = :v"), {"v": head})


def test_metrics(client: TestClient, auth: Auth) -> None:
    client.post("/api/v1/ingest", json=batch(), headers=auth.ingest)
    r = client.get("/metrics", headers=auth.read)
    assert r.status_code == 200
    assert "p4relay_ingest_batches_total" in r.text
    assert 'p4relay_http_requests_total{method="POST",route="/api/v1/ingest"' in r.text
    assert client.get("/metrics", headers=auth.ingest).status_code == 401


def test_console_served_when_built(settings: Settings, clean: Engine, tmp_path: Path) -> None:
    dist = tmp_path / "dist"
    (dist / "assets").mkdir(parents=True)
    (dist / "index.html").write_text("<html>p4relay console</html>")
    (dist / "assets" / "app.js").write_text("console.log(1)")
    with TestClient(create_app(settings.model_copy(update={"console_dir": dist}), clean)) as c:
        assert "p4relay console" in c.get("/").text
        assert c.get("/assets/app.js").text == "console.log(1)"
        assert "p4relay console" in c.get("/sessions/42").text  # client-side route
        assert c.get("/api/v1/sessions").status_code == 401  # the API still wins
        assert c.get("/healthz").json()["status"] == "ok"


def test_console_absent_is_fine(client: TestClient) -> None:
    assert client.get("/").status_code == 404
    assert client.get("/docs").status_code == 200


def test_unknown_ids_and_wrong_methods(client: TestClient, auth: Auth) -> None:
    assert client.get("/api/v1/sessions/0", headers=auth.viewer).status_code == 422
    assert client.get(f"/api/v1/sessions/{2**70}", headers=auth.viewer).status_code == 422
    assert client.get("/api/v1/switches/-1", headers=auth.viewer).status_code == 422
    assert client.patch(f"/api/v1/users/{2**40}", json={}, headers=auth.admin).status_code == 422
    assert client.get("/api/v1/sessions/123456", headers=auth.viewer).status_code == 404
    assert client.put("/api/v1/ingest", json={}, headers=auth.ingest).status_code == 405


def _cli(
    db_url: str, *args: str, stdin: str | None = None, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    full_env = {
        k: v
        for k, v in os.environ.items()
        if k not in ("P4RELAY_SERVER_ADMIN_PASSWORD", "P4RELAY_ADMIN_PASSWORD")
    }
    full_env.update(
        {
            "P4RELAY_SERVER_DATABASE_URL": db_url,
            "P4RELAY_SERVER_LOG_LEVEL": "warning",
            **(env or {}),
        }
    )
    return subprocess.run(
        [sys.executable, "-m", "p4relay_server.cli", *args],
        input=stdin,
        capture_output=True,
        text=True,
        env=full_env,
        timeout=60,
        check=False,
    )


def test_cli_create_admin_and_token(db_url: str, clean: Engine, client: TestClient) -> None:
    r = _cli(
        db_url, "create-admin", "--username", "root", "--password-stdin", stdin="a-long-password\n"
    )
    assert r.returncode == 0, r.stderr
    assert "created admin 'root'" in r.stdout
    dup = _cli(
        db_url, "create-admin", "--username", "root", "--password-stdin", stdin="a-long-password\n"
    )
    assert dup.returncode == 1 and "already exists" in dup.stderr
    weak = _cli(db_url, "create-admin", "--username", "weak", "--password-stdin", stdin="short\n")
    assert weak.returncode == 1 and "at least" in weak.stderr
    no_pw = _cli(db_url, "create-admin", "--username", "nopw", stdin="")
    assert no_pw.returncode != 0 and "no password" in no_pw.stderr
    tok = _cli(db_url, "create-token", "--name", "agent-9", "--scope", "ingest")
    assert tok.returncode == 0, tok.stderr
    token = tok.stdout.strip()
    assert token.startswith("p4r_") and "\n" not in token
    with clean.connect() as c:
        assert c.execute(select(User.role).where(User.username == "root")).scalar() == "admin"
        assert (
            c.execute(select(ApiToken.scope).where(ApiToken.name == "agent-9")).scalar() == "ingest"
        )
    assert (
        client.post(
            "/api/v1/auth/login", json={"username": "root", "password": "a-long-password"}
        ).status_code
        == 200
    )
    assert (
        client.post(
            "/api/v1/ingest", json=batch(), headers={"Authorization": f"Bearer {token}"}
        ).status_code
        == 200
    )


def test_cli_migrate_and_config_file(db_url: str, tmp_path: Path) -> None:
    r = _cli(db_url, "migrate", "current")
    assert r.returncode == 0, r.stderr
    # The newest migration is the head the migrated database reports.
    versions = Path(__file__).resolve().parents[2] / "migrations" / "versions"
    head = max(f.name.split("_", 1)[0] for f in versions.glob("[0-9][0-9][0-9][0-9]_*.py"))
    assert f"{head} (head)" in r.stdout
    cfg = tmp_path / "server.toml"
    cfg.write_text(
        'database_url = "postgresql+psycopg://from-file@127.0.0.1:1/x"\n[retention]\nraw_hours = 1.5\n'
    )
    from p4relay_server.config import load_settings

    env_backup = {
        k: os.environ.pop(k)
        for k in list(os.environ)
        if k.startswith("P4RELAY_") and k != "P4RELAY_TEST_DATABASE_URL"
    }
    try:
        s = load_settings(cfg)
        assert s.database_url.startswith("postgresql+psycopg://from-file")
        assert s.retention.raw_hours == 1.5
        os.environ["P4RELAY_SERVER_RETENTION__RAW_HOURS"] = "3"
        assert load_settings(cfg).retention.raw_hours == 3  # env beats file
        assert load_settings(
            cfg, database_url="postgresql+psycopg://flag@h/db"
        ).database_url.endswith("flag@h/db")
        # A former name is still read, with a warning; the current name wins over it.
        os.environ["P4RELAY_RETENTION__RAW_HOURS"] = "4"
        os.environ["P4RELAY_JWT_TTL_MINUTES"] = "7"
        with pytest.warns(FutureWarning) as got:
            s = load_settings(cfg)
        assert {str(w.message).split()[0] for w in got} == {
            "P4RELAY_JWT_TTL_MINUTES",
            "P4RELAY_RETENTION__RAW_HOURS",
        }
        assert (s.jwt_ttl_minutes, s.retention.raw_hours) == (7, 3)
    finally:
        for k in ("RETENTION__RAW_HOURS", "JWT_TTL_MINUTES", "CONFIG"):
            os.environ.pop(f"P4RELAY_SERVER_{k}", None)
            os.environ.pop(f"P4RELAY_{k}", None)
        os.environ.update(env_backup)
    missing = _cli(db_url, "--config", str(tmp_path / "nope.toml"), "migrate", "current")
    assert missing.returncode == 2 and "config file not found" in missing.stderr


def test_cli_openapi_and_help(db_url: str) -> None:
    r = _cli(db_url, "openapi")
    assert r.returncode == 0
    doc: dict[str, Any] = json.loads(r.stdout)
    assert "/api/v1/ingest" in doc["paths"]
    h = _cli(db_url, "--help")
    for cmd in (
        "serve",
        "migrate",
        "create-admin",
        "create-token",
        "retention",
        "openapi",
    ):
        assert cmd in h.stdout


def test_cli_retention(db_url: str) -> None:
    r = _cli(db_url, "retention")
    assert r.returncode == 0, r.stderr
    assert set(json.loads(r.stdout)) >= {"quality_buckets", "quality_expired", "queue_buckets"}


def test_cli_register_switch(db_url: str, clean: Engine, client: TestClient, auth: Auth) -> None:
    r = _cli(db_url, "register-switch", "--name", "sw1", "--grpc-address", "127.0.0.1:50052")
    assert r.returncode == 0, r.stderr
    again = _cli(db_url, "register-switch", "--name", "sw1", "--grpc-address", "198.19.0.1:50052")
    assert again.returncode == 0
    listed = client.get("/api/v1/ingest/switches", headers=auth.ingest).json()
    assert [(s["name"], s["grpc_address"]) for s in listed] == [("sw1", "198.19.0.1:50052")]


def test_server_knows_nothing_of_bfrt() -> None:
    """The web service never talks to a switch (the collector does): no module
    of the server imports gRPC or the switch client, at any depth, and the
    package does not depend on them."""
    src = Path(__file__).resolve().parents[1] / "src"
    found: list[str] = []
    for path in sorted(src.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            names = (
                [a.name for a in node.names]
                if isinstance(node, ast.Import)
                else [node.module or ""]
                if isinstance(node, ast.ImportFrom)
                else []
            )
            found += [f"{path.name}: {n}" for n in names if n.split(".")[0] in FORBIDDEN]
    assert found == []
    with open(src.parent / "pyproject.toml", "rb") as f:
        deps = tomllib.load(f)["project"]["dependencies"]
    assert not [d for d in deps if d.startswith(("p4relay-switch", "grpcio"))]


FORBIDDEN = ("grpc", "p4relay_switch")


def test_cli_refuses_a_token_lifetime_that_has_ended(db_url: str) -> None:
    for bad in ("-1", "0", "nan", "soon"):
        r = _cli(db_url, "create-token", "--name", "t", "--scope", "read", "--expires-days", bad)
        assert r.returncode == 2 and "--expires-days" in r.stderr, (bad, r.stderr)
    ok = _cli(db_url, "create-token", "--name", "t", "--scope", "read", "--expires-days", "0.5")
    assert ok.returncode == 0 and ok.stdout.startswith("p4r_")
