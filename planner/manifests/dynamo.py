"""Render a plan as an NVIDIA Dynamo ``DynamoGraphDeployment`` (DGD).

Two API versions:

- ``v1alpha1``: ``spec.services.<Name>``, each with ``componentType`` (frontend | worker),
  ``subComponentType`` (prefill | decode, disaggregated workers only), ``replicas`` (engines),
  ``resources.limits.gpu`` (a string: GPUs per *pod*), ``multinode.nodeCount`` (pods per engine,
  only when an engine spans nodes; GPUs per engine = nodeCount × gpu) and
  ``extraPodSpec.mainContainer{image, workingDir, command, args}``.
- ``v1beta1``: ``spec.components[]`` with ``name``, ``type`` (frontend | worker | prefill |
  decode), ``replicas``, ``multinode.nodeCount`` and a pod template whose ``main`` container
  asks for ``nvidia.com/gpu`` (``amd.com/gpu`` on AMD GPUs) per pod.

Service names follow upstream: disaggregated vLLM ``VllmPrefillWorker``/``VllmDecodeWorker``,
SGLang ``prefill``/``decode``, TRT-LLM ``TRTLLMPrefillWorker``/``TRTLLMDecodeWorker``; the
aggregated worker is ``VllmDecodeWorker`` / ``decode`` / ``TRTLLMWorker`` as in upstream's
aggregated templates; a mix of engine shapes has one aggregated worker service per shape, named
with its parallelism (``VllmDecodeWorker-tp8``, ``VllmDecodeWorker-tp4``), behind the one frontend,
which routes to every worker of the model. Parallelism and disaggregation are the backend's own engine flags; the
operator wires multi-node engines itself.

Autoscaling: a worker whose replicas have a range (a budget filled with no load stated: from one
unit to the budget's units) gets ``scalingAdapter: {}`` in ``v1beta1``: the operator then creates a
DynamoGraphDeploymentScalingAdapter that owns its replicas, for an HPA, KEDA or Dynamo's planner to
scale, and the annotation ``slaplan.io/replica-range`` records each such component's
``[min, max]`` for that autoscaler. In ``v1alpha1`` a single-node worker with a range gets
``autoscaling {enabled, minReplicas, maxReplicas, metrics}``: the operators that serve
v1alpha1 only (2025 releases) turn it into a HorizontalPodAutoscaler of the worker's Deployment,
but only in component mode (not under Grove) and not for multi-node (LeaderWorkerSet) workers,
so a DGD whose workers are all single-node and one of them scaled also gets
``nvidia.com/enable-grove: "false"``; multi-node workers keep fixed replicas. The HPA aims at
``dynamo_component_inflight_requests`` (requests in flight at a worker, a Pods metric that a
custom-metrics adapter must serve) averaging the worker's running-sequence limit. Operators that
also serve v1beta1 ignore ``autoscaling`` (deprecated there): use v1beta1 with them.

The DGD carries the labels ``dgdr.nvidia.com/name``, ``dgdr.nvidia.com/namespace`` and
``nvidia.com/managed-by: slaplan`` (plus the shared ``app.kubernetes.io/*`` ones and the
request's own), and no ownerReference: it outlives the request that produced it.
"""

from __future__ import annotations

import json
from typing import Any, Literal

from planner.manifests.common import (
    MANAGED_BY,
    annotations,
    deployment_name,
    dns_name,
    gpu_resource,
    deployment_namespace,
    engine_args,
    engines_in_order,
    image_for,
    labels,
    model_args,
    scales,
    worker_command,
)
from planner.types import Backend, Engine, Plan, PlanRequest, Role

__all__ = ["DGD_KIND", "GROVE_ANNOTATION", "HF_TOKEN_SECRET", "REPLICA_RANGE_ANNOTATION", "dgd_labels", "hpa_scales",
           "render_dgd", "replica_ranges", "service_name"]

DGD_KIND = "DynamoGraphDeployment"
REPLICA_RANGE_ANNOTATION = "slaplan.io/replica-range"
GROVE_ANNOTATION = "nvidia.com/enable-grove"  # "false": component mode (Deployments, LeaderWorkerSets)
INFLIGHT_METRIC = "dynamo_component_inflight_requests"  # a worker's requests in flight (gauge)
HF_TOKEN_SECRET = "hf-token-secret"  # upstream convention: a Secret holding HF_TOKEN

