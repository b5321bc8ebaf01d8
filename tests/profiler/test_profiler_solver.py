"""The operating-point solver: the fast root finder gives what plain bisection gives.

``solve`` finds the decode batch with an Illinois (false-position) root finder; it replaced
48 bisection steps to make one estimate about ten times faster. The predictions must be the
same within 0.1%: checked against a bisection reference on a grid of configurations, and on
a sample of the measured calibration rows when ../shared/data is present.
"""

from __future__ import annotations

import csv

import numpy as np
import pytest

import profiler.model.serving as serving
from profiler.model.config import Figures, Parallel, Prediction, ServingConfig
from profiler.model.estimate import estimate, evaluate, prediction, prepare
from profiler.model.params import default_params, shipped_params
from paths import SHARED

DATA = SHARED / "data" / "measured_serving_calibration.csv"
OUTPUTS = ("ttft_ms", "ttft_p90_ms", "ttft_p99_ms", "itl_ms", "requests_per_s", "output_tok_s_per_gpu",
           "decode_batch")


def bisection(func, lo, hi, f_lo, f_hi, steps: int = 60):
    """The reference: halve the bracket ``steps`` times."""
    lo, hi = np.asarray(lo, dtype=float), np.asarray(hi, dtype=float)
    for _ in range(steps):
        mid = 0.5 * (lo + hi)
        high = func(mid) > 0
        hi, lo = np.where(high, mid, hi), np.where(high, lo, mid)
    return 0.5 * (lo + hi)


def grid() -> list[ServingConfig]:
    out = []
    for model, gpu, par in (("meta-llama/Llama-3.1-8B", "h100", Parallel(tp=1)),
                            ("meta-llama/Llama-3.1-70B", "h200", Parallel(tp=4)),
                            ("Qwen/Qwen3-30B-A3B", "b200", Parallel(tp=2, moe_ep=2)),
                            ("deepseek-ai/DeepSeek-R1", "b200", Parallel(tp=1, dp=8, moe_ep=8))):
        for isl, osl in ((128, 2048), (4000, 500), (16000, 64)):
            for load in ({"concurrency": 1}, {"concurrency": 37}, {"concurrency": 4000}, {"request_rate": 0.3},
                         {"request_rate": 40.0}):
                out.append(ServingConfig(model=model, gpu=gpu, engine=par, isl_tokens=isl, osl_tokens=osl,
                                         replicas=2, **load))
            out.append(ServingConfig(model=model, gpu=gpu, mode="disagg", prefill=par, decode=par, prefill_workers=3,
                                     decode_workers=2, isl_tokens=isl, osl_tokens=osl, concurrency=200))
    return out


def compare(preps, params, monkeypatch) -> None:
    fast = evaluate(preps, params)
    with monkeypatch.context() as m:
        m.setattr(serving, "increasing_root", bisection)
        slow = evaluate(preps, params)
    for key in OUTPUTS:
        a, b = np.asarray(fast[key], dtype=float), np.asarray(slow[key], dtype=float)
        assert np.array_equal(np.isfinite(a), np.isfinite(b)), key
        fin = np.isfinite(b)
        np.testing.assert_allclose(a[fin], b[fin], rtol=1e-3, err_msg=key)
    assert np.array_equal(fast["saturated"], slow["saturated"])


@pytest.mark.parametrize("which", ["default", "shipped"])
def test_root_finder_matches_bisection_on_a_grid(which, monkeypatch):
    params = default_params() if which == "default" else shipped_params()
    compare([prepare(c) for c in grid()], params, monkeypatch)


def test_single_estimate_matches_bisection(monkeypatch):
    for config in grid()[::4]:
        fast = estimate(config)
        with monkeypatch.context() as m:
            m.setattr(serving, "increasing_root", bisection)
            slow = estimate(config)
        assert fast.ttft_ms == pytest.approx(slow.ttft_ms, rel=1e-3)
        assert fast.itl_ms == pytest.approx(slow.itl_ms, rel=1e-3)
        assert fast.output_tok_s_per_gpu == pytest.approx(slow.output_tok_s_per_gpu, rel=1e-3)


