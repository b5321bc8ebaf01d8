"""The performance model's entry points: ``estimate`` for one configuration, ``prepare`` +
``evaluate`` for many at once (vectorized; used by calibration and batch estimates)."""

from __future__ import annotations

from functools import lru_cache
from typing import TYPE_CHECKING, NamedTuple

import numpy as np

from profiler.model.config import Figures, ItlParts, Memory, Parallel, Prediction, ServingConfig, TtftParts
from profiler.model.engine import RESERVES_WHOLE_OUTPUT, default_max_num_tokens, engine_shape, held_tokens, max_batch_per_rank
from profiler.model.errors import ModelError
from profiler.model.gpus import backend_mismatch, get_gpu
from profiler.model.models import Model
from profiler.model.params import shipped_params
from profiler.model.precision import KV_DTYPES, check_precision, default_kv_dtype
from profiler.model.serving import Load, features, solve, stack

if TYPE_CHECKING:
    from profiler.model.estimate_result import Estimate


class Prepared(NamedTuple):
    """One configuration reduced to numbers: decode/prefill features and its load."""

    decode: dict[str, float]
    prefill: dict[str, float]
    load: dict[str, float]
    total_gpus: int
    memory: dict[str, Memory]


def _resolve(config: ServingConfig, model: Model | None) -> tuple[Model, str]:
    if model is not None:
        return model, check_precision(config.precision or model.native_precision)
    found, implied = _resolve_name(config.model)
    return found, check_precision(config.precision or implied)


_gpu = lru_cache(maxsize=64)(get_gpu)  # alias matching costs more than the arithmetic


DEFAULT_SPEC_ACCEPTANCE = 0.7  # chance a drafted token is accepted when the config does not say


@lru_cache(maxsize=512)
def _resolve_name(name: str) -> tuple[Model, str]:
    """``resolve_model``, remembered: the catalog is fixed, and the lookup costs more than a
    whole estimate's arithmetic (failures are not cached; they raise again)."""
    from profiler.model.model_catalog import resolve_model

    return resolve_model(name)


def prepare(config: ServingConfig, model: Model | None = None) -> Prepared:
    """Resolve names and compute every parameter-independent quantity of ``config``."""
    arch, precision = _resolve(config, model)
    gpu = _gpu(config.gpu)
    mismatch = backend_mismatch(config.backend, gpu)
    if mismatch:
        raise ModelError("backend", mismatch)
    kv_dtype = (config.kv_dtype or default_kv_dtype(precision)).lower()
    if kv_dtype not in KV_DTYPES:
        raise ModelError("kv_dtype", f"unknown KV-cache dtype {config.kv_dtype!r}; known: {', '.join(KV_DTYPES)}")
    chunk = config.max_num_tokens or default_max_num_tokens(config.backend, gpu)
    context = held_tokens(config.backend, config.isl_tokens, config.osl_tokens)

    def shape(par: Parallel, role: str):
        return engine_shape(arch, gpu, config.backend, precision, kv_dtype, par, role, chunk, context)

    if config.mode == "agg":
        dec = pre = shape(config.engine, "engine")
        decode_engines, prefill_servers = config.replicas, config.replicas * config.engine.dp
        total = config.replicas * config.engine.gpus
        memory = {"engine": dec.memory}
    else:
        pre = shape(config.prefill, "prefill")
        dec = shape(config.decode, "decode")
        decode_engines = config.decode_workers
        prefill_servers = config.prefill_workers * config.prefill.dp
        total = config.prefill_workers * config.prefill.gpus + config.decode_workers * config.decode.gpus
        memory = {"prefill": pre.memory, "decode": dec.memory}
        if pre.kv_tokens_per_rank < config.isl_tokens:
            raise ModelError("prefill", f"a prefill rank holds {pre.kv_tokens_per_rank} KV tokens, fewer than ISL {config.isl_tokens}")
    cap = max_batch_per_rank(dec, context, config.max_batch)
    if max_batch_per_rank(dec, context, None) < 1:  # a limit below one per rank spreads over ranks; the KV cache may not
        # Name the length at fault: ISL when the prompt alone is too long, else OSL.
        field = "isl_tokens" if config.isl_tokens >= dec.kv_tokens_per_rank else "osl_tokens"
        held = ("ISL + OSL, what TRT-LLM reserves" if config.backend in RESERVES_WHOLE_OUTPUT
                else "ISL + OSL/2, its mean context")
        raise ModelError(field, f"one sequence of {context:.0f} tokens ({held}) does not "
                                f"fit the KV cache ({dec.kv_tokens_per_rank} tokens per rank)")
    closed = config.request_rate is None
    load = {
        "isl": config.isl_tokens, "osl": config.osl_tokens,
        "decode_engines": decode_engines, "prefill_servers": prefill_servers,
        "disagg": 1.0 if config.mode == "disagg" else 0.0,
        "closed": 1.0 if closed else 0.0,
        "load": (config.concurrency or 1.0) if closed else config.request_rate,
        "batch_cap": cap,
    }
    accept = (config.spec_acceptance or DEFAULT_SPEC_ACCEPTANCE) if config.spec_tokens else 0.0
    return Prepared(features(dec, config.backend, chunk, config.spec_tokens, accept),
                    features(pre, config.backend, chunk), load, total, memory)


