"""Per-GPU work of one engine: FLOPs and bytes per token, memory, and KV capacity.

Everything here depends only on the configuration (not on fitted parameters), so it is
computed once per configuration and then reused by the timing model for any batch size.
Units: FLOPs, bytes, GB/s; memory reported in GiB.
"""

import math

from typing import NamedTuple

from profiler.model.config import Memory, Parallel
from profiler.model.errors import Infeasible, ModelError
from profiler.model.gpus import Gpu
from profiler.model.models import Model
from profiler.model.precision import (
    KV_BYTES,
    WEIGHT_BYTES,
    attention_weight_precision,
    mlp_compute_dtype,
)

# Fraction of GPU memory each backend lets weights + KV + activations use (vLLM's
# gpu_memory_utilization, SGLang's mem_fraction_static); TRT-LLM's fraction is of the memory
# left free after weights and activations (free_gpu_memory_fraction), see FREE_FRACTION_BACKENDS.
MEMORY_FRACTION = {"vllm": 0.90, "sglang": 0.88, "trtllm": 0.90}
FREE_FRACTION_BACKENDS = frozenset({"trtllm"})
MAX_MEMORY_FRACTION = 0.96
# Memory outside the engine's pool: CUDA context, NCCL buffers, CUDA graphs (GiB).
RESERVED_GIB = 2.0
ACT_BYTES = 2.0  # activations travel in bf16
STATE_BYTES = 4.0  # linear-attention recurrent state: engines keep it in fp32 by default


class EngineShape(NamedTuple):
    """Per-GPU quantities of one engine role; per token means per token on one attention rank.

    A NamedTuple (immutable, read by name) with its types evaluated (this module has no postponed
    annotations): a frozen dataclass of these 54 fields would compile its generated methods at every
    start-up, and a type named in a string would be compiled as a forward reference (each about 5 M
    instructions more)."""

    gpus: int
    tp: int
    pp: int
    dp: int
    moe_ep: int
    num_layers: int
    moe_layers: int
    sparse_attention_layers: int  # layers whose queries pick their keys with an indexer (DeepSeek sparse attention)
    flops_dense_tok: float  # attention-projection GEMM FLOPs per token on one GPU
    flops_head_tok: float  # LM-head FLOPs per sampled token on one GPU (a prompt samples only its last)
    flops_mlp_tok: float  # dense-MLP and shared-expert GEMM FLOPs per token on one GPU
    flops_moe_tok: float  # routed-expert FLOPs per token per GPU (experts spread over all GPUs)
    attn_width: float  # output columns per GPU of the attention projections (hidden / tp)
    mlp_width: float  # the same for the dense MLP (or shared experts): intermediate / tp
    expert_width: float  # the same for one routed expert: its intermediate / expert TP
    attn_pair_flops: float  # attention FLOPs per (query, key) pair per GPU
    mla_decode_flops: float  # extra FLOPs per (query, cached token) of absorbed MLA decode
    attn_topk: int  # keys a query attends to under sparse attention (0: every key)
    index_pair_flops: float  # sparse-attention indexer FLOPs per (query, key) pair per GPU (it scores every key)
    index_bytes_tok: float  # of kv_bytes_tok, the indexer keys (read for every context token)
    weight_bytes_dense: float  # bytes of non-expert weights a forward pass streams per GPU (LM head, not embedding)
    weight_bytes_experts: float  # bytes of all local routed experts per GPU
    num_experts: int
    experts_per_token: int
    kv_bytes_tok: float  # KV-cache bytes per context token per GPU
    kv_bytes_tok_total: float  # KV bytes per token of the whole model (what prefill hands to decode)
    state_bytes_seq: float  # linear-attention state per sequence per GPU (read and written every decode step)
    allreduce_bytes_tok: float  # bytes per token per all-reduce (ring: sent by each GPU)
    allreduce_msg_bytes_tok: float  # the all-reduced message's bytes per token
    allreduces: int  # all-reduces per forward pass
    alltoall_bytes_tok: float  # bytes per dispatched token per all-to-all to GPUs of its own node
    alltoall_remote_bytes_tok: float  # the same to other nodes (one copy per node reached)
    alltoalls: int  # all-to-alls per forward pass
    gather_bytes_tok: float  # bytes a GPU receives per token of each attention rank, per expert gather + scatter
    gathers: int  # expert gathers per forward pass (attention-DP ranks sharing TP-sharded experts)
    stage_send_bytes_tok: float  # bytes per token a pipeline stage hands the next (hidden state, bf16)
    stage_sends_local: int  # stage boundaries inside the scale-up domain (pp - 1 in all)
    stage_sends_remote: int  # stage boundaries between scale-up domains
    peak_dense_flops: float  # FLOP/s of the attention / dense GEMMs
    peak_moe_flops: float  # FLOP/s of the MLP and expert GEMMs
    peak_attn_flops: float  # FLOP/s of attention math (bf16)
    attn_speed: float  # softmax-bound attention kernels' speed-up on this GPU (Gpu.attention_speedup)
    cdna: int  # AMD Instinct generation (3: CDNA3, 4: CDNA4), 0 on NVIDIA: ROCm's fitted parameters (``amd_*``, ``cdna*_*``)
    hbm_bytes_s: float
    allreduce_link_bytes_s: float  # one direction, per GPU, of the link the TP all-reduce crosses
    # Message bytes a switch-reduced all-reduce moves per GPU each second (0: no such all-reduce:
    # unmeasured GPU, or TP across nodes)
    switch_allreduce_bytes_s: float
    gather_link_bytes_s: float  # the same for the expert gathers across attention ranks
    nvlink_bytes_s: float  # one direction, per GPU, inside the scale-up domain
    internode_bytes_s: float  # one direction, per GPU, between scale-up domains
    # Bandwidth (B/s) that ships one prefilled request's KV cache to decode: the links of the attention
    # rank that prefilled it (tp × pp GPUs); other attention-DP ranks ship their own requests.
    kv_transfer_bytes_s: float
    compute_dtype: str
    memory: Memory
    kv_tokens_per_rank: int
    seq_limit: int  # running sequences per attention rank the engine allows by default


