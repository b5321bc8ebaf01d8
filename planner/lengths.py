"""The token lengths a request assumes when it states none, per DGDR API version (standard library
only: the CLI's argument defaults read them without loading the planner)."""

from __future__ import annotations

from typing import NamedTuple


class Lengths(NamedTuple):
    """Tokens per request: input (prompt) and output."""

    isl_tokens: int
    osl_tokens: int


V1ALPHA1_LENGTHS = Lengths(isl_tokens=3000, osl_tokens=500)
"""A v1alpha1 request's lengths when neither ``workload``, ``sla`` nor the profiler config states them."""
V1BETA1_LENGTHS = Lengths(isl_tokens=4000, osl_tokens=1000)
"""A v1beta1 request's lengths when ``workload`` does not state them."""
