"""Validated specs of either version → the fields of a :class:`planner.types.PlanRequest`.

Where each value comes from (first present wins):

- GPU type: ``spec.gpu.type`` (v1alpha1), ``spec.hardware.gpuSku``; one is required and the two
  must agree when both are given. Whether the GPU (or the model) is known is the profiler
  catalog's business, not this module's.
- GPU price (slaplan extension, $ per GPU-hour, for the cost objective):
  ``spec.gpu.pricePerHour`` (v1alpha1) or ``spec.hardware.pricePerGpuHour`` (both versions).
- Token lengths: ``workload``, then (v1alpha1) ``sla``, then ``profilingConfig.config.sla``, then
  the version's defaults (:data:`~planner.request.versions.V1ALPHA1_LENGTHS`,
  :data:`~planner.request.versions.V1BETA1_LENGTHS`).
- v1beta1 ``sla.e2eLatency`` without ``ttft``/``itl``: the missing targets are set to bounds
  that the end-to-end target already implies (TTFT ≤ e2e; ITL ≤ e2e / (osl − 1)), so the
  end-to-end target (``e2e_ms``) is the binding one.
- Online profiling: v1alpha1 ``online: true`` or v1beta1 ``searchStrategy: thorough`` (which
  needs a named backend: ``backend: auto`` is refused for it, as in Dynamo); the request's
  ``search_strategy`` is ``thorough`` for either, ``rapid`` otherwise.
- v1beta1 ``overrides.dgd.metadata`` ``name``/``namespace``/``labels``/``annotations`` become
  the generated deployment's metadata; the rest of ``overrides.dgd`` is not interpreted here.

Each function appends what is wrong to ``causes`` and goes on, so that every problem is reported.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from planner.request.errors import Causes, validate
from planner.request.names import dns_label, dns_subdomain
from planner.request.versions import V1ALPHA1_LENGTHS, V1BETA1_LENGTHS
from planner.request.wire_common import Hardware, SLAMeasuredBy, Workload
from planner.request.wire_v1alpha1 import (
    DeploymentOverrides,
    GPUv1alpha1,
    ProfileConfig,
    ProfileHardware,
    ProfileOnline,
    ProfileSLA,
    SpecV1alpha1,
)

if TYPE_CHECKING:  # the v1beta1 shapes are built when a v1beta1 DGDR is read (``from_v1beta1``)
    from planner.request.wire_v1beta1 import Overrides, SpecV1beta1

# GPUs per engine when a v1alpha1 request does not bound them.
V1ALPHA1_MIN_ENGINE_GPUS = 1
V1ALPHA1_MAX_ENGINE_GPUS = 8
NO_GPU = ("spec.gpu.type", "a GPU type is required: set spec.gpu.type or spec.hardware.gpuSku")


def _agree(a: tuple[str, Any], b: tuple[str, Any], causes: Causes) -> Any:
    """The value of two alternative fields, or a cause when both are set and differ."""
    (path_a, val_a), (path_b, val_b) = a, b
    if val_a is not None and val_b is not None and val_a != val_b:
        causes.append((path_a, f"conflicts with {path_b} ({val_a!r} != {val_b!r})"))
    return val_a if val_a is not None else val_b


def _first(*values: Any) -> Any:
    return next((v for v in values if v is not None), None)


def _gpu_type(gpu_type: str | None, gpu_sku: str | None, causes: Causes) -> str | None:
    gpu = _agree(("spec.gpu.type", gpu_type), ("spec.hardware.gpuSku", gpu_sku), causes)
    if gpu is None:
        causes.append(NO_GPU)
    return gpu


def _load(workload: Workload | None, causes: Causes) -> dict[str, Any]:
    """Concurrency (whole clients) or request rate (requests/s) from ``spec.workload``."""
    if workload is None:
        return {}
    if workload.concurrency is not None and workload.request_rate is not None:
        causes.append(("spec.workload", "concurrency and requestRate are mutually exclusive"))
    out: dict[str, Any] = {}
    if workload.concurrency is not None:
        if not float(workload.concurrency).is_integer():
            causes.append(("spec.workload.concurrency", "must be a whole number of clients"))
        else:
            out["concurrency"] = int(workload.concurrency)
    if workload.request_rate is not None:
        out["request_rate"] = float(workload.request_rate)
    return out


def _measured_by(sla: SLAMeasuredBy | None) -> dict[str, Any]:
    """The measuring client's TTFT term and the error margin switch of ``spec.sla`` (defaults without one)."""
    sla = sla or SLAMeasuredBy()
    return {"harness_ttft_ms": sla.harness_ttft_ms, "ttft_error_margin": sla.error_margin}