def test_root_finder_matches_bisection_on_calibration_rows(monkeypatch):
    if not DATA.is_file():
        pytest.skip("../shared/data/measured_serving_calibration.csv is absent")
    from profiler.model.calibrate import prepare_rows

    with DATA.open(newline="", encoding="utf-8") as f:
        rows = list(csv.DictReader(f))
    data = prepare_rows(rows[::7])
    compare(data.batch, shipped_params(), monkeypatch)


def test_increasing_root_on_known_functions():
    target = np.array([0.001, 0.5, 3.0, 7.9])
    cube = lambda x: x**3 - target  # noqa: E731
    lo, hi = np.full(4, 1e-9), np.full(4, 2.0)
    root = serving.increasing_root(cube, lo, hi, cube(lo), cube(hi))
    np.testing.assert_allclose(root, np.cbrt(target), rtol=1e-9)
    # infinite beyond a pole (an unstable queue): bisection steps until the bracket is finite
    pole = lambda x: np.where(x < 1.5, 1.0 / (1.5 - np.minimum(x, 1.499999)) - 2.0, np.inf)  # noqa: E731
    lo, hi = np.array([0.0]), np.array([4.0])
    root = serving.increasing_root(pole, lo, hi, pole(lo), pole(hi))
    np.testing.assert_allclose(root, [1.0], rtol=1e-9)
    # the scalar path agrees with the vector path
    cube3 = lambda x: x**3 - 3.0  # noqa: E731
    one = serving.increasing_root(cube3, 1e-9, 2.0, cube3(1e-9), cube3(2.0))
    assert float(one) == pytest.approx(np.cbrt(3.0), rel=1e-9)


def test_one_configuration_alone_matches_it_inside_a_batch_on_calibration_rows():
    # One estimate takes plain-Python paths on numpy scalars; a batch takes numpy's element-wise
    # ones. Every kind of row (dense, MoE, MLA, sparse and linear attention, disaggregated,
    # saturated) must come out the same either way.
    if not DATA.is_file():
        pytest.skip("../shared/data/measured_serving_calibration.csv is absent")
    from profiler.model.dataset import row_prepared
    from profiler.model.errors import ModelError
    from profiler.model.estimate import _evaluate_one, stack_prepared

    with DATA.open(newline="", encoding="utf-8") as f:
        rows = list(csv.DictReader(f))[::5]
    preps = []
    for row in rows:
        try:
            preps.append(row_prepared(row)[0])
        except ModelError:
            continue
    batch = evaluate(stack_prepared(preps))
    for key in ("ttft_ms", "ttft_p99_ms", "itl_ms", "requests_per_s", "decode_batch"):
        alone = np.array([float(_evaluate_one(p, None)[key]) for p in preps])
        np.testing.assert_allclose(alone, batch[key], rtol=1e-9, err_msg=key)
    assert len(preps) > 500


def test_parts_add_up_to_ttft_and_itl_on_a_grid():
    """Every TTFT and ITL split adds up to its total, and each part appears only where it can:
    KV transfer only disaggregated, prefill interference only aggregated, burst waits only
    for closed loops, queueing for Poisson arrivals or clients beyond the batch limit."""
    configs = grid()
    out = evaluate([prepare(c) for c in configs], shipped_params())
    ttft_parts = sum(out[k] for k in ("ttft_fixed_ms", "ttft_prefill_ms", "ttft_transfer_ms", "ttft_first_step_ms",
                                      "ttft_queue_ms", "ttft_burst_ms"))
    np.testing.assert_allclose(ttft_parts, out["ttft_ms"], rtol=1e-9)
    np.testing.assert_allclose(out["tpot_step_ms"] + out["tpot_interference_ms"], out["itl_ms"], rtol=1e-9)
    disagg = np.array([c.mode == "disagg" for c in configs])
    closed = np.array([c.concurrency is not None for c in configs])
    assert np.all(out["ttft_transfer_ms"][disagg] > 0) and np.all(out["ttft_transfer_ms"][~disagg] == 0)
    assert np.all(out["tpot_interference_ms"][disagg] == 0) and np.all(out["tpot_interference_ms"][~disagg] > 0)
    assert np.all(out["ttft_burst_ms"][~closed] == 0)
    assert np.all(out["ttft_queue_ms"][~closed] > 0)
    single = np.array([c.concurrency == 1 for c in configs])
    assert np.all(out["ttft_queue_ms"][single] == 0) and np.all(out["ttft_burst_ms"][single] == 0)
    crowd = np.array([c.concurrency == 4000 for c in configs])  # far beyond what 2 engines batch
    assert np.all(out["ttft_queue_ms"][crowd & out["saturated"]] > 0)
    assert (crowd & out["saturated"]).any()