class Batch(NamedTuple):
    """Many prepared configurations stacked into arrays."""

    decode: dict[str, np.ndarray]
    prefill: dict[str, np.ndarray]
    load: dict[str, np.ndarray]
    gpus: np.ndarray


def stack_prepared(prepared: list[Prepared]) -> Batch:
    return Batch(stack([x.decode for x in prepared]), stack([x.prefill for x in prepared]),
                 stack([x.load for x in prepared]), np.array([x.total_gpus for x in prepared], dtype=float))


def evaluate(prepared: list[Prepared] | Batch, params: dict[str, float] | None = None) -> dict[str, np.ndarray]:
    """Solve many prepared configurations at once; times in ms, throughput per second."""
    p = params or shipped_params()
    batch = prepared if isinstance(prepared, Batch) else stack_prepared(prepared)
    return _outputs(batch.decode, batch.prefill, batch.load, batch.gpus, p)


def _evaluate_one(prep: Prepared, params: dict[str, float] | None) -> dict[str, np.ndarray]:
    """``evaluate`` of one configuration on numpy scalars: the same maths without the
    per-operation overhead numpy has on arrays (about twice as fast for a single row)."""
    scalars = lambda d: {k: np.float64(v) for k, v in d.items()}  # noqa: E731
    return _outputs(scalars(prep.decode), scalars(prep.prefill), scalars(prep.load),
                    np.float64(prep.total_gpus), params or shipped_params())


# ``solve``'s pieces of the mean TTFT and of the TPOT (s), each group adding up to its total.
_PARTS = ("ttft_fixed_s", "ttft_prefill_s", "ttft_transfer_s", "ttft_first_step_s", "ttft_queue_s", "ttft_burst_s",
          "tpot_step_s", "tpot_interference_s")


def _outputs(fd, fp, ld, gpus, p) -> dict[str, np.ndarray]:
    """Solve the operating point and express it in the units ``evaluate`` reports."""
    out = solve(fd, fp, Load(**ld), p)
    return {
        "ttft_ms": out["ttft_s"] * 1e3,
        "ttft_p50_ms": out["ttft_p50_s"] * 1e3,
        "ttft_p90_ms": out["ttft_p90_s"] * 1e3,
        "ttft_p99_ms": out["ttft_p99_s"] * 1e3,
        "itl_ms": out["tpot_s"] * 1e3,
        "requests_per_s": out["requests_s"],
        "output_tok_s_per_gpu": out["requests_s"] * ld["osl"] / gpus,
        "tok_s_per_user": 1.0 / out["tpot_s"],
        "decode_batch": out["batch"] * fd["dp"],
        "saturated": out["saturated"],
        **{name[:-2] + "_ms": out[name] * 1e3 for name in _PARTS},
    }


def estimate(config: ServingConfig, *, params: dict[str, float] | None = None, model: Model | None = None) -> Estimate:
    """Predict TTFT, ITL, throughput and memory of one configuration under its load.

    ``model`` replaces the catalog lookup of ``config.model`` (e.g. a parsed config.json).
    Raises ``ModelError`` (naming the field) for invalid or infeasible configurations.
    """
    from profiler.model.estimate_result import Estimate  # its model is built for this use only

    prep = prepare(config, model)
    r = _evaluate_one(prep, params)
    return Estimate(**_figures(r), total_gpus=prep.total_gpus, decode_batch=float(r["decode_batch"]),
                    saturated=bool(r["saturated"]), memory=prep.memory, ttft_parts=_ttft_parts(r), itl_parts=_itl_parts(r))


def prediction(out, *, concurrency: float) -> Prediction:
    """The prediction of one configuration's ``evaluate`` outputs (scalars) with ``concurrency``
    requests in flight."""
    return Prediction(**_figures(out), concurrency=concurrency, ttft_parts=_ttft_parts(out), itl_parts=_itl_parts(out))


def _figures(out) -> dict[str, float]:
    """The figures of one configuration's ``evaluate`` outputs (scalars), by field name."""
    return {name: float(out[name]) for name in Figures.model_fields}


def _ttft_parts(out) -> TtftParts:
    """The TTFT parts of one configuration's ``evaluate`` outputs (scalars, ms)."""
    return TtftParts(frontend_ms=float(out["ttft_fixed_ms"]), prefill_ms=float(out["ttft_prefill_ms"]),
                     kv_transfer_ms=float(out["ttft_transfer_ms"]), first_step_ms=float(out["ttft_first_step_ms"]),
                     queueing_ms=float(out["ttft_queue_ms"]), burst_ms=float(out["ttft_burst_ms"]))


def _itl_parts(out) -> ItlParts:
    """The ITL parts of one configuration's ``evaluate`` outputs (scalars, ms)."""
    return ItlParts(decode_step_ms=float(out["tpot_step_ms"]), prefill_interference_ms=float(out["tpot_interference_ms"]))
