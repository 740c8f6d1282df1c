"""Apply one ingest batch in one transaction; see schemas/ingest.py for the rules."""

from __future__ import annotations

import datetime as dt
import hashlib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, cast

import psycopg
from sqlalchemy import (
    BigInteger,
    Numeric,
    Table,
    bindparam,
    case,
    func,
    literal_column,
    select,
    text,
    update,
)
from sqlalchemy.dialects.postgresql import insert as pg_insert
from sqlalchemy.orm import Session

from p4relay_server import mos as emodel
from p4relay_server.live import Message
from p4relay_server.models import (
    DIRECTIONS,
    Agent,
    CallSession,
    Event,
    IngestBatchRecord,
    IntPath,
    QualitySample,
    SessionLeg,
    Switch,
    SwitchPort,
)
from p4relay_server.schemas.ingest import (
    EventIn,
    IngestBatch,
    IngestResult,
    QualitySampleIn,
    SessionUpsert,
)
from p4relay_server.services.queries import endpoint_text

_COUNTERS = ("packets", "bytes", "lost")  # running sums of samples while active
_BIGINT_MAX = 2**63 - 1
_FINAL = ("ended", "failed")

_SAMPLE_RETURNING = (
    "session_id",
    "session_key",
    "direction",
    "ts",
    "packets",
    "bytes",
    "lost",
    "jitter_ms",
    "delay_ms",
    "mos",
)


def _iso(t: Any) -> str | None:
    return t.isoformat() if isinstance(t, dt.datetime) else None


def _table(model: Any) -> Table:
    table: Table = model.__table__
    return table


class _Context:
    """What the appliers of one batch share: the transaction, the result, the
    live messages to publish after commit, and the ids of what the batch names."""

    def __init__(self, db: Session, batch: IngestBatch, now: dt.datetime) -> None:
        self.db = db
        self.batch = batch
        self.now = now
        self.result = IngestResult(idempotency_key=batch.idempotency_key)
        self.messages: list[Message] = []
        self._switch_ids: dict[str, int] = {}
        self.agent_id: int | None = None

    def switch_ids(self, names: Iterable[str | None]) -> dict[str, int]:
        """Ids by name; a switch named before it is registered is created."""
        wanted = sorted({n for n in names if n} - self._switch_ids.keys())
        if wanted:
            ins = pg_insert(Switch).values([{"name": n} for n in wanted])
            stmt = ins.on_conflict_do_update(
                index_elements=[Switch.name], set_={"name": ins.excluded.name}
            ).returning(Switch.name, Switch.id)
            self._switch_ids.update({name: sid for name, sid in self.db.execute(stmt)})
        return self._switch_ids

    def remember_switch(self, name: str, switch_id: int) -> None:
        self._switch_ids[name] = switch_id

    def switch_names(self) -> dict[int, str]:
        return {v: k for k, v in self._switch_ids.items()}

    def agent_ids(self, names: set[str]) -> dict[str, int]:
        """Ids by name; an agent named before it reported itself is created."""
        if not names:
            return {}
        ins = pg_insert(Agent).values([{"name": n} for n in sorted(names)])
        stmt = ins.on_conflict_do_update(
            index_elements=[Agent.name], set_={"name": ins.excluded.name}
        ).returning(Agent.name, Agent.id)
        return {name: aid for name, aid in self.db.execute(stmt)}


