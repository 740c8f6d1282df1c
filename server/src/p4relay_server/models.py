"""SQLAlchemy 2 ORM models: the PostgreSQL schema (migrations/ must agree;
tests/test_migrations.py checks it)."""

from __future__ import annotations

import datetime as dt
import ipaddress
from typing import Any

from sqlalchemy import (
    BigInteger,
    Boolean,
    CheckConstraint,
    DateTime,
    Float,
    ForeignKey,
    Identity,
    Index,
    Integer,
    MetaData,
    SmallInteger,
    String,
    Text,
    UniqueConstraint,
    func,
    text,
)
from sqlalchemy.dialects.postgresql import INET, JSONB
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column, relationship

from p4relay_server.schemas.ingest import EVENT_TYPES

NAMING = {
    "ix": "ix_%(column_0_label)s",
    "uq": "uq_%(table_name)s_%(column_0_name)s",
    "ck": "ck_%(table_name)s_%(constraint_name)s",
    "fk": "fk_%(table_name)s_%(column_0_name)s_%(referred_table_name)s",
    "pk": "pk_%(table_name)s",
}

TS = DateTime(timezone=True)
IPAddr = ipaddress.IPv4Address | ipaddress.IPv6Address


def _in(column: str, values: tuple[str, ...]) -> str:
    return f"{column} IN ({', '.join(repr(v) for v in values)})"


DIRECTIONS = ("caller_to_callee", "callee_to_caller")
SESSION_STATES = ("setup", "active", "ended", "failed")
# operator: a viewer who may also drain and take switches and agents out of service.
ROLES = ("viewer", "operator", "admin")
SWITCH_MAINTENANCE = ("active", "out_of_service")
AGENT_MAINTENANCE = ("active", "draining", "evacuated")
SCOPES = ("ingest", "read")


class Base(DeclarativeBase):
    metadata = MetaData(naming_convention=NAMING)


class Switch(Base):
    __tablename__ = "switches"
    __table_args__ = (
        CheckConstraint(_in("maintenance", SWITCH_MAINTENANCE), name="maintenance"),
        CheckConstraint("offload_cap IS NULL OR offload_cap >= 0", name="offload_cap"),
    )
    id: Mapped[int] = mapped_column(Integer, Identity(), primary_key=True)
    name: Mapped[str] = mapped_column(String(128), unique=True)
    grpc_address: Mapped[str | None] = mapped_column(Text)
    device_id: Mapped[int] = mapped_column(Integer, server_default="0")
    up: Mapped[bool] = mapped_column(Boolean, server_default=text("true"))
    created_at: Mapped[dt.datetime] = mapped_column(TS, server_default=func.now())
    last_seen: Mapped[dt.datetime | None] = mapped_column(TS)
    # Relay (5-tuple) table occupancy as the collector last read it.
    relay_table_used: Mapped[int | None] = mapped_column(BigInteger)
    relay_table_capacity: Mapped[int | None] = mapped_column(BigInteger)
    # An operator's: out_of_service evacuates every agent's calls from the
    # switch and offloads none until it is active again; the cap bounds the
    # calls offloaded to it (each agent's own cap still holds).
    maintenance: Mapped[str] = mapped_column(String(16), server_default="active")
    offload_cap: Mapped[int | None] = mapped_column(Integer)
    maintenance_changed_at: Mapped[dt.datetime | None] = mapped_column(TS)
    maintenance_changed_by: Mapped[str | None] = mapped_column(String(64))
    ports: Mapped[list[SwitchPort]] = relationship(
        back_populates="switch", order_by="SwitchPort.dev_port", cascade="all, delete-orphan"
    )


