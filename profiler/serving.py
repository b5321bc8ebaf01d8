"""Serving under load: continuous batching, prefill queues, and the closed-loop balance.

Element-wise over configurations (floats or numpy arrays). The free variable is ``b``,
the mean number of sequences decoding on one attention rank of a decode (or aggregated)
engine. Given b, everything else follows in closed form:

  t_dec  = decode_step(b, context = ISL + OSL/2)                 one iteration (s)
  T_pf   = prefill(ISL)                                          one prompt (s)
  aggregated (chunked prefill shares the iterations):
    TPOT = t_dec + b·T_pf/(OSL − 1),   X_rank = b / ((OSL − 1)·TPOT)
  disaggregated:
    TPOT = t_dec,                      X_rank = b / ((OSL − 1)·t_dec)
  X      = X_rank × attention ranks per engine × engines          requests/s
  TTFT   = fixed + W_prefill(X) + T_pf + [KV transfer] + t_dec    W from M/D/c (queueing.py)

For a closed loop of C clients, Little's law gives C = (sequences decoding) + X·TTFT;
the right side grows with b, so b is found by bisection. When the batch limit (slots or
KV memory) binds first, the remaining clients wait for a slot and that wait joins TTFT.
For a Poisson rate λ, b solves X(b) = λ.
"""

from __future__ import annotations

from dataclasses import dataclass, fields

import numpy as np

from profiler.engine import EngineShape
from profiler.queueing import mdc_wait, wait_quantile
from profiler.steps import decode_step_s, prefill_s

_DTYPE_CODE = {"bf16": 0, "fp8": 1, "fp4": 2}
_BISECTIONS = 48


BACKENDS = ("vllm", "sglang", "trtllm")


def features(shape: EngineShape, backend: str, max_num_tokens: int) -> dict[str, float]:
    """The numbers the step-time model reads for one engine role."""
    out = {f.name: getattr(shape, f.name) for f in fields(shape)
           if isinstance(getattr(shape, f.name), (int, float)) and not isinstance(getattr(shape, f.name), bool)}
    out["moe_dtype"] = _DTYPE_CODE.get(shape.compute_dtype, 0)
    out["dense_dtype"] = 1 if shape.peak_dense_flops > shape.peak_attn_flops else 0
    out["backend"] = BACKENDS.index(backend)
    out["max_num_tokens"] = max_num_tokens
    return out


def stack(rows: list[dict[str, float]]) -> dict[str, np.ndarray]:
    """Turn per-configuration feature dicts into one dict of arrays."""
    return {k: np.array([r[k] for r in rows], dtype=float) for k in rows[0]}


@dataclass(frozen=True)
class Load:
    """Element-wise serving inputs: pools, lengths and the load (all arrays or floats).

    ``decode_engines`` decode (or aggregated) engines; ``prefill_servers`` attention ranks
    that prefill (disaggregated only; aggregated engines prefill on their own ranks);
    ``disagg`` is 1 for disaggregated rows; ``closed`` is 1 when ``load`` is a concurrency,
    0 when it is a request rate; ``batch_cap`` caps b (sequences per attention rank).
    """

    isl: object
    osl: object
    decode_engines: object
    prefill_servers: object
    disagg: object
    closed: object
    load: object
    batch_cap: object


def _at(fd, fp, ld: Load, p, b):
    """Everything at decode batch ``b``: returns (X, TPOT, TTFT pieces, wait stats)."""
    ctx = ld.isl + ld.osl / 2.0
    steps_after_first = np.maximum(ld.osl - 1.0, 1.0)
    t_dec = decode_step_s(fd, p, b, ctx)
    t_pf = prefill_s(fp, p, ld.isl)
    agg = 1.0 - ld.disagg
    tpot = t_dec + agg * b * t_pf / steps_after_first
    ranks = fd["dp"] * ld.decode_engines
    x = b * ranks / (steps_after_first * tpot)
    servers = np.where(ld.disagg > 0, ld.prefill_servers, ranks)
    q = np.where(ld.disagg > 0, p["disagg_queue"], p["agg_queue"])
    mean_w, p_wait, rho = mdc_wait(x, t_pf, servers)
    # Closed loops with similar request lengths stay partly in step: clients tend to
    # return together and queue behind each other's prompts. The wait grows with the
    # clients per prefill server (fitted fraction ``burst``), on top of the Poisson wait.
    clients = ld.closed * ld.load / servers
    burst = np.where(ld.disagg > 0, p["disagg_burst"], p["agg_burst"]) * np.maximum(clients - 1.0, 0.0) * t_pf
    transfer = ld.disagg * ld.isl * fp["kv_bytes_tok_total"] / (fp["kv_transfer_bytes_s"] * p["kv_transfer_eff"])
    exec_s = p["ttft_ms"] * 1e-3 + t_pf + transfer + t_dec
    return x, tpot, exec_s, q * mean_w + burst, p_wait, rho, ranks


def solve(fd, fp, ld: Load, p) -> dict[str, np.ndarray]:
    """Operating point of every configuration: throughput, TPOT and TTFT (mean, p90, p99), in s."""
    ranks = fd["dp"] * ld.decode_engines
    cap = np.where(ld.closed > 0, np.minimum(ld.batch_cap, ld.load / ranks), ld.batch_cap)
    cap = np.maximum(cap, 1e-6)

    def excess(b):
        x, tpot, exec_s, wait, _, _, r = _at(fd, fp, ld, p, b)
        demand = np.where(ld.closed > 0, b * r + x * (exec_s + wait), x)
        return demand - ld.load

    lo = np.zeros_like(cap) + 1e-9
    hi = cap.copy()
    over = excess(hi) <= 0  # even the full batch leaves load unserved
    for _ in range(_BISECTIONS):
        mid = 0.5 * (lo + hi)
        high = excess(mid) > 0
        hi = np.where(high, mid, hi)
        lo = np.where(high, lo, mid)
    b = np.where(over, cap, 0.5 * (lo + hi))
    x, tpot, exec_s, wait, p_wait, rho, r = _at(fd, fp, ld, p, b)
    # Closed loop at the cap: clients beyond the running batch queue for a slot.
    slot_wait = np.where((ld.closed > 0) & over, np.maximum(ld.load / np.maximum(x, 1e-12) - b * r / np.maximum(x, 1e-12) - exec_s - wait, 0.0), 0.0)
    saturated = over | (rho >= 0.999)
    w90 = wait_quantile(wait, p_wait, 0.90)
    w99 = wait_quantile(wait, p_wait, 0.99)
    return {
        "batch": b, "requests_s": x, "tpot_s": tpot,
        "ttft_s": exec_s + wait + slot_wait,
        "ttft_p90_s": exec_s + w90 + slot_wait,
        "ttft_p99_s": exec_s + w99 + slot_wait,
        "saturated": saturated,
    }
