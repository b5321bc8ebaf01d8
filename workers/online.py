"""Online profiling of a DGDR (v1alpha1 ``online: true``, v1beta1 ``searchStrategy: thorough``):
measure candidate units, calibrate, plan.

Inside the DGDR lifecycle (state Profiling):

1. the offline plan (with the stored calibration, if any) gives the candidate units and the
   model's predictions; units the deployment target cannot run are left out, and said so;
2. the DGDR's Optuna study (``infra.studies``, in the service database) is created or resumed:
   trials a previous worker completed are kept, a dead worker's running trial is failed and
   retried once;
3. the search loop (``planner.online_loop``, the study as its ledger): until a budget runs out
   or ``planner.online.next_run`` finds nothing worth measuring, the next run (a unit at one of
   the sweep's concurrencies, as the rule replayed in ``benchmarks/online_replay.py`` picks it
   from the model's predictions rescaled by the runs measured) is enqueued and asked as a trial,
   deployed on the target (a unit stays up while the next run is of it too), benchmarked with
   genai-bench (``D(isl,osl)`` at the run's concurrency), and told its score (goodput per GPU
   within the SLA); the Profiling condition shows runs done of the budget and the best so far;
4. the measured runs of the best run's unit calibrate the model (``profiler.model.measured.fit_deployment``),
   the calibration is stored for later plans of the same model, GPU and backend, and the
   calibrated model sizes the best unit for the load exactly as offline (``plan(params=…,
   only=…)``), or the other units measured within the SLA if it cannot meet it.
   ``PlanResult.online`` carries the trials for ``status.profilingResults``.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from infra import studies
from infra.deploy_targets import DeploymentTarget, Endpoint, KubeTarget, LocalTarget, TargetError, deployed
from planner import online as search
from planner import online_loop
from planner.run_reuse import RunWorkload, StoredRun, reusable, unit_settings
from planner.types import Plan, PlanRequest, PlanResult
from profiler.bench.results import IterationMetrics
from profiler.bench.runner import RunnerSettings, run_benchmarkjob

log = logging.getLogger(__name__)

MINUTES_PER_ITERATION = 1  # genai-bench's maxTimePerIteration for each sweep point


class OnlineError(Exception):
    """The online search could not produce measurements to plan from (said in plain words).
    ``resource``: the DGDR as last saved, when progress had been saved before the failure."""

    def __init__(self, message: str, resource: Any = None):
        super().__init__(message)
        self.resource = resource


@dataclass(frozen=True)
class Online:
    """What the online search takes from the service: where studies live, where units run,
    how genai-bench runs, and the default budgets (a DGDR may set its own)."""

    database_url: str
    target: DeploymentTarget
    target_name: str
    runner: RunnerSettings
    max_trials: int = 8
    max_minutes: float = 240.0
    heartbeat_s: int = 60
    reuse_runs: bool = True


def online_setup(settings: Any, cluster: Callable | None = None) -> Online:
    """The online search of the service with ``settings``; ``cluster`` connects to the cluster
    (``workers.context.WorkerContext.cluster``), None when none is configured."""
    from profiler.bench.runner import runner_settings

    wanted = settings.online_target
    if wanted == "kubernetes" and cluster is None:
        raise OnlineError("online_target is kubernetes but no cluster is configured (SLAPLAN_CLUSTER / SLAPLAN_KUBECONFIG)")
    if wanted == "kubernetes" or (wanted == "auto" and cluster is not None):
        target, name = KubeTarget(cluster(), frontend_url=settings.online_frontend_url), "kubernetes"
    else:
        target = LocalTarget(command=settings.online_engine_command, prefill_command=settings.online_prefill_command,
                             decode_command=settings.online_decode_command, handoff=settings.online_disagg_handoff,
                             speed=settings.online_emulator_speed)
        name = "local emulator" if target.emulated else "local engine command"
    return Online(database_url=settings.database_url, target=target, target_name=name, runner=runner_settings(),
                  max_trials=settings.online_max_trials, max_minutes=settings.online_max_minutes,
                  heartbeat_s=settings.online_heartbeat_seconds, reuse_runs=settings.online_reuse_runs)


def sweep_job(endpoint: Endpoint, request: PlanRequest, concurrency: tuple[int, ...], folder: str) -> Any:
    """The BenchmarkJob spec of ``D(isl,osl)`` at each of ``concurrency`` (one, for a run)."""
    from profiler.bench.spec import parse_benchmarkjob

    return parse_benchmarkjob({"spec": {
        "endpoint": {"endpoint": {"url": endpoint.base_url, "apiFormat": "openai", "modelName": endpoint.model_name}},
        "task": "text-to-text",
        "trafficScenarios": [f"D({request.isl_tokens},{request.osl_tokens})"],
        "numConcurrency": list(concurrency),
        "maxTimePerIteration": MINUTES_PER_ITERATION,
        "maxRequestsPerIteration": max(8, 2 * max(concurrency)),
        "additionalRequestParams": {"ignore_eos": "true"},  # every answer OSL tokens long
        "outputLocation": {"storageUri": f"file://{folder}"},
    }})


def run_workload(setup: Online, request: PlanRequest) -> RunWorkload:
    """What every run of ``request``'s search shares that changes its numbers: model, GPU, backend,
    the engine as the target deploys it (command templates and emulator speed, or image) with
    slaplan's version (which renders the manifests and the emulator), ISL/OSL and the harness."""
    from importlib.metadata import version

    target = setup.target
    if isinstance(target, LocalTarget):
        engine = (f"local commands={sorted(target.commands.items())} handoff={target.handoff} "
                  f"emulator speed={target.speed:g}")
    else:
        engine = f"{setup.target_name} image={request.image or 'default'}"
    runner = setup.runner
    program, tokenizer = (runner.genai_bench, runner.tokenizer) if runner is not None else ("none", None)
    harness = (f"genai-bench {program} tokenizer={tokenizer or 'hub'} "
               f"maxTimePerIteration={MINUTES_PER_ITERATION}min maxRequestsPerIteration=max(8,2*clients) ignore_eos")
    return RunWorkload(model=request.model, gpu=request.gpu, backend=request.backend,
                       engine=f"{engine} slaplan={version('slaplan')}", isl_tokens=request.isl_tokens,
                       osl_tokens=request.osl_tokens, distribution=f"D({request.isl_tokens},{request.osl_tokens})",
                       harness=harness)


