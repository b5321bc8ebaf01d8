"""The profiling results document a DGDR's status carries (``status.profilingResults``), typed.

Written with ``ProfilingResults.of(result).stored()`` (camelCase keys, units in the names, ``null``
for an unbounded time) and read back with ``ProfilingResults.read(text)``, which gives None for a
document of another shape (any client may write a status); pages read it with
``ResultsParts.read(text)``, part by part. The chosen plan is stored whole —
every engine's parallelism, replicas and limits, the checkpoint, precision and KV-cache dtype —
so every deployment target is rendered from it without planning again. ``aggregatedAlternative``
is the aggregated plan of one engine shape the planner prefers, for targets that cannot run a
disaggregated chosen plan (KubeAI) or a mix of engine shapes (KubeAI, OME, Kthena). ``margin`` is the chosen plan's headroom against the SLA; ``closest`` the
configuration an infeasible answer names, whole, with its predictions.

Units: times in ms, throughputs in output tokens/s (per GPU, per user), rates in requests/s,
cost in $ per hour.
"""


import json
from typing import Any, Self, TypeVar

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from planner.candidate_table import CandidateTable, candidate_table
from planner.choice import preference
from planner.online_part import OnlinePart
from planner.stored import Items, Part, Stored
from planner.types import Backend, Margin, Plan, PlanResult

__all__ = ["MAX_PARETO", "ProfilingResults", "ResultsParts", "Sla", "best_aggregated", "pareto_front"]

MAX_PARETO = 64
# Keys documents stored by earlier versions carry and this one no longer writes: the lowest TTFT
# and the lowest ITL over all candidates, which came from different configurations (see ``closest``).
_RETIRED = ("bestTtftMs", "bestItlMs")
_M = TypeVar("_M", bound=BaseModel)


class Sla(Stored):
    """The targets and load the plan was made for."""

    ttft_ms: float = Field(alias="ttftMs")
    itl_ms: float = Field(alias="itlMs")
    isl_tokens: int = Field(alias="islTokens")
    osl_tokens: int = Field(alias="oslTokens")
    e2e_ms: float | None = Field(default=None, alias="e2eMs")
    request_rate: float | None = Field(default=None, alias="requestRate", description="Poisson requests/s")
    concurrency: int | None = Field(default=None, description="closed-loop clients")


class ProfilingResults(Stored):
    """What planning a DGDR found: the chosen plan (or why none), the Pareto set and every candidate."""

    feasible: bool
    model: str
    gpu: str
    backend: Backend
    sla: Sla
    chosen: Plan | None = None
    aggregated_alternative: Plan | None = Field(default=None, alias="aggregatedAlternative")
    reason: str | None = None
    margin: Margin | None = Field(default=None, description="the chosen plan's headroom against the SLA")
    closest: Plan | None = Field(default=None, description="infeasible: the configuration the reason names")
    pareto: tuple[Plan, ...] = ()
    candidates: CandidateTable | None = Field(default=None, description="every candidate evaluated, compactly")
    assumptions: tuple[str, ...] = ()
    evaluated: int = 0
    online: OnlinePart = Field(default=None, description="the online search (``OnlineSearch``), when candidates "
                                                         "were measured")

    @model_validator(mode="before")
    @classmethod
    def _drop_retired(cls, data: Any) -> Any:
        return {k: v for k, v in data.items() if k not in _RETIRED} if isinstance(data, dict) else data

    @classmethod
    def of(cls, result: PlanResult) -> Self:
        req = result.request
        front = pareto_front(result.candidates)
        single_aggregated = result.chosen is not None and result.chosen.mode == "agg" and not result.chosen.parts
        alternative = best_aggregated(result) if result.chosen is not None and not single_aggregated else None
        return cls(
            feasible=result.feasible, model=req.model, gpu=req.gpu, backend=req.backend,
            sla=Sla(ttft_ms=req.ttft_ms, itl_ms=req.itl_ms, isl_tokens=req.isl_tokens, osl_tokens=req.osl_tokens,
                    e2e_ms=req.e2e_ms, request_rate=req.request_rate, concurrency=req.concurrency),
            chosen=result.chosen, aggregated_alternative=alternative, reason=result.reason,
            margin=result.margin, closest=result.closest, pareto=tuple(front),
            candidates=candidate_table(result, front), assumptions=result.assumptions,
            evaluated=result.evaluated, online=result.online,
        )

    def stored(self) -> dict[str, Any]:
        """The document as the status stores it (JSON-ready; ``chosen`` is null when nothing meets the SLA)."""
        doc = self.model_dump(mode="json", by_alias=True, exclude_none=True)
        return {k: doc.get(k) for k in self.model_dump(by_alias=True) if k in doc or k == "chosen"}

    @classmethod
    def read(cls, raw: Any) -> Self | None:
        """The document in ``raw`` (its JSON text, or the parsed object); None when it is absent,
        a reference (``configmap/<name>``) or of another shape."""
        return _read(cls, raw)


