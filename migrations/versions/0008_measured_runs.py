"""Runs online searches measured, reused by later searches of the same workload.

Revision ID: 0008_measured_runs
Revises: 0007_published_at
Create Date: 2026-11-28
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0008_measured_runs"
down_revision = "0007_published_at"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "slaplan_measured_runs",
        sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
        sa.Column("workload", sa.String(64), nullable=False),
        sa.Column("unit", sa.String(253), nullable=False),
        sa.Column("settings", sa.String(64), nullable=False),
        sa.Column("concurrency", sa.Integer, nullable=False),
        sa.Column("run", sa.JSON, nullable=False),
        sa.Column("measured_at", sa.DateTime(timezone=True), nullable=False),
    )
    op.create_index("ix_slaplan_measured_runs_workload", "slaplan_measured_runs", ["workload"])


def downgrade() -> None:
    op.drop_index("ix_slaplan_measured_runs_workload", table_name="slaplan_measured_runs")
    op.drop_table("slaplan_measured_runs")