# ------------------------------------------------------------------ switches
def apply_switch(ctx: _Context) -> None:
    """The batch's switch (by name) and its ports."""
    info = ctx.batch.switch
    if info is None:
        return
    ins = pg_insert(Switch).values(
        name=info.name,
        grpc_address=info.grpc_address,
        device_id=info.device_id,
        up=info.up,
        last_seen=ctx.now,
        relay_table_used=info.relay_table_used,
        relay_table_capacity=info.relay_table_capacity,
    )
    stmt = ins.on_conflict_do_update(
        index_elements=[Switch.name],
        set_={
            "grpc_address": func.coalesce(ins.excluded.grpc_address, Switch.grpc_address),
            "device_id": ins.excluded.device_id,
            "up": ins.excluded.up,
            "last_seen": ins.excluded.last_seen,
            # A switch that could not be read keeps its last occupancy.
            "relay_table_used": func.coalesce(
                ins.excluded.relay_table_used, Switch.relay_table_used
            ),
            "relay_table_capacity": func.coalesce(
                ins.excluded.relay_table_capacity, Switch.relay_table_capacity
            ),
        },
    ).returning(Switch.id)
    sid = ctx.db.execute(stmt).scalar_one()
    ctx.remember_switch(info.name, sid)
    if info.ports:
        pstmt = pg_insert(SwitchPort).values(
            [
                {
                    "switch_id": sid,
                    "dev_port": p.dev_port,
                    "name": p.name,
                    "speed_mbps": p.speed_mbps,
                    "up": p.up,
                }
                for p in {p.dev_port: p for p in info.ports}.values()
            ]
        )
        pstmt = pstmt.on_conflict_do_update(
            index_elements=[SwitchPort.switch_id, SwitchPort.dev_port],
            set_={
                "name": func.coalesce(pstmt.excluded.name, SwitchPort.name),
                "speed_mbps": func.coalesce(pstmt.excluded.speed_mbps, SwitchPort.speed_mbps),
                "up": func.coalesce(pstmt.excluded.up, SwitchPort.up),
            },
        )
        ctx.db.execute(pstmt)


# -------------------------------------------------------------------- agents
def apply_agent(ctx: _Context) -> None:
    """The batch's agent (by name); later appliers attribute to it."""
    info = ctx.batch.agent
    if info is None:
        return
    switch_id = ctx.switch_ids([info.switch]).get(info.switch) if info.switch else None
    ins = pg_insert(Agent).values(
        name=info.name,
        rtpproxy=info.rtpproxy,
        switch_id=switch_id,
        version=info.version,
        last_seen=ctx.now,
    )
    stmt = ins.on_conflict_do_update(
        index_elements=[Agent.name],
        set_={
            "rtpproxy": func.coalesce(ins.excluded.rtpproxy, Agent.rtpproxy),
            "switch_id": func.coalesce(ins.excluded.switch_id, Agent.switch_id),
            "version": func.coalesce(ins.excluded.version, Agent.version),
            "last_seen": ins.excluded.last_seen,
        },
    ).returning(Agent.id)
    ctx.agent_id = ctx.db.execute(stmt).scalar_one()


# ------------------------------------------------- a session's quality summary
@dataclass(frozen=True, slots=True)
class _Contribution:
    """One stored quality sample as it counts towards its session's summary."""

    session_id: int
    jitter_ms: float
    packets: int
    bytes: int
    lost: int
    mos: float | None


