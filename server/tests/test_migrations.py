"""Alembic: upgrade head / downgrade base on a real PostgreSQL; models agree."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from alembic.autogenerate import compare_metadata
from alembic.migration import MigrationContext
from conftest import create_database, drop_database
from p4relay_server.config import Settings
from p4relay_server.migrate import run_alembic
from p4relay_server.models import Base
from sqlalchemy import create_engine, inspect, text


@pytest.fixture
def fresh_url() -> Iterator[str]:
    url = create_database("p4relay_migr")
    yield url
    drop_database(url)


def _tables(url: str) -> set[str]:
    eng = create_engine(url)
    try:
        return set(inspect(eng).get_table_names())
    finally:
        eng.dispose()


def test_upgrade_downgrade_roundtrip(fresh_url: str) -> None:
    settings = Settings(database_url=fresh_url)
    run_alembic(settings, ["upgrade", "head"])
    assert set(Base.metadata.tables) <= _tables(fresh_url)
    run_alembic(settings, ["downgrade", "base"])
    assert _tables(fresh_url) <= {"alembic_version"}
    run_alembic(settings, ["upgrade", "head"])
    assert set(Base.metadata.tables) <= _tables(fresh_url)


def test_models_and_migrations_agree(fresh_url: str) -> None:
    run_alembic(Settings(database_url=fresh_url), ["upgrade", "head"])
    eng = create_engine(fresh_url)
    try:
        with eng.connect() as conn:
            ctx = MigrationContext.configure(
                conn, opts={"compare_type": True, "compare_server_default": True}
            )
            diff = compare_metadata(ctx, Base.metadata)
            version = conn.execute(text("SELECT version_num FROM alembic_version")).scalar()
    finally:
        eng.dispose()
    assert diff == [], f"models and migrations differ: {diff}"
    assert version == "0008"


def test_0002_adds_relay_occupancy_to_existing_switches(fresh_url: str) -> None:
    settings = Settings(database_url=fresh_url)
    run_alembic(settings, ["upgrade", "0001"])
    eng = create_engine(fresh_url)
    try:
        with eng.begin() as conn:
            conn.execute(text("INSERT INTO switches (name) VALUES ('old-sw')"))
        run_alembic(settings, ["upgrade", "head"])
        with eng.connect() as conn:
            row = conn.execute(
                text("SELECT name, relay_table_used, relay_table_capacity FROM switches")
            ).one()
        assert tuple(row) == ("old-sw", None, None)
        run_alembic(settings, ["downgrade", "0001"])
        with eng.connect() as conn:
            assert conn.execute(text("SELECT name FROM switches")).scalar_one() == "old-sw"
    finally:
        eng.dispose()


def test_0003_scopes_idempotency_keys_per_token_on_existing_data(fresh_url: str) -> None:
    settings = Settings(database_url=fresh_url)
    run_alembic(settings, ["upgrade", "0002"])
    eng = create_engine(fresh_url)
    try:
        with eng.begin() as conn:
            conn.execute(
                text(
                    "INSERT INTO users (username, password_hash, role) VALUES ('u', 'h', 'viewer');"
                    "INSERT INTO api_tokens (name, prefix, secret_hash, scope) "
                    "VALUES ('a', 'p1', 'h', 'ingest');"
                    "INSERT INTO ingest_batches (idempotency_key, token_id) "
                    "SELECT 'key-with-token', id FROM api_tokens;"
                    "INSERT INTO ingest_batches (idempotency_key) VALUES ('key-without-token')"
                )
            )
        run_alembic(settings, ["upgrade", "head"])
        with eng.connect() as conn:
            keys = conn.execute(text("SELECT idempotency_key, body_hash FROM ingest_batches")).all()
            version = conn.execute(text("SELECT token_version FROM users")).scalar_one()
        assert [tuple(k) for k in keys] == [("key-with-token", None)]
        assert version == 0
        run_alembic(settings, ["downgrade", "0002"])
        with eng.connect() as conn:
            left = conn.execute(text("SELECT idempotency_key FROM ingest_batches")).scalars().all()
        assert left == ["key-with-token"]
    finally:
        eng.dispose()
