"""auth and ingest hardening: users.token_version (a logout or a change of
password, role or state ends every login issued before), idempotency keys
scoped per token with the batch's hash, and the learn_refused event type

Revision ID: 0003
Revises: 0002
Create Date: 2026-11-23 19:30:00.000000
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0003"
down_revision: str | None = "0002"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

_TYPES = (
    "'offload_installed', 'offload_removed', 'offload_failed', 'fallback', 'reroute', "
    "'ired_drop', 'congestion_onset', 'congestion_clear', 'agent_up', 'agent_down', "
    "'switch_up', 'switch_down'"
)


def upgrade() -> None:
    op.add_column(
        "users",
        sa.Column("token_version", sa.Integer(), server_default=sa.text("0"), nullable=False),
    )
    # Keys were global; a record without its token cannot be scoped and goes.
    op.execute("DELETE FROM ingest_batches WHERE token_id IS NULL")
    op.drop_constraint(
        op.f("fk_ingest_batches_token_id_api_tokens"), "ingest_batches", type_="foreignkey"
    )
    op.drop_constraint(op.f("pk_ingest_batches"), "ingest_batches", type_="primary")
    op.alter_column("ingest_batches", "token_id", existing_type=sa.Integer(), nullable=False)
    op.create_primary_key(
        op.f("pk_ingest_batches"), "ingest_batches", ["token_id", "idempotency_key"]
    )
    op.create_foreign_key(
        op.f("fk_ingest_batches_token_id_api_tokens"),
        "ingest_batches",
        "api_tokens",
        ["token_id"],
        ["id"],
        ondelete="CASCADE",
    )
    op.add_column("ingest_batches", sa.Column("body_hash", sa.String(length=64), nullable=True))
    op.drop_constraint(op.f("ck_events_type"), "events", type_="check")
    op.create_check_constraint(
        op.f("ck_events_type"), "events", f"type IN ({_TYPES}, 'learn_refused')"
    )


def downgrade() -> None:
    op.execute("DELETE FROM events WHERE type = 'learn_refused'")
    op.drop_constraint(op.f("ck_events_type"), "events", type_="check")
    op.create_check_constraint(op.f("ck_events_type"), "events", f"type IN ({_TYPES})")
    op.drop_column("ingest_batches", "body_hash")
    op.drop_constraint(
        op.f("fk_ingest_batches_token_id_api_tokens"), "ingest_batches", type_="foreignkey"
    )
    op.drop_constraint(op.f("pk_ingest_batches"), "ingest_batches", type_="primary")
    # Keys become global again: of a key used by several tokens, one record stays.
    op.execute(
        "DELETE FROM ingest_batches a USING ingest_batches b "
        "WHERE a.idempotency_key = b.idempotency_key AND a.token_id > b.token_id"
    )
    op.create_primary_key(op.f("pk_ingest_batches"), "ingest_batches", ["idempotency_key"])
    op.alter_column("ingest_batches", "token_id", existing_type=sa.Integer(), nullable=True)
    op.create_foreign_key(
        op.f("fk_ingest_batches_token_id_api_tokens"),
        "ingest_batches",
        "api_tokens",
        ["token_id"],
        ["id"],
        ondelete="SET NULL",
    )
    op.drop_column("users", "token_version")
