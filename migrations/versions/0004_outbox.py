"""The outbox and leases on stored requests: when a task is next due to be published, and which
worker holds the request until when.

Requests left waiting for a worker (or, for a DGDR, with a deployment to follow) are due at once,
so that the first dispatcher after the upgrade publishes them. The counter ``broker_identity``
holds a hash of the broker process the dispatchers saw last (0: none yet).

Revision ID: 0004_outbox
Revises: 0003_resource_events
Create Date: 2026-11-27
"""

from __future__ import annotations

from datetime import UTC, datetime

import sqlalchemy as sa
from alembic import op

revision = "0004_outbox"
down_revision = "0003_resource_events"
branch_labels = None
depends_on = None

# (group, plural) -> states in which a worker still has something to do, as of this revision
WAITING = {
    ("nvidia.com", "dynamographdeploymentrequests"): {"", "Pending", "Profiling", "Deploying"},
    ("ome.io", "benchmarkjobs"): {"", "Pending", "Running"},
}


def upgrade() -> None:
    with op.batch_alter_table("slaplan_resources") as table:
        table.add_column(sa.Column("publish_due_at", sa.DateTime(timezone=True), nullable=True))
        table.add_column(sa.Column("lease_owner", sa.String(255), nullable=True))
        table.add_column(sa.Column("lease_expires_at", sa.DateTime(timezone=True), nullable=True))
        table.create_index("ix_slaplan_resources_publish_due", ["publish_due_at"])
        table.create_index("ix_slaplan_resources_lease_expiry", ["lease_expires_at"])
    resources = sa.table("slaplan_resources", sa.column("id", sa.Integer), sa.column("group", sa.String),
                         sa.column("plural", sa.String), sa.column("status", sa.JSON),
                         sa.column("publish_due_at", sa.DateTime(timezone=True)))
    bind = op.get_bind()
    due = [row.id for row in bind.execute(sa.select(resources.c.id, resources.c.group, resources.c.plural,
                                                    resources.c.status))
           if ((row.status or {}).get("state") or "") in WAITING.get((row.group, row.plural), ())
           or ((row.status or {}).get("state") == "Ready" and (row.status or {}).get("deployment"))]
    counters = sa.table("slaplan_counters", sa.column("name", sa.String), sa.column("value", sa.BigInteger))
    op.bulk_insert(counters, [{"name": "broker_identity", "value": 0}])
    now = datetime.now(UTC)
    for start in range(0, len(due), 500):
        bind.execute(sa.update(resources).where(resources.c.id.in_(due[start:start + 500])).values(publish_due_at=now))


def downgrade() -> None:
    op.execute("DELETE FROM slaplan_counters WHERE name = 'broker_identity'")
    with op.batch_alter_table("slaplan_resources") as table:
        table.drop_index("ix_slaplan_resources_lease_expiry")
        table.drop_index("ix_slaplan_resources_publish_due")
        table.drop_column("lease_expires_at")
        table.drop_column("lease_owner")
        table.drop_column("publish_due_at")
