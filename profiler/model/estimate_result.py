"""``Estimate``, the model's full answer for one configuration (``profiler.model.estimate``): a
module of its own, built when an estimate is asked for, not when the planner, which stores
``Prediction``, loads the model."""

from __future__ import annotations

from pydantic import Field

from profiler.model.config import Figures, ItlParts, Memory, TtftParts


class Estimate(Figures):
    """The model's full answer for one configuration at the stated load (or at concurrency 1 when
    none is given): the figures, and what only the model knows of the deployment.

    ``saturated`` is true when the load exceeds what the deployment can serve: for a
    closed loop the extra clients queue (TTFT grows, finite), for a Poisson rate the queue
    grows without bound and the TTFT figures are infinite (``null`` in JSON); throughput and
    ITL are those at the limit.
    """

    total_gpus: int = Field(description="GPUs of the whole deployment")
    decode_batch: float = Field(description="mean sequences decoding per decode engine")
    saturated: bool
    memory: dict[str, Memory] = Field(description="per engine role (engine, prefill, decode)")
    ttft_parts: TtftParts
    itl_parts: ItlParts
