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

How far a correction fitted without a load between the points may go (``bounded``): at a load not
measured, the model's error is the offset the points show plus its change with load (standard
deviation ``_predictive_sd``: the within-deployment spread and the offset's posterior). A
correction of c (mean log change of a metric) leaves a load where the error is e worse than the
start by at most c, and by more than a band β only where e lies on the near side of (c − β)/2. So
each metric's correction is at most β — ``Z`` standard errors of the points' mean noise, what
re-measuring them could move a prediction by — plus twice by what it exceeds ``Z`` predictive
standard deviations: beyond β only as far as the points are sure the error at other loads is there.
Where a held-out load between the points showed the correction carry (``measured``), it is kept
whole. Pulling every kept factor toward 1 by one posterior weight instead left the measured
data's worst case worse than the start, and uniform slowdowns only partly recovered.
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
    return round(math.exp(math.sqrt(_posterior_var(metric, at)) / gain), 4) if gain >= MIN_GAIN else None


def bounded(data: Prepared, params: dict[str, float], factors: dict[str, float]) -> dict[str, float]:
    """``factors`` (per side, from ``params``) pulled toward 1 together, as a power t ≤ 1 of each, until
    neither metric's mean log change at ``data``'s points exceeds what the points are sure of at other
    loads (see the module): the noise band, ``Z`` standard errors of the points' mean noise, plus
    twice by what the change exceeds ``Z`` standard deviations of the metric's error at a load not
    measured (``_predictive_sd``). A correction no larger than the band can leave no other load worse
    than the start by more than the band; a larger one only as far as the points are sure of it."""
    at = log_errors(data, params)
    moved = log_errors(data, scaled_sides(params, factors))
    t = 1.0
    for metric, residuals in at.items():
        change = abs(float(np.mean(moved[metric] - residuals)))
        band = Z * REPEAT_NOISE[metric] / math.sqrt(len(residuals))
        cap = band + 2.0 * max(0.0, change - Z * _predictive_sd(metric, residuals))
        if change > cap:
            t = min(t, cap / change)
    return {side: f ** t for side, f in factors.items()}


def _posterior_var(metric: str, residuals: np.ndarray) -> float:
    """Posterior variance (log-units²) of the deployment's offset in ``metric`` from its points' ``residuals``."""
    return 1.0 / (1.0 / SPREAD_BETWEEN[metric] ** 2 + len(residuals) / _within2(metric, residuals))


def _predictive_sd(metric: str, residuals: np.ndarray) -> float:
    """Standard deviation (log-units) of the model's error in ``metric`` at a load not measured, about
    the offset the points show: the error's change with load within the deployment and the offset's
    own posterior uncertainty."""
    return math.sqrt(_within2(metric, residuals) + _posterior_var(metric, residuals))


def _within2(metric: str, residuals: np.ndarray) -> float:
    """The variance of the model's error within this deployment: the prior's (``SPREAD_WITHIN``) pooled,
    as ``PRIOR_POINTS`` points, with the points' own scatter around their mean (n − 1 degrees of
    freedom), never below the measurement noise (``REPEAT_NOISE``)."""
    dof = max(len(residuals) - 1, 0)
    own = float(np.sum((residuals - residuals.mean()) ** 2)) if len(residuals) else 0.0
    pooled = (PRIOR_POINTS * SPREAD_WITHIN[metric] ** 2 + own) / (PRIOR_POINTS + dof)
    return max(pooled, REPEAT_NOISE[metric] ** 2)
