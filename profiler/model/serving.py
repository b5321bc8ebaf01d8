"""Serving under load: continuous batching, prefill queues, and the closed-loop balance.

Element-wise over configurations (floats or numpy arrays). The free variable is ``b``,
the mean number of sequences decoding on one attention rank of a decode (or aggregated)
engine. Given b, everything else follows in closed form:

  t_dec  = decode_step(b, context = ISL + OSL/2)                 one iteration (s)
  T_pass, T_pf = the prefill pass a prompt is in, and prefill work per prompt (s): prompts
           arriving together share a pass (up to max_num_tokens), so T_pf falls with load
  e      = tokens a sequence emits per iteration: 1, more with speculative decoding
  aggregated (chunked prefill shares the iterations):
    TPOT = (t_dec + b·e·T_pf/(OSL − 1)) / e,   X_rank = b / ((OSL − 1)·TPOT)
  disaggregated:
    TPOT = t_dec / e,                          X_rank = b / ((OSL − 1)·TPOT)
  X      = X_rank × attention ranks per engine × engines          requests/s
  TTFT   = fixed + W_prefill(X) + T_pass + [KV transfer] + (1 to 1.5)·t_dec  W from M/D/c
           (queueing.py); the iteration that emits the first token, and half of the one in
           progress when the prompt is ready, if the rank is decoding others (first_token_steps)

For a closed loop of C clients, Little's law gives C = (sequences decoding) + X·TTFT;
the right side grows with b, so b is found by bisection. When the batch limit (slots or
KV memory) binds first, the remaining clients wait for a slot and that wait joins TTFT.
For a Poisson rate λ, b solves X(b) = λ; a rate above what the deployment serves (at its
full batch) has no steady state, and its TTFT is unbounded (inf). Disaggregated, X cannot
exceed what the prefill pool prefills (``prefill_capacity``): b stops at the batch where it
would, and the clients (or arrivals) beyond it wait for prefill.
"""

from __future__ import annotations

import math
from functools import lru_cache
from typing import NamedTuple

import numpy as np

from profiler.model.engine import EngineShape
from profiler.model.queueing import mdc_wait, unplaced_clients, wait_quantile
from profiler.model.steps import (BACKENDS, accepted_per_step, by_backend, choose, decode_gemms_s, decode_step_s,
                            mixed_prefill_s, prefill_s, vmax, vmin)

_DTYPE_CODE = {"bf16": 0, "fp8": 1, "fp4": 2}
_ROOT_XTOL = 1e-12  # bracket width, relative to its upper end, at which a root is taken
_ROOT_STEPS = 100
# Backends whose aggregated engines put prompt chunks into decode iterations by default
# (SGLang schedules prefill batches of their own unless mixed chunks are enabled).
MIXES_PREFILL = ("vllm", "trtllm")
# Share of a closed loop's mean burst wait the median request waits. Aggregated, none: the wait
# falls on the fewer requests that arrive together, not on the typical one (InferenceX's median
# TTFTs on AMD GPUs stay flat from 4 to 64 clients while their means grow; held out, each AMD GPU
# type, a median with the whole burst in it is 43–108% off against 14–20% without). Disaggregated,
# all of it: every prompt queues at the prefill pool the clients share, and the medians grow with
# clients as the means do (MI355X held out 65.0% → 51.3%; never fitted, the NVIDIA results' H200
# 70.0% → 55.1%). docs/accuracy.md#the-median-ttft.
AGG_BURST_MEDIAN_SHARE = 0.0
DISAGG_BURST_MEDIAN_SHARE = 1.0


@lru_cache(maxsize=1)
def _numeric_fields() -> tuple[str, ...]:
    """EngineShape's numeric fields (what the step-time model reads), found once from their declared types."""
    return tuple(name for name, kind in EngineShape.__annotations__.items() if kind in (int, float))


