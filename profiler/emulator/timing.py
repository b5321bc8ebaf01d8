"""The emulator's step times, taken from the performance model for one engine configuration."""

from __future__ import annotations

from typing import Literal

from profiler.model.config import Backend, Parallel, ServingConfig
from profiler.emulator.engine import Timing
from profiler.model.estimate import prepare
from profiler.model.models import Model
from profiler.model.params import shipped_params
from profiler.model.steps import by_backend, decode_step_s, prefill_s

Mode = Literal["agg", "prefill", "decode"]

# Nominal request shape used only to size the engine's memory (activations, KV budget).
_NOMINAL_ISL, _NOMINAL_OSL = 1024, 256


def serving_config(model: str, gpu: str, backend: Backend, parallel: Parallel, mode: Mode, *,
                   precision: str | None = None, kv_dtype: str | None = None,
                   max_batch: int | None = None, max_num_tokens: int | None = None) -> ServingConfig:
    """The ServingConfig describing one engine of ``mode`` (one copy, concurrency 1)."""
    common = dict(model=model, gpu=gpu, backend=backend, precision=precision, kv_dtype=kv_dtype,
                  max_batch=max_batch, max_num_tokens=max_num_tokens,
                  isl_tokens=_NOMINAL_ISL, osl_tokens=_NOMINAL_OSL, concurrency=1.0)
    if mode == "agg":
        return ServingConfig(mode="agg", engine=parallel, **common)
    return ServingConfig(mode="disagg", prefill=parallel, decode=parallel, **common)


def model_timing(config: ServingConfig, mode: Mode = "agg", *, speed: float = 1.0,
                 params: dict[str, float] | None = None, arch: Model | None = None) -> tuple[Timing, int]:
    """Step times of one engine of ``config`` (``mode`` picks its role) and its attention ranks.

    Raises ``ModelError`` (naming the field) when the configuration does not fit or is unknown.
    """
    p = params or shipped_params()
    prep = prepare(config, arch)
    fd = prep.decode if mode != "prefill" else prep.prefill
    fp = prep.prefill
    ranks = int(fd["dp"])
    fixed = float(by_backend(fp, p, "ttft_ms")) * 1e-3
    per_rank_limit = int(fd["seq_limit"]) if config.max_batch is None else max(1, config.max_batch // ranks)

    def decode(batch: int, context: float) -> float:
        return float(decode_step_s(fd, p, float(batch), float(context)))

    def prefill(tokens: float, prompts: int = 1) -> float:
        return float(prefill_s(fp, p, float(tokens), float(prompts)))

    timing = Timing(decode_step_s=decode, prefill_s=prefill, fixed_s=fixed, max_batch=per_rank_limit,
                    max_num_tokens=int(fd["max_num_tokens"]), kv_tokens=int(fd["kv_tokens_per_rank"]),
                    speed=speed, prefill_only=mode == "prefill", skip_prefill=mode == "decode")
    return timing, ranks