def add_to_session_quality(db: Session, samples: Iterable[_Contribution]) -> None:
    """The one rule for a session's quality summary: each sample counts once,
    when it is linked to its session. MOS average/minimum/count and the jitter
    maximum fold it in; `packets`/`bytes`/`lost` are running sums (each sample
    covers one interval) until the session has ended with the agent's totals,
    which then stand."""
    # id -> [n, sum, min, jitter_max, packets, bytes, lost]
    agg: dict[int, list[float]] = {}
    for r in samples:
        a = agg.setdefault(r.session_id, [0.0, 0.0, float("inf"), 0.0, 0, 0, 0])
        a[3] = max(a[3], r.jitter_ms)
        a[4] += r.packets
        a[5] += r.bytes
        a[6] += r.lost
        if r.mos is not None:
            a[0] += 1
            a[1] += r.mos
            a[2] = min(a[2], r.mos)
    if not agg:
        return
    t = _table(CallSession)
    n: Any = bindparam("n")
    totals_stand = (t.c.state == "ended") & t.c.packets.is_not(None)

    def running(col: Any, param: str) -> Any:
        # Summed as numeric and capped: a session's counters saturate at the
        # column's maximum rather than failing every later batch.
        total = func.coalesce(col, 0).cast(Numeric) + bindparam(param, type_=BigInteger)
        return case((totals_stand, col), else_=func.least(total, _BIGINT_MAX).cast(BigInteger))

    db.execute(
        t.update()
        .where(t.c.id == bindparam("sid"))
        .values(
            mos_avg=func.coalesce(
                (func.coalesce(t.c.mos_avg, 0) * t.c.mos_samples + bindparam("s"))
                / func.nullif(t.c.mos_samples + n, 0),
                t.c.mos_avg,
            ),
            mos_samples=t.c.mos_samples + n,
            mos_min=func.least(t.c.mos_min, bindparam("m")),
            jitter_ms_max=func.greatest(t.c.jitter_ms_max, bindparam("j")),
            packets=running(t.c.packets, "p"),
            bytes=running(t.c.bytes, "b"),
            lost=running(t.c.lost, "l"),
        ),
        [
            {
                "sid": sid,
                "n": int(a[0]),
                "s": a[1],
                "m": a[2] if a[0] else None,
                "j": a[3],
                "p": int(a[4]),
                "b": int(a[5]),
                "l": int(a[6]),
            }
            for sid, a in sorted(agg.items())
        ],
    )


# ------------------------------------------------------------------ sessions
def apply_sessions(ctx: _Context) -> None:
    """Session upserts in `seq` order per session (older or equal seq: stale);
    a new session adopts the samples and events that arrived before it."""
    sessions = ctx.batch.sessions
    if not sessions:
        return
    switch_ids = ctx.switch_ids(s.switch for s in sessions)
    changed: list[dict[str, Any]] = []
    for s in sessions:
        row = _session_row(ctx, s, switch_ids)
        ins = pg_insert(CallSession).values(**row)
        set_: dict[str, Any] = {k: ins.excluded[k] for k in row if k != "session_key"}
        # The agent reports totals only at the end; until then the running
        # counters kept from samples stay.
        for k in _COUNTERS:
            set_[k] = func.coalesce(ins.excluded[k], CallSession.__table__.c[k])
        set_["seq"] = func.greatest(CallSession.seq, ins.excluded.seq)
        # Updates apply in seq order. An end is final, so it applies to a
        # session that has not ended whatever its seq: an agent that restarted
        # without its journal numbers from 1 again, and its sessions must
        # still end.
        newer = CallSession.seq < ins.excluded.seq
        ends_open = ins.excluded.state.in_(_FINAL) & CallSession.state.not_in(_FINAL)
        stmt: Any = ins.on_conflict_do_update(
            index_elements=[CallSession.session_key],
            set_=set_,
            where=newer | ends_open,
        ).returning(CallSession.id, literal_column("(xmax = 0)"))
        got = ctx.db.execute(stmt).first()
        if got is None:
            ctx.result.sessions_stale += 1
            continue
        session_id, inserted = got
        ctx.result.sessions_applied += 1
        _replace_legs(ctx.db, session_id, s)
        if inserted:
            _adopt_orphans(ctx.db, session_id, s)
        changed.append(_session_summary(session_id, s))
    if changed:
        ctx.messages.append({"topic": "sessions", "items": changed})


def _session_row(ctx: _Context, s: SessionUpsert, switch_ids: dict[str, int]) -> dict[str, Any]:
    return {
        "session_key": s.session_key,
        "seq": s.seq,
        "call_id": s.call_id,
        "from_tag": s.from_tag,
        "to_tag": s.to_tag,
        "state": s.state,
        "offloaded": s.offloaded,
        "offload_reason": s.offload_reason,
        "codec": s.codec,
        "plc": s.plc,
        "switch_id": switch_ids.get(s.switch) if s.switch else None,
        "agent_id": ctx.agent_id,
        "started_at": s.started_at,
        "answered_at": s.answered_at,
        "ended_at": s.ended_at,
        "packets": s.packets,
        "bytes": s.bytes,
        "lost": s.lost,
        "updated_at": ctx.now,
    }


