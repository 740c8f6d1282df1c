"""Ingest API payloads: what rtpagent and the switch collector send.

One endpoint, `POST /api/v1/ingest`, takes an `IngestBatch`. Every part of a
batch is optional, so an agent sends sessions, quality samples and events, and
the collector sends its switch, queue samples and events, with the same schema.

Idempotency, at two levels:
- the batch's `idempotency_key`: a replayed batch returns the first answer
  and changes nothing;
- each item's natural key: sessions by `(session_key, seq)` (older or equal
  `seq` is ignored, so updates apply in order per session), quality samples by
  `(session_key, direction, ts)`, queue samples by `(switch, dev_port, queue,
  ts)`, events by `event_id`, INT path records by `(flow, ts)`.

Limits (configurable; defaults in `Settings`): a batch with too many items or a
body over `max_body_bytes` is refused with 413 and nothing of it is stored.
"""

from __future__ import annotations

import datetime as dt
import ipaddress
import math
from typing import Annotated, Any, Literal, get_args

from pydantic import (
    AfterValidator,
    AwareDatetime,
    BaseModel,
    ConfigDict,
    Field,
    Strict,
    StrictBool,
    StringConstraints,
    model_validator,
)


def _to_utc(t: dt.datetime) -> dt.datetime:
    # Stored as timestamptz: normalise to UTC (PostgreSQL refuses offsets over
    # 15:59) and keep to years a telemetry timestamp can have.
    try:
        utc = t.astimezone(dt.UTC)
    except OverflowError as e:
        raise ValueError("timestamp out of range") from e
    if not 1970 <= utc.year <= 9999:
        raise ValueError("timestamp must be between 1970 and 9999 (UTC)")
    return utc


Timestamp = Annotated[AwareDatetime, AfterValidator(_to_utc)]
Name = Annotated[str, StringConstraints(min_length=1, max_length=128, strip_whitespace=True)]
Text = Annotated[str, StringConstraints(max_length=1024)]
SessionKey = Annotated[str, StringConstraints(min_length=1, max_length=512)]
IdempotencyKey = Annotated[
    str, StringConstraints(min_length=8, max_length=128, pattern=r"^[A-Za-z0-9._:\-]+$")
]
# Numbers are strict: `"seq": "1"`, `1.0` for an integer or `"yes"` for a boolean
# is a producer bug and is refused (422), not coerced.
Bool = StrictBool


def _unscoped(a: ipaddress.IPv4Address | ipaddress.IPv6Address) -> Any:
    # A zone (`fe80::1%eth0`) names an interface of the sender's host: it means
    # nothing here and PostgreSQL's inet has no place for it.
    if isinstance(a, ipaddress.IPv6Address) and a.scope_id is not None:
        raise ValueError("an IPv6 zone (%...) cannot be stored: give the address alone")
    return a


IPAddress = Annotated[ipaddress.IPv4Address | ipaddress.IPv6Address, AfterValidator(_unscoped)]
Port = Annotated[int, Strict(), Field(ge=0, le=65535)]

# Counters are bounded by what the switch can count, so no stored value, and
# no running sum of them, can overflow its column:
# - per interval (a quality sample): the Egress quality registers are 32 bits;
#   bytes at most that many frames of the largest (9216-byte) frame;
MAX_INTERVAL_PACKETS = 2**32 - 1
MAX_INTERVAL_BYTES = MAX_INTERVAL_PACKETS * 9216
# - per session, leg or queue interval (64-bit switch counters): 2^48 packets
#   (10 years at 1 Mpps) and 2^56 bytes; sums of these over a session's samples
#   saturate at the bigint maximum instead of failing.
MAX_TOTAL_PACKETS = 2**48
MAX_TOTAL_BYTES = 2**56
IntervalPackets = Annotated[int, Strict(), Field(ge=0, le=MAX_INTERVAL_PACKETS)]
IntervalBytes = Annotated[int, Strict(), Field(ge=0, le=MAX_INTERVAL_BYTES)]
TotalPackets = Annotated[int, Strict(), Field(ge=0, le=MAX_TOTAL_PACKETS)]
TotalBytes = Annotated[int, Strict(), Field(ge=0, le=MAX_TOTAL_BYTES)]
Seq = Annotated[int, Strict(), Field(ge=0, le=2**62)]

