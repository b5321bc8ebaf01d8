"""Calibration from measured points of one deployment (pure).

Two steps. First one number: the deployment's time scale, by which every efficiency is
divided and every fixed cost multiplied, so that every step time and every latency the model
predicts scales with it (a deployment uniformly slower or faster than the model: other
kernels, clocks, a busier host). Then a refinement of the few parameters that explain an
uneven difference (GEMM, weight-streaming, KV and attention efficiencies; the framework's
per-step and per-request costs; per-layer and per-sequence costs) and, when the points span
several concurrencies, of the closed-loop burst term that sets how TTFT grows with load,
pulled toward the scaled values by a prior worth ``PRIOR_STRENGTH`` log-units per factor of 2
per √point (``LOAD_PRIOR_STRENGTH`` for the burst term), so a handful of points moves what
they explain and leaves the rest. Both minimise the soft-L1
norm of log(predicted / measured) of the mean TTFT and TPOT. Errors are median absolute
percentage errors (MdAPE) before and after, on the points fitted.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Protocol

import numpy as np
from pydantic import BaseModel, ConfigDict, Field

from profiler.calibrate import Prepared, ape, family, fit
from profiler.config import ServingConfig
from profiler.errors import ModelError
from profiler.estimate import evaluate, prepare, stack_prepared
from profiler.gpus import get_gpu
from profiler.model_catalog import resolve_model
from profiler.params import PARAMS, shipped_params

PRIOR_STRENGTH = 0.3
# The burst term's prior is weaker: how far closed-loop clients stay in step depends on the
# workload (equal request lengths keep them in lockstep), not on the hardware the prior knows.
LOAD_PRIOR_STRENGTH = 0.05
MAX_EVALS = 200
SCALE_BOUNDS = (0.05, 20.0)  # the time scale searched: 20× faster to 20× slower
SOFT_L1_SCALE = 0.2  # log-error beyond which residuals count linearly (as in profiler.calibrate)
# Point field -> the genai-bench result's statistic (``aggregated_metrics.stats.<name>.mean``) it is read from.
RESULT_FIELDS = {"isl_tokens": "num_input_tokens", "osl_tokens": "num_output_tokens", "ttft_ms": "ttft",
                 "tpot_ms": "tpot"}


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class Point(_Frozen):
    """One measured operating point: closed-loop clients and the mean latencies they saw."""

    isl_tokens: float = Field(gt=0, allow_inf_nan=False, description="mean input tokens per request")
    osl_tokens: float = Field(gt=0, allow_inf_nan=False, description="mean output tokens per request")
    concurrency: float = Field(gt=0, allow_inf_nan=False, description="closed-loop clients, whole deployment")
    ttft_ms: float = Field(gt=0, allow_inf_nan=False, description="mean time to first token, ms")
    tpot_ms: float = Field(gt=0, allow_inf_nan=False, description="mean gap between output tokens after the first, ms")


class Errors(_Frozen):
    """Median absolute percentage errors of the model on the measured points (%)."""

    ttft_mdape_pct: float
    tpot_mdape_pct: float


class DeploymentFit(_Frozen):
    """The outcome of ``fit_deployment``: the full parameter set to plan with, what changed,
    and how well the model matched the points before and after."""

    params: dict[str, float]
    scale: float = Field(description="time scale found in the first step: >1 slower than ``params`` at the start")
    fitted: tuple[str, ...] = Field(description="names of the parameters refined after scaling")
    points: int
    before: Errors
    after: Errors


class _Percentiles(Protocol):
    mean_ms: float | None


class Iteration(Protocol):
    """What ``fit_deployment`` reads of a genai-bench iteration (``bench_results.IterationMetrics``)."""

    scenario: str
    concurrency: int
    file: str
    requests: int
    errors: int
    mean_input_tokens: float | None
    mean_output_tokens: float | None
    ttft: _Percentiles
    tpot: _Percentiles


def calibration_key(model: str, gpu: str, backend: str) -> tuple[str, str, str]:
    """The canonical (model id, GPU name, backend) a calibration is stored and found under, so
    aliases meet. Raises ``ModelError`` naming ``model`` or ``gpu`` when unknown."""
    return resolve_model(model)[0].hf_id, get_gpu(gpu).name, backend


def load_name(backend: str, mode: str) -> str:
    """The closed-loop burst parameter of ``backend`` in ``mode`` ("agg" or "disagg"): the wait per
    extra client, in prefill times, that sets how TTFT grows with concurrency."""
    return "disagg_burst" if mode == "disagg" else f"agg_burst_{backend}"


def fitted_names(backend: str, mode: str = "agg", concurrencies: int = 1) -> tuple[str, ...]:
    """The parameters a deployment's measurements refit: those that scale every step of ``backend``
    and, when the points span ``concurrencies`` > 1 distinct loads, the burst term of ``backend``
    in ``mode`` (one load cannot tell how latency grows with load)."""
    names = ("eff_gemm", "eff_hbm", "eff_kv", "eff_attn", f"step_ms_{backend}", f"ttft_ms_{backend}",
             "layer_us", "prefill_layer_us", "seq_us")
    return names + ((load_name(backend, mode),) if concurrencies > 1 else ())


def scaled(params: dict[str, float], scale: float) -> dict[str, float]:
    """``params`` with every time ``scale`` × longer: efficiencies divided, fixed costs multiplied."""
    out = dict(params)
    for name, value in params.items():
        if name.startswith("eff_") or name == "kv_transfer_eff":
            out[name] = value / scale
        elif name.endswith(("_us", "_ms")) or "_ms_" in name:
            out[name] = value * scale
    return out


def _soft_l1(log_errors: np.ndarray) -> float:
    z = (log_errors / SOFT_L1_SCALE) ** 2
    return float(np.sum(2.0 * (np.sqrt(1.0 + z) - 1.0)))


def fit_scale(data: Prepared, params: dict[str, float]) -> float:
    """The time scale that best matches ``data``'s points (soft-L1 of the log errors)."""
    def loss(log_s: float) -> float:
        out = evaluate(data.batch, scaled(params, float(np.exp(log_s))))
        logs = np.concatenate([np.log(out["ttft_ms"] / data.ttft_ms), np.log(out["itl_ms"] / data.tpot_ms)])
        return _soft_l1(np.where(np.isfinite(logs), logs, 5.0))

    from scipy.optimize import minimize_scalar  # only when fitting: slow to import

    lo, hi = np.log(SCALE_BOUNDS)
    return float(np.exp(minimize_scalar(loss, bounds=(lo, hi), method="bounded", options={"xatol": 1e-4}).x))


