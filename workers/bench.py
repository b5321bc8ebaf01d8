"""Run one stored BenchmarkJob: claim it (Running), benchmark, save the outcome.

Status (ome.io BenchmarkJobStatus plus slaplan's fields): ``state`` Pending → Running →
Completed | Failed, ``startTime``, ``completionTime``, ``lastReconcileTime``, ``failureMessage``
(the reason in plain words), ``details`` (what was run and how), ``results`` (one entry per
(scenario, concurrency): TTFT/TPOT/E2E mean p50 p90 p99 in ms, output tokens/s, requests/s,
requests, errors, error rate) and ``resultsLocation`` (genai-bench's folder). Results of the
iterations that finished are saved on a failed job too.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from datetime import datetime
from typing import Any

from infra.resources import Conflict, NotFound, Resource, to_object
from workers import lifecycle

log = logging.getLogger(__name__)

Runner = Callable[..., Any]  # (spec, *, name, settings, resolver) -> BenchOutcome
Connector = Callable[[], Any]  # () -> infra.kube.Cluster


def outcome_status(status: dict[str, Any], outcome, now: datetime) -> dict[str, Any]:
    """The finished status for a ``BenchOutcome``."""
    from profiler.bench.results import status_metrics

    details = outcome.details or ("the benchmark did not start" if not outcome.started else "")
    done = lifecycle.bench_finished(status, now, ok=outcome.ok, details=details, failure=outcome.failure)
    done["results"] = status_metrics(outcome.results)
    if outcome.experiment_dir:
        done["resultsLocation"] = outcome.experiment_dir
    return done


def run_job(resource: Resource, *, save: Callable[[Resource, dict[str, Any]], Resource],
            clock: Callable[[], datetime], runner: Runner | None = None, settings=None,
            cluster: Connector | None = None) -> str:
    """Claim ``resource``, run it, save the outcome. Returns ``completed``, ``failed`` or
    ``superseded`` (changed or claimed elsewhere meanwhile). ``endpoint.inferenceService``
    references are resolved on ``cluster`` (``infra.inference_services``); without one such a
    job fails saying no cluster is configured."""
    from profiler.bench.spec import BenchmarkJobError, parse_benchmarkjob
    from profiler.bench.runner import BenchOutcome, run_benchmarkjob, runner_settings

    base = {k: v for k, v in resource.status.items() if k not in ("failureMessage", "results", "resultsLocation")}
    try:
        spec = parse_benchmarkjob(to_object(resource))
    except BenchmarkJobError as exc:
        failed = lifecycle.bench_finished(base, clock(), ok=False, details="the benchmark did not start",
                                          failure=f"invalid BenchmarkJob: {exc}")
        return _finish(save, resource, failed, "failed")
    try:
        ref = spec.endpoint.inference_service
        doing = "running genai-bench" if ref is None else \
            f"resolving InferenceService {ref.namespace}/{ref.name}, then running genai-bench"
        claimed = save(resource, lifecycle.bench_running({**base, "details": doing}, clock()))
    except (Conflict, NotFound):
        return "superseded"
    run = runner or run_benchmarkjob
    settings = settings or runner_settings()
    resolver = None
    if cluster is not None:
        from infra.inference_services import resolver_for

        resolver = resolver_for(cluster, timeout_s=settings.ready_timeout_s)
    try:
        outcome = run(spec, name=resource.name, settings=settings, resolver=resolver)
    except Exception as exc:  # a bug must not leave the job Running forever
        log.exception("benchmark %s/%s failed", resource.namespace, resource.name)
        outcome = BenchOutcome(ok=False, failure=f"benchmark runner error: {type(exc).__name__}: {exc}")
    status = outcome_status(claimed.status, outcome, clock())
    return _finish(save, claimed, status, "completed" if outcome.ok else "failed")


def _finish(save, resource: Resource, status: dict[str, Any], outcome: str) -> str:
    try:
        save(resource, status)
    except (Conflict, NotFound):
        return "superseded"
    return outcome
