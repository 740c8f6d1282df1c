"""Query, auth and admin API payloads (the console's view of the data)."""

from __future__ import annotations

import datetime as dt
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, StringConstraints

from p4relay_server.schemas.ingest import Direction, SessionState, StorableBody, Timestamp

Role = Literal["viewer", "operator", "admin"]
Scope = Literal["ingest", "read"]


def role_of(stored: str) -> Role:
    """A user's role as stored; anything unknown is the least: viewer."""
    return "admin" if stored == "admin" else "operator" if stored == "operator" else "viewer"


class _Out(BaseModel):
    model_config = ConfigDict(from_attributes=True)


# ------------------------------------------------------------------- auth
class LoginRequest(StorableBody):
    username: Annotated[str, StringConstraints(min_length=1, max_length=64)]
    password: Annotated[str, StringConstraints(min_length=1, max_length=1024)]


class LoginResponse(BaseModel):
    access_token: str
    token_type: Literal["bearer"] = "bearer"
    expires_at: dt.datetime
    role: Role


class Me(BaseModel):
    kind: Literal["user", "token"]
    id: int
    name: str
    role: Role | None = None
    scope: Scope | None = None


class UserCreate(StorableBody):
    username: Annotated[
        str, StringConstraints(min_length=1, max_length=64, pattern=r"^[A-Za-z0-9._@-]+$")
    ]
    password: Annotated[str, StringConstraints(min_length=10, max_length=1024)]
    role: Role = "viewer"


class UserUpdate(StorableBody):
    password: Annotated[str, StringConstraints(min_length=10, max_length=1024)] | None = None
    role: Role | None = None
    disabled: bool | None = None


class UserOut(_Out):
    id: int
    username: str
    role: Role
    disabled: bool
    created_at: dt.datetime


class TokenCreate(StorableBody):
    name: Annotated[str, StringConstraints(min_length=1, max_length=128)]
    scope: Scope
    expires_at: Timestamp | None = None


class TokenOut(_Out):
    id: int
    name: str
    prefix: str
    scope: Scope
    created_at: dt.datetime
    expires_at: dt.datetime | None
    revoked_at: dt.datetime | None
    last_used_at: dt.datetime | None


class TokenCreated(TokenOut):
    token: str = Field(description="the secret; shown only in this response")


# -------------------------------------------------------------- inventory
class PortOut(_Out):
    dev_port: int
    name: str | None
    speed_mbps: int | None
    up: bool | None


class SwitchOut(_Out):
    id: int
    name: str
    grpc_address: str | None
    device_id: int
    up: bool
    created_at: dt.datetime
    last_seen: dt.datetime | None
    relay_table_used: int | None = Field(
        description="relay table entries in use at the collector's last reading"
    )
    relay_table_capacity: int | None = Field(description="relay table size (entries)")
    ports: list[PortOut]


class SwitchCreate(StorableBody):
    name: Annotated[str, StringConstraints(min_length=1, max_length=128, strip_whitespace=True)]
    grpc_address: Annotated[str, StringConstraints(min_length=1, max_length=256)] = Field(
        description="host:port of the switch's BfRt gRPC server"
    )
    device_id: Annotated[int, Field(ge=0, le=65535)] = 0


class AgentOut(_Out):
    id: int
    name: str
    rtpproxy: str | None
    switch: str | None
    version: str | None
    created_at: dt.datetime
    last_seen: dt.datetime | None


# --------------------------------------------------------------- sessions
class SessionSummary(_Out):
    id: int
    session_key: str
    call_id: str
    from_tag: str
    to_tag: str | None
    state: SessionState
    offloaded: bool
    offload_reason: str | None
    codec: str | None
    switch: str | None
    agent: str | None
    caller: str | None = Field(
        description="caller's media endpoint (`addr:port`, `[v6]:port`): source of the first "
        "caller_to_callee leg",
    )
    callee: str | None = Field(description="callee's media endpoint: destination of that leg")
    started_at: dt.datetime
    answered_at: dt.datetime | None
    ended_at: dt.datetime | None
    packets: int | None = Field(
        description="packets relayed: running sum of quality samples (both directions) while "
        "active, the agent's totals once ended"
    )
    bytes: int | None
    lost: int | None = Field(description="packets lost, counted like `packets`")
    mos_avg: float | None
    mos_min: float | None
    jitter_ms_max: float | None
    one_way: Direction | None = Field(
        default=None,
        description="the direction with no media while the other flows (one_way_media), "
        "until it flows again",
    )


class SessionPage(BaseModel):
    items: list[SessionSummary]
    next_cursor: str | None = Field(
        description="pass as `cursor` for the next (older) page; null at the end"
    )


class EndpointOut(BaseModel):
    addr: str
    port: int


class LegOut(BaseModel):
    direction: Direction
    media_index: int
    switch_leg: int | None
    src: EndpointOut
    relay_in: EndpointOut
    relay_out: EndpointOut
    dst: EndpointOut
    installed: bool
    installed_at: dt.datetime | None
    removed_at: dt.datetime | None
    packets: int | None
    bytes: int | None


