"""The chosen plan of a DGDR as manifests for every deployment target.

Dynamo's DynamoGraphDeployment is the one the worker generated (``status.generatedDeployment``).
The others are rendered again from the stored plan: the results document holds every engine's
parallelism, replicas and sizes, and the request comes from the stored spec, so the renderers
see exactly what the worker saw.
"""

from __future__ import annotations

from typing import Any, NamedTuple

from api.objects import manifests_yaml
from infra.resources import Resource, to_object

TARGETS = ("dynamo", "ome", "kthena", "kubeai")
TARGET_LABELS = {
    "dynamo": "NVIDIA Dynamo — DynamoGraphDeployment",
    "ome": "OME — InferenceService",
    "kthena": "Volcano Kthena — ModelServing",
    "kubeai": "KubeAI — Model",
}


class Rendered(NamedTuple):
    target: str
    text: str  # YAML; empty when not available
    problem: str  # why there is no manifest, in plain words
    note: str = ""  # e.g. that another plan than the chosen one was rendered


def plan_from_doc(doc: dict[str, Any]):
    """A ``planner.types.Plan`` rebuilt from a results document's plan entry."""
    from planner.types import Engine, Plan, Prediction

    engines = []
    for e in doc["engines"]:
        gpus, nodes = int(e["gpusPerEngine"]), max(1, int(e.get("nodesPerEngine") or 1))
        engines.append(
            Engine(
                role=e["role"], tp=e["tp"], pp=e.get("pp", 1), dp=e.get("dp", 1), ep=e.get("ep", 1),
                replicas=e["replicas"], max_batch=e["maxBatch"], max_num_tokens=e.get("maxNumTokens"),
                gpus_per_node=max(1, gpus // nodes),
            )
        )
    p = doc.get("predicted") or {}

    def val(key: str) -> float:
        v = p.get(key)
        return float("inf") if v is None else float(v)

    return Plan(
        model=doc.get("model") or "",
        gpu=doc["gpu"],
        backend=doc["backend"],
        precision=doc.get("precision") or "bf16",
        mode=doc["mode"],
        engines=tuple(engines),
        predicted=Prediction(
            ttft_ms=val("ttftMs"), ttft_p90_ms=val("ttftP90Ms"), ttft_p99_ms=val("ttftP99Ms"), itl_ms=val("itlMs"),
            output_tok_s_per_gpu=val("outputTokPerSecPerGpu"), tok_s_per_user=val("tokPerSecPerUser"),
            requests_per_s=val("requestsPerSec"), concurrency=val("concurrency"),
        ),
        feasible=bool(doc.get("feasible", True)),
        reason=doc.get("reason"),
        cost_per_hour=doc.get("costPerHour"),
    )


def _dump(objects: list[dict[str, Any]]) -> str:
    return manifests_yaml(objects, default_flow_style=False, width=120)


def render_target(resource: Resource, doc: dict[str, Any] | None, target: str) -> Rendered:
    """The manifest(s) of ``target`` for a profiled DGDR, or the reason there are none."""
    if target not in TARGETS:
        return Rendered(target, "", f"unknown target {target!r}; choose one of {', '.join(TARGETS)}")
    generated = resource.status.get("generatedDeployment")
    if target == "dynamo" and isinstance(generated, dict) and generated:
        return Rendered(target, _dump([generated]), "")
    chosen = (doc or {}).get("chosen")
    if not chosen:
        return Rendered(target, "", "no plan was chosen, so there is nothing to deploy")
    from planner.manifests.common import UnsupportedPlan
    from planner.request import RequestError, parse_dgdr

    try:
        request = parse_dgdr(to_object(resource))
        plan = plan_from_doc({"model": doc.get("model"), **chosen})
        try:
            return Rendered(target, _dump(_render(target, plan, request, resource.version)), "")
        except UnsupportedPlan as exc:
            fallback = _aggregated_fallback(doc)
            if fallback is None:
                return Rendered(target, "", f"{exc}; no aggregated candidate meets the SLA")
            note = (f"{exc}. Rendered the cheapest aggregated candidate that meets the SLA instead "
                    f"({fallback.total_gpus} GPUs).")
            return Rendered(target, _dump(_render(target, fallback, request, resource.version)), "", note)
    except UnsupportedPlan as exc:
        return Rendered(target, "", str(exc))
    except (RequestError, KeyError, TypeError, ValueError) as exc:
        return Rendered(target, "", f"could not render this target: {exc}")


def _render(target: str, plan, request, version: str) -> list[dict[str, Any]]:
    if target == "dynamo":
        from planner.manifests.dynamo import render_dgd

        return [render_dgd(plan, request, api_version="v1beta1" if version == "v1beta1" else "v1alpha1")]
    if target == "ome":
        from planner.manifests.ome import render_ome

        return render_ome(plan, request)
    if target == "kthena":
        from planner.manifests.kthena import render_kthena

        return render_kthena(plan, request)
    from planner.manifests.kubeai import render_kubeai

    return render_kubeai(plan, request)


def _aggregated_fallback(doc: dict[str, Any]):
    """The cheapest aggregated Pareto candidate whose predictions meet the SLA, as a Plan."""
    sla = doc.get("sla") or {}

    def ok(entry: dict[str, Any]) -> bool:
        p = entry.get("predicted") or {}
        return all(
            sla.get(k) is None or (p.get(k) is not None and p[k] <= sla[k]) for k in ("ttftMs", "itlMs")
        )

    agg = [e for e in doc.get("pareto") or [] if e.get("mode") == "agg" and ok(e)]
    if not agg:
        return None
    best = min(agg, key=lambda e: (e.get("costPerHour") or e.get("totalGpus") or 0,
                                   -((e.get("predicted") or {}).get("tokPerSecPerUser") or 0)))
    return plan_from_doc({"model": doc.get("model"), **best})
