"""Kthena's ``AutoscalingPolicy`` for a ModelServing whose roles have a replica range.

Kthena (v1.0.0 and later; group ``workload.serving.volcano.sh`` only) scales the roles of one
ModelServing with a ``disaggregatedTarget``: per role (one or two) ``minReplicas``/``maxReplicas``,
the metrics it aims at and where it reads them. Its releases before v1.0.0 bound a policy to its
target with a separate AutoscalingPolicyBinding; v1.0.0 folded the target into the policy.

The autoscaler reads Prometheus gauges from each role's entry pod (``/metrics`` on the engine's
port) and takes, over the metrics, the largest replica count any asks for:

- ``running``: sequences an engine runs, aiming at the plan's running-sequence limit
  (``Engine.max_batch``, the sequences one engine holds at the load the SLA was checked at), so
  the role shrinks towards ``minReplicas`` as the load falls below the planned one;
- ``waiting``: requests queued at an engine, aiming at 1, so the role grows back towards
  ``maxReplicas`` when requests queue (an engine never runs more than ``max_batch``).

Only engines that publish both gauges can be scaled: vLLM does, SGLang with ``--enable-metrics``;
trtllm-serve's Prometheus endpoint has latency histograms and counters but no gauge of running
or queued requests, so a TRT-LLM plan keeps fixed replicas.
"""

from __future__ import annotations

from typing import NamedTuple

from planner.manifests import common
from planner.types import Backend, Engine, Plan, PlanRequest

__all__ = ["POLICY_KIND", "ENGINE_GAUGES", "EngineGauges", "render_policy", "server_flags"]

POLICY_KIND = "AutoscalingPolicy"
MAX_ROLES = 2  # roles one disaggregatedTarget may scale (Kthena's limit)
QUEUED_TARGET = 1  # requests queued per engine before the role grows


class EngineGauges(NamedTuple):
    """The Prometheus gauges an engine's server publishes, and the flags it needs to."""

    running: str  # sequences being run (requests)
    waiting: str  # requests queued (requests)
    flags: tuple[str, ...] = ()


ENGINE_GAUGES: dict[Backend, EngineGauges] = {
    "vllm": EngineGauges("vllm:num_requests_running", "vllm:num_requests_waiting"),
    "sglang": EngineGauges("sglang:num_running_reqs", "sglang:num_queue_reqs", ("--enable-metrics",)),
}


def _scaled(plan: Plan, engines: list[Engine]) -> list[Engine]:
    """The engines the policy scales: none when the backend publishes no gauges or more roles scale
    than one policy can hold."""
    scaled = [e for e in engines if common.scales(e)]
    if plan.backend not in ENGINE_GAUGES or len(scaled) > MAX_ROLES:
        return []
    return scaled


def server_flags(plan: Plan, engine: Engine) -> list[str]:
    """Flags ``engine``'s server needs so the policy can read its gauges (none when it is not scaled)."""
    engines = common.engines_in_order(plan)
    return list(ENGINE_GAUGES[plan.backend].flags) if engine in _scaled(plan, engines) else []


def _role(plan: Plan, engine: Engine) -> dict:
    gauges = ENGINE_GAUGES[plan.backend]

    def source(name: str) -> dict:
        return {"pod": {"name": name, "uri": "/metrics", "port": common.DEFAULT_PORT}}

    return {
        "minReplicas": engine.min_replicas,
        "maxReplicas": engine.replicas,
        "metrics": [{"name": "running", "targetValue": engine.max_batch},
                    {"name": "waiting", "targetValue": QUEUED_TARGET}],
        "metricSources": {"running": source(gauges.running), "waiting": source(gauges.waiting)},
    }


def render_policy(plan: Plan, request: PlanRequest, serving: dict, roles: list[tuple[str, Engine]]) -> list[dict]:
    """The AutoscalingPolicy scaling ``serving`` (a rendered ModelServing of the current group)
    between each scaled role's ``min_replicas`` and its planned replicas; ``[]`` when no role
    scales or the engine publishes no gauges. ``roles``: (role name, engine) of each role."""
    scaled = _scaled(plan, [e for _, e in roles])
    if not scaled:
        return []
    meta = serving["metadata"]
    spec = {
        "disaggregatedTarget": {
            "targetRef": {"apiVersion": serving["apiVersion"], "kind": serving["kind"], "name": meta["name"]},
            "roles": {name: _role(plan, e) for name, e in roles if e in scaled},
        },
    }
    return [{
        "apiVersion": serving["apiVersion"],
        "kind": POLICY_KIND,
        "metadata": common.metadata(meta["name"], meta["namespace"], plan, request),
        "spec": spec,
    }]
