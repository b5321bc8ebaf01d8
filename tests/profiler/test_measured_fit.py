"""Calibration from measured points of one deployment (pure): points made by the model itself
with a known difference, so the truth is known."""

from __future__ import annotations

import math
import random

import pytest

from profiler.bench.results import IterationMetrics, Percentiles
from profiler.model.config import Parallel, ServingConfig
from profiler.model.errors import ModelError
from profiler.model.estimate import estimate
from profiler.model.measured import Point, fit_deployment
from profiler.model.params import shipped_params
from profiler.model.side_scales import REPEAT_NOISE, Z

MODEL = "meta-llama/Llama-3.1-8B-Instruct"
DEPLOYMENT = ServingConfig(model=MODEL, gpu="a100_sxm", engine=Parallel(tp=1), isl_tokens=1, osl_tokens=1)


def predicted(c: float, isl: int = 100, osl: int = 20, params=None, times: float = 1.0) -> Point:
    e = estimate(DEPLOYMENT.model_copy(update=dict(isl_tokens=isl, osl_tokens=osl, concurrency=c)), params=params)
    return Point(isl_tokens=isl, osl_tokens=osl, concurrency=c, ttft_ms=e.ttft_ms * times, tpot_ms=e.itl_ms * times)


def test_a_uniformly_slower_deployment_is_recovered_from_three_points():
    points = [predicted(c, times=1.4) for c in (1, 4, 16)]
    fit = fit_deployment(DEPLOYMENT, points)
    assert fit.points == 3 and fit.scale == pytest.approx(1.4, rel=0.01)
    assert fit.before.ttft_mdape_pct == pytest.approx(100 * 0.4 / 1.4, rel=0.01)
    assert fit.after.ttft_mdape_pct < 1 and fit.after.tpot_mdape_pct < 1
    # other loads and shapes are predicted 1.4× slower too
    for c, isl, osl in ((64, 100, 20), (8, 2000, 200)):
        truth, calibrated = predicted(c, isl, osl, times=1.4), predicted(c, isl, osl, params=fit.params)
        assert calibrated.ttft_ms == pytest.approx(truth.ttft_ms, rel=0.03)
        assert calibrated.tpot_ms == pytest.approx(truth.tpot_ms, rel=0.03)


def test_the_harness_time_is_held_apart_and_the_scale_is_the_engines():
    # 1.4x slower, measured through a harness adding 60 ms to each TTFT: held in place, the time scale
    # found is the engine's and the sides keep it alike (bounded toward 1 together: two loads know
    # little of the others); scaled with the engine, the harness time would pull the scale off
    harness_ms = 60.0
    slower = [predicted(c, times=1.4) for c in (1, 4)]
    points = [p.model_copy(update={"ttft_ms": p.ttft_ms + harness_ms}) for p in slower]
    held = fit_deployment(DEPLOYMENT, points, harness_ms=harness_ms)
    assert held.harness_ms == harness_ms and held.scale == pytest.approx(1.4, rel=0.01)
    assert 1.0 < held.sides["prefill"] == held.sides["decode"] < 1.4
    folded = fit_deployment(DEPLOYMENT, points)
    assert abs(math.log(folded.scale / 1.4)) > 5 * abs(math.log(held.scale / 1.4))
    with pytest.raises(ValueError, match="^harness_ms: "):
        fit_deployment(DEPLOYMENT, points, harness_ms=-1.0)


def test_a_faster_deployment_gives_a_scale_below_one():
    fit = fit_deployment(DEPLOYMENT, [predicted(c, times=0.8) for c in (2, 8, 32)])
    assert fit.scale == pytest.approx(0.8, rel=0.01) and fit.after.tpot_mdape_pct < 1


def test_an_uneven_difference_is_refined_and_unfitted_parameters_stay():
    base = shipped_params()
    truth = dict(base, eff_hbm=base["eff_hbm"] * 0.7, ttft_ms_vllm=base["ttft_ms_vllm"] + 30,
                 step_ms_vllm=base["step_ms_vllm"] * 1.5)
    shapes = ((100, 20), (1000, 200))
    points = [predicted(c, isl, osl, params=truth) for c in (1, 4, 16) for isl, osl in shapes]
    fit = fit_deployment(DEPLOYMENT, points)
    assert fit.before.ttft_mdape_pct > 20 and fit.before.tpot_mdape_pct > 20
    assert fit.after.ttft_mdape_pct < fit.before.ttft_mdape_pct / 3
    assert fit.after.tpot_mdape_pct < fit.before.tpot_mdape_pct / 3
    assert "eff_hbm" in fit.fitted and "closed_interference_vllm" not in fit.fitted
    assert fit.params["closed_interference_vllm"] == base["closed_interference_vllm"] and fit.params["eff_link"] != base["eff_link"]
    held = predicted(8, 100, 20, params=truth)
    calibrated, shipped = predicted(8, 100, 20, params=fit.params), predicted(8, 100, 20)
    assert abs(calibrated.tpot_ms / held.tpot_ms - 1) < abs(shipped.tpot_ms / held.tpot_ms - 1) / 3


