"""Calibration from measured points of one deployment (pure).

Two steps, each taken only when the points can identify it. First one number: the deployment's
time scale, by which every efficiency is divided and every fixed cost multiplied, so that every
step time and every latency the model predicts scales with it (a deployment uniformly slower or
faster than the model: other kernels, clocks, a busier host). Then a refinement of the parameters
that explain an uneven difference (GEMM, weight-streaming, KV and attention efficiencies; the
framework's per-step and per-request costs; per-layer and per-sequence costs; with several
concurrencies, the closed-loop burst term that sets how TTFT grows with load) — but only of those
the points vary: a parameter whose effect on the predicted log TTFT and TPOT is the same at every
point is the scale again, and one whose effect is a mix of parameters already chosen cannot be told
apart from them (``identifiable``); at most one fewer than the measurements less the scale, pulled
toward the scaled values by a prior worth ``PRIOR_STRENGTH`` log-units per factor of 2 per √point
(``LOAD_PRIOR_STRENGTH`` for the burst term). Both minimise the soft-L1 norm of log(predicted /
measured) of the mean TTFT and TPOT.

Never worse than where it started, decided per metric: the points are held out a group at a time
(each concurrency between the lowest and the highest; with two concurrencies, each; with one, each
point), the steps fitted on the rest and the held-out points predicted. The scale is kept on the
side of the model that sets TTFT (prefill: prompt GEMMs and attention, per-chunk and per-request
costs) only if the points show it there — every TTFT off the same way, by more than the
measurement noise could make it (``side_scales.evidence``) — and, on every group held out, it
leaves at most ``SUPPORT`` (half) of the starting parameters' TTFT error; likewise on the side that
sets TPOT (decode: weight streaming, KV reads, per-step costs; ``profiler.model.sides``);
collectives take the mean of the two. A side is also dropped if its scale, fitted without a group,
leaves the other metric worse there than the start (decode steps are part of a TTFT;
``_harmless``). A side kept alone takes the nearer to 1 of the time scale and its own factor
(fitted to its metric alone; ``_lone``). With no load between the lowest and the highest held out
(two concurrencies or one), nothing measured shows how far the offset carries to other loads: the
kept factors are pulled toward 1 together until neither metric moves by more than the points are
sure of at a load not measured (``side_scales.bounded``). A refined parameter is kept only if the
refinement predicts the metric it moves most better than what it started from on every group held
out. What is not supported stays at its starting value. Uncertainty: one standard error of each side's factor
(a posterior with the model's held-out error spread as the prior: ``side_scales.uncertainty``) and
of each refined parameter (from the fit's Jacobian and residuals), as a factor (1.1: ±10%). Errors
are median absolute percentage errors (MdAPE) before and after, on the points fitted; ``held_out``
has the mean absolute log errors of each metric on the groups held out.

The points were measured through a harness (genai-bench's client and the HTTP path; a calibration
row's benchmark), which adds its own time to every TTFT. That time is no engine's: scaled with the
engine's it would pull the scale off wherever it is a sizeable share of the TTFT. So it is held in
place, a fixed term of every prediction of the points (``harness_ms``, never scaled nor fitted), and
everything fitted describes the engine alone, as a deployment's prediction (no harness term) reads it.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Protocol

import numpy as np
from pydantic import BaseModel, ConfigDict, Field

from profiler.model.calibrate import Prepared, _subset, ape, family, fit
from profiler.model.config import ServingConfig
from profiler.model.errors import ModelError
from profiler.model.estimate import Batch, evaluate, prepare, stack_prepared
from profiler.model.gpus import get_gpu
from profiler.model.model_catalog import resolve_model
from profiler.model.params import PARAMS, shipped_params
from profiler.model.side_scales import bounded, evidence, fit_scale, log_errors, uncertainty
from profiler.model.sides import SIDE_NAMES, scaled_sides

PRIOR_STRENGTH = 0.1  # weaker than before the identifiability check: only what the points identify is fitted
# The burst term's prior is weaker: how far closed-loop clients stay in step depends on the
# workload (equal request lengths keep them in lockstep), not on the hardware the prior knows.
LOAD_PRIOR_STRENGTH = 0.05
MAX_EVALS = 200
# Change of a predicted log time per unit change of a log parameter, beyond what the scale and the
# parameters already chosen explain (RMS over the points), below which the points do not see it.
IDENTIFIED = 0.02
# The scale is kept on one metric's side only if, fitted without each group of points in turn, it
# leaves at most this share of the start's error of that metric on the group: it moves every time
# alike, so a difference it explains only in part is not a uniform one. (A refinement, already
# limited to what the points identify, must leave no held-out group worse.)
SUPPORT = 0.5
STEP = 1e-3  # log-parameter step of the finite differences
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
    scale: float = Field(description="time scale found first, >1 slower than ``params`` at the start; kept on the "
                                     "sides in ``sides`` (1: kept on neither)")
    sides: dict[str, float] = Field(default_factory=dict,
                                    description="time factor kept on each side of the model (prefill: sets TTFT; "
                                                "decode: sets TPOT; ``profiler.model.sides``): 1 where the points "
                                                "did not show a scale helps that metric")
    fitted: tuple[str, ...] = Field(description="names of the parameters refined after scaling")
    points: int
    before: Errors
    after: Errors
    uncertainty: dict[str, float] = Field(default_factory=dict,
                                          description="one standard error of each side's factor (``prefill``, "
                                                      "``decode``: kept or not) and of each refined parameter, "
                                                      "as a factor (1.1: ±10%; older rows: ``scale``)")
    harness_ms: float = Field(default=0.0, description="what the measuring harness added to each TTFT, ms: held "
                                                       "fixed in the fit, in no prediction of ``params``")
    held_out: dict[str, float] = Field(default_factory=dict,
                                       description="mean absolute log error of TTFT and TPOT on the groups "
                                                   "held out (``ttft_start``, ``tpot_scaled``, …): the start, "
                                                   "the scale on both sides, the sides kept (``kept``) and "
                                                   "the refinement: what chose the steps")

    @property
    def times(self) -> str:
        """The scale kept, in words (``kept_text``)."""
        return kept_text(self.scale, self.sides)


def kept_text(scale: float, sides: dict[str, float]) -> str:
    """A calibration's kept time scale in words: "times ×1.3" (on both sides, or on neither, or
    ``sides`` not recorded), or the one side it was kept on ("prefill (TTFT) ×1.3, …")."""
    kept = [side for side, factor in sides.items() if factor != 1.0]
    if not sides or len(kept) != 1:
        return f"times ×{scale:.3g}"
    return f"{kept[0]} ({SIDE_METRIC[kept[0]].upper()}) ×{sides[kept[0]]:.3g}, the other side as it started"


# The steps ``DeploymentFit.held_out`` may judge, in order: the start, the scale on both sides, the
# sides kept (what the refinement starts from), the refinement.
HELD_OUT_STEPS = ("start", "scaled", "kept", "refined")


def held_out_text(held_out: dict[str, float]) -> str:
    """A calibration's errors on the points it held out, per metric and step, in words: "held out:
    TTFT 12% start, 4.1% scaled; TPOT …" (mean absolute error, % of the measurement, from the mean
    absolute log errors of ``DeploymentFit.held_out``); "" when nothing was held out."""
    parts = []
    for metric in METRICS:
        steps = [f"{100 * math.expm1(held_out[f'{metric}_{kind}']):.3g}% {kind}" for kind in HELD_OUT_STEPS
                 if f"{metric}_{kind}" in held_out]
        if steps:
            parts.append(f"{metric.upper()} {', '.join(steps)}")
    return f"held out: {'; '.join(parts)}" if parts else ""


def uncertainty_text(uncertainty: dict[str, float]) -> str:
    """A calibration's uncertainties in words: "±4.2% decode, ±61% prefill, ±12% eff_hbm" (one
    standard error of each factor, ``DeploymentFit.uncertainty``); "" when none was recorded."""
    return ", ".join(f"±{100 * (f - 1):.2g}% {name}" for name, f in uncertainty.items())


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


def _prepared(deployment: ServingConfig, points: list[Point], harness_ms: float = 0.0) -> Prepared:
    """``points`` as the rows of one deployment, each with ``harness_ms`` (ms) in its load's harness term."""
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
    batch = stack_prepared(preps)
    batch = Batch(batch.decode, batch.prefill, {**batch.load, "harness_ms": np.full(n, float(harness_ms))},
                  batch.gpus)
    return Prepared(index=np.arange(n), batch=batch,
                    ttft_ms=np.array([p.ttft_ms for p in points]), tpot_ms=np.array([p.tpot_ms for p in points]),
                    labels={"gpu": label(deployment.gpu), "backend": label(deployment.backend),
                            "mode": label(deployment.mode), "family": label(family(deployment.model))},
                    inferred=np.zeros(n, dtype=bool), errors={}, repeats=np.zeros(n, dtype=bool))


