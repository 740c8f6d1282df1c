"""A call's path: reroute events that concerned it, and INT path records."""

from __future__ import annotations

import contextlib
import datetime as dt
import ipaddress
from collections.abc import Sequence

from sqlalchemy import and_, literal, or_, select
from sqlalchemy.orm import Session

from p4relay_server.models import (
    Event,
    IntPath,
    SessionLeg,
    Switch,
)
from p4relay_server.schemas import api
from p4relay_server.services.queries.common import endpoint_text
from p4relay_server.services.queries.congestion import CONGESTION_LOOKBACK
from p4relay_server.services.queries.events import event_out, event_select

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


def congested_hop(payload: dict[str, object], switch: str | None) -> str | None:
    """Where the congestion behind a move away from the primary was seen: the
    hop an INT-driven move names (`hop_switch`, `hop_port`), else the moving
    switch's own primary port (local detection); None for a move back."""
    if payload.get("direction") not in ("to_backup", "notify_upstream"):
        return None
    hop, port = payload.get("hop_switch"), payload.get("hop_port")
    if isinstance(hop, str) and isinstance(port, int) and not isinstance(port, bool):
        return f"{hop} port {port}"
    own = _text(payload.get("from_path"))
    return None if own is None else f"{switch or '?'} {own}"


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
        congested_hop=None if by is None else congested_hop(by.payload, by.switch),
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
        event_select()
        .where(Event.type == "reroute", Event.ts >= since - CONGESTION_LOOKBACK, Event.ts < since)
        .order_by(Event.ts.desc(), Event.id.desc())
        .limit(MAX_REROUTES)
    )
    for e, sw, ag in db.execute(q):
        flow = concerns(e)
        if flow is not None and (sw, flow) not in before:
            before[(sw, flow)] = event_out(e, sw, ag)
    q = (
        event_select()
        .where(Event.type == "reroute", Event.ts >= since, Event.ts <= end)
        .order_by(Event.ts, Event.id)
        .limit(MAX_REROUTES * 10)
    )
    during: list[api.EventOut] = []
    for e, sw, ag in db.execute(q):
        if concerns(e) is not None and len(during) < MAX_REROUTES:
            during.append(event_out(e, sw, ag))
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