_SERVICE_NAMES: dict[Backend, dict[Role, str]] = {
    "vllm": {"aggregated": "VllmDecodeWorker", "prefill": "VllmPrefillWorker", "decode": "VllmDecodeWorker"},
    "sglang": {"aggregated": "decode", "prefill": "prefill", "decode": "decode"},
    "trtllm": {"aggregated": "TRTLLMWorker", "prefill": "TRTLLMPrefillWorker", "decode": "TRTLLMDecodeWorker"},
}

# Working directories of upstream's runtime images (where their example configs live).
_WORKING_DIRS: dict[Backend, str] = {
    "vllm": "/workspace/examples/backends/vllm",
    "sglang": "/workspace/examples/backends/sglang",
    "trtllm": "/workspace/",
}


def service_name(backend: Backend, role: Role) -> str:
    """The DGD service (v1alpha1) / component (v1beta1) name of an engine role."""
    return _SERVICE_NAMES[backend][role]


def _service(plan: Plan, engine: Engine) -> str:
    """The service of ``engine`` in ``plan``; in a mix of shapes each shape's own, named by its
    parallelism (``VllmDecodeWorker-tp8``), all behind the one frontend."""
    name = service_name(plan.backend, engine.role)
    return f"{name}-{engine.tag}" if plan.parts else name


def dgd_labels(request: PlanRequest) -> dict[str, str]:
    """Labels of a DGD created from ``request``: the DGDR's identity and who manages it."""
    return labels(
        request,
        **{
            "dgdr.nvidia.com/name": _label_value(request.name),
            "dgdr.nvidia.com/namespace": request.namespace,
            "nvidia.com/managed-by": MANAGED_BY,
        },
    )


def _label_value(text: str) -> str:
    """``text`` if it fits a label value (63 characters), else a shortened stable form."""
    return text if len(text) <= 63 else dns_name(text)


def _pods(engine: Engine) -> tuple[int, int]:
    """(GPUs per pod, pods per engine); an engine must split evenly over its pods."""
    nodes, per_pod = engine.nodes, engine.gpus_per_pod
    if per_pod * nodes != engine.gpus:
        raise ValueError(
            f"{engine.role} engine of {engine.gpus} GPUs does not split evenly over {nodes} pods "
            f"of at most {engine.gpus_per_node} GPUs"
        )
    return per_pod, nodes


def _args(plan: Plan, engine: Engine) -> list[str]:
    return model_args(plan.backend, plan.model, plan.model, runtime="dynamo") + engine_args(
        plan, engine, runtime="dynamo"
    )


def _worker_v1alpha1(plan: Plan, engine: Engine, image: str) -> dict[str, Any]:
    per_pod, nodes = _pods(engine)
    svc: dict[str, Any] = {"envFromSecret": HF_TOKEN_SECRET, "componentType": "worker"}
    if engine.role != "aggregated":
        svc["subComponentType"] = engine.role
    svc["replicas"] = engine.replicas
    if hpa_scales(engine):
        svc["autoscaling"] = _hpa(engine)
    svc["resources"] = {"limits": {"gpu": str(per_pod)}}
    if nodes > 1:
        svc["multinode"] = {"nodeCount": nodes}
    svc["extraPodSpec"] = {
        "mainContainer": {
            "image": image,
            "workingDir": _WORKING_DIRS[plan.backend],
            "command": worker_command(plan.backend),
            "args": _args(plan, engine),
        }
    }
    return svc


def hpa_scales(engine: Engine) -> bool:
    """Whether a v1alpha1 operator can scale ``engine``'s worker with an HPA: it has a range and
    runs on one node (the operator makes no HPA for multi-node workers)."""
    return scales(engine) and engine.nodes == 1


def _hpa(engine: Engine) -> dict[str, Any]:
    """A v1alpha1 service's ``autoscaling``: the range, and the requests in flight per worker
    (averaged over its pods) at the planned load."""
    target = {"type": "AverageValue", "averageValue": str(engine.max_batch)}
    return {"enabled": True, "minReplicas": engine.min_replicas, "maxReplicas": engine.replicas,
            "metrics": [{"type": "Pods", "pods": {"metric": {"name": INFLIGHT_METRIC}, "target": target}}]}


