"""Mixes of two aggregated engine shapes that fill a GPU budget when no load is stated.

One shape in whole units may leave GPUs idle (16 GPUs of TP8 units hold two; 12 GPUs hold one
TP8 and leave four) or fill the budget with a weaker shape (three TP4). ``best_mix`` looks at
every pair of aggregated shapes that meet the SLA and every count of each that fits the budget,
and keeps the pair that serves the most output tokens/s, if it serves more than ``single_tok_s``
(the best deployment of one shape). A mix's capacity is the sum of its units' capacities, each
computed by the model at the load one unit serves within the SLA: nothing is borrowed between
them, so the router must send each engine its own share (``Plan.parts`` says each share).

Why two aggregated shapes, and no more: an aggregated engine serves a request from start to end
on its own, so engines of two shapes behind one frontend are independent servers; two
disaggregated shapes behind one frontend would share their prefill pools, and the sum of their
units would no longer be what runs. With two shapes every budget up to a node's multiple is
filled (a best shape and a remainder); a third adds a third service for the odd GPU a budget
that is not a sum of engine sizes leaves.
"""

from __future__ import annotations

from typing import NamedTuple

from planner.types import Engine, Plan
from profiler.model import ItlParts, Prediction, TtftParts

__all__ = ["Unit", "best_mix", "mixed_plan"]


class Unit(NamedTuple):
    """One aggregated engine of a shape that meets the SLA: its GPUs and the output tokens/s it
    serves within the SLA (``key`` is the caller's name for the shape)."""

    key: object
    gpus: int
    tok_s: float


def best_mix(units: list[Unit], budget: int, single_tok_s: float) -> tuple[tuple[Unit, int], tuple[Unit, int]] | None:
    """The counts of two shapes (each at least one engine, together at most ``budget`` GPUs) that
    serve the most output tokens/s, when that is more than ``single_tok_s``; None otherwise."""
    best, best_tok_s = None, single_tok_s
    for i, a in enumerate(units):
        for b in units[i + 1:]:
            for n_a in range(1, (budget - b.gpus) // a.gpus + 1):
                n_b = (budget - n_a * a.gpus) // b.gpus
                tok_s = n_a * a.tok_s + n_b * b.tok_s
                if n_b >= 1 and tok_s > best_tok_s * (1 + 1e-9):
                    best, best_tok_s = ((a, n_a), (b, n_b)), tok_s
    return best


def _weighted(values: list[float], weights: list[float]) -> float:
    return sum(v * w for v, w in zip(values, weights)) / sum(weights)


def _parts_mean(parts: list, weights: list[float], kind: type):
    """The request-weighted mean of each part of a time split (None when a part has none)."""
    if any(p is None for p in parts):
        return None
    names = type(parts[0]).model_fields
    return kind(**{n: _weighted([getattr(p, n) for p in parts], weights) for n in names})


def combined(parts: list[Plan]) -> Prediction:
    """The prediction of engines of several shapes serving side by side, each its own share.

    Requests/s, requests in flight and output tokens/s add up; mean TTFT, ITL, tokens/s per user
    and their parts are means over requests (weighted by each share's requests/s); a p90 or p99
    is the largest of the shares' (a mixture's tail is no worse than its worst component's)."""
    preds = [p.predicted for p in parts]
    rates = [p.requests_per_s for p in preds]
    gpus = sum(p.total_gpus for p in parts)
    return Prediction(
        ttft_ms=_weighted([p.ttft_ms for p in preds], rates),
        ttft_p90_ms=max(p.ttft_p90_ms for p in preds), ttft_p99_ms=max(p.ttft_p99_ms for p in preds),
        itl_ms=_weighted([p.itl_ms for p in preds], rates),
        output_tok_s_per_gpu=sum(p.output_tok_s_per_gpu * pl.total_gpus for p, pl in zip(preds, parts)) / gpus,
        tok_s_per_user=_weighted([p.tok_s_per_user for p in preds], rates),
        requests_per_s=sum(rates), concurrency=sum(p.concurrency for p in preds),
        ttft_parts=_parts_mean([p.ttft_parts for p in preds], rates, TtftParts),
        itl_parts=_parts_mean([p.itl_parts for p in preds], rates, ItlParts))


def mixed_plan(parts: list[Plan]) -> Plan:
    """One deployment of the aggregated single-shape ``parts``: their engines side by side, the
    larger engines first."""
    parts = sorted(parts, key=lambda p: -p.engines[0].gpus)
    first = parts[0]
    engines: tuple[Engine, ...] = tuple(e for p in parts for e in p.engines)
    cost = sum(p.cost_per_hour for p in parts) if all(p.cost_per_hour for p in parts) else None
    feasible = all(p.feasible for p in parts)
    return first.model_copy(update={
        "engines": engines, "predicted": combined(parts), "parts": tuple(parts), "feasible": feasible,
        "reason": None if feasible else next(p.reason for p in parts if not p.feasible), "cost_per_hour": cost})
