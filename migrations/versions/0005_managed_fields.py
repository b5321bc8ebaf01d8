"""Field ownership of server-side apply: each resource's ``metadata.managedFields`` (a JSON list,
empty for the resources stored before).

Revision ID: 0005_managed_fields
Revises: 0004_outbox
Create Date: 2026-11-27
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0005_managed_fields"
down_revision = "0004_outbox"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("slaplan_resources") as table:
        table.add_column(sa.Column("managed_fields", sa.JSON, nullable=False, server_default="[]"))


def downgrade() -> None:
    with op.batch_alter_table("slaplan_resources") as table:
        table.drop_column("managed_fields")