class ResultsParts(BaseModel):
    """What a page can read of a stored results document: each top-level part, and each item of
    its lists (Pareto plans, candidate rows, online trials), read on its own, so that one of
    another shape (any client may write a status) reads as absent and does not hide the rest.
    The fields are those of ``ProfilingResults`` that pages show, none required."""

    model_config = ConfigDict(frozen=True, extra="ignore", validate_by_name=True, validate_by_alias=True,
                              defer_build=True)  # built on first use: the CLI never reads a stored document

    feasible: Part[bool] = None
    model: Part[str] = None
    gpu: Part[str] = None
    backend: Part[Backend] = None
    sla: Part[Sla] = None
    chosen: Part[Plan] = None
    reason: Part[str] = None
    margin: Part[Margin] = None
    closest: Part[Plan] = None
    pareto: Items[Plan] = ()
    candidates: Part[CandidateTable] = None
    assumptions: Items[str] = ()
    evaluated: Part[int] = None
    online: Part[OnlinePart] = None

    @classmethod
    def read(cls, raw: Any) -> Self | None:
        """The readable parts of the document in ``raw`` (as ``ProfilingResults.read`` takes it);
        None when it is absent, a reference, not an object, or has no readable part."""
        parts = _read(cls, raw)
        return parts if parts is not None and any(v not in (None, ()) for v in dict(parts).values()) else None


def _read(model: type[_M], raw: Any) -> _M | None:
    """``raw`` (JSON text of an object, or the parsed object) as ``model``; None when it is not one."""
    if isinstance(raw, str):
        if not raw.lstrip().startswith("{"):
            return None
        try:
            raw = json.loads(raw)
        except (ValueError, RecursionError):
            return None
    try:
        return model.model_validate(raw)
    except (ValidationError, RecursionError):
        return None


def best_aggregated(result: PlanResult) -> Plan | None:
    """The feasible aggregated candidate of one engine shape the planner would choose
    (``planner.choice.preference``)."""
    agg = [p for p in result.candidates if p.mode == "agg" and p.feasible and not p.parts]
    return min(agg, key=lambda p: preference(p, result.request), default=None)


def pareto_front(plans: tuple[Plan, ...] | list[Plan], *, limit: int = MAX_PARETO) -> list[Plan]:
    """Plans not dominated on (tokens/s per user, output tokens/s per GPU), both maximized, of
    those whose predictions are all bounded (an unbounded TTFT is no point to trade against).

    Sorted by tokens/s per user, highest first. When more than ``limit`` remain, an evenly
    spaced subset (always keeping both ends) is returned.
    """
    finite = [p for p in plans if all(map(_finite, (p.predicted.ttft_ms, p.predicted.itl_ms, p.predicted.tok_s_per_user,
                                                    p.predicted.output_tok_s_per_gpu)))]
    ordered = sorted(finite, key=lambda p: (-p.predicted.tok_s_per_user, -p.predicted.output_tok_s_per_gpu))
    front: list[Plan] = []
    best_per_gpu = float("-inf")
    for plan in ordered:
        if plan.predicted.output_tok_s_per_gpu > best_per_gpu:
            front.append(plan)
            best_per_gpu = plan.predicted.output_tok_s_per_gpu
    if len(front) <= limit:
        return front
    if limit < 2:
        return front[: max(limit, 0)]
    step = (len(front) - 1) / (limit - 1)
    return [front[round(i * step)] for i in range(limit)]


def _finite(x: float) -> bool:
    return x == x and abs(x) != float("inf")
