"""Wire shapes of a ``nvidia.com/v1alpha1`` DGDR's ``spec`` (see the package docstring)."""


from typing import Annotated, Any, Literal

from pydantic import ConfigDict, Field, field_validator

from planner.request.names import dns_label, dns_subdomain
from planner.request.wire_common import SLAMeasuredBy, FreeFormModel, Hardware, SpecModel, Workload
from planner.types import MIN_OSL

# GPUs one engine may span (minNumGPUsPerEngine, maxNumGPUsPerEngine): beyond any deployment run
# today, and a search space of engine shapes still explored in seconds (it grows with the bound).
MAX_ENGINE_GPUS = 1024


class SLAv1alpha1(SLAMeasuredBy):
    """``spec.sla`` (v1alpha1): targets in ms; optional isl/osl in tokens."""

    ttft: float = Field(gt=0)
    itl: float = Field(gt=0)
    isl: int | None = Field(default=None, gt=0)
    osl: int | None = Field(default=None, ge=MIN_OSL)


class GPUv1alpha1(SpecModel):
    """``spec.gpu`` (v1alpha1)."""

    type: str | None = Field(default=None, min_length=1)
    min_num_gpus_per_engine: int | None = Field(default=None, gt=0, le=MAX_ENGINE_GPUS, alias="minNumGPUsPerEngine")
    max_num_gpus_per_engine: int | None = Field(default=None, gt=0, le=MAX_ENGINE_GPUS, alias="maxNumGPUsPerEngine")
    price_per_hour: float | None = Field(default=None, gt=0, description="$ per GPU-hour (slaplan)")


class DeploymentOverrides(SpecModel):
    """``spec.deploymentOverrides`` (v1alpha1): metadata and image of the generated DGD."""

    name: str | None = None
    namespace: str | None = None
    labels: dict[str, str] = Field(default_factory=dict)
    annotations: dict[str, str] = Field(default_factory=dict)
    workers_image: str | None = Field(default=None, min_length=1)

    @field_validator("name")
    @classmethod
    def _name_ok(cls, v: str | None) -> str | None:
        return None if v is None else dns_subdomain(v)

    @field_validator("namespace")
    @classmethod
    def _namespace_ok(cls, v: str | None) -> str | None:
        return None if v is None else dns_label(v)


class ConfigMapRef(SpecModel):
    """``spec.profilingConfig.configMapRef``: where an upstream profiler config is kept."""

    name: str = Field(min_length=1)
    key: str = "disagg.yaml"


class ProfilingConfig(SpecModel):
    """``spec.profilingConfig`` (v1alpha1). ``config`` is free-form profiler configuration."""

    config_map_ref: ConfigMapRef | None = None
    config: dict[str, Any] | None = None
    profiler_image: str | None = None
    node_selector: dict[str, str] | None = None
    output_pvc: str | None = Field(default=None, alias="outputPVC")
    resources: dict[str, Any] | None = None
    tolerations: list[dict[str, Any]] | None = None


class ProfileSLA(FreeFormModel):
    """``profilingConfig.config.sla``: the later v1alpha1 revision's SLA (ms) and lengths (tokens)."""

    ttft: float | None = Field(default=None, gt=0)
    itl: float | None = Field(default=None, gt=0)
    isl: int | None = Field(default=None, gt=0)
    osl: int | None = Field(default=None, ge=MIN_OSL)


class ProfileHardware(FreeFormModel):
    """``profilingConfig.config.hardware``: the later v1alpha1 revision's GPU bounds."""

    min_num_gpus_per_engine: int | None = Field(default=None, gt=0, le=MAX_ENGINE_GPUS)
    max_num_gpus_per_engine: int | None = Field(default=None, gt=0, le=MAX_ENGINE_GPUS)
    num_gpus_per_node: int | None = Field(default=None, gt=0)


class ProfileOnline(SpecModel):
    """``profilingConfig.config.online`` (slaplan): budgets and sweep of an online search."""

    model_config = ConfigDict(alias_generator=None)

    max_trials: int | None = Field(default=None, gt=0,
                                   description="runs measured at most (a unit at one concurrency each)")
    max_wall_time_minutes: float | None = Field(default=None, gt=0, description="wall time of the search")
    concurrency: list[Annotated[int, Field(gt=0)]] | None = Field(default=None, min_length=1, max_length=16)
    reuse_runs: bool | None = Field(default=None, description="reuse runs earlier online DGDRs of the same workload "
                                                              "measured (None: the service's setting)")


class ProfileConfig(FreeFormModel):
    """The parts of the upstream profiler config (``profilingConfig.config``) we read."""

    sla: ProfileSLA | None = None
    hardware: ProfileHardware | None = None
    online: ProfileOnline | None = None


class SpecV1alpha1(SpecModel):
    """``spec`` of a ``nvidia.com/v1alpha1`` DGDR (see the package docstring)."""

    model_name: str | None = Field(default=None, min_length=1)
    model: str | None = Field(default=None, min_length=1)
    backend: Literal["vllm", "sglang", "trtllm"] = "trtllm"
    sla: SLAv1alpha1 | None = None
    gpu: GPUv1alpha1 | None = None
    online: bool = False
    auto_apply: bool = False
    deployment_overrides: DeploymentOverrides | None = None
    profiling_config: ProfilingConfig | None = None
    enable_gpu_discovery: bool | None = None
    use_mocker: bool | None = None
    runtime_version_override: str | None = None
    workload: Workload | None = None
    hardware: Hardware | None = None