def features(shape: EngineShape, backend: str, max_num_tokens: int, spec_tokens: int = 0,
             spec_accept: float = 0.0) -> dict[str, float]:
    """The numbers the step-time model reads for one engine role (``spec_*``: speculative
    decoding's drafted tokens per step and their acceptance chance, for a decoding role)."""
    out = {name: getattr(shape, name) for name in _numeric_fields()}
    out["moe_dtype"] = _DTYPE_CODE.get(shape.compute_dtype, 0)
    out["dense_dtype"] = 1 if shape.peak_dense_flops > shape.peak_attn_flops else 0
    out["backend"] = BACKENDS.index(backend)
    out["mixes_prefill"] = float(backend in MIXES_PREFILL)
    out["max_num_tokens"] = max_num_tokens
    out["spec_tokens"] = spec_tokens
    out["spec_accept"] = spec_accept
    return out


def stack(rows: list[dict[str, float]]) -> dict[str, np.ndarray]:
    """Turn per-configuration feature dicts into one dict of arrays."""
    return {k: np.array([r[k] for r in rows], dtype=float) for k in rows[0]}


class Load(NamedTuple):
    """Element-wise serving inputs: pools, lengths and the load (all arrays or floats).

    ``decode_engines`` decode (or aggregated) engines; ``prefill_servers`` attention ranks
    that prefill (disaggregated only; aggregated engines prefill on their own ranks);
    ``disagg`` is 1 for disaggregated rows; ``closed`` is 1 when ``load`` is a concurrency,
    0 when it is a request rate; ``batch_cap`` caps b (sequences per attention rank);
    ``harness_ms`` is what the harness that measured a calibration row adds to its TTFT (ms,
    ``harness.py``), or what the client a plan's SLA is measured by adds (the request's
    ``harness_ttft_ms``); 0 for a deployment alone.
    """

    isl: object
    osl: object
    decode_engines: object
    prefill_servers: object
    disagg: object
    closed: object
    load: object
    batch_cap: object
    harness_ms: object = 0.0


def prefill_batching(fp, p, isl):
    """How prompts share prefill passes: (one prompt's prefill s, added s per further prompt,
    most per pass, pipeline stages, one prompt's prefill s while every attention-DP rank of the
    engine prefills one).

    A pass takes up to ``max_num_tokens`` tokens, so up to that many ISL-token prompts; the
    time of a k-prompt pass is taken as linear between one prompt and a full pass. With pp
    pipeline stages a pass takes its time through all of them, but the first stage is free for
    the next pass after 1/pp of it. The last is what a pass takes when the ranks prefill together
    (the experts they share run every rank's tokens): at least the first, equal to it for an
    engine of one attention rank.
    """
    k_max = vmax(np.floor(fp["max_num_tokens"] / vmax(isl, 1.0)), 1.0)
    t1 = prefill_s(fp, p, isl)
    full = prefill_s(fp, p, isl, k_max)
    added = choose(k_max > 1, (full - t1) / vmax(k_max - 1.0, 1.0), t1)
    return t1, added, k_max, fp["pp"], prefill_s(fp, p, isl, ranks=fp["dp"])


def batched_prefill(pf, rate, servers):
    """(s of the pass a prompt is prefilled in, s of prefill work per prompt) at ``rate`` prompts/s.

    Prompts that arrive while a pass holds the server are prefilled together in the next one,
    so a pass holds about 1 + (prompts arriving per server during one prompt's prefill) prompts:
    the weights are streamed and the kernels launched once for all of them. A pipelined server
    is held for one stage's share of the pass (the work per prompt is that share).
    """
    t1, added, k_max, stages, _ = pf
    k = vmin(1.0 + rate * t1 / (stages * servers), k_max)
    t_pass = t1 + added * (k - 1.0)
    return t_pass, t_pass / (k * stages)


def prefill_capacity(pf, servers):
    """Most prompts/s ``servers`` prefill ranks can prefill (``pf`` is ``prefill_batching``).

    With prompts sharing passes as ``batched_prefill`` says, a server is busy all the time
    when u = rate·t1/(pp·servers) solves u·(t1 + added·u) = t1·(1 + u), i.e. u = √(t1/added);
    past a full pass (1 + u > most per pass) the capacity is full passes back to back (a
    pipeline of pp stages starts one every 1/pp of a pass).
    """
    t1, added, k_max, stages, _ = pf
    u = np.sqrt(t1 / vmax(added, 1e-300))
    return choose(1.0 + u <= k_max, stages * servers * u / t1,
                  stages * servers * k_max / (t1 + added * (k_max - 1.0)))