SessionState = Literal["setup", "active", "ended", "failed"]
Direction = Literal["caller_to_callee", "callee_to_caller"]

EventType = Literal[
    "offload_installed",
    "offload_removed",
    "offload_failed",
    "fallback",
    "reroute",
    "ired_drop",
    "congestion_onset",
    "congestion_clear",
    "agent_up",
    "agent_down",
    "switch_up",
    "switch_down",
    "learn_refused",
    "one_way_media",
    "one_way_media_cleared",
    "maintenance",
    "evacuated",
    "maintenance_set",
]
# The database's check constraint on event types (models.py) reads them here.
EVENT_TYPES: tuple[str, ...] = get_args(EventType)
Severity = Literal["info", "warning", "error"]


def _check_storable(value: Any, path: str = "") -> None:
    """PostgreSQL text and jsonb cannot hold NUL characters or non-finite numbers."""
    if isinstance(value, str):
        if "\x00" in value:
            raise ValueError(f"{path or 'value'}: NUL characters are not allowed")
    elif isinstance(value, float):
        if not math.isfinite(value):
            raise ValueError(f"{path or 'value'}: numbers must be finite")
    elif isinstance(value, dict):
        for k, v in value.items():
            _check_storable(k, f"{path}.{k}" if path else str(k))
            _check_storable(v, f"{path}.{k}" if path else str(k))
    elif isinstance(value, list | tuple):
        for i, v in enumerate(value):
            _check_storable(v, f"{path}[{i}]")


class _Strict(BaseModel):
    # Unknown fields are refused: a typo in a producer must show up as a 422,
    # not as silently missing data.
    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)


class StorableBody(_Strict):
    """A request body checked once, as a whole, for what PostgreSQL refuses."""

    @model_validator(mode="before")
    @classmethod
    def _storable(cls, data: Any) -> Any:
        _check_storable(data)
        return data


class Endpoint(_Strict):
    """An IPv4/IPv6 address and UDP port."""

    addr: IPAddress
    port: Port


class AgentInfo(_Strict):
    """Who is sending; upserted by name, `last_seen` set to the batch time."""

    name: Name
    rtpproxy: Text | None = Field(
        default=None, description="RTPProxy control socket, e.g. udp:127.0.0.1:22223"
    )
    switch: Name | None = Field(default=None, description="name of the switch this agent programs")
    version: Annotated[str, StringConstraints(max_length=64)] | None = None


class PortInfo(_Strict):
    dev_port: Annotated[int, Strict(), Field(ge=0, le=511)]
    name: Annotated[str, StringConstraints(max_length=64)] | None = None
    speed_mbps: Annotated[int, Strict(), Field(ge=0, le=10_000_000)] | None = None
    up: Bool | None = None


class SwitchInfo(_Strict):
    """A switch as the collector sees it; upserted by name."""

    name: Name
    grpc_address: Text | None = None
    device_id: Annotated[int, Strict(), Field(ge=0, le=2**31 - 1)] = 0
    up: Bool = True
    ports: list[PortInfo] = Field(default_factory=list)
    relay_table_used: Annotated[int, Strict(), Field(ge=0, le=2**40)] | None = Field(
        default=None, description="entries in the relay table (absent: keep the last reading)"
    )
    relay_table_capacity: Annotated[int, Strict(), Field(ge=0, le=2**40)] | None = Field(
        default=None, description="the relay table's size"
    )


class LegIn(_Strict):
    """One direction of one media stream and the rewrite the switch applies.

    A packet from `src` to `relay_in` is rewritten to come from `relay_out`
    and go to `dst` (RTCP uses both ports + 1).
    """

    direction: Direction
    media_index: Annotated[int, Strict(), Field(ge=0, le=63)] = 0
    switch_leg: Annotated[int, Strict(), Field(ge=0, le=2**31 - 1)] | None = Field(
        default=None, description="leg_rewrite index in the switch, when offloaded"
    )
    src: Endpoint
    relay_in: Endpoint
    relay_out: Endpoint
    dst: Endpoint
    installed: Bool = False
    installed_at: Timestamp | None = None
    removed_at: Timestamp | None = None
    packets: TotalPackets | None = None
    bytes: TotalBytes | None = None


