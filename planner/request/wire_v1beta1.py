"""Wire shapes of a ``nvidia.com/v1beta1`` DGDR's ``spec`` (see the package docstring)."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field

from planner.request.wire_common import SLAMeasuredBy, Hardware, SpecModel, Workload


class SLAv1beta1(SLAMeasuredBy):
    """``spec.sla`` (v1beta1): targets in ms."""

    ttft: float | None = Field(default=None, gt=0)
    itl: float | None = Field(default=None, gt=0)
    e2e_latency: float | None = Field(default=None, gt=0, alias="e2eLatency")
    optimization_type: Literal["latency", "throughput"] | None = None


class Overrides(SpecModel):
    """``spec.overrides``: free-form patches of the generated DGD and of the profiling job."""

    dgd: dict[str, Any] | None = None
    profiling_job: dict[str, Any] | None = None


class ModelCache(SpecModel):
    """``spec.modelCache``: a volume holding the weights (accepted; not used by the planner)."""

    pvc_name: str | None = None
    pvc_model_path: str | None = None
    pvc_mount_path: str = "/opt/model-cache"


class Mocker(SpecModel):
    """``spec.features.mocker``."""

    enabled: bool | None = None


class Features(SpecModel):
    """``spec.features`` (accepted; not used by the planner)."""

    planner: dict[str, Any] | None = None
    mocker: Mocker | None = None


class SpecV1beta1(SpecModel):
    """``spec`` of a ``nvidia.com/v1beta1`` DGDR (see the package docstring)."""

    model: str = Field(min_length=1)
    backend: Literal["auto", "vllm", "sglang", "trtllm"] = "auto"
    image: str | None = None
    hardware: Hardware | None = None
    workload: Workload | None = None
    sla: SLAv1beta1 | None = None
    search_strategy: Literal["rapid", "thorough"] = "rapid"
    auto_apply: bool = True
    overrides: Overrides | None = None
    model_cache: ModelCache | None = None
    features: Features | None = None
    runtime_version_override: str | None = Field(
        default=None, pattern=r"^(0|[1-9][0-9]{0,3})\.(0|[1-9][0-9]{0,3})\.(0|[1-9][0-9]{0,3})$"
    )