def rank_balance_hold(fd, p, ld: Load, b, x, t_dec):
    """Time (s) an aggregated TRT-LLM attention-DP engine holds a prompt before prefilling it.

    A prefill on one rank stalls every rank's decode (the ranks meet in each layer's expert
    all-to-all), so TRT-LLM's attention-DP balancing holds prompts until every rank has one to
    prefill in the same iteration, or until ``dp_hold_iters_trtllm`` decode iterations have
    passed. It holds only while every rank is decoding (``b`` sequences per rank, 1 − e^−b of
    the ranks busy), and then a prompt waits the shorter of that timeout and the time until
    every rank has received one of the engine's ``x`` requests/s, about H(dp)/(x per rank)
    seconds (H the harmonic number). vLLM and SGLang prefill each rank's prompts as they come
    (zero).
    """
    dp = vmax(fd["dp"], 1.0)
    busy = (-np.expm1(-vmax(b, 1e-9))) ** dp
    all_ranks = (np.log(dp) + np.euler_gamma + 0.5 / dp) * dp * ld.decode_engines / vmax(x, 1e-12)
    hold = busy * vmin(p["dp_hold_iters_trtllm"] * t_dec, all_ranks)
    return choose((fd["dp"] > 1) & (fd["backend"] == BACKENDS.index("trtllm")) & (ld.disagg == 0), hold, 0.0)


def _at(fd, fp, ld: Load, p, b, pf):
    """Everything at decode batch ``b``: returns (X, TPOT, TTFT pieces, wait stats, attention
    ranks serving, one decode iteration's s).

    ``pf`` is ``prefill_batching`` of the prefill role (it does not depend on ``b``).
    """
    ctx = ld.isl + ld.osl / 2.0
    steps_after_first = vmax(ld.osl - 1.0, 1.0)
    gemms = decode_gemms_s(fd, p, b)
    t_dec = decode_step_s(fd, p, b, ctx, gemms)
    agg = 1.0 - ld.disagg
    ranks = fd["dp"] * ld.decode_engines
    servers = choose(ld.disagg > 0, ld.prefill_servers, ranks)
    # A closed loop's clients stay roughly in step, so part of a round's prompts is prefilled
    # before their peers' first tokens (fitted share ``closed_interference_<backend>``; all under Poisson).
    share = choose(ld.closed > 0, by_backend(fd, p, "closed_interference"), 1.0)
    # Aggregated, ``r`` prompts per iteration per rank. Engines that mix prefill into decode
    # iterations (chunked prefill) lengthen a fraction r/k of them by k prompts' prefill (one
    # when fewer than one a step); SGLang runs prefill batches of their own between them.
    # With speculative decoding an iteration emits ``e`` tokens per sequence, so fewer are needed.
    e = accepted_per_step(fd)
    r = share * b * e / steps_after_first

    def mixed():
        k = vmin(vmax(r, 1.0), pf[2])
        return (r / k) * mixed_prefill_s(fd, p, b, ld.isl, k, gemms)

    def separate():
        return r * batched_prefill(pf, b * ranks / (steps_after_first * t_dec), servers)[1]

    mixes = fd["mixes_prefill"]
    if type(mixes) is not np.ndarray:  # one configuration: only its own kind
        interference = mixed() if mixes > 0 else separate()
    else:
        interference = np.where(mixes > 0, mixed(), separate())
    tpot = (t_dec + agg * interference) / e
    x = b * ranks / (steps_after_first * tpot)
    clients = ld.closed * ld.load  # 0 for Poisson arrivals
    t_first = t_dec * first_token_steps(b, clients)
    exec_s, wait, burst, p_wait, rho = first_token(fp, p, ld.isl, pf, t_first, x, servers, clients, ld.disagg,
                                                   ld.harness_ms)
    exec_s = exec_s + rank_balance_hold(fd, p, ld, b, x, t_dec)
    return x, tpot, exec_s, wait, burst, p_wait, rho, ranks, t_dec