def points_from_iterations(iterations: Sequence[Iteration | Point]) -> list[Point]:
    """Measured points of genai-bench iterations; iterations without a successful request are
    skipped. Raises ``ValueError`` naming the iteration's file and its field when a mean is missing, not
    finite or not positive, or the concurrency is not positive."""
    out = []
    for it in iterations:
        if isinstance(it, Point):
            out.append(it)
            continue
        if it.requests - it.errors <= 0:
            continue
        values = {"isl_tokens": it.mean_input_tokens, "osl_tokens": it.mean_output_tokens,
                  "ttft_ms": it.ttft.mean_ms, "tpot_ms": it.tpot.mean_ms}
        missing = [k for k, v in values.items() if v is None or not (math.isfinite(v) and v > 0)]
        if missing:
            found = ", ".join(f"stats.{RESULT_FIELDS[k]}.mean is {values[k]}" for k in missing)
            raise ValueError(f"{it.file}: no positive mean {', '.join(missing)} "
                             f"({found}; scenario {it.scenario}, concurrency {it.concurrency})")
        if it.concurrency <= 0:
            raise ValueError(f"{it.file}: concurrency {it.concurrency} is not positive (scenario {it.scenario})")
        out.append(Point(concurrency=it.concurrency, **values))
    return out


def _prepared(deployment: ServingConfig, points: list[Point]) -> Prepared:
    base = deployment.model_dump(exclude={"isl_tokens", "osl_tokens", "concurrency", "request_rate"})
    preps = []
    for i, pt in enumerate(points):
        config = ServingConfig(**base, isl_tokens=max(1, round(pt.isl_tokens)),
                               osl_tokens=max(2, round(pt.osl_tokens)), concurrency=pt.concurrency)
        try:
            preps.append(prepare(config))
        except ModelError as exc:
            raise ModelError(exc.field, f"point {i} (concurrency {pt.concurrency:g}): {exc.message}") from exc
    n = len(points)
    label = lambda v: np.array([str(v)] * n)  # noqa: E731
    return Prepared(index=np.arange(n), batch=stack_prepared(preps),
                    ttft_ms=np.array([p.ttft_ms for p in points]), tpot_ms=np.array([p.tpot_ms for p in points]),
                    labels={"gpu": label(deployment.gpu), "backend": label(deployment.backend),
                            "mode": label(deployment.mode), "family": label(family(deployment.model))},
                    inferred=np.zeros(n, dtype=bool), errors={}, repeats=np.zeros(n, dtype=bool))


