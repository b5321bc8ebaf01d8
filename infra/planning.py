"""Plan a request with the calibration stored for its model, GPU and backend: the one way the
worker, ``slaplan plan`` and ``slaplan apply`` do it.

Imports no database library: the calibration is looked up by the caller (``infra.calibrations``),
so a command with no database to read never loads SQLAlchemy.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from planner import plan
from planner.types import PlanRequest, PlanResult

if TYPE_CHECKING:
    from infra.calibrations import Calibration
    from profiler.model import Model


def plan_with_calibration(request: PlanRequest, calibration: Calibration | None, *,
                          model: tuple[Model, str] | None = None) -> PlanResult:
    """``planner.plan`` of ``request`` with ``calibration``'s parameters (the shipped ones when None),
    and an assumption naming the calibration its predictions used. ``model``: as ``plan`` takes it."""
    if calibration is None:
        return plan(request, model=model)
    result = plan(request, model=model, params=calibration.params)
    return result._replace(assumptions=(*result.assumptions, calibration.summary()))