def first_token_steps(b, clients):
    """Decode iterations in a TTFT at ``b`` sequences per decode rank: the one that emits the
    prompt's first token and, when the rank is decoding other sequences as the prompt becomes
    ready (arrived, or prefilled and shipped), the rest of the iteration in progress, half of one
    on average. An arrival finds the time-average batch decoding (Poisson arrivals: ``clients``
    0), or in a closed loop of C ``clients`` the other C − 1 clients' share of it; the rank is
    busy unless none is there (chance e^−others)."""
    others = choose(clients > 0, b * vmax(clients - 1.0, 0.0) / vmax(clients, 1e-9), b)
    return 1.0 + 0.5 * -np.expm1(-others)


def first_token(fp, p, isl, pf, t_first, rate, servers, clients, disagg, harness_ms=0.0):
    """TTFT pieces (s) for prompts arriving at ``rate`` (1/s) to ``servers`` prefill ranks.

    ``pf`` is ``prefill_batching`` of the prefill role; ``t_first`` the decode iterations in
    a TTFT (``first_token_steps``, s). Returns (execution time, mean
    queueing wait, mean burst wait, probability of queueing, utilization). ``clients``
    is the closed-loop concurrency (0 for a Poisson load): closed loops with similar
    request lengths stay partly in step, so clients tend to return together and queue
    behind each other's prompts; that wait grows with the clients per prefill rank (the
    fitted fraction ``*_burst``) and replaces the M/D/c wait of Poisson arrivals. Disaggregated,
    the returning wave holds prompts on every attention-DP rank of a prefill engine at once, so it
    drains at the pace of passes in which the shared experts run every rank's tokens
    (``prefill_batching``'s last value over its first, 1 with one rank). ``harness_ms``:
    what a measurement's harness adds (``Load.harness_ms``).
    """
    fixed, t_pass, transfer, per_prompt = first_token_pieces(fp, p, isl, pf, rate, servers, disagg, harness_ms)
    if type(clients) is not np.ndarray and clients > 0:  # one closed loop: no M/D/c wait to compute
        mean_w, p_wait, rho = 0.0, 0.0, rate * per_prompt / servers
    else:
        mean_w, p_wait, rho = mdc_wait(rate, per_prompt, servers, poisson=clients <= 0)
    dis = disagg > 0
    wave = choose(dis, p["disagg_burst"] * pf[4] / pf[0], by_backend(fp, p, "agg_burst"))
    burst = wave * vmax(clients / servers - 1.0, 0.0) * per_prompt
    # Poisson arrivals wait as M/D/c says; a closed loop's synchronised returns are counted
    # by the burst term instead (fitted freely, an M/D/c share went to its lower bound).
    wait = choose(clients > 0, 0.0, mean_w)
    return fixed + t_pass + transfer + t_first, wait, burst, p_wait, rho


def first_token_pieces(fp, p, isl, pf, rate, servers, disagg, harness_ms=0.0):
    """The execution pieces of TTFT (s): the per-request fixed cost (the engine's, plus
    ``harness_ms`` of a measurement's harness), the prefill pass the
    prompt is in, (disaggregated) shipping its KV cache and linear state to decode; and the
    prefill work per prompt (s) that the pass's prompts share."""
    t_pass, per_prompt = batched_prefill(pf, rate, servers)
    handed = isl * fp["kv_bytes_tok_total"] + fp["state_bytes_seq"] * fp["tp"] * fp["pp"]  # KV + linear state
    transfer = disagg * handed / (fp["kv_transfer_bytes_s"] * p["kv_transfer_eff"])
    return (by_backend(fp, p, "ttft_ms") + harness_ms) * 1e-3, t_pass, transfer, per_prompt


