"""Fitting the model's free parameters to measured serving data, and judging the fit.

Pure: rows come in as dicts. The loss is the Cauchy (robust) norm of log(pred/measured)
for TTFT and TPOT together, so a 2× error counts the same at 50 ms and at 5 s, and rows far
off (harness floors, unrecorded engine options) weigh little: it fits the bulk of the rows,
which is what the median errors judge (soft-L1 was 0.8 points worse on held-out TPOT).
Judged only by grouped cross-validation: every fold holds out a whole model family or a
whole GPU type, the parameters are refitted without it, and the errors are measured on it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from functools import lru_cache, partial

import numpy as np

from profiler.model import harness as harnesses
from profiler.model.dataset import row_prepared
from profiler.model.errors import ModelError
from profiler.model.estimate import Batch, evaluate, stack_prepared
from profiler.model.kernels import fit_kernels
from profiler.model.model_catalog import MODELS, resolve_model
from profiler.model.params import AMD_PARAMS, ENGINE_MEASURED, PARAMS, default_params

TTFT_WEIGHT = 1.0
TPOT_WEIGHT = 1.0
PRIOR_STRENGTH = 0.05


@dataclass(frozen=True)
class Prepared:
    """The rows that could be predicted, stacked, with their measurements and labels."""

    index: np.ndarray  # positions in the input
    batch: Batch
    ttft_ms: np.ndarray  # measured TTFT, ms, the mean or (``median``) the median (NaN: unmeasured)
    tpot_ms: np.ndarray  # measured TPOT, ms: the mean, or where only a median is published the median (NaN: unmeasured)
    labels: dict[str, np.ndarray]  # model family, gpu, backend, mode per row
    inferred: np.ndarray  # rows whose deployment had to be guessed (e.g. missing worker counts)
    errors: dict[int, str]  # input position -> why it cannot be predicted
    repeats: np.ndarray  # rows repeating another row's measurement (fitted and scored once, there)
    # Each row's harness (``harness.harness_of``; "" none named); None: the points are the
    # deployment's own, no harness term (``measured.fit_deployment``).
    harness: np.ndarray | None = None
    # Rows whose TTFT is a median (their ``statistic`` column says so; ``reported_ttft_ms``); None: all means.
    median: np.ndarray | None = None


@lru_cache(maxsize=None)
def family(model_id: str) -> str:
    """Group key for cross-validation: the architecture, so releases of one model stay together.

    Named after the first catalog model (alphabetically) with the same architecture, e.g.
    DeepSeek-R1 and DeepSeek-V3.1 fall in DeepSeek-V3's family.
    """
    try:
        model = resolve_model(model_id)[0]
    except ModelError:
        return model_id
    shape = model._replace(hf_id="", aliases=())
    same = [m.hf_id for m in MODELS if m._replace(hf_id="", aliases=()) == shape]
    return min(same) if same else model.hf_id


def rounded(value, digits: int) -> str:
    """A number to ``digits`` significant digits (the text itself when it is not a number)."""
    try:
        return f"{float(value):.{digits}g}"
    except (TypeError, ValueError):
        return str(value).strip()


def repeated_measurements(rows: list[dict], keep: list[int], inferred: list[bool]) -> np.ndarray:
    """Mask of kept rows that repeat another row's measurement, the one to keep being recorded if any.

    The data holds some measurements more than once (one source copying another, sometimes
    without the worker counts, sometimes rounded): same model family, GPU, backend, lengths,
    concurrency, and TTFT and TPOT to three significant digits. Each is fitted and scored
    once, under the row whose deployment is recorded when there is one.
    """
    def key(i: int) -> tuple:
        row = rows[i]
        same = (str(row.get("gpu")).strip(), str(row.get("backend")).strip(),
                *(rounded(row.get(k), 12) for k in ("isl", "osl", "concurrency")))
        return family(str(row.get("model"))), *same, *(rounded(row.get(k), 3) for k in ("ttft_ms", "tpot_ms"))

    order = sorted(range(len(keep)), key=lambda j: inferred[j])  # recorded rows claim first
    seen, repeat = set(), np.zeros(len(keep), dtype=bool)
    for j in order:
        k = key(keep[j])
        repeat[j] = k in seen
        seen.add(k)
    return repeat


def measured_value(row: dict, key: str) -> float:
    """The measured value of column ``key`` of ``row`` (a time in ms, a throughput in tokens/s); NaN
    (unmeasured) when the cell is empty, not finite or not positive. Raises ``ModelError`` naming
    ``key`` when it is not a number."""
    value = row.get(key)
    if value is None or not str(value).strip():
        return math.nan
    try:
        x = float(value)
    except (TypeError, ValueError):
        raise ModelError(key, f"not a number: {value!r}") from None
    return x if math.isfinite(x) and x > 0 else math.nan


def measured_column(rows: list[dict], index, key: str) -> tuple[np.ndarray, list[int]]:
    """The measured values of column ``key`` in ``rows`` at positions ``index`` (NaN where the
    cell is empty, not finite or not positive), and the positions whose cell is not a number
    (NaN too): a batch of measurements is scored without them rather than stopped."""
    values, bad = [], []
    for i in index:
        try:
            values.append(measured_value(rows[i], key))
        except ModelError:
            values.append(math.nan)
            bad.append(int(i))
    return np.array(values, dtype=float), bad


STATISTICS = ("mean", "median")  # what a row's optional ``statistic`` column may say its times are


def reports_median(row: dict) -> bool:
    """Whether ``row`` reports its TTFT as a median: its ``statistic`` column says ``median`` (the
    TTFT is then its ``median_ttft_ms``); empty or absent, a mean. Raises ``ModelError`` naming
    ``statistic`` for anything else."""
    statistic = str(row.get("statistic") or "mean").strip().lower()
    if statistic not in STATISTICS:
        raise ModelError("statistic", f"must be one of {', '.join(STATISTICS)}, got {row.get('statistic')!r}")
    return statistic == "median"


def prepare_rows(rows: list[dict]) -> Prepared:
    """Prepare every row; rows that fail are recorded in ``errors``, never raised. Measurements that are not
    finite and positive are read as unmeasured (NaN): such rows are predicted but neither fitted nor scored.
    A row's TTFT is the statistic it reports (``reports_median``)."""
    keep, preps, inferred, times, medians, errors = [], [], [], [], [], {}
    for i, row in enumerate(rows):
        try:
            median = reports_median(row)
            pair = (measured_value(row, "median_ttft_ms" if median else "ttft_ms"), measured_value(row, "tpot_ms"))
            prep, notes = row_prepared(row)
            preps.append(prep)
            keep.append(i)
            inferred.append(bool(notes))
            times.append(pair)
            medians.append(median)
        except (ModelError, ValueError) as exc:
            errors[i] = str(exc).splitlines()[0]
    ttft, tpot = np.array(times, dtype=float).reshape(-1, 2).T
    labels = {k: np.array([str(rows[i].get(k)) for i in keep]) for k in ("gpu", "backend", "mode")}
    labels["family"] = np.array([family(str(rows[i].get("model"))) for i in keep])
    return Prepared(np.array(keep, dtype=int), stack_prepared(preps) if preps else None, ttft, tpot, labels,
                    np.array(inferred, dtype=bool), errors, repeated_measurements(rows, keep, inferred),
                    np.array([harnesses.harness_of(rows[i]) for i in keep], dtype=str), np.array(medians, dtype=bool))


