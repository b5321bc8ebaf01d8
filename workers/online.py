"""Online profiling of a DGDR (v1alpha1 ``online: true``, v1beta1 ``searchStrategy: thorough``):
measure candidate units, calibrate, plan.

Inside the DGDR lifecycle (state Profiling):

1. the offline plan (with the stored calibration, if any) gives the candidate units and the
   model's predictions; units the deployment target cannot run are left out, and said so;
2. the DGDR's Optuna study (``infra.studies``, in the service database) is created or resumed:
   trials a previous worker completed are kept, a dead worker's running trial is failed and
   retried once;
3. until a budget runs out or ``planner.online.next_unit`` finds nothing worth measuring: the
   next unit (the model's best prediction: first with the starting parameters — the offline
   optimum —, then calibrated on the best measurement so far) is enqueued and asked as a trial, deployed on the target,
   benchmarked with genai-bench (``D(isl,osl)`` at each sweep concurrency), torn down, and told
   its score (goodput per GPU within the SLA); the Profiling condition shows trials done of
   the budget and the best so far;
4. the best unit's measurements calibrate the model (``profiler.model.measured.fit_deployment``),
   the calibration is stored for later plans of the same model, GPU and backend, and the
   calibrated model sizes the best unit for the load exactly as offline (``plan(params=…,
   only=…)``), or the other units measured within the SLA if it cannot meet it. ``PlanResult.online`` carries the trials for ``status.profilingResults``.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import optuna
from optuna.trial import TrialState

from infra import studies
from infra.deploy_targets import DeploymentTarget, Endpoint, KubeTarget, LocalTarget, TargetError, deployed
from planner import online as search
from planner.online_results import Calibration, MeasuredPoint, OnlineSearch, SearchBudget, Sweep, Trial
from planner.request import profiling_label
from planner.types import Plan, PlanRequest, PlanResult
from profiler.bench.results import IterationMetrics
from profiler.bench.runner import RunnerSettings, run_benchmarkjob

log = logging.getLogger(__name__)

MINUTES_PER_ITERATION = 1  # genai-bench's maxTimePerIteration for each sweep point
UNIT_PARAM = "unit"


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
        target = LocalTarget(command=settings.online_engine_command, speed=settings.online_emulator_speed)
        name = "local engine command" if settings.online_engine_command else "local emulator"
    return Online(database_url=settings.database_url, target=target, target_name=name, runner=runner_settings(),
                  max_trials=settings.online_max_trials, max_minutes=settings.online_max_minutes,
                  heartbeat_s=settings.online_heartbeat_seconds)


def sweep_job(endpoint: Endpoint, request: PlanRequest, concurrency: tuple[int, ...], folder: str) -> Any:
    """The BenchmarkJob spec of one unit's sweep: ``D(isl,osl)`` at each concurrency."""
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

    with session_scope(sessions) as session:
        stored = find_calibration(session, request.model, request.gpu, request.backend)
    try:
        result, fit, deployment = profile_online(request, uid=claimed.uid, generation=claimed.generation,
                                                 setup=setup, model=model, params=stored.params if stored else None,
                                                 progress=progress)
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


# --------------------------------------------------------------------------- one trial


Measure = Callable[[Plan, PlanRequest, str], tuple[list[IterationMetrics], str, str | None]]


def genai_bench_measure(setup: Online, concurrency: tuple[int, ...], folder: str) -> Measure:
    """Deploy a unit on ``setup.target``, run the sweep, tear it down: (iterations, results
    location, failure or None). Raises TargetError when the unit cannot be brought up."""

    def measure(unit: Plan, request: PlanRequest, name: str) -> tuple[list[IterationMetrics], str, str | None]:
        with deployed(setup.target, unit, request, name) as endpoint:
            spec = sweep_job(endpoint, request, concurrency, folder)
            outcome = run_benchmarkjob(spec, name=name, settings=setup.runner)
        return outcome.results, outcome.experiment_dir or "", (None if outcome.ok else outcome.failure)

    return measure


def _trial_name(request: PlanRequest, number: int) -> str:
    from planner.manifests.common import dns_name

    return dns_name(f"{request.name}-online-{number}", max_len=52)