NOISE = 0.02  # a benchmark mean's spread between runs, as a share (log units)


def _noisy(point: Point, rng) -> Point:
    """``point`` as a benchmark would measure it: each mean off by a log-normal ``NOISE``."""
    return point.model_copy(update={"ttft_ms": point.ttft_ms * math.exp(rng.gauss(0, NOISE)),
                                    "tpot_ms": point.tpot_ms * math.exp(rng.gauss(0, NOISE))})


@pytest.mark.slow
@pytest.mark.parametrize("burst_times", [4.0, 0.1])
def test_how_latency_grows_with_load_is_learned_between_the_concurrencies_fitted(burst_times):
    # A 1.3x slower deployment whose clients stay more (or less) in step than the shipped burst term
    # says, measured with noise at four concurrencies: TTFT grows with load unlike the model's, which
    # the points show, so the burst term is refined; at loads held out, no metric is predicted worse
    # than the start by more than the noise, and one the start is off by more is predicted better.
    rng = random.Random(7)
    base = shipped_params()
    truth = dict(base, agg_burst_vllm=base["agg_burst_vllm"] * burst_times)
    fit = fit_deployment(DEPLOYMENT, [_noisy(predicted(c, 200, 40, params=truth, times=1.3), rng) for c in (1, 4, 8, 32)])
    assert "agg_burst_vllm" in fit.fitted and "disagg_burst" not in fit.fitted
    assert (fit.params["agg_burst_vllm"] / base["agg_burst_vllm"] - 1) * (burst_times - 1) > 0  # the way the truth lies
    for c in (2, 16):
        held = predicted(c, 200, 40, params=truth, times=1.3)
        for metric in ("ttft_ms", "tpot_ms"):
            error = lambda params: abs(math.log(getattr(predicted(c, 200, 40, params=params), metric)  # noqa: E731
                                                / getattr(held, metric)))
            assert error(fit.params) <= error(base) + 2 * NOISE, (c, metric)
            if error(base) > 3 * NOISE:  # a difference the noise cannot make
                assert error(fit.params) < error(base), (c, metric)


def test_no_scale_is_kept_for_an_offset_the_noise_explains_or_points_off_both_ways():
    # 3% slower: within what measuring two points again could give (``side_scales.REPEAT_NOISE``)
    within_noise = fit_deployment(DEPLOYMENT, [predicted(c, times=1.03) for c in (2, 8)])
    # 30% slower at one load, 20% faster at the other: a shape, not a scale
    both_ways = fit_deployment(DEPLOYMENT, [predicted(2, times=1.3), predicted(8, times=0.8)])
    for fit in (within_noise, both_ways):
        assert fit.sides == {"prefill": 1.0, "decode": 1.0} and fit.scale == 1.0
    # a clear uniform difference is kept, and the decode side (TPOT is all decode steps) is known
    # closer than the prefill side (TTFT changes shape with load far more, by the held-out spread)
    clear = fit_deployment(DEPLOYMENT, [predicted(c, times=1.3) for c in (2, 8, 32)])
    assert clear.sides == {"prefill": pytest.approx(1.3, rel=0.02), "decode": pytest.approx(1.3, rel=0.02)}
    assert 1.0 < clear.uncertainty["decode"] < clear.uncertainty["prefill"]


def test_from_two_loads_a_correction_goes_no_further_than_other_loads_are_known():
    # Two loads 15% slower than the model, the loads between them as the model says: ends that agree
    # and a middle that does not, which two points cannot see. Bounded by what the points know of
    # other loads, the correction is kept but leaves the loads between worse than the start by no
    # more than re-measuring the two points could (Z standard errors of their mean noise).
    fit = fit_deployment(DEPLOYMENT, [predicted(c, times=1.15) for c in (2, 32)])
    assert fit.sides["decode"] > 1.0 and fit.sides["prefill"] > 1.0
    for c in (4, 8, 16):
        truth, calibrated = predicted(c), predicted(c, params=fit.params)
        for metric in ("ttft_ms", "tpot_ms"):
            band = Z * REPEAT_NOISE[metric.removesuffix("_ms")] / math.sqrt(2)
            assert abs(math.log(getattr(calibrated, metric) / getattr(truth, metric))) <= band + 0.005, (c, metric)


def test_one_concurrency_leaves_the_burst_term_alone():
    fit = fit_deployment(DEPLOYMENT, [predicted(4, isl, osl, times=1.2) for isl, osl in ((100, 20), (1000, 200))])
    assert "agg_burst_vllm" not in fit.fitted and fit.params["agg_burst_vllm"] == shipped_params()["agg_burst_vllm"]


