"""Serving a DGDR at the API version a client asks for, as a Kubernetes conversion webhook would.

An object is stored at the version it was created with. Read through the other version's
path, its ``spec`` is converted: the fields both versions have are moved to their place in
the other shape (with each version's defaults written out where they differ, so the request
means the same: backend, autoApply, input and output lengths); whatever the other version
cannot say is kept in the annotation :data:`ANNOTATION` — a JSON merge patch that turns the
converted-back spec into the original — so that converting back is lossless. ``status`` has
one shape for both versions and is not converted.

Mapped (v1alpha1 ↔ v1beta1): ``modelName`` ↔ ``model``; ``backend`` (v1beta1 ``auto`` is vllm);
``sla.ttft``/``sla.itl`` ↔ the same; ``sla.isl``/``sla.osl`` and ``workload`` ↔ ``workload``;
``gpu.type`` ↔ ``hardware.gpuSku``; ``gpu.pricePerHour`` ↔ ``hardware.pricePerGpuHour``; the
rest of ``hardware``; ``online: true`` ↔ ``searchStrategy: thorough`` (both: profile on real
deployments; ``false`` and ``rapid``, the defaults, are not written out); ``autoApply``;
``deploymentOverrides`` name/namespace/labels/annotations ↔ ``overrides.dgd.metadata``;
``runtimeVersionOverride``. Not mapped, so kept in the annotation: v1alpha1 ``online: false``
written out, GPUs per engine, ``profilingConfig`` (the online search's budgets too),
``workersImage``, …; v1beta1 ``searchStrategy: rapid`` written out, ``sla.e2eLatency``,
``image``, ``modelCache``, ``features``, ….
"""

from __future__ import annotations

import json
from typing import Any

from api.objects import dig, merge_patch

ANNOTATION = "conversion.slaplan.io/lost-fields"
V1ALPHA1, V1BETA1 = "v1alpha1", "v1beta1"


def _first(*values: Any) -> Any:
    return next((v for v in values if v is not None), None)


def _set(out: dict[str, Any], key: str, value: Any) -> None:
    if value not in (None, {}):
        out[key] = value


def _workload(spec: dict[str, Any], version: str, *sla_sources: dict[str, Any]) -> dict[str, Any]:
    """``workload`` with isl/osl written out (the versions' defaults differ)."""
    from planner.request import V1ALPHA1_LENGTHS, V1BETA1_LENGTHS  # on use: the API starts without the planner

    workload = dict(spec.get("workload") or {}) if isinstance(spec.get("workload"), dict) else {}
    isl, osl = {V1ALPHA1: V1ALPHA1_LENGTHS, V1BETA1: V1BETA1_LENGTHS}[version]
    workload["isl"] = _first(workload.get("isl"), *(s.get("isl") for s in sla_sources), isl)
    workload["osl"] = _first(workload.get("osl"), *(s.get("osl") for s in sla_sources), osl)
    return workload


def _alpha_to_beta(spec: dict[str, Any]) -> dict[str, Any]:
    sla = spec.get("sla") if isinstance(spec.get("sla"), dict) else {}
    profiled = dig(spec, "profilingConfig", "config", "sla")
    profiled = profiled if isinstance(profiled, dict) else {}
    hardware = dict(spec.get("hardware") or {}) if isinstance(spec.get("hardware"), dict) else {}
    _set(hardware, "gpuSku", _first(dig(spec, "gpu", "type"), hardware.get("gpuSku")))
    _set(hardware, "pricePerGpuHour", _first(dig(spec, "gpu", "pricePerHour"), hardware.get("pricePerGpuHour")))
    _set(hardware, "numGpusPerNode", _first(hardware.get("numGpusPerNode"), dig(spec, "profilingConfig", "config", "hardware", "num_gpus_per_node")))
    overrides = spec.get("deploymentOverrides") if isinstance(spec.get("deploymentOverrides"), dict) else {}
    metadata = {k: overrides[k] for k in ("name", "namespace", "labels", "annotations") if overrides.get(k) not in (None, {})}
    out: dict[str, Any] = {}
    _set(out, "model", _first(spec.get("modelName"), spec.get("model")))
    out["backend"] = spec.get("backend", "trtllm")
    _set(out, "hardware", hardware)
    out["workload"] = _workload(spec, V1ALPHA1, sla, profiled)
    _set(out, "sla", {k: v for k in ("ttft", "itl") if (v := _first(sla.get(k), profiled.get(k))) is not None})
    if spec.get("online") is True:
        out["searchStrategy"] = "thorough"
    out["autoApply"] = spec.get("autoApply", False)
    _set(out, "overrides", {"dgd": {"metadata": metadata}} if metadata else None)
    _set(out, "runtimeVersionOverride", spec.get("runtimeVersionOverride"))
    return out