def as_measured(data: Prepared, params: dict[str, float]) -> Batch:
    """``data``'s batch with each row's harness term (``harness.harness_ms`` of ``params``) in its
    load: what ``evaluate`` predicts then is the measurement, harness included; ``data.batch``
    alone is the engine's."""
    if data.harness is None:
        return data.batch
    b = data.batch
    return Batch(b.decode, b.prefill, {**b.load, "harness_ms": harnesses.harness_ms(params, data.harness,
                                                                                  data.labels["backend"])}, b.gpus)


def reported_ttft_ms(data: Prepared, params: dict[str, float], out: dict[str, np.ndarray],
                     harness_ms: np.ndarray | float = 0.0) -> np.ndarray:
    """Each row's predicted TTFT (ms) in the statistic it reports, from ``out`` (``evaluate`` of
    ``data``'s rows with ``harness_ms`` each in their load): the mean, or on ``data.median`` rows the
    median with the share of the harness term a median carries (``harness.median_share``)."""
    if data.median is None or not data.median.any():
        return out["ttft_ms"]
    less = (1.0 - harnesses.median_share(params)) * np.asarray(harness_ms, dtype=float)
    return np.where(data.median, out["ttft_p50_ms"] - less, out["ttft_ms"])


def predict_as_measured(data: Prepared, params: dict[str, float]) -> dict[str, np.ndarray]:
    """``evaluate`` of ``data``'s rows as measured (``as_measured``), with ``ttft_ms`` the statistic
    each reports (``reported_ttft_ms``)."""
    batch = as_measured(data, params)
    out = evaluate(batch, params)
    return {**out, "ttft_ms": reported_ttft_ms(data, params, out, batch.load.get("harness_ms", 0.0))}