def _grove_off(plan: Plan, api_version: str) -> dict[str, str]:
    """The annotation putting a v1alpha1 DGD in component mode, where its HPAs exist: when a worker
    scales and none spans nodes (those would need LeaderWorkerSets there)."""
    if api_version != "v1alpha1" or any(e.nodes > 1 for e in plan.engines):
        return {}
    return {GROVE_ANNOTATION: "false"} if any(hpa_scales(e) for e in plan.engines) else {}


def _spec_v1alpha1(plan: Plan, engines: list[Engine], image: str) -> dict[str, Any]:
    services: dict[str, Any] = {
        "Frontend": {
            "envFromSecret": HF_TOKEN_SECRET,
            "componentType": "frontend",
            "replicas": 1,
            "extraPodSpec": {"mainContainer": {"image": image}},
        }
    }
    for engine in engines:
        services[_service(plan, engine)] = _worker_v1alpha1(plan, engine, image)
    return {"backendFramework": plan.backend, "services": services}


def _secret_env() -> list[dict[str, Any]]:
    return [{"secretRef": {"name": HF_TOKEN_SECRET, "optional": True}}]


def _worker_v1beta1(plan: Plan, engine: Engine, image: str) -> dict[str, Any]:
    per_pod, nodes = _pods(engine)
    container = {
        "name": "main",
        "image": image,
        "workingDir": _WORKING_DIRS[plan.backend],
        "command": worker_command(plan.backend),
        "args": _args(plan, engine),
        "envFrom": _secret_env(),
        "resources": {"limits": {gpu_resource(plan.gpu): str(per_pod)}},
    }
    comp: dict[str, Any] = {
        "name": _service(plan, engine),
        "type": "worker" if engine.role == "aggregated" else engine.role,
        "replicas": engine.replicas,
    }
    if nodes > 1:
        comp["multinode"] = {"nodeCount": nodes}
    if scales(engine):
        comp["scalingAdapter"] = {}
    comp["podTemplate"] = {"spec": {"containers": [container]}}
    return comp


def replica_ranges(plan: Plan) -> dict[str, str]:
    """The annotation recording each scaled worker component's range, ``{"<name>": [min, max]}``, for
    the autoscaler a user attaches to its scaling adapter (none when nothing scales)."""
    ranges = {_service(plan, e): [e.min_replicas, e.replicas] for e in plan.engines if scales(e)}
    return {REPLICA_RANGE_ANNOTATION: json.dumps(ranges, separators=(",", ":"))} if ranges else {}


def _spec_v1beta1(plan: Plan, engines: list[Engine], image: str) -> dict[str, Any]:
    frontend = {
        "name": "Frontend",
        "type": "frontend",
        "replicas": 1,
        "podTemplate": {"spec": {"containers": [{"name": "main", "image": image, "envFrom": _secret_env()}]}},
    }
    return {
        "backendFramework": plan.backend,
        "components": [frontend, *(_worker_v1beta1(plan, e, image) for e in engines)],
    }


def render_dgd(
    plan: Plan, request: PlanRequest, *, api_version: Literal["v1alpha1", "v1beta1"] = "v1alpha1"
) -> dict[str, Any]:
    """The DynamoGraphDeployment serving ``plan`` for ``request`` (``nvidia.com/<api_version>``).

    Name and namespace come from the request's deployment overrides, else the DGDR's own.
    Image: the request's (``deploymentOverrides.workersImage``), else the Dynamo runtime image
    of the backend. Raises ``ValueError`` (``UnsupportedPlan``) for a plan whose engines do not
    match its mode or do not split evenly over their pods, for an AMD GPU without the request's
    image (Dynamo's runtime images are CUDA builds), and for an unknown ``api_version``.
    """
    if api_version not in ("v1alpha1", "v1beta1"):
        raise ValueError(f"api_version must be v1alpha1 or v1beta1, not {api_version!r}")
    engines = engines_in_order(plan)
    image = image_for(request, plan.backend, runtime="dynamo", gpu=plan.gpu)
    build = _spec_v1alpha1 if api_version == "v1alpha1" else _spec_v1beta1
    return {
        "apiVersion": f"nvidia.com/{api_version}",
        "kind": DGD_KIND,
        "metadata": {
            "name": deployment_name(request),
            "namespace": deployment_namespace(request),
            "labels": dgd_labels(request),
            "annotations": annotations(plan, request, **_grove_off(plan, api_version),
                                       **(replica_ranges(plan) if api_version == "v1beta1" else {})),
        },
        "spec": build(plan, engines, image),
    }