class SessionUpsert(_Strict):
    """The full current state of a session; applied only if `seq` is newer."""

    session_key: SessionKey = Field(
        description="producer's stable id of the session, e.g. '<call-id>;<from-tag>'"
    )
    seq: Seq = Field(description="per-session update counter; increases with every change")
    call_id: Annotated[str, StringConstraints(min_length=1, max_length=512)]
    from_tag: Annotated[str, StringConstraints(max_length=256)] = ""
    to_tag: Annotated[str, StringConstraints(max_length=256)] | None = None
    state: SessionState
    offloaded: Bool
    offload_reason: Text | None = Field(
        default=None,
        description="why the call was left on RTPProxy or fell back (when not offloaded)",
    )
    codec: Annotated[str, StringConstraints(max_length=32)] | None = Field(
        default=None, description="e.g. PCMU, PCMA, G729; drives the MOS codec impairment"
    )
    plc: Bool = Field(default=True, description="whether receivers use packet loss concealment")
    switch: Name | None = None
    started_at: Timestamp
    answered_at: Timestamp | None = None
    ended_at: Timestamp | None = None
    legs: list[LegIn] = Field(default_factory=list)
    packets: TotalPackets | None = Field(default=None, description="final packets, both directions")
    bytes: TotalBytes | None = None
    lost: TotalPackets | None = None


class QualitySampleIn(_Strict):
    """Quality of one session direction over one interval ending at `ts`.

    Counters are for the interval (not cumulative). The server computes MOS
    (ITU-T G.107 E-model) from codec, loss, burst ratio, jitter and delay.
    """

    session_key: SessionKey
    direction: Direction
    ts: Timestamp
    interval_ms: Annotated[int, Strict(), Field(ge=1, le=3_600_000)] = 1000
    packets: IntervalPackets
    bytes: IntervalBytes = 0
    lost: IntervalPackets = 0
    reordered: IntervalPackets = 0
    jitter_ms: Annotated[float, Strict(), Field(ge=0, le=60_000)] = 0.0
    delay_ms: Annotated[float, Strict(), Field(ge=0, le=60_000)] | None = Field(
        default=None, description="one-way delay, when known"
    )
    burst_ratio: Annotated[float, Strict(), Field(ge=1, le=1000)] | None = Field(
        default=None, description="G.107 BurstR; 1 = random loss (the default)"
    )
    codec: Annotated[str, StringConstraints(max_length=32)] | None = Field(
        default=None, description="overrides the session's codec for this sample"
    )


class QueueSampleIn(_Strict):
    """One egress queue of one switch port over the interval ending at `ts`."""

    switch: Name
    dev_port: Annotated[int, Strict(), Field(ge=0, le=511)]
    queue: Annotated[int, Strict(), Field(ge=0, le=127)] = 0
    ts: Timestamp
    depth_pkts: Annotated[int, Strict(), Field(ge=0, le=2**32 - 1)] | None = None
    depth_bytes: Annotated[int, Strict(), Field(ge=0, le=2**40)] | None = None
    queue_delay_us: Annotated[float, Strict(), Field(ge=0, le=1e9)] | None = None
    utilisation: Annotated[float, Strict(), Field(ge=0, le=1)] | None = Field(
        default=None, description="egress utilisation of the port, 0..1"
    )
    drops: TotalPackets = 0
    tx_packets: TotalPackets | None = None
    tx_bytes: TotalBytes | None = None
    ired_qavg_bytes: Annotated[int, Strict(), Field(ge=0, le=2**40)] | None = Field(
        default=None,
        description="iRED's queue average on the port (its EWMA of the queue depth), bytes; "
        "absent when iRED is off on the port",
    )


class PathHopIn(_Strict):
    """One switch on a traced flow's path, with the ports the packet took
    through it (none for the sink, whose hop the report does not carry)."""

    switch: Name
    ingress_port: Port | None = None
    egress_port: Port | None = None


