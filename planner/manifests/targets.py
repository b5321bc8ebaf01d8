"""The one registry of deployment targets, and ``render_target``, the one way to a manifest.

| target | API | kind |
|---|---|---|
| ``dynamo`` | ``nvidia.com/v1alpha1`` or ``v1beta1`` | DynamoGraphDeployment |
| ``ome`` | ``ome.io/v1beta1`` | InferenceService |
| ``kthena`` | ``workload.serving.volcano.sh/v1alpha1`` (current) or ``workload.volcano.sh/v1alpha1`` (seed) | ModelServing (+ AutoscalingPolicy for a replica range, current group) |
| ``kubeai`` | ``kubeai.org/v1`` | Model |

Every target renders the plan stored with the request (``planner.results.ProfilingResults``):
the CLI, the API, the dashboard and ``apply`` all come here. A target that cannot run the
chosen plan (KubeAI and disaggregation; KubeAI, OME and Kthena and a mix of engine shapes) renders
the stored aggregated alternative of one shape instead, and a note says so in one line; when it cannot run that either, ``UnsupportedPlan`` says why.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NamedTuple

from planner.manifests.common import UnsupportedPlan, scales
from planner.manifests.dynamo import DGD_KIND, hpa_scales, render_dgd
from planner.manifests.kthena import CURRENT_GROUP, KIND as KTHENA_KIND, LEGACY_GROUP, render_kthena
from planner.manifests.kthena_scaling import ENGINE_GAUGES
from planner.manifests.kubeai import API_VERSION as KUBEAI_API_VERSION, render_kubeai
from planner.manifests.ome import API_VERSION as OME_API_VERSION, render_ome
from planner.results import ProfilingResults
from planner.types import Plan, PlanRequest

__all__ = ["REGISTRY", "TARGETS", "TARGET_KINDS", "Rendered", "Target", "render_plan", "render_target", "scaling_text"]


class Options(NamedTuple):
    """API versions to render for: Dynamo's DGD version and Kthena's API group."""

    dynamo_version: str = "v1alpha1"
    kthena_group: str = LEGACY_GROUP


class Target(NamedTuple):
    """A deployment system: how it is named and served, and its renderer."""

    label: str
    groups: tuple[str, ...]  # API groups, preferred first
    versions: tuple[str, ...]  # API versions, preferred first
    kind: str
    render: Callable[[Plan, PlanRequest, Options], list[dict[str, Any]]]
    scaling: Callable[[Plan, Options], str | None]  # how it emits the plan's replica range; None: fixed


def _dynamo_scaling(plan: Plan, o: Options) -> str | None:
    if o.dynamo_version == "v1beta1":
        return "scalingAdapter on each scaled worker, for an HPA, KEDA or Dynamo's planner"
    if any(hpa_scales(e) for e in plan.engines):
        return ("autoscaling on each scaled single-node worker: an HPA on requests in flight, made by "
                "operators that serve v1alpha1 only, outside Grove")
    return None


def _kthena_scaling(plan: Plan, o: Options) -> str | None:
    if o.kthena_group == CURRENT_GROUP and plan.backend in ENGINE_GAUGES:
        return "an AutoscalingPolicy on the scaled roles, on running and queued requests per engine"
    return None


REGISTRY: dict[str, Target] = {
    "dynamo": Target("NVIDIA Dynamo — DynamoGraphDeployment", ("nvidia.com",), ("v1alpha1", "v1beta1"), DGD_KIND,
                     lambda p, r, o: [render_dgd(p, r, api_version=o.dynamo_version)], _dynamo_scaling),
    "ome": Target("OME — InferenceService", (OME_API_VERSION.split("/")[0],), (OME_API_VERSION.split("/")[1],),
                  "InferenceService", lambda p, r, o: render_ome(p, r), lambda p, o: None),
    "kthena": Target("Volcano Kthena — ModelServing", (CURRENT_GROUP, LEGACY_GROUP), ("v1alpha1",), KTHENA_KIND,
                     lambda p, r, o: render_kthena(p, r, api_group=o.kthena_group), _kthena_scaling),
    "kubeai": Target("KubeAI — Model", (KUBEAI_API_VERSION.split("/")[0],), (KUBEAI_API_VERSION.split("/")[1],),
                     "Model", lambda p, r, o: render_kubeai(p, r),
                     lambda p, o: "minReplicas/maxReplicas, KubeAI's autoscaler aiming at targetRequests"),
}
TARGETS = tuple(REGISTRY)
# target → (API groups, versions in order of preference, kind): what a cluster must serve
TARGET_KINDS: dict[str, tuple[tuple[str, ...], tuple[str, ...], str]] = {
    name: (t.groups, t.versions, t.kind) for name, t in REGISTRY.items()}


def scaling_text(plan: Plan, *, dynamo_version: str = "v1alpha1", kthena_group: str = LEGACY_GROUP) -> str | None:
    """Which replica range ``plan``'s manifests emit, target by target (None when its replicas are
    fixed): ``aggregated 1–2 engines: kubeai (minReplicas/maxReplicas, …); fixed at the planned
    count for ome, kthena workload.volcano.sh``."""
    ranged = [e for e in plan.engines if scales(e)]
    if not ranged:
        return None
    options = Options(dynamo_version, kthena_group)
    label = {"dynamo": f"dynamo {dynamo_version}", "kthena": f"kthena {kthena_group}"}
    how = {name: t.scaling(plan, options) for name, t in REGISTRY.items()}
    emitted = [f"{label.get(n, n)} ({h})" for n, h in how.items() if h]
    fixed = [label.get(n, n) for n, h in how.items() if not h]
    engines = ", ".join(f"{e.role}{' ' + e.tag if plan.parts else ''} {e.min_replicas}–{e.replicas}" for e in ranged)
    return (f"{engines} engines: " + "; ".join(emitted)
            + (f"; fixed at the planned count for {', '.join(fixed)}" if fixed else ""))


class Rendered(NamedTuple):
    """The objects of one target, and notes (one line each) on what was rendered instead."""

    objects: list[dict[str, Any]]
    notes: list[str]


def render_plan(plan: Plan, request: PlanRequest, target: str, *, dynamo_version: str = "v1alpha1",
                kthena_group: str = LEGACY_GROUP) -> list[dict[str, Any]]:
    """The objects of ``target`` for exactly ``plan`` (no alternative); raises ``UnsupportedPlan``
    when the target cannot run it."""
    return REGISTRY[target].render(plan, request, Options(dynamo_version, kthena_group))


def render_target(results: ProfilingResults, request: PlanRequest, target: str, *,
                  dynamo_version: str = "v1alpha1", kthena_group: str = LEGACY_GROUP) -> Rendered:
    """The manifests of ``target`` for the plan stored in ``results`` (made for ``request``).

    Raises ``ValueError`` for an unknown target or nothing to deploy, and ``UnsupportedPlan`` (a
    ValueError, one line) when the target can run neither the chosen plan nor its alternative.
    """
    if target not in REGISTRY:
        raise ValueError(f"target must be one of {', '.join(TARGETS)}, not {target!r}")
    chosen = results.chosen
    if chosen is None:
        raise ValueError(f"no plan to render: {results.reason or 'the SLA cannot be met'}")
    options = {"dynamo_version": dynamo_version, "kthena_group": kthena_group}
    try:
        return Rendered(render_plan(chosen, request, target, **options), [])
    except UnsupportedPlan as exc:
        alternative = results.aggregated_alternative
        if alternative is None:
            raise UnsupportedPlan(f"{target}: {exc}") from None
        try:
            objects = render_plan(alternative, request, target, **options)
        except UnsupportedPlan as again:
            raise UnsupportedPlan(f"{target}: {exc}; the aggregated alternative neither: {again}") from None
        return Rendered(objects, [f"{target}: {exc}; wrote the aggregated plan of one engine shape the planner "
                                  f"prefers instead ({alternative.shape()}, {alternative.total_gpus} GPUs, TTFT {alternative.predicted.ttft_ms:.0f} ms, "
                                  f"ITL {alternative.predicted.itl_ms:.1f} ms)"])
