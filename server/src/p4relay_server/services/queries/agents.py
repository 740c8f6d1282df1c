"""The rtpagents that have reported, with their switch."""

from __future__ import annotations

from sqlalchemy import select
from sqlalchemy.orm import Session, aliased

from p4relay_server.models import (
    Agent,
    Switch,
)
from p4relay_server.schemas import api


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