def predicted_at(deployment: ServingConfig, points: Sequence[Point], params: dict[str, float], *,
                 harness_ms: float = 0.0) -> tuple[np.ndarray, np.ndarray]:
    """Mean TTFT and TPOT (ms) that ``params`` predict at each of ``points``' lengths and loads on
    ``deployment``, as measured through a harness adding ``harness_ms`` (ms) to each TTFT."""
    out = evaluate(_prepared(deployment, list(points), harness_ms).batch, params)
    return out["ttft_ms"], out["itl_ms"]


def model_errors(data: Prepared, params: dict[str, float]) -> Errors:
    """MdAPE of the mean TTFT and TPOT that ``params`` predict for ``data``'s points."""
    out = evaluate(data.batch, params)
    return Errors(ttft_mdape_pct=round(float(np.median(ape(out["ttft_ms"], data.ttft_ms))), 3),
                  tpot_mdape_pct=round(float(np.median(ape(out["itl_ms"], data.tpot_ms))), 3))


def fit_deployment(deployment: ServingConfig, measured: Sequence[Iteration | Point], *,
                   params: dict[str, float] | None = None, names: tuple[str, ...] | None = None,
                   harness_ms: float = 0.0, prior_strength: float = PRIOR_STRENGTH,
                   max_evals: int = MAX_EVALS) -> DeploymentFit:
    """Fit the model's parameters to measured points of one deployment.

    ``deployment``: the measured deployment as a ``ServingConfig`` (model, gpu, backend,
    precision, mode, engine or prefill/decode parallelism, replicas or worker counts,
    max_batch, max_num_tokens); its isl_tokens/osl_tokens/concurrency/request_rate are ignored,
    each point brings its own. ``measured``: genai-bench iterations
    (``profiler.bench.results.IterationMetrics``: mean input/output tokens, concurrency, mean
    TTFT and TPOT in ms) or ``Point``s; iterations with no successful request are skipped.
    ``params``: where to start and what the prior pulls toward (default: the shipped
    parameters). ``names``: parameters to refine (default: ``fitted_names`` of the
    deployment's backend and mode: with points at several concurrencies, its burst term too).
    ``harness_ms``: what the harness that measured the points adds to each TTFT (ms; genai-bench's:
    ``harness.GENAI_BENCH_MS``), held fixed in every prediction of the points (see the module).

    Returns a ``DeploymentFit``: ``params`` (the full dict, for ``estimate``/``plan(params=…)``),
    ``sides`` and ``scale`` (the time factors kept), ``fitted`` (refined after), ``points``, the
    TTFT/TPOT MdAPE ``before`` and ``after`` (%), ``uncertainty`` and ``held_out`` (see the
    module; ``harness_ms`` as given). Raises ``ValueError`` ("measured: …") without usable points
    and ``ModelError`` naming the field when the deployment cannot be evaluated (unknown model or
    GPU, does not fit).
    """
    points = points_from_iterations(measured)
    if not points:
        raise ValueError("measured: no iteration with a successful request to fit")
    if not (math.isfinite(harness_ms) and harness_ms >= 0):
        raise ValueError(f"harness_ms: {harness_ms} is not a finite time ≥ 0 ms")
    start = dict(params or shipped_params())
    loads = len({pt.concurrency for pt in points})
    chosen = tuple(names if names is not None else fitted_names(deployment.backend, deployment.mode, loads))
    unknown = [n for n in chosen if n not in PARAMS]
    if unknown:
        raise ValueError(f"names: unknown parameter(s) {', '.join(unknown)}")
    data = _prepared(deployment, points, harness_ms)
    groups = _groups(points)
    burst = load_name(deployment.backend, deployment.mode)

    def refine(fit_data: Prepared, fit_base: dict[str, float]) -> tuple[tuple[str, ...], dict[str, float]]:
        # Refine only what scaling left inside its physical bounds (a fit would clip the rest back)
        # and what these points can tell apart from the scale and from each other.
        inside = tuple(n for n in chosen if PARAMS[n][1] < fit_base[n] < PARAMS[n][2])
        free = identifiable(fit_data, fit_base, inside)
        strength = {n: LOAD_PRIOR_STRENGTH if n == burst else prior_strength for n in free}
        return free, fit(fit_data, fit_base, free, max_evals=max_evals, prior_strength=strength) if free else fit_base

    scale = fit_scale(data, start)
    rest_scales = [fit_scale(_subset(data, ~mask), start) for mask in groups]
    start_err = _errors_by_group(data, groups, [start] * len(groups))
    scaled_err = _errors_by_group(data, groups, [scaled_sides(start, dict.fromkeys(SIDE_NAMES, s)) for s in rest_scales])
    shown = evidence(data, start)
    candidates = tuple(side for side in _sides_kept(_supported(scaled_err, start_err, SUPPORT)) if shown[side].shown)
    on, rest, kept_err = _harmless(data, groups, start, rest_scales, start_err, candidates)
    factors = dict.fromkeys(SIDE_NAMES, 1.0)
    factors.update(dict.fromkeys(on, scale) if len(on) > 1 else {side: _lone(data, start, side, scale) for side in on})
    if loads <= 2:  # no load between the ends held out: how far an offset carries to others is the prior's
        factors = bounded(data, start, factors)
        rest = [bounded(_subset(data, ~mask), start, r) for mask, r in zip(groups, rest)]
        kept_err = _errors_by_group(data, groups, [scaled_sides(start, r) for r in rest])
    base = scaled_sides(start, factors)
    held = {"start": start_err, "scaled": scaled_err, "kept": kept_err}
    free, refined = refine(data, base)
    if free and rest:
        bases = [scaled_sides(start, r) for r in rest]
        held["refined"] = _errors_by_group(data, groups, [refine(_subset(data, ~mask), b)[1]
                                                          for mask, b in zip(groups, bases)])
        governs = _governed(data, base, free)
        ok = dict(zip(METRICS, _supported(held["refined"], held["kept"], 1.0)))
        free = tuple(n for n in free if ok[governs[n]])
    kept = base | {n: refined[n] for n in free}
    return DeploymentFit(params=kept, scale=round(scale, 6) if on else 1.0,
                         sides={side: round(f, 6) for side, f in factors.items()},
                         fitted=free, points=len(points), harness_ms=float(harness_ms),
                         before=model_errors(data, start),
                         after=model_errors(data, kept), uncertainty=_uncertainty(data, base, kept, free),
                         held_out={f"{m}_{kind}": round(float(err[:, i].mean()), 5) for kind, err in held.items()
                                   if len(err) for i, m in enumerate(METRICS)})


