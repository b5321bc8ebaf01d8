"""The search space: engine parallelisms that are valid for a model and GPU, and fit in memory.

An engine has g GPUs (powers of two up to a node and whole nodes, within the request's
per-engine bounds). Dense models split g into TP × PP (PP only across nodes); MoE models split it into
TP × attention-DP, with expert parallelism either off or over all g GPUs (with redundant
expert slots where the experts do not divide evenly, as wide-EP deployments run).

Only shapes the backend can run are candidates (``EXPRESSIBLE``): vLLM runs TP inside each
data-parallel rank (``--tensor-parallel-size`` × ``--data-parallel-size``) and SGLang splits its
``--tp-size`` into ``--dp-size`` attention ranks, so both take any TP × DP; TensorRT-LLM's
attention is either tensor-parallel or data-parallel (``enable_attention_dp``), never a mix.
"""

from __future__ import annotations

from collections.abc import Callable

from profiler.model import Gpu, Model, ModelError, Parallel, check_parallel


def engine_sizes(lo: int, hi: int, gpus_per_node: int) -> list[int]:
    """GPU counts per engine, within [lo, hi]: powers of two up to a node, and whole nodes
    (an engine beyond one node spreads evenly over its nodes, one pod each)."""
    sizes = {1 << k for k in range(12) if lo <= (1 << k) <= min(hi, gpus_per_node)}
    sizes |= {n * gpus_per_node for n in range(1, hi // gpus_per_node + 1) if lo <= n * gpus_per_node <= hi}
    return sorted(sizes)


def _divisors(n: int) -> list[int]:
    return [d for d in range(1, n + 1) if n % d == 0]


def _any_shape(par: Parallel) -> bool:
    return True


def _pure_attention(par: Parallel) -> bool:
    """Attention all tensor-parallel or all data-parallel (TRT-LLM's ``enable_attention_dp``)."""
    return par.tp == 1 or par.dp == 1


# backend → whether it can run an engine of this parallelism
EXPRESSIBLE: dict[str, Callable[[Parallel], bool]] = {
    "vllm": _any_shape, "sglang": _any_shape, "trtllm": _pure_attention,
}


def engine_options(model: Model, gpu: Gpu, lo: int, hi: int, gpus_per_node: int | None = None,
                   backend: str = "vllm") -> list[Parallel]:
    """Every parallelism ``backend`` can run worth evaluating for engines of ``lo``..``hi`` GPUs
    (memory not yet checked)."""
    runs = EXPRESSIBLE[backend]
    node = gpus_per_node or gpu.gpus_per_node
    domain = max(node, gpu.nvlink_domain)
    options: list[Parallel] = []
    for g in engine_sizes(lo, hi, node):
        for tp in _divisors(g):
            if model.num_heads % tp or tp > domain:
                continue
            rest = g // tp
            if not model.is_moe:
                # PP only to cross a scale-up domain; within one, TP is the better use of GPUs.
                if rest == 1 or (tp == min(domain, g) and rest > 1):
                    options.append(Parallel(tp=tp, pp=rest))
                continue
            if not runs(Parallel(tp=tp, dp=rest)):
                continue
            for ep in sorted({1, g}):
                par = Parallel(tp=tp, dp=rest, moe_ep=ep)
                try:  # e.g. experts that TP cannot split evenly, or more EP ranks than experts
                    check_parallel(model, par, "engine")
                except ModelError:
                    continue
                options.append(par)
    return options


def describe(par: Parallel) -> str:
    parts = [f"tp{par.tp}"]
    if par.pp > 1:
        parts.append(f"pp{par.pp}")
    if par.dp > 1:
        parts.append(f"dp{par.dp}")
    if par.moe_ep > 1:
        parts.append(f"ep{par.moe_ep}")
    return "".join(parts)


def check_bounds(lo: int, hi: int) -> None:
    if lo > hi:
        raise ModelError("gpu.minNumGPUsPerEngine", f"{lo} exceeds maxNumGPUsPerEngine {hi}")
