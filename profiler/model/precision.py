"""Number formats: bytes per element and which tensor-core dtype the math runs in."""

from __future__ import annotations

from profiler.model.errors import ModelError

PRECISIONS = ("bf16", "fp8", "fp4", "int4")
KV_DTYPES = ("bf16", "fp8", "fp4")

# Bytes per weight element, block scales included (NVFP4: 4 bits + an fp8 scale per 16;
# int4: 4 bits + a bf16 scale per group of 128).
WEIGHT_BYTES = {"bf16": 2.0, "fp16": 2.0, "fp8": 1.0, "fp4": 0.5625, "int4": 0.516}
KV_BYTES = {"bf16": 2.0, "fp16": 2.0, "fp8": 1.0, "fp4": 0.5625}


def check_precision(precision: str, field: str = "precision") -> str:
    p = precision.lower()
    if p == "fp16":
        return "bf16"
    if p not in PRECISIONS:
        raise ModelError(field, f"unknown precision {precision!r}; known: {', '.join(PRECISIONS)}")
    return p


def default_kv_dtype(precision: str) -> str:
    """KV-cache dtype engines pick by default: fp8 for fp8/fp4 checkpoints, else bf16."""
    return "fp8" if precision in ("fp8", "fp4") else "bf16"


def mlp_compute_dtype(precision: str) -> str:
    """Tensor-core dtype of the MLP / expert GEMMs (int4 weights are dequantized to bf16)."""
    return {"int4": "bf16"}.get(precision, precision)


def attention_weight_precision(precision: str) -> str:
    """4-bit checkpoints keep attention projections in a wider format (fp8 for fp4, bf16 for int4)."""
    return {"fp4": "fp8", "int4": "bf16"}.get(precision, precision)
