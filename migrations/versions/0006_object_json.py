"""Each resource's object as the API sends it, JSON text written with every write, so that gets
and lists send it without decoding and encoding it again (NULL for the resources stored before:
they are rendered on read until their next write).

Revision ID: 0006_object_json
Revises: 0005_managed_fields
Create Date: 2026-11-27
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0006_object_json"
down_revision = "0005_managed_fields"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("slaplan_resources") as table:
        table.add_column(sa.Column("object_json", sa.Text, nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("slaplan_resources") as table:
        table.drop_column("object_json")
