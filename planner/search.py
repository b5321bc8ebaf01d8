"""The search over the candidates: exhaustive when the space is small, Optuna's TPE when it is large.

A space of at most ``GRID_LIMIT`` candidates is enumerated whole: every candidate is sized in
one vectorized pass (no sampler is needed to visit them all, so Optuna is not even imported). A
larger one is searched by Optuna's TPE with the SLA and the GPU budget as trial constraints
(``Trial.set_constraint``: values ≤ 0 are satisfied); trials are asked in batches and sized
together. Seeded: the same request always gives the same answer.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from planner.choice import cost_of
from planner.sizing import Candidate, Sized

if TYPE_CHECKING:
    import optuna

GRID_LIMIT = 2048
TRIALS = {"rapid": 384, "thorough": 1536}
BATCH = 64
INFEASIBLE_PENALTY = 1e9


def objective(s: Sized, budget: int | None, price: float | None, goodput: bool) -> tuple[float, list[float]]:
    """(value to minimize, constraints): ``planner.choice.cost_of`` the sized deployment (ties toward
    more tokens/s per user for a stated load)."""
    value = cost_of(s.total_gpus, s.prediction.output_tok_s_per_gpu, goodput=goodput, budget=budget, price=price)
    if not goodput:
        value -= 1e-6 * s.prediction.tok_s_per_user
    constraints = [0.0 if s.meets_sla else 1.0, float(s.total_gpus - budget) if budget else 0.0]
    return value, constraints


def search(cands: list[Candidate], size: Callable[[list[Candidate]], list[Sized]], *, budget: int | None,
           price: float | None, goodput: bool, strategy: str = "rapid", seed: int = 0) -> list[Sized]:
    """Every candidate the search evaluated, sized, in the order of ``cands`` (all of them when the
    space is small)."""
    if len(cands) <= GRID_LIMIT:
        evaluated = {s.candidate: s for s in size(list(dict.fromkeys(cands)))}
    else:
        evaluated = _sampled(cands, size, budget=budget, price=price, goodput=goodput, strategy=strategy, seed=seed)
    return [evaluated[c] for c in cands if c in evaluated]


def _study(seed: int) -> optuna.Study:
    """A study that minimizes with a seeded multivariate TPE, quiet below warnings."""
    import optuna

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    sampler = optuna.samplers.TPESampler(seed=seed, multivariate=True, n_startup_trials=BATCH)
    return optuna.create_study(direction="minimize", sampler=sampler)


def _sampled(cands: list[Candidate], size: Callable[[list[Candidate]], list[Sized]], *, budget: int | None,
             price: float | None, goodput: bool, strategy: str, seed: int) -> dict[Candidate, Sized]:
    """The candidates TPE asked for in ``TRIALS[strategy]`` trials, sized, batch by batch."""
    index = {c: i for i, c in enumerate(cands)}
    evaluated: dict[Candidate, Sized] = {}
    agg = [c for c in cands if c.mode == "agg"]
    prefills = sorted({c.prefill for c in cands if c.mode == "disagg"}, key=str)
    decodes = sorted({c.decode for c in cands if c.mode == "disagg"}, key=str)
    study = _study(seed)
    total, batch = TRIALS[strategy], BATCH
    asked = 0
    while asked < total:
        trials = [study.ask() for _ in range(min(batch, total - asked))]
        asked += len(trials)
        picked = [_suggest(tr, cands, agg, prefills, decodes, index) for tr in trials]
        new = sorted({c for c in picked if c is not None and c not in evaluated}, key=index.get)
        for s in size(new):
            evaluated[s.candidate] = s
        for tr, c in zip(trials, picked):
            value, cons = objective(evaluated[c], budget, price, goodput) if c is not None else (0.0, [1.0, 0.0])
            tr.set_constraint("sla", cons[0])
            tr.set_constraint("budget", cons[1])
            study.tell(tr, value if max(cons) <= 0 else value + INFEASIBLE_PENALTY)
    return evaluated


def _suggest(trial, cands, agg, prefills, decodes, index) -> Candidate | None:
    modes = [m for m, items in (("agg", agg), ("disagg", prefills)) if items]
    mode = trial.suggest_categorical("mode", modes)
    if mode == "agg":
        return agg[trial.suggest_int("engine", 0, len(agg) - 1)]
    cand = Candidate("disagg", prefill=prefills[trial.suggest_int("prefill", 0, len(prefills) - 1)],
                     decode=decodes[trial.suggest_int("decode", 0, len(decodes) - 1)])
    return cand if cand in index else None
