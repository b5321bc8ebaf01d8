"""Sizing candidates for a load: replicas of an aggregated engine, or prefill and decode
workers of a disaggregated one, each checked against the SLA with the full model.

Vectorized over a batch of candidates. Aggregated engines split the load evenly, so one
engine is evaluated at a grid of per-engine loads and the largest load within the SLA
sets the replica count. Disaggregated pools are sized by rate matching: decode workers so
each runs at most the batch whose step time meets the ITL target, prefill workers (an
M/D/c pool) so the first token arrives within the TTFT target at the resulting request
rate. Every sized deployment is then evaluated whole, and pools that still miss are grown.
"""

from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np

from planner.rounds import Steps
from profiler.model import (Parallel, Prediction, Prepared, accepted_per_step, decode_step_s, first_token,
                            first_token_steps, prediction, prefill_batching, prefill_capacity)

GROWTH_ROUNDS = 8
MAX_WORKERS = 512
KNEE = 0.01  # a pool whose growth bought less than this share of its latency has stopped helping
_AGG_CONCURRENCY_GRID = np.array(sorted({round(1.25 ** k) for k in range(38)}))  # 1 … ~4800
_RATE_GRID = np.geomspace(0.01, 2000.0, 60)  # requests/s per engine
REFINE_STEPS = 8  # loads tried between an engine's highest grid point within the SLA and the next


def _distinct(values: np.ndarray) -> np.ndarray:
    """The sorted distinct values of a 1-D array of numbers (not NaN): ``np.unique``'s answer
    without its masked-array check, whose first call imports numpy.ma (7 ms of the CLI's start-up)."""
    ordered = np.sort(values)
    keep = np.ones(ordered.shape, dtype=bool)
    keep[1:] = ordered[1:] != ordered[:-1]
    return ordered[keep]


class Candidate(NamedTuple):
    """A point of the search space (hashable): one engine shape, or a prefill/decode pair."""

    mode: str
    engine: Parallel | None = None
    prefill: Parallel | None = None
    decode: Parallel | None = None


class Target(NamedTuple):
    """The SLA (ms) and load; ``load`` None means: size a unit for the best goodput per GPU and
    deploy as many whole units as ``gpus`` (the GPU budget) holds, or one without a budget."""

    ttft_ms: float
    itl_ms: float
    e2e_ms: float | None
    load: float | None
    closed: bool
    isl: int
    osl: int
    gpus: int | None = None


class Sized(NamedTuple):
    """A candidate sized for the load, with the full model's prediction for the whole deployment."""

    candidate: Candidate
    replicas: int
    prefill_workers: int
    decode_workers: int
    total_gpus: int
    prediction: Prediction
    meets_sla: bool
    load: float  # the load evaluated: closed-loop clients or requests/s of the whole deployment


def _meets(out: dict[str, np.ndarray], t: Target) -> np.ndarray:
    ok = (out["ttft_ms"] <= t.ttft_ms) & (out["itl_ms"] <= t.itl_ms) & ~out["saturated"]
    if t.e2e_ms is not None:
        ok &= out["ttft_ms"] + (t.osl - 1) * out["itl_ms"] <= t.e2e_ms
    return ok


def _with_load(prep: Prepared, **load) -> Prepared:
    return prep._replace(load={**prep.load, **load})


def _pick(out: dict[str, np.ndarray], i: int, t: Target) -> Prediction:
    """The prediction of row ``i`` of ``evaluate``'s outputs. In flight: the stated clients of a
    closed loop, else requests/s × end-to-end latency (Little's law)."""
    pr = {k: float(v[i]) for k, v in out.items()}
    e2e_s = (pr["ttft_ms"] + (t.osl - 1) * pr["itl_ms"]) / 1e3
    return prediction(pr, concurrency=t.load if (t.load is not None and t.closed) else pr["requests_per_s"] * e2e_s)