def measured_mask(data: Prepared) -> np.ndarray:
    """Mask of ``data``'s rows with both TTFT and TPOT measured: finite and positive."""
    both = np.stack([data.ttft_ms, data.tpot_ms])
    return (np.isfinite(both) & (both > 0)).all(axis=0)


def _subset(data: Prepared, mask: np.ndarray) -> Prepared:
    b = data.batch
    pick = lambda d: {k: v[mask] for k, v in d.items()}  # noqa: E731
    return Prepared(data.index[mask], Batch(pick(b.decode), pick(b.prefill), pick(b.load), b.gpus[mask]),
                    data.ttft_ms[mask], data.tpot_ms[mask], pick(data.labels), data.inferred[mask], {},
                    data.repeats[mask], None if data.harness is None else data.harness[mask],
                    None if data.median is None else data.median[mask])


def fit(data: Prepared, start: dict[str, float] | None = None, names: tuple[str, ...] = tuple(PARAMS),
        max_evals: int = 400, prior_strength: float | dict[str, float] = PRIOR_STRENGTH) -> dict[str, float]:
    """Least-squares fit of ``names`` (others stay at ``start``) in log-parameter space; names may
    be harness terms (``harness.py``), fitted to the TTFTs as measured.

    Rows whose deployment was inferred rather than recorded are left out of the fit (they
    would teach the model the guess, not the hardware) but are still predicted and scored.
    A row with only one of TTFT and TPOT measured is fitted on that one.
    The fit is pulled toward ``start`` (default: the physical defaults), with
    ``prior_strength`` log-units of error per factor of 2 per √row (one number for every name,
    or one per name, ``PRIOR_STRENGTH`` for names it leaves out).
    """
    base = {n: harnesses.bounds(n)[0] for n in names} | dict(start or default_params())
    lo = np.log([harnesses.bounds(n)[1] if harnesses.bounds(n)[1] > 0 else 1e-3 for n in names])
    hi = np.log([harnesses.bounds(n)[2] for n in names])
    x0 = np.clip(np.log([max(base[n], 1e-3) for n in names]), lo + 1e-9, hi - 1e-9)
    fitted = ~data.inferred & ~data.repeats
    ok_ttft, ok_tpot = (fitted & np.isfinite(x) & (x > 0) for x in (data.ttft_ms, data.tpot_ms))
    ok = ok_ttft | ok_tpot
    log_ttft, log_tpot = np.log(np.where(ok_ttft, data.ttft_ms, 1.0)), np.log(np.where(ok_tpot, data.tpot_ms, 1.0))
    # A weak prior toward the start (physical defaults or kernel fits; a factor of 2 costs as much as
    # PRIOR_STRENGTH × √rows log-units of error) keeps parameters the data barely constrains
    # from drifting to values that fit these rows and nothing else.
    # Each model family counts alike in total (square-root damped), so the families with the
    # most rows do not set parameters that the others then fail to share.
    families, counts = np.unique(data.labels["family"][ok], return_counts=True)
    per_family = dict(zip(families, (ok.sum() / (len(families) * counts)) ** 0.25))
    weight = np.array([per_family.get(f, 0.0) for f in data.labels["family"]])
    prior = np.log([base[n] for n in names])
    strength = np.array([prior_strength.get(n, PRIOR_STRENGTH) if isinstance(prior_strength, dict)
                         else prior_strength for n in names])
    prior_weight = strength * np.sqrt(max(int(ok.sum()), 1)) / np.log(2.0)

    def residuals(x):
        p = dict(base, **dict(zip(names, np.exp(x))))
        out = predict_as_measured(data, p)
        r1 = np.where(ok_ttft, np.log(np.maximum(out["ttft_ms"], 1e-3)) - log_ttft, 0.0)
        r2 = np.where(ok_tpot, np.log(np.maximum(out["itl_ms"], 1e-3)) - log_tpot, 0.0)
        r1 = np.where(np.isfinite(r1), r1, 5.0)
        r2 = np.where(np.isfinite(r2), r2, 5.0)
        return np.concatenate([TTFT_WEIGHT * weight * r1, TPOT_WEIGHT * weight * r2, prior_weight * (x - prior)])

    from scipy.optimize import least_squares  # only when fitting: slow to import

    res = least_squares(residuals, x0, bounds=(lo, hi), loss="cauchy", f_scale=0.2, max_nfev=max_evals,
                        x_scale=1.0, diff_step=1e-3)
    return dict(base, **{n: float(v) for n, v in zip(names, np.exp(res.x))})


