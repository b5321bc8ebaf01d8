"""The model's free parameters: efficiencies and overheads fitted to measurements.

Defaults are physically plausible starting points; the shipped values live in
``profiler/model/data/params.json`` (written by ``slaplan calibrate``, with their provenance).
"""

from __future__ import annotations

import json
from functools import lru_cache
from importlib import resources

# name: (default, lower bound, upper bound). Efficiencies are fractions of datasheet peaks,
# times are milliseconds unless the name says otherwise.
PARAMS: dict[str, tuple[float, float, float]] = {
    "eff_gemm": (0.65, 0.2, 0.95),  # best GEMM efficiency, fraction of the bf16 or fp8 peak
    "eff_fp4": (0.50, 0.1, 0.95),  # the same for fp4 math (younger kernels)
    "gemm_half_tokens": (48.0, 1.0, 2048.0),  # tokens per GEMM at which efficiency is half its best
    "expert_gemm_share": (0.7, 0.05, 1.0),  # grouped expert GEMMs' best efficiency, share of a dense GEMM's
    "expert_half_tokens": (48.0, 1.0, 2048.0),  # the same for one expert's GEMM (grouped kernels)
    "gemm_half_width": (64.0, 1.0, 4096.0),  # output columns per GPU at which a GEMM's efficiency halves
    "eff_hbm": (0.80, 0.3, 0.95),  # weight streaming, fraction of HBM bandwidth
    "routing_spread": (1.0, 0.1, 1.0),  # distinct experts a batch touches, relative to uniform routing
    "eff_kv": (0.60, 0.1, 0.95),  # KV-cache reads in decode attention
    "eff_attn": (0.40, 0.05, 0.95),  # prefill attention math, fraction of bf16 peak
    "eff_attn_mla": (0.40, 0.05, 0.95),  # the same for MLA prefill (192-wide query-key heads)
    "eff_mla": (0.50, 0.05, 0.95),  # MLA decode attention math (latent absorbed), fraction of bf16 peak
    "eff_link": (0.60, 0.1, 0.95),  # collectives, fraction of link bandwidth
    "coll_latency_us": (12.0, 1.0, 200.0),  # fixed cost of one collective
    "peer_us": (1.5, 0.01, 50.0),  # more per peer GPU an expert all-to-all or gather exchanges with (signals, small messages)
    # A decode step's fixed cost splits into the framework's own (scheduling, sampling: Python
    # engines ~1.5 ms, TRT-LLM's C++ executor ~0.5 ms) and the gaps between a layer's ~15
    # graph-captured kernels (~2-3 us each, ~40 us a layer). Models with similar layer counts
    # cannot tell the two apart, so these defaults decide the split for a model unlike them.
    "step_ms_vllm": (1.5, 0.1, 40.0),  # framework overhead per engine step
    "step_ms_sglang": (1.5, 0.1, 40.0),
    "step_ms_trtllm": (0.5, 0.1, 40.0),
    "layer_us": (40.0, 0.1, 500.0),  # per transformer layer per decode step (kernel gaps, syncs)
    "moe_layer_us": (20.0, 0.1, 2000.0),  # more per MoE layer per decode step (routing, dispatch)
    # A sparse-attention layer's indexer adds about as many kernels again as the rest of the layer
    # (its projections, norm, RoPE, rotation, quantisation, cache write, logits, top-k): one layer's gaps.
    "sparse_layer_us": (40.0, 0.1, 2000.0),  # more per sparse-attention layer per decode step (indexer, top-k)
    "prefill_layer_us": (100.0, 0.1, 5000.0),  # per layer per prefill chunk (eager, no CUDA graphs)
    "prefill_moe_layer_us": (200.0, 0.1, 20000.0),  # more per MoE layer per prefill chunk
    "seq_us": (15.0, 0.0, 500.0),  # per running sequence per step (sampling, scheduling)
    # The engine's own per-request cost before its first step (HTTP, tokenization, scheduling):
    # measured, not fitted (``ENGINE_MEASURED``; how, in docs/model.md). What a calibration row's
    # harness adds on top is fitted apart and never predicted for a deployment (``harness.py``).
    "ttft_ms_vllm": (10.0, 0.1, 1000.0),
    "ttft_ms_sglang": (10.0, 0.1, 1000.0),
    "ttft_ms_trtllm": (10.0, 0.1, 1000.0),
    "closed_interference_vllm": (1.0, 0.1, 2.0),  # share of prompt prefills decodes wait for, closed loop
    "closed_interference_sglang": (1.0, 0.1, 2.0),
    "closed_interference_trtllm": (1.0, 0.1, 2.0),
    "agg_burst_vllm": (0.08, 0.001, 1.0),  # closed-loop wait per extra client, in prefill times
    "agg_burst_sglang": (0.08, 0.001, 1.0),
    "agg_burst_trtllm": (0.08, 0.001, 1.0),
    "disagg_burst": (0.08, 0.001, 1.0),
    # Decode iterations an aggregated TRT-LLM attention-DP engine holds prompts so that its ranks
    # prefill together (ADP balance: up to timeout_iters 50 plus batching_wait_iters 10).
    "dp_hold_iters_trtllm": (60.0, 0.1, 500.0),
    "kv_transfer_eff": (0.5, 0.02, 1.0),  # fraction of link bandwidth a KV handoff achieves
    # AMD Instinct GPUs (ROCm kernels: hipBLASLt, AITER; RCCL and AITER collectives over the xGMI
    # mesh of Infinity Fabric links). A share scales the efficiencies the rest of the fit sets (what
    # ROCm kernels reach of a datasheet peak, relative to what NVIDIA's reach of theirs); the others
    # stand in on AMD GPUs for the parameter in brackets. Their defaults time AMD GPUs as NVIDIA
    # ones; no NVIDIA GPU reads them.
    "amd_gemm_share": (1.0, 0.2, 1.5),  # GEMM and grouped-expert efficiency, share of NVIDIA's
    "amd_hbm_share": (1.0, 0.3, 1.05),  # weight streaming and KV-cache reads, share of NVIDIA's efficiency
    "amd_attn_share": (1.0, 0.1, 2.0),  # attention kernels (prefill, MLA decode), share of NVIDIA's efficiency
    "amd_link_eff": (0.60, 0.05, 0.95),  # collectives over xGMI, fraction of the catalog's link bandwidth (eff_link)
    "amd_coll_latency_us": (12.0, 1.0, 200.0),  # one collective's fixed cost, RCCL / AITER (coll_latency_us)
    "amd_peer_us": (1.5, 0.01, 50.0),  # more per peer GPU of an expert all-to-all or gather, MoRI (peer_us)
    # Per transformer layer per decode step, HIP graph kernel gaps (layer_us), per Instinct
    # generation: each runs kernel builds of its own, and no other GPU tells what they cost.
    "cdna3_layer_us": (40.0, 0.1, 1000.0),  # MI300X, MI325X
    "cdna4_layer_us": (40.0, 0.1, 1000.0),  # MI350X, MI355X
}

