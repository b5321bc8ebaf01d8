"""The performance model's public input and output types (frozen, ``extra="forbid"``).

Times are milliseconds, memory GiB, throughputs per second. A load is either closed-loop
client ``concurrency`` (each client sends its next request when the last one finishes) or
a Poisson ``request_rate``; both count the whole deployment, not one engine.
"""


import math
from typing import Annotated, Literal

from pydantic import (BaseModel, BeforeValidator, ConfigDict, Field, PlainSerializer, ValidationInfo, field_validator,
                      model_validator)

Backend = Literal["vllm", "sglang", "trtllm"]
# Most tokens one engine step can take (max_num_tokens): beyond what any engine is set to, and
# what keeps a mistyped value from reading as an engine that runs out of memory.
MAX_STEP_TOKENS = 1 << 20


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


def _inf_if_none(value: object) -> object:
    return math.inf if value is None else value


def _none_if_inf(value: float) -> float | None:
    return value if math.isfinite(value) else None


# A time or rate that may be unbounded (an overloaded queue): infinite in Python, ``null`` in JSON,
# and ``null`` reads back as infinite.
Unbounded = Annotated[float, BeforeValidator(_inf_if_none), PlainSerializer(_none_if_inf, when_used="json")]


def ms_text(value: float, digits: int = 1) -> str:
    """A time (ms) as people read it: ``12.3 ms``, or ``unbounded`` for one that grows without bound."""
    return f"{value:.{digits}f} ms" if math.isfinite(value) else "unbounded"