METRICS = ("ttft", "tpot")
SIDE_METRIC = {"prefill": "ttft", "decode": "tpot"}  # the metric each side mostly sets


def _groups(points: list[Point]) -> list[np.ndarray]:
    """Masks of the points held out in turn: one per concurrency strictly between the lowest and
    the highest (the fit is judged where it interpolates: without an end, what grows with load
    would be extrapolated from fewer loads than identified it), both with two concurrencies, one
    per point with one; none with one point."""
    loads = np.array([pt.concurrency for pt in points])
    distinct = np.unique(loads)
    if len(distinct) == 1:
        return list(np.eye(len(points), dtype=bool)) if len(points) > 1 else []
    return [loads == c for c in (distinct[1:-1] if len(distinct) > 2 else distinct)]


def _errors_by_group(data: Prepared, groups: list[np.ndarray], params: list[dict[str, float]]) -> np.ndarray:
    """Mean absolute log error of TTFT and of TPOT (columns) on each group's points (rows), each
    predicted by its own parameters (``params``, one per group; none: no rows)."""
    return np.array([np.abs(_log_times(_subset(data, mask), p)).reshape(2, -1).mean(axis=1)
                     for mask, p in zip(groups, params)]).reshape(-1, len(METRICS))


def _supported(new: np.ndarray, old: np.ndarray, share: float) -> np.ndarray:
    """Per metric, whether a change is supported: on every group held out (rows of
    ``_errors_by_group``), fitted without it, it leaves less than the error it started from and at
    most ``share`` of it. Every metric when there is no group to hold out."""
    return ((new < old) & (new <= share * old)).all(axis=0)


