"""Read side: session filters with keyset pagination, series downsampling."""

from __future__ import annotations

import base64
import contextlib
import datetime as dt
import ipaddress
import json
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any, cast

from sqlalchemy import BigInteger, Select, and_, func, literal, or_, select, true, tuple_
from sqlalchemy import cast as sql_cast
from sqlalchemy.dialects.postgresql import ARRAY
from sqlalchemy.orm import Session, aliased

from p4relay_server.models import (
    Agent,
    CallSession,
    Event,
    IntPath,
    QualitySample,
    QueueSample,
    SessionLeg,
    Switch,
)
from p4relay_server.schemas import api
from p4relay_server.schemas.ingest import Direction

MAX_POINTS = 1000  # series are downsampled to at most this many points


class BadQuery(ValueError):
    """A query parameter that parses but makes no sense (answered with 422)."""


def encode_cursor(ts: dt.datetime, row_id: int) -> str:
    raw = json.dumps([ts.isoformat(), row_id]).encode()
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def decode_cursor(cursor: str) -> tuple[dt.datetime, int]:
    try:
        raw = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4))
        ts_s, row_id = json.loads(raw)
        ts = dt.datetime.fromisoformat(ts_s)
        if ts.tzinfo is None or not isinstance(row_id, int):
            raise ValueError
        return ts, row_id
    except (ValueError, TypeError, json.JSONDecodeError, UnicodeDecodeError) as e:
        raise BadQuery("cursor: not a cursor returned by this API") from e


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
            # Endpoint (party) addresses only: every call shares the relay
            # address. `id = ANY(array of matching ids)` makes the planner find
            # the legs first (an InitPlan), instead of walking sessions in time
            # order hoping to meet 50 matches (slow when there are fewer).
            a = literal(str(self.address)).cast(SessionLeg.src_addr.type)
            ids = (
                select(func.array_agg(SessionLeg.session_id))
                .where(or_(SessionLeg.src_addr == a, SessionLeg.dst_addr == a))
                .scalar_subquery()
            )
            # The cast makes it ANY(array expression), not ANY(subquery).
            q = q.where(c.id == func.any(sql_cast(ids, ARRAY(BigInteger))))
        return q


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


def endpoint_text(addr: object, port: int | None) -> str | None:
    """`addr:port`, IPv6 in brackets (`[2001:db8::1]:5004`)."""
    if addr is None or port is None:
        return None
    a = str(addr)
    return f"[{a}]:{port}" if ":" in a else f"{a}:{port}"


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