def stored_runs(trials: list[Any], unit_plans: dict[str, Plan], workload: str, source: str,
                now: datetime) -> list[StoredRun]:
    """The runs a search measured itself (``online_loop.new_runs``), as stored for later searches."""
    return [StoredRun(workload=workload, unit=t.unit, settings=unit_settings(unit_plans[t.unit], p["concurrency"]),
                      concurrency=p["concurrency"], points=(p,),
                      iterations=tuple(it for it in t.attrs["iterations"] if it.get("concurrency") == p["concurrency"]),
                      source=source, measured_at=now)
            for t in online_loop.new_runs(trials) for p in t.attrs["points"]]


def measured_points(iterations: list[IterationMetrics]) -> list[search.SweepPoint]:
    """Sweep points of genai-bench iterations that had a successful request."""
    return [search.SweepPoint(concurrency=it.concurrency, ttft_ms=it.ttft.mean_ms, itl_ms=it.tpot.mean_ms,
                              output_tok_s=it.output_tok_s)
            for it in iterations if it.successes > 0 and it.ttft.mean_ms is not None and it.tpot.mean_ms is not None]


def wants_online(sessions: Any, uid: str) -> bool:
    """Whether the stored DGDR ``uid`` asks for online profiling (v1alpha1 ``online: true``,
    v1beta1 ``searchStrategy: thorough``)."""
    from infra.db import session_scope
    from infra.resources import get_resource_by_uid
    from planner.request import asks_online

    with session_scope(sessions) as session:
        resource = get_resource_by_uid(session, uid)
    return resource is not None and asks_online(resource.version, resource.spec)