def size_aggregated(cands: list[Candidate], preps: list[Prepared], t: Target) -> Steps[list[Sized]]:
    """Replicas for each aggregated candidate (``preps`` built for one engine, load 1): a sizing
    step (``planner.rounds``)."""
    if not cands:
        return []
    grid = _RATE_GRID if not t.closed else _AGG_CONCURRENCY_GRID.astype(float)
    closed = 1.0 if t.closed else 0.0
    out = yield [_with_load(prep, load=float(x), closed=closed) for prep in preps for x in grid]
    ok = _meets(out, t).reshape(len(preps), len(grid))
    todo, missed = [], []
    highest = [int(np.flatnonzero(row).max()) if row.any() else -1 for row in ok]
    finer = yield from _finer(preps, highest, grid, t)
    for i, (cand, prep) in enumerate(zip(cands, preps)):
        if highest[i] < 0:
            missed.append(_unsized(cand, prep, out, i * len(grid), float(grid[0]), t))
            continue
        per_engine = finer[i]
        if t.load is None:
            replicas = units(t.gpus, prep.total_gpus)
            load = per_engine * replicas
        else:
            replicas, load = max(1, math.ceil(t.load / per_engine - 1e-9)), t.load
        todo.append((cand, prep, replicas, load))
    return (yield from _verify_aggregated(todo, t)) + missed


def _finer(preps: list[Prepared], highest: list[int], grid: np.ndarray, t: Target) -> Steps[list[float]]:
    """The largest per-engine load within the SLA, refined between each candidate's highest grid
    point within it (index in ``highest``, −1 for none) and the next: the grid's steps are 25%
    (clients) or 20% (requests/s) apart, a load an engine would leave unserved. Closed-loop loads
    stay whole clients."""
    rows, spans = [], []
    for prep, k in zip(preps, highest):
        lo = float(grid[k]) if k >= 0 else float("nan")
        steps = np.linspace(lo, float(grid[k + 1]), REFINE_STEPS + 2)[1:-1] if 0 <= k < len(grid) - 1 else np.array([])
        steps = _distinct(np.round(steps)) if t.closed else steps
        steps = steps[steps > lo] if steps.size else steps
        spans.append((lo, steps))
        rows += [_with_load(prep, load=float(x), closed=1.0 if t.closed else 0.0) for x in steps]
    ok = _meets((yield rows), t) if rows else np.array([], dtype=bool)
    best, at = [], 0
    for lo, steps in spans:
        within = steps[ok[at:at + steps.size]]
        best.append(float(within.max()) if within.size else lo)
        at += steps.size
    return best


