"""The online search (pure): which deployment units to measure, how a measurement scores
against the SLA, and which run to measure next.

A candidate is one deployment unit of the offline planner's space — one aggregated engine, or
one prefill engine with one decode engine — as a ``Plan`` with one replica per role, so the
same renderers deploy it. A run is one unit benchmarked at one closed-loop concurrency (the
request's ISL/OSL), one ``SweepPoint``; the concurrencies a run may use are the sweep's.

Score (maximized): goodput per GPU, the highest output tokens/s per GPU among the points whose
mean TTFT and mean ITL (and end-to-end latency, when the request has a target) meet the SLA. A
run with no point within the SLA scores minus its smallest miss ratio (−1.3: 30 % over the
target), so the search still moves toward the SLA.

Next run (``next_run``, the rule ``benchmarks/online_replay.py`` replays on measured landscapes):
the performance model predicts every run; the predictions are rescaled by what was measured, and
the next run is the one with the highest expected gain (the chance it meets the SLA, from the
spread of the model's error — between units and within one, learned from the runs measured — times
its goodput's expected excess over the best measured). The search is done once a run within the
SLA was measured and no open run is expected to gain ``STOP_GAIN`` (10 %, twice the measurement
noise) of the best measured goodput per GPU.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from pydantic import BaseModel, ConfigDict, Field

from planner.sizing import Candidate
from planner.types import Plan, PlanRequest
from profiler.model import (SPREAD_BETWEEN, Model, Parallel, ServingConfig, evaluate, prepare,
                            stack_prepared)

SWEEP_CONCURRENCY = (1, 4, 16)  # the closed-loop clients a run may use


class SweepPoint(BaseModel):
    """One measured (or predicted) operating point of one unit: means over its requests."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    concurrency: int = Field(gt=0, description="closed-loop clients")
    ttft_ms: float = Field(description="mean time to first token, ms")
    itl_ms: float = Field(description="mean gap between output tokens after the first, ms")
    output_tok_s: float = Field(ge=0, description="output tokens/s of the whole unit")


def unit_key(plan: Plan) -> str:
    """A stable name of a unit: ``agg tp2`` or ``disagg tp1+tp4`` (prefill + decode)."""
    return f"{plan.mode} " + "+".join(e.tag for e in plan.engines)


def units(candidates: Iterable[Plan]) -> dict[str, Plan]:
    """The offline planner's evaluated plans as one-replica units, by key (first wins); a mix of
    shapes is no unit of its own (its shapes are)."""
    out: dict[str, Plan] = {}
    for plan in candidates:
        if plan.parts:
            continue
        key = unit_key(plan)
        if key not in out:
            engines = tuple(e.model_copy(update={"replicas": 1}) for e in plan.engines)
            out[key] = plan.model_copy(update={"engines": engines, "cost_per_hour": None})
    return out


def _parallel(e) -> Parallel:
    return Parallel(tp=e.tp, pp=e.pp, dp=e.dp, moe_ep=e.ep)


def deployment(unit: Plan, req: PlanRequest, concurrency: float = 1.0) -> ServingConfig:
    """The performance model's description of ``unit`` under ``concurrency`` clients."""
    common = dict(model=unit.model, gpu=unit.gpu, backend=unit.backend, precision=unit.precision,
                  isl_tokens=req.isl_tokens, osl_tokens=req.osl_tokens, concurrency=float(concurrency))
    if unit.mode == "agg":
        e = unit.engines[0]
        return ServingConfig(mode="agg", engine=_parallel(e), max_batch=e.max_batch,
                             max_num_tokens=e.max_num_tokens, **common)
    pre, dec = unit.role("prefill"), unit.role("decode")
    return ServingConfig(mode="disagg", prefill=_parallel(pre), decode=_parallel(dec), max_batch=dec.max_batch,
                         max_num_tokens=dec.max_num_tokens, **common)