def run_online(sessions: Any, claimed: Any, request: PlanRequest, *, setup: Online,
               clock: Callable[[], Any], model: tuple[Any, str]) -> tuple[PlanResult, Any]:
    """``profile_online`` inside the DGDR's lifecycle: the stored calibration of the model, GPU
    and backend is where the model starts, progress goes into the Profiling condition, and the
    new calibration is stored. ``model`` is the request's model as ``profiler.hub.load_model``
    loaded it. Returns the result and the DGDR as last saved. Raises
    OnlineError, and ``infra.resources.Conflict``/``NotFound`` when the DGDR changed or went
    away meanwhile (another worker claimed it). Any other failure is an OnlineError carrying
    the DGDR as last saved."""
    from infra.calibrations import find_calibration, save_calibration
    from infra.db import session_scope
    from infra.resources import Conflict, NotFound, update_status
    from profiler.model.errors import ModelError
    from profiler.model.measured import calibration_key
    from workers import lifecycle

    current = [claimed]

    def progress(message: str) -> None:
        condition = lifecycle.condition("Profiling", False, "ProfilingRunning", message, claimed.generation, clock())
        status = lifecycle.with_condition(current[0].status, condition)
        with session_scope(sessions) as session:
            current[0] = update_status(session, status, uid=claimed.uid, expected_version=current[0].resource_version)

    from infra.measured_runs import runs_of, save_runs

    workload = run_workload(setup, request).key()
    reuse = setup.reuse_runs if request.reuse_runs is None else request.reuse_runs
    with session_scope(sessions) as session:
        stored = find_calibration(session, request.model, request.gpu, request.backend)
        earlier = runs_of(session, workload) if reuse else []

    def keep(runs: list[StoredRun]) -> None:
        with session_scope(sessions) as session:
            save_runs(session, runs)

    try:
        result, fit, deployment = profile_online(request, uid=claimed.uid, generation=claimed.generation,
                                                 setup=setup, model=model, params=stored.params if stored else None,
                                                 progress=progress, earlier=earlier, keep=keep,
                                                 source=f"{claimed.namespace}/{claimed.name}")
    except (Conflict, NotFound):
        raise
    except Exception as exc:
        message = str(exc) if isinstance(exc, OnlineError) else f"{type(exc).__name__}: {exc}"
        raise OnlineError(message, resource=current[0]) from exc
    try:
        key = calibration_key(request.model, request.gpu, request.backend)
    except ModelError:  # a model outside the catalog: nothing to store it under
        key = None
    if key is not None:
        with session_scope(sessions) as session:
            save_calibration(session, key, fit, deployment=deployment.model_dump(mode="json"),
                             source=f"online profiling of DGDR {claimed.namespace}/{claimed.name} "
                                    f"({result.online.best})")
    return result, current[0]


# --------------------------------------------------------------------------- one run measured


# (unit, clients, request, trial name) → (iterations, results location, failure or None)
Measure = Callable[[Plan, int, PlanRequest, str], tuple[list[IterationMetrics], str, str | None]]


@contextmanager
def one_unit_up(target: DeploymentTarget) -> Iterator[Callable[[Plan, PlanRequest, str], Endpoint]]:
    """A function that deploys a unit on ``target`` (named after the trial that first needs it)
    and keeps it up until another unit is asked for or the block ends: runs of one unit in a row
    share its deployment, and at most one unit is up at a time. Raises TargetError when a unit
    cannot be brought up."""
    with ExitStack() as stack:
        up: dict[str, Endpoint] = {}

        def endpoint(unit: Plan, request: PlanRequest, name: str) -> Endpoint:
            key = search.unit_key(unit)
            if key not in up:
                stack.close()
                up.clear()
                up[key] = stack.enter_context(deployed(target, unit, request, name))
            return up[key]

        yield endpoint


def genai_bench_measure(setup: Online, endpoint: Callable[[Plan, PlanRequest, str], Endpoint], folder: str) -> Measure:
    """Run genai-bench at a run's clients against the unit ``endpoint`` deploys (``one_unit_up``):
    (iterations, results location, failure or None)."""

    def measure(unit: Plan, clients: int, request: PlanRequest,
                name: str) -> tuple[list[IterationMetrics], str, str | None]:
        spec = sweep_job(endpoint(unit, request, name), request, (clients,), folder)
        outcome = run_benchmarkjob(spec, name=name, settings=setup.runner)
        return outcome.results, outcome.experiment_dir or "", (None if outcome.ok else outcome.failure)

    return measure


