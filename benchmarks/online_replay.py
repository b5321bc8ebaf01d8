"""The online search's run-by-run rule replayed on real landscapes: measured data, not the model.

A workload is one source's measurements of one model on one GPU type with one backend and
version, one input and one output length (as in ``benchmarks/accuracy.py``); a run is one of its
measured (configuration, concurrency) rows with a measured TTFT, TPOT and output tokens/s per
GPU. The search may "measure" only those runs, and a measurement reads the row's real numbers.
SLAs are drawn from the data: every pair of the workload's measured TTFT and TPOT at the 25th,
50th and 75th percentiles (SLAs no run meets are skipped). The exhaustive replay measures every
run; the true best is the highest measured goodput per GPU among the runs within the SLA.

The search (``planner.online.next_run``): the performance model predicts every run's TTFT and
TPOT; after each measurement the predictions are rescaled by the median measured/predicted ratio
of each (the unit's own runs when it has some), the goodput of a run follows from its latencies
(Little's law for closed-loop clients), and the next run is the one with the highest expected gain:
the chance it meets the SLA (log-normal around the prediction, with the spread of the measured
errors between units and within one, learned from the runs measured, from a prior) times the
expected excess of its goodput over the best measured. The
search stops once ``--min-units`` units were measured and no expected gain reaches ``--stop`` of the
best; the pick is the best measured run within the SLA, so no pick misses it in reality (a search
that measured nothing within it has no pick: regret 1). ``--budget`` caps the runs of one search at
that share of the workload's runs (at least one).

Held out: every workload on ``--hold`` (default gb200) is kept out of the tuning of ``--stop``,
``--min-units``, ``--budget`` and the prior spread, and its predictions come from parameters fitted
without that GPU type (one fit, about a minute); the other workloads use the shipped parameters.
Reported apart.

The prior spread (``--spread``, ``planner.online.ERROR_SPREAD``): the model's error between units
and within a unit (a run against another run of its unit, as the rule uses it: ``loads``) on the
workloads of every other GPU type, each predicted by parameters fitted
without its type and without ``--hold`` (one fit per type, about 2 minutes), and the replay on
those predictions: the search judged on GPUs it was not fitted on, with no ``--hold`` row in sight.

The curve the stop was chosen on (``--curve``): runs against the exhaustive replay and mean regret of
each (``--min-units``, ``--stop``) of ``CURVE`` on the workloads of every other GPU type, as shipped;
each type predicted as for ``--spread`` with the prior spread of the other types (tune on two, check
on the third); and those predictions with a seeded per-unit error added (log-sd 1× and 2× the
between-unit prior, 3 draws): a GPU the model knows less well than the prior says. About 6 minutes.

Also reported, by workload size: the runs per search as a count and a share, against the fewest runs
any rule needs to certify its pick (``contenders``: the runs a ``--noise`` measurement noise cannot
tell from the best), and how many runs came before the first one within the SLA and after the best.

Also reported, each ``--hold`` workload's searches: their runs split into the first one within the
SLA, those before it, those from it up to the true best, and those after the best (where the runs go).

Also reported, a user profiling each workload at all its SLAs in turn: each search starts from the
runs the earlier ones measured (read, not counted), in two orders of the SLAs; the new runs per
search against the exhaustive replay (as the main table), and the distinct runs over a workload's
searches against one exhaustive sweep, which answers every SLA at once.

The rows are read with what their recipes state, as in ``benchmarks/accuracy.py`` (``--recipes``).

Last, calibration on held-out concurrencies (``--calibration``): each configuration measured at
three or more concurrencies is calibrated (``profiler.model.measured.fit_deployment``) on its lowest and
highest, and the TTFT and TPOT errors of the model before and after are compared on the others.

    python benchmarks/online_replay.py [--data CSV] [--hold gb200] [--stop 0.1] [--min-units 1]
                                       [--budget 1.0] [--noise 0.05] [--recipes CSV] [--calibration]
                                       [--spread | --curve]
"""

from __future__ import annotations

import argparse
import itertools
import math
import statistics
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks.accuracy import (INPUTS, SLA_QUANTILES, add_recipes_argument, with_recipes_of,  # noqa: E402
                                 workload_key)

if TYPE_CHECKING:
    from planner.online import ErrorSpread

MIN_CONFIGURATIONS = 3  # distinct configurations a workload needs to be searched
MIN_RUNS = 10  # measured runs a workload needs to be searched
# Measurement noise (share): the median difference of TPOT and of throughput between the few runs the
# data measured twice (TTFT differs more, ~15%, but only 4 pairs).
NOISE = 0.05


