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


import math
from typing import Any, NamedTuple, Self

from pydantic import Field, SerializationInfo, model_serializer, model_validator

from planner.choice import shortfall

from planner.stored import Items, Stored
from planner.types import Mode, Plan, PlanResult, Role
from profiler.model import Unbounded

__all__ = ["COLUMNS", "MAX_ROWS", "CandidateRow", "CandidateTable", "EngineCells", "candidate_table"]

COLUMNS = (
    "mode", "engines", "totalGpus", "ttftMs", "itlMs", "tokPerSecPerUser", "outputTokPerSecPerGpu",
    "requestsPerSec", "costPerHour", "feasible", "reason", "pareto", "chosen",
)
# Rows kept at most (~130 kB): the table lives in the object's status, which must stay well
# under Kubernetes' ~1.5 MB object limit. Beyond it the chosen, Pareto and feasible candidates
# are kept first, then the infeasible ones closest to the SLA.
MAX_ROWS = 1000


def _short(x: float | None) -> float | None:
    """4 significant digits (a missing or unbounded value as it is)."""
    return float(f"{x:.4g}") if x is not None and math.isfinite(x) else x


class EngineCells(NamedTuple):
    """One engine of a row, stored as ``[role, replicas, tp, pp, dp, ep]``."""

    role: Role
    replicas: int
    tp: int
    pp: int
    dp: int
    ep: int


_NUMBERS = ("ttft_ms", "itl_ms", "tok_s_per_user", "output_tok_s_per_gpu", "requests_per_s", "cost_per_hour")


class CandidateRow(Stored):
    """One evaluated candidate: its shape, predictions, verdict and marks."""

    mode: Mode
    engines: tuple[EngineCells, ...]
    total_gpus: int = Field(alias="totalGpus")
    ttft_ms: Unbounded = Field(alias="ttftMs")
    itl_ms: Unbounded = Field(alias="itlMs")
    tok_s_per_user: Unbounded = Field(alias="tokPerSecPerUser")
    output_tok_s_per_gpu: Unbounded = Field(alias="outputTokPerSecPerGpu")
    requests_per_s: Unbounded = Field(alias="requestsPerSec")
    cost_per_hour: float | None = Field(alias="costPerHour", description="$ per hour")
    feasible: bool
    reason: str | None = Field(description="why an infeasible candidate was not chosen")
    pareto: bool = Field(description="on the Pareto front")
    chosen: bool = Field(description="the chosen plan")

    @classmethod
    def of(cls, plan: Plan, *, pareto: bool, chosen: bool) -> Self:
        """The row of ``plan``, its numbers exact (see ``compact``)."""
        p = plan.predicted
        return cls(
            mode=plan.mode, engines=tuple(EngineCells(e.role, e.replicas, e.tp, e.pp, e.dp, e.ep) for e in plan.engines),
            total_gpus=plan.total_gpus, ttft_ms=p.ttft_ms, itl_ms=p.itl_ms, tok_s_per_user=p.tok_s_per_user,
            output_tok_s_per_gpu=p.output_tok_s_per_gpu, requests_per_s=p.requests_per_s,
            cost_per_hour=plan.cost_per_hour, feasible=plan.feasible, reason=plan.reason, pareto=pareto, chosen=chosen,
        )

    def compact(self) -> Self:
        """The row as the table stores it: its numbers to 4 significant digits."""
        return self.model_copy(update={name: _short(getattr(self, name)) for name in _NUMBERS})


class CandidateTable(Stored):
    """The rows kept, of ``total`` evaluated; stored as ``columns`` and ``rows`` of cells (see above).
    Rows are read one by one: a row of another shape is left out."""

    rows: Items[CandidateRow]
    total: int = Field(description="candidates evaluated")
    omitted: int = Field(default=0, description="rows left out to stay under MAX_ROWS")

    @model_validator(mode="before")
    @classmethod
    def _from_cells(cls, data: Any) -> Any:
        """Rows of cells named by ``columns`` (a list of names) as rows by name."""
        if not isinstance(data, dict) or "columns" not in data:
            return data
        columns, rows = data["columns"], data.get("rows")
        if not (isinstance(columns, list) and all(isinstance(c, str) for c in columns) and isinstance(rows, list)):
            raise ValueError("columns must be a list of names and rows a list of rows")
        named = [dict(zip(columns, row)) if isinstance(row, list) and len(row) == len(columns) else row for row in rows]
        return {**{k: v for k, v in data.items() if k != "columns"}, "rows": named}

    @model_serializer(mode="plain")
    def _to_cells(self, info: SerializationInfo) -> dict[str, Any]:
        rows = [row.model_dump(mode=info.mode, by_alias=True) for row in self.rows]
        return {"columns": list(COLUMNS), "rows": [[row[c] for c in COLUMNS] for row in rows], "total": self.total,
                "omitted": self.omitted}


def candidate_table(result: PlanResult, pareto: list[Plan], *, max_rows: int = MAX_ROWS) -> CandidateTable:
    """The table of ``result.candidates``; ``pareto`` (a subset) and the chosen plan are marked."""
    on_front = {id(p) for p in pareto}
    chosen = result.chosen
    req = result.request

    def rank(plan: Plan) -> tuple:
        return (plan is not chosen, id(plan) not in on_front, not plan.feasible, shortfall(plan, req))

    kept = sorted(result.candidates, key=rank)[:max_rows] if len(result.candidates) > max_rows else result.candidates
    rows = tuple(CandidateRow.of(p, pareto=id(p) in on_front,
                                 chosen=chosen is not None and (p is chosen or p == chosen)).compact() for p in kept)
    return CandidateTable(rows=rows, total=len(result.candidates), omitted=len(result.candidates) - len(kept))
