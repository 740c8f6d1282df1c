"""Maintenance state: operators' settings (audited as maintenance_set events)
and the agents' polls."""

from __future__ import annotations

import datetime as dt
import uuid
from typing import Any

import structlog
from sqlalchemy import select
from sqlalchemy.dialects.postgresql import insert as pg_insert
from sqlalchemy.orm import Session

from p4relay_server.models import Agent, Event, Switch
from p4relay_server.schemas import maintenance as m

log = structlog.get_logger("p4relay_server.maintenance")

# An agent's report older than this is stale: its figures are not counted.
STALE_S = 30.0


def _agent_out(a: Agent, switch: str | None, now: dt.datetime) -> m.AgentMaintenance:
    stale = a.reported_at is None or (now - a.reported_at).total_seconds() > STALE_S
    return m.AgentMaintenance(
        id=a.id,
        name=a.name,
        switch=switch,
        maintenance=a.maintenance,  # type: ignore[arg-type]  # the check constraint's values
        maintenance_changed_at=a.maintenance_changed_at,
        maintenance_changed_by=a.maintenance_changed_by,
        reported_mode=a.reported_mode,  # type: ignore[arg-type]
        offloaded=a.offloaded,
        capacity=a.capacity,
        by_pipe=a.by_pipe,
        reported_at=a.reported_at,
        stale=stale,
    )


def switch_view(sw: Switch, agents: list[Agent], now: dt.datetime) -> m.SwitchMaintenance:
    outs = [_agent_out(a, sw.name, now) for a in agents]
    fresh = [a for a in outs if not a.stale]
    offloaded = sum(a.offloaded or 0 for a in fresh)
    caps = [a.capacity for a in fresh if a.capacity is not None]
    capacity = sum(caps) if caps else None
    pipes: dict[str, int] = {}
    for a in fresh:
        for k, n in (a.by_pipe or {}).items():
            pipes[k] = pipes.get(k, 0) + n
    return m.SwitchMaintenance(
        id=sw.id,
        name=sw.name,
        maintenance=sw.maintenance,  # type: ignore[arg-type]
        maintenance_changed_at=sw.maintenance_changed_at,
        maintenance_changed_by=sw.maintenance_changed_by,
        offload_cap=sw.offload_cap,
        offloaded=offloaded,
        capacity=capacity,
        headroom=None if capacity is None else max(0, capacity - offloaded),
        utilisation=None if not capacity else round(offloaded / capacity, 4),
        relay_table_used=sw.relay_table_used,
        relay_table_capacity=sw.relay_table_capacity,
        by_pipe=pipes,
        evacuated=sw.maintenance == "out_of_service"
        and all(a.offloaded == 0 and a.reported_mode == "evacuated" for a in fresh),
        agents=outs,
    )


def view(db: Session) -> m.MaintenanceView:
    now = dt.datetime.now(dt.UTC)
    switches = list(db.scalars(select(Switch).order_by(Switch.name)))
    agents = list(db.scalars(select(Agent).order_by(Agent.name)))
    by_switch: dict[int | None, list[Agent]] = {}
    for a in agents:
        by_switch.setdefault(a.switch_id, []).append(a)
    return m.MaintenanceView(
        switches=[switch_view(s, by_switch.get(s.id, []), now) for s in switches],
        agents=[_agent_out(a, None, now) for a in by_switch.get(None, [])],
    )


def one_switch(db: Session, sw: Switch) -> m.SwitchMaintenance:
    agents = list(db.scalars(select(Agent).where(Agent.switch_id == sw.id).order_by(Agent.name)))
    return switch_view(sw, agents, dt.datetime.now(dt.UTC))


def one_agent(db: Session, a: Agent) -> m.AgentMaintenance:
    switch = db.scalar(select(Switch.name).where(Switch.id == a.switch_id))
    return _agent_out(a, switch, dt.datetime.now(dt.UTC))


def _audit(
    db: Session,
    by: str,
    target: str,
    state: str,
    payload: dict[str, Any],
    *,
    switch_id: int | None = None,
    agent_id: int | None = None,
) -> None:
    now = dt.datetime.now(dt.UTC)
    db.add(
        Event(
            event_id=uuid.uuid4().hex,
            type="maintenance_set",
            ts=now,
            severity="warning",
            switch_id=switch_id,
            agent_id=agent_id,
            message=f"{by} set {target} {state}",
            payload={"target": target, "state": state, "by": by, **payload},
        )
    )
    log.warning("maintenance_set", target=target, state=state, by=by, **payload)


def set_switch(db: Session, sw: Switch, body: m.SwitchMaintenanceSet, by: str) -> None:
    changes: dict[str, Any] = {}
    if body.state is not None and body.state != sw.maintenance:
        changes["previous"] = sw.maintenance
        sw.maintenance = body.state
    cap = None if body.clear_cap else body.offload_cap
    if (body.clear_cap or body.offload_cap is not None) and cap != sw.offload_cap:
        changes["offload_cap"] = cap
        changes["previous_cap"] = sw.offload_cap
        sw.offload_cap = cap
    if changes:
        sw.maintenance_changed_at = dt.datetime.now(dt.UTC)
        sw.maintenance_changed_by = by[:64]
        _audit(db, by, f"switch:{sw.name}", sw.maintenance, changes, switch_id=sw.id)
    db.commit()


def set_agent(db: Session, a: Agent, body: m.AgentMaintenanceSet, by: str) -> None:
    if body.state != a.maintenance:
        previous = a.maintenance
        a.maintenance = body.state
        a.maintenance_changed_at = dt.datetime.now(dt.UTC)
        a.maintenance_changed_by = by[:64]
        _audit(
            db,
            by,
            f"agent:{a.name}",
            body.state,
            {"previous": previous},
            switch_id=a.switch_id,
            agent_id=a.id,
        )
    db.commit()


def poll(db: Session, p: m.AgentPoll) -> m.PollAnswer:
    """Store the agent's report; answer with what operators set for it and its switch."""
    now = dt.datetime.now(dt.UTC)
    switch_id = None
    if p.switch is not None:
        ins = pg_insert(Switch).values(name=p.switch)
        switch_id = db.execute(
            ins.on_conflict_do_update(
                index_elements=[Switch.name], set_={"name": ins.excluded.name}
            ).returning(Switch.id)
        ).scalar_one()
    values: dict[str, Any] = {
        "reported_mode": p.mode,
        "offloaded": p.offloaded,
        "capacity": p.capacity,
        "by_pipe": p.by_pipe,
        "reported_at": now,
        "last_seen": now,
    }
    ins = pg_insert(Agent).values(name=p.agent, switch_id=switch_id, **values)
    set_: dict[str, Any] = dict(values)
    if switch_id is not None:
        set_["switch_id"] = ins.excluded.switch_id
    agent = db.execute(
        ins.on_conflict_do_update(index_elements=[Agent.name], set_=set_).returning(Agent)
    ).scalar_one()
    sw = db.get(Switch, agent.switch_id) if agent.switch_id is not None else None
    answer = m.PollAnswer(
        agent_mode=agent.maintenance,  # type: ignore[arg-type]
        switch_mode=sw.maintenance if sw is not None else "active",  # type: ignore[arg-type]
        switch_cap=sw.offload_cap if sw is not None else None,
    )
    db.commit()
    return answer