@dataclass
class Workload:
    """One workload's runs: predicted and measured points, keyed by (configuration, clients)."""

    name: str
    gpu: str
    osl_tokens: int  # output tokens per request
    predicted: dict = field(default_factory=dict)
    measured: dict = field(default_factory=dict)
    gpus: dict = field(default_factory=dict)
    rows: dict = field(default_factory=dict)  # run -> position in the data


@dataclass
class Outcome:
    """One search under one SLA, scored by the measurements."""

    runs: int
    space: int
    best: bool
    regret: float  # 1 − pick's measured goodput / the best's; 1.0 when nothing within the SLA was found
    minimum: int  # runs any rule must measure to certify the pick under the measurement noise (contenders)
    searching: int  # runs measured before the first one within the SLA (all of them when none was)
    confirming: int  # runs measured after the true best (0 when it was not found)
    known: tuple = ()  # every run known after the search: the runs it started with, then those it measured
    workload: str = ""  # the workload's name


def configuration(row: dict) -> str:
    """The deployment a row measured: its estimate inputs but the concurrency."""
    from profiler.model.calibrate import rounded

    return "|".join(rounded(row.get(k), 12) for k in INPUTS if k != "concurrency")


def workloads(rows: list[dict], data, predictions: dict[str, dict[str, "object"]]) -> list[Workload]:
    """The searchable workloads of ``data`` (``profiler.model.calibrate.prepare_rows`` of ``rows``);
    ``predictions``: per GPU type, the model's TTFT, ITL (ms) and output tokens/s per GPU per row."""
    import numpy as np

    from planner.online import SweepPoint
    from profiler.model.calibrate import measured_column

    throughput = measured_column(rows, data.index, "derived_output_tok_s_per_gpu")[0]
    gpus = measured_column(rows, data.index, "num_gpus")[0]
    out: dict[str, Workload] = {}
    for j, i in enumerate(data.index):
        row = rows[i]
        pred = predictions[data.labels["gpu"][j]]
        values = (data.ttft_ms[j], data.tpot_ms[j], throughput[j], pred["ttft_ms"][j], pred["itl_ms"][j],
                  pred["output_tok_s_per_gpu"][j], gpus[j])
        if data.repeats[j] or not all(np.isfinite(v) and v > 0 for v in values):
            continue
        w = out.setdefault(workload_key(row), Workload(name=workload_key(row), gpu=data.labels["gpu"][j],
                                                       osl_tokens=int(round(float(row["osl"])))))
        key = (configuration(row), int(round(float(row["concurrency"]))))
        if key in w.measured:
            continue
        n = int(gpus[j])
        w.gpus[key[0]] = n
        w.measured[key] = SweepPoint(concurrency=key[1], ttft_ms=float(data.ttft_ms[j]), itl_ms=float(data.tpot_ms[j]),
                                     output_tok_s=float(throughput[j]) * n)
        w.predicted[key] = SweepPoint(concurrency=key[1], ttft_ms=float(values[3]), itl_ms=float(values[4]),
                                      output_tok_s=float(values[5]) * n)
        w.rows[key] = j
    return [w for w in out.values()
            if len(w.measured) >= MIN_RUNS and len({k[0] for k in w.measured}) >= MIN_CONFIGURATIONS]


def slas(w: Workload) -> list[tuple[float, float]]:
    """(TTFT, TPOT) targets in ms at the quantiles of the workload's measurements."""
    import numpy as np

    ttft = [p.ttft_ms for p in w.measured.values()]
    tpot = [p.itl_ms for p in w.measured.values()]
    return [(float(np.quantile(ttft, a)), float(np.quantile(tpot, b))) for a, b in itertools.product(SLA_QUANTILES, repeat=2)]


def contenders(w: Workload, ttft_ms: float, itl_ms: float, noise: float) -> int:
    """Runs that measurement noise of ``noise`` (a share) cannot tell from the true best: measured
    within the SLA loosened by ``noise`` and within ``noise`` of the best goodput per GPU. A rule that
    leaves one of them unmeasured cannot certify its pick, however well it predicts: the fewest runs
    any rule needs (1 with no noise: the best itself)."""
    goodput = {k: m.output_tok_s / w.gpus[k[0]] for k, m in w.measured.items()}
    near = [k for k, m in w.measured.items() if m.ttft_ms <= ttft_ms * (1 + noise) and m.itl_ms <= itl_ms * (1 + noise)]
    best = max(goodput[k] for k in w.measured if w.measured[k].ttft_ms <= ttft_ms and w.measured[k].itl_ms <= itl_ms)
    return max(1, sum(goodput[k] >= best * (1 - noise) for k in near))


