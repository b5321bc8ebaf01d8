"""The online search loop (pure): measure runs until a budget runs out or nothing is left worth
measuring, then plan from the measurements.

A trial is one run: one unit deployed and benchmarked at one concurrency. Everything outside is
handed in: the ledger the trials are kept in (``planner.ledger``), the function that deploys and
benchmarks a run (``Measure``), the calibration fit of a unit's measured runs (``Fit``), the wall
clock and the wait between looks at the ledger. Several workers may run this loop on one ledger
at once: a trial being measured counts against the budget, and the trial numbers order workers
that ask at the same moment.

The model with the starting parameters predicts every run of every unit once
(``planner.online.predict``); each round, ``planner.online.next_run`` — the rule
``benchmarks/online_replay.py`` replays on measured landscapes, with the same defaults — rescales
those predictions by the runs measured so far and names the next run, or none (the search has
converged). That run is enqueued, asked for, measured and told its score (goodput per GPU within
the SLA, ``planner.online.score``). A trial its worker lost is retried first. Once the search
stops, the best run's unit is calibrated on all of its runs and planned (``plan_measured``).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from planner import online as search
from planner.ledger import Ledger, LedgerTrial
from planner.online_results import Calibration, MeasuredPoint, OnlineSearch, SearchBudget, Sweep, Trial
from planner.plan import plan
from planner.request import profiling_label
from planner.run_reuse import StoredRun
from planner.types import Plan, PlanRequest, PlanResult

__all__ = ["Budget", "Fit", "Measure", "Measurement", "SearchError", "budget_for", "new_runs", "plan_measured",
           "search_runs", "trial_name"]


class SearchError(ValueError):
    """Nothing could be measured to plan from (said in plain words)."""


@dataclass(frozen=True)
class Budget:
    """How much one search may measure: trials (runs), wall time (minutes), and the closed-loop
    clients a run may use."""

    max_trials: int
    max_minutes: float
    concurrency: tuple[int, ...]


def budget_for(request: PlanRequest, *, max_trials: int, max_minutes: float) -> Budget:
    """The request's budget, the service's ``max_trials`` and ``max_minutes`` where it sets none."""
    return Budget(max_trials=request.max_trials or max_trials, max_minutes=request.max_wall_minutes or max_minutes,
                  concurrency=request.sweep_concurrency or search.SWEEP_CONCURRENCY)


@dataclass(frozen=True)
class Measurement:
    """What benchmarking one run gave: its point (none without a successful request), the
    benchmark's iterations as stored (for the calibration fit), where its results are, and why it
    failed (None: it did not)."""

    points: tuple[search.SweepPoint, ...]
    iterations: tuple[dict[str, Any], ...]
    location: str
    failure: str | None


Measure = Callable[[Plan, int, PlanRequest, str], Measurement]  # (unit, clients, request, trial name); never raises
# (unit, the stored iterations of its measured runs, start) → profiler.model.measured.DeploymentFit
Fit = Callable[[Plan, list[dict[str, Any]], dict[str, float]], Any]


def trial_name(request: PlanRequest, number: int) -> str:
    """The name a trial's deployment gets: a DNS label of at most 52 characters."""
    from planner.manifests.common import dns_name

    return dns_name(f"{request.name}-online-{number}", max_len=52)


def _used_budget(t: LedgerTrial) -> bool:
    """Measured by this search (not reused), or failed on its own (not lost with a worker)."""
    return (t.state == "complete" and "reusedFrom" not in t.attrs) or (t.state == "fail" and "error" in t.attrs)


def _reused(t: LedgerTrial) -> bool:
    return t.state == "complete" and "reusedFrom" in t.attrs


def new_runs(trials: Iterable[LedgerTrial]) -> list[LedgerTrial]:
    """The trials this search measured itself (complete, not reused): what later searches may reuse."""
    return [t for t in trials if t.state == "complete" and "reusedFrom" not in t.attrs]


