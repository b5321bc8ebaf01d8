"""The two sides of the model's time a deployment's measurements can scale apart (pure).

Every efficiency and fixed cost of the model sits on one side of a request's life: the prefill
side (prompt GEMMs and attention, the per-layer cost of a prefill chunk, the per-request cost
before the first step, the KV handoff), which mostly sets TTFT, or the decode side (weight
streaming, KV-cache reads, the per-step, per-layer and per-sequence costs of a decode step),
which mostly sets TPOT. Collectives run on both and take the geometric mean of the two factors.
What a measurement's harness adds is on neither side: it is no engine's time (``harness.py``).
A factor above 1 makes that side's times longer: its efficiencies are divided by it and its fixed
costs multiplied. Equal factors make every time the model predicts that much longer.
"""

from __future__ import annotations

import math

from profiler.model.harness import is_harness

# side -> the parameters on it: exact names, or prefixes ending in "_" (one per backend).
SIDES: dict[str, tuple[str, ...]] = {
    "prefill": ("eff_gemm", "eff_fp4", "eff_attn", "eff_attn_mla", "prefill_layer_us", "prefill_moe_layer_us",
                "kv_transfer_eff", "ttft_ms_"),
    "decode": ("eff_hbm", "eff_kv", "eff_mla", "step_ms_", "layer_us", "moe_layer_us", "sparse_layer_us",
               "seq_us", "cdna3_layer_us", "cdna4_layer_us"),
}
SIDE_NAMES = tuple(SIDES)


def is_efficiency(name: str) -> bool:
    """Whether ``name`` is an efficiency (a share of a peak: longer times divide it)."""
    return name.startswith("eff_") or name.endswith("_eff")


def is_time(name: str) -> bool:
    """Whether ``name`` is an efficiency or a fixed cost (µs or ms) of the engine, i.e. a scale
    changes it; a harness's term (``harness.is_harness``) is the measurement's, no scale's."""
    return not is_harness(name) and (is_efficiency(name) or name.endswith(("_us", "_ms")) or "_ms_" in name)


def side_of(name: str) -> str | None:
    """The side ``name`` is on ("prefill" or "decode"); None for collectives (both sides) and for
    what no scale changes."""
    for side, members in SIDES.items():
        if any(name == m or (m.endswith("_") and name.startswith(m)) for m in members):
            return side
    return None


def scaled_sides(params: dict[str, float], factors: dict[str, float]) -> dict[str, float]:
    """``params`` with each side's times ``factors[side]`` × longer (a side left out: 1) and the
    collectives' by the geometric mean of the two."""
    both = math.sqrt(math.prod(factors.get(s, 1.0) for s in SIDE_NAMES))
    out = dict(params)
    for name, value in params.items():
        if not is_time(name):
            continue
        side = side_of(name)
        factor = factors.get(side, 1.0) if side else both
        out[name] = value / factor if is_efficiency(name) else value * factor
    return out


def scaled(params: dict[str, float], scale: float) -> dict[str, float]:
    """``params`` with every time ``scale`` × longer: efficiencies divided, fixed costs multiplied."""
    return scaled_sides(params, dict.fromkeys(SIDE_NAMES, scale))