def fit_by_vendor(data: Prepared, start: dict[str, float] | None = None, max_evals: int = 400,
                  source_prior: float = harnesses.SOURCE_PRIOR_STRENGTH) -> dict[str, float]:
    """Every parameter fitted in two steps: the shared ones (``fit``) on the rows measured on
    NVIDIA GPUs, then the AMD-only ones (``params.AMD_PARAMS``) on the rows measured on AMD GPUs,
    the shared ones held. AMD rows thus inform only what is AMD's own (the shares are relative to
    the efficiencies NVIDIA's rows set), and without AMD rows the fit is the NVIDIA fit.

    The engine's own first-token costs (``params.ENGINE_MEASURED``) are measured, not fitted;
    the harness terms are: the typical ones with the shared parameters, each (harness, backend)
    factor with the step whose rows first name it, pulled toward 1 with ``source_prior``
    (``harness.SOURCE_PRIOR_STRENGTH``; ``math.inf``: not fitted, every harness typical).
    Returns the model's parameters and the harness terms in one dict."""
    amd = _amd(data)
    shared = tuple(n for n in PARAMS if n not in AMD_PARAMS and n not in ENGINE_MEASURED) + tuple(harnesses.TYPICAL)
    params = dict(start or default_params())
    nvidia = _factors(data, ~amd, source_prior)
    if (~amd).any():
        params = _fit_step(_subset(data, ~amd), params, shared + nvidia, max_evals, dict.fromkeys(nvidia, source_prior))
    if not amd.any():
        return params
    return _fit_amd(_subset(data, amd), params, nvidia, max_evals, source_prior)


def _amd(data: Prepared) -> np.ndarray:
    """Which of ``data``'s rows were measured on AMD GPUs."""
    return data.batch.decode["cdna"] > 0


def _factors(data: Prepared, mask: np.ndarray, source_prior: float) -> tuple[str, ...]:
    """The harness factors the fitted rows at ``mask`` name (``harness.fitted_factors``)."""
    harness = data.harness if data.harness is not None else np.full(len(data.index), "")
    fitted = mask & ~data.inferred & ~data.repeats & np.isfinite(data.ttft_ms)
    return harnesses.fitted_factors(source_prior, harness, data.labels["backend"], fitted)


def _fit_step(rows: Prepared, params: dict[str, float], names: tuple[str, ...], max_evals: int,
              prior_strength: dict[str, float]) -> dict[str, float]:
    """One step of ``fit_by_vendor``: ``fit`` of ``names`` on ``rows``' TPOTs and mean TTFTs, then,
    when some of them report a median TTFT, the share of the harness term a median carries
    (``harness.MEDIAN_SHARE``) on those medians alone, everything else held. The medians inform
    nothing else: fitted with the engine's parameters too, they moved the AMD shares so that held-out
    TPOT (MI325X, MI355X) and MI355X's mean TTFT got worse (docs/accuracy.md#the-median-ttft)."""
    medians = rows.median if rows.median is not None else np.zeros(len(rows.index), dtype=bool)
    means = replace(rows, ttft_ms=np.where(medians, np.nan, rows.ttft_ms))
    params = fit(means, params, names, max_evals=max_evals, prior_strength=prior_strength)
    fitted = medians & ~rows.inferred & ~rows.repeats & np.isfinite(rows.ttft_ms)
    if not fitted.any():
        return params
    only = replace(rows, ttft_ms=np.where(medians, rows.ttft_ms, np.nan), tpot_ms=np.full(len(rows.index), np.nan))
    return fit(only, params, (harnesses.MEDIAN_SHARE,), max_evals=max_evals,
               prior_strength={harnesses.MEDIAN_SHARE: 0.0})


