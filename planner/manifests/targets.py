"""One entry point for every deployment target: ``render_target(result, target, ...)``.

Targets and what they create:

| target | API | kind |
|---|---|---|
| ``dynamo`` | ``nvidia.com/v1alpha1`` or ``v1beta1`` | DynamoGraphDeployment |
| ``ome`` | ``ome.io/v1beta1`` | InferenceService |
| ``kthena`` | ``workload.serving.volcano.sh/v1alpha1`` (current) or ``workload.volcano.sh/v1alpha1`` (seed) | ModelServing |
| ``kubeai`` | ``kubeai.org/v1`` | Model |

A target that cannot express the chosen plan (KubeAI and disaggregation) gets the cheapest
feasible aggregated plan instead, and a note says so.
"""

from __future__ import annotations

from planner.manifests.common import UnsupportedPlan
from planner.manifests.dynamo import DGD_KIND, render_dgd
from planner.manifests.kthena import CURRENT_GROUP, KIND as KTHENA_KIND, LEGACY_GROUP, render_kthena
from planner.manifests.kubeai import API_VERSION as KUBEAI_API_VERSION, render_kubeai
from planner.manifests.ome import API_VERSION as OME_API_VERSION, render_ome
from planner.types import Plan, PlanResult

__all__ = ["TARGETS", "TARGET_KINDS", "best_aggregated", "render_target"]

TARGETS = ("dynamo", "ome", "kthena", "kubeai")

# target → (API group, candidate versions in order of preference, kind)
TARGET_KINDS: dict[str, tuple[tuple[str, ...], tuple[str, ...], str]] = {
    "dynamo": (("nvidia.com",), ("v1alpha1", "v1beta1"), DGD_KIND),
    "ome": ((OME_API_VERSION.split("/")[0],), (OME_API_VERSION.split("/")[1],), "InferenceService"),
    "kthena": ((CURRENT_GROUP, LEGACY_GROUP), ("v1alpha1",), KTHENA_KIND),
    "kubeai": ((KUBEAI_API_VERSION.split("/")[0],), (KUBEAI_API_VERSION.split("/")[1],), "Model"),
}


def best_aggregated(result: PlanResult) -> Plan | None:
    """The cheapest feasible aggregated candidate (then the fastest per user)."""
    agg = [p for p in result.candidates if p.mode == "agg" and p.feasible]
    return min(agg, key=lambda p: (p.cost_per_hour or p.total_gpus, -p.predicted.tok_s_per_user), default=None)


def render_target(result: PlanResult, target: str, *, dynamo_version: str = "v1alpha1",
                  kthena_group: str = LEGACY_GROUP, plan: Plan | None = None) -> tuple[list[dict], list[str]]:
    """The manifests of ``target`` for the chosen plan of ``result`` (or ``plan``), and notes.

    Raises ``ValueError`` for an unknown target, an infeasible result, or a plan the target
    cannot express when no aggregated plan meets the SLA.
    """
    if target not in TARGETS:
        raise ValueError(f"target must be one of {', '.join(TARGETS)}, not {target!r}")
    chosen = plan or result.chosen
    if chosen is None:
        raise ValueError(f"no plan to render: {result.reason or 'the SLA cannot be met'}")
    req = result.request

    def render(p: Plan) -> list[dict]:
        if target == "dynamo":
            return [render_dgd(p, req, api_version=dynamo_version)]
        if target == "ome":
            return render_ome(p, req)
        if target == "kthena":
            return render_kthena(p, req, api_group=kthena_group)
        return render_kubeai(p, req)

    try:
        return render(chosen), []
    except UnsupportedPlan as exc:
        fallback = best_aggregated(result)
        if fallback is None:
            raise UnsupportedPlan(f"{target}: {exc}; no aggregated plan meets the SLA") from None
        return render(fallback), [f"{target}: {exc}; rendered the best aggregated plan instead "
                                  f"({fallback.total_gpus} GPUs)"]
