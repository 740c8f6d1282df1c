"""int_paths: INT path records of traced flows

Revision ID: 0006
Revises: 0005
Create Date: 2026-11-27 08:30:00.000000
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision: str = "0006"
down_revision: str | None = "0005"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "int_paths",
        sa.Column("id", sa.BigInteger(), sa.Identity(), nullable=False),
        sa.Column("ts", sa.DateTime(timezone=True), nullable=False),
        sa.Column("src_addr", postgresql.INET(), nullable=False),
        sa.Column("src_port", sa.Integer(), nullable=False),
        sa.Column("dst_addr", postgresql.INET(), nullable=False),
        sa.Column("dst_port", sa.Integer(), nullable=False),
        sa.Column("sink_switch_id", sa.Integer(), nullable=True),
        sa.Column("hops", postgresql.JSONB(astext_type=sa.Text()), nullable=False),
        sa.Column(
            "received_at", sa.DateTime(timezone=True), server_default=sa.func.now(), nullable=False
        ),
        sa.ForeignKeyConstraint(
            ["sink_switch_id"],
            ["switches.id"],
            name=op.f("fk_int_paths_sink_switch_id_switches"),
            ondelete="SET NULL",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_int_paths")),
        sa.UniqueConstraint(
            "src_addr",
            "src_port",
            "dst_addr",
            "dst_port",
            "ts",
            name=op.f("uq_int_paths_src_addr"),
        ),
    )
    op.create_index("ix_int_paths_ts", "int_paths", ["ts"], unique=False)


def downgrade() -> None:
    op.drop_index("ix_int_paths_ts", table_name="int_paths")
    op.drop_table("int_paths")
