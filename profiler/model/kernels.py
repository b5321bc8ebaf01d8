"""GEMM kernel measurements → the shape-efficiency parameters the end-to-end fit starts from.

Pure: takes rows already read (dicts of strings or numbers) of per-layer linear-op times
(columns ``gpu, model, tp, num_tokens, attn_pre_proj_ms, attn_post_proj_ms,
mlp_up_proj_ms, mlp_down_proj_ms``, as in Vidur's profiles). Each layer's attention
projections and its MLP are timed the way ``steps._linear_time`` times them: compute at the
bf16 peak × ``gemm_efficiency(tokens)`` × the narrow-shard factor of the output columns each
GPU keeps, soft-maximised with streaming the weights, plus a fixed cost per kernel (a
nuisance here: the end-to-end model counts launches per layer instead). The fitted
efficiencies are what end-to-end serving data alone cannot pin down for a model unlike the
ones it holds (how fast efficiency falls for small batches and narrow shards), so
calibration uses them as the prior its parameters are pulled toward.
"""

from __future__ import annotations

import math

import numpy as np

from profiler.model.errors import ModelError, UnknownName
from profiler.model.gpus import get_gpu
from profiler.model.steps import gemm_efficiency, narrow_factor, soft_max

# Architecture of the models the kernel profiles cover (their Hugging Face configs):
# hidden size, attention heads, KV heads, MLP intermediate size, gated MLP (3 matrices) or not.
PROFILED_SHAPES: dict[str, tuple[int, int, int, int, bool]] = {
    "Qwen/Qwen-72B": (8192, 64, 64, 24576, True),
    "codellama/CodeLlama-34b-Instruct-hf": (8192, 64, 8, 22016, True),
    "internlm/internlm-20b": (5120, 40, 40, 13824, True),
    "meta-llama/Llama-2-70b-hf": (8192, 64, 8, 28672, True),
    "meta-llama/Llama-2-7b-hf": (4096, 32, 32, 11008, True),
    "meta-llama/Meta-Llama-3-70B": (8192, 64, 8, 28672, True),
    "meta-llama/Meta-Llama-3-8B": (4096, 32, 8, 14336, True),
    "microsoft/phi-2": (2560, 32, 32, 10240, False),
}
FITTED = ("eff_gemm", "gemm_half_tokens", "gemm_half_width", "eff_hbm")
_BYTES = 2.0  # fp16 / bf16 weights
_KERNELS = 2  # per timed group: QKV and output projection; up (gate+up) and down projection


def kernel_groups(rows: list[dict]) -> dict[str, np.ndarray]:
    """Per timed group (a layer's attention projections, or its MLP): tokens, weight
    parameters per GPU, output columns per GPU, bf16 peak (FLOP/s), HBM (B/s), measured s.

    Rows of models or GPUs not known are skipped; a known row with a bad number raises
    ``ModelError`` naming the column.
    """
    cols: dict[str, list[float]] = {k: [] for k in ("tokens", "params", "width", "peak", "hbm", "seconds")}
    for row in rows:
        shape = PROFILED_SHAPES.get(str(row.get("model", "")).strip())
        if shape is None:
            continue
        try:
            gpu = get_gpu(str(row.get("gpu", "")))
        except UnknownName:
            continue
        hidden, heads, kv_heads, inter, gated = shape
        tp, tokens = _positive(row, "tp"), _positive(row, "num_tokens")
        head_dim = hidden // heads
        attn = (hidden * (heads + 2 * kv_heads) * head_dim + heads * head_dim * hidden) / tp
        mlp = hidden * inter * (3 if gated else 2) / tp
        attn_s = (_positive(row, "attn_pre_proj_ms") + _positive(row, "attn_post_proj_ms")) * 1e-3
        mlp_s = (_positive(row, "mlp_up_proj_ms") + _positive(row, "mlp_down_proj_ms")) * 1e-3
        for params, width, seconds in ((attn, hidden / tp, attn_s), (mlp, inter / tp, mlp_s)):
            for key, value in zip(cols, (tokens, params, width, gpu.peak_tflops("bf16") * 1e12,
                                         gpu.hbm_gb_s * 1e9, seconds)):
                cols[key].append(value)
    return {k: np.array(v, dtype=float) for k, v in cols.items()}


def _positive(row: dict, key: str) -> float:
    try:
        x = float(row.get(key))
    except (TypeError, ValueError) as exc:
        raise ModelError(key, f"not a number: {row.get(key)!r}") from exc
    if not math.isfinite(x) or x <= 0:
        raise ModelError(key, f"must be > 0, got {row.get(key)!r}")
    return x


def group_seconds(g: dict[str, np.ndarray], p: dict[str, float], kernel_us: float) -> np.ndarray:
    """Modelled time (s) of each timed group under parameters ``p`` (names as in ``FITTED``)."""
    eff = gemm_efficiency(g["tokens"], p["eff_gemm"], p["gemm_half_tokens"]) * narrow_factor(g["width"], p)
    compute = 2.0 * g["tokens"] * g["params"] / (g["peak"] * eff)
    weights = _BYTES * g["params"] / (g["hbm"] * p["eff_hbm"])
    return soft_max(compute, weights) + _KERNELS * kernel_us * 1e-6


def fit_kernels(rows: list[dict], bounds: dict[str, tuple[float, float, float]]) -> dict[str, float]:
    """The ``FITTED`` parameters that best time the measured groups (robust least squares in log time).

    ``bounds`` maps each name to (default, lower, upper), as ``params.PARAMS`` does; the
    fit starts from the defaults. Raises ``ModelError`` when no row is usable.
    """
    g = kernel_groups(rows)
    if not len(g["seconds"]):
        raise ModelError("data", "no kernel measurements of a known model")
    lo = np.log([bounds[n][1] for n in FITTED] + [0.01])
    hi = np.log([bounds[n][2] for n in FITTED] + [1000.0])
    x0 = np.clip(np.log([bounds[n][0] for n in FITTED] + [5.0]), lo + 1e-9, hi - 1e-9)
    log_measured = np.log(g["seconds"])

    def residuals(x):
        values = np.exp(x)
        return np.log(group_seconds(g, dict(zip(FITTED, values[:-1])), values[-1])) - log_measured

    from scipy.optimize import least_squares  # only when fitting: slow to import

    res = least_squares(residuals, x0, bounds=(lo, hi), loss="soft_l1", f_scale=0.1, x_scale=1.0)
    return {n: float(v) for n, v in zip(FITTED, np.exp(res.x[:-1]))}