class SwitchPort(Base):
    __tablename__ = "switch_ports"
    __table_args__ = (UniqueConstraint("switch_id", "dev_port"),)
    id: Mapped[int] = mapped_column(Integer, Identity(), primary_key=True)
    switch_id: Mapped[int] = mapped_column(ForeignKey("switches.id", ondelete="CASCADE"))
    dev_port: Mapped[int] = mapped_column(Integer)
    name: Mapped[str | None] = mapped_column(String(64))
    speed_mbps: Mapped[int | None] = mapped_column(BigInteger)
    up: Mapped[bool | None] = mapped_column(Boolean)
    switch: Mapped[Switch] = relationship(back_populates="ports")


class Agent(Base):
    __tablename__ = "agents"
    __table_args__ = (
        CheckConstraint(_in("maintenance", AGENT_MAINTENANCE), name="maintenance"),
        CheckConstraint(
            f"reported_mode IS NULL OR {_in('reported_mode', AGENT_MAINTENANCE)}",
            name="reported_mode",
        ),
    )
    id: Mapped[int] = mapped_column(Integer, Identity(), primary_key=True)
    name: Mapped[str] = mapped_column(String(128), unique=True)
    rtpproxy: Mapped[str | None] = mapped_column(Text)
    switch_id: Mapped[int | None] = mapped_column(ForeignKey("switches.id", ondelete="SET NULL"))
    version: Mapped[str | None] = mapped_column(String(64))
    created_at: Mapped[dt.datetime] = mapped_column(TS, server_default=func.now())
    last_seen: Mapped[dt.datetime | None] = mapped_column(TS)
    # The mode an operator asked for, and what the agent last reported (its
    # mode is the most restrictive of this, its switch's and its own local one).
    maintenance: Mapped[str] = mapped_column(String(16), server_default="active")
    maintenance_changed_at: Mapped[dt.datetime | None] = mapped_column(TS)
    maintenance_changed_by: Mapped[str | None] = mapped_column(String(64))
    reported_mode: Mapped[str | None] = mapped_column(String(16))
    offloaded: Mapped[int | None] = mapped_column(Integer)
    capacity: Mapped[int | None] = mapped_column(Integer)
    by_pipe: Mapped[dict[str, int] | None] = mapped_column(JSONB)
    reported_at: Mapped[dt.datetime | None] = mapped_column(TS)


class CallSession(Base):
    """One call's media session (the audit record)."""

    __tablename__ = "sessions"
    __table_args__ = (
        CheckConstraint(_in("state", SESSION_STATES), name="state"),
        CheckConstraint(_in("one_way", DIRECTIONS), name="one_way"),
        Index("ix_sessions_started_at_id", "started_at", "id"),
        Index("ix_sessions_state_started_at", "state", "started_at", "id"),
        Index("ix_sessions_mos_avg", "mos_avg"),
    )
    id: Mapped[int] = mapped_column(BigInteger, Identity(), primary_key=True)
    session_key: Mapped[str] = mapped_column(Text, unique=True)
    seq: Mapped[int] = mapped_column(BigInteger)
    call_id: Mapped[str] = mapped_column(Text, index=True)
    from_tag: Mapped[str] = mapped_column(Text)
    to_tag: Mapped[str | None] = mapped_column(Text)
    state: Mapped[str] = mapped_column(String(16))
    offloaded: Mapped[bool] = mapped_column(Boolean)
    offload_reason: Mapped[str | None] = mapped_column(Text)
    codec: Mapped[str | None] = mapped_column(String(32))
    plc: Mapped[bool] = mapped_column(Boolean, server_default=text("true"))
    switch_id: Mapped[int | None] = mapped_column(
        ForeignKey("switches.id", ondelete="SET NULL"), index=True
    )
    agent_id: Mapped[int | None] = mapped_column(ForeignKey("agents.id", ondelete="SET NULL"))
    started_at: Mapped[dt.datetime] = mapped_column(TS)
    answered_at: Mapped[dt.datetime | None] = mapped_column(TS)
    ended_at: Mapped[dt.datetime | None] = mapped_column(TS)
    packets: Mapped[int | None] = mapped_column(BigInteger)
    bytes: Mapped[int | None] = mapped_column(BigInteger)
    lost: Mapped[int | None] = mapped_column(BigInteger)
    # Quality summary over all samples, kept up to date on ingest.
    mos_avg: Mapped[float | None] = mapped_column(Float)
    mos_min: Mapped[float | None] = mapped_column(Float)
    mos_samples: Mapped[int] = mapped_column(BigInteger, server_default="0")
    jitter_ms_max: Mapped[float | None] = mapped_column(Float)
    # The direction whose media stopped while the other flows (the agent's
    # one_way_media event), until it flows again (one_way_media_cleared).
    one_way: Mapped[str | None] = mapped_column(String(16))
    updated_at: Mapped[dt.datetime] = mapped_column(TS, server_default=func.now())
    legs: Mapped[list[SessionLeg]] = relationship(
        back_populates="session",
        order_by="(SessionLeg.media_index, SessionLeg.direction)",
        cascade="all, delete-orphan",
        passive_deletes=True,
    )


