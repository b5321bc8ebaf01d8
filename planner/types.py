"""The planner's value types: a normalized request, engines and the plan (its prediction is the
performance model's ``Prediction``).

Times are milliseconds, rates per second. TTFT is the time from a request's arrival to its
first output token; ITL (= TPOT) is the mean gap between output tokens after the first.
"""


import math
from typing import TYPE_CHECKING, Any, Literal, NamedTuple

from pydantic import BaseModel, ConfigDict, Field, computed_field

from planner.lengths import V1ALPHA1_LENGTHS
from planner.stored import Stored
from profiler.model import Prediction

if TYPE_CHECKING:
    from planner.online_results import OnlineSearch

Backend = Literal["vllm", "sglang", "trtllm"]
Mode = Literal["agg", "disagg"]
Role = Literal["aggregated", "prefill", "decode"]


MIN_OSL = 2  # output tokens a request needs for an inter-token latency to exist


class PlanRequest(BaseModel):
    """What a DGDR asks for, normalized across its API versions."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    name: str
    namespace: str = "default"
    model: str = Field(description="Hugging Face id or catalog name")
    backend: Backend = "vllm"
    gpu: str
    precision: str | None = Field(default=None, description="weights dtype; None = the model's own")
    isl_tokens: int = Field(default=V1ALPHA1_LENGTHS.isl_tokens, gt=0)
    osl_tokens: int = Field(default=V1ALPHA1_LENGTHS.osl_tokens, ge=MIN_OSL,
                            description="output tokens (at least two: ITL is their gap)")
    ttft_ms: float = Field(gt=0)
    itl_ms: float = Field(gt=0)
    e2e_ms: float | None = Field(default=None, gt=0)
    harness_ttft_ms: float = Field(default=0.0, ge=0, le=60_000,
                                   description="what the client that measures the SLA adds to each TTFT, ms "
                                               "(genai-bench: about 2.5): the plan's TTFT includes it")
    ttft_error_margin: bool = Field(default=False, description="hold the predicted TTFT times the model's "
                                                               "held-out error factor to the target (False: "
                                                               "the prediction itself)")
    concurrency: int | None = Field(default=None, gt=0, description="closed-loop clients")
    request_rate: float | None = Field(default=None, gt=0, description="Poisson requests/s")
    min_gpus_per_engine: int = Field(default=1, gt=0)
    max_gpus_per_engine: int = Field(default=8, gt=0)
    gpus_per_node: int | None = Field(default=None, gt=0)
    total_gpus: int | None = Field(default=None, gt=0, description="GPU budget of the whole deployment")
    gpu_price_per_hour: float | None = Field(default=None, gt=0, description="$ per GPU-hour")
    search_strategy: Literal["rapid", "thorough"] = "rapid"
    online: bool = False
    max_trials: int | None = Field(default=None, gt=0,
                                   description="online: runs measured at most (a unit at one concurrency each)")
    max_wall_minutes: float | None = Field(default=None, gt=0, description="online: wall time of the search, minutes")
    sweep_concurrency: tuple[int, ...] | None = Field(default=None, description="online: the clients a run may use")
    reuse_runs: bool | None = Field(default=None, description="online: reuse runs earlier searches of the workload "
                                                              "measured (None: the service's setting)")
    auto_apply: bool = False
    deployment_name: str | None = None
    deployment_namespace: str | None = None
    labels: dict[str, str] = Field(default_factory=dict)
    annotations: dict[str, str] = Field(default_factory=dict)
    image: str | None = None


class Engine(Stored):
    """One engine role: its parallelism, size, how many copies run and the limits it runs with.

    ``dp`` is attention data-parallelism inside one engine (MoE models); GPUs per engine
    = tp × pp × dp. ``ep`` is the expert-parallel degree of the MoE layers (1 = none).
    ``max_batch`` is the running-sequence limit the manifest sets: the sequences one engine
    holds at the load the SLA was checked at, so an engine never takes more than the plan
    evaluated.
    """

    role: Role
    tp: int = Field(gt=0)
    pp: int = Field(default=1, gt=0)
    dp: int = Field(default=1, gt=0)
    ep: int = Field(default=1, gt=0)
    replicas: int = Field(gt=0, description="engines of this role at the planned load")
    min_replicas: int | None = Field(default=None, gt=0, alias="minReplicas",
                                     description="engines an autoscaler may shrink to when idle (None: fixed)")
    max_batch: int = Field(gt=0, alias="maxBatch", description="running sequences per engine (all its attention-DP ranks)")
    max_num_tokens: int | None = Field(default=None, gt=0, alias="maxNumTokens",
                                       description="prompt tokens per step per attention-DP rank (chunked prefill)")
    gpus_per_node: int = Field(gt=0, alias="gpusPerNode")

    @computed_field(alias="gpusPerEngine")
    @property
    def gpus(self) -> int:
        """GPUs in one engine."""
        return self.tp * self.pp * self.dp

    @computed_field(alias="nodesPerEngine")
    @property
    def nodes(self) -> int:
        """Pods (nodes) one engine spans."""
        return math.ceil(self.gpus / self.gpus_per_node)

    @property
    def tag(self) -> str:
        """The parallel shape in a few characters: ``tp8``, ``tp2dp4ep8``."""
        return f"tp{self.tp}" + "".join(f"{k}{v}" for k, v in (("pp", self.pp), ("dp", self.dp), ("ep", self.ep)) if v > 1)

    @property
    def gpus_per_pod(self) -> int:
        return self.gpus // self.nodes

    @property
    def total_gpus(self) -> int:
        return self.gpus * self.replicas


class Plan(Stored):
    """A deployment: aggregated (``aggregated`` engines of one shape, or of two in a mix) or
    disaggregated (prefill + decode).

    Everything a manifest pins is here: ``model`` is the checkpoint the user named (served
    under that name), ``precision`` its weights, ``kv_dtype`` the KV cache, ``memory_fraction``
    the share of GPU memory the engine may take (for TRT-LLM, of what is free after the
    weights), and each engine's parallelism, replicas and limits.
    """

    model: str = Field(description="the checkpoint to serve: the id the request named")
    gpu: str
    backend: Backend
    precision: str
    kv_dtype: str = Field(alias="kvDtype")
    memory_fraction: float = Field(gt=0, le=1, alias="memoryFraction")
    mode: Mode
    engines: tuple[Engine, ...]
    predicted: Prediction
    feasible: bool = True
    reason: str | None = None
    cost_per_hour: float | None = Field(default=None, alias="costPerHour", description="$ per hour")
    parts: "tuple[Plan, ...] | None" = Field(
        default=None, description="a mix of engine shapes: the single-shape plans it is made of, each with the "
                                  "share of the load it serves and its own prediction (None for one shape)")

    def role(self, role: Role) -> Engine | None:
        return next((e for e in self.engines if e.role == role), None)

    def shape(self) -> str:
        """The engines in a few characters: ``2×tp4`` aggregated, ``P1×tp4 + D2×tp8`` disaggregated."""
        return " + ".join(f"{e.replicas}×{e.tag}" if e.role == "aggregated" else f"{e.role[0].upper()}{e.replicas}×{e.tag}"
                          for e in self.engines)

    @computed_field(alias="totalGpus")
    @property
    def total_gpus(self) -> int:
        return sum(e.total_gpus for e in self.engines)

    def stored(self) -> dict[str, Any]:
        """The plan as a status document stores it (camelCase, ``null`` for unbounded)."""
        return self.model_dump(mode="json", by_alias=True, exclude_none=True)


class Margin(Stored):
    """The headroom a plan keeps against the SLA, in % of each target: (target − predicted) /
    target × 100, negative when over it. TTFT is judged at its ``ttft_basis``: the p99 under a
    Poisson request rate (the tail a rate produces), else the mean the SLA is checked at; ITL
    at its mean."""

    ttft_pct: float = Field(alias="ttftPct", description="TTFT headroom, % of the TTFT target")
    itl_pct: float = Field(alias="itlPct", description="ITL headroom, % of the ITL target")
    ttft_basis: Literal["mean", "p99"] = Field(alias="ttftBasis")
    ttft_error_factor: float = Field(default=1.0, ge=1, alias="ttftErrorFactor",
                                     description="the factor the predicted TTFT was multiplied by before it was "
                                                 "held to the target: the model's held-out TTFT error (1: none)")
    harness_ttft_ms: float = Field(default=0.0, ge=0, alias="harnessTtftMs",
                                   description="ms the measuring client adds to each TTFT, in the predicted TTFT")

    @property
    def least_pct(self) -> float:
        """The headroom against the nearer of the two targets (%)."""
        return min(self.ttft_pct, self.itl_pct)


class PlanResult(NamedTuple):
    """The planner's answer: the chosen plan (or why none), and everything it evaluated.

    ``candidates`` holds every evaluated configuration (feasible or not) for the Pareto
    chart of output tokens/s per GPU against tokens/s per user. ``margin`` is the chosen
    plan's headroom against the SLA. When nothing is feasible, ``closest`` is the one
    configuration the reason names: the cheapest that meets the SLA when only the budget
    stands in the way, else the one nearest to the SLA. ``online`` is the online search
    (``OnlineSearch``), when candidates were measured.

    A plain NamedTuple (immutable, no validation; a frozen dataclass would compile its generated
    methods at every start-up): the planner makes it of values already validated, and what is stored
    of it is ``planner.results.ProfilingResults``, which validates what it reads back.
    """

    request: PlanRequest
    feasible: bool
    chosen: Plan | None
    candidates: tuple[Plan, ...] = ()
    reason: str | None = None
    closest: Plan | None = None
    margin: Margin | None = None
    assumptions: tuple[str, ...] = ()
    evaluated: int = 0
    online: "OnlineSearch | None" = None