def search(w: Workload, ttft_ms: float, itl_ms: float, stop: float, min_units: int, budget: float,
           noise: float = 0.0, prior=None, known: tuple = ()) -> Outcome | None:
    """Replay the run-by-run search on ``w`` under the SLA (``prior``: the search's prior spread, by
    default ``planner.online.ERROR_SPREAD``), starting from the runs ``known`` (measured by earlier
    searches of the workload: read, not counted); None when no run meets it. ``runs``, ``searching``
    and ``confirming`` count the runs this search measured."""
    from planner import online
    from planner.types import PlanRequest

    req = PlanRequest(name="replay", model="m", gpu="g", ttft_ms=ttft_ms, itl_ms=itl_ms, osl_tokens=w.osl_tokens)
    goodput = {k: m.output_tok_s / w.gpus[k[0]] for k, m in w.measured.items()}
    meets = {k for k, m in w.measured.items() if m.ttft_ms <= ttft_ms and m.itl_ms <= itl_ms}
    if not meets:
        return None
    cap = max(1, math.floor(budget * len(w.measured)))
    known = tuple(reused_runs(w, known))
    seen: dict = {k: w.measured[k] for k in known}
    while len(seen) - len(known) < cap:
        key = online.next_run(w.predicted, seen, w.gpus, req, stop=stop, min_units=min_units,
                              prior=prior or online.ERROR_SPREAD)
        if key is None:
            break
        seen[key] = w.measured[key]
    best = max(goodput[k] for k in meets)
    order = list(seen)[len(known):]  # the runs this search measured, in order
    found = [k for k in seen if k in meets]
    start = next((i for i, k in enumerate(order) if k in meets), len(order))
    known_best = any(k in meets and goodput[k] >= best for k in known)
    at_best = -1 if known_best else next((i for i, k in enumerate(order) if k in meets and goodput[k] >= best),
                                         len(order) - 1)
    common = dict(runs=len(order), space=len(w.measured), minimum=contenders(w, ttft_ms, itl_ms, noise),
                  searching=0 if set(known) & meets else start, confirming=len(order) - 1 - at_best,
                  known=tuple(seen), workload=w.name)
    if not found:
        return Outcome(best=False, regret=1.0, **common)
    pick = max(found, key=lambda k: goodput[k])
    return Outcome(best=goodput[pick] >= best, regret=1.0 - goodput[pick] / best, **common)


def reused_runs(w: Workload, earlier: tuple) -> dict:
    """The runs of ``earlier`` (measured by earlier searches of ``w``) that the service's reuse rule
    (``planner.run_reuse.reusable``) hands a new search of the workload: each stored as the service
    stores it, under the workload's name, its configuration as the unit's settings and its clients."""
    from datetime import UTC, datetime, timedelta

    from planner.run_reuse import StoredRun, reusable

    start = datetime(2026, 1, 1, tzinfo=UTC)
    stored = [StoredRun(workload=w.name, unit=k[0], settings=k[0], concurrency=k[1],
                        points=(w.measured[k].model_dump(),), source="replay", measured_at=start + timedelta(seconds=i))
              for i, k in enumerate(earlier)]
    return reusable(stored, w.name, lambda run: run[0] if run in w.predicted else None,
                    {c for _, c in w.predicted})


def summary(outcomes: list[Outcome]) -> dict[str, float]:
    """Runs against the exhaustive replay (the ratio of the sums, and the mean of each search's share),
    true-best share, mean regret, searches that found nothing; ``one_run_pct``: the share of the
    exhaustive runs one run per search would be (the floor of any rule; ``MIN_UNITS`` times it for a
    rule that measures that many units)."""
    n = len(outcomes)
    return {"searches": n, "runs": sum(o.runs for o in outcomes), "space": sum(o.space for o in outcomes),
            "runs_pct": 100 * sum(o.runs for o in outcomes) / max(1, sum(o.space for o in outcomes)),
            "best_pct": 100 * sum(o.best for o in outcomes) / max(1, n),
            "regret_pct": 100 * sum(o.regret for o in outcomes) / max(1, n),
            "none": sum(o.regret == 1.0 for o in outcomes),
            "mean_runs": sum(o.runs for o in outcomes) / max(1, n),
            "mean_space": sum(o.space for o in outcomes) / max(1, n),
            "mean_share_pct": 100 * sum(o.runs / o.space for o in outcomes) / max(1, n),
            "one_run_pct": 100 * n / max(1, sum(o.space for o in outcomes)),
            "mean_minimum": sum(o.minimum for o in outcomes) / max(1, n),
            "minimum_pct": 100 * sum(o.minimum for o in outcomes) / max(1, sum(o.space for o in outcomes)),
            "searching": sum(o.searching for o in outcomes), "confirming": sum(o.confirming for o in outcomes),
            "start_within": sum(o.searching == 0 and o.regret < 1.0 for o in outcomes)}