def _miss(point: SweepPoint, req: PlanRequest) -> float:
    """How far ``point`` is from the SLA: the largest ratio of measured to target (≤ 1 meets it)."""
    ratios = [point.ttft_ms / req.ttft_ms, point.itl_ms / req.itl_ms]
    if req.e2e_ms is not None:
        ratios.append((point.ttft_ms + (req.osl_tokens - 1) * point.itl_ms) / req.e2e_ms)
    return max(ratios)


def score(points: Sequence[SweepPoint], gpus: int, req: PlanRequest) -> float:
    """Goodput per GPU within the SLA (output tokens/s/GPU), or minus the smallest miss ratio."""
    if not points:
        return float("-inf")
    good = [p.output_tok_s / gpus for p in points if _miss(p, req) <= 1.0]
    if good:
        return max(good)
    return -min(_miss(p, req) for p in points)


def predict(unit_plans: dict[str, Plan], req: PlanRequest, concurrency: Sequence[int], params: dict[str, float],
            model: Model | None = None) -> dict[str, list[SweepPoint]]:
    """The sweep each unit would measure, as the model with ``params`` predicts it."""
    keys, rows = [], []
    for key, unit in unit_plans.items():
        for c in concurrency:
            keys.append((key, c))
            rows.append(prepare(deployment(unit, req, c), model))
    out: dict[str, list[SweepPoint]] = {key: [] for key in unit_plans}
    if not rows:
        return out
    res = evaluate(stack_prepared(rows), params)
    for i, (key, c) in enumerate(keys):
        out[key].append(SweepPoint(concurrency=c, ttft_ms=float(res["ttft_ms"][i]), itl_ms=float(res["itl_ms"][i]),
                                   output_tok_s=float(res["output_tok_s_per_gpu"][i]) * unit_plans[key].total_gpus))
    return out


def candidate(unit: Plan) -> Candidate:
    """The planner's search-space point of ``unit`` (``plan(..., only={candidate(unit)})``)."""
    if unit.mode == "agg":
        return Candidate("agg", engine=_parallel(unit.engines[0]))
    return Candidate("disagg", prefill=_parallel(unit.role("prefill")), decode=_parallel(unit.role("decode")))


# --------------------------------------------------------------------------- one run at a time

Run = tuple[str, int]  # (unit key, closed-loop clients): one benchmark run
RUN_NOISE = 0.05  # measurement noise: the share by which two runs of one configuration and load differ
# Stop when no open run is expected to gain this share of the best measured goodput per GPU: twice the
# noise, chosen on the replay's tuning workloads (``benchmarks/online_replay.py``; docs/accuracy.md).
STOP_GAIN = 2 * RUN_NOISE
QUANTITIES = ("ttft_ms", "itl_ms")  # the latencies the model's error is rescaled and spread on


@dataclass(frozen=True)
class ErrorSpread:
    """The log-sd of the model's error (ln measured / predicted) per quantity (``QUANTITIES``) within
    one workload: ``between`` the units (their runs' medians around the workload's), ``within`` a
    unit (its runs at other loads around its median); ``weight``: runs the prior counts as when the
    measured runs update it."""

    between: dict[str, float]
    within: dict[str, float]
    weight: float = 1.0

    def __post_init__(self) -> None:
        for field in ("between", "within"):
            sds = getattr(self, field)
            if set(sds) != set(QUANTITIES) or not all(sd > 0 for sd in sds.values()):
                raise ValueError(f"ErrorSpread.{field}: a positive log-sd for each of {', '.join(QUANTITIES)}")
        if not self.weight > 0:
            raise ValueError("ErrorSpread.weight: the runs the prior counts as must be positive")


# The spread on a GPU the model was not fitted on: between units ``profiler.model.error_spread``'s; within
# a unit as the rule uses it (a unit's other load rescaled by one measured run: within × √2), measured held
# out (``benchmarks/online_replay.py --spread``, "loads": each run against another run of its unit, each
# GPU type predicted by a fit without it), wider than the runs' spread around their own unit's median.
WITHIN_UNIT = {"ttft_ms": 0.379, "itl_ms": 0.080}
ERROR_SPREAD = ErrorSpread(between={"ttft_ms": SPREAD_BETWEEN["ttft"], "itl_ms": SPREAD_BETWEEN["tpot"]},
                           within=WITHIN_UNIT)
