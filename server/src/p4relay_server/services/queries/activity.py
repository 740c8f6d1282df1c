"""Calls up and offloaded over time (the overview's activity chart)."""

from __future__ import annotations

import datetime as dt

from sqlalchemy import func, or_, select
from sqlalchemy.orm import Session

from p4relay_server.models import (
    CallSession,
)
from p4relay_server.schemas import api
from p4relay_server.services.queries.common import MAX_POINTS, BadQuery


def activity(db: Session, start: dt.datetime, end: dt.datetime, step_s: int) -> api.Activity:
    """Calls up (setup or active) and offloaded at each step in [start, end].
    Candidates: calls not ended, or started within a day of `start` and ended
    after it (an index range, not a scan of the whole history)."""
    if end <= start:
        raise BadQuery("to: must be after from")
    step_s = max(step_s, int(-(-(end - start).total_seconds() // MAX_POINTS)), 1)
    c = CallSession
    cand = (
        select(c.started_at, c.ended_at, c.offloaded)
        .where(
            c.started_at <= end,
            or_(
                c.state.in_(("setup", "active")),
                (c.started_at >= start - dt.timedelta(days=1)) & (c.ended_at > start),
            ),
        )
        .subquery()
    )
    g = (
        func.generate_series(start, end, dt.timedelta(seconds=step_s))
        .table_valued("ts")
        .render_derived(name="g")
    )
    up = (cand.c.started_at <= g.c.ts) & ((cand.c.ended_at.is_(None)) | (cand.c.ended_at > g.c.ts))
    q = (
        select(
            g.c.ts,
            func.count(cand.c.started_at),
            func.count(cand.c.started_at).filter(cand.c.offloaded.is_(True)),
        )
        .select_from(g)
        .outerjoin(cand, up)
        .group_by(g.c.ts)
        .order_by(g.c.ts)
    )
    points = [api.ActivityPoint(ts=ts, active=n, offloaded=o) for ts, n, o in db.execute(q)]
    return api.Activity(step_s=step_s, points=points)
