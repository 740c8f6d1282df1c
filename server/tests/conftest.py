"""Fixtures: a fresh PostgreSQL database per test session (on the throwaway
cluster the runner starts, $P4RELAY_TEST_DATABASE_URL), migrated with Alembic;
tables emptied between tests."""

from __future__ import annotations

import datetime as dt
import os
import secrets
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from fastapi import FastAPI
from fastapi.testclient import TestClient
from p4relay_server import security
from p4relay_server.app import create_app
from p4relay_server.config import Settings
from p4relay_server.db import make_sessionmaker
from p4relay_server.logs import configure_logging
from p4relay_server.migrate import run_alembic
from p4relay_server.security import hash_password as _hash_password
from p4relay_server.services import accounts
from pydantic import SecretStr
from sqlalchemy import Engine, create_engine, text
from sqlalchemy.engine import make_url

configure_logging("warning")  # JSON lines; errors still show in captured output

ADMIN_PASSWORD = "correct-horse-battery"
VIEWER_PASSWORD = "viewer-password-1"


def _server_url() -> str:
    url = os.environ.get("P4RELAY_TEST_DATABASE_URL")
    if not url:
        pytest.exit(
            "P4RELAY_TEST_DATABASE_URL is not set: run `make test STAGE=server` "
            "(it starts a throwaway PostgreSQL)",
            returncode=2,
        )
    return url


def create_database(prefix: str = "p4relay_test") -> str:
    """A new empty database on the test cluster; returns its URL."""
    base = make_url(_server_url())
    name = f"{prefix}_{secrets.token_hex(4)}"
    admin = create_engine(base, isolation_level="AUTOCOMMIT")
    with admin.connect() as c:
        c.execute(text(f'CREATE DATABASE "{name}"'))
    admin.dispose()
    return base.set(database=name).render_as_string(hide_password=False)


def drop_database(url: str) -> None:
    u = make_url(url)
    admin = create_engine(make_url(_server_url()), isolation_level="AUTOCOMMIT")
    with admin.connect() as c:
        c.execute(text(f'DROP DATABASE IF EXISTS "{u.database}" WITH (FORCE)'))
    admin.dispose()


@pytest.fixture(scope="session")
def db_url() -> Iterator[str]:
    url = create_database()
    run_alembic(Settings(database_url=url), ["upgrade", "head"])
    yield url
    drop_database(url)


@pytest.fixture(scope="session")
def engine(db_url: str) -> Iterator[Engine]:
    eng = create_engine(db_url, pool_size=5, max_overflow=10)
    yield eng
    eng.dispose()


TABLES = (
    "ingest_batches, quality_samples, queue_samples, events, session_legs, sessions, "
    "agents, switch_ports, switches, api_tokens, users"
)


@pytest.fixture
def clean(engine: Engine) -> Iterator[Engine]:
    with engine.begin() as c:
        c.execute(text(f"TRUNCATE {TABLES} RESTART IDENTITY CASCADE"))
    yield engine


@pytest.fixture
def settings(db_url: str, tmp_path: Any) -> Settings:
    return Settings(
        database_url=db_url,
        jwt_secret=SecretStr("test-secret-key-which-is-long-enough-0123456789"),
        console_dir=tmp_path / "no-console",
        cors_origins=["http://console.example"],
    )


@pytest.fixture
def app(settings: Settings, clean: Engine) -> FastAPI:
    return create_app(settings, clean)


@pytest.fixture
def client(app: FastAPI) -> Iterator[TestClient]:
    with TestClient(app) as c:
        yield c


# An argon2id hash costs a few hundred ms of CPU: every test's two users get the
# same two passwords, so each is hashed once per session (salted once, verified
# as ever at every login).
_HASHES: dict[str, str] = {}


def _hash_once(password: str) -> str:
    if password not in _HASHES:
        _HASHES[password] = _hash_password(password)
    return _HASHES[password]


class Auth:
    """Credentials made fresh for a test: an admin and a viewer login, ingest and read tokens."""

    def __init__(self, engine: Engine, client: TestClient) -> None:
        maker = make_sessionmaker(engine)
        with maker() as db, pytest.MonkeyPatch.context() as mp:
            mp.setattr(security, "hash_password", _hash_once)
            accounts.create_user(db, "admin", ADMIN_PASSWORD, "admin")
            accounts.create_user(db, "viewer", VIEWER_PASSWORD, "viewer")
            _, self.ingest_token = accounts.create_token(db, "agent-1", "ingest")
            _, self.read_token = accounts.create_token(db, "grafana", "read")
        self.admin_jwt = self._login(client, "admin", ADMIN_PASSWORD)
        self.viewer_jwt = self._login(client, "viewer", VIEWER_PASSWORD)

    @staticmethod
    def _login(client: TestClient, user: str, password: str) -> str:
        r = client.post("/api/v1/auth/login", json={"username": user, "password": password})
        assert r.status_code == 200, r.text
        token: str = r.json()["access_token"]
        return token

    @staticmethod
    def h(token: str) -> dict[str, str]:
        return {"Authorization": f"Bearer {token}"}

    @property
    def admin(self) -> dict[str, str]:
        return self.h(self.admin_jwt)

    @property
    def viewer(self) -> dict[str, str]:
        return self.h(self.viewer_jwt)

    @property
    def ingest(self) -> dict[str, str]:
        return self.h(self.ingest_token)

    @property
    def read(self) -> dict[str, str]:
        return self.h(self.read_token)


@pytest.fixture
def auth(clean: Engine, client: TestClient) -> Auth:
    return Auth(clean, client)


T0 = dt.datetime(2026, 11, 21, 10, 0, 0, tzinfo=dt.UTC)


def iso(t: dt.datetime) -> str:
    return t.isoformat()


def session_item(key: str, seq: int = 1, **kw: Any) -> dict[str, Any]:
    item: dict[str, Any] = {
        "session_key": key,
        "seq": seq,
        "call_id": key.split(";")[0],
        "from_tag": "ft",
        "state": "active",
        "offloaded": True,
        "codec": "PCMU",
        "switch": "sw1",
        "started_at": iso(T0),
        "legs": [
            {
                "direction": "caller_to_callee",
                "src": {"addr": "198.18.1.10", "port": 6000},
                "relay_in": {"addr": "198.18.0.10", "port": 20000},
                "relay_out": {"addr": "198.18.0.10", "port": 20002},
                "dst": {"addr": "198.18.2.10", "port": 7000},
                "installed": True,
            },
            {
                "direction": "callee_to_caller",
                "src": {"addr": "198.18.2.10", "port": 7000},
                "relay_in": {"addr": "198.18.0.10", "port": 20002},
                "relay_out": {"addr": "198.18.0.10", "port": 20000},
                "dst": {"addr": "198.18.1.10", "port": 6000},
                "installed": True,
            },
        ],
    }
    item.update(kw)
    return item


def sample_item(key: str, ts: dt.datetime, **kw: Any) -> dict[str, Any]:
    item: dict[str, Any] = {
        "session_key": key,
        "direction": "caller_to_callee",
        "ts": iso(ts),
        "packets": 50,
        "bytes": 8000,
        "lost": 0,
        "jitter_ms": 0.5,
    }
    item.update(kw)
    return item


def batch(**parts: Any) -> dict[str, Any]:
    return {"idempotency_key": str(uuid.uuid4()), **parts}