def _sides_kept(supported: np.ndarray) -> tuple[str, ...]:
    """The sides whose metric (``SIDE_METRIC``) is ``supported`` (per ``METRICS``)."""
    ok = dict(zip(METRICS, supported))
    return tuple(side for side in SIDE_NAMES if ok[SIDE_METRIC[side]])


def _harmless(data: Prepared, groups: list[np.ndarray], start: dict[str, float], rest_scales: list[float],
              start_err: np.ndarray, on: tuple[str, ...]) -> tuple[tuple[str, ...], list[dict[str, float]], np.ndarray]:
    """The most of the sides ``on`` whose scale, fitted without each group in turn (both sides: the
    time scale, ``rest_scales``; one: its own, ``fit_scale``), leaves neither metric worse than the
    start on any group held out (a side moves the other side's metric too: decode steps are part of a
    TTFT): ``on`` itself, else one of its sides, else none; with the factors fitted without each
    group and the errors they leave on it (``_errors_by_group``)."""
    for sides in (on, *((side,) for side in on if len(on) > 1)) if on else ():
        rest = ([dict.fromkeys(SIDE_NAMES, s) for s in rest_scales] if len(sides) > 1 else
                [{sides[0]: _lone(_subset(data, ~mask), start, sides[0], s)} for mask, s in zip(groups, rest_scales)])
        kept = _errors_by_group(data, groups, [scaled_sides(start, r) for r in rest])
        if (kept <= start_err).all():
            return sides, rest, kept
    return (), [{} for _ in groups], start_err