def _seed(ledger: Ledger, reused: Mapping[search.Run, StoredRun], unit_plans: dict[str, Plan],
          request: PlanRequest, concurrency: tuple[int, ...]) -> None:
    """Record each of the ``reused`` runs as a complete trial of a new study, scored under this
    request's SLA; a resumed study (one with trials) already holds them.

    Workers that start a fresh study at once may each find it empty and record the runs: a run
    another worker already recorded (complete, or running under a lower trial number) is pruned
    here, and ``_distinct`` reads a run two workers still both recorded once."""
    if not reused or ledger.trials():
        return
    for run, stored in sorted(reused.items()):
        ledger.enqueue(*run)
        trial = ledger.ask(sorted(unit_plans), concurrency)  # the waiting trial just enqueued
        unit = unit_plans[run[0]]
        points = [search.SweepPoint(**p) for p in stored.points]
        ledger.set_attrs(trial.number, {"name": trial_name(request, trial.number), "gpus": unit.total_gpus,
                                        "reusedFrom": stored.source, "points": [p.model_dump() for p in points],
                                        "iterations": list(stored.iterations)})
        if any(_run(t) == run and "reusedFrom" in t.attrs
               and (t.state == "complete" or (t.state == "running" and t.number < trial.number))
               for t in ledger.trials() if t.number != trial.number):
            ledger.tell(trial.number, "pruned")  # another worker recorded it
            continue
        ledger.tell(trial.number, "complete", search.score(points, unit.total_gpus, request))


def _distinct(trials: Iterable[LedgerTrial]) -> list[LedgerTrial]:
    """``trials`` without a reused run recorded again (two workers seeding one study at once): the
    lowest-numbered record of each reused run stands."""
    seen: set[search.Run] = set()
    out = []
    for t in sorted(trials, key=lambda t: t.number):
        if _reused(t):
            if _run(t) in seen:
                continue
            seen.add(_run(t))
        out.append(t)
    return out


def _counted(trials: Iterable[LedgerTrial]) -> list[LedgerTrial]:
    """Trials that used the budget."""
    return [t for t in trials if _used_budget(t)]


def _committed(trials: Iterable[LedgerTrial], before: int | None = None) -> list[LedgerTrial]:
    """Trials (numbered below ``before``, when given) that used the budget or are being measured:
    workers that check the budget at once each see the same count, the trial numbers order them."""
    return [t for t in trials if (before is None or t.number < before) and (t.state == "running" or _used_budget(t))]


def _measured(trials: Iterable[LedgerTrial]) -> dict[search.Run, search.SweepPoint]:
    """Every measured run's point (a trial that measured a whole sweep gives a run per point)."""
    return {(t.unit, p["concurrency"]): search.SweepPoint(**p)
            for t in trials if t.state == "complete" for p in t.attrs["points"]}


def _unit_scores(trials: Iterable[LedgerTrial]) -> dict[str, float]:
    """Each measured unit's best score over its runs."""
    out: dict[str, float] = {}
    for t in trials:
        if t.state == "complete":
            out[t.unit] = max(out.get(t.unit, t.value), t.value)
    return out


def _run(t: LedgerTrial) -> search.Run:
    return (t.unit, t.concurrency)


def _iterations(trials: Iterable[LedgerTrial], unit: str) -> list[dict[str, Any]]:
    """The stored genai-bench iterations of ``unit``'s measured runs."""
    return [it for t in trials if t.state == "complete" and t.unit == unit for it in t.attrs["iterations"]]


def _failed(trials: list[LedgerTrial]) -> Callable[[search.Run], bool]:
    """Whether a run is ruled out by runs that failed on their own: a unit none of whose runs was
    measured is out after one failure (it may not come up at all); a measured unit loses the loads
    at and above a failed run's (more clients than it could serve)."""
    measured = {t.unit for t in trials if t.state == "complete"}
    failed = [_run(t) for t in _counted(trials) if t.state == "fail"]

    def out(run: search.Run) -> bool:
        return any(u == run[0] and (u not in measured or c is None or c <= run[1]) for u, c in failed)

    return out