def increasing_root(func, lo, hi, f_lo, f_hi):
    """Element-wise root of an increasing ``func`` bracketed by ``f_lo`` = func(lo) ≤ 0 < func(hi) = ``f_hi``.

    Illinois false position: superlinear on smooth functions, typically 5–15 evaluations
    instead of bisection's ~48 for the same precision; a bisection step wherever an end
    value is not finite (e.g. an unstable queue). Brackets of zero width are already done.
    Stops when every bracket is narrower than ``_ROOT_XTOL`` of its upper end and returns
    the midpoints.
    """
    lo, hi, f_lo, f_hi = (np.asarray(v, dtype=float) for v in (lo, hi, f_lo, f_hi))
    if lo.size == 1 and hi.size == 1:
        one = _illinois_one(func, float(lo.flat[0]), float(hi.flat[0]), float(f_lo.flat[0]), float(f_hi.flat[0]))
        return np.full(np.broadcast(lo, hi).shape, one)
    last = np.zeros(np.broadcast(lo, hi).shape)  # +1: the last step moved hi, -1: it moved lo
    for _ in range(_ROOT_STEPS):
        width = hi - lo
        if np.all(width <= _ROOT_XTOL * np.abs(hi)):
            break
        slope = f_hi - f_lo
        secant = np.isfinite(f_lo) & np.isfinite(f_hi) & (slope > 0)
        t = np.where(secant, lo - f_lo * width / np.where(secant, slope, 1.0), 0.5 * (lo + hi))
        t = np.minimum(np.maximum(t, lo), hi)
        f_t = func(t)
        high = f_t > 0
        # Illinois: an end kept twice in a row has its value halved, pulling the next point to it.
        f_lo = np.where(high, np.where(last > 0, 0.5 * f_lo, f_lo), f_t)
        f_hi = np.where(high, f_t, np.where(last < 0, 0.5 * f_hi, f_hi))
        exact = f_t == 0
        lo = np.where(high & ~exact, lo, t)
        hi = np.where(high | exact, t, hi)
        last = np.where(high, 1.0, -1.0)
    return 0.5 * (lo + hi)


def _illinois_one(func, lo: float, hi: float, f_lo: float, f_hi: float) -> float:
    """``increasing_root`` of one function, step for step the same, on floats."""
    last = 0.0
    for _ in range(_ROOT_STEPS):
        width = hi - lo
        if width <= _ROOT_XTOL * abs(hi):
            break
        slope = f_hi - f_lo
        secant = math.isfinite(f_lo) and math.isfinite(f_hi) and slope > 0
        t = lo - f_lo * width / slope if secant else 0.5 * (lo + hi)
        t = min(max(t, lo), hi)
        f_t = float(np.ravel(func(t))[0])
        if f_t == 0:
            return t
        if f_t > 0:
            f_lo = 0.5 * f_lo if last > 0 else f_lo
            hi, f_hi, last = t, f_t, 1.0
        else:
            f_hi = 0.5 * f_hi if last < 0 else f_hi
            lo, f_lo, last = t, f_t, -1.0
    return 0.5 * (lo + hi)


def _rows(values, pick):
    """Every array in ``values`` (a dict, a Load or a tuple) cut to the positions ``pick``."""
    cut = lambda v: v[pick] if type(v) is np.ndarray and v.ndim else v  # noqa: E731
    if isinstance(values, dict):
        return {k: cut(v) for k, v in values.items()}
    if isinstance(values, Load):
        return Load._make(cut(v) for v in values)
    return tuple(cut(v) for v in values)


def _prefill_bound(fd, fp, ld: Load, p, pf, cap):
    """``cap`` lowered, on disaggregated rows, to the decode batch at which decode serves as many
    requests as the prefill pool can prefill (``prefill_capacity``): beyond it the batch stops
    growing and further clients (or arrivals) wait for prefill. Returns (cap, where it binds)."""
    most = choose(ld.disagg > 0, prefill_capacity(pf, ld.prefill_servers), np.inf)
    beyond = _at(fd, fp, ld, p, cap, pf)[0] - most
    bound = beyond > 0
    if not np.any(bound):
        return cap, bound
    if type(bound) is not np.ndarray or bound.ndim == 0:
        served = lambda b: _at(fd, fp, ld, p, b, pf)[0] - most  # noqa: E731
        return increasing_root(served, 1e-9, cap, -most, beyond), bound
    pick = np.flatnonzero(bound)  # solve only the rows that are bound
    sub_fd, sub_fp, sub_ld, sub_pf, sub_most = _rows(fd, pick), _rows(fp, pick), _rows(ld, pick), _rows(pf, pick), most[pick]
    served = lambda b: _at(sub_fd, sub_fp, sub_ld, p, b, sub_pf)[0] - sub_most  # noqa: E731
    out = np.array(cap, dtype=float, copy=True)
    out[pick] = increasing_root(served, np.full(pick.size, 1e-9), cap[pick], -sub_most, beyond[pick])
    return out, bound


