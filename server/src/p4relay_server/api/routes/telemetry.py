"""Switches, ports, queue series, agents, events feed."""

from __future__ import annotations

import datetime as dt
from typing import Annotated, Any

from fastapi import APIRouter, HTTPException, Query, status
from sqlalchemy import select

from p4relay_server.api.deps import AUTH_RESPONSES, DB, IntId, Reader
from p4relay_server.models import Switch
from p4relay_server.schemas import api
from p4relay_server.schemas.ingest import EventType, IPAddress, Severity, Timestamp
from p4relay_server.services import queries

router = APIRouter(tags=["telemetry"], responses=AUTH_RESPONSES)
_404: dict[int | str, dict[str, Any]] = {404: {"description": "no such switch"}}


@router.get("/switches", response_model=list[api.SwitchOut])
def list_switches(db: DB, _: Reader) -> list[Switch]:
    return list(db.scalars(select(Switch).order_by(Switch.name)))


def _switch(db: DB, switch_id: int) -> Switch:
    sw = db.get(Switch, switch_id) if 0 < switch_id < 2**31 else None
    if sw is None:
        raise HTTPException(status.HTTP_404_NOT_FOUND, "no such switch")
    return sw


@router.get("/switches/{switch_id}", response_model=api.SwitchOut, responses=_404)
def get_switch(switch_id: IntId, db: DB, _: Reader) -> Switch:
    return _switch(db, switch_id)


@router.get("/switches/{switch_id}/queues", response_model=list[api.QueueSeries], responses=_404)
def queue_series(
    switch_id: IntId,
    db: DB,
    _: Reader,
    start: Annotated[
        Timestamp | None, Query(alias="from", description="default: 15 min ago")
    ] = None,
    end: Annotated[Timestamp | None, Query(alias="to", description="default: now")] = None,
    resolution_s: Annotated[int | None, Query(ge=1, le=86400)] = None,
    dev_port: Annotated[int | None, Query(ge=0, le=511)] = None,
    queue: Annotated[int | None, Query(ge=0, le=127)] = None,
) -> list[api.QueueSeries]:
    """Queue depth, queueing delay, utilisation and drops per port/queue, in
    buckets of `resolution_s` (raised so a series has at most 1000 points)."""
    return _queue_series(db, _switch(db, switch_id), start, end, resolution_s, dev_port, queue)


def _queue_series(
    db: DB,
    sw: Switch | None,
    start: dt.datetime | None,
    end: dt.datetime | None,
    resolution_s: int | None,
    dev_port: int | None = None,
    queue: int | None = None,
) -> list[api.QueueSeries]:
    end = end or dt.datetime.now(dt.UTC)
    start = start or end - dt.timedelta(minutes=15)
    try:
        return queries.queue_series(db, sw, start, end, resolution_s, dev_port, queue)
    except queries.BadQuery as e:
        raise HTTPException(
            status.HTTP_422_UNPROCESSABLE_CONTENT,
            [{"loc": ["query"], "msg": str(e), "type": "value_error"}],
        ) from e


@router.get("/queues", response_model=list[api.QueueSeries])
def hop_series(
    db: DB,
    _: Reader,
    start: Annotated[
        Timestamp | None, Query(alias="from", description="default: 15 min ago")
    ] = None,
    end: Annotated[Timestamp | None, Query(alias="to", description="default: now")] = None,
    resolution_s: Annotated[int | None, Query(ge=1, le=86400)] = None,
) -> list[api.QueueSeries]:
    """Every switch's queues side by side (one series per hop: switch, port,
    queue), in buckets of `resolution_s` as for one switch."""
    return _queue_series(db, None, start, end, resolution_s)


@router.get("/paths", response_model=list[api.IntPathOut])
def int_paths(
    db: DB,
    _: Reader,
    addr: Annotated[
        IPAddress | None,
        Query(description="flows from or to this address"),
    ] = None,
    since: Timestamp | None = None,
    until: Timestamp | None = None,
    limit: Annotated[int, Query(ge=1, le=1000)] = 100,
) -> list[api.IntPathOut]:
    """INT path records of traced flows (sent by the collector when a flow's
    path changes), newest first."""
    return queries.list_int_paths(db, addr=addr, since=since, until=until, limit=limit)


@router.get("/agents", response_model=list[api.AgentOut])
def list_agents(db: DB, _: Reader) -> list[api.AgentOut]:
    return queries.agents(db)


@router.get("/events", response_model=api.EventPage)
def list_events(
    db: DB,
    _: Reader,
    type: Annotated[list[EventType] | None, Query()] = None,
    severity: Severity | None = None,
    switch: Annotated[
        str | None, Query(min_length=1, max_length=128, pattern=r"^[^\x00]*$")
    ] = None,
    session_id: Annotated[int | None, Query(ge=1, le=2**63 - 1)] = None,
    since: Timestamp | None = None,
    until: Timestamp | None = None,
    cursor: Annotated[str | None, Query(max_length=200)] = None,
    limit: Annotated[int, Query(ge=1, le=1000)] = 100,
) -> api.EventPage:
    """Newest first; keyset pagination with `cursor`."""
    try:
        return queries.list_events(
            db,
            types=type or (),
            severity=severity,
            switch=switch,
            session_id=session_id,
            since=since,
            until=until,
            cursor=cursor,
            limit=limit,
        )
    except queries.BadQuery as e:
        raise HTTPException(
            status.HTTP_422_UNPROCESSABLE_CONTENT,
            [{"loc": ["query", "cursor"], "msg": str(e), "type": "value_error"}],
        ) from e
