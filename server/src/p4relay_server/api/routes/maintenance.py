"""Maintenance and capacity: drain, out of service, the offload cap (operator
role, audited), the state and figures (read), the agents' poll (ingest)."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, HTTPException, Request, status
from fastapi.concurrency import run_in_threadpool

from p4relay_server.api.deps import AUTH_RESPONSES, DB, Ingester, IntId, Operator, Reader
from p4relay_server.models import Agent, Switch
from p4relay_server.schemas import maintenance as m
from p4relay_server.services import maintenance

router = APIRouter(tags=["maintenance"], responses=AUTH_RESPONSES)
_404: dict[int | str, dict[str, Any]] = {404: {"description": "not found"}}


@router.get("/maintenance", response_model=m.MaintenanceView)
def maintenance_view(db: DB, _: Reader) -> m.MaintenanceView:
    """Every switch's maintenance state, cap and capacity figures (offloaded
    calls, capacity, headroom, relay table occupancy, calls by pipe) with its
    agents' modes as asked and as reported."""
    return maintenance.view(db)


@router.put("/maintenance/switches/{switch_id}", response_model=m.SwitchMaintenance, responses=_404)
def set_switch(
    switch_id: IntId, body: m.SwitchMaintenanceSet, db: DB, who: Operator
) -> m.SwitchMaintenance:
    """Take a switch out of service (its agents evacuate its calls to RTPProxy
    and offload none) or back, and set its offload cap. Audited: a
    `maintenance_set` event names who did what."""
    sw = db.get(Switch, switch_id)
    if sw is None:
        raise HTTPException(status.HTTP_404_NOT_FOUND, "no such switch")
    maintenance.set_switch(db, sw, body, who.name)
    return maintenance.one_switch(db, sw)


@router.put("/maintenance/agents/{agent_id}", response_model=m.AgentMaintenance, responses=_404)
def set_agent(
    agent_id: IntId, body: m.AgentMaintenanceSet, db: DB, who: Operator
) -> m.AgentMaintenance:
    """Drain an agent (new calls stay on RTPProxy), evacuate it (every call
    back to RTPProxy) or set it active. Audited as `maintenance_set`."""
    a = db.get(Agent, agent_id)
    if a is None:
        raise HTTPException(status.HTTP_404_NOT_FOUND, "no such agent")
    maintenance.set_agent(db, a, body, who.name)
    return maintenance.one_agent(db, a)


@router.post("/maintenance/poll", response_model=m.PollAnswer)
async def poll(body: m.AgentPoll, request: Request, _: Ingester) -> m.PollAnswer:
    """rtpagent's poll (ingest token): its mode, offloaded calls and capacity
    in; the modes operators set for it and its switch, and the cap, out."""

    def work() -> m.PollAnswer:
        with request.app.state.sessionmaker() as db:
            return maintenance.poll(db, body)

    return await run_in_threadpool(work)
