"""Render a plan as a Volcano Kthena ``ModelServing`` (``v1alpha1``).

One serving group (``spec.replicas = 1``) holds the roles: ``prefill`` (x replicas) and
``decode`` (y replicas) for an xPyD plan, a single role for an aggregated plan, or one role per
engine shape for a mix of shapes (every role's pods serve the same model, so a ModelServer that
selects the ModelServing's pods routes to all of them). An engine
spanning several nodes gets ``workerReplicas = nodes - 1`` and a ``workerTemplate``; Kthena
gives worker pods ``ENTRY_ADDRESS`` (the entry pod's address) and ``WORKER_INDEX``.

Two API groups exist: the seed's ``workload.volcano.sh`` (gang settings under
``template.gangSchedule{minRoleReplicas, networkTopology}``) and the current
``workload.serving.volcano.sh`` (``template.gangPolicy{minRoleReplicas}`` and
``template.networkTopology``).
"""

from __future__ import annotations

from planner.manifests import common
from planner.manifests.kthena_scaling import render_policy, server_flags
from planner.types import Engine, Plan, PlanRequest

KIND = "ModelServing"
LEGACY_GROUP = "workload.volcano.sh"
CURRENT_GROUP = "workload.serving.volcano.sh"
ROLE_NAMES = {"aggregated": "server", "prefill": "prefill", "decode": "decode"}
MAX_ROLE_NAME = 12  # characters (Kthena's limit)
SHM_VOLUME = "dshm"


def _shm() -> dict:
    """A memory-backed /dev/shm volume (NCCL needs more than the default 64 MiB)."""
    return {"name": SHM_VOLUME, "emptyDir": {"medium": "Memory"}}


def _container(plan: Plan, request: PlanRequest, engine: Engine, *, rank: str | None, flags: list[str]) -> dict:
    """One engine container; ``rank`` is None (single node), "0" (entry) or a worker's index;
    ``flags`` are added to the server's (those the autoscaler needs)."""
    args = common.model_args(plan.backend, plan.model, plan.model, runtime="standalone")
    args += common.server_args(plan.backend)
    args += common.engine_args(plan, engine, runtime="standalone")
    args += flags
    command, args, env = common.standalone_launch(plan, engine, args)
    if rank is not None:
        entry = rank == "0"
        args += common.multinode_args(
            plan.backend, engine, leader="$(POD_IP)" if entry else "$(ENTRY_ADDRESS)",
            nnodes=str(engine.nodes), rank=rank, worker=not entry)
        if entry:
            env.append({"name": "POD_IP", "valueFrom": {"fieldRef": {"fieldPath": "status.podIP"}}})
    container = {
        "name": "engine",
        "image": common.image_for(request, plan.backend, gpu=plan.gpu),
        "command": command,
        "args": args,
        "resources": common.gpu_resources(engine.gpus_per_pod, plan.gpu),
        "volumeMounts": [{"name": SHM_VOLUME, "mountPath": "/dev/shm"}],
    }
    if rank in (None, "0"):
        container["ports"] = [{"name": "http", "containerPort": common.DEFAULT_PORT}]
        container["readinessProbe"] = {"httpGet": {"path": "/health", "port": common.DEFAULT_PORT},
                                       "periodSeconds": 10}
    if env:
        container["env"] = env
    return container


def _pod(plan: Plan, request: PlanRequest, engine: Engine, role: str, *, rank: str | None, flags: list[str]) -> dict:
    return {
        "metadata": {"labels": common.labels(request, **{"slaplan.io/role": role})},
        "spec": {"containers": [_container(plan, request, engine, rank=rank, flags=flags)], "volumes": [_shm()]},
    }


def role_name(plan: Plan, engine: Engine, index: int) -> str:
    """The role of ``engine``: ``server``, ``prefill``, ``decode``; in a mix of shapes each shape's
    own, ``server-tp8`` (``server-<index>`` when the shape does not fit Kthena's 12 characters)."""
    if not plan.parts:
        return ROLE_NAMES[engine.role]
    name = f"{ROLE_NAMES[engine.role]}-{engine.tag}"
    return name if len(name) <= MAX_ROLE_NAME else f"{ROLE_NAMES[engine.role]}-{index}"


def _role(plan: Plan, request: PlanRequest, engine: Engine, name: str, flags: list[str]) -> dict:
    multinode = engine.nodes > 1
    role = {
        "name": name,
        "replicas": engine.replicas,
        "entryTemplate": _pod(plan, request, engine, name, rank="0" if multinode else None, flags=flags),
        "workerReplicas": engine.nodes - 1,
    }
    if multinode:
        role["workerTemplate"] = _pod(plan, request, engine, name, rank="$(WORKER_INDEX)", flags=flags)
    return role


def render_kthena(plan: Plan, request: PlanRequest, *, api_group: str = LEGACY_GROUP,
                  recovery_policy: str = "RoleRecreate", gang_all_replicas: bool = False,
                  network_topology: dict | None = None,
                  scheduler_name: str = "volcano") -> list[dict]:
    """The ModelServing for ``plan``, and in the current group an AutoscalingPolicy for the roles
    whose replicas have a range (``planner.manifests.kthena_scaling``).

    Gang scheduling asks for one replica of every role (the least that can serve) or, with
    ``gang_all_replicas``, every planned replica at once. ``network_topology`` (a
    NetworkTopologySpec, e.g. ``{"rolePolicy": {"mode": "hard", "highestTierAllowed": 1}}``) is
    passed through to keep an engine's pods close in clusters with HyperNodes.
    """
    if api_group not in (LEGACY_GROUP, CURRENT_GROUP):
        raise ValueError(f"unknown Kthena API group {api_group!r}")
    engines = common.engines_in_order(plan)
    named = [(role_name(plan, e, i), e) for i, e in enumerate(engines)]
    scaling = api_group == CURRENT_GROUP  # the seed's group has no autoscaling API: replicas stay fixed
    roles = [_role(plan, request, e, name, server_flags(plan, e) if scaling else []) for name, e in named]
    min_roles = {r["name"]: (r["replicas"] if gang_all_replicas else 1) for r in roles}
    template: dict = {"roles": roles}
    if api_group == LEGACY_GROUP:
        template["gangSchedule"] = {"minRoleReplicas": min_roles}
        if network_topology:
            template["gangSchedule"]["networkTopology"] = network_topology
    else:
        template["gangPolicy"] = {"minRoleReplicas": min_roles}
        if network_topology:
            template["networkTopology"] = network_topology
    spec = {
        "schedulerName": scheduler_name,
        "replicas": 1,
        "recoveryPolicy": recovery_policy,
        "template": template,
    }
    name = common.deployment_name(request)
    meta = common.metadata(name, common.deployment_namespace(request), plan, request)
    serving = {"apiVersion": f"{api_group}/v1alpha1", "kind": KIND, "metadata": meta, "spec": spec}
    return [serving, *(render_policy(plan, request, serving, named) if scaling else [])]
