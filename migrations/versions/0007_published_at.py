"""When a request's task was published and no worker has taken it since (NULL otherwise): a
dispatcher publishes again a request whose message is neither queued nor held by a worker.

Revision ID: 0007_published_at
Revises: 0006_object_json
Create Date: 2026-11-28
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0007_published_at"
down_revision = "0006_object_json"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("slaplan_resources") as table:
        table.add_column(sa.Column("published_at", sa.DateTime(timezone=True), nullable=True))
        table.create_index("ix_slaplan_resources_published", ["published_at"])


def downgrade() -> None:
    with op.batch_alter_table("slaplan_resources") as table:
        table.drop_index("ix_slaplan_resources_published")
        table.drop_column("published_at")
