"""What a measurement's harness adds to the TTFT it records, kept apart from the engine (pure).

Calibration rows were measured by benchmark harnesses (their clients, tokenizers, HTTP paths,
routers, in-step polling of the engine) whose per-request cost is not the engine's: fitted into
the engine's own first-token cost it would make every plan pay it. So a calibration row's TTFT
is modelled as measured, the engine's own cost (``params.ENGINE_MEASURED``, measured, not
fitted) plus its harness's term; a deployment's prediction has no harness term at all
(``serving.Load.harness_ms`` is 0 unless calibration sets it).

A row's harness is the first field of its ``provenance`` (before `` | ``: e.g. ``inferencex_db``,
``aic_team_bench``, ``source_file=2026-04-06.csv``). Its term is a typical value per backend
(``harness_ttft_ms_<backend>``, ms) times a factor of the (harness, backend) pair
(``harness_x:<harness>:<backend>``, 1 when not fitted: a harness the fit has not seen, or none
named, gets the typical value). The factors are pulled toward 1 by a prior whose strength was
chosen on grouped held-out error (``SOURCE_PRIOR_STRENGTH``): infinitely strong, as shipped, every
harness of a backend adds the same, and typical + engine is the single per-backend constant the
model fitted before harnesses were told apart.
"""

from __future__ import annotations

import math

import numpy as np

from profiler.model.params import PARAMS, shipped_file
from profiler.model.steps import BACKENDS

# name: (default, lower bound, upper bound), ms. The default and the engine's own cost add up to
# the per-request cost the fit started from before harnesses were told apart (30 ms).
TYPICAL_PREFIX = "harness_ttft_ms_"
TYPICAL: dict[str, tuple[float, float, float]] = {f"{TYPICAL_PREFIX}{b}": (20.0, 0.1, 1000.0) for b in BACKENDS}
FACTOR_PREFIX = "harness_x:"
FACTOR_BOUNDS = (0.01, 100.0)  # a harness's term, relative to its backend's typical one
# Log-units of prior error per factor of 2 per √row pulling each factor toward 1 (as
# ``calibrate.PRIOR_STRENGTH``); ``math.inf``: factors not fitted, one term per backend. Chosen on
# grouped held-out TTFT error, families / GPU types held out (docs/accuracy.md#harness-terms):
# 0.05: 32.7% / 29.7%; 0.5: 28.5% / 28.8%; inf: 28.5% / 28.6%. Told apart, the harnesses' terms
# take up what their rows' model families and GPUs share, and predict other families worse.
SOURCE_PRIOR_STRENGTH = math.inf
# What genai-bench adds to a request's TTFT beyond a minimal streaming client (whose HTTP path the
# engine's own cost already counts), ms: its median TTFT against an emulator 1,000x faster than the
# model, less the emulator's modelled first token and less a minimal client's TTFT there
# (``benchmarks/frontend_cost.py --genai-bench``: 2.5 ms; 1.8 ms from means with the machine busy). A
# calibration to genai-bench's measurements (``measured.fit_deployment``) holds it apart.
GENAI_BENCH_MS = 2.5
# Share of a harness's term that the median request's TTFT carries, for rows that report a median
# (the ``statistic`` column): (default, lower, upper). The rest is the tail of the mean: requests
# a run stalls (e.g. kernels built on first use), which the median request does not meet. Fitted
# on the medians of each fitting step's rows (today the AMD rows' alone), no prior pulling it; by
# default 1: without medians to fit, a median carries the whole term (no tail assumed). Bounded
# by 2 rather than 1 so that the fit starts inside its bounds (at a bound it barely moves).
MEDIAN_SHARE = "harness_median_share"
MEDIAN_BOUNDS = (1.0, 0.001, 2.0)
_SEPARATOR = "\x1f"  # between a harness and a backend in one key (in no provenance text)


def harness_of(row: dict) -> str:
    """The harness a measured row names: its ``provenance``'s first field ("" when none)."""
    return str(row.get("provenance") or "").split(" | ")[0].strip()


def factor_name(harness: str, backend: str) -> str:
    """The parameter scaling the typical term of ``backend`` for rows measured by ``harness``."""
    return f"{FACTOR_PREFIX}{harness}:{backend}"


def typical_ms(params: dict[str, float], backend: str) -> float:
    """The typical harness term of ``backend`` in ``params`` (its default when absent), ms."""
    name = f"{TYPICAL_PREFIX}{backend}"
    return params.get(name, TYPICAL[name][0])


def is_harness(name: str) -> bool:
    """Whether ``name`` is a harness term (never read by a deployment's prediction)."""
    return name in TYPICAL or name == MEDIAN_SHARE or name.startswith(FACTOR_PREFIX)


def bounds(name: str) -> tuple[float, float, float]:
    """(default, lower, upper) of a model parameter or a harness term."""
    if name in PARAMS:
        return PARAMS[name]
    if name in TYPICAL:
        return TYPICAL[name]
    if name == MEDIAN_SHARE:
        return MEDIAN_BOUNDS
    if name.startswith(FACTOR_PREFIX):
        return (1.0, *FACTOR_BOUNDS)
    raise KeyError(name)


def harness_ms(params: dict[str, float], harness: np.ndarray, backend: np.ndarray) -> np.ndarray:
    """Per row: the TTFT (ms) its harness adds, typical of its backend × its pair's factor
    (``params`` without a name: its default)."""
    pairs, which = np.unique(np.char.add(np.char.add(harness.astype(str), _SEPARATOR), backend.astype(str)),
                             return_inverse=True)
    per_pair = []
    for pair in pairs.tolist():
        h, b = pair.rsplit(_SEPARATOR, 1)
        per_pair.append(term_ms(params, h, b))
    return np.asarray(per_pair, dtype=float)[which]


def median_share(params: dict[str, float]) -> float:
    """The share of a harness's term in a median TTFT (``MEDIAN_SHARE`` of ``params``, its default
    when absent)."""
    return params.get(MEDIAN_SHARE, MEDIAN_BOUNDS[0])


def terms(params: dict[str, float]) -> dict[str, float]:
    """The harness terms of ``params``, ms: each typical one and each fitted (harness, backend)'s
    (typical × factor), keyed ``<backend>`` and ``<harness>:<backend>``."""
    out = {b: typical_ms(params, b) for b in BACKENDS}
    for name, factor in params.items():
        if name.startswith(FACTOR_PREFIX):
            out[name.removeprefix(FACTOR_PREFIX)] = factor * typical_ms(params, name.rsplit(":", 1)[1])
    return out


def term_ms(params: dict[str, float], harness: str, backend: str) -> float:
    """The TTFT (ms) ``harness`` adds on ``backend``: the typical term × the pair's factor (1 when
    ``params`` has none, or no harness is named)."""
    return typical_ms(params, backend) * (params.get(factor_name(harness, backend), 1.0) if harness else 1.0)


def shipped_terms() -> dict[str, float]:
    """The harness terms fitted with the shipped parameters (``params.json``'s ``harness``), for
    scoring the calibration data as measured; never read by a prediction for a deployment."""
    return dict(shipped_file().get("harness", {}))


def fitted_factors(source_prior: float, harness: np.ndarray, backend: np.ndarray,
                   mask: np.ndarray) -> tuple[str, ...]:
    """The factors the rows at ``mask`` fit, sorted: one per (named harness, backend) pair; none
    when ``source_prior`` is infinite (one term per backend)."""
    if math.isinf(source_prior):
        return ()
    pairs = {(h, b) for h, b in zip(harness[mask].tolist(), backend[mask].tolist()) if h}
    return tuple(sorted(factor_name(h, b) for h, b in pairs))