def _alltoall_bytes_tok(model: Model, ep: int, domain: int, precision: str) -> tuple[float, float]:
    """Bytes one dispatched token moves per all-to-all (dispatch or combine) inside its node and
    to other nodes, when its ``experts_per_token`` experts are spread evenly over ``ep`` GPUs.

    Inside a node every expert copy goes over NVLink; across nodes a token crosses once per node
    that holds any of its experts (and fans out there), as expert-parallel kernels do. Links are
    full duplex, so what a GPU sends and what it receives take one direction each: a copy costs
    its bytes once. Quantized models dispatch in fp8 and combine in bf16 (the mean of the two is
    charged to each all-to-all); bf16 models move bf16 both ways.
    """
    if ep <= 1:
        return 0.0, 0.0
    per_copy = model.hidden_size * ((1.0 + ACT_BYTES) / 2 if precision in ("fp8", "fp4") else ACT_BYTES)
    k = model.experts_per_token
    local = min(ep, domain)
    nodes = math.ceil(ep / local)
    local_bytes = per_copy * k * (local - 1) / ep
    reach = 1.0 - (1.0 - local / ep) ** k  # chance one other node holds at least one of the experts
    return local_bytes, per_copy * (nodes - 1) * reach


def _gather_bytes_tok(model: Model, par: Parallel) -> float:
    """Bytes one GPU receives per token of each attention rank in one MoE layer, when attention
    runs data-parallel and the experts are split by tensor parallelism across the ranks.

    Every GPU then computes its expert shard for the tokens of every rank: the ranks' hidden
    states are all-gathered before the experts and the partial outputs reduce-scattered after
    (bf16, the other ``dp - 1`` ranks' tokens each way).
    """
    if par.dp <= 1 or par.expert_tp <= par.tp or not model.is_moe:
        return 0.0
    return model.hidden_size * ACT_BYTES * 2 * (par.dp - 1)


