"""Time scales of a deployment's measured points, and what the points can tell of them (pure).

A scale makes the times on some sides of the model (``profiler.model.sides``) that much longer: on
both, the deployment's one time scale; on one, the factor of the side that sets one metric (prefill:
TTFT; decode: TPOT), fitted to that metric alone, the other side as it started. Each minimises the
soft-L1 norm of the log(predicted / measured) errors of the metrics it is fitted to.

What the points show of a side (``evidence``), judged on the metric it sets:

- ``agree``: every point is off the same way, the way the scale corrects (points on both sides of
  the start show a difference in shape, which one factor moves the wrong way somewhere);
- ``significant``: the mean offset exceeds ``Z`` standard errors of a mean of the points'
  measurement noise (``REPEAT_NOISE``): a shift that measuring the points again could give is noise.

How sure the points are of a side's factor (``uncertainty``) is a posterior's: the model's error at
one concurrency of a deployment is the deployment's offset (spread ``SPREAD_BETWEEN`` deployments)
plus a part that changes with load (spread ``SPREAD_WITHIN`` one deployment: the model's shape
errors across load and the noise; ``profiler.model.error_spread``, measured held out), the latter
pooled with the points' own scatter (the prior counting as ``PRIOR_POINTS`` points), so n points
know the offset to 1 / √(1/between² + n/within²), divided by how much of the metric the side sets.
The factor kept is the one fitted, not pulled toward 1 by it: on the measured data's held-out
concurrencies that left the one configuration made worse still worse, and on points with a uniform
difference it left a remainder that the refinement then gave to other parameters.
"""

from __future__ import annotations

import math

import numpy as np
from pydantic import BaseModel, ConfigDict, Field

from profiler.model.calibrate import Prepared
from profiler.model.error_spread import SPREAD_BETWEEN, SPREAD_WITHIN
from profiler.model.estimate import evaluate
from profiler.model.sides import SIDE_NAMES, scaled_sides

# Log-sd of a benchmark mean between runs of the same configuration and load: the median |log ratio|
# of the data's repeated measurements (same configuration and concurrency, 400 pairs; the median
# |log ratio| of two draws of sd s is 0.95 s).
REPEAT_NOISE = {"ttft": 0.076, "tpot": 0.041}
Z = 2.0  # standard errors a kept correction must exceed
PRIOR_POINTS = 2.0  # points the prior's within-deployment spread counts as, pooled with the points' own
SIDE_METRIC = {"prefill": "ttft", "decode": "tpot"}  # the metric each side sets
SCALE_BOUNDS = (0.05, 20.0)  # the time scale searched: 20× faster to 20× slower
SOFT_L1_SCALE = 0.2  # log-error beyond which residuals count linearly (as in profiler.model.calibrate)
STEP = 1e-3  # log-scale step of the finite difference
# Change of the mean log metric per unit change of a side's log factor below which the side sets too
# little of its metric (e.g. a TTFT that is mostly the harness's) for the points to tell its factor.
MIN_GAIN = 0.05


class Evidence(BaseModel):
    """What a deployment's points show of one side's scale, on the metric the side sets."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    agree: bool = Field(description="every point is off the same way, the way the scale corrects")
    significant: bool = Field(description="the mean offset exceeds Z standard errors of the measurement noise")

    @property
    def shown(self) -> bool:
        """Whether the points show the side's scale: they agree and it is significant."""
        return self.agree and self.significant


def log_errors(data: Prepared, params: dict[str, float]) -> dict[str, np.ndarray]:
    """log(predicted / measured) of every point's TTFT and TPOT (an unpredictable point: 5)."""
    out = evaluate(data.batch, params)
    logs = {"ttft": np.log(out["ttft_ms"] / data.ttft_ms), "tpot": np.log(out["itl_ms"] / data.tpot_ms)}
    return {m: np.where(np.isfinite(v), v, 5.0) for m, v in logs.items()}


def fit_scale(data: Prepared, params: dict[str, float], sides: tuple[str, ...] = SIDE_NAMES) -> float:
    """The factor on ``sides`` of ``params`` that best matches ``data``'s points: on both sides, to
    TTFT and TPOT; on one, to the metric it sets (``SIDE_METRIC``)."""
    metrics = tuple(SIDE_METRIC[side] for side in sides)

    def loss(log_s: float) -> float:
        errors = log_errors(data, scaled_sides(params, dict.fromkeys(sides, math.exp(log_s))))
        z = (np.concatenate([errors[m] for m in metrics]) / SOFT_L1_SCALE) ** 2
        return float(np.sum(2.0 * (np.sqrt(1.0 + z) - 1.0)))

    from scipy.optimize import minimize_scalar  # only when fitting: slow to import

    lo, hi = np.log(SCALE_BOUNDS)
    return float(np.exp(minimize_scalar(loss, bounds=(lo, hi), method="bounded", options={"xatol": 1e-4}).x))


def evidence(data: Prepared, params: dict[str, float]) -> dict[str, Evidence]:
    """What ``data``'s points show of each side's scale from ``params`` (see the module)."""
    errors = log_errors(data, params)
    out = {}
    for side, metric in SIDE_METRIC.items():
        e = errors[metric]
        shift = -float(np.mean(e)) if len(e) else 0.0
        out[side] = Evidence(agree=bool(len(e)) and bool(np.all(e * shift < 0.0)),
                             significant=abs(shift) > Z * REPEAT_NOISE[metric] / math.sqrt(max(len(e), 1)))
    return out


def uncertainty(data: Prepared, params: dict[str, float], side: str) -> float | None:
    """One posterior standard error of ``side``'s factor at ``params`` as a factor (1.1: ±10%; see
    the module); None when the side hardly lengthens its metric (the points cannot tell its factor)."""
    metric = SIDE_METRIC[side]
    at = log_errors(data, params)[metric]
    moved = log_errors(data, scaled_sides(params, {side: math.exp(STEP)}))[metric]
    gain = float(np.mean(moved - at)) / STEP  # d mean log metric / d log factor
    post_var = 1.0 / (1.0 / SPREAD_BETWEEN[metric] ** 2 + len(at) / _within2(metric, at))
    return round(math.exp(math.sqrt(post_var) / gain), 4) if gain >= MIN_GAIN else None


def _within2(metric: str, residuals: np.ndarray) -> float:
    """The variance of the model's error within this deployment: the prior's (``SPREAD_WITHIN``) pooled,
    as ``PRIOR_POINTS`` points, with the points' own scatter around their mean (n − 1 degrees of
    freedom), never below the measurement noise (``REPEAT_NOISE``)."""
    dof = max(len(residuals) - 1, 0)
    own = float(np.sum((residuals - residuals.mean()) ** 2)) if len(residuals) else 0.0
    pooled = (PRIOR_POINTS * SPREAD_WITHIN[metric] ** 2 + own) / (PRIOR_POINTS + dof)
    return max(pooled, REPEAT_NOISE[metric] ** 2)
