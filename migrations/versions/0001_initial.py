"""initial schema: switches, agents, sessions, samples, events, auth

Revision ID: 0001
Revises: (none)
Create Date: 2026-11-21 10:59:20.407751
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision: str = "0001"
down_revision: str | None = None
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "api_tokens",
        sa.Column("id", sa.Integer(), sa.Identity(always=False), nullable=False),
        sa.Column("name", sa.String(length=128), nullable=False),
        sa.Column("prefix", sa.String(length=16), nullable=False),
        sa.Column("secret_hash", sa.String(length=64), nullable=False),
        sa.Column("scope", sa.String(length=16), nullable=False),
        sa.Column(
            "created_at",
            sa.DateTime(timezone=True),
            server_default=sa.text("now()"),
            nullable=False,
        ),
        sa.Column("expires_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("revoked_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("last_used_at", sa.DateTime(timezone=True), nullable=True),
        sa.CheckConstraint("scope IN ('ingest', 'read')", name=op.f("ck_api_tokens_scope")),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_api_tokens")),
        sa.UniqueConstraint("prefix", name=op.f("uq_api_tokens_prefix")),
    )
    op.create_table(
        "switches",
        sa.Column("id", sa.Integer(), sa.Identity(always=False), nullable=False),
        sa.Column("name", sa.String(length=128), nullable=False),
        sa.Column("grpc_address", sa.Text(), nullable=True),
        sa.Column("device_id", sa.Integer(), server_default="0", nullable=False),
        sa.Column("up", sa.Boolean(), server_default=sa.text("true"), nullable=False),
        sa.Column(
            "created_at",
            sa.DateTime(timezone=True),
            server_default=sa.text("now()"),
            nullable=False,
        ),
        sa.Column("last_seen", sa.DateTime(timezone=True), nullable=True),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_switches")),
        sa.UniqueConstraint("name", name=op.f("uq_switches_name")),
    )
    op.create_table(
        "users",
        sa.Column("id", sa.Integer(), sa.Identity(always=False), nullable=False),
        sa.Column("username", sa.String(length=64), nullable=False),
        sa.Column("password_hash", sa.Text(), nullable=False),
        sa.Column("role", sa.String(length=16), nullable=False),
        sa.Column("disabled", sa.Boolean(), server_default=sa.text("false"), nullable=False),
        sa.Column(
            "created_at",
            sa.DateTime(timezone=True),
            server_default=sa.text("now()"),
            nullable=False,
        ),
        sa.CheckConstraint("role IN ('viewer', 'admin')", name=op.f("ck_users_role")),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_users")),
        sa.UniqueConstraint("username", name=op.f("uq_users_username")),
    )
    op.create_table(
        "agents",
        sa.Column("id", sa.Integer(), sa.Identity(always=False), nullable=False),
        sa.Column("name", sa.String(length=128), nullable=False),
        sa.Column("rtpproxy", sa.Text(), nullable=True),
        sa.Column("switch_id", sa.Integer(), nullable=True),
        sa.Column("version", sa.String(length=64), nullable=True),
        sa.Column(
            "created_at",
            sa.DateTime(timezone=True),
            server_default=sa.text("now()"),
            nullable=False,
        ),
        sa.Column("last_seen", sa.DateTime(timezone=True), nullable=True),
        sa.ForeignKeyConstraint(
            ["switch_id"],
            ["switches.id"],
            name=op.f("fk_agents_switch_id_switches"),
            ondelete="SET NULL",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_agents")),
        sa.UniqueConstraint("name", name=op.f("uq_agents_name")),
    )
    op.create_table(
        "ingest_batches",
        sa.Column("idempotency_key", sa.String(length=128), nullable=False),
        sa.Column("token_id", sa.Integer(), nullable=True),
        sa.Column(
            "received_at",
            sa.DateTime(timezone=True),
            server_default=sa.text("now()"),
            nullable=False,
        ),
        sa.Column("result", postgresql.JSONB(astext_type=sa.Text()), nullable=True),
        sa.ForeignKeyConstraint(
            ["token_id"],
            ["api_tokens.id"],
            name=op.f("fk_ingest_batches_token_id_api_tokens"),
            ondelete="SET NULL",
        ),
        sa.PrimaryKeyConstraint("idempotency_key", name=op.f("pk_ingest_batches")),
    )
    op.create_index(
        op.f("ix_ingest_batches_received_at"), "ingest_batches", ["received_at"], unique=False
    )
    op.create_table(
        "queue_samples",
        sa.Column("id", sa.BigInteger(), sa.Identity(always=False), nullable=False),
        sa.Column("switch_id", sa.Integer(), nullable=False),
        sa.Column("dev_port", sa.Integer(), nullable=False),
        sa.Column("queue", sa.SmallInteger(), nullable=False),
        sa.Column("ts", sa.DateTime(timezone=True), nullable=False),
        sa.Column("resolution_s", sa.Integer(), server_default="0", nullable=False),
        sa.Column("depth_pkts", sa.Float(), nullable=True),
        sa.Column("depth_bytes", sa.Float(), nullable=True),
        sa.Column("depth_max_pkts", sa.Float(), nullable=True),
        sa.Column("queue_delay_us", sa.Float(), nullable=True),
        sa.Column("queue_delay_max_us", sa.Float(), nullable=True),
        sa.Column("utilisation", sa.Float(), nullable=True),
        sa.Column("drops", sa.BigInteger(), nullable=False),
        sa.Column("tx_packets", sa.BigInteger(), nullable=True),
        sa.Column("tx_bytes", sa.BigInteger(), nullable=True),
        sa.ForeignKeyConstraint(
            ["switch_id"],
            ["switches.id"],
            name=op.f("fk_queue_samples_switch_id_switches"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_queue_samples")),
        sa.UniqueConstraint(
            "switch_id",
            "dev_port",
            "queue",
            "resolution_s",
            "ts",
            name=op.f("uq_queue_samples_switch_id"),
        ),
    )
    op.create_index("ix_queue_samples_ts", "queue_samples", ["ts"], unique=False)
    op.create_table(
        "switch_ports",
        sa.Column("id", sa.Integer(), sa.Identity(always=False), nullable=False),
        sa.Column("switch_id", sa.Integer(), nullable=False),
        sa.Column("dev_port", sa.Integer(), nullable=False),
        sa.Column("name", sa.String(length=64), nullable=True),
        sa.Column("speed_mbps", sa.BigInteger(), nullable=True),
        sa.Column("up", sa.Boolean(), nullable=True),
        sa.ForeignKeyConstraint(
            ["switch_id"],
            ["switches.id"],
            name=op.f("fk_switch_ports_switch_id_switches"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_switch_ports")),
        sa.UniqueConstraint("switch_id", "dev_port", name=op.f("uq_switch_ports_switch_id")),
    )
    op.create_table(
        "sessions",
        sa.Column("id", sa.BigInteger(), sa.Identity(always=False), nullable=False),
        sa.Column("session_key", sa.Text(), nullable=False),
        sa.Column("seq", sa.BigInteger(), nullable=False),
        sa.Column("call_id", sa.Text(), nullable=False),
        sa.Column("from_tag", sa.Text(), nullable=False),
        sa.Column("to_tag", sa.Text(), nullable=True),
        sa.Column("state", sa.String(length=16), nullable=False),
        sa.Column("offloaded", sa.Boolean(), nullable=False),
        sa.Column("offload_reason", sa.Text(), nullable=True),
        sa.Column("codec", sa.String(length=32), nullable=True),
        sa.Column("plc", sa.Boolean(), server_default=sa.text("true"), nullable=False),
        sa.Column("switch_id", sa.Integer(), nullable=True),
        sa.Column("agent_id", sa.Integer(), nullable=True),
        sa.Column("started_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("answered_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("ended_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("packets", sa.BigInteger(), nullable=True),
        sa.Column("bytes", sa.BigInteger(), nullable=True),
        sa.Column("lost", sa.BigInteger(), nullable=True),
        sa.Column("mos_avg", sa.Float(), nullable=True),
        sa.Column("mos_min", sa.Float(), nullable=True),
        sa.Column("mos_samples", sa.BigInteger(), server_default="0", nullable=False),
        sa.Column("jitter_ms_max", sa.Float(), nullable=True),
        sa.Column(
            "updated_at",
            sa.DateTime(timezone=True),
            server_default=sa.text("now()"),
            nullable=False,
        ),
        sa.CheckConstraint(
            "state IN ('setup', 'active', 'ended', 'failed')", name=op.f("ck_sessions_state")
        ),
        sa.ForeignKeyConstraint(
            ["agent_id"],
            ["agents.id"],
            name=op.f("fk_sessions_agent_id_agents"),
            ondelete="SET NULL",
        ),
        sa.ForeignKeyConstraint(
            ["switch_id"],
            ["switches.id"],
            name=op.f("fk_sessions_switch_id_switches"),
            ondelete="SET NULL",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_sessions")),
        sa.UniqueConstraint("session_key", name=op.f("uq_sessions_session_key")),
    )
    op.create_index(op.f("ix_sessions_call_id"), "sessions", ["call_id"], unique=False)
    op.create_index("ix_sessions_mos_avg", "sessions", ["mos_avg"], unique=False)
    op.create_index("ix_sessions_started_at_id", "sessions", ["started_at", "id"], unique=False)
    op.create_index(
        "ix_sessions_state_started_at", "sessions", ["state", "started_at", "id"], unique=False
    )
    op.create_index(op.f("ix_sessions_switch_id"), "sessions", ["switch_id"], unique=False)
    op.create_table(
        "events",
        sa.Column("id", sa.BigInteger(), sa.Identity(always=False), nullable=False),
        sa.Column("event_id", sa.String(length=128), nullable=False),
        sa.Column("type", sa.String(length=32), nullable=False),
        sa.Column("ts", sa.DateTime(timezone=True), nullable=False),
        sa.Column("severity", sa.String(length=16), nullable=False),
        sa.Column("session_id", sa.BigInteger(), nullable=True),
        sa.Column("session_key", sa.Text(), nullable=True),
        sa.Column("switch_id", sa.Integer(), nullable=True),
        sa.Column("agent_id", sa.Integer(), nullable=True),
        sa.Column("message", sa.Text(), nullable=True),
        sa.Column("payload", postgresql.JSONB(astext_type=sa.Text()), nullable=False),
        sa.Column(
            "received_at",
            sa.DateTime(timezone=True),
            server_default=sa.text("now()"),
            nullable=False,
        ),
        sa.CheckConstraint(
            "severity IN ('info', 'warning', 'error')", name=op.f("ck_events_severity")
        ),
        sa.CheckConstraint(
            "type IN ('offload_installed', 'offload_removed', 'offload_failed', 'fallback', 'reroute', 'ired_drop', 'congestion_onset', 'congestion_clear', 'agent_up', 'agent_down', 'switch_up', 'switch_down')",
            name=op.f("ck_events_type"),
        ),
        sa.ForeignKeyConstraint(
            ["agent_id"], ["agents.id"], name=op.f("fk_events_agent_id_agents"), ondelete="SET NULL"
        ),
        sa.ForeignKeyConstraint(
            ["session_id"],
            ["sessions.id"],
            name=op.f("fk_events_session_id_sessions"),
            ondelete="SET NULL",
        ),
        sa.ForeignKeyConstraint(
            ["switch_id"],
            ["switches.id"],
            name=op.f("fk_events_switch_id_switches"),
            ondelete="SET NULL",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_events")),
        sa.UniqueConstraint("event_id", name=op.f("uq_events_event_id")),
    )
    op.create_index("ix_events_session_id", "events", ["session_id"], unique=False)
    op.create_index("ix_events_ts_id", "events", ["ts", "id"], unique=False)
    op.create_index(
        "ix_events_unlinked",
        "events",
        ["session_key"],
        unique=False,
        postgresql_where=sa.text("session_id IS NULL"),
    )
    op.create_table(
        "quality_samples",
        sa.Column("id", sa.BigInteger(), sa.Identity(always=False), nullable=False),
        sa.Column("session_id", sa.BigInteger(), nullable=True),
        sa.Column("session_key", sa.Text(), nullable=False),
        sa.Column("direction", sa.String(length=16), nullable=False),
        sa.Column("ts", sa.DateTime(timezone=True), nullable=False),
        sa.Column("resolution_s", sa.Integer(), server_default="0", nullable=False),
        sa.Column("interval_ms", sa.Integer(), nullable=False),
        sa.Column("packets", sa.BigInteger(), nullable=False),
        sa.Column("bytes", sa.BigInteger(), nullable=False),
        sa.Column("lost", sa.BigInteger(), nullable=False),
        sa.Column("reordered", sa.BigInteger(), nullable=False),
        sa.Column("jitter_ms", sa.Float(), nullable=False),
        sa.Column("delay_ms", sa.Float(), nullable=True),
        sa.Column("burst_ratio", sa.Float(), nullable=True),
        sa.Column("codec", sa.String(length=32), nullable=True),
        sa.Column("r_factor", sa.Float(), nullable=True),
        sa.Column("mos", sa.Float(), nullable=True),
        sa.CheckConstraint(
            "direction IN ('caller_to_callee', 'callee_to_caller')",
            name=op.f("ck_quality_samples_direction"),
        ),
        sa.ForeignKeyConstraint(
            ["session_id"],
            ["sessions.id"],
            name=op.f("fk_quality_samples_session_id_sessions"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_quality_samples")),
        sa.UniqueConstraint(
            "session_key",
            "direction",
            "resolution_s",
            "ts",
            name=op.f("uq_quality_samples_session_key"),
        ),
    )
    op.create_index(
        "ix_quality_samples_session_id_ts", "quality_samples", ["session_id", "ts"], unique=False
    )
    op.create_index("ix_quality_samples_ts", "quality_samples", ["ts"], unique=False)
    op.create_index(
        "ix_quality_samples_unlinked",
        "quality_samples",
        ["session_key"],
        unique=False,
        postgresql_where=sa.text("session_id IS NULL"),
    )
    op.create_table(
        "session_legs",
        sa.Column("id", sa.BigInteger(), sa.Identity(always=False), nullable=False),
        sa.Column("session_id", sa.BigInteger(), nullable=False),
        sa.Column("direction", sa.String(length=16), nullable=False),
        sa.Column("media_index", sa.SmallInteger(), nullable=False),
        sa.Column("switch_leg", sa.Integer(), nullable=True),
        sa.Column("src_addr", postgresql.INET(), nullable=False),
        sa.Column("src_port", sa.Integer(), nullable=False),
        sa.Column("relay_in_addr", postgresql.INET(), nullable=False),
        sa.Column("relay_in_port", sa.Integer(), nullable=False),
        sa.Column("relay_out_addr", postgresql.INET(), nullable=False),
        sa.Column("relay_out_port", sa.Integer(), nullable=False),
        sa.Column("dst_addr", postgresql.INET(), nullable=False),
        sa.Column("dst_port", sa.Integer(), nullable=False),
        sa.Column("installed", sa.Boolean(), nullable=False),
        sa.Column("installed_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("removed_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("packets", sa.BigInteger(), nullable=True),
        sa.Column("bytes", sa.BigInteger(), nullable=True),
        sa.CheckConstraint(
            "direction IN ('caller_to_callee', 'callee_to_caller')",
            name=op.f("ck_session_legs_direction"),
        ),
        sa.ForeignKeyConstraint(
            ["session_id"],
            ["sessions.id"],
            name=op.f("fk_session_legs_session_id_sessions"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_session_legs")),
        sa.UniqueConstraint(
            "session_id", "direction", "media_index", name=op.f("uq_session_legs_session_id")
        ),
    )
    op.create_index("ix_session_legs_dst_addr", "session_legs", ["dst_addr"], unique=False)
    op.create_index(
        "ix_session_legs_relay_in_addr", "session_legs", ["relay_in_addr"], unique=False
    )
    op.create_index("ix_session_legs_src_addr", "session_legs", ["src_addr"], unique=False)


def downgrade() -> None:
    op.drop_index("ix_session_legs_src_addr", table_name="session_legs")
    op.drop_index("ix_session_legs_relay_in_addr", table_name="session_legs")
    op.drop_index("ix_session_legs_dst_addr", table_name="session_legs")
    op.drop_table("session_legs")
    op.drop_index(
        "ix_quality_samples_unlinked",
        table_name="quality_samples",
        postgresql_where=sa.text("session_id IS NULL"),
    )
    op.drop_index("ix_quality_samples_ts", table_name="quality_samples")
    op.drop_index("ix_quality_samples_session_id_ts", table_name="quality_samples")
    op.drop_table("quality_samples")
    op.drop_index(
        "ix_events_unlinked", table_name="events", postgresql_where=sa.text("session_id IS NULL")
    )
    op.drop_index("ix_events_ts_id", table_name="events")
    op.drop_index("ix_events_session_id", table_name="events")
    op.drop_table("events")
    op.drop_index(op.f("ix_sessions_switch_id"), table_name="sessions")
    op.drop_index("ix_sessions_state_started_at", table_name="sessions")
    op.drop_index("ix_sessions_started_at_id", table_name="sessions")
    op.drop_index("ix_sessions_mos_avg", table_name="sessions")
    op.drop_index(op.f("ix_sessions_call_id"), table_name="sessions")
    op.drop_table("sessions")
    op.drop_table("switch_ports")
    op.drop_index("ix_queue_samples_ts", table_name="queue_samples")
    op.drop_table("queue_samples")
    op.drop_index(op.f("ix_ingest_batches_received_at"), table_name="ingest_batches")
    op.drop_table("ingest_batches")
    op.drop_table("agents")
    op.drop_table("users")
    op.drop_table("switches")
    op.drop_table("api_tokens")