def _best(trials: Iterable[LedgerTrial]) -> LedgerTrial | None:
    done = [t for t in trials if t.state == "complete"]
    return max(done, key=lambda t: t.value) if done else None


def _run_trial(ledger: Ledger, number: int, unit: Plan, clients: int, request: PlanRequest,
               measure: Measure) -> None:
    name = trial_name(request, number)
    ledger.set_attrs(number, {"name": name, "gpus": unit.total_gpus})
    with ledger.keep_alive(number):
        measured = measure(unit, clients, request, name)
    attrs: dict[str, Any] = {"resultsLocation": measured.location}
    if measured.failure:
        attrs["error"] = measured.failure[:2000]
    if not measured.points:
        attrs["error"] = measured.failure or "no successful request was measured"
        ledger.set_attrs(number, attrs)
        ledger.tell(number, "fail")
        return
    attrs["points"] = [p.model_dump() for p in measured.points]
    attrs["iterations"] = list(measured.iterations)
    ledger.set_attrs(number, attrs)
    ledger.tell(number, "complete", search.score(measured.points, unit.total_gpus, request))


def search_runs(request: PlanRequest, unit_plans: dict[str, Plan], *, deployable: set[str], ledger: Ledger,
                 budget: Budget, params: dict[str, float], measure: Measure, wall: Callable[[], float],
                 sleep: Callable[[float], None], model: Any = None,
                 progress: Callable[[str], None] = lambda message: None, poll_s: float = 5.0,
                 reused: Mapping[search.Run, StoredRun] | None = None) -> str:
    """Measure runs of the ``deployable`` units of ``unit_plans`` until a budget runs out or
    nothing is left worth measuring; ``params`` predict every run; ``progress`` is told how the
    search stands (``progress_message``) before and after each trial. Returns why it stopped.
    ``reused``: runs earlier searches of the workload measured (``planner.run_reuse.reusable``):
    the search starts from them, as measured, and they use none of the budget.

    A trial's unit is one of every unit's key, sorted, and its clients one of the budget's: the
    same for every worker and restart whatever the target, as a resumed ledger requires."""
    choices = sorted(unit_plans)
    _seed(ledger, reused or {}, unit_plans, request, budget.concurrency)
    started = ledger.started(wall)
    deadline = started + budget.max_minutes * 60.0
    predicted = search.runs(search.predict({k: unit_plans[k] for k in sorted(deployable)}, request, budget.concurrency,
                                           params, model))
    gpus = {k: u.total_gpus for k, u in unit_plans.items()}

    def report(measuring: search.Run | None = None) -> None:
        progress(progress_message(_distinct(ledger.trials()), len(deployable), budget, started, wall(), measuring))

    while True:
        ledger.fail_stale()
        trials = _distinct(ledger.trials())
        if len(_counted(trials)) >= budget.max_trials:
            return f"trial budget used ({budget.max_trials} runs)"
        if wall() >= deadline:
            return f"wall-time budget used ({budget.max_minutes:g} min)"
        if len(_committed(trials)) >= budget.max_trials:
            sleep(poll_s)  # the rest of the budget is being measured by other (or lost) workers' trials
            continue
        if not any(t.state == "waiting" for t in trials):  # else: a lost trial to retry first
            busy = {_run(t) for t in trials if t.state == "running"}
            out = _failed(trials)
            open_runs = {k: p for k, p in predicted.items() if k not in busy and not out(k)}
            run = search.next_run(open_runs, _measured(trials), gpus, request)
            if run is None:
                if busy:
                    sleep(poll_s)  # another (or a lost) worker's trial: wait for it to end or go stale
                    continue
                return (f"converged: no run left is expected to gain {search.STOP_GAIN:.0%} of the best "
                        f"measured goodput")
            ledger.enqueue(*run)
        trial = ledger.ask(choices, budget.concurrency)
        current = _distinct(ledger.trials())
        others = {_run(t) for t in current if t.state == "running" and t.number != trial.number}
        if _run(trial) in _measured(current) or _run(trial) in others:
            ledger.tell(trial.number, "pruned")  # another worker measured it meanwhile
            continue
        if len(_committed(current, before=trial.number)) >= budget.max_trials:
            ledger.tell(trial.number, "pruned")  # workers that asked first took the rest of the budget
            continue
        report(measuring=_run(trial))
        _run_trial(ledger, trial.number, unit_plans[trial.unit], trial.concurrency, request, measure)
        report()