def _run_trial(study: optuna.Study, store: Any, trial: optuna.Trial, key: str, unit: Plan, request: PlanRequest,
               measure: Measure) -> None:
    name = _trial_name(request, trial.number)
    trial.set_user_attr("name", name)
    trial.set_user_attr("gpus", unit.total_gpus)
    try:
        with studies.heartbeat(store, trial):
            iterations, location, failure = measure(unit, request, name)
    except TargetError as exc:
        iterations, location, failure = [], "", f"not deployed: {exc}"
    except Exception as exc:  # a bug must not leave the trial RUNNING forever
        log.exception("online trial %s of %s failed", trial.number, request.name)
        iterations, location, failure = [], "", f"{type(exc).__name__}: {exc}"
    points = measured_points(iterations)
    trial.set_user_attr("resultsLocation", location)
    if failure:
        trial.set_user_attr("error", failure[:2000])
    if not points:
        trial.set_user_attr("error", failure or "no successful request was measured")
        study.tell(trial, state=TrialState.FAIL)
        return
    trial.set_user_attr("points", [p.model_dump() for p in points])
    trial.set_user_attr("iterations", [it.model_dump(mode="json") for it in iterations])
    study.tell(trial, search.score(points, unit.total_gpus, request))


# --------------------------------------------------------------------------- the search


@dataclass(frozen=True)
class Budget:
    max_trials: int
    max_minutes: float
    concurrency: tuple[int, ...]


def budget_for(request: PlanRequest, setup: Online) -> Budget:
    return Budget(max_trials=request.max_trials or setup.max_trials,
                  max_minutes=request.max_wall_minutes or setup.max_minutes,
                  concurrency=request.sweep_concurrency or search.SWEEP_CONCURRENCY)


def _used_budget(t: optuna.trial.FrozenTrial) -> bool:
    """Measured, or failed on its own (not lost with a worker)."""
    return t.state == TrialState.COMPLETE or (t.state == TrialState.FAIL and "error" in t.user_attrs)


def _counted(trials: list[optuna.trial.FrozenTrial]) -> list[optuna.trial.FrozenTrial]:
    """Trials that used the budget."""
    return [t for t in trials if _used_budget(t)]


def _committed(trials: list[optuna.trial.FrozenTrial], before: int | None = None) -> list[optuna.trial.FrozenTrial]:
    """Trials (numbered below ``before``, when given) that used the budget or are being measured:
    workers that check the budget at once each see the same count, the trial numbers order them."""
    return [t for t in trials if (before is None or t.number < before)
            and (t.state == TrialState.RUNNING or _used_budget(t))]


def _measured(trials) -> dict[str, float]:
    return {t.params[UNIT_PARAM]: t.value for t in trials if t.state == TrialState.COMPLETE}


def _best(trials) -> optuna.trial.FrozenTrial | None:
    done = [t for t in trials if t.state == TrialState.COMPLETE]
    return max(done, key=lambda t: t.value) if done else None


def _fit(request: PlanRequest, unit: Plan, trial: optuna.trial.FrozenTrial, params: dict[str, float]):
    from profiler.model.measured import fit_deployment

    iterations = [IterationMetrics.model_validate(it) for it in trial.user_attrs["iterations"]]
    return fit_deployment(search.deployment(unit, request), iterations, params=params)


