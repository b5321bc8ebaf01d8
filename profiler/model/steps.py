"""Step times of an engine: one decode iteration and one prefill, in seconds.

Works element-wise on floats or numpy arrays: ``f`` maps EngineShape field names to
values (one per configuration) and ``p`` maps parameter names to fitted values.

Decode (memory-bound): each step streams the GPU's dense weights and the experts its
tokens touch, reads every running sequence's KV cache (and reads and writes its
linear-attention state), and does 2 FLOPs per parameter
per token; GEMM time is the soft maximum of compute and weight-streaming time.
Prefill (compute-bound): linear FLOPs grow with tokens, attention FLOPs with tokens ×
context (causal, so ISL²/2 pairs per request). Sparse attention (DeepSeek-V3.2, GLM-5) reads
and multiplies only the keys its indexer picks, the indexer itself scoring every key.
"""

from __future__ import annotations

import numpy as np

_SOFTMAX_POWER = 4.0
# Hottest GPU's expert load over the mean under real routing (EP imbalance); a fixed physical
# figure rather than a fitted one: fitted freely it absorbs unrelated costs and stops generalizing.
MOE_IMBALANCE = 1.2


def soft_max(a, b):
    """Smooth maximum of two positive times; within 19% of max(a, b) and differentiable."""
    return (a**_SOFTMAX_POWER + b**_SOFTMAX_POWER) ** (1.0 / _SOFTMAX_POWER)


def gemm_efficiency(tokens, peak_eff, half_tokens):
    """Fraction of peak FLOP/s a GEMM with ``tokens`` rows reaches (saturating in tokens)."""
    return peak_eff * tokens / (tokens + half_tokens)


def narrow_factor(width, p):
    """Efficiency factor of a GEMM whose output keeps ``width`` columns on each GPU (narrow TP shards)."""
    return width / (width + p["gemm_half_width"])


# Element-wise helpers that take the plain path on one configuration's numpy scalars, where
# numpy's ufunc machinery costs 1-3 us a call (most of one estimate's time). ``b`` is never NaN.
def choose(flag, yes, no):
    """``yes`` where ``flag`` holds, else ``no`` (``np.where``)."""
    if type(flag) is np.ndarray:
        return np.where(flag, yes, no)
    return yes if flag else no


def vmax(a, b):
    """Element-wise maximum (``np.maximum``)."""
    if type(a) is np.ndarray or type(b) is np.ndarray:
        return np.maximum(a, b)
    return b if b > a else a


def vmin(a, b):
    """Element-wise minimum (``np.minimum``)."""
    if type(a) is np.ndarray or type(b) is np.ndarray:
        return np.minimum(a, b)
    return b if b < a else a


def on_amd(f, amd, nvidia):
    """``amd`` on AMD GPUs, ``nvidia`` on the others (element-wise over configurations)."""
    return choose(f["cdna"] > 0, amd, nvidia)


def decode_layer_us(f, p):
    """Fixed cost (µs) of one transformer layer in a decode step: the gaps between its
    graph-captured kernels. ROCm's differ by Instinct generation (each has its own kernel
    builds: AITER's MLA and fused-MoE kernels for gfx942 and gfx950), so CDNA3 and CDNA4 have a
    parameter each; NVIDIA GPUs share ``layer_us``."""
    return choose(f["cdna"] == 3, p["cdna3_layer_us"], choose(f["cdna"] == 4, p["cdna4_layer_us"], p["layer_us"]))


def gemm_share(f, p):
    """Share of the fitted GEMM efficiencies a GPU's kernels reach: 1 on NVIDIA GPUs, the
    fitted ``amd_gemm_share`` on AMD ones (ROCm's hipBLASLt and AITER kernels on the same
    datasheet peak)."""
    return on_amd(f, p["amd_gemm_share"], 1.0)


def _eff_for(f, p, key: str):
    return choose(f[key] == 2, p["eff_fp4"], p["eff_gemm"]) * gemm_share(f, p)


BACKENDS = ("vllm", "sglang", "trtllm")  # ``f["backend"]`` is the index in this tuple


def by_backend(f, p, name: str):
    """The parameter ``<name>_<backend>`` of each configuration's backend."""
    code = f["backend"]
    if type(code) is not np.ndarray:
        return p[f"{name}_{BACKENDS[int(code)]}"]
    return np.where(code == 0, p[f"{name}_vllm"], np.where(code == 1, p[f"{name}_sglang"], p[f"{name}_trtllm"]))


def step_overhead_s(f, p):
    """Framework time per engine step (s), by backend."""
    return by_backend(f, p, "step_ms") * 1e-3