def plan_measured(request: PlanRequest, unit_plans: dict[str, Plan], *, ledger: Ledger, stopped: str, fit: Fit,
                  params: dict[str, float], budget: Budget, target: str, left_out: list[str],
                  model: Any = None, offline_pick: str | None = None) -> tuple[PlanResult, Any]:
    """Calibrate the unit of the best run on all its runs and plan ``request`` for its load
    (``online`` set); returns the result and the fit. Raises SearchError when no run could be
    measured.

    Measurements rank what was measured: the best measured unit is sized first; the other units
    measured within the SLA only if the calibrated model finds it cannot meet it."""
    trials = _distinct(ledger.trials())
    best = _best(trials)
    if best is None:
        errors = sorted({t.attrs.get("error", "") for t in _counted(trials)} - {""})
        raise SearchError(f"no candidate could be measured ({stopped}): {'; '.join(errors)[:1000]}")
    best_unit = unit_plans[best.unit]
    calibration = fit(best_unit, _iterations(trials, best.unit), params)
    result = plan(request, model=model, params=calibration.params, only={search.candidate(best_unit)})
    good = [k for k, v in _unit_scores(trials).items() if v > 0]
    if not result.feasible and good:
        result = plan(request, model=model, params=calibration.params,
                      only={search.candidate(unit_plans[k]) for k in good})
    f = calibration
    measured = _measured(trials)
    reused = {_run(t) for t in trials if _reused(t)}
    reused_text = f", {len(reused)} of them reused from earlier DGDRs of the workload" if reused else ""
    note = (f"online: {len(measured)} run(s) of {len({k[0] for k in measured})} candidate(s) measured with "
            f"genai-bench on the {target} target{reused_text} ({stopped}); the model was calibrated on "
            f"{search.unit_key(best_unit)}'s runs "
            f"({f.times}, TTFT MdAPE {f.before.ttft_mdape_pct:.1f}% → {f.after.ttft_mdape_pct:.1f}%, "
            f"TPOT {f.before.tpot_mdape_pct:.1f}% → {f.after.tpot_mdape_pct:.1f}%) and sized the best "
            f"measured candidate (others measured within the SLA only if it cannot meet it)")
    swept = {k: unit_plans[k] for k in _unit_scores(trials)}
    engine_model = model[0] if model is not None else None
    doc = online_document(trials, study_name=ledger.name, target=target, budget=budget, stopped=stopped,
                          fit=calibration, best=best, left_out=left_out, request=request, offline_pick=offline_pick,
                          predicted=search.predict(swept, request, budget.concurrency, params, engine_model),
                          calibrated=search.predict(swept, request, budget.concurrency, calibration.params,
                                                    engine_model))
    return result._replace(online=doc, assumptions=(*result.assumptions, note)), calibration