def replay(ws: list[Workload], stop: float, min_units: int, budget: float, noise: float = 0.0,
           prior=None, reuse: bool = False, order=None) -> list[Outcome]:
    """Every workload of ``ws`` under each of its SLAs (``slas``, in the order ``order`` gives them:
    a function of the list, default as listed). ``reuse``: each search of a workload starts from the
    runs its earlier searches measured (a user profiling one workload at several SLAs measures each
    run once)."""
    out = []
    for w in ws:
        known: tuple = ()
        for sla in (order or list)(slas(w)):
            o = search(w, *sla, stop, min_units, budget, noise, prior, known if reuse else ())
            if o is not None:
                out.append(o)
                known = o.known
    return out


def distinct_runs(ws: list[Workload], outcomes: list[Outcome]) -> tuple[int, int]:
    """(distinct runs measured over all searches of each workload of ``outcomes``, the runs of one
    exhaustive sweep of each): what a user profiling every workload at all its SLAs measures, against
    the one sweep that answers them all."""
    runs: dict[str, set] = {}
    for o in outcomes:
        runs.setdefault(o.workload, set()).update(o.known)
    size = {w.name: len(w.measured) for w in ws}
    return sum(len(r) for r in runs.values()), sum(size[name] for name in runs)


def by_workload(outcomes: list[Outcome]) -> list[tuple[str, int, dict[str, float]]]:
    """``summary`` of each workload's searches, with its exhaustive runs: where a part's runs go."""
    names = dict.fromkeys(o.workload for o in outcomes)
    return [(name, next(o.space for o in outcomes if o.workload == name),
             summary([o for o in outcomes if o.workload == name])) for name in names]


SIZES = ((10, 19), (20, 39), (40, None))  # exhaustive runs of a workload, for the table by size


def by_size(outcomes: list[Outcome]) -> list[tuple[str, dict[str, float]]]:
    """``summary`` of the searches on workloads of each size in ``SIZES``."""
    out = []
    for low, high in SIZES:
        part = [o for o in outcomes if o.space >= low and (high is None or o.space <= high)]
        if part:
            out.append((f"{low}–{high}" if high else f"≥ {low}", summary(part)))
    return out


def predictions_for(data, hold: str, max_evals: int) -> dict[str, dict]:
    """The model's predictions of every row, per GPU type: shipped parameters, but for ``hold``,
    predicted by parameters fitted without any of its rows."""
    import numpy as np

    from profiler.model.estimate import evaluate
    from profiler.model.params import shipped_params

    shipped = evaluate(data.batch, shipped_params())
    out = {gpu: shipped for gpu in np.unique(data.labels["gpu"])}
    if hold in out:
        out[hold] = fitted_without(data, {hold}, max_evals)
    return out


def fitted_without(data, gpus: set[str], max_evals: int) -> dict:
    """The model's predictions of every row by parameters fitted without the rows of ``gpus``."""
    import numpy as np

    from profiler.model.calibrate import fit_without, kernel_prior
    from profiler.model.estimate import evaluate

    params = fit_without(data, np.isin(data.labels["gpu"], sorted(gpus)), kernel_prior(None), max_evals=max_evals)
    return evaluate(data.batch, params)


