"""Render a plan as an OME ``InferenceService`` (``ome.io/v1beta1``).

Disaggregated plans become ``engine`` (prefill) + ``decoder`` (decode) + ``router``; aggregated
plans ``engine`` only. Each component runs the engine's planned replica count, fixed
(``minReplicas`` = ``maxReplicas``): OME's autoscaler scales on CPU or memory (a raw deployment's
HPA) or, serverless only, on Knative concurrency, and its KEDA option needs the cluster's
Prometheus address and query; none of them follows an LLM engine's load as it stands, and a
raw deployment starts at ``minReplicas``, so a range would start below the planned capacity. The
engine runs from a ``runner`` container whose args carry the parallelism; an engine spanning
several nodes becomes ``leader`` + ``worker{size: nodes - 1}``, wired with the LeaderWorkerSet
variables OME provides (``LWS_LEADER_ADDRESS``, ``LWS_GROUP_SIZE``, ``LWS_WORKER_INDEX``).
The model is mounted by OME at ``$(MODEL_PATH)``.
"""

from __future__ import annotations

from planner.manifests import common
from planner.types import Engine, Plan, PlanRequest

API_VERSION = "ome.io/v1beta1"
RUNNER_NAME = "ome-container"  # the name OME's runtimes give their main container


def _runner(plan: Plan, request: PlanRequest, engine: Engine, *, multinode: str | None) -> dict:
    """The runner container of one engine pod; ``multinode`` is None, "leader" or "worker"."""
    args = common.model_args(plan.backend, "$(MODEL_PATH)", plan.model, runtime="standalone")
    args += common.server_args(plan.backend)
    args += common.engine_args(plan, engine, runtime="standalone")
    if multinode:
        args += common.multinode_args(
            plan.backend, engine, leader="$(LWS_LEADER_ADDRESS)", nnodes="$(LWS_GROUP_SIZE)",
            rank="$(LWS_WORKER_INDEX)", worker=multinode == "worker")
    command, args, env = common.standalone_launch(plan, engine, args)
    runner = {
        "name": RUNNER_NAME,
        "image": common.image_for(request, plan.backend, gpu=plan.gpu),
        "command": command,
        "args": args,
        "resources": common.gpu_resources(engine.gpus_per_pod, plan.gpu),
    }
    if env:
        runner["env"] = env
    return runner


def _component(plan: Plan, request: PlanRequest, engine: Engine) -> dict:
    """An ``engine`` or ``decoder`` block for one engine role."""
    spec: dict = {"minReplicas": engine.replicas, "maxReplicas": engine.replicas}
    if engine.nodes > 1:
        spec["leader"] = {"runner": _runner(plan, request, engine, multinode="leader")}
        spec["worker"] = {"size": engine.nodes - 1,
                          "runner": _runner(plan, request, engine, multinode="worker")}
    else:
        spec["runner"] = _runner(plan, request, engine, multinode=None)
    return spec


def render_ome(plan: Plan, request: PlanRequest, *, model_ref: str | None = None,
               runtime_ref: str | None = None, router_replicas: int = 1,
               model_kind: str = "ClusterBaseModel",
               runtime_kind: str = "ClusterServingRuntime") -> list[dict]:
    """The InferenceService for ``plan``.

    ``model_ref`` names the (Cluster)BaseModel, by default derived from the model id
    (``meta-llama/Llama-3.1-8B`` → ``llama-3-1-8b``); ``runtime_ref`` names the
    (Cluster)ServingRuntime — when omitted OME picks one that supports the model, and the
    runner set here overrides its container. Raises ``UnsupportedPlan`` for a mix of engine shapes.
    """
    common.one_shape(plan, "an OME InferenceService", "runs one engine shape per component")
    engines = common.engines_in_order(plan)
    spec: dict = {
        "model": {"name": model_ref or common.model_slug(plan.model), "kind": model_kind},
    }
    if runtime_ref:
        spec["runtime"] = {"name": runtime_ref, "kind": runtime_kind}
    spec["engine"] = _component(plan, request, engines[0])
    if plan.mode == "disagg":
        spec["decoder"] = _component(plan, request, engines[1])
        spec["router"] = {"minReplicas": router_replicas, "maxReplicas": router_replicas}
    name = common.deployment_name(request)
    meta = common.metadata(name, common.deployment_namespace(request), plan, request)
    return [{"apiVersion": API_VERSION, "kind": "InferenceService", "metadata": meta, "spec": spec}]