def _session_summary(session_id: int, s: SessionUpsert) -> dict[str, Any]:
    first = min(
        (leg for leg in s.legs if leg.direction == "caller_to_callee"),
        key=lambda leg: leg.media_index,
        default=None,
    )
    return {
        "id": session_id,
        "session_key": s.session_key,
        "call_id": s.call_id,
        "state": s.state,
        "offloaded": s.offloaded,
        "offload_reason": s.offload_reason,
        "switch": s.switch,
        "caller": endpoint_text(first.src.addr, first.src.port) if first else None,
        "callee": endpoint_text(first.dst.addr, first.dst.port) if first else None,
        "started_at": _iso(s.started_at),
        "answered_at": _iso(s.answered_at),
        "ended_at": _iso(s.ended_at),
    }


def _replace_legs(db: Session, session_id: int, s: SessionUpsert) -> None:
    # An update carries the full state, so its legs replace the stored ones.
    db.execute(_table(SessionLeg).delete().where(SessionLeg.session_id == session_id))
    legs = {(leg.direction, leg.media_index): leg for leg in s.legs}
    if not legs:
        return
    db.execute(
        pg_insert(SessionLeg),
        [
            {
                "session_id": session_id,
                "direction": leg.direction,
                "media_index": leg.media_index,
                "switch_leg": leg.switch_leg,
                "src_addr": leg.src.addr,
                "src_port": leg.src.port,
                "relay_in_addr": leg.relay_in.addr,
                "relay_in_port": leg.relay_in.port,
                "relay_out_addr": leg.relay_out.addr,
                "relay_out_port": leg.relay_out.port,
                "dst_addr": leg.dst.addr,
                "dst_port": leg.dst.port,
                "installed": leg.installed,
                "installed_at": leg.installed_at,
                "removed_at": leg.removed_at,
                "packets": leg.packets,
                "bytes": leg.bytes,
            }
            for leg in legs.values()
        ],
    )


def _adopt_orphans(db: Session, session_id: int, s: SessionUpsert) -> None:
    """Links the samples and events that arrived before their session; the
    samples' MOS is recomputed with the session's codec and PLC and they then
    count towards its summary like any other sample."""
    db.execute(
        update(Event)
        .where(Event.session_key == s.session_key, Event.session_id.is_(None))
        .values(session_id=session_id)
    )
    orphans = db.execute(
        select(
            QualitySample.id,
            QualitySample.packets,
            QualitySample.bytes,
            QualitySample.lost,
            QualitySample.jitter_ms,
            QualitySample.delay_ms,
            QualitySample.burst_ratio,
            QualitySample.codec,
        ).where(QualitySample.session_key == s.session_key, QualitySample.session_id.is_(None))
    ).all()
    if not orphans:
        return
    params: list[dict[str, Any]] = []
    linked: list[_Contribution] = []
    for oid, packets, nbytes, lost, jitter, delay, burst, codec in orphans:
        q = emodel.mos(
            codec or s.codec,
            packets=packets,
            lost=lost,
            jitter_ms=jitter,
            delay_ms=delay,
            burst_ratio=burst,
            plc=s.plc,
        )
        mos = q[1] if q else None
        params.append({"oid": oid, "sid": session_id, "r": q[0] if q else None, "m": mos})
        linked.append(_Contribution(session_id, jitter, packets, nbytes, lost, mos))
    qt = _table(QualitySample)
    db.execute(
        qt.update()
        .where(qt.c.id == bindparam("oid"))
        .values(session_id=bindparam("sid"), r_factor=bindparam("r"), mos=bindparam("m")),
        params,
    )
    add_to_session_quality(db, linked)


