"""Application factory: API under /api/v1, health, metrics, the console at /."""

from __future__ import annotations

import asyncio
import secrets
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import structlog
from alembic.config import Config
from alembic.script import ScriptDirectory
from fastapi import APIRouter, FastAPI
from fastapi.concurrency import run_in_threadpool
from fastapi.middleware.cors import CORSMiddleware
from fastapi.responses import Response
from fastapi.staticfiles import StaticFiles
from sqlalchemy import Engine
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.types import Scope

from p4relay_server import __version__
from p4relay_server.api.errors import install_error_handlers
from p4relay_server.api.middleware import BodyLimit, RequestMetrics
from p4relay_server.api.routes import (
    admin,
    auth,
    health,
    ingest,
    live,
    maintenance,
    overview,
    sessions,
    telemetry,
)
from p4relay_server.config import Retention, Settings
from p4relay_server.db import make_engine, make_sessionmaker
from p4relay_server.homer import exporter_for
from p4relay_server.live import LiveHub
from p4relay_server.retention import run_retention

log = structlog.get_logger("p4relay.server")


class ConsoleFiles(StaticFiles):
    """The built console; unknown paths get index.html (client-side routes)."""

    async def get_response(self, path: str, scope: Scope) -> Response:
        try:
            return await super().get_response(path, scope)
        except StarletteHTTPException as e:
            if e.status_code != 404 or path == "api" or path.startswith("api/"):
                raise
            return await super().get_response("index.html", scope)


async def _retention_loop(engine: Engine, policy: Retention, every_s: float) -> None:
    # First run after one interval, not at start: a restart loop must not
    # turn into a retention loop.
    while True:
        await asyncio.sleep(every_s)
        try:
            await run_in_threadpool(run_retention, engine, policy)
        except Exception:  # logged and retried next interval; serving goes on
            log.exception("retention run failed")


def _schema_head(migrations_dir: Path) -> str | None:
    if not (migrations_dir / "env.py").is_file():
        return None
    cfg = Config()
    cfg.set_main_option("script_location", str(migrations_dir))
    return ScriptDirectory.from_config(cfg).get_current_head()


def create_app(settings: Settings, engine: Engine | None = None) -> FastAPI:
    engine = engine or make_engine(settings)
    if settings.jwt_secret is None:
        log.warning("jwt_secret not set: using a random key; logins end when the server restarts")
    jwt_key = (
        settings.jwt_secret.get_secret_value() if settings.jwt_secret else secrets.token_urlsafe(32)
    )

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        every = settings.retention.interval_minutes * 60
        task = (
            asyncio.create_task(_retention_loop(engine, settings.retention, every))
            if every > 0
            else None
        )
        homer = exporter_for(app.state)
        homer_task = asyncio.create_task(homer.run()) if homer is not None else None
        yield
        for t in (task, homer_task):
            if t is not None:
                t.cancel()
        engine.dispose()

    app = FastAPI(
        title="p4relay server",
        version=__version__,
        description="Session audit, telemetry, events, MOS and live feed of p4relay.",
        lifespan=lifespan,
    )
    app.state.settings = settings
    app.state.engine = engine
    app.state.sessionmaker = make_sessionmaker(engine)
    app.state.jwt_key = jwt_key
    app.state.live = LiveHub(settings.live_queue_size)
    app.state.schema_head = _schema_head(settings.migrations_dir)

    install_error_handlers(app)

    v1 = APIRouter(prefix="/api/v1")
    for r in (
        auth.router,
        ingest.router,
        sessions.router,
        telemetry.router,
        overview.router,
        admin.router,
        maintenance.router,
        live.router,
    ):
        v1.include_router(r)
    app.include_router(v1)

    app.include_router(health.router)

    if settings.cors_origins:
        app.add_middleware(
            CORSMiddleware,
            allow_origins=settings.cors_origins,
            allow_methods=["GET", "POST", "PATCH", "DELETE"],
            allow_headers=["Authorization", "Content-Type"],
        )
    app.add_middleware(BodyLimit, limit=settings.limits.max_body_bytes)
    app.add_middleware(RequestMetrics)

    console = settings.console_dir
    if (console / "index.html").is_file():
        app.mount("/", ConsoleFiles(directory=console, html=True), name="console")
    else:
        log.info("console not built; / serves nothing", console_dir=str(console))
    return app
