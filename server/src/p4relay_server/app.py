"""Application factory: API under /api/v1, health, metrics, the console at /."""

from __future__ import annotations

import asyncio
import secrets
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import structlog
from fastapi import APIRouter, Depends, FastAPI, HTTPException, Request, status
from fastapi.concurrency import run_in_threadpool
from fastapi.exception_handlers import http_exception_handler
from fastapi.exceptions import RequestValidationError
from fastapi.middleware.cors import CORSMiddleware
from fastapi.responses import JSONResponse, PlainTextResponse, Response
from fastapi.staticfiles import StaticFiles
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest
from sqlalchemy import Engine, text
from sqlalchemy.exc import DataError, OperationalError
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.types import Scope

from p4relay_server import __version__
from p4relay_server.api.deps import DB, Principal, resolve_token
from p4relay_server.api.middleware import BodyLimit, RequestMetrics
from p4relay_server.api.routes import admin, auth, ingest, live, overview, sessions, telemetry
from p4relay_server.config import Settings
from p4relay_server.db import make_engine, make_sessionmaker
from p4relay_server.live import LiveHub
from p4relay_server.retention import run_retention
from p4relay_server.schemas import api

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


def _schema_head(migrations_dir: Path) -> str | None:
    if not (migrations_dir / "env.py").is_file():
        return None
    from alembic.config import Config
    from alembic.script import ScriptDirectory

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

    async def retention_loop(every_s: float) -> None:
        # First run after one interval, not at start: a restart loop must not
        # turn into a retention loop.
        while True:
            await asyncio.sleep(every_s)
            try:
                await run_in_threadpool(run_retention, engine, settings.retention)
            except Exception:  # logged and retried next interval; serving goes on
                log.exception("retention run failed")

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        every = settings.retention.interval_minutes * 60
        task = asyncio.create_task(retention_loop(every)) if every > 0 else None
        yield
        if task is not None:
            task.cancel()
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

    @app.exception_handler(RequestValidationError)
    async def invalid(_: Request, exc: RequestValidationError) -> JSONResponse:
        # Same shape as FastAPI's default, without echoing (possibly huge) input.
        errors = [{k: v for k, v in e.items() if k in ("loc", "msg", "type")} for e in exc.errors()]
        return JSONResponse({"detail": errors}, status_code=status.HTTP_422_UNPROCESSABLE_CONTENT)

    @app.exception_handler(StarletteHTTPException)
    async def http_error(request: Request, exc: StarletteHTTPException) -> Response:
        # FastAPI answers an undecodable body with 400; it is invalid input like
        # any other, so it gets the documented 422 and a message.
        if exc.status_code == 400 and "parsing the body" in str(exc.detail):
            detail = [
                {"loc": ["body"], "msg": "body is not valid UTF-8 JSON", "type": "json_invalid"}
            ]
            return JSONResponse({"detail": detail}, status_code=422)
        return await http_exception_handler(request, exc)

    @app.exception_handler(DataError)
    async def bad_value(request: Request, exc: DataError) -> JSONResponse:
        # A value the schema let through but PostgreSQL cannot store or compare.
        log.warning(
            "value refused by the database", path=request.url.path, error=str(exc.orig)[:300]
        )
        msg = f"value not accepted: {str(exc.orig).splitlines()[0][:200]}"
        return JSONResponse({"detail": [{"loc": ["body"], "msg": msg, "type": "value_error"}]}, 422)

    @app.exception_handler(OperationalError)
    async def db_down(request: Request, exc: OperationalError) -> JSONResponse:
        log.error("database unavailable", path=request.url.path, error=str(exc.orig)[:500])
        return JSONResponse(
            {"detail": "database unavailable; retry later"},
            status_code=status.HTTP_503_SERVICE_UNAVAILABLE,
            headers={"Retry-After": "5"},
        )

    @app.exception_handler(Exception)
    async def crashed(request: Request, exc: Exception) -> JSONResponse:
        log.exception("unhandled error", path=request.url.path)
        return JSONResponse({"detail": "internal error (logged)"}, status_code=500)

    v1 = APIRouter(prefix="/api/v1")
    for r in (
        auth.router,
        ingest.router,
        sessions.router,
        telemetry.router,
        overview.router,
        admin.router,
        live.router,
    ):
        v1.include_router(r)
    app.include_router(v1)

    @app.get("/healthz", response_model=api.Health, tags=["health"])
    def healthz() -> api.Health:
        """The process is up."""
        return api.Health(status="ok")

    @app.get(
        "/readyz",
        response_model=api.Health,
        tags=["health"],
        responses={
            503: {"model": api.Health, "description": "database unreachable or schema not at head"}
        },
    )
    def readyz(db: DB) -> Response:
        """Database reachable and its schema at the migrations' head."""
        try:
            version = db.execute(text("SELECT version_num FROM alembic_version")).scalar()
        except Exception as e:  # any database failure means not ready
            return JSONResponse(
                api.Health(status="unavailable", detail=type(e).__name__).model_dump(), 503
            )
        head = app.state.schema_head
        if head is not None and version != head:
            detail = f"schema at {version}, migrations at {head}: run p4relay-server migrate"
            return JSONResponse(api.Health(status="unavailable", detail=detail).model_dump(), 503)
        return JSONResponse(api.Health(status="ok").model_dump())

    def metrics_auth(request: Request, db: DB) -> None:
        if settings.metrics_public:
            return
        header = request.headers.get("authorization", "")
        scheme, _, token = header.partition(" ")
        who: Principal | None = (
            resolve_token(db, token, jwt_key) if scheme.lower() == "bearer" and token else None
        )
        if who is None or not who.can_read:
            raise HTTPException(
                status.HTTP_401_UNAUTHORIZED,
                "a read token is required",
                {"WWW-Authenticate": "Bearer"},
            )

    @app.get(
        "/metrics",
        response_class=PlainTextResponse,
        tags=["health"],
        responses={
            200: {"content": {"text/plain": {}}},
            401: {"description": "a read token is required"},
        },
        dependencies=[Depends(metrics_auth)],
    )
    def metrics() -> Response:
        """Prometheus metrics (bearer read token unless metrics_public)."""
        return Response(generate_latest(), media_type=CONTENT_TYPE_LATEST)

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
