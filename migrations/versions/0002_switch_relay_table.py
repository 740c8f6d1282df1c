"""switches: relay table occupancy (entries in use, capacity) from the collector

Revision ID: 0002
Revises: 0001
Create Date: 2026-11-21 12:50:00.000000
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0002"
down_revision: str | None = "0001"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.add_column("switches", sa.Column("relay_table_used", sa.BigInteger(), nullable=True))
    op.add_column("switches", sa.Column("relay_table_capacity", sa.BigInteger(), nullable=True))


def downgrade() -> None:
    op.drop_column("switches", "relay_table_capacity")
    op.drop_column("switches", "relay_table_used")
