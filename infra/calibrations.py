"""The repository of calibrations: parameters fitted to one (model, GPU, backend)'s
measurements, used by later plans of the same three. Returns frozen domain objects."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from pydantic import BaseModel, ConfigDict, Field
from sqlalchemy import select
from sqlalchemy.exc import SQLAlchemyError
from sqlalchemy.orm import Session

from infra.db import make_engine, make_session_factory, session_scope
from infra.settings import Settings
from infra.tables import CalibrationRow
from profiler.model.errors import ModelError
from profiler.model.measured import DeploymentFit, calibration_key, held_out_text


class Calibration(BaseModel):
    """A stored calibration and its provenance."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    model: str = Field(description="canonical model id (profiler.model.measured.calibration_key)")
    gpu: str
    backend: str
    params: dict[str, float]
    deployment: dict[str, Any] = Field(description="the deployment measured (a ServingConfig's fields)")
    fit: DeploymentFit = Field(description="errors before/after, points, scale, names refined")
    source: str = Field(description="what was measured, e.g. the result folders or the BenchmarkJob")
    calibrated_at: datetime

    def summary(self) -> str:
        """One line for a plan's assumptions and the CLI."""
        f = self.fit
        held = held_out_text(f.held_out)
        return (f"calibrated on {f.points} measured point(s) of {self.source} ({self.calibrated_at:%Y-%m-%d %H:%M} UTC): "
                f"{f.times}, TTFT MdAPE {f.before.ttft_mdape_pct:.1f}% → {f.after.ttft_mdape_pct:.1f}%, "
                f"TPOT {f.before.tpot_mdape_pct:.1f}% → {f.after.tpot_mdape_pct:.1f}%" + (f"; {held}" if held else ""))


def _public(row: CalibrationRow) -> Calibration:
    at = row.calibrated_at if row.calibrated_at.tzinfo else row.calibrated_at.replace(tzinfo=UTC)
    return Calibration(model=row.model, gpu=row.gpu, backend=row.backend, params=row.params,
                       deployment=row.deployment, fit=DeploymentFit.model_validate(row.fit), source=row.source,
                       calibrated_at=at)


def _row(session: Session, key: tuple[str, str, str]) -> CalibrationRow | None:
    model, gpu, backend = key
    return session.scalars(select(CalibrationRow).where(
        CalibrationRow.model == model, CalibrationRow.gpu == gpu, CalibrationRow.backend == backend)).first()


def save_calibration(session: Session, key: tuple[str, str, str], fit: DeploymentFit, *,
                     deployment: dict[str, Any], source: str, now: datetime | None = None) -> Calibration:
    """Store ``fit`` under ``key`` (from ``calibration_key``), replacing an older one."""
    row = _row(session, key)
    if row is None:
        model, gpu, backend = key
        row = CalibrationRow(model=model, gpu=gpu, backend=backend)
        session.add(row)
    row.params, row.fit = dict(fit.params), fit.model_dump(mode="json")
    row.deployment, row.source = deployment, source[:1024]
    row.calibrated_at = now or datetime.now(UTC)
    session.flush()
    return _public(row)


def get_calibration(session: Session, key: tuple[str, str, str]) -> Calibration | None:
    """The calibration stored under ``key``, if any."""
    row = _row(session, key)
    return None if row is None else _public(row)


def delete_calibration(session: Session, key: tuple[str, str, str]) -> bool:
    """Delete the calibration stored under ``key``; False when there was none."""
    row = _row(session, key)
    if row is not None:
        session.delete(row)
    return row is not None


def list_calibrations(session: Session) -> list[Calibration]:
    """Every stored calibration, by model, GPU and backend."""
    rows = session.scalars(select(CalibrationRow).order_by(CalibrationRow.model, CalibrationRow.gpu,
                                                            CalibrationRow.backend))
    return [_public(r) for r in rows]


def find_calibration(session: Session, model: str, gpu: str, backend: str) -> Calibration | None:
    """The calibration for a request's model, GPU and backend (aliases resolved); None when there is
    none or the names are unknown to the catalog (a Hub model, say: never calibrated)."""
    try:
        key = calibration_key(model, gpu, backend)
    except ModelError:
        return None
    return get_calibration(session, key)


def read_calibrations(settings: Settings, wanted: list[tuple[str, str, str]]
                      ) -> tuple[dict[tuple[str, str, str], Calibration], str | None]:
    """``find_calibration`` of each (model, gpu, backend) in ``wanted`` from the settings' database,
    for commands that work without a service: (those found, None), or ({}, why none could be
    read). A SQLite file that does not exist is not created."""
    if not settings.database_exists:
        return {}, None
    engine = make_engine(settings)
    try:
        with session_scope(make_session_factory(engine)) as session:
            found = {key: find_calibration(session, *key) for key in set(wanted)}
        return {k: v for k, v in found.items() if v is not None}, None
    except SQLAlchemyError as exc:
        return {}, f"calibrations not read from {settings.database_label}: {str(exc).splitlines()[0]}"
    finally:
        engine.dispose()