def error_spread(ws: list[Workload]) -> dict[str, dict[str, float]]:
    """The model's error (ln measured / predicted) on ``ws``, per quantity: the RMS of the units'
    medians around their workload's median (``between``) and of the runs around their unit's median
    (``within``), pooled over the workloads (``planner.online.ErrorSpread``); and ``transfer``: the RMS
    of each unit's runs around another unit's median of the same workload, the error of a unit not
    measured yet once the predictions are rescaled by one measured unit (``planner.online.spread``); and
    ``loads``: the RMS of each run around another run of its unit over √2, the within-unit spread the rule
    uses (a unit's other load rescaled by its one measured run: within × √(1 + 1/1)), measured held out."""
    from planner.online import QUANTITIES

    out: dict[str, dict[str, float]] = {"between": {}, "within": {}, "transfer": {}, "loads": {}}
    for name in QUANTITIES:
        between, within, transfer, loads = [], [], [], []
        for w in ws:
            logs: dict[str, list[float]] = {}
            for k, m in w.measured.items():
                logs.setdefault(k[0], []).append(math.log(getattr(m, name) / getattr(w.predicted[k], name)))
            mid = statistics.median(x for xs in logs.values() for x in xs)
            for xs in logs.values():
                between.append(statistics.median(xs) - mid)
                within += [x - statistics.median(xs) for x in xs]
                loads += [(y - x) / math.sqrt(2) for x, y in itertools.permutations(xs, 2)]
            for (i, xs), (j, ys) in itertools.permutations(logs.items(), 2):
                transfer += [y - statistics.median(xs) for y in ys]
        for part, ds in (("between", between), ("within", within), ("transfer", transfer), ("loads", loads)):
            out[part][name] = math.sqrt(statistics.fmean(d * d for d in ds)) if ds else 0.0
    return out


def prior_spread(parts: dict[str, dict[str, float]]) -> ErrorSpread:
    """The search's prior (``planner.online.ErrorSpread``) from ``error_spread``'s parts: between units
    their medians' spread, within a unit its runs' spread against another of its runs (``loads``), as
    the rule uses it."""
    from planner.online import ErrorSpread

    return ErrorSpread(between=parts["between"], within=parts["loads"])


def calibration_check(rows: list[dict], data) -> list[tuple[float, float, float, float]]:
    """Per configuration measured at ≥ 3 concurrencies: fitted on its lowest and highest, the
    median absolute % error of TTFT and TPOT on the others, before and after calibration. Both
    start from the shipped parameters, and the configuration's harness term (``harness.term_ms``
    of the shipped terms) is held in every prediction: the points were measured through it, and
    the fit describes the engine alone."""
    import numpy as np

    from profiler.model.dataset import row_config
    from profiler.model.harness import shipped_terms, term_ms
    from profiler.model.measured import Point, fit_deployment, predicted_at
    from profiler.model.params import shipped_params

    groups: dict[str, list[int]] = {}
    for j, i in enumerate(data.index):
        if not data.repeats[j] and not data.inferred[j] and data.ttft_ms[j] > 0 and data.tpot_ms[j] > 0:
            groups.setdefault(configuration(rows[i]), []).append(j)
    start = shipped_params()
    out = []
    for js in groups.values():
        js = sorted(js, key=lambda j: float(rows[data.index[j]]["concurrency"]))
        if len({rows[data.index[j]]["concurrency"] for j in js}) < 3:
            continue
        try:
            config = row_config(rows[data.index[js[0]]])[0]
            points = [Point(isl_tokens=config.isl_tokens, osl_tokens=config.osl_tokens,
                            concurrency=float(rows[data.index[j]]["concurrency"]), ttft_ms=float(data.ttft_ms[j]),
                            tpot_ms=float(data.tpot_ms[j])) for j in js]
            harness_ms = term_ms(shipped_terms(), str(data.harness[js[0]]), config.backend)
            fitted = fit_deployment(config, [points[0], points[-1]], params=start, harness_ms=harness_ms)
        except (ValueError, ArithmeticError):
            continue
        errs = []
        for params in (start, fitted.params):
            ttft, tpot = predicted_at(config, points[1:-1], params, harness_ms=harness_ms)
            errs += [float(np.median([abs(t / p.ttft_ms - 1) * 100 for t, p in zip(ttft, points[1:-1])])),
                     float(np.median([abs(t / p.tpot_ms - 1) * 100 for t, p in zip(tpot, points[1:-1])]))]
        out.append(tuple(errs))
    return out


# (units a search measures before it may stop, stop share) of the curve the stop was chosen on
CURVE = ((2, 0.05), (2, 0.10), (2, 0.15), (2, 0.20), (1, 0.05), (1, 0.08), (1, 0.10), (1, 0.12))
UNIT_ERRORS = (1.0, 2.0)  # per-unit errors added, log-sd as multiples of the between-unit prior
DRAWS = 3  # seeded draws of each added error


