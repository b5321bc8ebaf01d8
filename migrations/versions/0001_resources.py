"""Stored custom resources.

Revision ID: 0001_resources
Revises:
Create Date: 2026-08-01
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0001_resources"
down_revision = None
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "slaplan_resources",
        sa.Column("id", sa.Integer(), primary_key=True, autoincrement=True),
        sa.Column("group", sa.String(253), nullable=False),
        sa.Column("version", sa.String(63), nullable=False),
        sa.Column("kind", sa.String(63), nullable=False),
        sa.Column("plural", sa.String(63), nullable=False),
        sa.Column("namespace", sa.String(63), nullable=False),
        sa.Column("name", sa.String(253), nullable=False),
        sa.Column("uid", sa.String(36), nullable=False),
        sa.Column("generation", sa.Integer(), nullable=False),
        sa.Column("resource_version", sa.BigInteger(), nullable=False),
        sa.Column("labels", sa.JSON(), nullable=False),
        sa.Column("annotations", sa.JSON(), nullable=False),
        sa.Column("spec", sa.JSON(), nullable=False),
        sa.Column("status", sa.JSON(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("deleted_at", sa.DateTime(timezone=True), nullable=True),
        sa.UniqueConstraint("group", "plural", "namespace", "name", name="uq_slaplan_resources_identity"),
        sa.UniqueConstraint("uid", name="uq_slaplan_resources_uid"),
    )
    op.create_index("ix_slaplan_resources_kind_ns", "slaplan_resources", ["group", "plural", "namespace"])


def downgrade() -> None:
    op.drop_index("ix_slaplan_resources_kind_ns", table_name="slaplan_resources")
    op.drop_table("slaplan_resources")
