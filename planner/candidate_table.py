"""Every evaluated candidate of a plan, compactly: one row each, for the candidate table.

Shape (inside the profiling results document)::

    candidates:
      columns: [mode, engines, totalGpus, ttftMs, itlMs, tokPerSecPerUser,
                outputTokPerSecPerGpu, requestsPerSec, costPerHour, feasible, reason, pareto, chosen]
      rows: [["disagg", [["prefill", 2, 8, 1, 1, 8], ["decode", 1, 16, 1, 16, 16]], 32, 812.3, ...], ...]
      total: 272        # candidates evaluated
      omitted: 0        # rows left out to stay under MAX_ROWS

``engines`` lists ``[role, replicas, tp, pp, dp, ep]`` per engine. Times in ms, throughputs in
output tokens/s (per GPU, per user), requests/s, $ per hour; numbers keep 4 significant digits
and an unreachable prediction is null. ``reason`` says why an infeasible candidate was not
chosen. About 130 bytes a row: DeepSeek-V3 on 16 H200 (272 candidates) adds ~35 kB.
"""

from __future__ import annotations

import math
from typing import Any

from planner.choice import shortfall
from planner.types import Plan, PlanResult

__all__ = ["COLUMNS", "MAX_ROWS", "candidate_table"]

COLUMNS = (
    "mode", "engines", "totalGpus", "ttftMs", "itlMs", "tokPerSecPerUser", "outputTokPerSecPerGpu",
    "requestsPerSec", "costPerHour", "feasible", "reason", "pareto", "chosen",
)
# Rows kept at most (~130 kB): the table lives in the object's status, which must stay well
# under Kubernetes' ~1.5 MB object limit. Beyond it the chosen, Pareto and feasible candidates
# are kept first, then the infeasible ones closest to the SLA.
MAX_ROWS = 1000


def _short(x: float | None) -> float | None:
    """4 significant digits; None for a missing or unreachable value."""
    if x is None or not math.isfinite(x):
        return None
    return float(f"{x:.4g}")


def _row(plan: Plan, *, pareto: bool, chosen: bool) -> list[Any]:
    p = plan.predicted
    engines = [[e.role, e.replicas, e.tp, e.pp, e.dp, e.ep] for e in plan.engines]
    return [
        plan.mode, engines, plan.total_gpus, _short(p.ttft_ms), _short(p.itl_ms), _short(p.tok_s_per_user),
        _short(p.output_tok_s_per_gpu), _short(p.requests_per_s), _short(plan.cost_per_hour),
        plan.feasible, plan.reason, pareto, chosen,
    ]


def candidate_table(result: PlanResult, pareto: list[Plan], *, max_rows: int = MAX_ROWS) -> dict[str, Any]:
    """The table of ``result.candidates``; ``pareto`` (a subset) and the chosen plan are marked."""
    on_front = {id(p) for p in pareto}
    chosen = result.chosen
    req = result.request

    def rank(plan: Plan) -> tuple:
        return (plan is not chosen, id(plan) not in on_front, not plan.feasible, shortfall(plan, req))

    kept = sorted(result.candidates, key=rank)[:max_rows] if len(result.candidates) > max_rows else result.candidates
    rows = [_row(p, pareto=id(p) in on_front, chosen=chosen is not None and (p is chosen or p == chosen)) for p in kept]
    return {"columns": list(COLUMNS), "rows": rows, "total": len(result.candidates), "omitted": len(result.candidates) - len(kept)}