def _iteration(c: int, *, requests: int = 10, errors: int = 0, input_tokens: float | None = 100.0) -> IterationMetrics:
    truth = predicted(c, times=1.2)
    return IterationMetrics(scenario="D(100,20)", concurrency=c, file=f"D100_20_c{c}.json", requests=requests,
                            errors=errors, error_rate=errors / requests, duration_s=5.0, requests_per_s=2.0,
                            output_tok_s=40.0, input_tok_s=200.0, mean_input_tokens=input_tokens,
                            mean_output_tokens=20.0, ttft=Percentiles(mean_ms=truth.ttft_ms),
                            tpot=Percentiles(mean_ms=truth.tpot_ms), e2e=Percentiles())


def test_genai_bench_iterations_are_read_and_failed_ones_skipped():
    fit = fit_deployment(DEPLOYMENT, [_iteration(1), _iteration(4), _iteration(2, errors=10)])
    assert fit.points == 2 and fit.scale == pytest.approx(1.2, rel=0.01)


def test_bad_input_is_named():
    with pytest.raises(ValueError, match="^measured: no iteration"):
        fit_deployment(DEPLOYMENT, [])
    with pytest.raises(ValueError, match="^measured: no iteration"):
        fit_deployment(DEPLOYMENT, [_iteration(2, errors=10)])
    with pytest.raises(ValueError, match="D100_20_c4.json: no positive mean isl_tokens"):
        fit_deployment(DEPLOYMENT, [_iteration(4, input_tokens=None)])
    with pytest.raises(ModelError, match="^model: ") as err:
        fit_deployment(DEPLOYMENT.model_copy(update={"model": "no/such-model"}), [predicted(1)])
    assert err.value.field == "model"
    with pytest.raises(ValueError, match="^names: unknown parameter"):
        fit_deployment(DEPLOYMENT, [predicted(1)], names=("eff_nothing",))


def test_a_disaggregated_deployment_is_recovered_too():
    disagg = ServingConfig(model="meta-llama/Llama-3.1-70B-Instruct", gpu="h100_sxm", mode="disagg",
                           prefill=Parallel(tp=2), decode=Parallel(tp=4), prefill_workers=2, decode_workers=1,
                           isl_tokens=1, osl_tokens=1)

    def point(c: float, times: float = 1.0) -> Point:
        e = estimate(disagg.model_copy(update=dict(isl_tokens=2000, osl_tokens=200, concurrency=c)))
        return Point(isl_tokens=2000, osl_tokens=200, concurrency=c, ttft_ms=e.ttft_ms * times, tpot_ms=e.itl_ms * times)

    fit = fit_deployment(disagg, [point(c, times=1.3) for c in (4, 8, 32)])
    assert fit.scale == pytest.approx(1.3, rel=0.01) and fit.after.ttft_mdape_pct < 1 and fit.after.tpot_mdape_pct < 1
    held = estimate(disagg.model_copy(update=dict(isl_tokens=2000, osl_tokens=200, concurrency=16)), params=fit.params)
    assert held.itl_ms == pytest.approx(point(16, times=1.3).tpot_ms, rel=0.03)


@pytest.mark.parametrize("seed", range(6))
def test_two_points_move_only_what_they_identify_and_never_predict_other_loads_worse(seed):
    # An unevenly different deployment (every efficiency and fixed cost off by a random factor) with
    # 3% measurement noise, measured at two concurrencies: the fit may refine at most two parameters
    # (four times less the scale, less one to judge by), says how sure it is of each, and predicts
    # the concurrencies it did not see no worse than the parameters it started from.
    import math
    import random

    from profiler.model.params import AMD_PARAMS

    rng = random.Random(seed)
    base = shipped_params()
    nvidia = {k: v for k, v in base.items() if k not in AMD_PARAMS}  # what this H100 deployment reads
    truth = {**base, **{k: v * math.exp(rng.gauss(0, 0.3)) if k.startswith("eff_") or k.endswith(("_us", "_ms"))
                        or "_ms_" in k else v for k, v in nvidia.items()}}
    noisy = lambda c: predicted(c, 500, 100, params=truth, times=math.exp(rng.gauss(0, 0.03)))  # noqa: E731
    fit = fit_deployment(DEPLOYMENT, [noisy(2), noisy(32)])
    assert len(fit.fitted) <= 2 and set(fit.uncertainty) == {"prefill", "decode", *fit.fitted}
    assert all(f >= 1.0 for f in fit.uncertainty.values())
    for c in (1, 4, 8, 16, 64):
        held = predicted(c, 500, 100, params=truth)
        error = lambda params: (abs(math.log(predicted(c, 500, 100, params=params).ttft_ms / held.ttft_ms))  # noqa: E731
                                + abs(math.log(predicted(c, 500, 100, params=params).tpot_ms / held.tpot_ms)))
        assert error(fit.params) <= error(base) + 0.01, (c, fit.fitted, fit.held_out)
