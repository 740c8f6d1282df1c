"""Calls: filtered lists with keyset pagination, a call's detail, its quality series."""

from __future__ import annotations

import datetime as dt
import ipaddress
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any, cast

from sqlalchemy import BigInteger, Select, func, literal, or_, select, true, tuple_
from sqlalchemy import cast as sql_cast
from sqlalchemy.dialects.postgresql import ARRAY, CIDR
from sqlalchemy.orm import Session

from p4relay_server.models import (
    Agent,
    CallSession,
    QualitySample,
    SessionLeg,
    Switch,
)
from p4relay_server.schemas import api
from p4relay_server.schemas.ingest import Direction
from p4relay_server.services.queries.common import (
    auto_resolution,
    decode_cursor,
    encode_cursor,
    endpoint_text,
)
from p4relay_server.services.queries.congestion import congestion_episodes
from p4relay_server.services.queries.events import list_events
from p4relay_server.services.queries.paths import int_session_path, session_path


@dataclass
class SessionFilter:
    started_from: dt.datetime | None = None
    started_to: dt.datetime | None = None
    state: Sequence[str] = ()
    offloaded: bool | None = None
    mos_min: float | None = None
    mos_max: float | None = None
    loss_min_pct: float | None = None
    jitter_min_ms: float | None = None
    call_id: str | None = None
    address: ipaddress.IPv4Address | ipaddress.IPv6Address | None = None
    prefix: ipaddress.IPv4Network | ipaddress.IPv6Network | None = None
    switch: str | None = None

    def apply(self, q: Any) -> Any:
        c = CallSession
        if self.started_from is not None:
            q = q.where(c.started_at >= self.started_from)
        if self.started_to is not None:
            q = q.where(c.started_at < self.started_to)
        if self.state:
            q = q.where(c.state.in_(list(self.state)))
        if self.offloaded is not None:
            q = q.where(c.offloaded.is_(self.offloaded))
        if self.mos_min is not None:
            q = q.where(c.mos_avg >= self.mos_min)
        if self.mos_max is not None:
            q = q.where(c.mos_avg <= self.mos_max)
        if self.loss_min_pct is not None:
            # lost / (packets + lost) >= x %, without dividing (no row divides by zero).
            q = q.where(
                c.packets + c.lost > 0, c.lost * 100.0 >= self.loss_min_pct * (c.packets + c.lost)
            )
        if self.jitter_min_ms is not None:
            q = q.where(c.jitter_ms_max >= self.jitter_min_ms)
        if self.call_id:
            q = q.where(c.call_id == self.call_id)
        if self.switch:
            q = q.where(
                c.switch_id == select(Switch.id).where(Switch.name == self.switch).scalar_subquery()
            )
        if self.address is not None:
            a = literal(str(self.address)).cast(SessionLeg.src_addr.type)
            q = q.where(_party_match(or_(SessionLeg.src_addr == a, SessionLeg.dst_addr == a)))
        if self.prefix is not None:
            # inet <<= cidr: PostgreSQL turns it into a range on the address
            # indexes. A prefix of one family never holds the other's addresses.
            net = literal(str(self.prefix)).cast(CIDR)
            src, dst = SessionLeg.src_addr.op("<<=")(net), SessionLeg.dst_addr.op("<<=")(net)
            q = q.where(_party_match(or_(src, dst)))
        return q


def _party_match(cond: Any) -> Any:
    """Sessions with a leg meeting `cond` on its endpoint (party) addresses
    only: every call shares the relay address. `id = ANY(array of matching
    ids)` makes the planner find the legs first (an InitPlan), instead of
    walking sessions in time order hoping to meet 50 matches (slow when there
    are fewer)."""
    ids = select(func.array_agg(SessionLeg.session_id)).where(cond).scalar_subquery()
    # The cast makes it ANY(array expression), not ANY(subquery).
    return CallSession.id == func.any(sql_cast(ids, ARRAY(BigInteger)))


def _party_lateral() -> Any:
    """The caller->callee leg of the first media stream: its source is the
    caller's endpoint, its destination the callee's (one index probe per row)."""
    leg = SessionLeg
    return (
        select(leg.src_addr, leg.src_port, leg.dst_addr, leg.dst_port)
        .where(leg.session_id == CallSession.id, leg.direction == "caller_to_callee")
        .order_by(leg.media_index)
        .limit(1)
        .correlate(CallSession)
        .lateral("party")
    )


def _summary_select() -> Select[CallSession, str, str, Any, Any, Any, Any]:
    party = _party_lateral()
    return (
        select(
            CallSession,
            Switch.name.label("switch_name"),
            Agent.name.label("agent_name"),
            party.c.src_addr,
            party.c.src_port,
            party.c.dst_addr,
            party.c.dst_port,
        )
        .outerjoin(Switch, Switch.id == CallSession.switch_id)
        .outerjoin(Agent, Agent.id == CallSession.agent_id)
        .outerjoin(party, true())
    )