MIN_UNITS = 1  # units measured before the search may stop (more: the spread between units learned, not the prior's)


def runs(sweeps: dict[str, Sequence[SweepPoint]]) -> dict[Run, SweepPoint]:
    """Each unit's sweep (``predict``'s) as runs: one point per (unit, clients)."""
    return {(k, p.concurrency): p for k, points in sweeps.items() for p in points}


def closed_loop_tok_s(point: SweepPoint, osl_tokens: int) -> float:
    """Output tokens/s of ``point.concurrency`` closed-loop clients, each waiting TTFT + (OSL − 1) × ITL
    (ms) per request of ``osl_tokens`` output tokens (Little's law): the throughput a run's latencies imply."""
    return point.concurrency * osl_tokens * 1000.0 / (point.ttft_ms + (osl_tokens - 1) * point.itl_ms)


def rescale(predicted: dict[Run, SweepPoint], measured: dict[Run, SweepPoint]) -> dict[Run, SweepPoint]:
    """``predicted`` with TTFT and ITL each multiplied by the median ratio of measured to predicted:
    over the unit's own measured runs when it has some (its other loads), else over every run measured
    (the calibration a few runs identify: one scale per quantity). Throughput follows from the latencies
    (``closed_loop_tok_s``)."""
    both = [k for k in measured if k in predicted]
    if not both:
        return dict(predicted)

    def factors(keys: list[Run]) -> dict[str, float]:
        return {name: math.exp(statistics.median(math.log(getattr(measured[k], name) / getattr(predicted[k], name))
                                                 for k in keys))
                for name in QUANTITIES}

    overall = factors(both)
    own = {unit: factors([k for k in both if k[0] == unit]) for unit in {k[0] for k in both}}
    return {k: p.model_copy(update={name: getattr(p, name) * x for name, x in own.get(k[0], overall).items()})
            for k, p in predicted.items()}


def _pooled(prior: float, weight: float, deviations: list[float], dof: int) -> float:
    """A log-sd from ``prior`` counted as ``weight`` runs and ``deviations`` with ``dof`` degrees of freedom."""
    return math.sqrt((weight * prior * prior + sum(d * d for d in deviations)) / (weight + dof))


def spread(predicted: dict[Run, SweepPoint], measured: dict[Run, SweepPoint],
           prior: ErrorSpread = ERROR_SPREAD) -> dict[str | None, dict[str, float]]:
    """The log-sd per quantity of the model's error at a run, after ``rescale``: by measured unit, and
    for every unit not measured yet (key None).

    The log ratios (measured / predicted) of the measured runs update ``prior``: the within-unit
    spread with their deviations from their unit's median, the between-unit spread with the units'
    medians' deviations from the overall median (a search that finds the model unevenly off widens
    both). A measured unit's runs are rescaled by its median of n runs: within-unit spread × √(1 + 1/n);
    another unit's by the median of m units: between × √(1 + 1/m), as the spread between units' medians
    already holds the within-unit noise of their runs (measured held out, a unit's runs against another
    unit's median: log-sd 0.54 of TTFT and 0.14 of TPOT, against between × √2 = 0.53 and 0.14 and
    √(2(between² + within²)) = 0.73 and 0.17; ``benchmarks/online_replay.py --spread``); nothing
    measured, between and within together."""
    out: dict[str | None, dict[str, float]] = {None: {}}
    for name in QUANTITIES:
        logs: dict[str, list[float]] = {}
        for k, m in measured.items():
            if k in predicted:
                logs.setdefault(k[0], []).append(math.log(getattr(m, name) / getattr(predicted[k], name)))
        if not logs:
            out[None][name] = math.hypot(prior.between[name], prior.within[name])
            continue
        medians = {u: statistics.median(x) for u, x in logs.items()}
        mid = statistics.median(x for xs in logs.values() for x in xs)
        n = sum(len(x) for x in logs.values())
        within = _pooled(prior.within[name], prior.weight, [x - medians[u] for u, xs in logs.items() for x in xs],
                         n - len(logs))
        between = _pooled(prior.between[name], prior.weight, [v - mid for v in medians.values()], len(logs) - 1)
        # A unit's runs rescaled by other units' medians: the between-unit spread alone (units' medians
        # already carry their runs' within-unit noise), × √(1 + 1/m) for a median of m units.
        out[None][name] = between * math.sqrt(1 + 1 / len(logs))
        for u, xs in logs.items():  # never less sure of a measured unit than of one not measured
            out.setdefault(u, {})[name] = min(within * math.sqrt(1 + 1 / len(xs)), out[None][name])
    return out