def with_unit_error(ws: list[Workload], scale: float, seed: int) -> list[Workload]:
    """``ws`` with each unit's predicted TTFT and ITL times a seeded log-normal factor of log-sd ``scale``
    times the between-unit prior (``planner.online.ERROR_SPREAD``): a GPU the model knows less well."""
    import dataclasses
    import random

    from planner.online import ERROR_SPREAD, QUANTITIES

    rng = random.Random(seed)
    out = []
    for w in ws:
        factor = {u: {q: math.exp(rng.gauss(0.0, scale * ERROR_SPREAD.between[q])) for q in QUANTITIES} for u in w.gpus}
        out.append(dataclasses.replace(w, predicted={
            k: p.model_copy(update={q: getattr(p, q) * factor[k[0]][q] for q in QUANTITIES}) for k, p in w.predicted.items()}))
    return out


def held_out_predictions(rows: list[dict], data, args: argparse.Namespace) -> tuple[list[str], list[Workload]]:
    """The GPU types but ``args.hold``, and their workloads, each type predicted by parameters fitted
    without it and without ``args.hold``."""
    from profiler.model.estimate import evaluate
    from profiler.model.params import shipped_params

    shipped = evaluate(data.batch, shipped_params())
    types = sorted(set(data.labels["gpu"]) - {args.hold})
    predictions = {gpu: shipped for gpu in set(data.labels["gpu"])}
    predictions.update({gpu: fitted_without(data, {gpu, args.hold}, args.max_evals) for gpu in types})
    return types, [w for w in workloads(rows, data, predictions) if w.gpu != args.hold]


def print_curve(rows: list[dict], data, args: argparse.Namespace) -> int:
    """Print runs / exhaustive and mean regret of each rule of ``CURVE`` on the workloads of every GPU
    type but ``args.hold``: as shipped; each type predicted by a fit without it, the search's prior the
    spread of the other types (tune on two, check on the third); and those predictions with a per-unit
    error added (``UNIT_ERRORS``, ``DRAWS`` each)."""
    shipped = [w for w in workloads(rows, data, predictions_for(data, args.hold, args.max_evals)) if w.gpu != args.hold]
    types, ws = held_out_predictions(rows, data, args)
    priors = {gpu: prior_spread(error_spread([w for w in ws if w.gpu != gpu])) for gpu in types}

    def held_out(stop: float, units: int, scale: float = 0.0) -> list[Outcome]:
        draws = [with_unit_error(ws, scale, seed) for seed in range(DRAWS)] if scale else [ws]
        return [o for d in draws for gpu in types
                for o in replay([w for w in d if w.gpu == gpu], stop, units, args.budget, args.noise, priors[gpu])]

    def cell(outcomes: list[Outcome]) -> str:
        s = summary(outcomes)
        return f"{s['runs_pct']:.1f}%, {s['regret_pct']:.1f}%"

    print(f"runs / exhaustive, mean regret on {', '.join(types)}; held out: each type predicted by a fit without "
          f"it and {args.hold}, the prior spread of the other types; added per-unit error: {DRAWS} draws")
    print("| units before a stop, stop share | as shipped | held out | " + " | ".join(f"+ {x:g}× error" for x in UNIT_ERRORS) + " |")
    print("|---|---:|---:|" + "---:|" * len(UNIT_ERRORS))
    for units, stop in CURVE:
        cells = [cell(replay(shipped, stop, units, args.budget, args.noise)), cell(held_out(stop, units))]
        cells += [cell(held_out(stop, units, x)) for x in UNIT_ERRORS]
        print(f"| {units} unit{'s' if units > 1 else ''}, {stop:.0%} | " + " | ".join(cells) + " |", flush=True)
    return 0


def print_spread(rows: list[dict], data, args: argparse.Namespace) -> int:
    """Print ``error_spread`` of the workloads of every GPU type but ``args.hold``, each predicted by
    parameters fitted without its type and without ``args.hold``, and the replay on them per type."""
    types, ws = held_out_predictions(rows, data, args)
    print(f"error spread (log-sd) of {len(ws)} workloads on {', '.join(types)}, each type predicted by a fit "
          f"without it (and without {args.hold}):")
    for part, sds in error_spread(ws).items():
        print(f"  {part}: " + ", ".join(f"{name} {sd:.3f}" for name, sd in sds.items()))
    print("replay on them: | GPU type | searches | runs / exhaustive | true best | mean regret | no pick |")
    for label, part in [(gpu, [w for w in ws if w.gpu == gpu]) for gpu in types] + [("all", ws)]:
        s = summary(replay(part, args.stop, args.min_units, args.budget, args.noise))
        print(f"| {label} | {s['searches']} | {s['runs']} / {s['space']} = {s['runs_pct']:.1f}% | {s['best_pct']:.0f}% "
              f"| {s['regret_pct']:.1f}% | {s['none']} |")
    return 0


