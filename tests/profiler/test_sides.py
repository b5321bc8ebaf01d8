"""The two sides of the model's time a calibration scales apart (pure)."""

from __future__ import annotations

import math

from profiler.model.config import Parallel, ServingConfig
from profiler.model.estimate import estimate
from profiler.model.params import PARAMS, shipped_params
from profiler.model.sides import is_time, scaled, scaled_sides, side_of

DEPLOYMENT = ServingConfig(model="meta-llama/Llama-3.1-8B-Instruct", gpu="a100_sxm", engine=Parallel(tp=1),
                           isl_tokens=2000, osl_tokens=200, concurrency=8)


def test_every_time_is_on_a_side_but_the_collectives():
    both = {n for n in PARAMS if is_time(n) and side_of(n) is None}
    assert both == {"eff_link", "coll_latency_us", "peer_us", "amd_link_eff", "amd_coll_latency_us", "amd_peer_us"}
    assert side_of("ttft_ms_vllm") == side_of("eff_attn") == "prefill" and side_of("step_ms_sglang") == "decode"
    assert side_of("agg_burst_vllm") is None and not is_time("agg_burst_vllm")
    # what a measurement's harness adds is no engine's time: no scale moves it
    assert not is_time("harness_ttft_ms_vllm") and not is_time("harness_x:bench:vllm")
    assert scaled({"harness_ttft_ms_vllm": 20.0}, 2.0) == {"harness_ttft_ms_vllm": 20.0}


def test_each_side_moves_the_metric_it_sets_most():
    base = shipped_params()
    at = estimate(DEPLOYMENT, params=base)
    for side, most, least in (("prefill", "ttft_ms", "itl_ms"), ("decode", "itl_ms", "ttft_ms")):
        moved = estimate(DEPLOYMENT, params=scaled_sides(base, {side: 2.0}))
        change = {m: math.log(getattr(moved, m) / getattr(at, m)) for m in (most, least)}
        assert change[most] > change[least] >= 0.0, side
    # both sides alike are the one scale: every time that much longer
    uniform = estimate(DEPLOYMENT, params=scaled(base, 1.5))
    assert scaled(base, 1.5) == scaled_sides(base, {"prefill": 1.5, "decode": 1.5})
    assert math.isclose(uniform.itl_ms, 1.5 * at.itl_ms, rel_tol=0.01)