def search_units(request: PlanRequest, unit_plans: dict[str, Plan], *, deployable: set[str], study: optuna.Study,
                 store: Any, budget: Budget, params: dict[str, float], measure: Measure, model: Any = None,
                 progress: Callable[..., None] = lambda trials, measuring=None: None,
                 wall: Callable[[], float] = time.time,
                 sleep: Callable[[float], None] = time.sleep, poll_s: float = 5.0) -> str:
    """Measure ``deployable`` units of ``unit_plans`` until a budget runs out or nothing is left
    worth measuring; ``params`` predict before anything is measured. Returns why it stopped.

    The trial parameter's choices are every unit's key, sorted: the same for every worker and
    restart whatever the target or the calibration, as a resumed study requires."""
    choices = sorted(unit_plans)
    if "started" not in study.user_attrs:
        study.set_user_attr("started", wall())
    deadline = study.user_attrs["started"] + budget.max_minutes * 60.0
    fitted: dict[int, dict[str, float]] = {}
    while True:
        studies.fail_stale(study)
        trials = study.get_trials(deepcopy=False)
        if len(_counted(trials)) >= budget.max_trials:
            return f"trial budget used ({budget.max_trials} trials)"
        if wall() >= deadline:
            return f"wall-time budget used ({budget.max_minutes:g} min)"
        if len(_committed(trials)) >= budget.max_trials:
            sleep(poll_s)  # the rest of the budget is being measured by other (or lost) workers' trials
            continue
        measured = _measured(trials)
        if not any(t.state == TrialState.WAITING for t in trials):  # else: a lost trial to retry first
            best = _best(trials)
            if best is not None and best.number not in fitted:
                fitted[best.number] = _fit(request, unit_plans[best.params[UNIT_PARAM]], best, params).params
            failed = {t.params.get(UNIT_PARAM) for t in _counted(trials) if t.state == TrialState.FAIL}
            todo = {k: u for k, u in unit_plans.items() if k in deployable and k not in measured and k not in failed}
            predicted = search.predict(todo, request, budget.concurrency,
                                       fitted[best.number] if best is not None else params, model)
            scores = {k: search.score(pts, todo[k].total_gpus, request) for k, pts in predicted.items()}
            busy = {t.params.get(UNIT_PARAM) for t in trials if t.state == TrialState.RUNNING}
            key = search.next_unit(scores, measured, busy)
            if key is None:
                if busy:
                    sleep(poll_s)  # another (or a lost) worker's trial: wait for it to end or go stale
                    continue
                return "converged: no unmeasured candidate is predicted to beat the best measured one"
            study.enqueue_trial({UNIT_PARAM: key})
        trial = studies.ask(study)
        key = trial.suggest_categorical(UNIT_PARAM, choices)
        current = study.get_trials(deepcopy=False)
        others = {t.params.get(UNIT_PARAM) for t in current if t.state == TrialState.RUNNING and t.number != trial.number}
        if key in _measured(current) or key in others:  # now: a calibration fit may have taken seconds
            study.tell(trial, state=TrialState.PRUNED)  # another worker measured it meanwhile
            continue
        if len(_committed(current, before=trial.number)) >= budget.max_trials:
            study.tell(trial, state=TrialState.PRUNED)  # workers that asked first took the rest of the budget
            continue
        progress(study.get_trials(deepcopy=False), measuring=key)
        _run_trial(study, store, trial, key, unit_plans[key], request, measure)
        progress(study.get_trials(deepcopy=False))


def profile_online(request: PlanRequest, *, uid: str, generation: int, setup: Online,
                   model: tuple[Any, str] | None = None, params: dict[str, float] | None = None,
                   measure: Measure | None = None, progress: Callable[[str], None] = lambda message: None,
                   wall: Callable[[], float] = time.time) -> tuple[PlanResult, Any, Any]:
    """Search, calibrate and plan ``request`` online. Returns the plan result (with
    ``online`` set), the calibration fit of the best unit and that unit's ``ServingConfig``.
    Raises OnlineError."""
    from planner import plan
    from profiler.hub import load_model
    from profiler.model.params import shipped_params

    base = params or shipped_params()
    model = model or load_model(request.model)
    budget = budget_for(request, setup)
    offline = plan(request, model=model, params=base)
    every = search.units(offline.candidates)
    if not every:
        raise OnlineError(f"nothing to measure: {offline.reason}")
    deployable = {k for k, u in every.items() if setup.target.supports(u) is None}
    left_out = sorted({setup.target.supports(u) for u in every.values()} - {None})
    if not deployable:
        raise OnlineError(f"no candidate can be deployed on the {setup.target_name} target: {'; '.join(left_out)}")
    store = studies.storage(setup.database_url, heartbeat_s=setup.heartbeat_s)
    name = studies.study_name(uid, generation)
    study = studies.open_study(store, name)
    measure = measure or genai_bench_measure(setup, budget.concurrency, f"online/{uid}")

    def report(trials, measuring: str | None = None) -> None:
        progress(progress_message(trials, len(deployable), budget, study.user_attrs.get("started"), wall(), measuring))

    stopped = search_units(request, every, deployable=deployable, study=study, store=store, budget=budget,
                           params=base, measure=measure, model=model[0], progress=report, wall=wall)
    trials = study.get_trials(deepcopy=False)
    best = _best(trials)
    if best is None:
        errors = sorted({t.user_attrs.get("error", "") for t in _counted(trials)} - {""})
        raise OnlineError(f"no candidate could be measured ({stopped}): {'; '.join(errors)[:1000]}")
    best_unit = every[best.params[UNIT_PARAM]]
    fit = _fit(request, best_unit, best, base)
    # Measurements rank what was measured: the best measured candidate is sized first; the
    # other candidates measured feasible only if the calibrated model finds it cannot meet the SLA.
    result = plan(request, model=model, params=fit.params, only={search.candidate(best_unit)})
    good = [k for k, v in _measured(trials).items() if v > 0]
    if not result.feasible and good:
        result = plan(request, model=model, params=fit.params, only={search.candidate(every[k]) for k in good})
    note = (f"online: {len(_counted(trials))} candidate(s) measured with genai-bench on the {setup.target_name} "
            f"target ({stopped}); the model was calibrated on {search.unit_key(best_unit)} "
            f"(times ×{fit.scale:.3g}, TTFT MdAPE {fit.before.ttft_mdape_pct:.1f}% → {fit.after.ttft_mdape_pct:.1f}%, "
            f"TPOT {fit.before.tpot_mdape_pct:.1f}% → {fit.after.tpot_mdape_pct:.1f}%) and sized the best "
            f"measured candidate (others measured within the SLA only if it cannot meet it)")
    doc = online_document(trials, study_name=name, target=setup.target_name, budget=budget, stopped=stopped,
                          fit=fit, best=best, left_out=left_out, request=request)
    result = result.model_copy(update={"online": doc, "assumptions": (*result.assumptions, note)})
    return result, fit, search.deployment(best_unit, request)