def _fit_amd(amd_rows: Prepared, params: dict[str, float], nvidia: tuple[str, ...], max_evals: int,
             source_prior: float) -> dict[str, float]:
    """``fit_by_vendor``'s second step (``_fit_step``): the AMD-only parameters, and the harness factors
    ``amd_rows`` name that the NVIDIA step (``nvidia``: its factors) did not fit, on ``amd_rows``,
    ``params`` held."""
    amd_only = tuple(n for n in _factors(amd_rows, np.ones(len(amd_rows.index), bool), source_prior)
                     if n not in nvidia)
    return _fit_step(amd_rows, params, AMD_PARAMS + amd_only, max_evals, dict.fromkeys(nvidia + amd_only, source_prior))


def ape(pred: np.ndarray, measured: np.ndarray) -> np.ndarray:
    """Absolute percentage errors."""
    return np.abs(pred - measured) / measured * 100.0


def median_errors(pred: np.ndarray, measured: np.ndarray) -> tuple[int, float, float]:
    """Over the pairs where both are finite and positive: their count, the median absolute
    percentage error and the median bias (exp of the median log(pred/measured), − 1, as %;
    positive = predictions too high). NaNs when there is no such pair."""
    ok = np.isfinite(pred) & np.isfinite(measured) & (pred > 0) & (measured > 0)
    if not ok.any():
        return 0, math.nan, math.nan
    log_ratio = np.log(pred[ok] / measured[ok])
    return int(ok.sum()), float(np.median(ape(pred[ok], measured[ok]))), float(np.expm1(np.median(log_ratio))) * 100.0


def kernel_prior(kernel_rows: list[dict] | None) -> dict[str, float]:
    """Where the fit starts and what it is pulled toward: the physical defaults, with the GEMM
    shape efficiencies fitted to kernel measurements when there are any (``kernels.fit_kernels``)."""
    prior = default_params()
    if kernel_rows:
        prior.update(fit_kernels(kernel_rows, PARAMS))
        # No fp4 kernels were measured: expect fp4 GEMMs to reach the same share of their peak.
        prior["eff_fp4"] = prior["eff_gemm"]
    return prior


def fit_without(data: Prepared, held: np.ndarray, start: dict[str, float] | None = None, max_evals: int = 200,
                source_prior: float = harnesses.SOURCE_PRIOR_STRENGTH) -> dict[str, float]:
    """The parameters (and harness terms) one cross-validation fold fits: ``fit_by_vendor`` on
    ``data``'s rows outside the mask ``held``, from and toward ``start``."""
    return fit_by_vendor(_subset(data, ~held), start, max_evals=max_evals, source_prior=source_prior)


def _fold_predictions(data: Prepared, start: dict[str, float] | None, max_evals: int, source_prior: float,
                      held: np.ndarray) -> np.ndarray:
    """One cross-validation fold: fit without the ``held`` rows, predict them: TTFT and TPOT in
    ms and output tokens/s per GPU as measured (harness terms in), then the same of the engine
    alone (no harness term), six rows."""
    params = fit_without(data, held, start, max_evals=max_evals, source_prior=source_prior)
    return _predict(_subset(data, held), params)


def _predict(sub: Prepared, params: dict[str, float]) -> np.ndarray:
    """``sub``'s TTFT and TPOT (ms) and output tokens/s per GPU with ``params``, as measured then
    of the engine alone: six rows."""
    engine = evaluate(sub.batch, params)
    readings = (predict_as_measured(sub, params), {**engine, "ttft_ms": reported_ttft_ms(sub, params, engine)})
    return np.array([out[k] for out in readings for k in ("ttft_ms", "itl_ms", "output_tok_s_per_gpu")])