def test_a_ready_prompt_waits_out_half_the_iteration_in_progress_then_the_one_that_emits_its_token():
    """A prompt is ready (arrived, or prefilled and shipped to decode) at a random point of the
    decode iteration in progress: TTFT holds the rest of it, half of one on average, and the
    iteration that emits its first token. A lone client finds its engine idle (no iteration to
    wait out); with many clients or Poisson arrivals the rank is almost surely decoding."""
    configs = grid()
    assert all(c.spec_tokens == 0 for c in configs)  # one token per iteration: the step is the TPOT step
    out = evaluate([prepare(c) for c in configs], shipped_params())
    steps = out["ttft_first_step_ms"] / out["tpot_step_ms"]
    alone = np.array([c.concurrency == 1 for c in configs])
    per_rank = out["decode_batch"] / np.array([prepare(c).decode["dp"] for c in configs])
    crowded = per_rank > 10  # another sequence is decoding on the rank but for a chance of e^-10
    np.testing.assert_allclose(steps[alone], 1.0, rtol=1e-9)
    np.testing.assert_allclose(steps[crowded], 1.5, rtol=1e-4)
    assert np.all((steps >= 1.0 - 1e-12) & (steps <= 1.5 + 1e-12))
    modes = {c.mode for c, busy in zip(configs, crowded) if busy}
    assert modes == {"agg", "disagg"} and alone.any()


def test_estimate_reports_the_same_parts_as_the_batch():
    config = grid()[1]
    est = estimate(config)
    row = evaluate([prepare(config)], shipped_params())
    t, i = est.ttft_parts, est.itl_parts
    got = [t.frontend_ms, t.prefill_ms, t.kv_transfer_ms, t.first_step_ms, t.queueing_ms, t.burst_ms,
           i.decode_step_ms, i.prefill_interference_ms]
    keys = ("ttft_fixed_ms", "ttft_prefill_ms", "ttft_transfer_ms", "ttft_first_step_ms", "ttft_queue_ms",
            "ttft_burst_ms", "tpot_step_ms", "tpot_interference_ms")
    np.testing.assert_allclose(got, [float(row[k][0]) for k in keys], rtol=1e-9)
    assert sum(got[:6]) == pytest.approx(est.ttft_ms, rel=1e-9)


def test_the_stored_prediction_holds_the_estimates_figures_and_reads_back_from_its_document():
    """``prediction`` (what the planner stores) and ``estimate`` (the model's full answer) hold the
    same figures and parts of one configuration; the stored document (camelCase, unbounded times ``null``)
    reads back to the same prediction."""
    configs = grid()
    out = evaluate([prepare(c) for c in configs], shipped_params())
    unbounded = 0
    for j, config in enumerate(configs):
        est = estimate(config)
        pred = prediction({k: v[j] for k, v in out.items()}, concurrency=config.concurrency or 1.0)
        figures = set(Figures.model_fields)
        for mine, theirs in ((pred.model_dump(include=figures), est.model_dump(include=figures)),
                             (dict(pred.ttft_parts), dict(est.ttft_parts)), (dict(pred.itl_parts), dict(est.itl_parts))):
            assert mine == pytest.approx(theirs, rel=1e-9)  # a row alone and in a batch: the last bit may differ
        doc = pred.model_dump(mode="json", by_alias=True)
        assert Prediction.model_validate(doc) == pred
        unbounded += doc["ttftMs"] is None
    assert unbounded  # a Poisson rate beyond what the deployment serves: stored as null, read back infinite
