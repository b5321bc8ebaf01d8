"""Drop ``ix_slaplan_resources_kind_ns`` (group, plural, namespace): the unique key (group, plural,
namespace, name) starts with the same columns, so every read it served the key serves too. On a
PostgreSQL table without statistics (never analysed: a new database, or autovacuum off) the
planner took the smaller, deduplicated index for reads by key, and a get or a write by name
read every object of the namespace (3,100 rows, 842 buffers, 2.2 ms of the backend against 3
buffers, 0.08 ms by the key). One index less is also one less to write on each update that
moves a lease or a publish time.

Revision ID: 0010_drop_kind_index
Revises: 0009_object_json_uncompressed
Create Date: 2026-11-29
"""

from __future__ import annotations

from alembic import op

revision = "0010_drop_kind_index"
down_revision = "0009_object_json_uncompressed"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.drop_index("ix_slaplan_resources_kind_ns", table_name="slaplan_resources")


def downgrade() -> None:
    op.create_index("ix_slaplan_resources_kind_ns", "slaplan_resources", ["group", "plural", "namespace"])