def _summary(row: Any) -> api.SessionSummary:
    s, switch, agent, src_addr, src_port, dst_addr, dst_port = row
    return api.SessionSummary.model_validate(
        {
            **{k: getattr(s, k) for k in api.SessionSummary.model_fields if hasattr(s, k)},
            "switch": switch,
            "agent": agent,
            "caller": endpoint_text(src_addr, src_port),
            "callee": endpoint_text(dst_addr, dst_port),
        }
    )


def list_sessions(db: Session, f: SessionFilter, cursor: str | None, limit: int) -> api.SessionPage:
    q = f.apply(_summary_select())
    if cursor:
        ts, row_id = decode_cursor(cursor)
        q = q.where(
            tuple_(CallSession.started_at, CallSession.id) < tuple_(literal(ts), literal(row_id))
        )
    q = q.order_by(CallSession.started_at.desc(), CallSession.id.desc()).limit(limit + 1)
    rows = db.execute(q).all()
    items = [_summary(r) for r in rows[:limit]]
    nxt = encode_cursor(items[-1].started_at, items[-1].id) if len(rows) > limit else None
    return api.SessionPage(items=items, next_cursor=nxt)


def iter_sessions(db: Session, f: SessionFilter, max_rows: int) -> Iterator[api.SessionSummary]:
    q = f.apply(_summary_select()).order_by(CallSession.started_at.desc(), CallSession.id.desc())
    q = q.limit(max_rows).execution_options(yield_per=2000)
    for r in db.execute(q):
        yield _summary(r)


def quality_series(
    db: Session,
    session_id: int,
    start: dt.datetime | None = None,
    end: dt.datetime | None = None,
    resolution_s: int | None = None,
) -> list[api.QualitySeries]:
    qs = QualitySample
    bounds = db.execute(
        select(func.min(qs.ts), func.max(qs.ts)).where(qs.session_id == session_id)
    ).one()
    if bounds[0] is None:
        return []
    start = start or bounds[0]
    end = end or bounds[1] + dt.timedelta(seconds=1)
    res = auto_resolution(start, end, resolution_s)
    bucket = func.date_bin(
        dt.timedelta(seconds=res), qs.ts, literal(dt.datetime(2000, 1, 1, tzinfo=dt.UTC))
    )
    q = (
        select(
            qs.direction,
            bucket.label("b"),
            func.sum(qs.packets),
            func.sum(qs.lost),
            func.avg(qs.jitter_ms),
            func.avg(qs.delay_ms),
            func.avg(qs.mos),
            func.avg(qs.r_factor),
        )
        .where(qs.session_id == session_id, qs.ts >= start, qs.ts < end)
        .group_by(qs.direction, "b")
        .order_by(qs.direction, "b")
    )
    out: dict[str, api.QualitySeries] = {}
    for direction, b, packets, lost, jitter, delay, mos, r in db.execute(q):
        series = out.setdefault(
            direction, api.QualitySeries(direction=direction, resolution_s=res, points=[])
        )
        packets, lost = int(packets), int(lost)  # sum(bigint) is numeric
        expected = packets + lost
        series.points.append(
            api.QualityPoint(
                ts=b,
                packets=packets,
                lost=lost,
                loss_pct=100.0 * lost / expected if expected else 0.0,
                jitter_ms=jitter,
                delay_ms=delay,
                mos=mos,
                r_factor=r,
            )
        )
    return list(out.values())


def session_detail(db: Session, session_id: int) -> api.SessionDetail | None:
    row = db.execute(_summary_select().where(CallSession.id == session_id)).first()
    if row is None:
        return None
    s = row[0]
    legs = [
        api.LegOut(
            direction=cast(Direction, leg.direction),
            media_index=leg.media_index,
            switch_leg=leg.switch_leg,
            src=api.EndpointOut(addr=str(leg.src_addr), port=leg.src_port),
            relay_in=api.EndpointOut(addr=str(leg.relay_in_addr), port=leg.relay_in_port),
            relay_out=api.EndpointOut(addr=str(leg.relay_out_addr), port=leg.relay_out_port),
            dst=api.EndpointOut(addr=str(leg.dst_addr), port=leg.dst_port),
            installed=leg.installed,
            installed_at=leg.installed_at,
            removed_at=leg.removed_at,
            packets=leg.packets,
            bytes=leg.bytes,
        )
        for leg in s.legs
    ]
    events = list_events(db, session_id=session_id, limit=1000).items
    summary = _summary(row)
    congestion: list[api.CongestionEpisode] = []
    if s.switch_id is not None:
        until = (s.ended_at or dt.datetime.now(dt.UTC)) + dt.timedelta(seconds=1)
        congestion = congestion_episodes(db, since=s.started_at, until=until, switch_id=s.switch_id)
    reroutes, path = session_path(
        db,
        [leg.dst_addr for leg in s.legs],
        since=s.started_at,
        until=s.ended_at,
    )
    traced = int_session_path(db, s.legs, since=s.started_at, until=s.ended_at)
    if traced:
        path = traced
    return api.SessionDetail(
        **summary.model_dump(),
        seq=s.seq,
        plc=s.plc,
        legs=legs,
        quality=quality_series(db, session_id),
        events=events,
        congestion=congestion,
        reroutes=reroutes,
        path=path,
    )