# Orders a user might profile a workload's SLAs in (``slas`` lists the TTFT quantile outer, TPOT inner)
SLA_ORDERS = {"as listed": list, "reversed": lambda s: s[::-1]}


def print_reuse(ws: list[Workload], args: argparse.Namespace) -> None:
    """Print the replay with each search of a workload starting from the runs its earlier searches
    measured, in each of ``SLA_ORDERS``: the new runs of each search against the exhaustive replay
    (per search, as the main table), and the distinct runs over all of a workload's searches against
    one exhaustive sweep (which answers every SLA at once)."""
    print("\neach workload profiled at all its SLAs in turn, each search starting from the runs the earlier "
          "ones measured (read, not counted)")
    print("| workloads | SLA order | searches | new runs / exhaustive (per search) | searches with no new run "
          "| distinct runs / one sweep (per workload) | true best | mean regret | no pick |")
    print("|---|---|---:|---:|---:|---:|---:|---:|---:|")
    for label, part in (("tuning", [w for w in ws if w.gpu != args.hold]),
                        (f"held out ({args.hold})", [w for w in ws if w.gpu == args.hold])):
        for name, order in SLA_ORDERS.items():
            outcomes = replay(part, args.stop, args.min_units, args.budget, args.noise, reuse=True, order=order)
            s = summary(outcomes)
            distinct, sweep = distinct_runs(part, outcomes)
            print(f"| {label} | {name} | {s['searches']} | {s['runs']} / {s['space']} = {s['runs_pct']:.1f}% "
                  f"| {sum(o.runs == 0 for o in outcomes)} | {distinct} / {sweep} = {100 * distinct / max(1, sweep):.1f}% "
                  f"| {s['best_pct']:.0f}% | {s['regret_pct']:.1f}% | {s['none']} |")