def units(budget: int | None, unit_gpus: int) -> int:
    """Whole units of ``unit_gpus`` GPUs a deployment with no stated load runs: as many as the GPU
    budget holds (a user who states a budget expects it used), one without a budget (or when one
    unit is already over it)."""
    return max(1, budget // unit_gpus) if budget else 1


def size_units(parts: list[tuple[Candidate, Prepared, int, float]], t: Target) -> Steps[list[Sized]]:
    """Per (candidate, its Prepared, count, per-engine load): ``count`` aggregated engines of the
    candidate, each at the per-engine load (closed-loop clients or requests/s), evaluated whole
    by the model; a sizing step."""
    return (yield from _verify_aggregated([(c, prep, n, per_engine * n) for c, prep, n, per_engine in parts], t))


def _unsized(cand: Candidate, prep: Prepared, out: dict, row: int, load: float, t: Target) -> Sized:
    """A candidate that misses the SLA even at the lightest load (``load``): report that point."""
    return Sized(cand, 1, 1 if cand.mode == "disagg" else 0, 1 if cand.mode == "disagg" else 0,
                 prep.total_gpus, _pick(out, row, t), False, load)


def _verify_aggregated(items: list[tuple[Candidate, Prepared, int, float]], t: Target) -> Steps[list[Sized]]:
    if not items:
        return []
    replicas = np.array([r for _, _, r, _ in items])
    for round_ in range(GROWTH_ROUNDS):
        out = yield [_agg_rows(prep, int(r), load, t.closed) for (_, prep, _, load), r in zip(items, replicas)]
        ok = _meets(out, t)
        if ok.all() or t.load is None or round_ == GROWTH_ROUNDS - 1:
            break  # what is reported is what was evaluated
        replicas = np.where(ok, replicas, np.minimum(replicas + np.maximum(replicas // 8, 1), MAX_WORKERS))
    return [Sized(c, int(r), 0, 0, prep.total_gpus * int(r), _pick(out, i, t), bool(ok[i]), load)
            for i, ((c, prep, _, load), r) in enumerate(zip(items, replicas))]


def _agg_rows(prep: Prepared, replicas: int, load: float, closed: bool) -> Prepared:
    dp = prep.decode["dp"]
    return _with_load(prep, decode_engines=replicas, prefill_servers=replicas * dp, load=load,
                      closed=1.0 if closed else 0.0)._replace(total_gpus=prep.total_gpus * replicas)


def decode_capacity(prep: Prepared, t: Target, p: dict) -> tuple[float, float]:
    """Largest batch per attention rank whose decode step meets the ITL target, and its time per
    output token (s: the step, divided by the tokens speculative decoding emits per step)."""
    cap = max(math.floor(prep.load["batch_cap"]), 1)
    batches = _distinct(np.concatenate([np.round(np.geomspace(1.0, cap, 64)), [cap]]))  # whole sequences
    steps = decode_step_s(prep.decode, p, batches, t.isl + t.osl / 2.0) / accepted_per_step(prep.decode)
    ok = np.flatnonzero(steps * 1e3 <= t.itl_ms)
    if ok.size == 0:
        return 0.0, float(steps[0])
    return float(batches[ok.max()]), float(steps[ok.max()])


def size_disaggregated(cands: list[Candidate], pre: dict[Parallel, Prepared], dec: dict[Parallel, Prepared],
                       t: Target, p: dict, build) -> Steps[list[Sized]]:
    """Prefill and decode workers for each pair; ``build(cand, n_p, n_d, load)`` makes a Prepared
    deployment at ``load`` (closed-loop clients or requests/s; with no load stated, the clients
    one decode worker serves within the ITL target). A sizing step (``planner.rounds``); ``p``,
    the model's parameters, for the pools' own formulas."""
    if not cands:
        return []
    caps = {par: decode_capacity(prep, t, p) for par, prep in dec.items()}
    items = []
    for cand in cands:
        b, step = caps[cand.decode]
        dprep, pprep = dec[cand.decode], pre[cand.prefill]
        ranks = dprep.decode["dp"]
        if b <= 0:
            items.append((cand, 1, 1, False, t.load if t.load is not None else 1.0))
            continue
        if t.load is None:
            n_p, clients = _unit(pprep, dprep, b, step, t, p)
            r = units(t.gpus, n_p * pprep.total_gpus + dprep.total_gpus)
            items.append((cand, n_p * r, r, True, clients * r))
            continue
        per_rank = b
        if t.closed:
            n_d = max(1, math.ceil(t.load / (b * ranks) - 1e-9))
            clients = t.load
            per_rank = t.load / (n_d * ranks)
            per_token = decode_step_s(dprep.decode, p, per_rank, t.isl + t.osl / 2) / accepted_per_step(dprep.decode)
            rate = t.load / ((t.osl - 1) * float(per_token))
        else:
            n_d = max(1, math.ceil(t.load / (b * ranks / ((t.osl - 1) * step)) - 1e-9))
            clients, rate = 0.0, t.load
        n_p = int(_prefill_workers(pprep, _batching(pprep, t, p), rate, clients,
                                   step * float(first_token_steps(per_rank, clients)), t, p))
        items.append((cand, n_p, min(n_d, MAX_WORKERS), True, t.load))
    return (yield from _verify_disaggregated(items, t, build))


def _unit(pprep: Prepared, dprep: Prepared, b: float, step: float, t: Target, p: dict) -> tuple[int, float]:
    """Prefill workers and closed-loop clients of one prefill/decode unit with no load stated: the
    clients of its decode capacity, ``b`` per attention rank (``step`` s per output token), or,
    when their prefill workers do not fit the GPU budget, those of the largest batch whose do
    (every smaller batch tried in one vectorized call; the smallest when none fits)."""
    ranks = dprep.decode["dp"]
    pf = _batching(pprep, t, p)  # the same for every batch tried

    def workers(batch, per_token):
        clients = batch * ranks
        return _prefill_workers(pprep, pf, clients / ((t.osl - 1) * per_token), clients,
                                per_token * first_token_steps(batch, clients), t, p)

    n_p = int(workers(b, step))
    room = (t.gpus - dprep.total_gpus) // pprep.total_gpus if t.gpus is not None else None
    if room is None or room < 1 or n_p <= room:
        return n_p, b * ranks
    batches = _distinct(np.round(np.geomspace(1.0, b, 24)))[::-1][1:]  # below ``b``, largest first
    if batches.size == 0:
        return n_p, b * ranks
    per_token = decode_step_s(dprep.decode, p, batches, t.isl + t.osl / 2) / accepted_per_step(dprep.decode)
    counts = workers(batches[:, None], per_token[:, None])
    fits = np.flatnonzero(counts <= room)
    i = int(fits[0]) if fits.size else batches.size - 1
    return int(counts[i]), float(batches[i]) * ranks


def _batching(prep: Prepared, t: Target, p: dict) -> tuple:
    """How the prompts of ``prep``'s prefill workers share passes (``prefill_batching``)."""
    return prefill_batching(prep.prefill, p, float(t.isl))


def _prefill_workers(prep: Prepared, pf: tuple, rate, clients, t_first, t: Target, p: dict) -> np.ndarray:
    """Fewest prefill workers that prefill ``rate`` prompts/s and whose first-token time (with
    ``t_first`` s of decode iterations) meets the TTFT target; when none does, the fewest within
    1% of the best any count reaches (more only add GPUs). ``pf`` is ``_batching(prep, t, p)``.
    ``rate``, ``clients`` and ``t_first`` are numbers, or columns (shape (k, 1)) of k loads to size
    at once: the counts (an integer array of shape (k,) for columns)."""
    n = np.arange(1, MAX_WORKERS + 1, dtype=float)
    f = prep.prefill
    exec_s, wait, burst, _, _ = first_token(f, p, float(t.isl), pf, t_first, rate, n * f["dp"], clients, 1.0,
                                            prep.load.get("harness_ms", 0.0))
    keeps_up = n * prefill_capacity(pf, f["dp"]) >= rate
    ttft_ms = np.where(keeps_up, (exec_s + wait + burst) * 1e3, np.inf)
    within = ttft_ms <= t.ttft_ms
    near = ttft_ms <= ttft_ms.min(axis=-1, keepdims=True) * (1 + KNEE)
    first = np.where(within.any(axis=-1, keepdims=True), within, near).argmax(axis=-1)  # the fewest
    return np.where(np.isfinite(ttft_ms).any(axis=-1), n[first], MAX_WORKERS).astype(int)


def _verify_disaggregated(items, t: Target, build) -> Steps[list[Sized]]:
    """Every sized pair evaluated whole, its pools grown while they miss the SLA (rounds); a pair
    whose decode meets the ITL at no batch is reported as evaluated with one worker of each (its
    rows go with the first round's)."""
    if not items:
        return []
    live = [(c, n_p, n_d, load) for c, n_p, n_d, ok, load in items if ok]
    dead = [(c, load) for c, _, _, ok, load in items if not ok]
    dead_rows = [build(c, 1, 1, load) for c, load in dead]
    n_p = np.array([x[1] for x in live], dtype=int)
    n_d = np.array([x[2] for x in live], dtype=int)
    # Four masks of their own: ``|=`` below updates in place, so one shared array would let a
    # stalled decode pool stop the prefill pool's growth too.
    grew_p, grew_d, stuck_p, stuck_d = (np.zeros(len(live), dtype=bool) for _ in range(4))
    last = dead_out = None
    for round_ in range(GROWTH_ROUNDS):
        rows = [build(c, int(a), int(b), load) for (c, _, _, load), a, b in zip(live, n_p, n_d)]
        both = yield rows + (dead_rows if round_ == 0 else [])
        out = {k: v[:len(rows)] for k, v in both.items()}
        if round_ == 0:
            dead_out = {k: v[len(rows):] for k, v in both.items()}
        if not live:
            break
        ok = _meets(out, t)
        if last is not None:  # a pool whose last growth barely helped has reached its knee
            stuck_p |= grew_p & (out["ttft_ms"] > last["ttft_ms"] * (1 - KNEE))
            stuck_d |= grew_d & (out["itl_ms"] > last["itl_ms"] * (1 - KNEE)) & ~out["saturated"]
        last = out
        grew_p = ~ok & (out["ttft_ms"] > t.ttft_ms) & ~stuck_p & (n_p < MAX_WORKERS)
        grew_d = (~ok & ((out["itl_ms"] > t.itl_ms) | out["saturated"]) & ~stuck_d & (n_d < MAX_WORKERS)
                  & (t.load is not None))
        if round_ == GROWTH_ROUNDS - 1 or not (grew_p | grew_d).any():
            break  # what is reported is what was evaluated
        grow = lambda n: np.minimum(n + np.maximum(n // 8, 1), MAX_WORKERS)  # noqa: E731
        n_p = np.where(grew_p, grow(n_p), n_p)
        n_d = np.where(grew_d, grow(n_d), n_d)
    sized = [Sized(c, 0, int(n_p[i]), int(n_d[i]), rows[i].total_gpus, _pick(out, i, t), bool(ok[i]), load)
             for i, (c, _, _, load) in enumerate(live)]
    return sized + [Sized(c, 0, 1, 1, dead_rows[i].total_gpus, _pick(dead_out, i, t), False, load)
                    for i, (c, load) in enumerate(dead)]
