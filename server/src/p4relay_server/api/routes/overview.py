"""Overview: calls over time and congestion episodes (read side)."""

from __future__ import annotations

import datetime as dt
from typing import Annotated

from fastapi import APIRouter, HTTPException, Query, status
from fastapi.responses import PlainTextResponse
from sqlalchemy import select

from p4relay_server.api.deps import AUTH_RESPONSES, DB, Reader
from p4relay_server.models import Switch
from p4relay_server.schemas import api
from p4relay_server.schemas.ingest import Timestamp
from p4relay_server.services import queries

router = APIRouter(tags=["overview"], responses=AUTH_RESPONSES)


def _bad(e: queries.BadQuery) -> HTTPException:
    return HTTPException(
        status.HTTP_422_UNPROCESSABLE_CONTENT,
        [{"loc": ["query"], "msg": str(e), "type": "value_error"}],
    )


@router.get("/overview/activity", response_model=api.Activity)
def activity(
    db: DB,
    _: Reader,
    start: Annotated[Timestamp | None, Query(alias="from", description="default: 1 h ago")] = None,
    end: Annotated[Timestamp | None, Query(alias="to", description="default: now")] = None,
    step_s: Annotated[int, Query(ge=1, le=86400)] = 60,
) -> api.Activity:
    """Calls up and offloaded at every `step_s` (raised so there are at most
    1000 points) from `from` to `to`."""
    end = end or dt.datetime.now(dt.UTC)
    start = start or end - dt.timedelta(hours=1)
    try:
        return queries.activity(db, start, end, step_s)
    except queries.BadQuery as e:
        raise _bad(e) from e


@router.get("/congestion", response_model=list[api.CongestionEpisode])
def congestion(
    db: DB,
    _: Reader,
    since: Annotated[Timestamp | None, Query(description="default: 1 h ago")] = None,
    until: Annotated[Timestamp | None, Query(description="default: now")] = None,
    switch: Annotated[
        str | None, Query(min_length=1, max_length=128, pattern=r"^[^\x00]*$")
    ] = None,
    open_only: Annotated[bool, Query(description="only episodes still open at `until`")] = False,
) -> list[api.CongestionEpisode]:
    """Congestion episodes (onset → clear per switch, port and queue)
    overlapping [since, until), oldest first, at most 1000 (the newest)."""
    until = until or dt.datetime.now(dt.UTC) + dt.timedelta(seconds=1)
    since = since or until - dt.timedelta(hours=1)
    switch_id: int | None = None
    if switch is not None:
        switch_id = db.scalar(select(Switch.id).where(Switch.name == switch))
        if switch_id is None:
            return []
    try:
        return queries.congestion_episodes(
            db, since=since, until=until, switch_id=switch_id, open_only=open_only
        )
    except queries.BadQuery as e:
        raise _bad(e) from e


@router.get(
    "/overview/metrics",
    response_class=PlainTextResponse,
    responses={200: {"content": {"text/plain": {}}, "description": "Prometheus text format"}},
)
def fleet_metrics(db: DB, _: Reader) -> PlainTextResponse:
    """The fleet from the database for Prometheus (a scrape target of its own,
    read token): calls up/offloaded, reasons not offloaded, MOS/loss/jitter
    quantiles over active calls, switch/agent health, open congestion."""
    return PlainTextResponse(
        queries.fleet_metrics(db), media_type="text/plain; version=0.0.4; charset=utf-8"
    )
