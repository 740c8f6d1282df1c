"""Congestion episodes: onset and clear events paired per switch port and queue."""

from __future__ import annotations

import datetime as dt

from sqlalchemy import select
from sqlalchemy.orm import Session

from p4relay_server.models import (
    Event,
    Switch,
)
from p4relay_server.schemas import api
from p4relay_server.services.queries.common import BadQuery

CONGESTION_TYPES = ("congestion_onset", "congestion_clear")
CONGESTION_LOOKBACK = dt.timedelta(days=7)  # an onset older than this no longer opens an episode
MAX_EPISODES = 1000


def _int_or_none(v: object) -> int | None:
    """A payload number as sent (int, or a string of digits); anything else is unknown."""
    if isinstance(v, bool):
        return None
    if isinstance(v, int):
        return v
    if isinstance(v, str) and v.strip().isdigit():
        return int(v)
    return None


def _float_or_none(v: object) -> float | None:
    if isinstance(v, bool) or not isinstance(v, int | float):
        return None
    return float(v)


def congestion_episodes(
    db: Session,
    *,
    since: dt.datetime,
    until: dt.datetime,
    switch_id: int | None = None,
    open_only: bool = False,
) -> list[api.CongestionEpisode]:
    """Episodes overlapping [since, until): onset/clear events paired per
    (switch, payload dev_port, payload queue), oldest first. An onset before
    `since` (within CONGESTION_LOOKBACK) whose clear is later still counts; a
    repeated onset of an open episode extends it, a clear without an open
    episode is ignored."""
    if until <= since:
        raise BadQuery("until: must be after since")
    q = (
        select(Event.id, Event.type, Event.ts, Event.payload, Switch.name)
        .outerjoin(Switch, Switch.id == Event.switch_id)
        .where(
            Event.type.in_(CONGESTION_TYPES),
            Event.ts >= since - CONGESTION_LOOKBACK,
            Event.ts < until,
        )
        .order_by(Event.ts, Event.id)
    )
    if switch_id is not None:
        q = q.where(Event.switch_id == switch_id)
    open_: dict[tuple[str | None, int | None, int], api.CongestionEpisode] = {}
    done: list[api.CongestionEpisode] = []
    for eid, etype, ts, payload, sw in db.execute(q):
        p = payload if isinstance(payload, dict) else {}
        key = (sw, _int_or_none(p.get("dev_port")), _int_or_none(p.get("queue")) or 0)
        if etype == "congestion_onset":
            if key not in open_:
                open_[key] = api.CongestionEpisode(
                    switch=key[0],
                    dev_port=key[1],
                    queue=key[2],
                    started_at=ts,
                    ended_at=None,
                    onset_event_id=eid,
                    queue_delay_us=_float_or_none(p.get("queue_delay_us")),
                )
        elif key in open_:
            ep = open_.pop(key)
            ep.ended_at = ts
            if ts > since and not open_only:
                done.append(ep)
    out = sorted([*done, *open_.values()], key=lambda e: (e.started_at, e.onset_event_id))
    return out[-MAX_EPISODES:]