class Parallel(_Frozen):
    """Parallelism of one engine.

    GPUs per engine = tp × pp × dp, where ``dp`` is attention data-parallelism (each rank
    holds its own sequences and KV cache). MoE layers spread experts over the same GPUs:
    ``moe_tp`` × ``moe_ep`` = tp × dp (``moe_ep`` defaults to 1, ``moe_tp`` to the rest).
    """

    tp: int = Field(default=1, gt=0)
    pp: int = Field(default=1, gt=0)
    dp: int = Field(default=1, gt=0)
    moe_ep: int = Field(default=1, gt=0)
    moe_tp: int | None = Field(default=None, gt=0)

    @property
    def gpus(self) -> int:
        return self.tp * self.pp * self.dp

    @property
    def expert_tp(self) -> int:
        return self.moe_tp if self.moe_tp is not None else max(1, self.tp * self.dp // self.moe_ep)


class ServingConfig(_Frozen):
    """One deployment under one load.

    Aggregated: ``replicas`` copies of ``engine``. Disaggregated: ``prefill_workers``
    copies of ``prefill`` and ``decode_workers`` copies of ``decode``. ``max_batch`` caps
    concurrent sequences per (decode or aggregated) engine; None = what KV memory allows.
    """

    model: str
    gpu: str
    backend: Backend = "vllm"
    precision: str | None = None
    kv_dtype: str | None = None
    mode: Literal["agg", "disagg"] = "agg"
    engine: Parallel | None = None
    replicas: int = Field(default=1, gt=0)
    prefill: Parallel | None = None
    decode: Parallel | None = None
    prefill_workers: int = Field(default=1, gt=0)
    decode_workers: int = Field(default=1, gt=0)
    max_batch: int | None = Field(default=None, gt=0)
    max_num_tokens: int | None = Field(default=None, gt=0, le=MAX_STEP_TOKENS,
                                       description="prefill chunk, tokens per step of each attention-DP rank (default: "
                                                   "the backend's own, 8192; SGLang's by GPU memory, 16384 "
                                                   "from 160 GiB)")
    isl_tokens: int = Field(gt=0)
    osl_tokens: int = Field(gt=0)
    concurrency: float | None = Field(default=None, gt=0, allow_inf_nan=False)
    request_rate: float | None = Field(default=None, gt=0, allow_inf_nan=False)
    spec_tokens: int = Field(default=0, ge=0, le=16, description="tokens drafted per decode step by speculative "
                                                                 "decoding (MTP, EAGLE, a draft model); 0 = off")
    spec_acceptance: float | None = Field(default=None, gt=0, lt=1, allow_inf_nan=False, description="chance each drafted token is "
                                          "accepted (default 0.7 when spec_tokens > 0)")

    @field_validator("spec_acceptance")
    @classmethod
    def _acceptance_needs_drafts(cls, value: float | None, info: ValidationInfo) -> float | None:
        if value is not None and not info.data.get("spec_tokens"):
            raise ValueError("needs spec_tokens > 0 (tokens drafted per step)")
        return value

    @model_validator(mode="after")
    def _check(self) -> "ServingConfig":
        if self.concurrency is not None and self.request_rate is not None:
            raise ValueError("give concurrency or request_rate, not both")
        if self.mode == "agg" and self.engine is None:
            raise ValueError("engine: required for mode 'agg'")
        if self.mode == "disagg" and (self.prefill is None or self.decode is None):
            raise ValueError("prefill and decode: required for mode 'disagg'")
        return self


class Memory(_Frozen):
    """Per-GPU memory of one engine role (GiB) and what the KV cache holds per engine."""

    weights_gib: float
    kv_cache_gib: float
    activations_gib: float
    kv_capacity_tokens: int
    max_sequences: int = Field(description="sequences the KV cache holds, each counted at what the engine keeps "
                                           "for it (TRT-LLM: ISL + OSL tokens, reserved on admission; vLLM, "
                                           "SGLang: the mean context ISL + OSL/2), at most the engine's batch ceiling")


class _Stored(_Frozen):
    """A value the planner stores: written with its camelCase aliases (``kvTransfer``), read back by
    either spelling."""

    model_config = ConfigDict(frozen=True, extra="forbid", validate_by_name=True, validate_by_alias=True)


class TtftParts(_Stored):
    """Where the mean TTFT goes (ms); the parts add up to the mean (``Figures.ttft_ms``)."""

    frontend_ms: Unbounded = Field(alias="frontend", description="per-request fixed cost: API server, tokenizing, routing")
    prefill_ms: Unbounded = Field(alias="prefill", description="the prefill pass the prompt is in, with the prompts sharing it")
    kv_transfer_ms: Unbounded = Field(alias="kvTransfer", description="shipping the KV cache from prefill to decode (disaggregated only)")
    first_step_ms: Unbounded = Field(alias="firstStep", description="the decode iteration that emits the first token, and the rest of the "
                                             "one in progress when the prompt is ready (half of one on average)")
    queueing_ms: Unbounded = Field(alias="queueing", description="waiting for a prefill server (Poisson arrivals), for a batch slot, "
                                           "or for the other attention-DP ranks' prompts (TRT-LLM balancing)")
    burst_ms: Unbounded = Field(alias="burst", description="closed-loop clients that return together waiting behind each other's prompts")


class ItlParts(_Stored):
    """Where the mean inter-token latency goes (ms); the parts add up to the mean (``Figures.itl_ms``)."""

    decode_step_ms: Unbounded = Field(alias="decodeStep", description="one decode iteration of the running batch")
    prefill_interference_ms: Unbounded = Field(alias="prefillInterference", description="prompts prefilled in or between decode iterations, "
                                                       "per output token (aggregated only)")


# How the parts above read in text (CLI lines, an infeasible plan's reason), by field name.
PART_LABELS: dict[str, str] = {
    "frontend_ms": "frontend", "prefill_ms": "prefill pass", "kv_transfer_ms": "KV transfer",
    "first_step_ms": "first decode step", "queueing_ms": "queue wait", "burst_ms": "wait behind other clients' prompts",
    "decode_step_ms": "decode step", "prefill_interference_ms": "prefill interference",
}


class Figures(_Stored):
    """What a deployment does under a load: latency and throughput (unbounded times are infinite,
    ``null`` in JSON). Under a Poisson rate the mean TTFT may exceed its p90: when fewer than 10% of
    arrivals wait for a prefill server, the p90 is the TTFT without waiting."""

    ttft_ms: Unbounded = Field(alias="ttftMs", description="mean time to first token (ms): a request's arrival to "
                                                           "its first output token")
    ttft_p90_ms: Unbounded = Field(alias="ttftP90Ms", description="90th percentile of the time to first token (ms)")
    ttft_p99_ms: Unbounded = Field(alias="ttftP99Ms", description="99th percentile of the time to first token (ms)")
    itl_ms: Unbounded = Field(alias="itlMs", description="mean inter-token latency (= TPOT, ms): the gap between "
                                                         "output tokens after the first")
    output_tok_s_per_gpu: Unbounded = Field(alias="outputTokPerSecPerGpu",
                                            description="output tokens/s of the whole deployment per GPU")
    tok_s_per_user: Unbounded = Field(alias="tokPerSecPerUser", description="output tokens/s one request sees")
    requests_per_s: Unbounded = Field(alias="requestsPerSec", description="requests/s the deployment completes")


class Prediction(Figures):
    """The figures the planner stores with a plan, at the load it was sized for, and where the mean
    TTFT and ITL go (absent from documents stored without them)."""

    concurrency: Unbounded = Field(alias="concurrency", description="requests in flight at this operating point")
    ttft_parts: TtftParts | None = Field(default=None, alias="ttftPartsMs", description="where the mean TTFT goes")
    itl_parts: ItlParts | None = Field(default=None, alias="itlPartsMs", description="where the mean ITL goes")
