"""``plan.json``: the planner's answer in the CLI's documented shape (snake_case, units in names).

The summary at the top is for reading: a time that grows without bound reads ``"unbounded"``.
The full results below it (``results``) are the stored document, where it is ``null``.
"""

from __future__ import annotations

import math
from typing import Any

from planner.results import ProfilingResults
from planner.types import Engine, Plan, PlanResult
from profiler.model import Figures


def _num(x: float) -> float | str:
    """``x`` to 4 decimals, or ``"unbounded"``."""
    return round(x, 4) if math.isfinite(x) else "unbounded"


def _engine(e: Engine) -> dict[str, Any]:
    return {"tp": e.tp, "pp": e.pp, "dp": e.dp, "ep": e.ep, "gpus": e.gpus, "replicas": e.replicas,
            "nodes": e.nodes, "max_batch": e.max_batch}


def plan_summary(plan: Plan) -> dict[str, Any]:
    """Mode, GPUs, predictions and engines of one plan (``engines``, a list, for a mix of shapes)."""
    p = plan.predicted
    doc: dict[str, Any] = {
        "mode": plan.mode,
        "total_gpus": plan.total_gpus,
        "predicted": {name: _num(getattr(p, name)) for name in Figures.model_fields},
    }
    for key, parts in (("ttft_parts", p.ttft_parts), ("itl_parts", p.itl_parts)):
        if parts is not None:
            doc["predicted"][key] = {name: _num(ms) for name, ms in dict(parts).items()}
    if plan.parts:  # a mix of shapes: each shape's engines and the share of requests/s they serve
        doc["engines"] = [{**_engine(part.engines[0]), "requests_per_s": _num(part.predicted.requests_per_s)}
                          for part in plan.parts]
    for e in () if plan.parts else plan.engines:
        doc["engine" if e.role == "aggregated" else e.role] = _engine(e)
    if plan.cost_per_hour is not None:
        doc["cost_per_hour"] = plan.cost_per_hour
    return doc


def plan_document(result: PlanResult, results: ProfilingResults | None = None) -> dict[str, Any]:
    """The whole ``plan.json``: the chosen plan's summary and its ``margin`` (headroom, % of each
    target) at the top, or the reason and the ``closest`` configuration it names; the full results
    below (``results``: ``ProfilingResults.of(result)`` when the caller has it already)."""
    doc: dict[str, Any] = {"name": result.request.name, "feasible": result.feasible}
    if result.chosen is not None:
        doc.update(plan_summary(result.chosen))
    if result.margin is not None:
        doc["margin"] = {"ttft_pct": round(result.margin.ttft_pct, 1), "itl_pct": round(result.margin.itl_pct, 1),
                         "ttft_basis": result.margin.ttft_basis}
    if result.reason:
        doc["reason"] = result.reason
    if result.closest is not None:
        doc["closest"] = plan_summary(result.closest)
    doc["results"] = (results or ProfilingResults.of(result)).stored()
    return doc
