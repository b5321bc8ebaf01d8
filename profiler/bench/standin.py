"""genai-bench iterations as a performance model predicts them: stand-in measurements for
rehearsing and benchmarking the online search where the truth is known (a model with other
parameters than the planner's plays the deployment)."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Protocol

from profiler.bench.results import IterationMetrics, Percentiles

REQUESTS = 16  # requests per stand-in iteration


class _Point(Protocol):
    concurrency: int
    ttft_ms: float
    itl_ms: float
    output_tok_s: float


def model_iterations(points: Iterable[_Point], isl: int, osl: int, label: str) -> list[IterationMetrics]:
    """One iteration per point (``planner.online.SweepPoint``): scenario ``D(isl,osl)``, the point's
    means as every statistic, throughputs from its output tokens/s; file names start with ``label``."""
    out = []
    for p in points:
        e2e = p.ttft_ms + (osl - 1) * p.itl_ms
        out.append(IterationMetrics(
            scenario=f"D({isl},{osl})", concurrency=p.concurrency, file=f"{label}-c{p.concurrency}.json",
            requests=REQUESTS, errors=0, error_rate=0.0, duration_s=REQUESTS * e2e / 1e3 / p.concurrency,
            requests_per_s=p.output_tok_s / osl, output_tok_s=p.output_tok_s, input_tok_s=p.output_tok_s * isl / osl,
            mean_input_tokens=isl, mean_output_tokens=osl, ttft=Percentiles(mean_ms=p.ttft_ms),
            tpot=Percentiles(mean_ms=p.itl_ms), e2e=Percentiles(mean_ms=e2e)))
    return out
