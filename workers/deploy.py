"""autoApply: put a planned DGDR's DynamoGraphDeployment on the cluster and follow it.

Lifecycle (REFERENCE §1, the v1alpha1 controller): after planning, a DGDR with autoApply and a
configured cluster goes to ``Deploying``; its DGD is server-side applied (labels
``dgdr.nvidia.com/name``, ``dgdr.nvidia.com/namespace``, ``nvidia.com/managed-by``; no
ownerReference, it outlives the request) in the Dynamo API version the cluster serves. A
tracking task checks the DGD every ``settings.deploy_check_seconds`` (the outbox schedules it:
only DGDRs with something applied are ever checked, ``workers.dispatcher``): ``Ready`` when its
``status.state`` is ``successful``; ``DeploymentDeleted`` (terminal, never recreated) when it
disappears. ``status.deployment{name, namespace, state, created}`` mirrors it throughout.

Errors: a transient one (API server unreachable, 5xx) leaves the DGDR Deploying with
``created: false`` and the next check applies again; a permanent one (forbidden, the operator
not installed, the object refused) fails the DGDR with the reason in DeploymentReady.
Without autoApply nothing is ever applied; with no cluster configured the DGDR is Ready and
DeploymentReady says nothing was applied (``workers.tasks``).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

from infra.db import SessionFactory, session_scope
from infra.kube import Cluster, ClusterError
from infra.resources import Conflict, NotFound, Resource, get_resource_by_uid
from workers import lifecycle
from workers.status_writes import finish, save_status

log = logging.getLogger(__name__)

TRACK_TASK = "slaplan.track_deployment"
TRACKED_STATES = frozenset({"Deploying", "Ready"})
SUCCESSFUL = "successful"  # the DGD's status.state once every service is ready

Connector = Callable[[], Cluster]


def _now(clock: Callable[[], datetime] | None) -> datetime:
    return clock() if clock else datetime.now(UTC)


def _ready_condition(status: dict[str, Any], ok: bool, reason: str, message: str, generation: int,
                     now: datetime) -> dict[str, Any]:
    return lifecycle.with_condition(status, lifecycle.condition("DeploymentReady", ok, reason, message, generation, now))


def deploy_dgdr(sessions: SessionFactory, claimed: Resource, result: Any, request: Any, dgd: dict[str, Any],
                connect: Connector, *, clock: Callable[[], datetime] | None = None) -> str:
    """Deploying, then apply the DGD. Returns ``deploying`` (track it), ``failed`` or ``superseded``."""
    from planner.manifests.targets import render_plan
    from planner.status import dgdr_status

    from infra.kube_targets import served_version

    generation = claimed.generation
    stamp = lifecycle.timestamp(_now(clock))
    cluster, error = None, None
    try:
        cluster = connect()
        version = served_version(cluster, "dynamo", prefer=dgd["apiVersion"])
        if version is None:
            raise ClusterError("the cluster does not serve nvidia.com DynamoGraphDeployment (v1alpha1 or v1beta1); "
                               "install the Dynamo operator")
        if version != dgd["apiVersion"]:
            (dgd,) = render_plan(result.chosen, request, "dynamo", dynamo_version=version.split("/")[1])
    except ClusterError as exc:
        error = exc
    if error is not None and not error.transient:
        failed = dgdr_status(result, dgd, observed_generation=generation, state="Failed", now=stamp,
                             error=f"not applied: {error}", previous=claimed.status)
        return finish(sessions, claimed, failed, "failed")
    deploying = dgdr_status(result, dgd, observed_generation=generation, state="Deploying", now=stamp,
                            previous=claimed.status)
    deploying["deployment"] = {**deploying["deployment"], "created": False}
    deploying.get("deployment", {}).pop("state", None)
    try:
        stored = save_status(sessions, claimed, deploying)
    except (Conflict, NotFound):
        return "superseded"
    if cluster is None:  # unreachable: the tracker connects and applies again
        _note_retry(sessions, stored, error, clock)
        return "deploying"
    return _apply(sessions, stored, cluster, clock)


def _apply(sessions: SessionFactory, resource: Resource, cluster: Cluster, clock) -> str:
    """Apply ``status.generatedDeployment``; ``deploying`` on success or a transient error."""
    status = resource.status
    dgd = status["generatedDeployment"]
    now = _now(clock)
    try:
        applied = cluster.apply(dgd)
    except ClusterError as exc:
        if exc.transient:
            _note_retry(sessions, resource, exc, clock)
            return "deploying"
        failed = {k: v for k, v in status.items() if k != "deployment"}
        failed["state"] = "Failed"
        failed = _ready_condition(failed, False, "DeploymentFailed", f"not applied: {exc}", resource.generation, now)
        return finish(sessions, resource, failed, "failed")
    live = (applied.get("status") or {}).get("state") or "pending"
    meta = dgd["metadata"]
    done = {**status, "deployment": {"name": meta["name"], "namespace": meta["namespace"], "state": live,
                                     "created": True}}
    done = _ready_condition(done, False, "DeploymentInProgress",
                            f"applied {dgd['kind']} {meta['namespace']}/{meta['name']} ({dgd['apiVersion']}); "
                            "waiting for it to become ready", resource.generation, now)
    return finish(sessions, resource, done, "deploying")


def _note_retry(sessions: SessionFactory, resource: Resource, error: Exception | None, clock) -> None:
    status = _ready_condition(resource.status, False, "DeploymentInProgress",
                              f"not applied yet, will retry: {error}", resource.generation, _now(clock))
    if status != resource.status:
        try:
            save_status(sessions, resource, status)
        except (Conflict, NotFound):
            pass


def track_dgdr(sessions: SessionFactory, uid: str, connect: Connector | None, *,
               clock: Callable[[], datetime] | None = None) -> str:
    """One check of an applied DGDR's deployment. Returns ``deploying`` or ``ready`` (check again
    later), ``deleted`` or ``failed`` (final), ``untracked`` (nothing to follow) or ``gone``."""
    with session_scope(sessions) as session:
        resource = get_resource_by_uid(session, uid)
    if resource is None:
        return "gone"
    status = resource.status
    deployment = status.get("deployment")
    if status.get("state") not in TRACKED_STATES or not deployment or connect is None:
        return "untracked"
    outcome = "deploying" if status["state"] == "Deploying" else "ready"
    try:
        cluster = connect()
        if not deployment.get("created"):
            return _apply(sessions, resource, cluster, clock)
        dgd = status["generatedDeployment"]
        live = cluster.get(dgd["apiVersion"], dgd["kind"], deployment["namespace"], deployment["name"])
    except ClusterError as exc:
        log.warning("cannot check the deployment of DGDR %s/%s: %s", resource.namespace, resource.name, exc)
        return outcome
    now = _now(clock)
    generation = resource.generation
    if live is None:
        gone = {**status, "state": "DeploymentDeleted",
                "deployment": {k: v for k, v in deployment.items() if k != "state"}}
        gone = _ready_condition(gone, False, "DeploymentDeleted", "the deployment was deleted; it is not recreated",
                                generation, now)
        return finish(sessions, resource, gone, "deleted")
    state = (live.get("status") or {}).get("state") or "pending"
    new = {**status, "deployment": {**deployment, "state": state}}
    if state == SUCCESSFUL:
        new["state"] = "Ready"
        new = _ready_condition(new, True, "DeploymentReady", "the deployment is ready", generation, now)
        outcome = "ready"
    elif status["state"] == "Ready":
        new = _ready_condition(new, False, "DeploymentNotReady", f"the deployment reports state {state}",
                               generation, now)
    if new == status:
        return outcome
    return finish(sessions, resource, new, outcome)
