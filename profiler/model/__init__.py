"""The performance model (pure): catalogs of GPUs and models, memory fit, step times, queueing
and calibration maths. Times in ms at the surface (seconds inside), memory in GiB.

The front door: callers outside the model import these names from ``profiler.model`` (planner
may import nothing else of the profiler); the modules behind them are the model's own. Names are
loaded on first use (PEP 562), so importing the package costs nothing until one is needed.
"""

from __future__ import annotations

from importlib import import_module
from typing import Any

# public name → the module of the model that defines it
_EXPORTS: dict[str, str] = {
    "Estimate": "estimate_result",
    **dict.fromkeys(("Figures", "ItlParts", "Memory", "PART_LABELS", "Parallel", "Prediction",
                     "ServingConfig", "TtftParts", "Unbounded", "ms_text"), "config"),
    **dict.fromkeys(("FREE_FRACTION_BACKENDS", "MEMORY_FRACTION", "check_parallel", "default_max_num_tokens"),
                    "engine"),
    **dict.fromkeys(("ModelError", "UnknownName"), "errors"),
    **dict.fromkeys(("SPREAD_BETWEEN", "SPREAD_WITHIN"), "error_spread"),
    **dict.fromkeys(("Prepared", "estimate", "evaluate", "prediction", "prepare", "stack_prepared"), "estimate"),
    **dict.fromkeys(("GPUS", "Gpu", "backend_mismatch", "get_gpu", "runs_on"), "gpus"),
    **dict.fromkeys(("is_hub_id", "resolve_model"), "model_catalog"),
    "Model": "models",
    "shipped_params": "params",
    **dict.fromkeys(("check_precision", "default_kv_dtype"), "precision"),
    **dict.fromkeys(("first_token", "first_token_steps", "prefill_batching", "prefill_capacity"), "serving"),
    **dict.fromkeys(("accepted_per_step", "decode_step_s"), "steps"),
    "ttft_error_factor": "ttft_error",
}
__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(import_module(f"{__name__}.{module}"), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return __all__
