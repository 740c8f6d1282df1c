"""Alembic environment: the target schema is p4relay_server.models."""

from __future__ import annotations

from alembic import context
from p4relay_runtime.settings import legacy_env
from p4relay_server.models import Base
from sqlalchemy import create_engine

config = context.config
target_metadata = Base.metadata


def _url() -> str:
    url = config.get_main_option("sqlalchemy.url") or legacy_env(
        "P4RELAY_SERVER_DATABASE_URL", "P4RELAY_DATABASE_URL"
    )
    if not url:
        raise SystemExit(
            "no database URL: set P4RELAY_SERVER_DATABASE_URL or use p4relay-server migrate"
        )
    return url


def run_offline() -> None:
    context.configure(url=_url(), target_metadata=target_metadata, literal_binds=True)
    with context.begin_transaction():
        context.run_migrations()


def run_online() -> None:
    engine = create_engine(_url())
    with engine.connect() as connection:
        context.configure(connection=connection, target_metadata=target_metadata)
        with context.begin_transaction():
            context.run_migrations()
    engine.dispose()


if context.is_offline_mode():
    run_offline()
else:
    run_online()
