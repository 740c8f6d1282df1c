"""Apply one ingest batch in one transaction; see schemas/ingest.py for the rules."""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, cast

import psycopg
from sqlalchemy import Table, bindparam, case, func, literal_column, select, text, update
from sqlalchemy.dialects.postgresql import insert as pg_insert
from sqlalchemy.orm import Session

from p4relay_server import mos as emodel
from p4relay_server.live import Message
from p4relay_server.models import (
    Agent,
    CallSession,
    Event,
    IngestBatchRecord,
    QualitySample,
    SessionLeg,
    Switch,
    SwitchPort,
)
from p4relay_server.schemas.ingest import (
    IngestBatch,
    IngestResult,
    QualitySampleIn,
    SessionUpsert,
)
from p4relay_server.services.queries import endpoint_text

_COUNTERS = ("packets", "bytes", "lost")  # running sums of samples while active

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


class _Batch:
    def __init__(self, db: Session, batch: IngestBatch, now: dt.datetime) -> None:
        self.db = db
        self.batch = batch
        self.now = now
        self.result = IngestResult(idempotency_key=batch.idempotency_key)
        self.messages: list[Message] = []
        self._switch_ids: dict[str, int] = {}
        self.agent_id: int | None = None

    # ------------------------------------------------------------ references
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

    def upsert_switch(self) -> None:
        info = self.batch.switch
        if info is None:
            return
        ins = pg_insert(Switch).values(
            name=info.name,
            grpc_address=info.grpc_address,
            device_id=info.device_id,
            up=info.up,
            last_seen=self.now,
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
        sid = self.db.execute(stmt).scalar_one()
        self._switch_ids[info.name] = sid
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
            self.db.execute(pstmt)

    def upsert_agent(self) -> None:
        info = self.batch.agent
        if info is None:
            return
        switch_id = self.switch_ids([info.switch]).get(info.switch) if info.switch else None
        ins = pg_insert(Agent).values(
            name=info.name,
            rtpproxy=info.rtpproxy,
            switch_id=switch_id,
            version=info.version,
            last_seen=self.now,
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
        self.agent_id = self.db.execute(stmt).scalar_one()

    # -------------------------------------------------------------- sessions
    def apply_sessions(self) -> None:
        sessions = self.batch.sessions
        if not sessions:
            return
        switch_ids = self.switch_ids(s.switch for s in sessions)
        changed: list[dict[str, Any]] = []
        for s in sessions:
            row = self._session_row(s, switch_ids)
            ins = pg_insert(CallSession).values(**row)
            set_: dict[str, Any] = {k: ins.excluded[k] for k in row if k != "session_key"}
            # The agent reports totals only at the end; until then the running
            # counters kept from samples stay.
            for k in _COUNTERS:
                set_[k] = func.coalesce(ins.excluded[k], CallSession.__table__.c[k])
            stmt: Any = ins.on_conflict_do_update(
                index_elements=[CallSession.session_key],
                set_=set_,
                where=CallSession.seq < ins.excluded.seq,
            ).returning(CallSession.id, literal_column("(xmax = 0)"))
            got = self.db.execute(stmt).first()
            if got is None:
                self.result.sessions_stale += 1
                continue
            session_id, inserted = got
            self.result.sessions_applied += 1
            self._replace_legs(session_id, s)
            if inserted:
                self._link_orphans(session_id, s)
            changed.append(self._summary(session_id, s))
        if changed:
            self.messages.append({"topic": "sessions", "items": changed})

    def _session_row(self, s: SessionUpsert, switch_ids: dict[str, int]) -> dict[str, Any]:
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
            "agent_id": self.agent_id,
            "started_at": s.started_at,
            "answered_at": s.answered_at,
            "ended_at": s.ended_at,
            "packets": s.packets,
            "bytes": s.bytes,
            "lost": s.lost,
            "updated_at": self.now,
        }

    def _summary(self, session_id: int, s: SessionUpsert) -> dict[str, Any]:
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

    def _replace_legs(self, session_id: int, s: SessionUpsert) -> None:
        # An update carries the full state, so its legs replace the stored ones.
        self.db.execute(_table(SessionLeg).delete().where(SessionLeg.session_id == session_id))
        legs = {(leg.direction, leg.media_index): leg for leg in s.legs}
        if not legs:
            return
        self.db.execute(
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

    def _link_orphans(self, session_id: int, s: SessionUpsert) -> None:
        """Attach samples and events that arrived before their session."""
        self.db.execute(
            update(Event)
            .where(Event.session_key == s.session_key, Event.session_id.is_(None))
            .values(session_id=session_id)
        )
        orphans = self.db.execute(
            select(
                QualitySample.id,
                QualitySample.packets,
                QualitySample.lost,
                QualitySample.jitter_ms,
                QualitySample.delay_ms,
                QualitySample.burst_ratio,
                QualitySample.codec,
                QualitySample.bytes,
            ).where(QualitySample.session_key == s.session_key, QualitySample.session_id.is_(None))
        ).all()
        if not orphans:
            return
        t = _table(CallSession)
        self.db.execute(
            t.update()
            .where(t.c.id == session_id, t.c.packets.is_(None))
            .values(
                packets=sum(o.packets for o in orphans),
                bytes=sum(o.bytes for o in orphans),
                lost=sum(o.lost for o in orphans),
            )
        )
        # MOS is recomputed now that the session's codec and PLC are known.
        params = []
        for oid, packets, lost, jitter, delay, burst, codec, _ in orphans:
            q = emodel.mos(
                codec or s.codec,
                packets=packets,
                lost=lost,
                jitter_ms=jitter,
                delay_ms=delay,
                burst_ratio=burst,
                plc=s.plc,
            )
            params.append(
                {"oid": oid, "sid": session_id, "r": q[0] if q else None, "m": q[1] if q else None}
            )
        qt = _table(QualitySample)
        self.db.execute(
            qt.update()
            .where(qt.c.id == bindparam("oid"))
            .values(session_id=bindparam("sid"), r_factor=bindparam("r"), mos=bindparam("m")),
            params,
        )
        self.db.execute(
            update(CallSession)
            .where(CallSession.id == session_id)
            .values(
                mos_avg=select(func.avg(QualitySample.mos))
                .where(QualitySample.session_id == session_id)
                .scalar_subquery(),
                mos_min=select(func.min(QualitySample.mos))
                .where(QualitySample.session_id == session_id)
                .scalar_subquery(),
                mos_samples=select(func.count(QualitySample.mos))
                .where(QualitySample.session_id == session_id)
                .scalar_subquery(),
                jitter_ms_max=select(func.max(QualitySample.jitter_ms))
                .where(QualitySample.session_id == session_id)
                .scalar_subquery(),
            )
        )

    # --------------------------------------------------------------- samples
    def _copy_insert(
        self, table: str, rows: list[dict[str, Any]], returning: tuple[str, ...]
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
        raw = cast(psycopg.Connection[Any], self.db.connection().connection.dbapi_connection)
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
            self.db.execute(
                text(
                    f"INSERT INTO {table} ({col_list}) SELECT {col_list} FROM {staging} "
                    f"ON CONFLICT DO NOTHING RETURNING {', '.join(returning)}"
                )
            )
        )

    def apply_samples(self) -> None:
        samples = self.batch.samples
        if not samples:
            return
        keys = list({s.session_key for s in samples})
        # = ANY(array): one parameter however many keys (an IN list of
        # thousands of parameters is slow to build).
        known = {
            key: (sid, codec, plc)
            for key, sid, codec, plc in self.db.execute(
                text(
                    "SELECT session_key, id, codec, plc FROM sessions WHERE session_key = ANY(:k)"
                ),
                {"k": keys},
            )
        }
        rows = [self._sample_row(s, known.get(s.session_key)) for s in samples]
        stored = self._copy_insert(
            "quality_samples",
            rows,
            _SAMPLE_RETURNING,
        )
        self.result.samples_stored = len(stored)
        self.result.samples_duplicate = len(rows) - len(stored)
        self.result.samples_unlinked = sum(1 for r in stored if r.session_id is None)
        self._update_session_quality(stored)
        if stored:
            self.messages.append(
                {"topic": "samples", "items": [_sample_message(r._mapping) for r in stored]}
            )

    def _sample_row(
        self, s: QualitySampleIn, session: tuple[int, str | None, bool] | None
    ) -> dict[str, Any]:
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

    def _update_session_quality(self, stored: Sequence[Any]) -> None:
        # id -> [n, sum, min, jitter_max, packets, bytes, lost]
        agg: dict[int, list[float]] = {}
        for r in stored:
            if r.session_id is None:
                continue
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
        self.db.execute(
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
                # Each sample covers one interval, so sums are running totals.
                # Once the session ended the agent's final totals stand.
                packets=case(
                    (t.c.state == "ended", t.c.packets),
                    else_=func.coalesce(t.c.packets, 0) + bindparam("p"),
                ),
                bytes=case(
                    (t.c.state == "ended", t.c.bytes),
                    else_=func.coalesce(t.c.bytes, 0) + bindparam("b"),
                ),
                lost=case(
                    (t.c.state == "ended", t.c.lost),
                    else_=func.coalesce(t.c.lost, 0) + bindparam("l"),
                ),
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

    # ---------------------------------------------------------- queue samples
    def apply_queue_samples(self) -> None:
        qs = self.batch.queue_samples
        if not qs:
            return
        switch_ids = self.switch_ids(q.switch for q in qs)
        ports = sorted({(switch_ids[q.switch], q.dev_port) for q in qs})
        self.db.execute(
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
            }
            for q in qs
        ]
        stored = self._copy_insert("queue_samples", rows, ("switch_id", "dev_port", "queue", "ts"))
        self.result.queue_samples_stored = len(stored)
        self.result.queue_samples_duplicate = len(rows) - len(stored)
        if stored:
            names = {v: k for k, v in switch_ids.items()}
            keep = {(r.switch_id, r.dev_port, r.queue, r.ts) for r in stored}
            self.messages.append(
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
                        }
                        for r in rows
                        if (r["switch_id"], r["dev_port"], r["queue"], r["ts"]) in keep
                    ],
                }
            )

    # ----------------------------------------------------------------- events
    def apply_events(self) -> None:
        events = self.batch.events
        if not events:
            return
        switch_ids = self.switch_ids(e.switch for e in events)
        keys = list({e.session_key for e in events if e.session_key})
        sessions: dict[str, int] = {
            key: sid
            for key, sid in self.db.execute(
                select(CallSession.session_key, CallSession.id).where(
                    CallSession.session_key.in_(keys)
                )
            )
        }
        agent_names = {e.agent for e in events if e.agent}
        agents = self._agent_ids(agent_names)
        rows: list[dict[str, Any]] = [
            {
                "event_id": e.event_id,
                "type": e.type,
                "ts": e.ts,
                "severity": e.severity,
                "session_id": sessions.get(e.session_key) if e.session_key else None,
                "session_key": e.session_key,
                "switch_id": switch_ids.get(e.switch) if e.switch else None,
                "agent_id": agents.get(e.agent) if e.agent else self.agent_id,
                "message": e.message,
                "payload": e.payload,
            }
            for e in {e.event_id: e for e in events}.values()
        ]
        t = _table(Event)
        stored = self.db.execute(
            pg_insert(t).on_conflict_do_nothing().returning(t.c.id, t.c.event_id), rows
        ).all()
        self.result.events_stored = len(stored)
        self.result.events_duplicate = len(events) - len(stored)
        if stored:
            ids = {r.event_id: r.id for r in stored}
            names = {v: k for k, v in switch_ids.items()}
            self.messages.append(
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

    def _agent_ids(self, names: set[str]) -> dict[str, int]:
        if not names:
            return {}
        ins = pg_insert(Agent).values([{"name": n} for n in sorted(names)])
        stmt = ins.on_conflict_do_update(
            index_elements=[Agent.name], set_={"name": ins.excluded.name}
        ).returning(Agent.name, Agent.id)
        return {name: aid for name, aid in self.db.execute(stmt)}


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


def apply_batch(
    db: Session, batch: IngestBatch, token_id: int | None, now: dt.datetime | None = None
) -> tuple[IngestResult, list[Message]]:
    """Apply `batch` and commit; returns the result and the live messages to
    publish. A replayed idempotency key returns the stored result, no changes."""
    now = now or dt.datetime.now(dt.UTC)
    claim = (
        pg_insert(IngestBatchRecord)
        .values(idempotency_key=batch.idempotency_key, token_id=token_id, received_at=now)
        .on_conflict_do_nothing()
        .returning(IngestBatchRecord.idempotency_key)
    )
    # A concurrent batch with the same key blocks here until it commits.
    if db.execute(claim).first() is None:
        db.rollback()
        stored = db.scalar(
            select(IngestBatchRecord.result).where(
                IngestBatchRecord.idempotency_key == batch.idempotency_key
            )
        )
        res = IngestResult.model_validate(stored or {"idempotency_key": batch.idempotency_key})
        res.replayed = True
        return res, []
    work = _Batch(db, batch, now)
    work.upsert_switch()
    work.upsert_agent()
    work.apply_sessions()
    work.apply_samples()
    work.apply_queue_samples()
    work.apply_events()
    db.execute(
        update(IngestBatchRecord)
        .where(IngestBatchRecord.idempotency_key == batch.idempotency_key)
        .values(result=work.result.model_dump(mode="json"))
    )
    db.commit()
    return work.result, work.messages