# ----------------------------------------------------------- quality samples
def _copy_insert(
    db: Session, table: str, rows: list[dict[str, Any]], returning: tuple[str, ...]
) -> list[Any]:
    """Bulk insert ignoring rows whose natural key exists; returns the new rows.

    COPY into a per-connection temp table, then one INSERT ... SELECT ... ON
    CONFLICT DO NOTHING: a multi-row VALUES statement of thousands of rows
    spends most of its time in client-side query building, COPY does not.
    """
    if not rows:
        return []
    cols = list(rows[0])
    staging = f"_in_{table}"
    col_list = ", ".join(cols)
    raw = cast(psycopg.Connection[Any], db.connection().connection.dbapi_connection)
    with raw.cursor() as cur:
        cur.execute(
            f"CREATE TEMP TABLE IF NOT EXISTS {staging} ON COMMIT DELETE ROWS AS "
            f"SELECT {col_list} FROM {table} WITH NO DATA"
        )
        cur.execute(f"TRUNCATE {staging}")
        with cur.copy(f"COPY {staging} ({col_list}) FROM STDIN") as cp:
            for r in rows:
                cp.write_row([r[c] for c in cols])
    return list(
        db.execute(
            text(
                f"INSERT INTO {table} ({col_list}) SELECT {col_list} FROM {staging} "
                f"ON CONFLICT DO NOTHING RETURNING {', '.join(returning)}"
            )
        )
    )


def apply_quality_samples(ctx: _Context) -> None:
    """Quality samples by (session_key, direction, ts), duplicates ignored; MOS
    from the E-model; those of known sessions count towards their summary."""
    samples = ctx.batch.samples
    if not samples:
        return
    keys = list({s.session_key for s in samples})
    # = ANY(array): one parameter however many keys (an IN list of
    # thousands of parameters is slow to build).
    known = {
        key: (sid, codec, plc)
        for key, sid, codec, plc in ctx.db.execute(
            text("SELECT session_key, id, codec, plc FROM sessions WHERE session_key = ANY(:k)"),
            {"k": keys},
        )
    }
    rows = [_sample_row(s, known.get(s.session_key)) for s in samples]
    stored = _copy_insert(ctx.db, "quality_samples", rows, _SAMPLE_RETURNING)
    ctx.result.samples_stored = len(stored)
    ctx.result.samples_duplicate = len(rows) - len(stored)
    ctx.result.samples_unlinked = sum(1 for r in stored if r.session_id is None)
    add_to_session_quality(
        ctx.db,
        (
            _Contribution(r.session_id, r.jitter_ms, r.packets, r.bytes, r.lost, r.mos)
            for r in stored
            if r.session_id is not None
        ),
    )
    if stored:
        ctx.messages.append(
            {"topic": "samples", "items": [_sample_message(r._mapping) for r in stored]}
        )


def _sample_row(s: QualitySampleIn, session: tuple[int, str | None, bool] | None) -> dict[str, Any]:
    sid, codec, plc = session if session else (None, None, True)
    q = emodel.mos(
        s.codec or codec,
        packets=s.packets,
        lost=s.lost,
        jitter_ms=s.jitter_ms,
        delay_ms=s.delay_ms,
        burst_ratio=s.burst_ratio,
        plc=plc,
    )
    return {
        "session_id": sid,
        "session_key": s.session_key,
        "direction": s.direction,
        "ts": s.ts,
        "resolution_s": 0,
        "interval_ms": s.interval_ms,
        "packets": s.packets,
        "bytes": s.bytes,
        "lost": s.lost,
        "reordered": s.reordered,
        "jitter_ms": s.jitter_ms,
        "delay_ms": s.delay_ms,
        "burst_ratio": s.burst_ratio,
        "codec": s.codec,
        "r_factor": q[0] if q else None,
        "mos": q[1] if q else None,
    }


