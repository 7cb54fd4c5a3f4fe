"""key roles and run ownership: a role on every API key, the submitting key and the executor's claim fence on
every run

Revision ID: 0002
Revises: 0001
Create Date: 2026-12-04 14:40:00.000000
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0002"
down_revision: str | None = "0001"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    # keys made before roles existed become plain users: none of them may act on another key's runs
    with op.batch_alter_table("api_keys", schema=None) as batch_op:
        batch_op.add_column(sa.Column("role", sa.String(length=16), nullable=False, server_default="user"))
    with op.batch_alter_table("runs", schema=None) as batch_op:
        batch_op.add_column(sa.Column("claim_epoch", sa.Integer(), nullable=True))
        batch_op.add_column(sa.Column("owner_key_id", sa.Integer(), nullable=True))
        batch_op.create_index(batch_op.f("ix_runs_owner_key_id"), ["owner_key_id"], unique=False)


def downgrade() -> None:
    with op.batch_alter_table("runs", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_runs_owner_key_id"))
        batch_op.drop_column("owner_key_id")
        batch_op.drop_column("claim_epoch")
    with op.batch_alter_table("api_keys", schema=None) as batch_op:
        batch_op.drop_column("role")