class PathRecordIn(_Strict):
    """A traced flow's path as an INT sink reported it, sent when the path
    changes (and on its first report): the switches from the INT source to
    the sink, in order, the sink last. Stored by (flow, ts), duplicates ignored."""

    ts: Timestamp
    src: Endpoint = Field(description="the flow's source as the sink saw it")
    dst: Endpoint
    hops: list[PathHopIn] = Field(min_length=1, max_length=16)


class EventIn(_Strict):
    """A typed event with a JSON payload.

    Payload keys by type (extra keys are kept): reroute needs `flow`,
    `from_path`, `to_path`, `trigger`; ired_drop `dev_port`, `drops`;
    congestion_onset/clear `dev_port`; offload_failed/fallback `reason`;
    learn_refused (media from a source the learning policy did not accept;
    security) `source` ("addr:port"), optionally `expected`, `policy`,
    `relay_port`, `reason`; one_way_media (one direction of a call silent
    while the other flows) and one_way_media_cleared `direction` (the silent
    one, caller_to_callee or callee_to_caller), optionally `silent_s`;
    maintenance (an agent's mode changed) `mode` (active, draining,
    evacuated), optionally `previous`, `by`, `offloaded`; evacuated (every
    offloaded call back on RTPProxy) `calls`, `seconds`; maintenance_set (an
    operator's action, the server's audit record) `target`, `state`, `by`.
    """

    event_id: Annotated[str, StringConstraints(min_length=8, max_length=128)] = Field(
        description="producer-chosen unique id (a UUID); replays are ignored"
    )
    type: EventType
    ts: Timestamp
    severity: Severity = "info"
    session_key: SessionKey | None = None
    switch: Name | None = None
    agent: Name | None = None
    message: Text | None = None
    payload: dict[str, Any] = Field(default_factory=dict)

    @model_validator(mode="after")
    def _payload_keys(self) -> EventIn:
        missing = [k for k in REQUIRED_PAYLOAD_KEYS.get(self.type, ()) if k not in self.payload]
        if missing:
            raise ValueError(f"{self.type} event payload needs keys: {', '.join(missing)}")
        return self


# Payload keys each event type must carry (checked on ingest, 422 otherwise).
REQUIRED_PAYLOAD_KEYS: dict[str, tuple[str, ...]] = {
    "reroute": ("flow", "from_path", "to_path", "trigger"),
    "ired_drop": ("dev_port", "drops"),
    "congestion_onset": ("dev_port",),
    "congestion_clear": ("dev_port",),
    "offload_failed": ("reason",),
    "fallback": ("reason",),
    "learn_refused": ("source",),
    "one_way_media": ("direction",),
    "one_way_media_cleared": ("direction",),
    "maintenance": ("mode",),
    "evacuated": ("calls", "seconds"),
    "maintenance_set": ("target", "state", "by"),
}


class IngestBatch(StorableBody):
    """One batch from an agent or the collector. Items apply in list order."""

    idempotency_key: IdempotencyKey = Field(
        description="unique per batch (a UUID); a replay returns the first result"
    )
    agent: AgentInfo | None = None
    switch: SwitchInfo | None = None
    sessions: list[SessionUpsert] = Field(default_factory=list)
    samples: list[QualitySampleIn] = Field(default_factory=list)
    queue_samples: list[QueueSampleIn] = Field(default_factory=list)
    events: list[EventIn] = Field(default_factory=list)
    paths: list[PathRecordIn] = Field(
        default_factory=list, description="INT path records of traced flows (the collector)"
    )


class IngestResult(BaseModel):
    """What a batch did. `replayed` is true when the key was seen before."""

    idempotency_key: str
    replayed: bool = False
    sessions_applied: int = 0
    sessions_stale: int = Field(
        default=0, description="updates ignored because a newer seq is stored"
    )
    samples_stored: int = 0
    samples_duplicate: int = 0
    samples_unlinked: int = Field(
        default=0,
        description="samples for sessions not known yet: kept, linked when the session arrives",
    )
    queue_samples_stored: int = 0
    queue_samples_duplicate: int = 0
    events_stored: int = 0
    events_duplicate: int = 0
    paths_stored: int = 0
    paths_duplicate: int = 0
