"""PostgreSQL keeps each resource's object JSON uncompressed (``STORAGE EXTERNAL``): a page of a
list reads a hundred ~12 KB texts, and the server's default pglz compression made it decompress
each one on every read (a 100-object page: 5.9–7.6 ms in the driver as compressed, 2.7–3.0 ms
uncompressed). Texts are still kept out of line; only rows written after this step are stored
so (every write rewrites the text). SQLite has no such setting: nothing to do there.

Revision ID: 0009_object_json_uncompressed
Revises: 0008_measured_runs
Create Date: 2026-11-28
"""

from __future__ import annotations

from alembic import op

revision = "0009_object_json_uncompressed"
down_revision = "0008_measured_runs"
branch_labels = None
depends_on = None


def _set_storage(storage: str) -> None:
    if op.get_bind().dialect.name == "postgresql":
        op.execute(f"ALTER TABLE slaplan_resources ALTER COLUMN object_json SET STORAGE {storage}")


def upgrade() -> None:
    _set_storage("EXTERNAL")


def downgrade() -> None:
    _set_storage("EXTENDED")