def _stage_boundaries(tp: int, pp: int, domain: int) -> tuple[int, int]:
    """(boundaries inside the scale-up domain, boundaries between domains) of a pipeline of
    ``pp`` stages of ``tp`` GPUs each, stages placed in order: a domain holds domain // tp
    whole stages (one, spread over domains, when a stage is wider than a domain)."""
    per_domain = max(1, domain // tp)
    remote = (pp - 1) // per_domain if tp <= domain else pp - 1
    return pp - 1 - remote, remote


def _dense_flops_per_token(model: Model) -> tuple[float, float]:
    """Non-expert GEMM FLOPs per token for the whole model (2 FLOPs per multiply-add): the
    attention projections, and the dense MLPs with the shared experts."""
    dense_mlp_layers = model.dense_layers if model.is_moe else model.num_layers
    shared = model.moe_layers * model.shared_experts * model.expert_params()
    return 2.0 * model.all_attention_params(), 2.0 * (dense_mlp_layers * model.dense_mlp_params() + shared)


def kv_elements_per_token(model: Model, context_tokens: float) -> float:
    """KV elements per context token, sliding-window layers prorated at a mean context (tokens)."""
    full = model.kv_elements_per_token()
    sliding_layers = model.softmax_attention_layers - model.full_kv_layers if model.sliding_window else 0
    per_layer = 2 * model.num_kv_heads * model.head_dim
    return full + sliding_layers * per_layer * min(1.0, model.sliding_window / max(context_tokens, 1.0))


def check_parallel(model: Model, par: Parallel, role: str) -> None:
    """Raise ModelError (naming ``role``'s field) when ``model`` cannot be split as ``par`` says."""
    heads = model.num_heads
    if heads % par.tp:
        raise ModelError(f"{role}.tp", f"tp={par.tp} does not divide the {heads} attention heads of {model.hf_id}")
    if model.num_layers < par.pp:
        raise ModelError(f"{role}.pp", f"pp={par.pp} exceeds the {model.num_layers} layers of {model.hf_id}")
    if model.is_moe:
        if par.moe_ep > model.num_experts:
            raise ModelError(f"{role}.moe_ep", f"moe_ep={par.moe_ep} exceeds the {model.num_experts} experts")
        if model.moe_intermediate_size % par.expert_tp:
            raise ModelError(f"{role}.moe_ep", f"expert TP {par.expert_tp} (tp × dp / moe_ep) does not divide the "
                                               f"experts' width {model.moe_intermediate_size}; spread the experts "
                                               f"with more expert parallelism")
        if par.expert_tp * par.moe_ep != par.tp * par.dp:
            raise ModelError(f"{role}.moe_ep", f"moe_tp × moe_ep = {par.expert_tp}×{par.moe_ep} must equal tp × dp = {par.tp * par.dp}")
    elif par.dp > 1:
        raise ModelError(f"{role}.dp", "attention data-parallelism applies to MoE models only; use replicas")
    elif par.moe_ep > 1 or (par.moe_tp or 1) > 1:
        raise ModelError(f"{role}.moe_ep", f"expert parallelism applies to MoE models only; {model.hf_id} is dense")


def default_max_num_tokens(backend: str, gpu: Gpu) -> int:
    """Prompt tokens one engine step takes unless told otherwise: vLLM's and TRT-LLM's
    ``max_num_batched_tokens`` / ``max_num_tokens`` are 8192; SGLang's ``chunked_prefill_size``
    goes by the GPU's memory: 2048 under 35 GiB, 8192 under 160 GiB, 16384 above (B200, MI300X)."""
    if backend == "sglang":
        return 2048 if gpu.memory_gib < 35 else 8192 if gpu.memory_gib < 160 else 16384
    return 8192


def default_seq_limit(backend: str, gpu: Gpu) -> int:
    """Running sequences per attention rank an engine allows unless told otherwise (the KV cache
    may bind first): vLLM's ``max_num_seqs`` is 1024 on GPUs of 70 GiB or more other than the
    A100 and 256 elsewhere; TRT-LLM's ``max_batch_size`` is 2048; SGLang's request pool holds
    at least 2048."""
    if backend == "vllm":
        return 1024 if gpu.memory_gib >= 70 and gpu.name != "a100_sxm" else 256
    return 2048


def engine_shape(model: Model, gpu: Gpu, backend: str, precision: str, kv_dtype: str, par: Parallel,
                 role: str, max_num_tokens: int, context_tokens: float) -> EngineShape:
    """Per-GPU work and memory of one engine, whose steps take up to ``max_num_tokens`` prompt
    tokens and whose requests each hold ``context_tokens`` of KV cache (``held_tokens``);
    raises Infeasible when the weights do not fit."""
    check_parallel(model, par, role)
    tp, pp, dp = par.tp, par.pp, par.dp
    moe_gpus = par.expert_tp * par.moe_ep
    attn_prec = attention_weight_precision(precision)

    # Weights per GPU (bytes): attention and dense MLPs split over tp and pp; the embedding
    # and LM head split over tp; routed experts over every GPU of a stage. A forward pass
    # streams the LM head (on the last stage) but only gathers the embedding rows it needs.
    dense_mlp_layers = model.dense_layers if model.is_moe else model.num_layers
    attn_b = model.all_attention_params() * WEIGHT_BYTES[attn_prec]
    mlp_b = (dense_mlp_layers * model.dense_mlp_params()
             + model.moe_layers * model.shared_experts * model.expert_params()) * WEIGHT_BYTES[precision]
    emb_b = model.embedding_params() * WEIGHT_BYTES["bf16"]
    dense_bytes = (attn_b + mlp_b) / (tp * pp) + emb_b / tp
    head_b = model.vocab_size * model.hidden_size * WEIGHT_BYTES["bf16"]
    # Experts that do not divide evenly over EP take redundant slots: the busiest GPU holds ceil(E / ep).
    slots = model.num_experts if model.num_experts % par.moe_ep == 0 else -(-model.num_experts // par.moe_ep) * par.moe_ep
    expert_bytes = model.moe_layers * slots * model.expert_params() * WEIGHT_BYTES[precision] / (moe_gpus * pp)

    # KV per context token per GPU: GQA heads split over tp (replicated when kv heads < tp);
    # an MLA latent is replicated on every tp rank; layers split over pp.
    kv_total = kv_elements_per_token(model, context_tokens) * KV_BYTES[kv_dtype]
    if model.attention == "mla":
        kv_gpu = kv_total / pp
    else:
        kv_gpu = kv_total * max(1, model.num_kv_heads // tp) / model.num_kv_heads / pp

    width = max(model.hidden_size * 4, 2 * model.intermediate_size // tp, 2 * model.moe_intermediate_size * max(1, model.experts_per_token) // max(1, par.expert_tp))
    act_bytes = max_num_tokens * (width + model.vocab_size // tp) * ACT_BYTES * 2
    weights = dense_bytes + expert_bytes
    if backend in FREE_FRACTION_BACKENDS:
        kv_bytes = (gpu.memory_bytes - RESERVED_GIB * 2**30 - weights - act_bytes) * MEMORY_FRACTION[backend]
    else:
        kv_bytes = gpu.memory_bytes * MEMORY_FRACTION[backend] - RESERVED_GIB * 2**30 - weights - act_bytes
    if kv_bytes <= 0:  # engines let users raise their memory fraction up to about 0.96
        kv_bytes = gpu.memory_bytes * MAX_MEMORY_FRACTION - RESERVED_GIB * 2**30 - weights - act_bytes
    gib = 2**30
    if kv_bytes <= 0:
        usable = gpu.memory_bytes * MAX_MEMORY_FRACTION - RESERVED_GIB * 2**30
        raise Infeasible(role, f"{model.hf_id} in {precision} needs {weights / gib:.1f} GiB of weights and "
                               f"{act_bytes / gib:.1f} GiB of activations per GPU at tp={tp} pp={pp} ep={par.moe_ep}, "
                               f"more than the {usable / gib:.1f} GiB an engine can use of a {gpu.name}'s "
                               f"{gpu.memory_gib:.1f} GiB (a memory fraction raised to {MAX_MEMORY_FRACTION} from {backend}'s "
                               f"{MEMORY_FRACTION[backend]}, less "
                               f"{RESERVED_GIB:g} GiB for the CUDA context, NCCL buffers and CUDA graphs)")
    tokens_rank = int(kv_bytes / kv_gpu)
    # Sliding-window layers cost a bounded cache; their share is inside the activations margin.
    # A linear-attention state takes the room of state_gpu / kv_gpu tokens in the same pool.
    state_gpu = model.linear_state_elements() * STATE_BYTES / (tp * pp)
    seq_limit = default_seq_limit(backend, gpu)
    max_seq = int(min(seq_limit, tokens_rank / (max(1.0, context_tokens) + state_gpu / kv_gpu))) * dp
    memory = Memory(weights_gib=weights / gib, kv_cache_gib=kv_bytes / gib, activations_gib=act_bytes / gib,
                    kv_capacity_tokens=tokens_rank * dp, max_sequences=max_seq)

    expert_flops = 2.0 * model.moe_layers * model.experts_per_token * model.expert_params()
    cdt = mlp_compute_dtype(precision)
    nvlink, internode = gpu.nvlink_gb_s / 2 * 1e9, gpu.internode_gb_s * 1e9
    local_bytes, remote_bytes = _alltoall_bytes_tok(model, par.moe_ep, gpu.nvlink_domain, precision)
    gather_bytes = _gather_bytes_tok(model, par)
    layers_stage = model.num_layers / pp
    attn_flops, mlp_flops = _dense_flops_per_token(model)
    sends = _stage_boundaries(tp * dp, pp, gpu.nvlink_domain)
    mla_extra = (2 * model.num_heads * model.kv_lora_rank * 2 * layers_stage / tp) if model.attention == "mla" else 0.0
    return EngineShape(
        gpus=par.gpus, tp=tp, pp=pp, dp=dp, moe_ep=par.moe_ep, num_layers=model.num_layers, moe_layers=model.moe_layers,
        sparse_attention_layers=model.num_layers if model.index_topk else 0,
        flops_dense_tok=attn_flops / (tp * pp), flops_mlp_tok=mlp_flops / (tp * pp),
        flops_head_tok=2.0 * model.vocab_size * model.hidden_size / (tp * pp),
        flops_moe_tok=expert_flops / (moe_gpus * pp),
        attn_width=model.hidden_size / tp,
        mlp_width=(model.moe_intermediate_size * model.shared_experts if model.is_moe and model.shared_experts
                   else model.intermediate_size) / tp,
        expert_width=model.moe_intermediate_size / par.expert_tp if model.is_moe else 1.0,  # dense: no expert FLOPs
        attn_pair_flops=model.attention_flops_per_token_pair() / (tp * pp),
        mla_decode_flops=mla_extra, attn_topk=model.index_topk,
        index_pair_flops=2.0 * model.index_n_heads * model.index_head_dim * model.full_kv_layers / (tp * pp),
        index_bytes_tok=model.full_kv_layers * model.index_head_dim * KV_BYTES[kv_dtype] / pp,
        weight_bytes_dense=(attn_b + mlp_b + head_b) / (tp * pp), weight_bytes_experts=expert_bytes,
        num_experts=model.num_experts, experts_per_token=model.experts_per_token,
        kv_bytes_tok=kv_gpu, kv_bytes_tok_total=kv_total, state_bytes_seq=state_gpu,
        allreduce_bytes_tok=model.hidden_size * ACT_BYTES * 2 * (tp - 1) / tp if tp > 1 else 0.0,
        allreduce_msg_bytes_tok=model.hidden_size * ACT_BYTES if tp > 1 else 0.0,
        allreduces=int(2 * layers_stage) if tp > 1 else 0,
        alltoall_bytes_tok=local_bytes, alltoall_remote_bytes_tok=remote_bytes,
        alltoalls=int(2 * model.moe_layers / pp) if par.moe_ep > 1 else 0,
        gather_bytes_tok=gather_bytes, gathers=int(model.moe_layers / pp) if gather_bytes else 0,
        stage_send_bytes_tok=model.hidden_size * ACT_BYTES,
        stage_sends_local=sends[0], stage_sends_remote=sends[1],
        peak_dense_flops=gpu.peak_tflops("fp8" if attn_prec == "fp8" else "bf16") * 1e12,
        peak_moe_flops=gpu.peak_tflops(cdt) * 1e12,
        peak_attn_flops=gpu.peak_tflops("bf16") * 1e12, attn_speed=gpu.attention_speedup,
        cdna=int(gpu.generation.removeprefix("cdna")) if gpu.vendor == "amd" else 0,
        hbm_bytes_s=gpu.hbm_gb_s * 1e9,
        allreduce_link_bytes_s=internode if tp > gpu.nvlink_domain else nvlink,
        switch_allreduce_bytes_s=0.0 if tp > gpu.nvlink_domain else nvlink * gpu.switch_allreduce_eff,
        gather_link_bytes_s=internode if tp * dp > gpu.nvlink_domain else nvlink,
        nvlink_bytes_s=nvlink, internode_bytes_s=internode,
        kv_transfer_bytes_s=(gpu.nvlink_gb_s / 2 if gpu.nvlink_domain > gpu.gpus_per_node else gpu.internode_gb_s) * 1e9 * tp * pp,
        compute_dtype=cdt, memory=memory, kv_tokens_per_rank=tokens_rank, seq_limit=seq_limit,
    )


# Engines whose default capacity policy reserves a request's whole output on admission.
RESERVES_WHOLE_OUTPUT = ("trtllm",)


def held_tokens(backend: str, isl: float, osl: float) -> float:
    """KV-cache tokens a request counts for when an engine decides how many fit.

    TRT-LLM's default capacity policy (GUARANTEED_NO_EVICT) admits a request only once the
    cache can hold its prompt and all its output tokens, so nothing is ever evicted: ISL + OSL.
    vLLM and SGLang admit on what a sequence holds now and preempt when the cache fills, so
    over a request's life it holds its mean context: ISL + OSL/2.
    """
    return isl + (osl if backend in RESERVES_WHOLE_OUTPUT else osl / 2)


def max_batch_per_rank(shape: EngineShape, context_tokens: float, limit: int | None) -> float:
    """Sequences one attention rank can hold at ``context_tokens`` each (``held_tokens``), capped by ``limit`` per engine."""
    by_kv = shape.kv_tokens_per_rank / (max(1.0, context_tokens) + shape.state_bytes_seq / shape.kv_bytes_tok)
    cap = shape.seq_limit if limit is None else min(shape.seq_limit, limit / shape.dp)
    return max(0.0, min(by_kv, cap))