def _amd_fold_predictions(data: Prepared, nvidia_params: dict[str, float], nvidia: tuple[str, ...],
                          max_evals: int, source_prior: float, held: np.ndarray) -> np.ndarray:
    """``_fold_predictions`` of a fold holding out AMD rows only, from its NVIDIA step already fitted
    (``nvidia_params``, its harness factors ``nvidia``): the AMD step on the AMD rows not ``held``
    (none: the NVIDIA fit as it is)."""
    rest = _amd(data) & ~held
    params = _fit_amd(_subset(data, rest), nvidia_params, nvidia, max_evals, source_prior) if rest.any() \
        else nvidia_params
    return _predict(_subset(data, held), params)


ENGINE_ALONE = "/engine"  # suffix of ``cross_validate``'s schemes predicted without harness terms


def cross_validate(data: Prepared, start: dict[str, float] | None = None, max_evals: int = 200,
                   map_folds=map, held_out: dict[str, np.ndarray] | None = None,
                   source_prior: float = harnesses.SOURCE_PRIOR_STRENGTH,
                   schemes: tuple[str, ...] = ("family", "gpu")) -> dict[str, np.ndarray]:
    """Grouped CV: one fold per model family and one per GPU type (the ``schemes`` named of the
    two), and one per entry of ``held_out`` (a name and a mask of ``data``'s rows held out
    together, e.g. every disaggregated row).

    Returns held-out predictions for each scheme (``family``, ``gpu`` and the names of
    ``held_out``), one row each of TTFT (ms), TPOT (ms) and output tokens/s per GPU: every
    configuration is predicted by parameters fitted (from and toward ``start``; harness factors
    pulled toward 1 with ``source_prior``) without its group, as measured (harness terms in);
    ``<scheme>/engine`` (``ENGINE_ALONE``) the same of the engine alone. Rows outside a
    ``held_out`` mask are NaN in its scheme.
    ``map_folds`` runs the folds (``map``: one after another; a process pool's ``map`` runs
    them side by side with the same results, each fit being deterministic).
    """
    folds = [(scheme, data.labels[scheme] == group) for scheme in ("family", "gpu") if scheme in schemes
             for group in np.unique(data.labels[scheme])]
    folds += [(name, np.asarray(mask, dtype=bool)) for name, mask in (held_out or {}).items()]
    result = {scheme + suffix: np.full((3, len(data.index)), np.nan) for scheme, _ in folds
              for suffix in ("", ENGINE_ALONE)}
    predictions = map_folds(partial(_fold_predictions, data, start, max_evals, source_prior),
                            [held for _, held in folds])
    for (scheme, held), predicted in zip(folds, predictions):
        result[scheme][:, held] = predicted[:3]
        result[scheme + ENGINE_ALONE][:, held] = predicted[3:]
    return result


def cross_validate_amd(data: Prepared, start: dict[str, float] | None = None, max_evals: int = 200,
                       map_folds=map, source_prior: float = harnesses.SOURCE_PRIOR_STRENGTH) -> dict[str, np.ndarray]:
    """``cross_validate``'s folds that hold out AMD rows only, with the same predictions at a
    fraction of the cost: each AMD GPU type (scheme ``gpu``), the CDNA3 types together (``cdna3``)
    and every AMD row (``amd``). Their NVIDIA step sees the same rows in each, so it is fitted once;
    each fold then fits the AMD step alone. Returns what ``cross_validate`` does for these schemes
    (NaN on every NVIDIA row)."""
    amd = _amd(data)
    gpus = data.labels["gpu"]
    folds = [("gpu", amd & (gpus == g)) for g in np.unique(gpus[amd])]
    folds += [("cdna3", data.batch.decode["cdna"] == 3), ("amd", amd)]
    nvidia = _factors(data, ~amd, source_prior)
    nvidia_params = fit_by_vendor(_subset(data, ~amd), start, max_evals=max_evals, source_prior=source_prior)
    result = {scheme + suffix: np.full((3, len(data.index)), np.nan) for scheme, _ in folds
              for suffix in ("", ENGINE_ALONE)}
    predictions = map_folds(partial(_amd_fold_predictions, data, nvidia_params, nvidia, max_evals, source_prior),
                            [held for _, held in folds])
    for (scheme, held), predicted in zip(folds, predictions):
        result[scheme][:, held] = predicted[:3]
        result[scheme + ENGINE_ALONE][:, held] = predicted[3:]
    return result
