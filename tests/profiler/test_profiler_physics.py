"""Physics invariants of the offline performance model (pure and fast).

Each invariant is checked with the default parameters and with the shipped (fitted) ones:
it must follow from the model's structure, not from lucky parameter values.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from profiler.model.config import Parallel, ServingConfig
from profiler.model.errors import ModelError
from profiler.model.estimate import estimate, evaluate, prepare
from profiler.model.gpus import get_gpu
from profiler.model.params import default_params, shipped_params
from profiler.model.steps import _collectives, attention_pairs, decode_step_s, mixed_prefill_s, prefill_s

GIB = 2**30


@pytest.fixture(params=["default", "shipped"])
def params(request) -> dict[str, float]:
    return default_params() if request.param == "default" else shipped_params()


def config(**changes) -> ServingConfig:
    base = dict(model="meta-llama/Llama-3.1-70B", gpu="h100_sxm", engine=Parallel(tp=4),
                isl_tokens=2000, osl_tokens=500, concurrency=1)
    if "request_rate" in changes:
        base.pop("concurrency")
    return ServingConfig(**{**base, **changes})


def increasing(values: list[float]) -> bool:
    return all(b > a for a, b in zip(values, values[1:]))


def test_more_concurrency_more_throughput_and_higher_itl(params):
    runs = [estimate(config(concurrency=c), params=params) for c in (1, 2, 4, 8, 16, 32, 64, 128)]
    assert not any(r.saturated for r in runs)
    assert increasing([r.output_tok_s_per_gpu for r in runs])
    assert increasing([r.itl_ms for r in runs])
    assert increasing([r.decode_batch for r in runs])


def test_larger_batch_limit_more_throughput_and_higher_itl(params):
    runs = [estimate(config(concurrency=512, max_batch=b), params=params) for b in (4, 8, 16, 32, 64, 128)]
    assert increasing([r.output_tok_s_per_gpu for r in runs])
    assert increasing([r.itl_ms for r in runs])
    # the clients beyond the running batch wait for a slot: fewer slots, longer TTFT
    assert increasing([-r.ttft_ms for r in runs])


def _decode_step_ms(tp: int, batch: float, params) -> float:
    prep = prepare(config(precision="fp8", engine=Parallel(tp=tp)))
    return float(decode_step_s(prep.decode, params, batch, 2250.0)) * 1e3


def test_more_tp_lowers_decode_step_until_communication_dominates(params):
    # Within one 8-GPU NVLink node every doubling of TP shortens a decode step ...
    for batch in (1, 64):
        steps = [_decode_step_ms(tp, batch, params) for tp in (1, 2, 4, 8)]
        assert increasing(steps[::-1]), (batch, steps)
        # ... with diminishing returns (fixed per-step costs and all-reduces do not shrink).
        assert steps[3] > steps[0] / 8
    # An engine of 16 H100s spans two nodes: at a large batch the all-reduces over the
    # inter-node network cost more than the halved GEMMs save.
    assert _decode_step_ms(16, 256, params) > _decode_step_ms(8, 256, params)


def test_ttft_rises_with_load(params):
    rates = [estimate(config(request_rate=r), params=params) for r in (0.1, 0.5, 1.0, 2.0, 3.0)]
    assert not any(r.saturated for r in rates)
    assert increasing([r.ttft_ms for r in rates])
    assert increasing([r.ttft_p99_ms for r in rates])
    closed = [estimate(config(concurrency=c), params=params) for c in (1, 4, 16, 64, 256)]
    assert increasing([r.ttft_ms for r in closed])


def test_poisson_load_beyond_capacity_is_saturated(params):
    capacity = estimate(config(concurrency=100_000), params=params).requests_per_s
    over = estimate(config(request_rate=capacity * 3), params=params)
    assert over.saturated


def test_poisson_load_beyond_capacity_has_an_unbounded_ttft(params):
    """A rate above what the deployment serves has no steady state: its queue, and so every TTFT
    figure, grows without bound; a closed loop beyond it only waits for a slot (finite)."""
    capacity = estimate(config(concurrency=100_000), params=params).requests_per_s
    over = estimate(config(request_rate=capacity * 3), params=params)
    assert over.saturated and math.isinf(over.ttft_ms) and math.isinf(over.ttft_p90_ms)
    assert math.isinf(over.ttft_parts.queueing_ms) and math.isfinite(over.itl_ms)
    assert over.requests_per_s < capacity * 3
    closed = estimate(config(concurrency=100_000), params=params)
    assert closed.saturated and math.isfinite(closed.ttft_ms)
    under = estimate(config(request_rate=capacity * 0.5), params=params)
    assert math.isfinite(under.ttft_ms)


def test_mean_wait_above_its_p90_is_what_an_md1_queue_does():
    """A Poisson TTFT's mean may exceed its p90: when fewer than 10% of arrivals wait, the p90 wait
    is zero and the mean is not. An M/D/1 queue simulated (Lindley's recursion) does the same, and
    the model's p90 is at least its mean once enough arrivals wait."""
    from profiler.model.queueing import mdc_wait, wait_quantile

    rng = np.random.default_rng(0)
    service, rho = 0.2, 0.05  # s; a light load: about 5% of arrivals find the server busy
    gaps = rng.exponential(service / rho, 200_000)
    waits = np.zeros(gaps.size)
    for i in range(1, gaps.size):
        waits[i] = max(0.0, waits[i - 1] + service - gaps[i])
    assert (waits > 0).mean() < 0.1 and np.quantile(waits, 0.9) == 0 < waits.mean()
    mean, p_wait, _ = mdc_wait(rho / service, service, 1)
    assert p_wait < 0.1 and wait_quantile(mean, p_wait, 0.9) == 0 < mean
    assert mean == pytest.approx(waits.mean(), rel=0.1)
    for rate in (0.6, 2.0, 4.0):  # ρ from 0.12: more than ~11% wait
        mean, p_wait, _ = mdc_wait(rate, service, 1)
        assert wait_quantile(mean, p_wait, 0.9) >= mean > 0
    light = estimate(config(engine=Parallel(tp=8), request_rate=0.05))
    assert light.ttft_p90_ms == pytest.approx(light.ttft_ms - light.ttft_parts.queueing_ms, rel=1e-9)


def test_tail_quantiles_ordered(params):
    # p99 ≥ p90 always; the mean is not ordered against p90 in general (skewed waits).
    cases = [config(concurrency=c) for c in (1, 8, 64, 512)] + [config(request_rate=r) for r in (0.2, 1.0, 2.5)]
    cases.append(config(mode="disagg", engine=None, prefill=Parallel(tp=4), decode=Parallel(tp=4),
                        prefill_workers=2, decode_workers=1, concurrency=32))
    for case in cases:
        r = estimate(case, params=params)
        assert r.ttft_p99_ms >= r.ttft_p90_ms > 0, case
        assert r.ttft_ms > 0 and r.itl_ms > 0


def _disagg(**changes) -> ServingConfig:
    return config(mode="disagg", engine=None, prefill=Parallel(tp=4), decode=Parallel(tp=4), **changes)


def test_disaggregated_ttft_includes_kv_transfer(params):
    # At a light Poisson load the decode batch does not depend on TTFT, so changing only the
    # KV hand-off efficiency moves TTFT by exactly the change in transfer time:
    # ISL tokens × KV bytes per token / (link bytes/s × efficiency).
    cfg = _disagg(isl_tokens=8000, request_rate=0.05)
    prep = prepare(cfg)
    kv_bytes = cfg.isl_tokens * prep.prefill["kv_bytes_tok_total"]
    assert kv_bytes == 8000 * 80 * 2 * 8 * 128 * 2  # tokens × layers × (K, V) × kv heads × head dim × bf16
    slow, fast = dict(params, kv_transfer_eff=0.05), dict(params, kv_transfer_eff=0.5)
    t_slow, t_fast = estimate(cfg, params=slow).ttft_ms, estimate(cfg, params=fast).ttft_ms
    expected_ms = kv_bytes / prep.prefill["kv_transfer_bytes_s"] * (1 / 0.05 - 1 / 0.5) * 1e3
    assert t_slow - t_fast == pytest.approx(expected_ms, rel=1e-6)
    assert expected_ms > 1.0
    # aggregated serving hands nothing over
    agg = config(isl_tokens=8000, request_rate=0.05)
    assert estimate(agg, params=slow).ttft_ms == pytest.approx(estimate(agg, params=fast).ttft_ms, rel=1e-12)


def test_kv_handoff_leaves_over_the_prefilling_rank_links():
    # One request's KV cache lives on the attention rank that prefilled it, so it leaves over
    # that rank's tp × pp links (an H100 node's 50 GB/s per GPU); attention-DP ranks beside it do
    # not speed it up, a wider TP does.
    def link(prefill: Parallel) -> float:
        cfg = config(model="Qwen/Qwen3-30B-A3B", mode="disagg", engine=None,
                     prefill=prefill, decode=Parallel(tp=8))
        return prepare(cfg).prefill["kv_transfer_bytes_s"]

    assert link(Parallel(tp=1, dp=8, moe_ep=8)) == link(Parallel(tp=1, dp=1)) == 50e9
    assert link(Parallel(tp=8)) == 8 * link(Parallel(tp=1, dp=1))


def test_prefill_all_reduce_goes_through_the_switch_where_measured(params):
    # Llama-3.1-70B at TP8, 8,192 prompt tokens: 160 all-reduces of 8192 × 8192 bf16 values.
    # On H100 a prefill pass's all-reduce is switch-reduced: each GPU moves the 128 MiB message
    # once at 0.84 of its 450 GB/s link; decode's stay rings at the fitted link efficiency.
    # B200 has no such measurement: ring in both.
    tokens, message = 8192, 8192 * 8192 * 2
    h100 = prepare(config(gpu="h100_sxm", precision="fp8", engine=Parallel(tp=8))).prefill
    assert h100["allreduces"] == 160
    lat = params["coll_latency_us"] * 1e-6
    switch = 160 * (lat + message / (450e9 * 0.84))
    ring = 160 * (lat + message * 2 * 7 / 8 / (450e9 * params["eff_link"]))
    assert switch < ring
    assert _collectives(h100, params, tokens, large=True) == pytest.approx(switch, rel=1e-9)
    assert _collectives(h100, params, tokens) == pytest.approx(ring, rel=1e-9)
    b200 = prepare(config(gpu="b200_sxm", precision="fp8", engine=Parallel(tp=8))).prefill
    assert b200["switch_allreduce_bytes_s"] == 0
    assert _collectives(b200, params, tokens, large=True) == _collectives(b200, params, tokens)


def test_kv_capacity_llama_70b_h100_tp4_by_hand():
    # Llama-3.1-70B: 80 layers, hidden 8192, 64 query heads, 8 KV heads of dim 128,
    # MLP width 28672, vocabulary 128256, untied embeddings; bf16 weights and KV cache.
    layers, hidden, heads, kv_heads, head_dim, mlp, vocab = 80, 8192, 64, 8, 128, 28672, 128256
    tp, bf16 = 4, 2
    attention = layers * (2 * hidden * heads * head_dim + 2 * hidden * kv_heads * head_dim)  # q, o, k, v
    assert attention == 12_079_595_520
    mlp_params = layers * 3 * hidden * mlp  # gate, up, down
    assert mlp_params == 56_371_445_760
    embeddings = 2 * vocab * hidden  # input embedding + LM head
    weights = (attention + mlp_params + embeddings) * bf16 / tp  # bytes per GPU
    assert weights == 35_276_193_792  # 32.85 GiB
    # Activations, as the engine reserves them: a prefill chunk of 8192 tokens (vLLM's
    # default) × (the widest hidden buffer, 4 × hidden, + the LM-head logits shard) × bf16 × 2.
    chunk = 8192
    activations = chunk * (max(4 * hidden, 2 * mlp // tp) + vocab // tp) * bf16 * 2
    assert activations == 2_124_414_976  # 1.98 GiB
    # vLLM may use 90% of the 79.6 GiB an H100 reports, less 2 GiB outside its pool.
    assert get_gpu("H100").memory_gib == 79.6
    kv_pool = 79.6 * GIB * 0.9 - 2 * GIB - weights - activations
    # KV bytes per token on one GPU: the 8 KV heads split over 4 GPUs, 2 each.
    kv_per_token = layers * 2 * (kv_heads // tp) * head_dim * bf16
    assert kv_per_token == 81_920
    tokens = int(kv_pool / kv_per_token)
    assert tokens == 456_235

    mem = estimate(config(), params=default_params()).memory["engine"]
    assert mem.kv_capacity_tokens == tokens
    assert mem.weights_gib == pytest.approx(weights / GIB, rel=1e-12)
    assert mem.activations_gib == pytest.approx(activations / GIB, rel=1e-12)
    assert mem.kv_cache_gib == pytest.approx(kv_pool / GIB, rel=1e-12)
    # Sequences of this workload (ISL 2000, OSL 500) hold 2000 + 500/2 tokens on average.
    assert mem.max_sequences == 456_235 // 2250 == 202


def test_trtllm_admits_only_requests_whose_whole_output_fits():
    # TRT-LLM's default capacity policy reserves a request's prompt and all its output tokens
    # when it admits it; vLLM and SGLang count what a sequence holds on average. With long
    # outputs TRT-LLM therefore runs fewer sequences, and clients beyond them wait for a slot.
    long_out = dict(isl_tokens=1024, osl_tokens=8192, concurrency=256)
    for backend, held in (("trtllm", 1024 + 8192), ("vllm", 1024 + 4096), ("sglang", 1024 + 4096)):
        r = estimate(config(backend=backend, **long_out), params=default_params())
        mem = r.memory["engine"]
        assert mem.max_sequences == mem.kv_capacity_tokens // held, backend
        assert mem.max_sequences <= r.decode_batch < mem.max_sequences + 1, backend
    trt = estimate(config(backend="trtllm", **long_out), params=default_params())
    assert trt.ttft_parts.queueing_ms > 10 * trt.ttft_parts.prefill_ms
    # 200k + 400k tokens: 400k held on average fits the 504,511-token cache, 600k reserved does not.
    huge = dict(isl_tokens=200_000, osl_tokens=400_000)
    assert estimate(config(backend="vllm", **huge), params=default_params()).memory["engine"].max_sequences == 1
    with pytest.raises(ModelError, match="ISL \\+ OSL, what TRT-LLM reserves"):
        estimate(config(backend="trtllm", **huge), params=default_params())


def test_fp4_weights_without_fp4_tensor_cores_stream_4_bits_and_compute_in_bf16():
    # gpt-oss ships MXFP4 experts: a B200 runs them on its FP4 tensor cores; an H100 has none
    # and widens the weights to bf16 inside the GEMM, so it streams 4-bit weights but computes
    # at its bf16 peak (989 TFLOP/s), not at fp8's.
    moe = dict(model="openai/gpt-oss-20b", engine=Parallel(tp=1), precision="fp4")
    h100 = prepare(config(gpu="h100_sxm", **moe)).decode
    b200 = prepare(config(gpu="b200_sxm", **moe)).decode
    assert h100["peak_moe_flops"] == get_gpu("h100_sxm").tflops["bf16"] * 1e12
    assert b200["peak_moe_flops"] == get_gpu("b200_sxm").tflops["fp4"] * 1e12
    assert h100["weight_bytes_experts"] == b200["weight_bytes_experts"]


def test_prefill_chunk_defaults_to_each_engines_own():
    # vLLM and TRT-LLM take 8192 prompt tokens a step; SGLang sizes its chunked prefill by the
    # GPU's memory: 8192 on an H100 (79.6 GiB), 16384 on a B200 (179 GiB).
    chunks = {("vllm", "b200_sxm"): 8192, ("trtllm", "b200_sxm"): 8192, ("sglang", "h100_sxm"): 8192,
              ("sglang", "b200_sxm"): 16384}
    for (backend, gpu), chunk in chunks.items():
        assert prepare(config(backend=backend, gpu=gpu)).prefill["max_num_tokens"] == chunk, (backend, gpu)
    assert prepare(config(backend="sglang", gpu="b200_sxm", max_num_tokens=4096)).prefill["max_num_tokens"] == 4096


def test_running_sequences_stop_at_each_engines_default_limit():
    # Llama-3.1-8B with short requests: the KV cache holds far more sequences than any engine
    # runs by default, so the engine's own limit binds: vLLM's max_num_seqs is 1024 on an H100
    # but 256 on an A100 (and on GPUs under 70 GiB), TRT-LLM's max_batch_size 2048, SGLang's
    # request pool 2048. Clients beyond the limit wait for a slot.
    small = dict(model="meta-llama/Llama-3.1-8B", engine=Parallel(tp=1), isl_tokens=64, osl_tokens=64,
                 concurrency=4000)
    limits = {("vllm", "h100_sxm"): 1024, ("vllm", "a100_sxm"): 256, ("vllm", "l40s"): 256,
              ("trtllm", "h100_sxm"): 2048, ("sglang", "h100_sxm"): 2048}
    for (backend, gpu), limit in limits.items():
        r = estimate(ServingConfig(gpu=gpu, backend=backend, **small))
        assert r.memory["engine"].max_sequences == limit, (backend, gpu)
        assert r.decode_batch == pytest.approx(limit, rel=1e-6), (backend, gpu)
    # A limit the request sets wins over the engine's.
    r = estimate(ServingConfig(gpu="a100_sxm", backend="vllm", max_batch=100, **small))
    assert r.decode_batch == pytest.approx(100, rel=1e-6)


def test_memory_per_role_and_gpus_in_disagg():
    r = estimate(_disagg(prefill_workers=3, decode_workers=2, concurrency=16))
    assert set(r.memory) == {"prefill", "decode"}
    assert r.total_gpus == 3 * 4 + 2 * 4


def test_deterministic():
    cases = [config(concurrency=24), config(request_rate=1.5),
             _disagg(prefill_workers=2, decode_workers=1, concurrency=40),
             ServingConfig(model="deepseek-ai/DeepSeek-R1", gpu="b200", backend="sglang", precision="fp4",
                           engine=Parallel(tp=1, dp=8, moe_ep=8), isl_tokens=8192, osl_tokens=1024, concurrency=256)]
    for case in cases:
        first = estimate(case)
        assert estimate(case) == first
        assert estimate(case.model_copy()) == first
    # one configuration alone and the same configuration inside a batch agree
    batch = evaluate([prepare(c) for c in cases])
    for i, case in enumerate(cases):
        one = estimate(case)
        assert batch["ttft_ms"][i] == pytest.approx(one.ttft_ms, rel=1e-9)
        assert batch["itl_ms"][i] == pytest.approx(one.itl_ms, rel=1e-9)
        assert batch["output_tok_s_per_gpu"][i] == pytest.approx(one.output_tok_s_per_gpu, rel=1e-9)


def test_expert_all_to_all_crosses_nodes_once_per_node_reached():
    # DeepSeek-V3: 8 experts per token. Within one 8-GPU node nothing crosses nodes; over two
    # nodes a token crosses at most once (the other node holds one of its experts with
    # probability 1 - 0.5^8) while each expert copy inside the node goes over NVLink.
    one_node = prepare(ServingConfig(model="deepseek-ai/DeepSeek-V3", gpu="h200_sxm", precision="fp8",
                                     engine=Parallel(tp=1, dp=8, moe_ep=8), isl_tokens=1000, osl_tokens=100,
                                     concurrency=8)).decode
    two_nodes = prepare(ServingConfig(model="deepseek-ai/DeepSeek-V3", gpu="h200_sxm", precision="fp8",
                                      engine=Parallel(tp=1, dp=16, moe_ep=16), isl_tokens=1000, osl_tokens=100,
                                      concurrency=16)).decode
    assert one_node["alltoall_remote_bytes_tok"] == 0 and one_node["alltoall_bytes_tok"] > 0
    # Each MoE layer runs two all-to-alls, dispatch (fp8, 1 byte an element) and combine (bf16, 2):
    # each is charged their mean, a copy's bytes once (links are full duplex).
    assert two_nodes["alltoalls"] == 2 * 58  # DeepSeek-V3's 58 MoE layers
    per_copy = 7168 * (1.0 + 2.0) / 2
    assert two_nodes["alltoall_remote_bytes_tok"] == pytest.approx(per_copy * (1 - 0.5**8))
    assert two_nodes["alltoall_bytes_tok"] == pytest.approx(per_copy * 8 * 7 / 16)
    # The engine spans nodes but its TP group (1 GPU here; 4 below) does not: all-reduces stay on NVLink.
    tp4 = prepare(ServingConfig(model="deepseek-ai/DeepSeek-V3", gpu="h200_sxm", precision="fp8",
                                engine=Parallel(tp=4, dp=4, moe_ep=16), isl_tokens=1000, osl_tokens=100,
                                concurrency=16)).decode
    assert tp4["allreduce_link_bytes_s"] == tp4["nvlink_bytes_s"] > tp4["internode_bytes_s"]


def test_an_expert_all_to_all_pays_for_every_peer_it_exchanges_with(params):
    # Wide EP: each all-to-all (dispatch and combine, per MoE layer) signals every other GPU of
    # the EP group, so at one sequence per rank (bytes negligible) 72-way EP costs 71 peers'
    # worth per all-to-all where 8-way EP costs 7.
    base = dict(model="deepseek-ai/DeepSeek-R1", gpu="gb200", backend="trtllm", precision="fp4",
                isl_tokens=1000, osl_tokens=100)
    steps = {}
    for ep in (8, 72):
        f = prepare(ServingConfig(engine=Parallel(tp=1, dp=ep, moe_ep=ep), concurrency=ep, **base)).decode
        assert f["alltoalls"] == 2 * 58
        steps[ep] = float(decode_step_s(f, params, 1.0, 1050.0)) - float(decode_step_s(
            f, dict(params, peer_us=0.0), 1.0, 1050.0))
    for ep, extra in steps.items():
        assert extra == pytest.approx(2 * 58 * (ep - 1) * params["peer_us"] * 1e-6, rel=1e-6)


def test_trtllm_kv_pool_is_a_fraction_of_the_memory_left_free():
    # TRT-LLM's free_gpu_memory_fraction (0.9) applies to what is free after the weights and
    # activations are placed, not to the whole GPU as vLLM's gpu_memory_utilization does.
    vllm = estimate(config(), params=default_params()).memory["engine"]
    trt = estimate(config(backend="trtllm"), params=default_params()).memory["engine"]
    assert trt.weights_gib == pytest.approx(vllm.weights_gib, rel=1e-12)
    free = 79.6 - 2 - trt.weights_gib - trt.activations_gib  # GiB, as above: 2 GiB outside the pool
    assert trt.kv_cache_gib == pytest.approx(0.9 * free, rel=1e-12)
    # DeepSeek-R1 in fp8 on four B200s leaves ~20 GiB per GPU: a usable cache under TRT-LLM
    # (it serves 8k-token prompts at 32 clients), not the sliver 90% of the whole GPU leaves.
    tight = estimate(config(model="deepseek-ai/DeepSeek-R1", gpu="b200_sxm", backend="trtllm", precision="fp8",
                            isl_tokens=8192, osl_tokens=1024, concurrency=32), params=default_params())
    mem = tight.memory["engine"]
    assert mem.kv_cache_gib > 10
    assert mem.kv_capacity_tokens > 32 * (8192 + 1024)


def test_disaggregated_serving_serves_no_more_than_its_prefill_pool_prefills(params):
    # One TP1 prefill worker and eight decode workers of Llama-3.1-8B on 8000-token prompts:
    # decode could serve far more requests than one prefill GPU prefills, so the rate stops at
    # the prefill pool's capacity (passes of one prompt each, 8192-token passes: t1 per prompt),
    # every further client waits for prefill (Little's law: TTFT = C/X − decoding time), and a
    # Poisson rate beyond it queues without bound.
    from profiler.model.serving import batched_prefill, prefill_batching, prefill_capacity

    cfg = dict(model="meta-llama/Llama-3.1-8B", engine=None, prefill=Parallel(tp=1), decode=Parallel(tp=1),
               prefill_workers=1, decode_workers=8, isl_tokens=8000, osl_tokens=200)
    prep = prepare(config(mode="disagg", concurrency=1, **cfg))
    one, added, most, stages, together = (float(v) for v in prefill_batching(prep.prefill, params, 8000.0))
    assert most == 1 and stages == 1 and together == one  # one attention rank: nothing shared
    capacity = float(prefill_capacity((one, added, most, stages, together), 1.0))
    assert capacity == pytest.approx(1.0 / one, rel=1e-12)
    rates = []
    for clients in (64, 256):
        r = estimate(config(mode="disagg", concurrency=clients, **cfg), params=params)
        assert r.requests_per_s == pytest.approx(capacity, rel=1e-6) and r.saturated
        assert r.ttft_ms / 1e3 == pytest.approx(clients / r.requests_per_s - 199 * r.itl_ms / 1e3, rel=1e-6)
        rates.append(r.requests_per_s)
    below = estimate(config(mode="disagg", request_rate=0.8 * capacity, **cfg), params=params)
    beyond = estimate(config(mode="disagg", request_rate=1.5 * capacity, **cfg), params=params)
    assert not below.saturated and below.ttft_ms < 1e5
    assert beyond.saturated and beyond.ttft_ms == float("inf") and beyond.ttft_parts.queueing_ms == float("inf")
    # Where prompts share passes (each further prompt adding half a prompt's time), the capacity
    # is the rate at which batched_prefill's work per prompt keeps the server exactly busy: √2/t1.
    shared = (one, 0.5 * one, 8.0, 1.0, one)
    batched = float(prefill_capacity(shared, 1.0))
    assert batched == pytest.approx(2**0.5 / one, rel=1e-12)
    assert batched * float(batched_prefill(shared, batched, 1.0)[1]) == pytest.approx(1.0, rel=1e-12)


def test_a_closed_loops_wave_drains_an_attention_dp_prefill_engine_at_the_pace_of_shared_passes(params):
    # Disaggregated, clients returning together hold prompts on every attention rank of a prefill
    # engine at once, and the ranks' passes run every rank's tokens through the experts they share:
    # the burst wait is the one-rank figure times (pass with every rank prefilling) / (pass alone).
    from profiler.model.serving import batched_prefill, prefill_batching

    def deployment(prefill: Parallel, concurrency: int = 256) -> ServingConfig:
        return ServingConfig(model="deepseek-ai/DeepSeek-V3", gpu="b200_sxm", precision="fp8", mode="disagg",
                             prefill=prefill, decode=Parallel(tp=8, moe_ep=8), prefill_workers=1, decode_workers=2,
                             isl_tokens=1024, osl_tokens=1024, concurrency=concurrency)

    wide = deployment(Parallel(tp=1, dp=8, moe_ep=8))
    one_rank = prepare(deployment(Parallel(tp=8, moe_ep=8))).prefill
    t1, *_, together = (float(v) for v in prefill_batching(one_rank, params, 1024.0))
    assert together == t1  # one attention rank shares nothing
    prep = prepare(wide)
    pf = prefill_batching(prep.prefill, params, 1024.0)
    t1, together = float(pf[0]), float(pf[4])
    assert together > 1.2 * t1  # eight ranks' tokens through the experts: a longer pass
    r = estimate(wide, params=params)
    servers = 8.0  # one engine's attention ranks
    per_prompt = float(batched_prefill(pf, r.requests_per_s, servers)[1])
    expected_ms = params["disagg_burst"] * (256 / servers - 1) * per_prompt * together / t1 * 1e3
    assert r.ttft_parts.burst_ms == pytest.approx(expected_ms, rel=1e-6)
    # no wave when the clients are no more than the ranks
    assert estimate(deployment(Parallel(tp=1, dp=8, moe_ep=8), concurrency=8), params=params).ttft_parts.burst_ms == 0


def test_prompts_arriving_together_share_prefill_passes(params):
    # Under a Poisson load the first token's prefill pass grows with the prompts that join it,
    # but the prefill work per prompt falls: the queue saturates at a far higher rate than
    # prompts prefilled one at a time would allow (MoE experts see more tokens per pass).
    from profiler.model.serving import batched_prefill, prefill_batching

    prep = prepare(config(model="Qwen/Qwen3-30B-A3B", engine=Parallel(tp=1), isl_tokens=1000, osl_tokens=200))
    pf = prefill_batching(prep.prefill, params, 1000.0)
    one, added, most, stages, _ = (float(v) for v in pf)
    assert most == 8 and stages == 1  # 8192-token passes hold eight 1000-token prompts
    assert 0 < added < one
    slow, fast = 0.05 / one, 20.0 / one  # prompts/s: a twentieth of one-at-a-time capacity, and 20× it
    pass_slow, per_slow = (float(v) for v in batched_prefill(pf, slow, 1.0))
    pass_fast, per_fast = (float(v) for v in batched_prefill(pf, fast, 1.0))
    assert pass_slow < pass_fast and per_fast < per_slow < one
    assert per_fast == pytest.approx((one + added * (most - 1)) / most)  # full passes at most


def test_attention_dp_ranks_sharing_tp_split_experts_pay_for_gathering_every_ranks_tokens(params):
    # 16 attention-DP ranks with the experts split 16 ways by TP (moe_ep 1) must bring every
    # rank's tokens to every GPU; with the experts spread by EP 16 each token goes only to its
    # experts' GPUs. The gather costs more, and more so as the batch grows.
    base = dict(model="deepseek-ai/DeepSeek-V3", gpu="b200_sxm", backend="sglang", precision="fp8",
                isl_tokens=1024, osl_tokens=1024)
    tp_split = prepare(ServingConfig(engine=Parallel(tp=1, dp=16, moe_ep=1), concurrency=64, **base))
    ep_split = prepare(ServingConfig(engine=Parallel(tp=1, dp=16, moe_ep=16), concurrency=64, **base))
    assert tp_split.decode["gathers"] == 58 and ep_split.decode["gathers"] == 0
    assert tp_split.decode["gather_bytes_tok"] == 7168 * 2 * 2 * 15  # hidden × bf16 × both ways × other ranks
    small = [float(decode_step_s(x.decode, params, 4.0, 1536.0)) for x in (tp_split, ep_split)]
    large = [float(decode_step_s(x.decode, params, 64.0, 1536.0)) for x in (tp_split, ep_split)]
    assert small[0] > small[1] and large[0] - large[1] > small[0] - small[1]


def test_attention_dp_ranks_carry_their_prompts_in_the_same_iterations(params):
    # Every attention-DP rank receives prompts at the same rate, so each rides its own chunk in
    # the same decode iterations and the experts the ranks share run all their prompt tokens: a
    # prompt adds more to an iteration of 8 ranks than to one rank's alone, by the other seven
    # ranks' prompts' expert work. Without experts (their FLOPs and weights zeroed) it adds the same.
    base = dict(model="deepseek-ai/DeepSeek-R1", gpu="b200_sxm", backend="vllm", precision="fp4",
                isl_tokens=2048, osl_tokens=512)
    ranks = prepare(ServingConfig(engine=Parallel(tp=1, dp=8, moe_ep=8), concurrency=64, **base)).decode
    alone = dict(ranks, dp=1.0)
    added = lambda f: float(mixed_prefill_s(f, params, 8.0, 2048.0, 1.0))  # noqa: E731
    assert added(ranks) > 1.05 * added(alone)
    no_experts = lambda f: dict(f, flops_moe_tok=0.0, weight_bytes_experts=0.0)  # noqa: E731
    assert added(no_experts(ranks)) == pytest.approx(added(no_experts(alone)), rel=1e-9)


def test_linear_attention_state_takes_kv_room_and_is_read_and_written_every_decode_step(params):
    # Qwen3.5-397B-A17B: 45 gated-DeltaNet layers, each keeping 64 value heads × 128 × 128 of
    # recurrent state plus a 3-token convolution window over q, k (16 heads of 128) and v
    # (64 heads of 128), in fp32, split over TP 4.
    state = 45 * (64 * 128 * 128 + (2 * 16 * 128 + 64 * 128) * 3) * 4 / 4
    assert state == 48_844_800  # bytes per sequence per GPU (46.6 MiB)
    base = dict(model="Qwen/Qwen3.5-397B-A17B", gpu="b200_sxm", backend="sglang", precision="fp8",
                isl_tokens=1024, osl_tokens=1024, concurrency=64)
    prep = prepare(ServingConfig(engine=Parallel(tp=4, moe_ep=1), **base))
    assert prep.decode["state_bytes_seq"] == state
    kv_token = prep.decode["kv_bytes_tok"]
    mem = estimate(ServingConfig(engine=Parallel(tp=4, moe_ep=1), **base), params=params).memory["engine"]
    # At the mean context of 1024 + 1024/2 tokens, each sequence also keeps its state (SGLang's
    # request pool allows 2048 running sequences a rank).
    assert mem.max_sequences == int(min(2048, mem.kv_capacity_tokens / (1536 + state / kv_token)))
    # Each extra sequence reads and writes its state once per step, on top of its KV reads.
    without = dict(prep.decode, state_bytes_seq=0.0)
    step = [float(decode_step_s(f, params, 64.0, 1536.0)) for f in (prep.decode, without)]
    assert step[0] - step[1] == pytest.approx(64 * 2 * state / (get_gpu("b200_sxm").hbm_gb_s * 1e9 * params["eff_kv"]), rel=1e-6)


def test_sparse_attention_attends_to_the_keys_its_indexer_picks(params):
    # GLM-5 (DeepSeek sparse attention): each query attends to at most 2,048 keys, picked by
    # an indexer that scores every key. Up to 2,048 tokens nothing is skipped; beyond, the
    # attention pairs of an 8,192-token prompt fall from 8192²/2 to 2048²/2 + 6144 × 2048.
    base = dict(model="zai-org/GLM-5", gpu="b200_sxm", backend="sglang", precision="fp8",
                osl_tokens=1024, concurrency=1, engine=Parallel(tp=8, moe_ep=1))
    short, long = (prepare(ServingConfig(isl_tokens=n, **base)).prefill for n in (2048, 8192))
    assert long["attn_topk"] == 2048
    assert float(attention_pairs(long, 8192.0)) == 2048**2 / 2 + 6144 * 2048
    assert float(attention_pairs(short, 2048.0)) == 2048**2 / 2
    dense = dict(long, attn_topk=0)
    assert float(attention_pairs(dense, 8192.0)) == 8192**2 / 2
    assert float(prefill_s(long, params, 8192.0)) < float(prefill_s(dense, params, 8192.0))
    assert float(prefill_s(short, params, 2048.0)) == pytest.approx(float(prefill_s(dict(short, attn_topk=0), params, 2048.0)))
    # Decode reads the picked keys' latents and every key's indexer entry.
    at = [float(decode_step_s(f, params, 32.0, 16384.0)) for f in (long, dense)]
    assert at[0] < at[1]


def test_skewed_routing_touches_fewer_experts_at_small_batches(params):
    # With routing less even than uniform (routing_spread < 1) a small batch streams fewer
    # distinct experts; a batch large enough to touch every expert streams them all anyway.
    base = dict(model="deepseek-ai/DeepSeek-V3", gpu="b200_sxm", backend="sglang", precision="fp8",
                isl_tokens=1024, osl_tokens=1024, concurrency=8)
    f = prepare(ServingConfig(engine=Parallel(tp=8, moe_ep=8), **base)).decode
    even, skewed = dict(params, routing_spread=1.0), dict(params, routing_spread=0.5)
    small = [float(decode_step_s(f, p, 4.0, 1536.0)) for p in (even, skewed)]
    huge = [float(decode_step_s(f, p, 4096.0, 1536.0)) for p in (even, skewed)]
    assert small[1] < 0.99 * small[0]
    assert huge[1] == pytest.approx(huge[0], rel=1e-3)


def test_narrow_tp_shards_of_a_gemm_run_less_efficiently(params):
    # DeepSeek-V3's experts (2,048 wide) split by TP 8 leave each GPU 256 output columns of
    # every expert; whole experts (EP 8) keep 2,048. The same prefill FLOPs take longer on the
    # narrow shards (their all-to-all and gathers set aside here).
    base = dict(model="deepseek-ai/DeepSeek-V3", gpu="b200_sxm", backend="trtllm", precision="fp8",
                isl_tokens=8192, osl_tokens=1024, concurrency=1)
    narrow = prepare(ServingConfig(engine=Parallel(tp=8, moe_ep=1), **base)).prefill
    whole = prepare(ServingConfig(engine=Parallel(tp=8, moe_ep=8), **base)).prefill
    assert (narrow["expert_width"], whole["expert_width"]) == (256, 2048)
    assert narrow["flops_moe_tok"] == pytest.approx(whole["flops_moe_tok"])
    quiet = dict(params, coll_latency_us=1e-9, eff_link=1e9)
    assert float(prefill_s(narrow, quiet, 8192.0)) > float(prefill_s(whole, quiet, 8192.0))


def test_mla_prefill_attention_runs_at_its_own_efficiency(params):
    # MLA (DeepSeek) prefills with its own attention kernels; GQA models (Llama) with theirs.
    # Halving one efficiency lengthens only the prefills of its kind of attention.
    def prefill(model: str, p: dict) -> float:
        config = ServingConfig(model=model, gpu="h200_sxm", backend="sglang", isl_tokens=8192, osl_tokens=256,
                               concurrency=1, engine=Parallel(tp=8))
        return float(prefill_s(prepare(config).prefill, p, 8192.0))

    slower_mla = dict(params, eff_attn_mla=params["eff_attn_mla"] / 2)
    slower_gqa = dict(params, eff_attn=params["eff_attn"] / 2)
    deepseek, llama = "deepseek-ai/DeepSeek-V3", "meta-llama/Llama-3.1-70B-Instruct"
    assert prefill(deepseek, slower_mla) > 1.05 * prefill(deepseek, params)
    assert prefill(deepseek, slower_gqa) == pytest.approx(prefill(deepseek, params))
    assert prefill(llama, slower_gqa) > 1.05 * prefill(llama, params)
    assert prefill(llama, slower_mla) == pytest.approx(prefill(llama, params))


def test_blackwell_ultra_speeds_up_softmax_bound_attention_only(params):
    # B300's doubled softmax units speed up attention (prefill, and MLA decode's latent
    # attention) over B200's; GEMMs and GQA decode, which read memory, gain nothing from them.
    assert get_gpu("b300_sxm").attention_speedup > 1.0 == get_gpu("b200_sxm").attention_speedup

    def shape(model: str) -> tuple[dict, dict]:
        config = ServingConfig(model=model, gpu="b300_sxm", backend="trtllm", isl_tokens=8192, osl_tokens=256,
                               concurrency=1, engine=Parallel(tp=8))
        ultra = prepare(config).prefill
        return ultra, dict(ultra, attn_speed=1.0)

    for model in ("deepseek-ai/DeepSeek-V3", "meta-llama/Llama-3.1-70B-Instruct"):
        ultra, plain = shape(model)
        assert prefill_s(ultra, params, 8192.0) < prefill_s(plain, params, 8192.0)
    ultra, plain = shape("deepseek-ai/DeepSeek-V3")
    assert decode_step_s(ultra, params, 64, 8192.0) < decode_step_s(plain, params, 64, 8192.0)
    ultra, plain = shape("meta-llama/Llama-3.1-70B-Instruct")
    assert decode_step_s(ultra, params, 64, 8192.0) == pytest.approx(decode_step_s(plain, params, 64, 8192.0))


def test_speculative_decoding_pays_off_with_acceptance_and_less_at_large_batches(params):
    """Drafting k tokens a step and verifying them in one pass emits up to (1 − a^(k+1))/(1 − a)
    tokens per step for about one pass's weight reads, so at a small batch the ITL falls, by less
    than that factor (the drafts and the verified tokens' math cost something); with almost
    nothing accepted it rises; and as the batch grows the verify pass turns compute-bound and
    the gain shrinks. TTFT is barely touched."""
    def itl(c, **spec):
        return estimate(config(concurrency=c, isl_tokens=1000, osl_tokens=1000, **spec), params=params).itl_ms

    accepted = (1 - 0.8 ** 3) / (1 - 0.8)  # k = 2, a = 0.8: 2.44 tokens a step
    small = itl(1) / itl(1, spec_tokens=2, spec_acceptance=0.8)
    assert 1.3 < small < accepted
    assert itl(1, spec_tokens=3, spec_acceptance=0.02) > itl(1)
    assert itl(256) / itl(256, spec_tokens=2, spec_acceptance=0.8) < small
    plain = estimate(config(concurrency=1), params=params)
    spec = estimate(config(concurrency=1, spec_tokens=2, spec_acceptance=0.8), params=params)
    assert spec.ttft_ms == pytest.approx(plain.ttft_ms, rel=0.05)
    assert spec.itl_parts.decode_step_ms + spec.itl_parts.prefill_interference_ms == pytest.approx(spec.itl_ms)


def test_speculative_decoding_off_is_the_model_without_it(params):
    assert estimate(config(concurrency=8, spec_tokens=0), params=params) == estimate(config(concurrency=8), params=params)


def test_pipeline_stages_hand_off_over_the_link_between_them():
    # Stages are placed in order: an 8-GPU H100 node holds two TP4 stages (one NVLink hand-off),
    # a TP8 stage fills it (the hand-off of a two-node PP2 engine crosses nodes), a node holds
    # four TP2 stages (a PP8 engine: six hand-offs inside nodes, one between); a GB200 NVL72
    # domain holds nine TP8 stages.
    from profiler.model.engine import _stage_boundaries

    assert _stage_boundaries(4, 2, 8) == (1, 0)
    assert _stage_boundaries(8, 2, 8) == (0, 1)
    assert _stage_boundaries(2, 8, 8) == (6, 1)
    assert _stage_boundaries(8, 4, 72) == (3, 0)
    assert _stage_boundaries(16, 3, 8) == (0, 2)
    assert _stage_boundaries(4, 1, 8) == (0, 0)
    # Llama-3.1-405B at TP8 PP2 on H100: each decoded token's hidden state (16384 × bf16)
    # crosses the inter-node link once per step.
    prep = prepare(config(model="meta-llama/Llama-3.1-405B", precision="fp8", engine=Parallel(tp=8, pp=2)))
    f = prep.decode
    assert (f["stage_sends_local"], f["stage_sends_remote"], f["stage_send_bytes_tok"]) == (0, 1, 16384 * 2)
    p = default_params()
    alone = dict(f, stage_sends_remote=0)
    link = get_gpu("h100_sxm").internode_gb_s * 1e9 * p["eff_link"]
    assert float(decode_step_s(f, p, 1.0, 2250.0) - decode_step_s(alone, p, 1.0, 2250.0)) == pytest.approx(
        p["coll_latency_us"] * 1e-6 + 16384 * 2 / link, rel=1e-9)


def test_pipeline_runs_micro_batches_and_overlaps_prefill_chunks(params):
    # Decode: a PP2 engine runs its 64 sequences as two micro-batches of 32, so a token takes two
    # stage times of 32 sequences (weights and those sequences' KV), plus the hand-off, plus the
    # step's fixed costs for all 64 (per-sequence scheduling included).
    prep = prepare(config(engine=Parallel(tp=4, pp=2), isl_tokens=4096, osl_tokens=512))
    f = prep.decode
    one_stage = dict(f, pp=1.0, stage_sends_local=0, stage_sends_remote=0)

    def fixed(b):
        return (params["step_ms_vllm"] * 1e-3 + params["seq_us"] * 1e-6 * b
                + params["layer_us"] * 1e-6 * f["num_layers"])

    from profiler.model.steps import _stage_sends_s, micro_batch

    assert float(micro_batch(f, 64.0)) == 32.0 and float(micro_batch(f, 1.0)) == 1.0
    stage = float(decode_step_s(one_stage, params, 32.0, 4352.0)) - fixed(32)
    expected = 2 * stage + float(_stage_sends_s(f, params, 32.0)) + fixed(64)
    assert float(decode_step_s(f, params, 64.0, 4352.0)) == pytest.approx(expected, rel=1e-9)
    # Prefill: a 32k-token prompt is four 8192-token chunks; the second stage works on chunk k
    # while the first does chunk k + 1, so the prompt takes 1 + 1/4 of the stages' work instead
    # of 2 (a one-chunk prompt gets no overlap: both stages back to back).
    for isl, chunks in ((32768, 4), (8192, 1)):
        both = float(prefill_s(f, params, float(isl)))
        extra = float(_stage_sends_s(f, params, isl / chunks)) + chunks * (
            params["step_ms_vllm"] * 1e-3 + params["prefill_layer_us"] * 1e-6 * f["num_layers"])
        stages = float(prefill_s(one_stage, params, float(isl))) - chunks * (
            params["step_ms_vllm"] * 1e-3 + params["prefill_layer_us"] * 1e-6 * f["num_layers"])
        assert both == pytest.approx(stages * (1 + 1 / chunks) + extra, rel=1e-9)
    # Queueing: a prompt holds the pipeline's first stage for half its pass, so the engine
    # starts a new pass twice as often as the pass takes: twice the prefill capacity.
    from profiler.model.serving import batched_prefill, prefill_batching, prefill_capacity

    pf = prefill_batching(f, params, 1024.0)
    t1, added, most, stages, together = (float(v) for v in pf)
    assert stages == 2
    assert float(prefill_capacity(pf, 1.0)) == pytest.approx(
        2 * float(prefill_capacity((t1, added, most, 1.0, together), 1.0)))
    t_pass, work = (float(v) for v in batched_prefill(pf, 1e-9, 1.0))
    assert t_pass == pytest.approx(t1) and work == pytest.approx(t1 / 2)


def test_trtllm_attention_dp_engines_hold_prompts_until_their_ranks_prefill_together(params):
    # TRT-LLM's attention-DP balancing holds a prompt (at most dp_hold_iters_trtllm decode
    # iterations) while every rank is decoding; vLLM and SGLang prefill each rank's prompts as
    # they come, and a disaggregated decode pool prefills nothing.
    base = dict(model="deepseek-ai/DeepSeek-V3", gpu="b200_sxm", precision="fp8", isl_tokens=1024,
                osl_tokens=1024, engine=Parallel(tp=1, dp=8, moe_ep=8))
    busy, idle = 512, 2  # clients: 64 sequences per rank, or most ranks without any
    trt = estimate(ServingConfig(backend="trtllm", concurrency=busy, **base), params=params)
    hold = trt.ttft_parts.queueing_ms
    step = trt.itl_parts.decode_step_ms
    # Every rank busy: the shorter of the timeout and the time until all 8 ranks got a prompt.
    all_ranks_ms = sum(1 / k for k in range(1, 9)) * 8 / trt.requests_per_s * 1e3
    assert hold == pytest.approx(min(params["dp_hold_iters_trtllm"] * step, all_ranks_ms), rel=2e-3)
    assert hold > 100.0
    assert sum(trt.ttft_parts.model_dump().values()) == pytest.approx(trt.ttft_ms)
    quiet = estimate(ServingConfig(backend="trtllm", concurrency=idle, **base), params=params)
    assert quiet.ttft_parts.queueing_ms < 0.01 * hold
    for backend in ("vllm", "sglang"):
        other = estimate(ServingConfig(backend=backend, concurrency=busy, **base), params=params)
        assert other.ttft_parts.queueing_ms == 0.0
    no_dp = dict(base, engine=Parallel(tp=8, moe_ep=8))
    assert estimate(ServingConfig(backend="trtllm", concurrency=busy, **no_dp), params=params).ttft_parts.queueing_ms == 0.0
    disagg = estimate(ServingConfig(backend="trtllm", mode="disagg", concurrency=busy, prefill=Parallel(tp=8, moe_ep=8),
                                    decode=base["engine"], prefill_workers=2, decode_workers=1,
                                    **{k: v for k, v in base.items() if k != "engine"}), params=params)
    assert disagg.ttft_parts.queueing_ms < 0.01 * hold


def test_a_decode_limit_below_one_per_attention_rank_is_a_wait_not_an_error(params):
    # The data's TP-16 decode engines on H100 are read as attention TP 8 × DP 2 (TP stays in the
    # 8-GPU NVLink domain); a recipe's max_batch_size of 1 for such an engine is half a sequence per rank,
    # which fits any KV cache: it must be estimated, and the clients beyond it wait for the slot.
    def disagg(limit):
        return ServingConfig(model="deepseek-ai/DeepSeek-V3", gpu="h100_sxm", backend="trtllm", precision="fp8",
                             mode="disagg", prefill=Parallel(dp=16, moe_ep=16), decode=Parallel(tp=8, dp=2, moe_ep=16),
                             prefill_workers=1, decode_workers=3, isl_tokens=1024, osl_tokens=1024, concurrency=6,
                             max_batch=limit)
    limited, free = estimate(disagg(1), params=params), estimate(disagg(None), params=params)
    assert limited.decode_batch < free.decode_batch
    # three slots for six clients: each request waits about one other's whole decode for a slot
    assert limited.ttft_ms - free.ttft_ms > 0.5 * 1024 * limited.itl_ms
