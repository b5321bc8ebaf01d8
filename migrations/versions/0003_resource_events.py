"""Resource versions from one counter, and the history of changes that watches read.

Revision ID: 0003_resource_events
Revises: 0002_calibrations
Create Date: 2026-11-22
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0003_resource_events"
down_revision = "0002_calibrations"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "slaplan_resource_events",
        sa.Column("version", sa.BigInteger(), primary_key=True, autoincrement=False),
        sa.Column("type", sa.String(16), nullable=False),
        sa.Column("group", sa.String(253), nullable=False),
        sa.Column("plural", sa.String(63), nullable=False),
        sa.Column("namespace", sa.String(63), nullable=False),
        sa.Column("labels", sa.JSON(), nullable=False),
        sa.Column("prior_labels", sa.JSON(), nullable=True),
        sa.Column("object", sa.JSON(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
    )
    op.create_index("ix_slaplan_resource_events_kind", "slaplan_resource_events", ["group", "plural", "version"])
    counters = op.create_table(
        "slaplan_counters",
        sa.Column("name", sa.String(63), primary_key=True),
        sa.Column("value", sa.BigInteger(), nullable=False),
    )
    # Versions already handed out (microseconds since the epoch) stay below every new one.
    latest = op.get_bind().execute(sa.text("SELECT COALESCE(MAX(resource_version), 0) FROM slaplan_resources")).scalar()
    op.bulk_insert(counters, [{"name": "resource_version", "value": int(latest)}, {"name": "events_compacted", "value": 0}])


def downgrade() -> None:
    op.drop_table("slaplan_counters")
    op.drop_index("ix_slaplan_resource_events_kind", table_name="slaplan_resource_events")
    op.drop_table("slaplan_resource_events")
