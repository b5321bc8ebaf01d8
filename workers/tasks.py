"""Thin tasks: load by uid → skip if already done → call the pure core → save.

Each task is idempotent. A DGDR is claimed by writing ``Profiling`` conditionally on the
resource version it was read at, and its result is saved conditionally on the version of that
claim: when a task is redelivered while another worker still runs it, only the last claimer
can save, so a request never gets two results; a task arriving after the result was saved
finds it done and does nothing.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from typing import Any

from infra.db import SessionFactory, session_scope
from infra.resources import Conflict, NotFound, Resource, get_resource_by_uid, to_object
from planner import status as status_module
from workers import lifecycle
from workers.status_writes import finish, save_status

log = logging.getLogger(__name__)

PLAN_TASK = "slaplan.plan_dgdr"
ONLINE_TASK = "slaplan.profile_dgdr_online"
BENCH_TASK = "slaplan.run_benchmarkjob"

Clock = Callable[[], datetime]


def _utcnow() -> datetime:
    return datetime.now(UTC)


def _load(sessions: SessionFactory, uid: str) -> Resource | None:
    with session_scope(sessions) as session:
        return get_resource_by_uid(session, uid)


def process_dgdr(sessions: SessionFactory, uid: str, *, clock: Clock = _utcnow, cluster: Callable | None = None,
                 online: Callable | None = None, model_dirs: Sequence[str] = ()) -> str:
    """Plan one DGDR. Returns the outcome: ``ready``, ``failed``, ``done`` (already had a result),
    ``gone`` (deleted), ``superseded`` (changed or claimed by another worker meanwhile) or, with
    autoApply and a ``cluster`` (a connector, see ``workers.deploy``), ``deploying``. An
    ``online: true`` DGDR is profiled by measuring candidates (``workers.online``) on the target
    ``online()`` sets up (the worker's, from its settings); with none given, it fails. Its model is a
    catalog name, a Hugging Face id or a local directory under ``model_dirs`` (the stored request
    came from the network: no other server path is read)."""
    resource = _load(sessions, uid)
    if resource is None:
        return "gone"
    status = resource.status
    if status.get("state") in status_module.TERMINAL and status.get("observedGeneration") == resource.generation:
        return "done"
    from infra.calibrations import find_calibration
    from infra.planning import plan_with_calibration
    from planner import request as request_module
    from planner.manifests.targets import render_plan
    from profiler.model.errors import ModelError
    from profiler.hub import load_model

    make_status = status_module.dgdr_status
    generation = resource.generation
    stamp = lambda: lifecycle.timestamp(clock())  # noqa: E731

    try:
        request = request_module.parse_dgdr(to_object(resource))
    except request_module.RequestError as exc:
        messages = [f"{path}: {message}" if path else message for path, message in exc.causes]
        failed = status_module.validation_failed_status(messages, observed_generation=generation, now=stamp())
        return finish(sessions, resource, failed, "failed")

    try:
        claimed = save_status(
            sessions, resource, make_status(None, None, observed_generation=generation, state="Profiling", now=stamp(), previous=status)
        )
    except (Conflict, NotFound):
        return "superseded"

    try:
        model = load_model(request.model, local_roots=model_dirs)
    except ModelError as exc:  # named by the field it came from, as a validation error is
        failed = make_status(None, None, observed_generation=generation, state="Failed", now=stamp(),
                             error=f"{request_module.model_field(resource.spec)}: {exc.message}", previous=claimed.status)
        return finish(sessions, claimed, failed, "failed")

    try:
        if request.online:
            from workers.online import OnlineError, run_online

            if online is None:
                raise OnlineError("online profiling is not set up in this process")
            result, claimed = run_online(sessions, claimed, request, setup=online(), clock=clock, model=model)
        else:
            with session_scope(sessions) as session:
                calibration = find_calibration(session, request.model, request.gpu, request.backend)
            result = plan_with_calibration(request, calibration, model=model)
    except (Conflict, NotFound):  # changed, deleted or claimed by another worker during a long online search
        return "superseded"
    except Exception as exc:  # a bug or a model the catalog cannot size: the request fails, visibly
        log.exception("planning DGDR %s/%s failed", resource.namespace, resource.name)
        claimed = getattr(exc, "resource", None) or claimed  # saved since (online progress)
        failed = make_status(
            None, None, observed_generation=generation, state="Failed", now=stamp(),
            error=f"profiling error: {type(exc).__name__}: {exc}", previous=claimed.status,
        )
        return finish(sessions, claimed, failed, "failed")

    if not result.feasible or result.chosen is None:
        failed = make_status(result, None, observed_generation=generation, state="Failed", now=stamp(), previous=claimed.status)
        return finish(sessions, claimed, failed, "failed")

    try:
        version = resource.version if resource.version == "v1beta1" else "v1alpha1"
        (dgd,) = render_plan(result.chosen, request, "dynamo", dynamo_version=version)
    except ValueError as exc:
        failed = make_status(
            result, None, observed_generation=generation, state="Failed", now=stamp(),
            error=f"the deployment could not be generated: {exc}", previous=claimed.status,
        )
        return finish(sessions, claimed, failed, "failed")

    ready = make_status(result, dgd, observed_generation=generation, state="Ready", now=stamp(), previous=claimed.status)
    if request.auto_apply and cluster is not None:
        from workers.deploy import deploy_dgdr

        return deploy_dgdr(sessions, claimed, result, request, dgd, cluster, clock=clock)
    if request.auto_apply:
        ready = _nothing_applied(ready, generation, clock())
    return finish(sessions, claimed, ready, "ready")


def _nothing_applied(status: dict[str, Any], generation: int, now: datetime) -> dict[str, Any]:
    """autoApply without a configured cluster: Ready, and DeploymentReady says nothing was applied."""
    status = {k: v for k, v in status.items() if k != "deployment"}
    return lifecycle.with_condition(
        status,
        lifecycle.condition(
            "DeploymentReady",
            False,
            "NoClusterConfigured",
            "autoApply is set but no cluster is configured: nothing was applied; apply status.generatedDeployment yourself",
            generation,
            now,
        ),
    )


def process_benchmarkjob(sessions: SessionFactory, uid: str, *, clock: Clock = _utcnow, runner=None,
                         cluster: Callable | None = None, settings=None) -> str:
    """Run one BenchmarkJob with genai-bench (``workers.bench``): Pending → Running → Completed |
    Failed. Returns ``completed``, ``failed``, ``done`` (already finished), ``gone`` or
    ``superseded``. ``runner`` replaces ``profiler.bench.runner.run_benchmarkjob`` (tests);
    ``cluster`` (a connector) resolves ``endpoint.inferenceService`` references."""
    resource = _load(sessions, uid)
    if resource is None:
        return "gone"
    if resource.status.get("state") in lifecycle.BENCH_TERMINAL:
        return "done"
    from workers import bench

    return bench.run_job(resource, save=lambda r, status: save_status(sessions, r, status), clock=clock, runner=runner,
                         cluster=cluster, settings=settings)
