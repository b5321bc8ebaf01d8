"""Calibrations fitted to measurements, one per (model, GPU, backend).

Revision ID: 0002_calibrations
Revises: 0001_resources
Create Date: 2026-11-22
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0002_calibrations"
down_revision = "0001_resources"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "slaplan_calibrations",
        sa.Column("id", sa.Integer(), primary_key=True, autoincrement=True),
        sa.Column("model", sa.String(253), nullable=False),
        sa.Column("gpu", sa.String(63), nullable=False),
        sa.Column("backend", sa.String(31), nullable=False),
        sa.Column("params", sa.JSON(), nullable=False),
        sa.Column("deployment", sa.JSON(), nullable=False),
        sa.Column("fit", sa.JSON(), nullable=False),
        sa.Column("source", sa.String(1024), nullable=False),
        sa.Column("calibrated_at", sa.DateTime(timezone=True), nullable=False),
        sa.UniqueConstraint("model", "gpu", "backend", name="uq_slaplan_calibrations_key"),
    )


def downgrade() -> None:
    op.drop_table("slaplan_calibrations")