def online_document(trials, *, study_name: str, target: str, budget: Budget, stopped: str, fit: Any,
                    best: Any, left_out: list[str], request: PlanRequest) -> OnlineSearch:
    """What ``profilingResults.online`` holds: budget, how the search ended, every trial and the
    calibration (times in ms, throughputs in output tokens/s, goodput per GPU)."""
    rows = []
    for t in trials:
        if t.state == TrialState.PRUNED:
            continue
        done = t.state == TrialState.COMPLETE
        rows.append(Trial(
            number=t.number, unit=t.params.get(UNIT_PARAM), state=t.state.name.lower(), gpus=t.user_attrs.get("gpus"),
            score=round(t.value, 3) if done else None, meets_sla=t.value > 0 if done else None,
            points=tuple(_point(p) for p in t.user_attrs.get("points", [])) if done else None,
            error=t.user_attrs.get("error") or None, results_location=t.user_attrs.get("resultsLocation") or None))
    return OnlineSearch(
        profiling=profiling_label(True), study=study_name, target=target,
        budget=SearchBudget(max_trials=budget.max_trials, max_wall_minutes=budget.max_minutes),
        sweep=Sweep(scenario=f"D({request.isl_tokens},{request.osl_tokens})", concurrency=budget.concurrency),
        trials_done=len(_counted(trials)), stopped=stopped, best=best.params.get(UNIT_PARAM),
        calibration=Calibration(unit=best.params.get(UNIT_PARAM), scale=fit.scale, fitted=fit.fitted,
                                points=fit.points, before=fit.before.model_dump(), after=fit.after.model_dump()),
        left_out=tuple(left_out), trials=tuple(rows))


def _point(p: dict[str, Any]) -> MeasuredPoint:
    """A stored sweep point (``SweepPoint.model_dump()``), to 3 decimals."""
    return MeasuredPoint(concurrency=p["concurrency"], ttft_ms=round(p["ttft_ms"], 3), itl_ms=round(p["itl_ms"], 3),
                         output_tok_s=round(p["output_tok_s"], 3))


def progress_message(trials, space: int, budget: Budget, started: float | None, now: float,
                     measuring: str | None = None) -> str:
    """The Profiling condition's message while the search runs (``measuring``: the unit being
    deployed and benchmarked now)."""
    done = len(_counted(trials))
    best = _best(trials)
    text = f"online: {done}/{budget.max_trials} candidate(s) measured"
    if best is not None:
        key = best.params.get(UNIT_PARAM)
        within = (f"{best.value:.0f} output tok/s/GPU within the SLA" if best.value > 0
                  else f"misses the SLA by ×{-best.value:.2f} at best")
        text += f"; best so far {key}: {within}"
    if measuring:
        text += f"; now measuring {measuring}"
    if started is not None:
        text += f"; {(now - started) / 60:.1f} of {budget.max_minutes:g} min used"
    return text + f"; {space} candidate(s) in the space"
