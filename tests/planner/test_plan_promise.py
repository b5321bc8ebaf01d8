"""A plan keeps its promise: the TTFT error margin it plans with, and the measuring client's time
a request states, are in what it predicts and says."""

from __future__ import annotations

import pytest

from planner import plan
from planner.types import PlanRequest
from profiler.model import ModelError, ttft_error_factor

BUDGET_70B = dict(name="b", model="meta-llama/Llama-3.1-70B", gpu="b200_sxm", backend="vllm", precision="fp8",
                  isl_tokens=1024, osl_tokens=1024, ttft_ms=150, itl_ms=12, total_gpus=8, ttft_error_margin=True)


def _request(**kw) -> PlanRequest:
    return PlanRequest(**{**BUDGET_70B, **kw})


def _clients(result) -> float:
    return result.chosen.predicted.concurrency


def test_the_shipped_margin_is_the_held_out_error_and_plans_keep_it():
    factor = ttft_error_factor()
    assert factor > 1  # the model's held-out TTFT error is not nothing
    result = plan(_request())
    assert result.feasible and result.margin.ttft_error_factor == factor
    for part in result.chosen.parts or (result.chosen,):
        assert part.predicted.ttft_ms * factor <= result.request.ttft_ms
    assert any(f"× {factor:.2f}" in text for text in result.assumptions)


def test_the_margin_is_off_unless_asked_for():
    assert not PlanRequest(**{**BUDGET_70B, "ttft_error_margin": False}).ttft_error_margin
    assert not PlanRequest(**{k: v for k, v in BUDGET_70B.items() if k != "ttft_error_margin"}).ttft_error_margin


def test_the_margin_off_plans_to_the_prediction_and_serves_at_least_as_much():
    on, off = plan(_request()), plan(_request(ttft_error_margin=False))
    assert off.margin.ttft_error_factor == 1 and off.chosen.predicted.ttft_ms <= off.request.ttft_ms
    assert off.chosen.predicted.output_tok_s_per_gpu * off.chosen.total_gpus >= \
        on.chosen.predicted.output_tok_s_per_gpu * on.chosen.total_gpus
    # A larger factor never plans more clients on the same engines.
    loose, tight = (plan(_request(), ttft_error_factor=f) for f in (1.1, 1.6))
    if loose.chosen.shape() == tight.chosen.shape():
        assert _clients(tight) <= _clients(loose)


def test_a_stated_measuring_client_is_in_every_predicted_ttft():
    alone = plan(_request(concurrency=1, total_gpus=None, ttft_error_margin=False))
    measured = plan(_request(concurrency=1, total_gpus=None, ttft_error_margin=False, harness_ttft_ms=40.0))
    assert alone.chosen.shape() == measured.chosen.shape()
    gap = measured.chosen.predicted.ttft_ms - alone.chosen.predicted.ttft_ms
    assert gap == pytest.approx(40.0, rel=0.05)  # one client: nothing else waits on it
    assert measured.margin.harness_ttft_ms == 40.0
    assert measured.margin.ttft_pct < alone.margin.ttft_pct


def test_a_client_that_takes_the_whole_target_leaves_nothing_feasible_and_says_why():
    result = plan(_request(harness_ttft_ms=200.0))
    assert not result.feasible
    assert "held-out error" in result.reason


def test_bad_margins_name_their_field():
    with pytest.raises(ModelError, match="ttft_error_factor"):
        plan(_request(), ttft_error_factor=0.8)
    with pytest.raises(ModelError, match="without_family"):
        ttft_error_factor(without_family="no-such-family")
    with pytest.raises(ValueError, match="harness_ttft_ms"):
        _request(harness_ttft_ms=-1.0)
