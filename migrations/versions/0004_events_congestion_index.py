"""events: partial index for congestion episodes (onset/clear by time)

Revision ID: 0004
Revises: 0003
Create Date: 2026-11-23 20:15:00.000000
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0004"
down_revision: str | None = "0003"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_index(
        op.f("ix_events_congestion"),
        "events",
        ["ts", "id"],
        unique=False,
        postgresql_where=sa.text("type IN ('congestion_onset', 'congestion_clear')"),
    )


def downgrade() -> None:
    op.drop_index(
        op.f("ix_events_congestion"),
        table_name="events",
        postgresql_where=sa.text("type IN ('congestion_onset', 'congestion_clear')"),
    )