PARAM_NAMES = tuple(PARAMS)
# The parameters only AMD GPUs read (fitted on AMD rows alone, ``calibrate.fit_by_vendor``).
AMD_PARAMS = tuple(n for n in PARAMS if n.startswith(("amd_", "cdna")))
# The parameters measured rather than fitted to the calibration data (that data carries its
# harnesses' costs, fitted as terms of their own): the engine's own per-request TTFT cost.
ENGINE_MEASURED = tuple(n for n in PARAMS if n.startswith("ttft_ms_"))


def default_params() -> dict[str, float]:
    return {k: v[0] for k, v in PARAMS.items()}


def _package_json(name: str) -> dict:
    """The package's ``data/<name>`` parsed ({} when absent)."""
    try:
        text = resources.files(__package__).joinpath(f"data/{name}").read_text()
    except FileNotFoundError:
        return {}
    return json.loads(text)


@lru_cache(maxsize=1)
def shipped_file() -> dict:
    """The package's ``data/params.json`` as written by ``slaplan calibrate`` ({} when absent)."""
    return _package_json("params.json")


@lru_cache(maxsize=1)
def shipped_ttft_error() -> dict:
    """The package's ``data/ttft_error.json`` as ``benchmarks/ttft_margin.py`` writes it ({} when
    absent): the model's held-out TTFT error factor (``ttft_error.ttft_error_factor`` reads it)."""
    return _package_json("ttft_error.json")


@lru_cache(maxsize=1)
def shipped_params() -> dict[str, float]:
    """The fitted parameters shipped with the package (defaults for any that are missing); the
    harness terms fitted beside them are not among them (``harness.shipped_terms``)."""
    return default_params() | {k: v for k, v in shipped_file().get("params", {}).items() if k in PARAMS}