def _link(f, p):
    """(fixed cost of one collective in s, fraction of the link bandwidth it reaches) on the
    engine's GPUs: NVLink's fitted pair, or on AMD GPUs that of RCCL and AITER over xGMI."""
    return (on_amd(f, p["amd_coll_latency_us"], p["coll_latency_us"]) * 1e-6,
            on_amd(f, p["amd_link_eff"], p["eff_link"]))


def _collectives(f, p, tokens, large=False):
    """Time (s) of the engine's all-reduces and all-to-alls for ``tokens`` tokens per attention rank.

    The TP all-reduce moves every token: as a ring, each GPU sends 2(tp − 1)/tp of the message
    at the fitted link efficiency (decode's small messages, which engines all-reduce with kernels
    of their own); a ``large`` one (a prefill pass's) goes through the NVSwitch where its
    reduction was measured (NVLS: each GPU sends the message once), whichever is faster.
    For the expert all-to-all the rank's TP GPUs split its
    tokens, and bytes to GPUs of the same node and to other nodes go over their own links;
    attention-DP ranks sharing TP-split experts gather every rank's tokens. Each all-to-all
    and gather also pays ``peer_us`` for every other GPU of its group (signals and small
    messages), which is what makes wide EP's exchanges slow at small batches.
    """
    lat, eff = _link(f, p)
    moved = tokens * f["allreduce_bytes_tok"] / (f["allreduce_link_bytes_s"] * eff)  # as a ring
    if large:
        measured = f["switch_allreduce_bytes_s"] > 0
        switch = tokens * f["allreduce_msg_bytes_tok"] / choose(measured, f["switch_allreduce_bytes_s"], 1.0)
        moved = choose(measured, vmin(moved, switch), moved)
    ar = f["allreduces"] * (lat + moved)
    per_gpu = tokens / f["tp"]
    peer = on_amd(f, p["amd_peer_us"], p["peer_us"]) * 1e-6
    a2a = f["alltoalls"] * (lat + peer * (f["moe_ep"] - 1.0) + per_gpu * (f["alltoall_bytes_tok"] / (f["nvlink_bytes_s"] * eff)
                                             + f["alltoall_remote_bytes_tok"] / (f["internode_bytes_s"] * eff)))
    gather = f["gathers"] * (lat + peer * (f["dp"] - 1.0) + tokens * f["gather_bytes_tok"] / (f["gather_link_bytes_s"] * eff))
    return ar + a2a + gather


def _stage_sends_s(f, p, tokens):
    """Time (s) for ``tokens`` tokens' hidden states to cross every pipeline-stage boundary once
    (zero without pipeline parallelism): over NVLink inside the scale-up domain, the
    inter-node link between domains."""
    lat, eff = _link(f, p)
    size = tokens * f["stage_send_bytes_tok"]
    return (f["stage_sends_local"] * (lat + size / (f["nvlink_bytes_s"] * eff))
            + f["stage_sends_remote"] * (lat + size / (f["internode_bytes_s"] * eff)))


def micro_batch(f, batch_rank):
    """Sequences per pipeline micro-batch: with pp stages the batch runs as pp micro-batches,
    one per stage at a time (at least one sequence each while there are sequences: fewer than
    pp sequences leave stages idle); without pipelining, the whole batch."""
    return choose(f["pp"] > 1, vmax(batch_rank / f["pp"], vmin(batch_rank, 1.0)), batch_rank)


def hbm_share(f, p):
    """Share of the fitted HBM efficiencies (weight streaming, KV reads) a GPU reaches: 1 on
    NVIDIA GPUs, ``amd_hbm_share`` on AMD ones."""
    return on_amd(f, p["amd_hbm_share"], 1.0)


def attention_share(f, p):
    """Share of the fitted attention efficiencies (prefill attention, MLA decode, the sparse
    indexer) a GPU's kernels reach: 1 on NVIDIA GPUs, ``amd_attn_share`` on AMD ones (AITER)."""
    return on_amd(f, p["amd_attn_share"], 1.0)