class SessionLeg(Base):
    """One direction of one media stream and its rewrite 5-tuple."""

    __tablename__ = "session_legs"
    __table_args__ = (
        UniqueConstraint("session_id", "direction", "media_index"),
        CheckConstraint(_in("direction", DIRECTIONS), name="direction"),
        Index("ix_session_legs_src_addr", "src_addr"),
        Index("ix_session_legs_dst_addr", "dst_addr"),
        Index("ix_session_legs_relay_in_addr", "relay_in_addr"),
    )
    id: Mapped[int] = mapped_column(BigInteger, Identity(), primary_key=True)
    session_id: Mapped[int] = mapped_column(ForeignKey("sessions.id", ondelete="CASCADE"))
    direction: Mapped[str] = mapped_column(String(16))
    media_index: Mapped[int] = mapped_column(SmallInteger)
    switch_leg: Mapped[int | None] = mapped_column(Integer)
    src_addr: Mapped[IPAddr] = mapped_column(INET)
    src_port: Mapped[int] = mapped_column(Integer)
    relay_in_addr: Mapped[IPAddr] = mapped_column(INET)
    relay_in_port: Mapped[int] = mapped_column(Integer)
    relay_out_addr: Mapped[IPAddr] = mapped_column(INET)
    relay_out_port: Mapped[int] = mapped_column(Integer)
    dst_addr: Mapped[IPAddr] = mapped_column(INET)
    dst_port: Mapped[int] = mapped_column(Integer)
    installed: Mapped[bool] = mapped_column(Boolean)
    installed_at: Mapped[dt.datetime | None] = mapped_column(TS)
    removed_at: Mapped[dt.datetime | None] = mapped_column(TS)
    packets: Mapped[int | None] = mapped_column(BigInteger)
    bytes: Mapped[int | None] = mapped_column(BigInteger)
    session: Mapped[CallSession] = relationship(back_populates="legs")


class QualitySample(Base):
    """Quality of one session direction over an interval; `resolution_s` 0 is
    raw, otherwise a downsampled bucket of that many seconds."""

    __tablename__ = "quality_samples"
    __table_args__ = (
        UniqueConstraint("session_key", "direction", "resolution_s", "ts"),
        CheckConstraint(_in("direction", DIRECTIONS), name="direction"),
        Index("ix_quality_samples_session_id_ts", "session_id", "ts"),
        Index("ix_quality_samples_ts", "ts"),
        Index(
            "ix_quality_samples_unlinked",
            "session_key",
            postgresql_where=text("session_id IS NULL"),
        ),
    )
    id: Mapped[int] = mapped_column(BigInteger, Identity(), primary_key=True)
    session_id: Mapped[int | None] = mapped_column(ForeignKey("sessions.id", ondelete="CASCADE"))
    session_key: Mapped[str] = mapped_column(Text)
    direction: Mapped[str] = mapped_column(String(16))
    ts: Mapped[dt.datetime] = mapped_column(TS)
    resolution_s: Mapped[int] = mapped_column(Integer, server_default="0")
    interval_ms: Mapped[int] = mapped_column(Integer)
    packets: Mapped[int] = mapped_column(BigInteger)
    bytes: Mapped[int] = mapped_column(BigInteger)
    lost: Mapped[int] = mapped_column(BigInteger)
    reordered: Mapped[int] = mapped_column(BigInteger)
    jitter_ms: Mapped[float] = mapped_column(Float)
    delay_ms: Mapped[float | None] = mapped_column(Float)
    burst_ratio: Mapped[float | None] = mapped_column(Float)
    codec: Mapped[str | None] = mapped_column(String(32))
    r_factor: Mapped[float | None] = mapped_column(Float)
    mos: Mapped[float | None] = mapped_column(Float)