def main(argv: list[str] | None = None) -> int:
    from api.commands.calibrate import given_data_path, read_rows
    from planner import online
    from profiler.model.calibrate import prepare_rows

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", help="calibration CSV (default: ../shared/data next to the repository)")
    parser.add_argument("--hold", default="gb200", help="GPU type kept out of tuning and of the model's fit")
    parser.add_argument("--stop", type=float, default=online.STOP_GAIN,
                        help="stop when no run's expected gain reaches this share of the best measured goodput")
    parser.add_argument("--min-units", type=int, default=online.MIN_UNITS, help="units measured before a search may stop")
    parser.add_argument("--budget", type=float, default=1.0, help="runs of one search at most, share of the workload's")
    parser.add_argument("--max-evals", type=int, default=100, help="model evaluations of the held-out fit")
    parser.add_argument("--noise", type=float, default=NOISE,
                        help="measurement noise (share) under which runs cannot be told apart (the fewest runs any rule needs)")
    parser.add_argument("--calibration", action="store_true", help="also the calibration check on held-out concurrencies")
    parser.add_argument("--spread", action="store_true",
                        help="only the model's error spread on each GPU type but --hold, fitted without it (the "
                             "search's prior, planner.online.ERROR_SPREAD), and the replay on those predictions")
    parser.add_argument("--curve", action="store_true",
                        help="only the runs/regret curve the stop was chosen on (CURVE), held out as --spread and "
                             "with per-unit errors added")
    add_recipes_argument(parser)
    args = parser.parse_args(argv)

    if (path := given_data_path(args.data)) is None:
        return 1
    started = time.perf_counter()
    rows = with_recipes_of(read_rows(path), args)
    data = prepare_rows(rows)
    if args.spread:
        return print_spread(rows, data, args)
    if args.curve:
        return print_curve(rows, data, args)
    ws = workloads(rows, data, predictions_for(data, args.hold, args.max_evals))
    print(f"{len(ws)} workloads with ≥ {MIN_CONFIGURATIONS} configurations and ≥ {MIN_RUNS} measured runs; "
          f"stop {args.stop:g}, at least {args.min_units} units, budget {args.budget:g} of a workload's runs")
    print("| workloads | GPU types | searches (workload × SLA) | runs / exhaustive | true best | mean regret "
          "| no pick (regret 1) |")
    print("|---|---|---:|---:|---:|---:|---:|")
    sized, spent = [], []
    for label, part in (("tuning", [w for w in ws if w.gpu != args.hold]), (f"held out ({args.hold})", [w for w in ws if w.gpu == args.hold])):
        outcomes = replay(part, args.stop, args.min_units, args.budget, args.noise)
        s = summary(outcomes)
        types = ", ".join(sorted({w.gpu for w in part}))
        print(f"| {label}: {len(part)} | {types} | {s['searches']} | {s['runs']} / {s['space']} = {s['runs_pct']:.1f}% "
              f"| {s['best_pct']:.0f}% | {s['regret_pct']:.1f}% | {s['none']} |")
        spent.append(f"{label}: runs / exhaustive {s['runs_pct']:.1f}% as the ratio of the sums, {s['mean_share_pct']:.1f}% "
                     f"as the mean of each search's share; one run per search would be {s['one_run_pct']:.1f}%, "
                     f"one per unit of the {args.min_units} every search measures {args.min_units * s['one_run_pct']:.1f}%")
        spent.append(f"{label}: {s['searching']} of the {s['runs']} runs came before the first one within the SLA "
                     f"({s['start_within']} of {s['searches']} searches started within it), {s['confirming']} after "
                     f"the true best")
        sized += [(label, size, t) for size, t in by_size(outcomes)]
        if part and part[0].gpu == args.hold:
            held = by_workload(outcomes)
    print("\n" + "\n".join(spent))
    print(f"\nby workload size (exhaustive runs); the fewest runs any rule needs: the runs a {args.noise:.0%} "
          f"measurement noise cannot tell from the best (--noise)")
    print("| searches on | workload runs | searches | runs per search (mean) | share of exhaustive | fewest needed "
          "(mean, share) | true best | mean regret |")
    print("|---|---|---:|---:|---:|---:|---:|---:|")
    for label, size, t in sized:
        print(f"| {label} | {size} | {t['searches']} | {t['mean_runs']:.1f} of {t['mean_space']:.1f} | {t['runs_pct']:.1f}% "
              f"| {t['mean_minimum']:.1f}, {t['minimum_pct']:.1f}% | {t['best_pct']:.0f}% | {t['regret_pct']:.1f}% |")
    if any(w.gpu == args.hold for w in ws):
        print(f"\n{args.hold} by workload: runs of its searches (the first within the SLA, those before it, after the "
              f"true best, and from the first within to the best, the best included), each workload's searches by name")
        print("| workload | exhaustive runs | searches | runs | first within | before it | after the best | up to the best "
              "| true best | mean regret |")
        print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
        for name, space, t in held:
            first = t["searches"] - t["none"]
            rest = t["runs"] - first - t["searching"] - t["confirming"]
            print(f"| {name.split('|', 1)[-1]} | {space} | {t['searches']} | {t['runs']} | {first} | {t['searching']} "
                  f"| {t['confirming']} | {rest} | {t['best_pct']:.0f}% | {t['regret_pct']:.1f}% |")
    print_reuse(ws, args)
    if args.calibration:
        import numpy as np

        from profiler.model.side_scales import REPEAT_NOISE, Z

        errs = np.array(calibration_check(rows, data))
        # What re-measuring the two points fitted could move a held-out error by: Z standard errors of
        # the mean of two measurements' noise, as % (the band a scale must leave to be kept).
        band = [100 * math.expm1(Z * REPEAT_NOISE[m] / math.sqrt(2)) for m in ("ttft", "tpot")]
        worse = int(((errs[:, 2] > errs[:, 0] + 1e-9) | (errs[:, 3] > errs[:, 1] + 1e-9)).sum())
        beyond = int(((errs[:, 2] > errs[:, 0] + band[0]) | (errs[:, 3] > errs[:, 1] + band[1])).sum())
        print(f"\ncalibration on the lowest and highest concurrency of {len(errs)} configurations, "
              f"held-out concurrencies: median TTFT error {np.median(errs[:, 0]):.1f}% → {np.median(errs[:, 2]):.1f}%, "
              f"TPOT {np.median(errs[:, 1]):.1f}% → {np.median(errs[:, 3]):.1f}%; changed {int((errs[:, 2:] != errs[:, :2]).any(axis=1).sum())}; "
              f"worse than uncalibrated in TTFT or TPOT: {worse}, by more than re-measuring the two points could "
              f"(TTFT {band[0]:.1f}, TPOT {band[1]:.1f} points): {beyond}")
    print(f"\n{time.perf_counter() - started:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