def _linear_time(f, p, tokens_rank, tokens_engine, sampled):
    """GEMM time (s): compute for ``tokens_rank`` tokens on this rank, experts fed by the whole
    engine, the LM head for the ``sampled`` tokens among them.

    Attention projections run in the attention precision, MLPs and experts in the MLP compute
    dtype (fp4 checkpoints: fp4 MLPs, fp8 attention), the LM head in bf16."""
    dense_eff = gemm_efficiency(tokens_rank, _eff_for(f, p, "dense_dtype"), p["gemm_half_tokens"]) * narrow_factor(f["attn_width"], p)
    mlp_eff = gemm_efficiency(tokens_rank, _eff_for(f, p, "moe_dtype"), p["gemm_half_tokens"]) * narrow_factor(f["mlp_width"], p)
    experts = vmax(f["num_experts"], 1)
    picks = tokens_engine * f["experts_per_token"] / experts  # expert picks per expert, on average
    touched = choose(f["num_experts"] > 0, -np.expm1(-p["routing_spread"] * picks), 0.0)
    # Only the experts a batch touches run, each on its own tokens (at least one).
    per_expert = picks / vmax(touched, 1e-9)
    moe_eff = gemm_efficiency(vmax(per_expert, 1e-3), _eff_for(f, p, "moe_dtype") * p["expert_gemm_share"],
                              p["expert_half_tokens"]) * narrow_factor(f["expert_width"], p)
    compute = (tokens_rank * f["flops_dense_tok"] / (f["peak_dense_flops"] * dense_eff)
               + sampled * f["flops_head_tok"] / (f["peak_attn_flops"] * gemm_share(f, p)
                                                  * gemm_efficiency(sampled, p["eff_gemm"], p["gemm_half_tokens"]))
               + tokens_rank * f["flops_mlp_tok"] / (f["peak_moe_flops"] * mlp_eff)
               + tokens_engine * f["flops_moe_tok"] * MOE_IMBALANCE / (f["peak_moe_flops"] * moe_eff))
    weights = (f["weight_bytes_dense"] + f["weight_bytes_experts"] * touched) / (f["hbm_bytes_s"] * p["eff_hbm"]
                                                                                * hbm_share(f, p))
    return soft_max(compute, weights)


def verified_tokens(f, batch_rank):
    """Tokens a decode iteration runs through the model per attention rank: one per sequence,
    plus the ``spec_tokens`` drafted tokens each sequence has verified (speculative decoding)."""
    return batch_rank * (1.0 + f["spec_tokens"])


def accepted_per_step(f):
    """Tokens a sequence emits per decode iteration: 1, or with speculative decoding of k drafted
    tokens each accepted with chance a (until the first rejection, plus the verifier's own),
    (1 − a^(k+1)) / (1 − a)."""
    k, a = f["spec_tokens"], f["spec_accept"]
    return choose(k > 0, (1.0 - a ** (k + 1.0)) / vmax(1.0 - a, 1e-9), 1.0)


def decode_gemms_s(f, p, batch_rank):
    """GEMMs and collectives (s) of one pipeline stage of a decode iteration with ``batch_rank``
    sequences per attention rank, on its micro-batch (the part a prompt riding in it adds to)."""
    q = verified_tokens(f, micro_batch(f, vmax(batch_rank, 1e-9)))
    return _linear_time(f, p, q, q * f["dp"], q) + _collectives(f, p, q)


def decode_step_s(f, p, batch_rank, context, gemms=None):
    """One decode iteration (s) with ``batch_rank`` sequences per attention rank at mean ``context`` tokens.

    With pipeline parallelism the batch runs as pp micro-batches that follow each other through
    the stages, so a token takes pp stage times of its micro-batch (its weights, and its own
    sequences' KV) plus the hand-offs between stages.
    ``gemms`` is ``decode_gemms_s`` of the same batch when the caller has it already.
    Speculative decoding verifies each sequence's drafted tokens in the same pass (more GEMM
    and attention math, the same weight and KV reads) after drafting them one at a time, each
    draft costing about one layer of the pass and a layer's launch gap.
    """
    b = vmax(batch_rank, 1e-9)
    m = micro_batch(f, b)
    picked = choose(f["attn_topk"] > 0, vmin(context, vmax(f["attn_topk"], 1)), context)
    kv_bytes = picked * (f["kv_bytes_tok"] - f["index_bytes_tok"]) + context * f["index_bytes_tok"]
    kv = m * (kv_bytes + 2.0 * f["state_bytes_seq"]) / (f["hbm_bytes_s"] * p["eff_kv"] * hbm_share(f, p))
    # Softmax-bound attention gains the GPU's attention speed-up; the indexer's scores take no softmax.
    mla = verified_tokens(f, m) * (picked * f["mla_decode_flops"] / (p["eff_mla"] * f["attn_speed"])
                                   + context * f["index_pair_flops"] / p["eff_attn"]) / (f["peak_attn_flops"]
                                                                                       * attention_share(f, p))
    layer_us = decode_layer_us(f, p)
    overhead = (step_overhead_s(f, p) + p["seq_us"] * 1e-6 * b
                + (layer_us * f["num_layers"] + p["moe_layer_us"] * f["moe_layers"]
                   + p["sparse_layer_us"] * f["sparse_attention_layers"]) * 1e-6)
    stage = (decode_gemms_s(f, p, b) if gemms is None else gemms) + soft_max(kv, mla)
    drafts = choose(f["spec_tokens"] > 0,
                    f["spec_tokens"] * (f["pp"] * stage / f["num_layers"] + layer_us * 1e-6), 0.0)
    return f["pp"] * stage + _stage_sends_s(f, p, verified_tokens(f, m)) + overhead + drafts