def as_measurement(measure: Measure) -> online_loop.Measure:
    """``measure`` as the search loop takes it: a failure, whatever it is, is the trial's."""

    def run(unit: Plan, clients: int, request: PlanRequest, name: str) -> online_loop.Measurement:
        try:
            iterations, location, failure = measure(unit, clients, request, name)
        except TargetError as exc:
            iterations, location, failure = [], "", f"not deployed: {exc}"
        except Exception as exc:  # a bug must not leave the trial running forever
            log.exception("online trial %s of %s failed", name, request.name)
            iterations, location, failure = [], "", f"{type(exc).__name__}: {exc}"
        return online_loop.Measurement(points=tuple(measured_points(iterations)),
                                       iterations=tuple(it.model_dump(mode="json") for it in iterations),
                                       location=location, failure=failure)

    return run


def trial_fit(request: PlanRequest) -> online_loop.Fit:
    """The calibration fit of a unit's measured iterations, from ``params``, genai-bench's own time
    held apart (the stored parameters describe the engine)."""
    from profiler.model.harness import GENAI_BENCH_MS
    from profiler.model.measured import fit_deployment

    def fit(unit: Plan, stored: list[dict[str, Any]], params: dict[str, float]):
        iterations = [IterationMetrics.model_validate(it) for it in stored]
        return fit_deployment(search.deployment(unit, request), iterations, params=params, harness_ms=GENAI_BENCH_MS)

    return fit


# --------------------------------------------------------------------------- the search


def profile_online(request: PlanRequest, *, uid: str, generation: int, setup: Online,
                   model: tuple[Any, str] | None = None, params: dict[str, float] | None = None,
                   measure: Measure | None = None, progress: Callable[[str], None] = lambda message: None,
                   wall: Callable[[], float] = time.time, earlier: Sequence[StoredRun] = (),
                   keep: Callable[[list[StoredRun]], None] = lambda runs: None,
                   source: str = "") -> tuple[PlanResult, Any, Any]:
    """Search, calibrate and plan ``request`` online (``planner.online_loop``, its trials in the
    DGDR's study). Returns the plan result (with ``online`` set), the calibration fit of the best
    unit and that unit's ``ServingConfig``. ``measure`` stands in for deploying and benchmarking
    (tests). ``earlier``: runs stored by earlier searches; those of this workload and of units
    with the same settings (``planner.run_reuse.reusable``) are reused, not measured again.
    ``keep`` is handed the runs this search measured, as measured by ``source`` (the DGDR's
    ``namespace/name``). Raises OnlineError."""
    from planner import plan
    from profiler.hub import load_model
    from profiler.model.params import shipped_params

    base = params or shipped_params()
    model = model or load_model(request.model)
    budget = online_loop.budget_for(request, max_trials=setup.max_trials, max_minutes=setup.max_minutes)
    offline = plan(request, model=model, params=base)
    every = search.units(offline.candidates)
    if not every:
        raise OnlineError(f"nothing to measure: {offline.reason}")
    deployable = {k for k, u in every.items() if setup.target.supports(u) is None}
    left_out = sorted({setup.target.supports(u) for u in every.values()} - {None})
    if not deployable:
        raise OnlineError(f"no candidate can be deployed on the {setup.target_name} target: {'; '.join(left_out)}")
    store = studies.storage(setup.database_url, heartbeat_s=setup.heartbeat_s)
    ledger = studies.StudyLedger(store, studies.open_study(store, studies.study_name(uid, generation)))
    fit = trial_fit(request)
    workload = run_workload(setup, request).key()
    reused = reusable(earlier, workload,
                      lambda run: unit_settings(every[run[0]], run[1]) if run[0] in deployable else None,
                      budget.concurrency)
    with one_unit_up(setup.target) as endpoint:
        runs = as_measurement(measure or genai_bench_measure(setup, endpoint, f"online/{uid}"))
        stopped = online_loop.search_runs(request, every, deployable=deployable, ledger=ledger, budget=budget,
                                           params=base, measure=runs, model=model[0], progress=progress,
                                           wall=wall, sleep=time.sleep, reused=reused)
    keep(stored_runs(ledger.trials(), every, workload, source, datetime.now(UTC)))
    try:
        result, calibration = online_loop.plan_measured(request, every, ledger=ledger, stopped=stopped, fit=fit,
                                                        params=base, budget=budget, target=setup.target_name,
                                                        left_out=left_out, model=model,
                                                        offline_pick=search.unit_key(offline.chosen) if offline.chosen else None)
    except online_loop.SearchError as exc:
        raise OnlineError(str(exc)) from None
    return result, calibration, search.deployment(every[result.online.best], request)
