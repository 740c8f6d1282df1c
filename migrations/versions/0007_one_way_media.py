"""one_way_media: events for one-way media and the session's silent direction

Revision ID: 0007
Revises: 0006
Create Date: 2026-11-29 02:30:00.000000
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0007"
down_revision: str | None = "0006"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

_TYPES = (
    "'offload_installed', 'offload_removed', 'offload_failed', 'fallback', 'reroute', "
    "'ired_drop', 'congestion_onset', 'congestion_clear', 'agent_up', 'agent_down', "
    "'switch_up', 'switch_down', 'learn_refused'"
)


def upgrade() -> None:
    op.drop_constraint(op.f("ck_events_type"), "events", type_="check")
    op.create_check_constraint(
        op.f("ck_events_type"),
        "events",
        f"type IN ({_TYPES}, 'one_way_media', 'one_way_media_cleared')",
    )
    op.add_column("sessions", sa.Column("one_way", sa.String(length=16), nullable=True))
    op.create_check_constraint(
        op.f("ck_sessions_one_way"),
        "sessions",
        "one_way IN ('caller_to_callee', 'callee_to_caller')",
    )


def downgrade() -> None:
    op.drop_constraint(op.f("ck_sessions_one_way"), "sessions", type_="check")
    op.drop_column("sessions", "one_way")
    op.execute("DELETE FROM events WHERE type IN ('one_way_media', 'one_way_media_cleared')")
    op.drop_constraint(op.f("ck_events_type"), "events", type_="check")
    op.create_check_constraint(op.f("ck_events_type"), "events", f"type IN ({_TYPES})")
