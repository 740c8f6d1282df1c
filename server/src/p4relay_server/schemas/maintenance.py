"""Maintenance and capacity: what operators set and see, what agents poll."""

from __future__ import annotations

import datetime as dt
from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, StringConstraints

from p4relay_server.schemas.ingest import Name, StorableBody

SwitchState = Literal["active", "out_of_service"]
AgentMode = Literal["active", "draining", "evacuated"]
Count = Annotated[int, Field(ge=0, le=2**31 - 1)]
PipeName = Annotated[str, StringConstraints(min_length=1, max_length=16, pattern=r"^[a-z0-9]+$")]


class SwitchMaintenanceSet(StorableBody):
    """What an operator sets on a switch; absent fields stay as they are."""

    state: SwitchState | None = Field(
        default=None,
        description="out_of_service: every call on it moved back to RTPProxy, none offloaded "
        "until active again",
    )
    offload_cap: Count | None = Field(
        default=None, description="calls each agent of the switch may offload at most"
    )
    clear_cap: bool = Field(default=False, description="remove the cap (offload_cap ignored)")


class AgentMaintenanceSet(StorableBody):
    state: AgentMode = Field(
        description="draining: new calls stay on RTPProxy, offloaded ones stay; evacuated: "
        "every call moved back to RTPProxy, none offloaded; active: offloading"
    )


class AgentMaintenance(BaseModel):
    model_config = ConfigDict(from_attributes=True)

    id: int
    name: str
    switch: str | None
    maintenance: AgentMode = Field(description="the mode an operator asked for")
    maintenance_changed_at: dt.datetime | None
    maintenance_changed_by: str | None
    reported_mode: AgentMode | None = Field(
        description="the agent's mode at its last report (the most restrictive of its own, "
        "the operator's and its switch's)"
    )
    offloaded: int | None
    capacity: int | None
    by_pipe: dict[str, int] | None
    reported_at: dt.datetime | None
    stale: bool = Field(description="no report for longer than three poll periods")


class SwitchMaintenance(BaseModel):
    id: int
    name: str
    maintenance: SwitchState
    maintenance_changed_at: dt.datetime | None
    maintenance_changed_by: str | None
    offload_cap: int | None
    offloaded: int = Field(description="calls its agents have offloaded (fresh reports)")
    capacity: int | None = Field(description="calls its agents may offload (fresh reports)")
    headroom: int | None
    utilisation: float | None = Field(description="offloaded / capacity")
    relay_table_used: int | None
    relay_table_capacity: int | None
    by_pipe: dict[str, int] = Field(description="offloaded calls by the pipe of their ingress port")
    evacuated: bool = Field(
        description="out of service and every fresh agent of it reports no call offloaded"
    )
    agents: list[AgentMaintenance]


class MaintenanceView(BaseModel):
    switches: list[SwitchMaintenance]
    agents: list[AgentMaintenance] = Field(description="agents with no switch")


class AgentPoll(StorableBody):
    """An agent's state, posted every poll period."""

    agent: Name
    switch: Name | None = None
    mode: AgentMode
    offloaded: Count
    capacity: Count
    by_pipe: dict[PipeName, Count] = Field(default_factory=dict, max_length=64)


class PollAnswer(BaseModel):
    agent_mode: AgentMode
    switch_mode: SwitchState
    switch_cap: int | None