def _sample_message(r: Mapping[str, Any]) -> dict[str, Any]:
    expected = r["packets"] + r["lost"]
    return {
        "session_id": r["session_id"],
        "session_key": r["session_key"],
        "direction": r["direction"],
        "ts": _iso(r["ts"]),
        "packets": r["packets"],
        "lost": r["lost"],
        "loss_pct": 100.0 * r["lost"] / expected if expected else 0.0,
        "jitter_ms": r["jitter_ms"],
        "delay_ms": r["delay_ms"],
        "mos": r["mos"],
    }


# ------------------------------------------------------------- queue samples
def apply_queue_samples(ctx: _Context) -> None:
    """Queue samples by (switch, dev_port, queue, ts), duplicates ignored; a
    port named for the first time is created."""
    qs = ctx.batch.queue_samples
    if not qs:
        return
    switch_ids = ctx.switch_ids(q.switch for q in qs)
    ports = sorted({(switch_ids[q.switch], q.dev_port) for q in qs})
    ctx.db.execute(
        pg_insert(SwitchPort)
        .values([{"switch_id": s, "dev_port": p} for s, p in ports])
        .on_conflict_do_nothing()
    )
    rows: list[dict[str, Any]] = [
        {
            "switch_id": switch_ids[q.switch],
            "dev_port": q.dev_port,
            "queue": q.queue,
            "ts": q.ts,
            "resolution_s": 0,
            "depth_pkts": q.depth_pkts,
            "depth_bytes": q.depth_bytes,
            "depth_max_pkts": q.depth_pkts,
            "queue_delay_us": q.queue_delay_us,
            "queue_delay_max_us": q.queue_delay_us,
            "utilisation": q.utilisation,
            "drops": q.drops,
            "tx_packets": q.tx_packets,
            "tx_bytes": q.tx_bytes,
            "ired_qavg_bytes": q.ired_qavg_bytes,
        }
        for q in qs
    ]
    stored = _copy_insert(ctx.db, "queue_samples", rows, ("switch_id", "dev_port", "queue", "ts"))
    ctx.result.queue_samples_stored = len(stored)
    ctx.result.queue_samples_duplicate = len(rows) - len(stored)
    if stored:
        names = ctx.switch_names()
        keep = {(r.switch_id, r.dev_port, r.queue, r.ts) for r in stored}
        ctx.messages.append(
            {
                "topic": "queues",
                "items": [
                    {
                        "switch": names[r["switch_id"]],
                        "switch_id": r["switch_id"],
                        "dev_port": r["dev_port"],
                        "queue": r["queue"],
                        "ts": _iso(r["ts"]),
                        "depth_pkts": r["depth_pkts"],
                        "depth_bytes": r["depth_bytes"],
                        "queue_delay_us": r["queue_delay_us"],
                        "utilisation": r["utilisation"],
                        "drops": r["drops"],
                        "ired_qavg_bytes": r["ired_qavg_bytes"],
                    }
                    for r in rows
                    if (r["switch_id"], r["dev_port"], r["queue"], r["ts"]) in keep
                ],
            }
        )