class QualityPoint(BaseModel):
    ts: dt.datetime
    packets: int
    lost: int
    loss_pct: float
    jitter_ms: float
    delay_ms: float | None
    mos: float | None
    r_factor: float | None


class QualitySeries(BaseModel):
    direction: Direction
    resolution_s: int
    points: list[QualityPoint]


class EventOut(_Out):
    id: int
    event_id: str
    type: str
    ts: dt.datetime
    severity: str
    session_id: int | None
    session_key: str | None
    switch: str | None
    agent: str | None
    message: str | None
    payload: dict[str, Any]


class EventPage(BaseModel):
    items: list[EventOut]
    next_cursor: str | None


class CongestionEpisode(BaseModel):
    """A switch queue congested from a `congestion_onset` event until the next
    `congestion_clear` of the same switch, port and queue."""

    switch: str | None
    dev_port: int | None
    queue: int
    started_at: dt.datetime
    ended_at: dt.datetime | None = Field(description="null while the episode is open")
    onset_event_id: int
    queue_delay_us: float | None = Field(description="queueing delay reported at the onset")


class PathHop(BaseModel):
    """One switch of an INT-traced path and the ports the packet took (null
    for the sink: the report does not carry its hop)."""

    switch: str
    ingress_port: int | None = None
    egress_port: int | None = None


class PathSegment(BaseModel):
    """Where the call's media went over one stretch of time. From INT path
    records (`source` "int") when the call's media was traced: the switches
    the sink reported, source to sink, until the next record of the flow.
    Otherwise from reroute events (`source` "reroute"): the path a `reroute`
    event of a watched destination holding one of the call's addresses moved
    it to (or from, before the first move)."""

    switch: str | None = Field(description="reroute: the switch that moved it; int: the sink")
    flow: str = Field(
        description="reroute: the watched destination (prefix) the call's media matched; "
        "int: the traced flow, `src -> dst`"
    )
    path: str = Field(
        description="reroute: the switch's next hop and port, as the reroute event names it; "
        "int: the hops, `switch (in>out)` joined by ' > ', the sink last"
    )
    since: dt.datetime
    until: dt.datetime | None = Field(description="null: still on it (or the call's end)")
    reroute_event_id: int | None = Field(description="the reroute that began it; null: primary")
    trigger: str | None = Field(
        description="reroute: the event's trigger; int: `path change` when the flow moved "
        "onto it, null for its first path"
    )
    source: Literal["reroute", "int"] = "reroute"
    hops: list[PathHop] = Field(
        default_factory=list, description="int: the switches the flow crossed, source to sink"
    )
    congested_hop: str | None = Field(
        default=None,
        description="reroute: where on the path the congestion that moved the call here was "
        "seen: `s3 port 2` (INT: the hop the sinks' reports named) or the moving switch's own "
        "port (local detection); null for the primary and for moves back",
    )


class IntPathOut(BaseModel):
    """An INT path record: a traced flow seen on `hops` from `ts` on."""

    id: int
    ts: dt.datetime
    src: EndpointOut
    dst: EndpointOut
    sink: str | None
    hops: list[PathHop]


class SessionDetail(SessionSummary):
    seq: int
    plc: bool
    legs: list[LegOut]
    quality: list[QualitySeries]
    events: list[EventOut]
    congestion: list[CongestionEpisode] = Field(
        description="congestion episodes of the call's switch while the call was up"
    )
    reroutes: list[EventOut] = Field(
        description="reroute events of watched destinations holding one of the call's media "
        "destinations while the call was up, oldest first",
    )
    path: list[PathSegment] = Field(
        description="the call's path over the call, oldest first: from INT path records "
        "when its media was traced, else per switch and watched destination from reroute "
        "events; empty when neither concerned it",
    )


class ActivityPoint(BaseModel):
    ts: dt.datetime
    active: int = Field(description="calls in setup or active at `ts`")
    offloaded: int = Field(description="of those, relayed by the switch")


class Activity(BaseModel):
    step_s: int
    points: list[ActivityPoint]


# -------------------------------------------------------------- telemetry
class QueuePoint(BaseModel):
    ts: dt.datetime
    depth_pkts: float | None
    depth_max_pkts: float | None
    depth_bytes: float | None
    queue_delay_us: float | None
    queue_delay_max_us: float | None
    utilisation: float | None
    drops: int
    ired_qavg_bytes: float | None = Field(
        default=None,
        description="iRED's queue average on the port, bytes (mean over the bucket); "
        "null where iRED is off",
    )


class QueueSeries(BaseModel):
    switch: str
    dev_port: int
    queue: int
    resolution_s: int
    points: list[QueuePoint]


class Health(BaseModel):
    status: Literal["ok", "unavailable"]
    detail: str | None = None
