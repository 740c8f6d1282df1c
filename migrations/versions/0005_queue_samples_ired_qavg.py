"""queue_samples: iRED's queue average per port

Revision ID: 0005
Revises: 0004
Create Date: 2026-11-25 19:00:00.000000
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0005"
down_revision: str | None = "0004"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.add_column("queue_samples", sa.Column("ired_qavg_bytes", sa.Float(), nullable=True))


def downgrade() -> None:
    op.drop_column("queue_samples", "ired_qavg_bytes")