class QueueSample(Base):
    """One egress queue of a switch port over an interval (resolution as above)."""

    __tablename__ = "queue_samples"
    __table_args__ = (
        UniqueConstraint("switch_id", "dev_port", "queue", "resolution_s", "ts"),
        Index("ix_queue_samples_ts", "ts"),
    )
    id: Mapped[int] = mapped_column(BigInteger, Identity(), primary_key=True)
    switch_id: Mapped[int] = mapped_column(ForeignKey("switches.id", ondelete="CASCADE"))
    dev_port: Mapped[int] = mapped_column(Integer)
    queue: Mapped[int] = mapped_column(SmallInteger)
    ts: Mapped[dt.datetime] = mapped_column(TS)
    resolution_s: Mapped[int] = mapped_column(Integer, server_default="0")
    depth_pkts: Mapped[float | None] = mapped_column(Float)
    depth_bytes: Mapped[float | None] = mapped_column(Float)
    depth_max_pkts: Mapped[float | None] = mapped_column(Float)
    queue_delay_us: Mapped[float | None] = mapped_column(Float)
    queue_delay_max_us: Mapped[float | None] = mapped_column(Float)
    utilisation: Mapped[float | None] = mapped_column(Float)
    drops: Mapped[int] = mapped_column(BigInteger)
    tx_packets: Mapped[int | None] = mapped_column(BigInteger)
    tx_bytes: Mapped[int | None] = mapped_column(BigInteger)
    # iRED's queue average on the port (its EWMA of the depth), when iRED is on there.
    ired_qavg_bytes: Mapped[float | None] = mapped_column(Float)


class Event(Base):
    __tablename__ = "events"
    __table_args__ = (
        CheckConstraint(_in("type", EVENT_TYPES), name="type"),
        CheckConstraint(_in("severity", ("info", "warning", "error")), name="severity"),
        Index("ix_events_ts_id", "ts", "id"),
        Index("ix_events_session_id", "session_id"),
        Index("ix_events_unlinked", "session_key", postgresql_where=text("session_id IS NULL")),
        # Congestion episodes are read by type over a time range.
        Index(
            "ix_events_congestion",
            "ts",
            "id",
            postgresql_where=text("type IN ('congestion_onset', 'congestion_clear')"),
        ),
    )
    id: Mapped[int] = mapped_column(BigInteger, Identity(), primary_key=True)
    event_id: Mapped[str] = mapped_column(String(128), unique=True)
    type: Mapped[str] = mapped_column(String(32))
    ts: Mapped[dt.datetime] = mapped_column(TS)
    severity: Mapped[str] = mapped_column(String(16))
    session_id: Mapped[int | None] = mapped_column(ForeignKey("sessions.id", ondelete="SET NULL"))
    session_key: Mapped[str | None] = mapped_column(Text)
    switch_id: Mapped[int | None] = mapped_column(ForeignKey("switches.id", ondelete="SET NULL"))
    agent_id: Mapped[int | None] = mapped_column(ForeignKey("agents.id", ondelete="SET NULL"))
    message: Mapped[str | None] = mapped_column(Text)
    payload: Mapped[dict[str, Any]] = mapped_column(JSONB)
    received_at: Mapped[dt.datetime] = mapped_column(TS, server_default=func.now())


