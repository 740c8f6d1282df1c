"""The server's ingest API as the collector speaks it (`POST /api/v1/ingest`,
`GET /api/v1/ingest/switches`): the part of the server's published OpenAPI
schema (server/openapi.json) that a switch collector sends and reads. The
collector's tests check these models against that schema."""

from __future__ import annotations

import datetime as dt
from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field

Severity = Literal["info", "warning", "error"]
CollectorEventType = Literal[
    "switch_up",
    "switch_down",
    "congestion_onset",
    "congestion_clear",
    "reroute",
    "ired_drop",
]
PayloadValue = str | int | float | bool | None


class _Wire(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class PortInfo(_Wire):
    dev_port: Annotated[int, Field(ge=0, le=511)]
    name: Annotated[str, Field(max_length=64)] | None = None
    speed_mbps: Annotated[int, Field(ge=0)] | None = None
    up: bool | None = None


class SwitchInfo(_Wire):
    name: str
    grpc_address: str | None = None
    device_id: int = 0
    up: bool = True
    ports: list[PortInfo] = Field(default_factory=list)
    relay_table_used: int | None = None
    relay_table_capacity: int | None = None


class QueueSample(_Wire):
    """One port's egress queue over the poll interval ending at `ts`."""

    switch: str
    dev_port: Annotated[int, Field(ge=0, le=511)]
    queue: Annotated[int, Field(ge=0, le=127)] = 0
    ts: dt.datetime
    depth_bytes: Annotated[int, Field(ge=0)] | None = None
    queue_delay_us: Annotated[float, Field(ge=0)] | None = None
    utilisation: Annotated[float, Field(ge=0, le=1)] | None = None
    drops: Annotated[int, Field(ge=0)] = 0
    tx_packets: Annotated[int, Field(ge=0)] | None = None
    tx_bytes: Annotated[int, Field(ge=0)] | None = None
    ired_qavg_bytes: Annotated[int, Field(ge=0)] | None = None  # None: iRED off on the port


class Event(_Wire):
    event_id: str
    type: CollectorEventType
    ts: dt.datetime
    severity: Severity = "info"
    switch: str | None = None
    message: str | None = None
    payload: dict[str, PayloadValue] = Field(default_factory=dict)


class Endpoint(_Wire):
    addr: str
    port: Annotated[int, Field(ge=0, le=65535)]


class PathHop(_Wire):
    """A switch on a traced flow's path and the ports the packet took (none
    for the sink)."""

    switch: str
    ingress_port: Annotated[int, Field(ge=0, le=65535)] | None = None
    egress_port: Annotated[int, Field(ge=0, le=65535)] | None = None


class PathRecord(_Wire):
    """A traced flow's path from `ts` on: INT source to sink, the sink last."""

    ts: dt.datetime
    src: Endpoint
    dst: Endpoint
    hops: list[PathHop] = Field(min_length=1, max_length=16)


class IngestBatch(_Wire):
    idempotency_key: Annotated[str, Field(min_length=8, max_length=128)]
    switch: SwitchInfo | None = None
    queue_samples: list[QueueSample] = Field(default_factory=list)
    events: list[Event] = Field(default_factory=list)
    paths: list[PathRecord] = Field(default_factory=list)


class RegisteredSwitch(BaseModel):
    """A switch registered for polling, as `GET /api/v1/ingest/switches` lists it."""

    model_config = ConfigDict(extra="ignore", frozen=True)

    name: str
    grpc_address: str
    device_id: Annotated[int, Field(ge=0)] = 0
