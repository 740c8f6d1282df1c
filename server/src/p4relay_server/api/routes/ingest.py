"""POST /ingest: batches from rtpagent and the switch collector."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, HTTPException, Request, status
from fastapi.concurrency import run_in_threadpool
from sqlalchemy import select

from p4relay_server.api.deps import AUTH_RESPONSES, DB, Ingester
from p4relay_server.config import Limits
from p4relay_server.metrics import INGEST_BATCHES, INGEST_ITEMS
from p4relay_server.models import Switch
from p4relay_server.schemas import api
from p4relay_server.schemas.ingest import IngestBatch, IngestResult
from p4relay_server.services.ingest import IdempotencyConflict, apply_batch, body_hash

router = APIRouter(tags=["ingest"], responses=AUTH_RESPONSES)

_RESPONSES: dict[int | str, dict[str, Any]] = {
    409: {"description": "this token used the idempotency key for a different batch"},
    413: {"description": "batch over a limit (items or bytes); nothing stored"},
}


def check_limits(batch: IngestBatch, limits: Limits) -> None:
    over = [
        f"{name}: {n} items, limit {limit}"
        for name, n, limit in (
            ("sessions", len(batch.sessions), limits.max_sessions),
            ("samples", len(batch.samples), limits.max_samples),
            ("queue_samples", len(batch.queue_samples), limits.max_queue_samples),
            ("events", len(batch.events), limits.max_events),
            ("paths", len(batch.paths), limits.max_paths),
        )
        if n > limit
    ]
    if over:
        INGEST_BATCHES.labels("too_large").inc()
        raise HTTPException(
            status.HTTP_413_CONTENT_TOO_LARGE, "batch too large: " + "; ".join(over)
        )


@router.post("/ingest", response_model=IngestResult, responses=_RESPONSES)
async def ingest(batch: IngestBatch, request: Request, who: Ingester) -> IngestResult:
    """Store a batch (idempotent by the token's `idempotency_key`); see server/README.md."""
    check_limits(batch, request.app.state.settings.limits)
    digest = body_hash(await request.body())  # read once by FastAPI already; cached

    def work() -> tuple[IngestResult, list[dict[str, Any]]]:
        with request.app.state.sessionmaker() as db:
            return apply_batch(db, batch, who.id, digest)

    try:
        result, messages = await run_in_threadpool(work)
    except IdempotencyConflict as e:
        INGEST_BATCHES.labels("conflict").inc()
        raise HTTPException(status.HTTP_409_CONFLICT, str(e)) from e
    INGEST_BATCHES.labels("replayed" if result.replayed else "applied").inc()
    if not result.replayed:
        INGEST_ITEMS.labels("sample", "stored").inc(result.samples_stored)
        INGEST_ITEMS.labels("sample", "duplicate").inc(result.samples_duplicate)
        INGEST_ITEMS.labels("session", "applied").inc(result.sessions_applied)
        INGEST_ITEMS.labels("session", "stale").inc(result.sessions_stale)
        INGEST_ITEMS.labels("queue_sample", "stored").inc(result.queue_samples_stored)
        INGEST_ITEMS.labels("event", "stored").inc(result.events_stored)
        INGEST_ITEMS.labels("path", "stored").inc(result.paths_stored)
    request.app.state.live.publish(messages)
    return result


@router.get("/ingest/switches", response_model=list[api.SwitchOut])
def switches_to_poll(db: DB, _: Ingester) -> list[Switch]:
    """Registered switches, for the collector (readable with an ingest token)."""
    return list(
        db.scalars(select(Switch).where(Switch.grpc_address.is_not(None)).order_by(Switch.name))
    )
