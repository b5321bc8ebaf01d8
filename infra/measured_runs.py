"""The repository of runs online searches measured (``planner.run_reuse.StoredRun``): stored by
workload, read back validated."""

from __future__ import annotations

from collections.abc import Iterable

from sqlalchemy import select
from sqlalchemy.orm import Session

from infra.tables import MeasuredRunRow
from planner.run_reuse import StoredRun


def save_runs(session: Session, runs: Iterable[StoredRun]) -> int:
    """Store ``runs``; returns how many."""
    rows = [MeasuredRunRow(workload=r.workload, unit=r.unit, settings=r.settings, concurrency=r.concurrency,
                           run=r.model_dump(mode="json"), measured_at=r.measured_at) for r in runs]
    session.add_all(rows)
    session.flush()
    return len(rows)


def runs_of(session: Session, workload: str) -> list[StoredRun]:
    """Every run stored under ``workload`` (a ``RunWorkload.key()``), oldest first."""
    rows = session.scalars(select(MeasuredRunRow).where(MeasuredRunRow.workload == workload)
                           .order_by(MeasuredRunRow.measured_at, MeasuredRunRow.id))
    return [StoredRun.model_validate(r.run) for r in rows]
