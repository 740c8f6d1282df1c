"""The OpenAPI document, generated without a database (server/openapi.json)."""

from __future__ import annotations

import json
from pathlib import Path

from sqlalchemy import create_engine

from p4relay_server.config import Settings


def openapi_json() -> str:
    from p4relay_server.app import create_app

    # The engine is never connected: building the schema needs no database.
    settings = Settings(
        database_url="postgresql+psycopg://unused@127.0.0.1:1/unused",
        console_dir=Path("/nonexistent"),
    )
    engine = create_engine(settings.database_url)
    app = create_app(settings, engine)
    return json.dumps(app.openapi(), indent=2, sort_keys=True) + "\n"