# -------------------------------------------------------------------- events
def apply_events(ctx: _Context) -> None:
    """Events by `event_id`, duplicates ignored; linked to their session when
    it is known (else when it arrives), their switch and agent. An `event_id`
    is an idempotency key: the same id with other content (in this batch or
    stored) is refused whole (IdempotencyConflict, 409), as a reused batch key is."""
    events = ctx.batch.events
    if not events:
        return
    by_id: dict[str, EventIn] = {}
    for e in events:
        if by_id.setdefault(e.event_id, e) != e:
            raise IdempotencyConflict(f"event_id {e.event_id!r} sent twice with other content")
    switch_ids = ctx.switch_ids(e.switch for e in events)
    keys = list({e.session_key for e in events if e.session_key})
    sessions: dict[str, int] = {
        key: sid
        for key, sid in ctx.db.execute(
            select(CallSession.session_key, CallSession.id).where(CallSession.session_key.in_(keys))
        )
    }
    agents = ctx.agent_ids({e.agent for e in events if e.agent})
    rows: list[dict[str, Any]] = [
        {
            "event_id": e.event_id,
            "type": e.type,
            "ts": e.ts,
            "severity": e.severity,
            "session_id": sessions.get(e.session_key) if e.session_key else None,
            "session_key": e.session_key,
            "switch_id": switch_ids.get(e.switch) if e.switch else None,
            "agent_id": agents.get(e.agent) if e.agent else ctx.agent_id,
            "message": e.message,
            "payload": e.payload,
        }
        for e in {e.event_id: e for e in events}.values()
    ]
    t = _table(Event)
    stored = ctx.db.execute(
        pg_insert(t).on_conflict_do_nothing().returning(t.c.id, t.c.event_id), rows
    ).all()
    ctx.result.events_stored = len(stored)
    ctx.result.events_duplicate = len(events) - len(stored)
    if len(stored) < len(rows):
        _check_event_replays(ctx, rows, {r.event_id for r in stored})
    new_ids = {r.event_id for r in stored}
    _apply_one_way(ctx, [r for r in rows if r["event_id"] in new_ids])
    if stored:
        ids = {r.event_id: r.id for r in stored}
        names = ctx.switch_names()
        ctx.messages.append(
            {
                "topic": "events",
                "items": [
                    {
                        "id": ids[r["event_id"]],
                        "event_id": r["event_id"],
                        "type": r["type"],
                        "ts": _iso(r["ts"]),
                        "severity": r["severity"],
                        "session_id": r["session_id"],
                        "session_key": r["session_key"],
                        "switch": names.get(r["switch_id"]) if r["switch_id"] else None,
                        "message": r["message"],
                        "payload": r["payload"],
                    }
                    for r in rows
                    if r["event_id"] in ids
                ],
            }
        )


_ONE_WAY = {"one_way_media": True, "one_way_media_cleared": False}


def _apply_one_way(ctx: _Context, rows: list[dict[str, Any]]) -> None:
    """One-way media events set (or clear) their session's silent direction,
    in event time order; the live stream hears of the session's new state."""
    changed: dict[int, dict[str, Any]] = {}
    for r in sorted((r for r in rows if r["type"] in _ONE_WAY), key=lambda r: r["ts"]):
        direction = r["payload"].get("direction")
        if r["session_id"] is None or direction not in DIRECTIONS:
            continue
        set_to = direction if _ONE_WAY[r["type"]] else None
        stmt = update(CallSession).where(CallSession.id == r["session_id"])
        if set_to is None:
            stmt = stmt.where(CallSession.one_way == direction)  # a later silence stays
        got = ctx.db.execute(
            stmt.values(one_way=set_to).returning(
                CallSession.id,
                CallSession.session_key,
                CallSession.call_id,
                CallSession.state,
                CallSession.offloaded,
                CallSession.started_at,
                CallSession.ended_at,
                CallSession.one_way,
            )
        ).first()
        if got is not None:
            changed[got.id] = {
                "id": got.id,
                "session_key": got.session_key,
                "call_id": got.call_id,
                "state": got.state,
                "offloaded": got.offloaded,
                "started_at": _iso(got.started_at),
                "ended_at": _iso(got.ended_at),
                "one_way": got.one_way,
            }
    if changed:
        ctx.messages.append({"topic": "sessions", "items": list(changed.values())})


_EVENT_CONTENT = (
    "type",
    "ts",
    "severity",
    "session_key",
    "switch_id",
    "agent_id",
    "message",
    "payload",
)


def _check_event_replays(ctx: _Context, rows: list[dict[str, Any]], stored: set[str]) -> None:
    """The events already held under these ids must be these very events."""
    again = {r["event_id"]: r for r in rows if r["event_id"] not in stored}
    t = _table(Event)
    held = ctx.db.execute(
        select(t.c.event_id, *(t.c[c] for c in _EVENT_CONTENT)).where(t.c.event_id.in_(list(again)))
    ).all()
    for h in held:
        new = again[h.event_id]
        if any(getattr(h, c) != new[c] for c in _EVENT_CONTENT):
            raise IdempotencyConflict(
                f"event_id {h.event_id!r} is held with other content; an event is never changed"
            )


