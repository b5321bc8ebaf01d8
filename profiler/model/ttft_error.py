"""The model's TTFT error as a factor plans keep in hand (pure; reads only the package's data).

``data/ttft_error.json`` (written by ``benchmarks/ttft_margin.py``) holds a quantile of the ratio
measured / predicted TTFT over the calibration rows, each predicted by parameters fitted without
its model family (every family weighing the same), and the same quantile without each family's
own rows. A predicted TTFT times the factor is what a configuration the fit has not seen measures
at most, for that share of configurations.
"""

from __future__ import annotations

from profiler.model.errors import ModelError
from profiler.model.params import shipped_ttft_error

__all__ = ["ttft_error_factor"]


def ttft_error_factor(without_family: str | None = None) -> float:
    """The factor (≥ 1; 1 when nothing was measured) a predicted TTFT is multiplied by before it
    is held against a target: the shipped quantile of held-out measured / predicted TTFT, or, with
    ``without_family`` (a model family as ``calibrate.family`` names it), the same fitted without
    that family's rows. Raises ModelError for a family the file does not know."""
    shipped = shipped_ttft_error()
    if without_family is None:
        factor = shipped.get("factor", 1.0)
    else:
        known = shipped.get("without_family", {})
        if without_family not in known:
            raise ModelError("without_family", f"no TTFT error factor fitted without {without_family!r}")
        factor = known[without_family]
    return max(1.0, float(factor))