def _budget(hw: Hardware | None) -> dict[str, Any]:
    if hw is None:
        return {}
    return {"gpus_per_node": hw.num_gpus_per_node, "total_gpus": hw.total_gpus}


def _engine_bounds(lo: int, hi: int, causes: Causes, path: str) -> None:
    if lo > hi:
        causes.append((path, f"minimum GPUs per engine ({lo}) exceeds the maximum ({hi})"))


def from_v1alpha1(spec: SpecV1alpha1, causes: Causes) -> dict[str, Any] | None:
    """PlanRequest fields (besides name/namespace) from a validated v1alpha1 spec."""
    model = _agree(("spec.modelName", spec.model_name), ("spec.model", spec.model), causes)
    if model is None:
        causes.append(("spec.modelName", "field required"))

    config = None
    if spec.profiling_config is not None and spec.profiling_config.config is not None:
        config = validate(ProfileConfig, spec.profiling_config.config, "spec.profilingConfig.config", causes)
    cfg_sla = config.sla if config is not None and config.sla is not None else ProfileSLA()
    cfg_hw = config.hardware if config is not None and config.hardware is not None else ProfileHardware()

    sla = spec.sla
    ttft = sla.ttft if sla is not None else cfg_sla.ttft
    itl = sla.itl if sla is not None else cfg_sla.itl
    if sla is None and (ttft is None or itl is None):
        causes.append(("spec.sla", "field required"))

    gpu = spec.gpu or GPUv1alpha1()
    hw = spec.hardware
    workload = spec.workload or Workload()
    gpu_type = _gpu_type(gpu.type, hw.gpu_sku if hw else None, causes)
    price = _agree(
        ("spec.gpu.pricePerHour", gpu.price_per_hour),
        ("spec.hardware.pricePerGpuHour", hw.price_per_gpu_hour if hw else None),
        causes,
    )
    lo = _first(gpu.min_num_gpus_per_engine, cfg_hw.min_num_gpus_per_engine, V1ALPHA1_MIN_ENGINE_GPUS)
    hi = _first(gpu.max_num_gpus_per_engine, cfg_hw.max_num_gpus_per_engine, V1ALPHA1_MAX_ENGINE_GPUS)
    _engine_bounds(lo, hi, causes, "spec.gpu.minNumGPUsPerEngine")
    load = _load(spec.workload, causes)
    budget = _budget(hw)
    if budget.get("gpus_per_node") is None:
        budget["gpus_per_node"] = cfg_hw.num_gpus_per_node

    online = config.online if config is not None and config.online is not None else ProfileOnline()
    over = spec.deployment_overrides or DeploymentOverrides()
    if model is None or gpu_type is None or ttft is None or itl is None:
        return None
    return {
        "model": model,
        "backend": spec.backend,
        "gpu": gpu_type,
        "isl_tokens": _first(workload.isl, sla.isl if sla else None, cfg_sla.isl, V1ALPHA1_LENGTHS.isl_tokens),
        "osl_tokens": _first(workload.osl, sla.osl if sla else None, cfg_sla.osl, V1ALPHA1_LENGTHS.osl_tokens),
        "ttft_ms": float(ttft),
        "itl_ms": float(itl),
        **_measured_by(sla),
        "min_gpus_per_engine": lo,
        "max_gpus_per_engine": hi,
        "gpu_price_per_hour": price,
        "online": spec.online,
        "search_strategy": "thorough" if spec.online else "rapid",
        "max_trials": online.max_trials,
        "max_wall_minutes": online.max_wall_time_minutes,
        "sweep_concurrency": tuple(sorted(set(online.concurrency))) if online.concurrency else None,
        "reuse_runs": online.reuse_runs,
        "auto_apply": spec.auto_apply,
        "deployment_name": over.name,
        "deployment_namespace": over.namespace,
        "labels": dict(over.labels),
        "annotations": dict(over.annotations),
        "image": over.workers_image,
        **load,
        **budget,
    }


