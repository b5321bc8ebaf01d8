"""Wire shapes both DGDR versions share: the models' settings, ``metadata``, ``hardware``, ``workload``.

Field names map to the YAML's camelCase through the alias generator; strict mode keeps
Kubernetes typing (no "8" for 8, no "yes" for true).
"""


from pydantic import BaseModel, ConfigDict, Field, field_validator
from pydantic.alias_generators import to_camel

from planner.request.names import dns_label, dns_subdomain
from planner.types import MIN_OSL


class SpecModel(BaseModel):
    """A block of ``spec``: frozen, strict, camelCase in YAML, unknown keys refused."""

    model_config = ConfigDict(
        frozen=True,
        extra="forbid",
        strict=True,
        allow_inf_nan=False,
        alias_generator=to_camel,
        protected_namespaces=(),
    )


class SLAMeasuredBy(SpecModel):
    """slaplan's keys of ``spec.sla`` (either version): who measures the SLA, and whether the plan
    keeps the model's TTFT error in hand."""

    harness_ttft_ms: float = Field(default=0.0, ge=0, le=60_000,
                                   description="what the client that measures the SLA adds to each TTFT, ms")
    error_margin: bool = Field(default=False, description="hold the predicted TTFT times the model's held-out "
                                                         "error factor to the target")


class FreeFormModel(BaseModel):
    """A known corner of a free-form object: the keys we read are typed, others pass."""

    model_config = ConfigDict(frozen=True, extra="allow", strict=True, allow_inf_nan=False, protected_namespaces=())


class Metadata(BaseModel):
    """Kubernetes ObjectMeta: name and namespace checked; server fields (uid, …) pass through."""

    model_config = ConfigDict(frozen=True, extra="allow", strict=True)

    name: str
    namespace: str = "default"
    labels: dict[str, str] = Field(default_factory=dict)
    annotations: dict[str, str] = Field(default_factory=dict)

    @field_validator("name")
    @classmethod
    def _name_is_dns_subdomain(cls, v: str) -> str:
        return dns_subdomain(v)

    @field_validator("namespace")
    @classmethod
    def _namespace_is_dns_label(cls, v: str) -> str:
        return dns_label(v)


class Hardware(SpecModel):
    """``spec.hardware`` (v1beta1 shape, accepted in v1alpha1 too): the GPUs available. ``vramMb`` in MiB."""

    gpu_sku: str | None = Field(default=None, min_length=1)
    num_gpus_per_node: int | None = Field(default=None, gt=0)
    total_gpus: int | None = Field(default=None, gt=0, description="GPU budget of the deployment")
    vram_mb: float | None = Field(default=None, gt=0)
    interconnect: str | None = None
    rdma: bool | None = None
    price_per_gpu_hour: float | None = Field(default=None, gt=0, description="$ per GPU-hour (slaplan)")


class Workload(SpecModel):
    """``spec.workload``: token lengths and the offered load (concurrency XOR requests/s)."""

    isl: int | None = Field(default=None, gt=0, description="input tokens per request")
    osl: int | None = Field(default=None, ge=MIN_OSL, description="output tokens per request (ITL needs two)")
    concurrency: float | None = Field(default=None, gt=0, description="closed-loop clients")
    request_rate: float | None = Field(default=None, gt=0, description="requests/s")