class IntPath(Base):
    """A traced flow's path as an INT sink reported it, from when it was seen
    on it: `hops` lists the switches from the INT source to the sink
    (`{"switch", "ingress_port", "egress_port"}`; the sink's ports from its
    report's metadata, null when the report carries none).
    Kept like events (an audit record of where media went)."""

    __tablename__ = "int_paths"
    __table_args__ = (
        UniqueConstraint("src_addr", "src_port", "dst_addr", "dst_port", "ts"),
        Index("ix_int_paths_ts", "ts"),
    )
    id: Mapped[int] = mapped_column(BigInteger, Identity(), primary_key=True)
    ts: Mapped[dt.datetime] = mapped_column(TS)
    src_addr: Mapped[IPAddr] = mapped_column(INET)
    src_port: Mapped[int] = mapped_column(Integer)
    dst_addr: Mapped[IPAddr] = mapped_column(INET)
    dst_port: Mapped[int] = mapped_column(Integer)
    sink_switch_id: Mapped[int | None] = mapped_column(
        ForeignKey("switches.id", ondelete="SET NULL")
    )
    hops: Mapped[list[dict[str, Any]]] = mapped_column(JSONB)
    received_at: Mapped[dt.datetime] = mapped_column(TS, server_default=func.now())


class User(Base):
    __tablename__ = "users"
    __table_args__ = (CheckConstraint(_in("role", ROLES), name="role"),)
    id: Mapped[int] = mapped_column(Integer, Identity(), primary_key=True)
    username: Mapped[str] = mapped_column(String(64), unique=True)
    password_hash: Mapped[str] = mapped_column(Text)
    role: Mapped[str] = mapped_column(String(16))
    disabled: Mapped[bool] = mapped_column(Boolean, server_default=text("false"))
    created_at: Mapped[dt.datetime] = mapped_column(TS, server_default=func.now())
    # Login JWTs carry the version they were issued under; bumping it (logout,
    # password, role or disabled change) ends every login issued before.
    token_version: Mapped[int] = mapped_column(Integer, server_default=text("0"))


class ApiToken(Base):
    """A scoped API token; only a SHA-256 of its secret is stored."""

    __tablename__ = "api_tokens"
    __table_args__ = (CheckConstraint(_in("scope", SCOPES), name="scope"),)
    id: Mapped[int] = mapped_column(Integer, Identity(), primary_key=True)
    name: Mapped[str] = mapped_column(String(128))
    prefix: Mapped[str] = mapped_column(String(16), unique=True)
    secret_hash: Mapped[str] = mapped_column(String(64))
    scope: Mapped[str] = mapped_column(String(16))
    created_at: Mapped[dt.datetime] = mapped_column(TS, server_default=func.now())
    expires_at: Mapped[dt.datetime | None] = mapped_column(TS)
    revoked_at: Mapped[dt.datetime | None] = mapped_column(TS)
    last_used_at: Mapped[dt.datetime | None] = mapped_column(TS)


class IngestBatchRecord(Base):
    """Seen ingest batches by (token, idempotency key), with a hash of the
    request body and the answer given: a key is a token's own, and reusing it
    for another body is refused."""

    __tablename__ = "ingest_batches"
    token_id: Mapped[int] = mapped_column(
        ForeignKey("api_tokens.id", ondelete="CASCADE"), primary_key=True
    )
    idempotency_key: Mapped[str] = mapped_column(String(128), primary_key=True)
    body_hash: Mapped[str | None] = mapped_column(String(64))  # SHA-256 of the body, hex
    received_at: Mapped[dt.datetime] = mapped_column(TS, server_default=func.now(), index=True)
    result: Mapped[dict[str, Any] | None] = mapped_column(JSONB)
