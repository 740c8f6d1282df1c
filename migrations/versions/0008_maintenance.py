"""maintenance: switch and agent maintenance modes, the offload cap, the agents'
reported capacity, the operator role, maintenance events

Revision ID: 0008
Revises: 0007
Create Date: 2026-11-29 05:30:00.000000
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision: str = "0008"
down_revision: str | None = "0007"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

_TYPES = (
    "'offload_installed', 'offload_removed', 'offload_failed', 'fallback', 'reroute', "
    "'ired_drop', 'congestion_onset', 'congestion_clear', 'agent_up', 'agent_down', "
    "'switch_up', 'switch_down', 'learn_refused', 'one_way_media', 'one_way_media_cleared'"
)
_NEW_TYPES = "'maintenance', 'evacuated', 'maintenance_set'"


def upgrade() -> None:
    op.drop_constraint(op.f("ck_events_type"), "events", type_="check")
    op.create_check_constraint(
        op.f("ck_events_type"), "events", f"type IN ({_TYPES}, {_NEW_TYPES})"
    )
    op.drop_constraint(op.f("ck_users_role"), "users", type_="check")
    op.create_check_constraint(
        op.f("ck_users_role"), "users", "role IN ('viewer', 'operator', 'admin')"
    )
    ts = sa.DateTime(timezone=True)
    op.add_column(
        "switches",
        sa.Column("maintenance", sa.String(length=16), server_default="active", nullable=False),
    )
    op.add_column("switches", sa.Column("offload_cap", sa.Integer(), nullable=True))
    op.add_column("switches", sa.Column("maintenance_changed_at", ts, nullable=True))
    op.add_column("switches", sa.Column("maintenance_changed_by", sa.String(64), nullable=True))
    op.create_check_constraint(
        op.f("ck_switches_maintenance"), "switches", "maintenance IN ('active', 'out_of_service')"
    )
    op.create_check_constraint(
        op.f("ck_switches_offload_cap"), "switches", "offload_cap IS NULL OR offload_cap >= 0"
    )
    op.add_column(
        "agents",
        sa.Column("maintenance", sa.String(length=16), server_default="active", nullable=False),
    )
    op.add_column("agents", sa.Column("maintenance_changed_at", ts, nullable=True))
    op.add_column("agents", sa.Column("maintenance_changed_by", sa.String(64), nullable=True))
    op.add_column("agents", sa.Column("reported_mode", sa.String(length=16), nullable=True))
    op.add_column("agents", sa.Column("offloaded", sa.Integer(), nullable=True))
    op.add_column("agents", sa.Column("capacity", sa.Integer(), nullable=True))
    op.add_column("agents", sa.Column("by_pipe", postgresql.JSONB(), nullable=True))
    op.add_column("agents", sa.Column("reported_at", ts, nullable=True))
    modes = "('active', 'draining', 'evacuated')"
    op.create_check_constraint(op.f("ck_agents_maintenance"), "agents", f"maintenance IN {modes}")
    op.create_check_constraint(
        op.f("ck_agents_reported_mode"),
        "agents",
        f"reported_mode IS NULL OR reported_mode IN {modes}",
    )


def downgrade() -> None:
    op.drop_constraint(op.f("ck_agents_reported_mode"), "agents", type_="check")
    op.drop_constraint(op.f("ck_agents_maintenance"), "agents", type_="check")
    for c in (
        "reported_at",
        "by_pipe",
        "capacity",
        "offloaded",
        "reported_mode",
        "maintenance_changed_by",
        "maintenance_changed_at",
        "maintenance",
    ):
        op.drop_column("agents", c)
    op.drop_constraint(op.f("ck_switches_offload_cap"), "switches", type_="check")
    op.drop_constraint(op.f("ck_switches_maintenance"), "switches", type_="check")
    for c in ("maintenance_changed_by", "maintenance_changed_at", "offload_cap", "maintenance"):
        op.drop_column("switches", c)
    op.execute("UPDATE users SET role = 'viewer' WHERE role = 'operator'")
    op.drop_constraint(op.f("ck_users_role"), "users", type_="check")
    op.create_check_constraint(op.f("ck_users_role"), "users", "role IN ('viewer', 'admin')")
    op.execute(f"DELETE FROM events WHERE type IN ({_NEW_TYPES})")
    op.drop_constraint(op.f("ck_events_type"), "events", type_="check")
    op.create_check_constraint(op.f("ck_events_type"), "events", f"type IN ({_TYPES})")
