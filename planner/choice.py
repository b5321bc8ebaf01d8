"""Which plan to choose among those that meet the SLA, and how far a plan is from the SLA.

The planner minimizes ``cost``: GPUs (or $ per hour) for a stated load; with no load stated,
−output tokens/s per GPU (per $), the goodput objective, or with a GPU budget −output tokens/s
of the whole deployment (the units the budget holds). At equal cost it prefers, in order:

1. headroom against the SLA (``margin``): the least of the TTFT and ITL headroom, in % of
   each target, with TTFT judged at its p99 under a Poisson rate; compared in whole steps of
   MARGIN_STEP_PCT, since a finer difference is within the model's error;
2. the simpler deployment: aggregated over disaggregated, then fewer engines;
3. more tokens/s per user.
"""

from __future__ import annotations

import math

from planner.types import Margin, Plan, PlanRequest

__all__ = ["MARGIN_STEP_PCT", "cost", "cost_of", "margin", "margin_text", "preference", "shortfall"]

# Headroom is compared in steps of this many % of the target: the model's held-out error
# (docs/accuracy.md: tens of % for TTFT, about 12% for ITL) is larger than a finer difference.
MARGIN_STEP_PCT = 10.0


def _headroom_pct(value_ms: float, target_ms: float) -> float:
    """(target − value) / target, in % (−inf for an unbounded value)."""
    return (target_ms - value_ms) / target_ms * 100.0


def margin(plan: Plan, request: PlanRequest, *, ttft_error_factor: float = 1.0) -> Margin:
    """The headroom ``plan`` keeps against ``request``'s SLA (TTFT at p99 under a Poisson rate, with
    the request's ``harness_ttft_ms`` in it), saying the TTFT error factor it was planned with; of a
    mix of shapes, that of the share with the least."""
    if plan.parts:
        return min((margin(part, request, ttft_error_factor=ttft_error_factor) for part in plan.parts),
                   key=lambda m: m.least_pct)
    p = plan.predicted
    poisson = request.request_rate is not None
    return Margin(ttft_pct=_headroom_pct(p.ttft_p99_ms if poisson else p.ttft_ms, request.ttft_ms),
                  itl_pct=_headroom_pct(p.itl_ms, request.itl_ms), ttft_basis="p99" if poisson else "mean",
                  ttft_error_factor=ttft_error_factor, harness_ttft_ms=request.harness_ttft_ms)


def margin_text(m: Margin) -> str:
    """``TTFT p99 43% under its target, ITL 17% under`` (``over`` for a negative headroom), and the
    TTFT error factor and measuring client's term it was planned with, when there are."""
    words = [f"{name} {abs(pct):.0f}% {'under' if pct >= 0 else 'over'}"
             for name, pct in ((f"TTFT {m.ttft_basis}", m.ttft_pct), ("ITL", m.itl_pct))]
    planned = [f"TTFT × {m.ttft_error_factor:.2f} (the model's held-out error) held to the target"
               if m.ttft_error_factor > 1 else "",
               f"{m.harness_ttft_ms:g} ms of the measuring client in the TTFT" if m.harness_ttft_ms else ""]
    planned = [text for text in planned if text]
    return f"{words[0]} its target, {words[1]}" + (f" ({'; '.join(planned)})" if planned else "")


def cost_of(gpus: int, tok_s_per_gpu: float, *, goodput: bool, budget: int | None, price: float | None) -> float:
    """What the planner minimizes for a deployment of ``gpus`` GPUs serving ``tok_s_per_gpu`` output
    tokens/s each: GPUs × $ per GPU-hour (1 when no price is given) for a stated load; with none
    (``goodput``), −tokens/s per GPU per $, or −the whole deployment's tokens/s per $ with a budget."""
    if goodput:
        return -tok_s_per_gpu * (gpus if budget else 1) / (price or 1.0)
    return gpus * (price or 1.0)


def cost(plan: Plan, request: PlanRequest) -> float:
    """``cost_of`` a plan made for ``request``."""
    return cost_of(plan.total_gpus, plan.predicted.output_tok_s_per_gpu,
                   goodput=request.concurrency is None and request.request_rate is None,
                   budget=request.total_gpus, price=request.gpu_price_per_hour)


def _margin_steps(pct: float) -> float:
    """Whole MARGIN_STEP_PCT steps of headroom (−inf for an unbounded time)."""
    return math.floor(pct / MARGIN_STEP_PCT) if math.isfinite(pct) else -math.inf


def preference(plan: Plan, request: PlanRequest) -> tuple[float, float, bool, int, float]:
    """Sort key of feasible plans, best first: cost, then headroom, simplicity, tokens/s per user."""
    engines = sum(e.replicas for e in plan.engines)
    return (cost(plan, request), -_margin_steps(margin(plan, request).least_pct), plan.mode == "disagg", engines,
            -plan.predicted.tok_s_per_user)


def shortfall(plan: Plan, request: PlanRequest) -> float:
    """How far ``plan``'s mean TTFT and ITL are from the SLA: the worse ratio over its target
    minus 1 (0 when both are within, inf when either is unbounded)."""
    p = plan.predicted
    return max(0.0, p.ttft_ms / request.ttft_ms - 1.0, p.itl_ms / request.itl_ms - 1.0)
