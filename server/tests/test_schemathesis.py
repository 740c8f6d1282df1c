"""Property-based API tests: schemathesis drives every operation of our own
OpenAPI document with generated (valid and invalid) input. Never a 500;
status codes, content types and bodies as documented."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import schemathesis
from conftest import Auth
from fastapi.testclient import TestClient
from hypothesis import HealthCheck, Phase, settings
from p4relay_server.app import create_app
from p4relay_server.config import Settings
from p4relay_server.db import make_sessionmaker
from pydantic import SecretStr
from schemathesis import checks
from sqlalchemy import Engine, create_engine

MAX_EXAMPLES = 25  # per operation: keeps the whole run to about a minute

# The schema is loaded at import (collection) time; the database is attached
# by the fixture below once the session's test database exists.
_PLACEHOLDER = "postgresql+psycopg://unset@127.0.0.1:1/unset"
APP = create_app(
    Settings(
        database_url=_PLACEHOLDER,
        jwt_secret=SecretStr("schemathesis-secret-0123456789abcdef"),
        console_dir=Path("/nonexistent"),
    ),
    create_engine(_PLACEHOLDER),
)
schema = schemathesis.openapi.from_asgi("/openapi.json", APP)


@pytest.fixture
def wired(clean: Engine) -> Iterator[Auth]:
    APP.state.engine = clean
    APP.state.sessionmaker = make_sessionmaker(clean)
    with TestClient(APP) as c:
        yield Auth(clean, c)


@schema.parametrize()
# No shrinking: a failure is reported as found (bounded run time).
@settings(
    max_examples=MAX_EXAMPLES,
    deadline=None,
    suppress_health_check=list(HealthCheck),
    phases=[Phase.explicit, Phase.generate],
)
def test_api_conforms(case: Any, wired: Auth) -> None:
    headers = wired.ingest if case.path.startswith("/api/v1/ingest") else wired.admin
    case.call_and_validate(
        headers=headers,
        checks=[
            checks.not_a_server_error,
            checks.status_code_conformance,
            checks.content_type_conformance,
            checks.response_schema_conformance,
        ],
    )