def model_errors(data: Prepared, params: dict[str, float]) -> Errors:
    """MdAPE of the mean TTFT and TPOT that ``params`` predict for ``data``'s points."""
    out = evaluate(data.batch, params)
    return Errors(ttft_mdape_pct=round(float(np.median(ape(out["ttft_ms"], data.ttft_ms))), 3),
                  tpot_mdape_pct=round(float(np.median(ape(out["itl_ms"], data.tpot_ms))), 3))


def fit_deployment(deployment: ServingConfig, measured: Sequence[Iteration | Point], *,
                   params: dict[str, float] | None = None, names: tuple[str, ...] | None = None,
                   prior_strength: float = PRIOR_STRENGTH, max_evals: int = MAX_EVALS) -> DeploymentFit:
    """Fit the model's parameters to measured points of one deployment.

    ``deployment``: the measured deployment as a ``ServingConfig`` (model, gpu, backend,
    precision, mode, engine or prefill/decode parallelism, replicas or worker counts,
    max_batch, max_num_tokens); its isl_tokens/osl_tokens/concurrency/request_rate are ignored,
    each point brings its own. ``measured``: genai-bench iterations
    (``profiler.bench_results.IterationMetrics``: mean input/output tokens, concurrency, mean
    TTFT and TPOT in ms) or ``Point``s; iterations with no successful request are skipped.
    ``params``: where to start and what the prior pulls toward (default: the shipped
    parameters). ``names``: parameters to fit (default: ``fitted_names`` of the
    deployment's backend and mode: with points at several concurrencies, its burst term too).

    Returns a ``DeploymentFit``: ``params`` (the full dict, for ``estimate``/``plan(params=…)``),
    ``scale`` (the uniform time factor found first), ``fitted`` (refined after), ``points`` and the TTFT/TPOT MdAPE ``before`` and ``after`` (%). Raises
    ``ValueError`` ("measured: …") without usable points and ``ModelError`` naming the field
    when the deployment cannot be evaluated (unknown model or GPU, does not fit).
    """
    points = points_from_iterations(measured)
    if not points:
        raise ValueError("measured: no iteration with a successful request to fit")
    start = dict(params or shipped_params())
    loads = len({pt.concurrency for pt in points})
    chosen = tuple(names if names is not None else fitted_names(deployment.backend, deployment.mode, loads))
    unknown = [n for n in chosen if n not in PARAMS]
    if unknown:
        raise ValueError(f"names: unknown parameter(s) {', '.join(unknown)}")
    data = _prepared(deployment, points)
    scale = fit_scale(data, start)
    base = scaled(start, scale)
    # Refine only what scaling left inside its physical bounds (a fit would clip the rest back).
    free = tuple(n for n in chosen if PARAMS[n][1] < base[n] < PARAMS[n][2])
    strength = {n: LOAD_PRIOR_STRENGTH if n == load_name(deployment.backend, deployment.mode) else prior_strength
                for n in free}
    fitted = fit(data, base, free, max_evals=max_evals, prior_strength=strength) if free else base
    return DeploymentFit(params=fitted, scale=round(scale, 6), fitted=free, points=len(points),
                         before=model_errors(data, start), after=model_errors(data, fitted))
