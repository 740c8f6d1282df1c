"""Events: the log, newest first, with keyset pagination."""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence

from sqlalchemy import Select, literal, select, tuple_
from sqlalchemy.orm import Session

from p4relay_server.models import (
    Agent,
    Event,
    Switch,
)
from p4relay_server.schemas import api
from p4relay_server.services.queries.common import decode_cursor, encode_cursor


def event_select() -> Select[Event, str, str]:
    return (
        select(Event, Switch.name, Agent.name)
        .outerjoin(Switch, Switch.id == Event.switch_id)
        .outerjoin(Agent, Agent.id == Event.agent_id)
    )


def event_out(e: Event, switch: str | None, agent: str | None) -> api.EventOut:
    return api.EventOut(
        id=e.id,
        event_id=e.event_id,
        type=e.type,
        ts=e.ts,
        severity=e.severity,
        session_id=e.session_id,
        session_key=e.session_key,
        switch=switch,
        agent=agent,
        message=e.message,
        payload=e.payload,
    )


def list_events(
    db: Session,
    *,
    types: Sequence[str] = (),
    severity: str | None = None,
    switch: str | None = None,
    session_id: int | None = None,
    since: dt.datetime | None = None,
    until: dt.datetime | None = None,
    cursor: str | None = None,
    limit: int = 100,
) -> api.EventPage:
    q = event_select()
    if types:
        q = q.where(Event.type.in_(list(types)))
    if severity:
        q = q.where(Event.severity == severity)
    if switch:
        q = q.where(Switch.name == switch)
    if session_id is not None:
        q = q.where(Event.session_id == session_id)
    if since:
        q = q.where(Event.ts >= since)
    if until:
        q = q.where(Event.ts < until)
    if cursor:
        ts, row_id = decode_cursor(cursor)
        q = q.where(tuple_(Event.ts, Event.id) < tuple_(literal(ts), literal(row_id)))
    rows = db.execute(q.order_by(Event.ts.desc(), Event.id.desc()).limit(limit + 1)).all()
    items = [event_out(e, sw, ag) for e, sw, ag in rows[:limit]]
    nxt = encode_cursor(items[-1].ts, items[-1].id) if len(rows) > limit else None
    return api.EventPage(items=items, next_cursor=nxt)
