"""The server's logger, and its log setup: the components' shared one
(`p4relay_runtime.logs`), Alembic's chatter held at warning."""

from __future__ import annotations

import structlog
from p4relay_runtime import logs


def configure_logging(level: str = "info", json: bool = True) -> None:
    # Not cached: tests build an app per test and configure again.
    logs.configure_logging(level, json, quiet=("alembic",), cache=False)


log = structlog.get_logger("p4relay.server")