def solve(fd, fp, ld: Load, p) -> dict[str, np.ndarray]:
    """Operating point of every configuration: throughput, TPOT and TTFT (mean, p50, p90, p99), in s."""
    ranks = fd["dp"] * ld.decode_engines
    # A closed loop's requests are routed to disaggregated decode engines without regard to their
    # free slots: those that land on a full engine wait for a slot there even when others have room.
    # Aggregated replicas sit behind a router that balances load, so their clients spread evenly.
    placed = ld.load - unplaced_clients(ld.disagg * ld.closed * ld.load, ld.decode_engines, fd["dp"] * ld.batch_cap)
    cap = choose(ld.closed > 0, vmin(ld.batch_cap, placed / ranks), ld.batch_cap)
    cap = vmax(cap, 1e-6)
    pf = prefill_batching(fp, p, ld.isl)  # the same at every batch: computed once

    def excess(b):
        x, tpot, exec_s, wait, burst, _, _, r, _ = _at(fd, fp, ld, p, b, pf)
        demand = choose(ld.closed > 0, b * r + x * (exec_s + wait + burst), x)
        return demand - ld.load

    lo = np.zeros_like(cap) + 1e-9
    bound = False  # disaggregated rows whose prefill pool, not decode, limits the rate
    if np.any(ld.disagg > 0):
        cap, bound = _prefill_bound(fd, fp, ld, p, pf, cap)
    f_hi = excess(cap)
    over = f_hi <= 0  # even the full batch leaves load unserved
    f_lo = -ld.load * np.ones_like(cap)  # excess as b → 0: nothing served, the whole load outstanding
    b = np.where(over, cap, increasing_root(excess, np.where(over, cap, lo), cap, f_lo, f_hi))
    x, tpot, exec_s, wait, burst, p_wait, rho, r, t_dec = _at(fd, fp, ld, p, b, pf)
    # Poisson arrivals beyond what the deployment serves (its full batch, or what its prefill
    # pool prefills) queue without bound: the waits, and so every TTFT figure, are unbounded.
    wait = np.where((ld.closed == 0) & over, np.inf, wait)
    # Closed loop at the cap: clients beyond the running batch queue for a slot.
    rate = vmax(x, 1e-12)
    slot_wait = np.where((ld.closed > 0) & over,
                         np.maximum((ld.load - b * r) / rate - exec_s - wait - burst, 0.0), 0.0)
    base = exec_s + slot_wait
    fixed, t_pass, transfer, _ = first_token_pieces(fp, p, ld.isl, pf, x, choose(ld.disagg > 0, ld.prefill_servers, r),
                                                    ld.disagg, ld.harness_ms)
    step_per_token = t_dec / accepted_per_step(fd)
    # Burst waits: the median request's is ``*_BURST_MEDIAN_SHARE`` of their mean; the p90 and p99
    # read them as spread evenly between none and twice their mean (quantile q at 2q·mean; not
    # checked against measurements). A Poisson wait is zero for the 1 − p_wait of arrivals that
    # find a server free, so when fewer than 10% wait the p90 is the TTFT without waiting and the
    # mean (which counts the few that wait) is above it: right for that distribution, as an M/D/c
    # queue's own samples show.
    return {
        "batch": b, "requests_s": x, "tpot_s": tpot,
        # Where the mean TTFT and the TPOT go (s); each group adds up to its total.
        "ttft_fixed_s": fixed, "ttft_prefill_s": t_pass, "ttft_transfer_s": transfer,
        "ttft_first_step_s": t_dec * first_token_steps(b, ld.closed * ld.load),
        "ttft_queue_s": wait + slot_wait + rank_balance_hold(fd, p, ld, b, x, t_dec), "ttft_burst_s": burst,
        "tpot_step_s": step_per_token, "tpot_interference_s": tpot - step_per_token,
        "ttft_s": base + wait + burst,
        "ttft_p50_s": (base + wait_quantile(wait, p_wait, 0.50)
                       + choose(ld.disagg > 0, DISAGG_BURST_MEDIAN_SHARE, AGG_BURST_MEDIAN_SHARE) * burst),
        "ttft_p90_s": base + wait_quantile(wait, p_wait, 0.90) + 1.8 * burst,
        "ttft_p99_s": base + wait_quantile(wait, p_wait, 0.99) + 1.98 * burst,
        "saturated": over | (rho >= 0.999),
    }
