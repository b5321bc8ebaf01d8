"""Harness terms: what a calibration row's harness adds to its TTFT is fitted as a term of its own,
and never enters a prediction for a deployment."""

from __future__ import annotations

import math

import numpy as np
import pytest

from planner import plan
from planner.types import PlanRequest
from profiler.model.calibrate import as_measured, fit_by_vendor, prepare_rows
from profiler.model.config import Parallel, ServingConfig
from profiler.model.estimate import estimate, evaluate
from profiler.model.harness import TYPICAL, factor_name, harness_of, is_harness
from profiler.model.params import ENGINE_MEASURED, default_params, shipped_params

HARNESSES = ("bench_a", "bench_b")


def _terms(scale: float) -> dict[str, float]:
    """Harness terms: every typical one ``scale`` × its default, the two harnesses' factors apart."""
    terms = {name: scale * default for name, (default, _, _) in TYPICAL.items()}
    for i, harness in enumerate(HARNESSES):
        terms |= {factor_name(harness, b): (i + 1) * scale for b in ("vllm", "sglang", "trtllm")}
    return terms


def _row(harness: str, concurrency: float = 1, ttft_ms: float = 150.0) -> dict:
    return {"provenance": f"{harness} | run 7", "model": "meta-llama/Llama-3.1-8B", "gpu": "h100_sxm",
            "backend": "trtllm", "precision": "bf16", "mode": "agg", "isl": "4000", "osl": "500",
            "concurrency": str(concurrency), "tp": "1", "ttft_ms": str(ttft_ms), "tpot_ms": "8"}


def test_a_plans_prediction_is_unchanged_when_harness_terms_change():
    request = PlanRequest(name="h", model="meta-llama/Llama-3.1-8B-Instruct", gpu="h100_sxm", backend="trtllm",
                          ttft_ms=300, itl_ms=20, isl_tokens=4000, osl_tokens=500, request_rate=20,
                          total_gpus=8, max_gpus_per_engine=8)
    base = shipped_params()
    plans = [plan(request, params=base | _terms(scale)) for scale in (0.1, 1.0, 30.0)]
    plans.append(plan(request, params=base))
    assert all(p == plans[0] for p in plans[1:])  # every field of the results: plans, predictions, reasons


def test_an_estimate_is_the_engines_whatever_the_harness_terms():
    config = ServingConfig(model="meta-llama/Llama-3.1-8B", gpu="h100_sxm", backend="sglang",
                           engine=Parallel(tp=2), isl_tokens=1024, osl_tokens=256, concurrency=4)
    base = shipped_params()
    alone = estimate(config, params=base)
    assert all(estimate(config, params=base | _terms(scale)) == alone for scale in (0.1, 10.0))
    assert alone.ttft_parts.frontend_ms == pytest.approx(base["ttft_ms_sglang"])


def test_a_calibration_row_pays_its_harness_term_and_the_engine_reading_does_not():
    rows = [_row(h, concurrency) for concurrency in (1, 8) for h in HARNESSES]
    data = prepare_rows(rows)
    assert data.harness.tolist() == [harness_of(r) for r in rows] == list(HARNESSES) * 2
    params = default_params()
    engine = evaluate(data.batch, params)["ttft_ms"]
    low, high = (evaluate(as_measured(data, params | _terms(scale)), params)["ttft_ms"] for scale in (1.0, 2.0))
    # The same configuration and load: the engine alone predicts the same for either harness.
    assert engine[0] == engine[1] and engine[2] == engine[3]
    # As measured, each row pays its harness's term: more for the harness with the larger factor,
    # more when the terms grow.
    assert np.all(low > engine) and np.all(high > low)
    assert low[1] > low[0] and low[3] > low[2]
    # At one client the first token waits for nothing else: the term is added whole (the prefill
    # pass moves a little with the rate the term lowers).
    term = TYPICAL["harness_ttft_ms_trtllm"][0] * np.array([1.0, 2.0])
    assert low[:2] - engine[:2] == pytest.approx(term, rel=0.05)


def test_the_fit_holds_the_engines_cost_and_fits_one_factor_per_harness_and_backend():
    rows = [_row(h, c, ttft_ms=t) for h, t in zip(HARNESSES, (120.0, 300.0)) for c in (1, 4, 16)]
    data = prepare_rows(rows)
    start = default_params()
    fitted = fit_by_vendor(data, start, max_evals=20, source_prior=0.05)
    assert all(fitted[n] == start[n] for n in ENGINE_MEASURED)
    assert {n for n in fitted if n.startswith("harness_x:")} == {factor_name(h, "trtllm") for h in HARNESSES}
    # The harness whose first tokens are measured later gets the larger term.
    assert fitted[factor_name("bench_b", "trtllm")] > fitted[factor_name("bench_a", "trtllm")]
    shared = fit_by_vendor(data, start, max_evals=20, source_prior=math.inf)
    assert not any(n.startswith("harness_x:") for n in shared)
    assert all(shared[n] == start[n] for n in ENGINE_MEASURED)


def test_shipped_parameters_hold_no_harness_term():
    assert not any(is_harness(name) for name in shipped_params())
