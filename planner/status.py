"""The status of a DynamoGraphDeploymentRequest (``nvidia.com/v1alpha1``), built from a plan.

Shape (the seed API reference and the upstream CRDs)::

    status:
      state: Pending | Profiling | Deploying | Ready | DeploymentDeleted | Failed
      observedGeneration: 3
      backend: vllm
      conditions: [{type, status, reason, message, lastTransitionTime, observedGeneration}]  # planner.conditions
        # types: Validation, Profiling, SpecGenerated, DeploymentReady
      profilingResults: "<string>"
      generatedDeployment: {apiVersion, kind, metadata, spec}   # the full DGD
      deployment: {name, namespace, state, created}              # autoApply only

Where the structured results go. In v1alpha1 ``profilingResults`` is a *string* (upstream
stores a reference, ``"configmap/<name>"``, to a ConfigMap holding the profiler's output). A
plan's results — the chosen configuration, its predicted TTFT/ITL/throughput and GPUs, the
Pareto set of candidates, the assumptions, and the reason when the SLA cannot be met — are a
structured document (``planner.results.ProfilingResults``), so:

- by default ``profilingResults`` holds that document itself, serialized as compact JSON (a
  valid string under both the seed and the CRDs, readable with ``json.loads``, and needing no
  other object in the cluster);
- when the caller stores the document elsewhere (e.g. a ConfigMap built from
  ``ProfilingResults``), ``results_ref="configmap/<name>"`` puts that reference there
  instead, as upstream does.

The Pareto set is capped at ``planner.results.MAX_PARETO`` points to keep the status object small
(Kubernetes objects must stay well under ~1.5 MB).

Units: times in ms (``...Ms``), throughputs in output tokens/s per GPU and tokens/s per user,
request rates in requests/s, cost in $ per hour.
"""

from __future__ import annotations

import json
from typing import Any

from planner.choice import margin_text
from planner.conditions import Condition, read_conditions
from planner.request import profiling_label
from planner.results import ProfilingResults
from planner.types import Margin, Plan, PlanResult

__all__ = [
    "CONDITION_TYPES",
    "STATES",
    "TERMINAL",
    "UNFINISHED",
    "dgdr_status",
    "validation_failed_status",
]

STATES = ("Pending", "Profiling", "Deploying", "Ready", "DeploymentDeleted", "Failed")
TERMINAL = frozenset({"Ready", "Failed", "DeploymentDeleted"})  # nothing left to do for the generation
UNFINISHED = frozenset({"", "Pending", "Profiling", "Deploying"})  # a worker still has to act ("": never set)
CONDITION_TYPES = ("Validation", "Profiling", "SpecGenerated", "DeploymentReady")


# --------------------------------------------------------------------------- conditions


def _keep_transition_times(conditions: list[Condition], previous: dict[str, Any] | None) -> list[Condition]:
    """Keep ``lastTransitionTime`` of conditions whose status did not change (Kubernetes rule)."""
    before = {c.type: c for c in read_conditions(previous)}
    out = []
    for cond in conditions:
        old = before.get(cond.type)
        if old is not None and old.status == cond.status and old.last_transition_time:
            cond = cond.model_copy(update={"last_transition_time": old.last_transition_time})
        out.append(cond)
    return out


def _infeasible_message(result: PlanResult) -> str:
    """The reason, which names the configuration closest to the SLA with its own numbers."""
    return result.reason or "no configuration meets the SLA"


def _chosen_message(plan: Plan, kept: Margin | None) -> str:
    p = plan.predicted
    engines = ", ".join(
        f"{e.replicas}x {e.role} (tp{e.tp}" + (f" pp{e.pp}" if e.pp > 1 else "") + (f" dp{e.dp}" if e.dp > 1 else "")
        + (f" ep{e.ep}" if e.ep > 1 else "") + ")"
        for e in plan.engines
    )
    return (
        f"{plan.mode} {plan.backend} on {plan.total_gpus} {plan.gpu} GPUs: {engines}; predicted TTFT "
        f"{p.ttft_ms:.1f} ms, ITL {p.itl_ms:.2f} ms, {p.output_tok_s_per_gpu:.0f} output tok/s/GPU"
        + (f"; margin: {margin_text(kept)}" if kept is not None else "")
    )