def online_document(trials: list[LedgerTrial], *, study_name: str, target: str, budget: Budget, stopped: str,
                    fit: Any, best: LedgerTrial, left_out: list[str], request: PlanRequest,
                    offline_pick: str | None = None, predicted: dict[str, list[search.SweepPoint]] | None = None,
                    calibrated: dict[str, list[search.SweepPoint]] | None = None) -> OnlineSearch:
    """What ``profilingResults.online`` holds: budget, how the search ended, every trial and the
    calibration (times in ms, throughputs in output tokens/s, goodput per GPU); ``offline_pick``:
    the offline plan's unit; ``predicted`` and ``calibrated``: the offline and the calibrated
    model's sweeps of the measured units (each trial shows its runs' points)."""
    rows = []
    for t in trials:
        if t.state == "pruned":
            continue
        done = t.state == "complete"
        rows.append(Trial(
            number=t.number, unit=t.unit, concurrency=t.concurrency, state=t.state, gpus=t.attrs.get("gpus"),
            score=round(t.value, 3) if done else None, meets_sla=t.value > 0 if done else None,
            points=tuple(_point(p) for p in t.attrs.get("points", [])) if done else None,
            predicted=_points_of(predicted, t) if done else None,
            calibrated=_points_of(calibrated, t) if done else None,
            error=t.attrs.get("error") or None, results_location=t.attrs.get("resultsLocation") or None,
            reused_from=t.attrs.get("reusedFrom") if done else None))
    return OnlineSearch(
        profiling=profiling_label(True), study=study_name, target=target,
        budget=SearchBudget(max_trials=budget.max_trials, max_wall_minutes=budget.max_minutes),
        sweep=Sweep(scenario=f"D({request.isl_tokens},{request.osl_tokens})", concurrency=budget.concurrency),
        trials_done=len(_counted(trials)), trials_reused=sum(map(_reused, trials)), stopped=stopped, best=best.unit,
        calibration=Calibration(unit=best.unit, scale=fit.scale, sides=fit.sides, fitted=fit.fitted, points=fit.points,
                                harness_ms=fit.harness_ms, before=fit.before.model_dump(),
                                after=fit.after.model_dump(), held_out=fit.held_out,
                                uncertainty=fit.uncertainty),
        left_out=tuple(left_out), offline_pick=offline_pick, trials=tuple(rows))


def _points_of(sweeps: dict[str, list[search.SweepPoint]] | None, t: LedgerTrial) -> tuple[MeasuredPoint, ...] | None:
    """The predicted points of trial ``t``'s runs, to 3 decimals (None when not predicted)."""
    if not sweeps or t.unit not in sweeps:
        return None
    clients = {p["concurrency"] for p in t.attrs.get("points", [])}
    return tuple(_point(p.model_dump()) for p in sweeps[t.unit] if p.concurrency in clients)


def _point(p: dict[str, Any]) -> MeasuredPoint:
    """A stored sweep point (``SweepPoint.model_dump()``), to 3 decimals."""
    return MeasuredPoint(concurrency=p["concurrency"], ttft_ms=round(p["ttft_ms"], 3), itl_ms=round(p["itl_ms"], 3),
                         output_tok_s=round(p["output_tok_s"], 3))


def run_text(run: search.Run) -> str:
    """A run as people read it: ``agg tp2 at 4 clients``."""
    return f"{run[0]} at {run[1]} clients"


def progress_message(trials: list[LedgerTrial], space: int, budget: Budget, started: float | None, now: float,
                     measuring: search.Run | None = None) -> str:
    """The Profiling condition's message while the search runs (``measuring``: the run being
    deployed and benchmarked now; ``started`` and ``now`` in s since the epoch)."""
    done = len(_counted(trials))
    best = _best(trials)
    text = f"online: {done}/{budget.max_trials} run(s) measured"
    if best is not None:
        within = (f"{best.value:.0f} output tok/s/GPU within the SLA" if best.value > 0
                  else f"misses the SLA by ×{-best.value:.2f} at best")
        text += f"; best so far {run_text(_run(best)) if best.concurrency else best.unit}: {within}"
    if measuring:
        text += f"; now measuring {run_text(measuring)}"
    if started is not None:
        text += f"; {(now - started) / 60:.1f} of {budget.max_minutes:g} min used"
    return text + f"; {space} candidate(s) in the space"
