"""What the pages show of a stored resource, read tolerantly from its spec and status.

Specs arrive in two DGDR versions (v1alpha1 ``modelName``/``gpu.type``/``sla``; v1beta1
``model``/``hardware.gpuSku``/``sla``/``workload``); the status carries the planner's results
document in ``profilingResults`` (JSON text, see ``planner.status``), which any client may
write: it is read part by part (``planner.results.ResultsParts``).
"""

from __future__ import annotations

import math
from typing import Any

from api.dashboard.plan_view import plan_label
from api.objects import dig
from infra.resources import Resource
from planner.results import ResultsParts


def _is_number(value: Any) -> bool:
    """A finite JSON number (not a boolean)."""
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def _is_text(value: Any) -> bool:
    return isinstance(value, str)


def _first(is_kind, *values: Any) -> Any:
    """The first of ``values`` that ``is_kind`` (a number, a text) and is not empty."""
    return next((v for v in values if is_kind(v) and v != ""), None)


def state_of(resource: Resource) -> str:
    """The resource's ``status.state`` ("Pending" when unset)."""
    value = resource.status.get("state")
    return value if _is_text(value) and value else "Pending"


def results(resource: Resource) -> ResultsParts | None:
    """The readable parts of a DGDR's results document, or None (not profiled yet, unreadable,
    or a reference: see ``results_reference``)."""
    return ResultsParts.read(resource.status.get("profilingResults"))


def results_reference(resource: Resource) -> str | None:
    """``profilingResults`` when it says where the results are rather than holding them."""
    raw = resource.status.get("profilingResults")
    return raw if isinstance(raw, str) and raw and not raw.lstrip().startswith("{") else None


def dgdr_summary(resource: Resource) -> dict[str, Any]:
    """model, gpu, backend, SLA (ms / tokens), GPUs used, whether it asks for online profiling and
    the results document of a DGDR."""
    from planner.request import asks_online  # on use: the API starts without the planner

    spec = resource.spec
    doc = results(resource)
    cfg_sla = dig(spec, "profilingConfig", "config", "sla")
    parts = doc or ResultsParts()
    sla = parts.sla
    return {
        "model": _first(_is_text, spec.get("modelName"), spec.get("model"), parts.model),
        "gpu": _first(_is_text, dig(spec, "gpu", "type"), dig(spec, "hardware", "gpuSku"), parts.gpu),
        "backend": _first(_is_text, resource.status.get("backend"), spec.get("backend"), parts.backend),
        "ttft_ms": _first(_is_number, sla and sla.ttft_ms, dig(spec, "sla", "ttft"), dig(cfg_sla, "ttft")),
        "itl_ms": _first(_is_number, sla and sla.itl_ms, dig(spec, "sla", "itl"), dig(cfg_sla, "itl")),
        "e2e_ms": _first(_is_number, sla and sla.e2e_ms, dig(spec, "sla", "e2eLatency")),
        "isl": _first(_is_number, sla and sla.isl_tokens, dig(spec, "workload", "isl"), dig(spec, "sla", "isl"),
                      dig(cfg_sla, "isl")),
        "osl": _first(_is_number, sla and sla.osl_tokens, dig(spec, "workload", "osl"), dig(spec, "sla", "osl"),
                      dig(cfg_sla, "osl")),
        "concurrency": _first(_is_number, sla and sla.concurrency, dig(spec, "workload", "concurrency")),
        "request_rate": _first(_is_number, sla and sla.request_rate, dig(spec, "workload", "requestRate")),
        "gpus": parts.chosen.total_gpus if parts.chosen is not None else None,
        "plan": plan_label(parts.chosen) if parts.chosen is not None else None,
        "online": asks_online(resource.version, spec),
        "results": doc,
    }


def bench_summary(resource: Resource) -> dict[str, Any]:
    """model, GPU, target endpoint and GPU count of a BenchmarkJob."""
    spec = resource.spec
    endpoint = spec.get("endpoint") or {}
    isvc = endpoint.get("inferenceService") or {}
    direct = endpoint.get("endpoint") or {}
    meta = spec.get("serviceMetadata") or {}
    target = (
        f"InferenceService {isvc.get('namespace', '')}/{isvc.get('name', '')}" if isvc else direct.get("url") or ""
    )
    return {
        "model": _first(_is_text, direct.get("modelName"), isvc.get("name")),
        "gpu": meta.get("gpuType"),
        "gpus": meta.get("gpuCount"),
        "engine": meta.get("engine"),
        "target": target,
    }


def sla_text(ttft_ms: Any, itl_ms: Any) -> str:
    parts = []
    if isinstance(ttft_ms, (int, float)):
        parts.append(f"TTFT ≤ {ttft_ms:g} ms")
    if isinstance(itl_ms, (int, float)):
        parts.append(f"ITL ≤ {itl_ms:g} ms")
    return " · ".join(parts)
