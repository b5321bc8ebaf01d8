"""What the pages show of a stored resource, read tolerantly from its spec and status.

Specs arrive in two DGDR versions (v1alpha1 ``modelName``/``gpu.type``/``sla``; v1beta1
``model``/``hardware.gpuSku``/``sla``/``workload``); the status carries the planner's results
document in ``profilingResults`` (JSON text, see ``planner.status``).
"""

from __future__ import annotations

import json
from typing import Any

from api.objects import dig
from infra.resources import Resource


def _first(*values: Any) -> Any:
    return next((v for v in values if v not in (None, "")), None)


def results(resource: Resource) -> dict[str, Any] | None:
    """The planner's results document of a DGDR, or None (not profiled yet, or a reference)."""
    raw = resource.status.get("profilingResults")
    if isinstance(raw, dict):
        return raw
    if not isinstance(raw, str) or not raw.lstrip().startswith("{"):
        return None
    try:
        doc = json.loads(raw)
    except ValueError:
        return None
    return doc if isinstance(doc, dict) else None


def dgdr_summary(resource: Resource) -> dict[str, Any]:
    """model, gpu, backend, SLA (ms / tokens), GPUs used and the results document of a DGDR."""
    spec = resource.spec
    doc = results(resource)
    cfg_sla = dig(spec, "profilingConfig", "config", "sla")
    sla = dig(doc, "sla") or {}
    chosen = dig(doc, "chosen") or {}
    return {
        "model": _first(spec.get("modelName"), spec.get("model"), dig(doc, "model")),
        "gpu": _first(dig(spec, "gpu", "type"), dig(spec, "hardware", "gpuSku"), dig(doc, "gpu")),
        "backend": _first(resource.status.get("backend"), spec.get("backend"), dig(doc, "backend")),
        "ttft_ms": _first(sla.get("ttftMs"), dig(spec, "sla", "ttft"), dig(cfg_sla, "ttft")),
        "itl_ms": _first(sla.get("itlMs"), dig(spec, "sla", "itl"), dig(cfg_sla, "itl")),
        "e2e_ms": _first(sla.get("e2eMs"), dig(spec, "sla", "e2eLatency")),
        "isl": _first(sla.get("islTokens"), dig(spec, "workload", "isl"), dig(spec, "sla", "isl"), dig(cfg_sla, "isl")),
        "osl": _first(sla.get("oslTokens"), dig(spec, "workload", "osl"), dig(spec, "sla", "osl"), dig(cfg_sla, "osl")),
        "concurrency": _first(sla.get("concurrency"), dig(spec, "workload", "concurrency")),
        "request_rate": _first(sla.get("requestRate"), dig(spec, "workload", "requestRate")),
        "gpus": chosen.get("totalGpus"),
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
        "model": _first(direct.get("modelName"), isvc.get("name")),
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