def _lone(data: Prepared, start: dict[str, float], side: str, scale: float) -> float:
    """The factor of ``side`` kept alone: of the time scale ``scale`` (fitted to both metrics) and the
    side's own (``fit_scale`` to the metric it sets), the one nearer 1 — the side's factor moves the
    other metric too, which its own fit does not see; 1 when they disagree on the direction."""
    own = fit_scale(data, start, (side,))
    if math.log(own) * math.log(scale) <= 0.0:
        return 1.0
    return min(own, scale, key=lambda f: abs(math.log(f)))


def _log_times(data: Prepared, params: dict[str, float]) -> np.ndarray:
    """log(predicted / measured) of every point's TTFT, then of its TPOT (``side_scales.log_errors``)."""
    return np.concatenate(list(log_errors(data, params).values()))


def _governed(data: Prepared, params: dict[str, float], names: tuple[str, ...]) -> dict[str, str]:
    """The metric each of ``names`` moves most at ``data``'s points (RMS of d log time / d log parameter)."""
    ttft, tpot = np.split(_sensitivity(data, params, names), 2)
    return {n: "ttft" if np.sqrt(np.mean(a ** 2)) >= np.sqrt(np.mean(b ** 2)) else "tpot"
            for n, a, b in zip(names, ttft.T, tpot.T)}


