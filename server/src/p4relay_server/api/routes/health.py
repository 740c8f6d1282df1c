"""Health and metrics: /healthz (the process), /readyz (database reachable,
schema at head), /metrics (Prometheus; a read token unless metrics_public)."""

from __future__ import annotations

from fastapi import APIRouter, Depends, Request
from fastapi.responses import JSONResponse, PlainTextResponse, Response
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest
from sqlalchemy import text

from p4relay_server.api.deps import DB, metrics_reader
from p4relay_server.schemas import api

router = APIRouter(tags=["health"])


@router.get("/healthz", response_model=api.Health)
def healthz() -> api.Health:
    """The process is up."""
    return api.Health(status="ok")


@router.get(
    "/readyz",
    response_model=api.Health,
    responses={
        503: {"model": api.Health, "description": "database unreachable or schema not at head"}
    },
)
def readyz(request: Request, db: DB) -> Response:
    """Database reachable and its schema at the migrations' head."""
    try:
        version = db.execute(text("SELECT version_num FROM alembic_version")).scalar()
    except Exception as e:  # any database failure means not ready
        return JSONResponse(
            api.Health(status="unavailable", detail=type(e).__name__).model_dump(), 503
        )
    head: str | None = request.app.state.schema_head
    if head is not None and version != head:
        detail = f"schema at {version}, migrations at {head}: run p4relay-server migrate"
        return JSONResponse(api.Health(status="unavailable", detail=detail).model_dump(), 503)
    return JSONResponse(api.Health(status="ok").model_dump())


@router.get(
    "/metrics",
    response_class=PlainTextResponse,
    responses={
        200: {"content": {"text/plain": {}}},
        401: {"description": "a read token is required"},
    },
    dependencies=[Depends(metrics_reader)],
)
def metrics() -> Response:
    """Prometheus metrics (bearer read token unless metrics_public)."""
    return Response(generate_latest(), media_type=CONTENT_TYPE_LATEST)
