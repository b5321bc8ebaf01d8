"""The offline planner: search optimality, sizing for the load, budgets, infeasible SLAs."""

from __future__ import annotations

import pytest

import planner.search as search_mod
from planner import plan
from planner.types import PlanRequest


def _request(**kw) -> PlanRequest:
    base = dict(name="t", model="meta-llama/Llama-3.1-8B-Instruct", backend="vllm", gpu="h100_sxm",
                isl_tokens=2000, osl_tokens=300, ttft_ms=400, itl_ms=25, max_gpus_per_engine=4)
    base.update(kw)
    return PlanRequest(**base)


def test_sampler_finds_the_exhaustive_optimum(monkeypatch):
    """TPE over a small space reaches the same optimum as enumerating every candidate."""
    req = _request(concurrency=48, model="Qwen/Qwen3-30B-A3B", max_gpus_per_engine=4)
    exhaustive = plan(req)
    assert exhaustive.feasible
    assert exhaustive.chosen.total_gpus == min(p.total_gpus for p in exhaustive.candidates if p.feasible)
    monkeypatch.setattr(search_mod, "GRID_LIMIT", 0)
    sampled = plan(req)
    assert sampled.feasible
    assert sampled.chosen.total_gpus == exhaustive.chosen.total_gpus


def test_chosen_is_cheapest_feasible_candidate():
    result = plan(_request(concurrency=32))
    assert result.feasible
    feasible = [p for p in result.candidates if p.feasible]
    assert result.chosen.total_gpus == min(p.total_gpus for p in feasible)
    assert result.chosen.predicted.ttft_ms <= 400 and result.chosen.predicted.itl_ms <= 25


def test_more_load_needs_no_fewer_gpus():
    gpus = [plan(_request(concurrency=c)).chosen.total_gpus for c in (8, 64, 256)]
    assert gpus == sorted(gpus) and gpus[-1] > gpus[0]


def test_request_rate_load_is_met():
    result = plan(_request(request_rate=20.0))
    assert result.feasible
    assert result.chosen.predicted.requests_per_s == pytest.approx(20.0, rel=0.02)


def test_gpu_budget_is_respected_or_reported():
    loose = plan(_request(concurrency=256))
    need = loose.chosen.total_gpus
    tight = plan(_request(concurrency=256, total_gpus=max(1, need - 1)))
    if tight.feasible:
        assert tight.chosen.total_gpus <= need - 1
    else:
        assert "budget" in tight.reason and str(need) in tight.reason


def test_infeasible_sla_is_reported_with_the_closest_configuration():
    result = plan(_request(itl_ms=0.5, concurrency=4))
    assert not result.feasible and result.chosen is None
    closest = result.closest
    assert closest in result.candidates and closest.predicted.itl_ms > 0.5
    assert f"Closest: {closest.mode} {closest.shape()} on {closest.total_gpus} GPUs" in result.reason
    assert "ms of it the decode step" in result.reason  # what the closest one's ITL is made of
    assert result.candidates, "the evaluated set is kept even when nothing meets the SLA"


def test_deterministic():
    req = _request(concurrency=40, model="Qwen/Qwen3-30B-A3B")
    assert plan(req) == plan(req)


def test_no_load_maximizes_goodput_per_gpu():
    result = plan(_request())
    feasible = [p for p in result.candidates if p.feasible]
    assert result.chosen.predicted.output_tok_s_per_gpu == max(p.predicted.output_tok_s_per_gpu for p in feasible)


def test_no_load_sizes_a_disaggregated_unit_at_the_batch_its_decode_step_allows():
    # Each decode engine's memory holds far more sequences than its step serves within the ITL
    # target; the unit is sized for the batch that meets it, as aggregated engines are.
    result = plan(_request(model="meta-llama/Llama-3.1-70B-Instruct", max_gpus_per_engine=8, ttft_ms=600, itl_ms=30))
    disagg = [p for p in result.candidates if p.mode == "disagg"]
    assert {p.role("decode").tp for p in disagg} == {2, 4, 8}
    for p in disagg:
        assert p.feasible and p.predicted.itl_ms <= 30, (p.role("prefill").tp, p.role("decode").tp, p.predicted)
        assert p.predicted.concurrency <= p.role("decode").max_batch * p.role("decode").dp * (1 + 1e-9)


def test_no_load_with_a_budget_sizes_a_disaggregated_unit_to_fit_it():
    # At its decode capacity a TP8 decode engine's clients need several prefill workers; with a
    # budget the unit serves fewer clients, with the prefill workers the budget has room for.
    kw = dict(model="meta-llama/Llama-3.1-70B-Instruct", max_gpus_per_engine=8, isl_tokens=4000, osl_tokens=500,
              ttft_ms=1500, itl_ms=20)
    unbounded = {(p.role("prefill").tp, p.role("decode").tp): p for p in plan(_request(**kw)).candidates if p.mode == "disagg"}
    bounded = {(p.role("prefill").tp, p.role("decode").tp): p
               for p in plan(_request(**kw, total_gpus=16)).candidates if p.mode == "disagg"}
    assert unbounded[(4, 8)].total_gpus > 16  # the budget binds
    for shape, p in bounded.items():
        if sum(shape) <= 16 and unbounded[shape].feasible:
            assert p.feasible and p.total_gpus <= 16, (shape, p.total_gpus, p.reason)
            assert p.predicted.output_tok_s_per_gpu > 0