def _sensitivity(data: Prepared, params: dict[str, float], names: tuple[str, ...]) -> np.ndarray:
    """d log(predicted time) / d log(parameter): one row per TTFT then TPOT of each point, one column per name."""
    at = _log_times(data, params)
    cols = [(_log_times(data, dict(params, **{n: params[n] * math.exp(STEP)})) - at) / STEP for n in names]
    return np.stack(cols, axis=1) if cols else np.zeros((len(at), 0))


def identifiable(data: Prepared, params: dict[str, float], names: tuple[str, ...]) -> tuple[str, ...]:
    """The parameters of ``names`` that ``data``'s points can identify at ``params``, the one that
    explains most of what is left of the misfit first (orthogonal matching pursuit): a parameter's
    effect must be neither a uniform shift (the scale) nor a mix of those chosen before it (the part
    the others leave unexplained at least ``IDENTIFIED``, RMS), and it must explain some of the
    misfit left (more than 0.5% RMS). At most one fewer than the measured
    times less the scale, so a residual remains to judge them by."""
    jac = _sensitivity(data, params, names)
    misfit = _log_times(data, params)
    rows = jac.shape[0]
    basis = np.ones((rows, 1))
    chosen: list[int] = []
    while len(chosen) < rows - 2:
        fit_cols = np.linalg.lstsq(basis, np.column_stack([jac, misfit]), rcond=None)[0]
        left = np.column_stack([jac, misfit]) - basis @ fit_cols
        cols, rest = left[:, :-1], left[:, -1]
        size = np.sqrt(np.mean(cols ** 2, axis=0))
        if not size.size or np.sqrt(np.mean(rest ** 2)) < 0.005:
            break
        gain = np.where(size >= IDENTIFIED, np.abs(cols.T @ rest) / np.maximum(size, 1e-12), 0.0)
        gain[chosen] = 0.0
        j = int(np.argmax(gain))
        if gain[j] <= 0.0:
            break
        chosen.append(j)
        basis = np.column_stack([basis, jac[:, j]])
    return tuple(names[j] for j in chosen)


def _uncertainty(data: Prepared, scaled: dict[str, float], params: dict[str, float],
                 names: tuple[str, ...]) -> dict[str, float]:
    """One standard error, as a factor, of each side's scale at the scaled parameters ``scaled``
    (``side_scales.uncertainty``) and of each of ``names`` at ``params``: from the Jacobian of the
    log times beside a uniform shift, and the residuals' spread (at least 1%, the resolution of a
    benchmark's mean)."""
    residuals = _log_times(data, params)
    jac = np.column_stack([np.ones(len(residuals)), _sensitivity(data, params, names)])
    dof = max(len(residuals) - jac.shape[1], 1)
    sigma2 = max(float(residuals @ residuals) / dof, 0.01 ** 2)
    se = np.sqrt(np.clip(np.diag(sigma2 * np.linalg.pinv(jac.T @ jac)), 0.0, None))[1:]
    sides = {side: uncertainty(data, scaled, side) for side in SIDE_NAMES}
    return {side: u for side, u in sides.items() if u is not None} | {
        name: round(float(np.exp(e)), 4) for name, e in zip(names, se)}