def _dgd_metadata(overrides: Overrides | None, causes: Causes) -> dict[str, Any]:
    """Name, namespace, labels and annotations asked for through ``overrides.dgd.metadata``."""
    dgd = overrides.dgd if overrides is not None else None
    meta = (dgd or {}).get("metadata")
    if meta is None:
        return {}
    prefix = "spec.overrides.dgd.metadata"
    if not isinstance(meta, dict):
        causes.append((prefix, "must be a mapping"))
        return {}
    out: dict[str, Any] = {}
    checks = (("name", "deployment_name", dns_subdomain), ("namespace", "deployment_namespace", dns_label))
    for key, field, check in checks:
        if key in meta:
            try:
                out[field] = check(meta[key]) if isinstance(meta[key], str) else check("")
            except ValueError as exc:
                causes.append((f"{prefix}.{key}", str(exc)))
    for key in ("labels", "annotations"):
        value = meta.get(key)
        if value is None:
            continue
        if not isinstance(value, dict) or not all(isinstance(k, str) and isinstance(v, str) for k, v in value.items()):
            causes.append((f"{prefix}.{key}", "must be a mapping of strings to strings"))
        else:
            out[key] = dict(value)
    return out


def from_v1beta1(spec: SpecV1beta1, causes: Causes) -> dict[str, Any] | None:
    """PlanRequest fields (besides name/namespace) from a validated v1beta1 spec."""
    hw = spec.hardware
    workload = spec.workload or Workload()
    isl = workload.isl if workload.isl is not None else V1BETA1_LENGTHS.isl_tokens
    osl = workload.osl if workload.osl is not None else V1BETA1_LENGTHS.osl_tokens
    gpu_type = _gpu_type(None, hw.gpu_sku if hw else None, causes)

    from planner.request.wire_v1beta1 import SLAv1beta1

    sla = spec.sla or SLAv1beta1()
    e2e = sla.e2e_latency
    ttft, itl = sla.ttft, sla.itl
    if e2e is not None:
        # Bounds the end-to-end target implies: TTFT <= e2e, and (osl - 1) gaps fit in e2e.
        ttft = ttft if ttft is not None else e2e
        itl = itl if itl is not None else e2e / max(osl - 1, 1)
    for key, value in (("ttft", ttft), ("itl", itl)):
        if value is None:
            causes.append((f"spec.sla.{key}", "field required (or give spec.sla.e2eLatency)"))

    thorough = spec.search_strategy == "thorough"
    if thorough and spec.backend == "auto":
        causes.append(("spec.backend", "searchStrategy thorough measures real deployments of one backend: "
                                       "name it (vllm, sglang or trtllm); auto is for rapid only"))
    load = _load(spec.workload, causes)
    meta = _dgd_metadata(spec.overrides, causes)
    if gpu_type is None or ttft is None or itl is None:
        return None
    return {
        "model": spec.model,
        "backend": "vllm" if spec.backend == "auto" else spec.backend,
        "gpu": gpu_type,
        "isl_tokens": isl,
        "osl_tokens": osl,
        "ttft_ms": float(ttft),
        "itl_ms": float(itl),
        **_measured_by(sla),
        "e2e_ms": float(e2e) if e2e is not None else None,
        "gpu_price_per_hour": hw.price_per_gpu_hour if hw else None,
        "search_strategy": spec.search_strategy,
        "online": thorough,
        "auto_apply": spec.auto_apply,
        **load,
        **_budget(hw),
        **meta,
    }