def _beta_to_alpha(spec: dict[str, Any]) -> dict[str, Any]:
    sla = spec.get("sla") if isinstance(spec.get("sla"), dict) else {}
    hardware = dict(spec.get("hardware") or {}) if isinstance(spec.get("hardware"), dict) else {}
    gpu: dict[str, Any] = {}
    _set(gpu, "type", hardware.pop("gpuSku", None))
    _set(gpu, "pricePerHour", hardware.pop("pricePerGpuHour", None))
    metadata = dig(spec, "overrides", "dgd", "metadata")
    metadata = metadata if isinstance(metadata, dict) else {}
    out: dict[str, Any] = {}
    _set(out, "modelName", spec.get("model"))
    backend = spec.get("backend", "auto")
    out["backend"] = "vllm" if backend == "auto" else backend
    _set(out, "sla", {k: sla[k] for k in ("ttft", "itl") if sla.get(k) is not None})
    _set(out, "gpu", gpu)
    _set(out, "hardware", hardware)
    out["workload"] = _workload(spec, V1BETA1)
    if spec.get("searchStrategy") == "thorough":
        out["online"] = True
    out["autoApply"] = spec.get("autoApply", True)
    _set(out, "deploymentOverrides", {k: metadata[k] for k in ("name", "namespace", "labels", "annotations") if metadata.get(k) not in (None, {})})
    _set(out, "runtimeVersionOverride", spec.get("runtimeVersionOverride"))
    return out


_MAPPINGS = {(V1ALPHA1, V1BETA1): _alpha_to_beta, (V1BETA1, V1ALPHA1): _beta_to_alpha}


def merge_diff(source: Any, target: Any) -> Any:
    """The JSON merge patch (RFC 7386) that turns ``source`` into ``target`` (``{}``: equal)."""
    if not (isinstance(source, dict) and isinstance(target, dict)):
        return target
    patch: dict[str, Any] = {key: None for key in source if key not in target}
    for key, value in target.items():
        if key not in source:
            patch[key] = value
        elif source[key] != value:
            patch[key] = merge_diff(source[key], value)
    return patch


def convert_dgdr(obj: dict[str, Any], version: str) -> dict[str, Any]:
    """The DGDR ``obj`` (any served version) at ``version`` (``v1alpha1`` or ``v1beta1``)."""
    group, _, source = str(obj.get("apiVersion", "")).partition("/")
    if source == version or (source, version) not in _MAPPINGS:
        return obj
    metadata = dict(obj.get("metadata") or {})
    annotations = dict(metadata.get("annotations") or {})
    saved = _saved(annotations.pop(ANNOTATION, None), version)
    spec = obj.get("spec") if isinstance(obj.get("spec"), dict) else {}
    converted = merge_patch(_MAPPINGS[source, version](spec), saved) if saved else _MAPPINGS[source, version](spec)
    lost = merge_diff(_MAPPINGS[version, source](converted), spec)
    if lost:
        annotations[ANNOTATION] = json.dumps({"apiVersion": f"{group}/{source}", "spec": lost}, separators=(",", ":"), sort_keys=True)
    if annotations:
        metadata["annotations"] = annotations
    else:
        metadata.pop("annotations", None)
    return {**obj, "apiVersion": f"{group}/{version}", "metadata": metadata, "spec": converted}


def _saved(text: str | None, version: str) -> dict[str, Any] | None:
    """The merge patch an earlier conversion left for ``version`` (None if none or unreadable)."""
    try:
        data = json.loads(text) if text else None
    except ValueError:
        return None
    if not isinstance(data, dict) or str(data.get("apiVersion", "")).partition("/")[2] != version:
        return None
    return data.get("spec") if isinstance(data.get("spec"), dict) else None