# ----------------------------------------------------------- INT path records
def apply_paths(ctx: _Context) -> None:
    """INT path records by (flow, ts), duplicates ignored; the sink (the last
    hop) is linked to its switch, created when named for the first time."""
    paths = ctx.batch.paths
    if not paths:
        return
    switch_ids = ctx.switch_ids(p.hops[-1].switch for p in paths)
    rows: list[dict[str, Any]] = [
        {
            "ts": p.ts,
            "src_addr": p.src.addr,
            "src_port": p.src.port,
            "dst_addr": p.dst.addr,
            "dst_port": p.dst.port,
            "sink_switch_id": switch_ids[p.hops[-1].switch],
            "hops": [h.model_dump() for h in p.hops],
        }
        for p in paths
    ]
    t = _table(IntPath)
    stored = ctx.db.execute(pg_insert(t).on_conflict_do_nothing().returning(t.c.id), rows).all()
    ctx.result.paths_stored = len(stored)
    ctx.result.paths_duplicate = len(rows) - len(stored)


# Each entity's applier, in the order a batch is applied: what later parts
# refer to (the switch, the agent, sessions) comes first.
APPLIERS = (
    apply_switch,
    apply_agent,
    apply_sessions,
    apply_quality_samples,
    apply_queue_samples,
    apply_events,
    apply_paths,
)


class IdempotencyConflict(ValueError):
    """The token already used this idempotency key for a different batch, or an
    event's `event_id` came again with other content."""


def body_hash(body: bytes) -> str:
    """SHA-256 of a request body, hex. The body as sent: a retry re-sends the
    same bytes (hashing them costs a fraction of re-serialising the batch)."""
    return hashlib.sha256(body).hexdigest()


def apply_batch(
    db: Session,
    batch: IngestBatch,
    token_id: int,
    digest: str,
    now: dt.datetime | None = None,
) -> tuple[IngestResult, list[Message]]:
    """Apply `batch` (whose body hashed to `digest`) and commit; returns the
    result and the live messages to publish. Idempotency keys are the token's
    own: the same key with the same body returns the stored result and changes
    nothing; with another body it raises IdempotencyConflict (nothing is stored)."""
    now = now or dt.datetime.now(dt.UTC)
    claim = (
        pg_insert(IngestBatchRecord)
        .values(
            token_id=token_id,
            idempotency_key=batch.idempotency_key,
            body_hash=digest,
            received_at=now,
        )
        .on_conflict_do_nothing()
        .returning(IngestBatchRecord.idempotency_key)
    )
    # A concurrent batch with the same key blocks here until it commits.
    if db.execute(claim).first() is None:
        db.rollback()
        seen = db.execute(
            select(IngestBatchRecord.body_hash, IngestBatchRecord.result).where(
                IngestBatchRecord.token_id == token_id,
                IngestBatchRecord.idempotency_key == batch.idempotency_key,
            )
        ).first()
        if seen is not None and seen.body_hash is not None and seen.body_hash != digest:
            raise IdempotencyConflict(
                f"idempotency key {batch.idempotency_key!r} was used for a different batch"
            )
        stored = seen.result if seen is not None else None
        res = IngestResult.model_validate(stored or {"idempotency_key": batch.idempotency_key})
        res.replayed = True
        return res, []
    work = _Context(db, batch, now)
    for applier in APPLIERS:
        applier(work)
    db.execute(
        update(IngestBatchRecord)
        .where(
            IngestBatchRecord.token_id == token_id,
            IngestBatchRecord.idempotency_key == batch.idempotency_key,
        )
        .values(result=work.result.model_dump(mode="json"))
    )
    db.commit()
    return work.result, work.messages