def attention_pairs(f, isl):
    """(query, key) pairs one prompt of ``isl`` tokens attends to: causal, each query at most
    ``attn_topk`` keys under sparse attention (its indexer still scores every pair)."""
    k = vmax(f["attn_topk"], 1)
    sparse = (f["attn_topk"] > 0) & (isl > k)
    return choose(sparse, k * k / 2 + (isl - k) * k, isl * isl / 2)


def _prefill_attention_s(f, p, isl, requests):
    """Attention (and indexer) time (s) of ``requests`` prompts of ``isl`` tokens."""
    eff = choose(f["mla_decode_flops"] > 0, p["eff_attn_mla"], p["eff_attn"])  # MLA: its own kernels
    # The indexer's scores take no softmax, so only attention gains the GPU's attention speed-up.
    flops_at_peak = (attention_pairs(f, isl) * f["attn_pair_flops"] / (eff * f["attn_speed"])
                     + isl * isl / 2 * f["index_pair_flops"] / eff)
    return requests * flops_at_peak / (f["peak_attn_flops"] * attention_share(f, p))


def _launches_s(f, p):
    """Kernel launches of one pass that prefills (no CUDA graph): per layer, MoE layers more (s)."""
    return (p["prefill_layer_us"] * f["num_layers"] + p["prefill_moe_layer_us"] * f["moe_layers"]) * 1e-6


def mixed_prefill_s(f, p, batch_rank, isl, requests, gemms=None):
    """Time (s) that prefilling ``requests`` prompts of ``isl`` tokens adds to the decode
    iterations of ``batch_rank`` sequences per attention rank they ride in (chunked prefill;
    pipelined, to the round of micro-batches in which every sequence gets a token).

    The prompts' tokens join decode iterations in chunks of up to ``max_num_tokens``: the
    weights those iterations stream anyway are not streamed again, so short prompts cost
    their GEMM compute beyond the decode batch's, their attention and the kernel launches of
    an iteration that prefills; long ones cost about a prefill of their own. With attention
    DP every rank receives prompts at the same rate, so each carries its own chunk in the same
    iterations and the experts, shared by the ranks, run all of the ranks' prompt tokens.
    ``gemms`` is ``decode_gemms_s`` of the decode batch when the caller has it already.
    """
    b = vmax(batch_rank, 1e-9)
    tokens = requests * isl
    chunks = np.ceil(tokens / f["max_num_tokens"])
    n = tokens / chunks
    dp = f["dp"]
    base = decode_gemms_s(f, p, b) if gemms is None else gemms
    q = verified_tokens(f, micro_batch(f, b))  # the chunk rides in one micro-batch
    added = (_linear_time(f, p, q + n, (q + n) * dp, q + requests / chunks) + _collectives(f, p, q + n) - base
             + (_stage_sends_s(f, p, q + n) - _stage_sends_s(f, p, q)) / f["pp"])
    # Pipelined, every stage does its share once for the micro-batch that carries the chunk:
    # the round in which each sequence gets a token grows by one stage's share, not by pp.
    return chunks * added + _prefill_attention_s(f, p, isl, requests) + chunks * _launches_s(f, p) / f["pp"]


def prefill_s(f, p, isl, requests=1.0, ranks=1.0):
    """Time (s) to prefill ``requests`` prompts of ``isl`` tokens together on one attention rank,
    while ``ranks`` of the engine's attention-DP ranks (this one included) prefill as many: the
    experts the ranks share run every such rank's tokens (1: this rank alone)."""
    tokens = requests * isl
    linear = _linear_time(f, p, tokens, tokens * ranks, requests)
    chunks = np.ceil(tokens / f["max_num_tokens"])
    # Prefill runs without CUDA graphs: every layer pays its kernel launches (MoE layers more).
    # Pipelined, chunks follow each other through the stages: the last finishes pp - 1 chunk
    # times after the first stage is done (the bubble), its hand-offs on the way.
    stages = linear + _prefill_attention_s(f, p, isl, requests) + _collectives(f, p, tokens, large=True)
    return (stages * (1.0 + (f["pp"] - 1.0) / chunks) + _stage_sends_s(f, p, tokens / chunks)
            + chunks * (step_overhead_s(f, p) + _launches_s(f, p)))