def test_model_too_big_for_engine_bounds_is_infeasible_with_reason():
    result = plan(_request(model="meta-llama/Llama-3.1-405B", precision="bf16", max_gpus_per_engine=2))
    assert not result.feasible
    assert "fits no engine" in result.reason and "maxNumGPUsPerEngine" in result.reason


def test_multinode_engines_allowed():
    result = plan(_request(model="deepseek-ai/DeepSeek-V3", gpu="h100_sxm", max_gpus_per_engine=16,
                           isl_tokens=1000, osl_tokens=200, ttft_ms=3000, itl_ms=100))
    assert result.feasible
    assert all(e.gpus >= 16 for p in result.candidates for e in p.engines), "DeepSeek-V3 fp8 needs two H100 nodes"
    assert result.chosen.engines[0].nodes == 2


def test_unreachable_ttft_does_not_grow_pools_past_their_knee():
    """When no pool size meets the TTFT, a disaggregated candidate keeps the fewest prefill
    workers that come within 1% of the best TTFT any number reaches, not the most allowed."""
    from planner.sizing import MAX_WORKERS

    result = plan(_request(ttft_ms=5, concurrency=16))
    assert not result.feasible
    disagg = [p for p in result.candidates if p.mode == "disagg"]
    assert disagg
    assert all(p.role("prefill").replicas < MAX_WORKERS // 4 for p in disagg)
    assert result.closest.predicted.ttft_ms > 5


def test_disaggregated_plans_serve_no_more_than_their_prefill_pool_prefills():
    """Long prompts at a Poisson rate: every disaggregated candidate's rate stays within what its
    prefill workers prefill, and a feasible one has enough of them for the whole rate."""
    from profiler.model.config import Parallel, ServingConfig
    from profiler.model.estimate import prepare
    from profiler.model.params import shipped_params
    from profiler.model.serving import prefill_batching, prefill_capacity

    rate = 6.0
    result = plan(_request(isl_tokens=8000, osl_tokens=200, ttft_ms=3000, itl_ms=40, request_rate=rate))
    disagg = [p for p in result.candidates if p.mode == "disagg"]
    assert disagg and any(p.feasible for p in disagg)
    for p in disagg:
        pre, dec = p.role("prefill"), p.role("decode")
        prep = prepare(ServingConfig(model=p.model, gpu=p.gpu, backend=p.backend, precision=p.precision, mode="disagg",
                                     prefill=Parallel(tp=pre.tp, pp=pre.pp, dp=pre.dp, moe_ep=pre.ep),
                                     decode=Parallel(tp=dec.tp, pp=dec.pp, dp=dec.dp, moe_ep=dec.ep),
                                     prefill_workers=pre.replicas, decode_workers=dec.replicas,
                                     isl_tokens=8000, osl_tokens=200, request_rate=rate))
        f = prep.prefill
        capacity = float(prefill_capacity(prefill_batching(f, shipped_params(), 8000.0), pre.replicas * f["dp"]))
        assert p.predicted.requests_per_s <= capacity * (1 + 1e-9), p
        if p.feasible:
            assert capacity >= rate and p.predicted.requests_per_s == pytest.approx(rate, rel=0.02)


def test_engines_beyond_a_node_are_whole_nodes_whatever_the_node_size():
    from planner.space import engine_sizes

    assert engine_sizes(1, 16, 8) == [1, 2, 4, 8, 16]
    assert engine_sizes(1, 16, 3) == [1, 2, 3, 6, 9, 12, 15]  # no 4 or 8: they split 3-GPU nodes unevenly
    assert engine_sizes(4, 16, 6) == [4, 6, 12]
    # Planned and rendered end to end: every engine spreads evenly over its nodes (an 8-GPU
    # engine on 3-GPU nodes made the Dynamo renderer fail).
    from planner.manifests.targets import TARGETS, render_target
    from planner.results import ProfilingResults

    result = plan(_request(model="meta-llama/Llama-3.1-70B-Instruct", gpus_per_node=3, max_gpus_per_engine=8,
                           ttft_ms=3000, itl_ms=80))
    assert result.feasible
    assert all(e.gpus <= 3 or e.gpus % 3 == 0 for p in result.candidates for e in p.engines)
    for target in TARGETS:
        manifests, _ = render_target(ProfilingResults.of(result), result.request, target)
        assert manifests, target


def test_an_aggregated_engine_serves_within_a_few_percent_of_its_most_clients():
    """With no load stated, an aggregated engine holds the clients within the SLA found between
    the search grid's points: a few percent more (a refined step) and one more client miss it."""
    from planner.sizing import REFINE_STEPS
    from profiler.model.config import Parallel, ServingConfig
    from profiler.model.estimate import estimate

    req = _request(total_gpus=8)
    step = 0.25 / (REFINE_STEPS + 1)  # the client grid's points are 25% apart
    for p in plan(req).candidates:
        if p.mode != "agg" or not p.feasible:
            continue
        e = p.engines[0]
        clients = p.predicted.concurrency / e.replicas
        more = estimate(ServingConfig(model=p.model, gpu=p.gpu, backend=p.backend, precision=p.precision,
                                      engine=Parallel(tp=e.tp, pp=e.pp, dp=e.dp, moe_ep=e.ep), replicas=1,
                                      isl_tokens=req.isl_tokens, osl_tokens=req.osl_tokens,
                                      concurrency=float(int(clients * (1 + step)) + 1)))
        assert more.ttft_ms > req.ttft_ms or more.itl_ms > req.itl_ms or more.saturated, (e.tag, clients)