def _phi(x: float) -> float:
    """The standard normal distribution function."""
    return 0.5 * (1.0 + math.erf(x / math.sqrt(2.0)))


def _within(point: SweepPoint, req: PlanRequest, sd: dict[str, float]) -> float:
    """Probability that a run predicted at ``point`` meets the SLA, its TTFT and ITL log-normal around
    the prediction with log-sd ``sd`` (the end-to-end latency, when targeted, with ITL's)."""
    p = (_phi(math.log(req.ttft_ms / point.ttft_ms) / sd["ttft_ms"])
         * _phi(math.log(req.itl_ms / point.itl_ms) / sd["itl_ms"]))
    if req.e2e_ms is not None:
        p *= _phi(math.log(req.e2e_ms / (point.ttft_ms + (req.osl_tokens - 1) * point.itl_ms)) / sd["itl_ms"])
    return p


def _gain(goodput: float, best: float, sd: float) -> float:
    """Expected excess over ``best`` of a log-normal goodput with median ``goodput`` and log-sd ``sd``
    (the whole goodput when nothing within the SLA was measured yet)."""
    if best <= 0:
        return goodput
    d = math.log(goodput / best) / sd
    return goodput * _phi(d + sd) - best * _phi(d)


def next_run(predicted: dict[Run, SweepPoint], measured: dict[Run, SweepPoint], gpus: dict[str, int],
             req: PlanRequest, *, stop: float = STOP_GAIN, min_units: int = MIN_UNITS,
             prior: ErrorSpread = ERROR_SPREAD) -> Run | None:
    """The run to measure next, or None when none is left worth measuring.

    ``predicted``: the model's prediction of every run the search may measure (rescaled here by
    ``measured``, what the runs measured so far gave); ``gpus``: GPUs of each unit. A unit's
    latencies grow with its clients and so does its throughput, so a run is ruled out when the same
    unit measured over the SLA with no more clients, or within it with more. Of the rest, the next
    is the one with the highest expected gain: the probability it meets the SLA (``spread`` of the
    model's error) times the expected excess of its goodput per GPU (``closed_loop_tok_s`` of its
    latencies) over the best measured within the SLA. The search stops once ``min_units`` units were
    measured and no gain reaches ``stop`` times the best; it never stops while nothing measured meets the
    SLA. Fewer units measured and no gain reaching it, the next is the best run of a unit not measured
    yet (a unit's other loads say nothing of the spread between units), or None when no such run is open."""
    within = [m.output_tok_s / gpus[k[0]] for k, m in measured.items() if _miss(m, req) <= 1.0]
    best = max(within, default=0.0)
    spreads = spread(predicted, measured, prior)
    scored = []
    for key, p in rescale(predicted, measured).items():
        unit, clients = key
        if key in measured or any(u == unit and ((c <= clients and _miss(m, req) > 1.0)
                                                 or (c >= clients and _miss(m, req) <= 1.0))
                                  for (u, c), m in measured.items()):
            continue
        goodput = closed_loop_tok_s(p, req.osl_tokens) / gpus[unit]
        sd = spreads.get(unit, spreads[None])
        scored.append((_within(p, req, sd) * _gain(goodput, best, sd["itl_ms"]), key))
    if not scored:
        return None
    value, key = max(scored)
    if best > 0 and value < stop * best:
        units = {k[0] for k in measured}
        others = [(v, k) for v, k in scored if k[0] not in units]
        return max(others)[1] if len(units) < min_units and others else None
    return key