def _conditions(
    result: PlanResult | None, dgd: dict | None, state: str, error: str | None
) -> list[tuple[str, str, str, str]]:
    """(type, status, reason, message) of the four conditions for ``state``."""
    pending = ("Unknown", "NotStarted", "waiting for an earlier step")
    validation = ("True", "SpecValid", "the request is valid")
    profiling, generated, ready = pending, pending, pending
    feasible = result is not None and result.feasible and result.chosen is not None
    auto_apply = result is not None and result.request.auto_apply

    if state == "Pending":
        pass
    elif state == "Profiling":
        profiling = ("False", "ProfilingRunning", "searching for the cheapest configuration that meets the SLA")
    elif result is not None and not feasible:
        profiling = ("False", "SLAInfeasible", _infeasible_message(result))
        generated = ("False", "SLAInfeasible", "no deployment generated: the SLA cannot be met")
        ready = ("False", "NoDeployment", "no deployment generated")
    elif result is None and state == "Failed":
        profiling = ("False", "ProfilingFailed", error or "profiling failed")
    elif result is not None:
        ran = profiling_label(result.online is not None)
        profiling = ("True", "ProfilingCompleted", f"{ran}: {_chosen_message(result.chosen, result.margin)}")
        if dgd is not None:
            generated = ("True", "SpecGenerated", "the deployment is in status.generatedDeployment")
        elif state == "Failed":
            generated = ("False", "SpecGenerationFailed", error or "the deployment could not be generated")
        if state == "Ready":
            ready = (
                ("True", "DeploymentReady", "the deployment is ready")
                if auto_apply
                else ("False", "AutoApplyDisabled", "autoApply is false: apply status.generatedDeployment yourself")
            )
        elif state == "Deploying":
            ready = ("False", "DeploymentInProgress", "waiting for the deployment to become ready")
        elif state == "DeploymentDeleted":
            ready = ("False", "DeploymentDeleted", "the deployment was deleted; it is not recreated")
        elif state == "Failed":
            ready = ("False", "DeploymentFailed", error or "the deployment failed")
    return [
        ("Validation", *validation),
        ("Profiling", *profiling),
        ("SpecGenerated", *generated),
        ("DeploymentReady", *ready),
    ]


def _check_state(result: PlanResult | None, dgd: dict | None, state: str) -> None:
    if state not in STATES:
        raise ValueError(f"state must be one of {', '.join(STATES)}, not {state!r}")
    if state in ("Deploying", "Ready", "DeploymentDeleted"):
        if result is None or not result.feasible or result.chosen is None or dgd is None:
            raise ValueError(f"state {state} needs a feasible result and its generated deployment")
    if state in ("Deploying", "DeploymentDeleted") and not result.request.auto_apply:
        raise ValueError(f"state {state} only happens with autoApply")


def _deployment(dgd: dict, state: str) -> dict[str, Any]:
    """``status.deployment``: the applied DGD; its state mirrors the DGD's own when known."""
    meta = dgd.get("metadata") or {}
    out: dict[str, Any] = {"name": meta.get("name"), "namespace": meta.get("namespace"), "created": True}
    live = (dgd.get("status") or {}).get("state")
    if live:
        out["state"] = live
    elif state == "Ready":
        out["state"] = "successful"
    elif state == "Deploying":
        out["state"] = "pending"
    return out


def _generated(dgd: dict) -> dict[str, Any]:
    """The DGD as stored in ``status.generatedDeployment``: spec and metadata, no live status."""
    return {k: v for k, v in dgd.items() if k != "status"}


def dgdr_status(
    result: PlanResult | None,
    dgd: dict | None,
    *,
    observed_generation: int,
    state: str,
    now: str,
    error: str | None = None,
    results_ref: str | None = None,
    previous: dict | None = None,
) -> dict[str, Any]:
    """The DGDR ``status`` for ``state``, given the plan result and the generated DGD.

    ``result`` may be None while Pending/Profiling or when profiling crashed (then ``error``
    says why and ``state`` is Failed). An infeasible result belongs to state Failed, with the
    reason (naming the closest configuration and its TTFT/ITL) in the Profiling condition. ``now`` is an RFC 3339
    timestamp used as ``lastTransitionTime`` of conditions that changed since ``previous``
    (the prior status, if any). ``results_ref``: see the module docstring. Raises
    ``ValueError`` for a state the inputs cannot be in (e.g. Ready without a deployment).
    """
    _check_state(result, dgd, state)
    conditions = _keep_transition_times(
        [Condition.of(t, s, r, m, now=now, generation=observed_generation)
         for t, s, r, m in _conditions(result, dgd, state, error)], previous)
    status: dict[str, Any] = {"state": state, "observedGeneration": observed_generation}
    if result is not None:
        status["backend"] = result.request.backend
    status["conditions"] = [c.stored() for c in conditions]
    if result is not None and state != "Profiling":
        status["profilingResults"] = results_ref or json.dumps(
            ProfilingResults.of(result).stored(), separators=(",", ":"), allow_nan=False
        )
    if dgd is not None and state != "Profiling":
        status["generatedDeployment"] = _generated(dgd)
    if dgd is not None and result is not None and result.request.auto_apply and state in (
        "Deploying",
        "Ready",
        "DeploymentDeleted",
    ):
        status["deployment"] = _deployment(dgd, state)
    return status


def validation_failed_status(messages: list[str], *, observed_generation: int, now: str) -> dict[str, Any]:
    """The status of a request rejected before planning (state Failed, Validation False).

    ``messages``: one line per problem, e.g. ``"spec.sla.ttft: must be greater than 0"``.
    """
    not_run = ("Unknown", "NotStarted", "the request failed validation")
    rows = [("Validation", "False", "ValidationFailed", "; ".join(messages) or "the request is invalid")]
    rows += [(t, *not_run) for t in CONDITION_TYPES[1:]]
    return {
        "state": "Failed",
        "observedGeneration": observed_generation,
        "conditions": [Condition.of(t, s, r, m, now=now, generation=observed_generation).stored() for t, s, r, m in rows],
    }
