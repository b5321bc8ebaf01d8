"""Render an aggregated plan as a KubeAI ``Model`` (``kubeai.org/v1``).

KubeAI runs one engine per pod from a Hugging Face (or other) URL, sized by a resource profile
``<profile>:<GPUs>`` that the cluster's KubeAI configuration defines. It has no prefill/decode
disaggregation and no multi-node engines; of the planner's backends its engines run vLLM only
(the others are OLlama, FasterWhisper and Infinity), so only vLLM plans can be rendered: the
prediction of another backend's plan would not describe what KubeAI runs. Model names are
limited to 40 characters. ``targetRequests`` (the active requests per replica KubeAI's
autoscaler aims for) is the per-replica load the SLA was checked at.
"""

from __future__ import annotations

import math
import re

from planner.manifests import common
from planner.types import Plan, PlanRequest

API_VERSION = "kubeai.org/v1"
MAX_NAME = 40

# GPU → resource profile, from the resourceProfiles of KubeAI's own Helm chart (v0.22.1).
# Keys are normalized (lowercase, no '-', '_' or spaces).
DEFAULT_PROFILES: dict[str, str] = {
    "h100": "nvidia-gpu-h100", "h100sxm": "nvidia-gpu-h100",
    "a10080gb": "nvidia-gpu-a100-80gb", "a100sxm": "nvidia-gpu-a100-80gb", "a100": "nvidia-gpu-a100-80gb",
    "a10040gb": "nvidia-gpu-a100-40gb",
    "gh200": "nvidia-gpu-gh200",
    "l40s": "nvidia-gpu-l40s",
    "l4": "nvidia-gpu-l4",
    "t4": "nvidia-gpu-t4",
    "a16": "nvidia-gpu-a16",
    "rtx40708gb": "nvidia-gpu-rtx4070-8gb",
    "mi300x": "amd-gpu-mi300x",
}


def _key(name: str) -> str:
    return re.sub(r"[\s_\-]+", "", name.strip().lower())


def resource_profile(gpu: str, profiles: dict[str, str] | None = None) -> str:
    """The KubeAI resource profile for ``gpu``: ``profiles`` first, then the chart's defaults.

    A GPU the chart does not know (H200, B200, …) maps to ``nvidia-gpu-<gpu>`` (``amd-gpu-<gpu>``
    for AMD GPUs, as the chart names MI300X's; without the ``_sxm`` suffix); that profile must
    then be added to the cluster's KubeAI configuration.
    """
    table = {**DEFAULT_PROFILES, **{_key(k): v for k, v in (profiles or {}).items()}}
    key = _key(gpu)
    if key in table:
        return table[key]
    if key.endswith("sxm") and key[:-3] in table:
        return table[key[:-3]]
    return f"{common.gpu_vendor(gpu)}-gpu-" + common.dns_name(re.sub(r"[_-]sxm\d*$", "", gpu.lower()))


def render_kubeai(plan: Plan, request: PlanRequest, *, profiles: dict[str, str] | None = None,
                  max_replicas: int | None = None, target_requests: int | None = None) -> list[dict]:
    """The Model for an aggregated ``plan``.

    Replicas start at the plan's count and may shrink to its ``min_replicas`` when idle (a budget
    filled with no load stated) or grow to ``max_replicas`` when given;
    ``target_requests`` (requests in flight per replica that KubeAI's autoscaler aims for)
    defaults to the requests in flight per replica at the planned load. Raises
    ``UnsupportedPlan`` for a disaggregated plan, a mix of engine shapes, a backend other than
    vLLM, or an engine spanning several nodes.
    """
    if plan.mode != "agg":
        raise common.UnsupportedPlan(
            "KubeAI has no prefill/decode disaggregation; use an aggregated plan")
    common.one_shape(plan, "KubeAI", "runs one engine shape per Model (one resourceProfile and one set of args)")
    engine = common.engines_in_order(plan)[0]
    if engine.nodes > 1:
        raise common.UnsupportedPlan(
            f"KubeAI runs one engine per pod; this engine needs {engine.gpus} GPUs on "
            f"{engine.nodes} nodes of {engine.gpus_per_node}")
    if plan.backend != "vllm":
        raise common.UnsupportedPlan(
            f"KubeAI runs vLLM, not {plan.backend}; plan with backend vllm to deploy on KubeAI")
    replicas = engine.replicas
    in_flight = max(1, math.ceil(plan.predicted.concurrency / replicas - 1e-9))
    spec = {
        "features": ["TextGeneration"],
        "url": f"hf://{plan.model}",
        "engine": "VLLM",
        "args": common.engine_args(plan, engine, runtime="standalone", style="equals"),
        "resourceProfile": f"{resource_profile(plan.gpu, profiles)}:{engine.gpus}",
        "replicas": replicas,
        "minReplicas": engine.min_replicas or replicas,
        "maxReplicas": max(replicas, max_replicas or replicas),
        "targetRequests": target_requests or min(in_flight, engine.max_batch),
    }
    if request.image:
        spec["image"] = request.image
    name = common.deployment_name(request, MAX_NAME)
    meta = common.metadata(name, common.deployment_namespace(request), plan, request)
    return [{"apiVersion": API_VERSION, "kind": "Model", "metadata": meta, "spec": spec}]