def _auto_resolution(start: dt.datetime, end: dt.datetime, requested: int | None) -> int:
    span = max((end - start).total_seconds(), 1.0)
    floor = int(-(-span // MAX_POINTS))  # ceil: never more than MAX_POINTS buckets
    return max(requested or 1, floor, 1)


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
    res = _auto_resolution(start, end, resolution_s)
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


def queue_series(
    db: Session,
    switch: Switch | None,
    start: dt.datetime,
    end: dt.datetime,
    resolution_s: int | None,
    dev_port: int | None,
    queue: int | None,
) -> list[api.QueueSeries]:
    """Queue series of one switch, or of every switch (`switch` None: each
    hop of the fleet, as the INT reports and the collector's polls give them)."""
    if end <= start:
        raise BadQuery("to: must be after from")
    res = _auto_resolution(start, end, resolution_s)
    q_ = QueueSample
    bucket = func.date_bin(
        dt.timedelta(seconds=res), q_.ts, literal(dt.datetime(2000, 1, 1, tzinfo=dt.UTC))
    )
    q = select(
        Switch.name,
        q_.dev_port,
        q_.queue,
        bucket.label("b"),
        func.avg(q_.depth_pkts),
        func.max(q_.depth_max_pkts),
        func.avg(q_.depth_bytes),
        func.avg(q_.queue_delay_us),
        func.max(q_.queue_delay_max_us),
        func.avg(q_.utilisation),
        func.sum(q_.drops),
        func.avg(q_.ired_qavg_bytes),
    ).join(Switch, Switch.id == q_.switch_id)
    q = q.where(q_.ts >= start, q_.ts < end)
    if switch is not None:
        q = q.where(q_.switch_id == switch.id)
    if dev_port is not None:
        q = q.where(q_.dev_port == dev_port)
    if queue is not None:
        q = q.where(q_.queue == queue)
    q = q.group_by(Switch.name, q_.dev_port, q_.queue, "b").order_by(
        Switch.name, q_.dev_port, q_.queue, "b"
    )
    out: dict[tuple[str, int, int], api.QueueSeries] = {}
    for (
        name,
        port,
        qid,
        b,
        depth,
        depth_max,
        depth_b,
        delay,
        delay_max,
        util,
        drops,
        qavg,
    ) in db.execute(q):
        s = out.setdefault(
            (name, port, qid),
            api.QueueSeries(switch=name, dev_port=port, queue=qid, resolution_s=res, points=[]),
        )
        s.points.append(
            api.QueuePoint(
                ts=b,
                depth_pkts=depth,
                depth_max_pkts=depth_max,
                depth_bytes=depth_b,
                queue_delay_us=delay,
                queue_delay_max_us=delay_max,
                utilisation=util,
                drops=int(drops or 0),
                ired_qavg_bytes=qavg,
            )
        )
    return list(out.values())


def _event_select() -> Select[Event, str, str]:
    return (
        select(Event, Switch.name, Agent.name)
        .outerjoin(Switch, Switch.id == Event.switch_id)
        .outerjoin(Agent, Agent.id == Event.agent_id)
    )


def _event_out(e: Event, switch: str | None, agent: str | None) -> api.EventOut:
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
    q = _event_select()
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
    items = [_event_out(e, sw, ag) for e, sw, ag in rows[:limit]]
    nxt = encode_cursor(items[-1].ts, items[-1].id) if len(rows) > limit else None
    return api.EventPage(items=items, next_cursor=nxt)


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


MAX_REROUTES = 1000


def _flow_net(payload: object) -> ipaddress.IPv4Network | ipaddress.IPv6Network | None:
    """The watched destination a reroute event names; None when it names none
    that parses (an event from a bad producer concerns no call)."""
    flow = payload.get("flow") if isinstance(payload, dict) else None
    if not isinstance(flow, str):
        return None
    try:
        return ipaddress.ip_network(flow, strict=False)
    except ValueError:
        return None


def _text(v: object) -> str | None:
    return v if isinstance(v, str) else None


def _segment(
    key: tuple[str | None, str], path: object, at: dt.datetime, by: api.EventOut | None
) -> api.PathSegment:
    """A stretch from `at` on `path` of (switch, watched destination) `key`,
    begun by the reroute `by` (None: the primary before any)."""
    return api.PathSegment(
        switch=key[0],
        flow=key[1],
        path=_text(path) or "?",
        since=at,
        until=None,
        reroute_event_id=None if by is None else by.id,
        trigger=None if by is None else _text(by.payload.get("trigger")),
    )


def session_path(
    db: Session,
    addrs: Sequence[object],
    *,
    since: dt.datetime,
    until: dt.datetime | None,
) -> tuple[list[api.EventOut], list[api.PathSegment]]:
    """The reroutes that concerned a call and its path over time.

    A reroute event concerns the call when its payload's `flow` (the watched
    destination) holds one of the call's media destinations. The last one
    before the call started (within CONGESTION_LOOKBACK) says where the call
    began; `notify_upstream` events are listed but move nothing on their
    switch (the upstream switch reports its own move)."""
    ips = set()
    for a in addrs:
        with contextlib.suppress(ValueError):
            ips.add(ipaddress.ip_address(str(a)))
    if not ips:
        return [], []
    end = until or dt.datetime.now(dt.UTC)

    def concerns(e: Event) -> str | None:
        net = _flow_net(e.payload)
        if net is None or not any(ip in net for ip in ips if ip.version == net.version):
            return None
        return str(net)

    # Where the call began: the newest reroute per (switch, flow) before it
    # started (scanned newest first, bounded, so a flood of old events costs little).
    before: dict[tuple[str | None, str], api.EventOut] = {}
    q = (
        _event_select()
        .where(Event.type == "reroute", Event.ts >= since - CONGESTION_LOOKBACK, Event.ts < since)
        .order_by(Event.ts.desc(), Event.id.desc())
        .limit(MAX_REROUTES)
    )
    for e, sw, ag in db.execute(q):
        flow = concerns(e)
        if flow is not None and (sw, flow) not in before:
            before[(sw, flow)] = _event_out(e, sw, ag)
    q = (
        _event_select()
        .where(Event.type == "reroute", Event.ts >= since, Event.ts <= end)
        .order_by(Event.ts, Event.id)
        .limit(MAX_REROUTES * 10)
    )
    during: list[api.EventOut] = []
    for e, sw, ag in db.execute(q):
        if concerns(e) is not None and len(during) < MAX_REROUTES:
            during.append(_event_out(e, sw, ag))
    segments: list[api.PathSegment] = []
    keys = list(dict.fromkeys([*before, *((o.switch, str(_flow_net(o.payload))) for o in during)]))
    for key in keys:
        current: api.PathSegment | None = None
        start = before.get(key)
        if start is not None and start.payload.get("direction") != "notify_upstream":
            current = _segment(key, start.payload.get("to_path"), since, start)
        for o in during:
            if (o.switch, str(_flow_net(o.payload))) != key:
                continue
            if o.payload.get("direction") == "notify_upstream":
                continue
            if current is None:
                current = _segment(key, o.payload.get("from_path"), since, None)
            current.until = o.ts
            segments.append(current)
            current = _segment(key, o.payload.get("to_path"), o.ts, o)
        if current is not None:
            current.until = until
            segments.append(current)
    segments.sort(key=lambda g: (g.since, g.switch or "", g.flow))
    return during, segments


MAX_PATH_RECORDS = 1000


def _path_hops(hops: object) -> list[api.PathHop]:
    """A record's hops as stored (the ingest schema checked them)."""
    if not isinstance(hops, list):
        return []
    return [api.PathHop.model_validate(h) for h in hops if isinstance(h, dict)]


def hops_text(hops: Sequence[api.PathHop]) -> str:
    """`s1 (1>3) > s3 (1>2) > s2`: each switch with the ports the packet took."""

    def port(p: int | None) -> str:
        return "?" if p is None else str(p)

    def one(h: api.PathHop) -> str:
        if h.ingress_port is None and h.egress_port is None:
            return h.switch
        return f"{h.switch} ({port(h.ingress_port)}>{port(h.egress_port)})"

    return " > ".join(one(h) for h in hops)


def _flow_text(src_addr: object, src_port: int, dst_addr: object, dst_port: int) -> str:
    return f"{endpoint_text(src_addr, src_port)} -> {endpoint_text(dst_addr, dst_port)}"


def list_int_paths(
    db: Session,
    *,
    addr: ipaddress.IPv4Address | ipaddress.IPv6Address | None = None,
    since: dt.datetime | None = None,
    until: dt.datetime | None = None,
    limit: int = 100,
) -> list[api.IntPathOut]:
    """INT path records, newest first; `addr`: flows from or to that address."""
    p = IntPath
    q = select(p, Switch.name).outerjoin(Switch, Switch.id == p.sink_switch_id)
    if addr is not None:
        a = literal(str(addr)).cast(p.src_addr.type)
        q = q.where(or_(p.src_addr == a, p.dst_addr == a))
    if since is not None:
        q = q.where(p.ts >= since)
    if until is not None:
        q = q.where(p.ts < until)
    rows = db.execute(q.order_by(p.ts.desc(), p.id.desc()).limit(limit)).all()
    return [
        api.IntPathOut(
            id=r.id,
            ts=r.ts,
            src=api.EndpointOut(addr=str(r.src_addr), port=r.src_port),
            dst=api.EndpointOut(addr=str(r.dst_addr), port=r.dst_port),
            sink=sink,
            hops=_path_hops(r.hops),
        )
        for r, sink in rows
    ]


def int_session_path(
    db: Session, legs: Sequence[SessionLeg], *, since: dt.datetime, until: dt.datetime | None
) -> list[api.PathSegment]:
    """The call's path from INT path records: a leg's media is traced as the
    switch relays it (relay_out -> dst) or, before a relay, as its party sent
    it (src -> relay_in). One segment per record while the call was up, until
    the flow's next record (a record repeating the path extends it)."""
    flows = {
        (leg.relay_out_addr, leg.relay_out_port, leg.dst_addr, leg.dst_port) for leg in legs
    } | {(leg.src_addr, leg.src_port, leg.relay_in_addr, leg.relay_in_port) for leg in legs}
    if not flows:
        return []
    p = IntPath
    end = until or dt.datetime.now(dt.UTC)
    match = or_(
        *(
            and_(p.src_addr == sa, p.src_port == sp, p.dst_addr == da, p.dst_port == dp)
            for sa, sp, da, dp in flows
        )
    )
    q = (
        select(p, Switch.name)
        .outerjoin(Switch, Switch.id == p.sink_switch_id)
        .where(match, p.ts >= since, p.ts <= end)
        .order_by(p.ts, p.id)
        .limit(MAX_PATH_RECORDS)
    )
    current: dict[str, api.PathSegment] = {}
    segments: list[api.PathSegment] = []
    for r, sink in db.execute(q):
        flow = _flow_text(r.src_addr, r.src_port, r.dst_addr, r.dst_port)
        hops = _path_hops(r.hops)
        cur = current.get(flow)
        if cur is not None and cur.hops == hops:
            continue
        if cur is not None:
            cur.until = r.ts
        seg = api.PathSegment(
            switch=sink,
            flow=flow,
            path=hops_text(hops),
            since=r.ts,
            until=until,
            reroute_event_id=None,
            trigger=None if cur is None else "path change",
            source="int",
            hops=hops,
        )
        current[flow] = seg
        segments.append(seg)
    segments.sort(key=lambda g: (g.since, g.flow))
    return segments


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


def agents(db: Session) -> list[api.AgentOut]:
    sw = aliased(Switch)
    rows = db.execute(
        select(Agent, sw.name).outerjoin(sw, sw.id == Agent.switch_id).order_by(Agent.name)
    )
    return [
        api.AgentOut(
            id=a.id,
            name=a.name,
            rtpproxy=a.rtpproxy,
            switch=name,
            version=a.version,
            created_at=a.created_at,
            last_seen=a.last_seen,
        )
        for a, name in rows
    ]


RECENT_SAMPLES = dt.timedelta(seconds=30)  # a call's "current" quality: its samples this recent
QUANTILES = (0.1, 0.5, 0.9, 0.99)


def _prom_label(v: str) -> str:
    return v.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def fleet_metrics(db: Session, now: dt.datetime | None = None) -> str:
    """The fleet as the database sees it, in Prometheus text format: calls up
    and offloaded, why calls stay on RTPProxy, quantiles over active calls of
    their current quality (the worse direction's samples of the last 30 s),
    switch and agent health, open congestion episodes."""
    now = now or dt.datetime.now(dt.UTC)
    c = CallSession
    out: list[str] = []

    def family(name: str, help_: str, rows: Sequence[tuple[dict[str, str], float]]) -> None:
        out.append(f"# HELP {name} {help_}")
        out.append(f"# TYPE {name} gauge")
        for labels, v in rows:
            lab = ",".join(f'{k}="{_prom_label(x)}"' for k, x in labels.items())
            out.append(f"{name}{{{lab}}} {v!r}" if lab else f"{name} {v!r}")

    up = c.state.in_(("setup", "active"))
    active, offloaded = db.execute(
        select(func.count(), func.count().filter(c.offloaded.is_(True))).where(up)
    ).one()
    family("p4relay_calls_active", "calls in setup or active", [({}, float(active))])
    family(
        "p4relay_calls_offloaded", "active calls relayed by the switch", [({}, float(offloaded))]
    )
    reason = func.coalesce(c.offload_reason, "unknown")
    reasons = db.execute(
        select(reason, func.count())
        .where(up, c.offloaded.is_(False))
        .group_by(reason)
        .order_by(reason)
    ).all()
    family(
        "p4relay_calls_not_offloaded",
        "active calls left on RTPProxy, by reason",
        [({"reason": r}, float(n)) for r, n in reasons],
    )

    qs = QualitySample
    per_call = (
        select(
            func.min(qs.mos).label("mos"),
            func.max(100.0 * qs.lost / func.nullif(qs.packets + qs.lost, 0)).label("loss"),
            func.max(qs.jitter_ms).label("jitter"),
        )
        .where(qs.ts >= now - RECENT_SAMPLES, qs.ts <= now, qs.session_id.is_not(None))
        .group_by(qs.session_id)
        .subquery()
    )
    fracs = list(QUANTILES)
    row = db.execute(
        select(
            func.count(),
            func.count().filter(per_call.c.mos < 3.6),
            func.percentile_cont(fracs).within_group(per_call.c.mos),
            func.percentile_cont(fracs).within_group(per_call.c.loss),
            func.percentile_cont(fracs).within_group(per_call.c.jitter),
        )
    ).one()
    sampled, degraded, mos_q, loss_q, jit_q = row
    family(
        "p4relay_calls_sampled",
        "calls with quality samples in the last 30 s",
        [({}, float(sampled))],
    )
    family(
        "p4relay_calls_mos_degraded", "of those, calls with MOS under 3.6", [({}, float(degraded))]
    )
    for name, help_, vals, scale in (
        ("p4relay_calls_mos", "MOS quantiles over calls (worse direction, last 30 s)", mos_q, 1.0),
        ("p4relay_calls_loss_ratio", "packet loss quantiles over calls (last 30 s)", loss_q, 0.01),
        ("p4relay_calls_jitter_seconds", "jitter quantiles over calls (last 30 s)", jit_q, 0.001),
    ):
        family(
            name,
            help_,
            [
                ({"quantile": str(f)}, float(v) * scale)
                for f, v in zip(fracs, vals or (), strict=False)
                if v is not None
            ],
        )

    switches = db.execute(select(Switch).order_by(Switch.name)).scalars().all()
    family(
        "p4relay_switch_up",
        "1 when the collector reads the switch",
        [({"switch": s.name}, float(s.up)) for s in switches],
    )
    family(
        "p4relay_switch_last_seen_age_seconds",
        "seconds since the collector last read the switch",
        [
            ({"switch": s.name}, (now - s.last_seen).total_seconds())
            for s in switches
            if s.last_seen
        ],
    )
    family(
        "p4relay_switch_relay_table_used",
        "relay table entries in use (collector's last reading)",
        [
            ({"switch": s.name}, float(s.relay_table_used))
            for s in switches
            if s.relay_table_used is not None
        ],
    )
    family(
        "p4relay_switch_relay_table_capacity",
        "relay table size in entries",
        [
            ({"switch": s.name}, float(s.relay_table_capacity))
            for s in switches
            if s.relay_table_capacity
        ],
    )
    agent_rows = db.execute(select(Agent.name, Agent.last_seen).order_by(Agent.name)).all()
    family(
        "p4relay_agent_last_seen_age_seconds",
        "seconds since the agent last reported",
        [({"agent": n}, (now - t).total_seconds()) for n, t in agent_rows if t is not None],
    )
    episodes = congestion_episodes(
        db, since=now - dt.timedelta(seconds=1), until=now + dt.timedelta(seconds=1), open_only=True
    )
    per_switch: dict[str, int] = {s.name: 0 for s in switches}
    for ep in episodes:
        per_switch[ep.switch or "unknown"] = per_switch.get(ep.switch or "unknown", 0) + 1
    family(
        "p4relay_congestion_open",
        "congestion episodes open now (onset without clear)",
        [({"switch": k}, float(v)) for k, v in sorted(per_switch.items())],
    )
    return "\n".join(out) + "\n"
