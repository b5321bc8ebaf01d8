"""What the pages show of a stored resource, read tolerantly from its spec and status.

Specs arrive in two DGDR versions (v1alpha1 ``modelName``/``gpu.type``/``sla``; v1beta1
``model``/``hardware.gpuSku``/``sla``/``workload``); the status carries the planner's results
document in ``profilingResults`` (JSON text, see ``planner.status``), which any client may
write: it is read through ``documents.conform``.
"""

from __future__ import annotations

import json
from typing import Any

from api.dashboard.documents import RESULTS, conform, is_number, is_text
from api.objects import dig
from infra.resources import Resource


def _first(is_kind, *values: Any) -> Any:
    """The first of ``values`` that ``is_kind`` (a number, a text) and is not empty."""
    return next((v for v in values if is_kind(v) and v != ""), None)


def state_of(resource: Resource) -> str:
    """The resource's ``status.state`` ("Pending" when unset)."""
    value = resource.status.get("state")
    return value if is_text(value) and value else "Pending"


def results(resource: Resource) -> dict[str, Any] | None:
    """The planner's results document of a DGDR, the parts of the wrong type left out, or None
    (not profiled yet, or a reference: see ``results_reference``)."""
    raw = resource.status.get("profilingResults")
    if isinstance(raw, str) and raw.lstrip().startswith("{"):
        try:
            raw = json.loads(raw)
        except (ValueError, RecursionError):  # not JSON, or nested beyond what the parser follows
            return None
    return conform(raw, RESULTS)


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
    sla = dig(doc, "sla") or {}
    chosen = dig(doc, "chosen") or {}
    return {
        "model": _first(is_text, spec.get("modelName"), spec.get("model"), dig(doc, "model")),
        "gpu": _first(is_text, dig(spec, "gpu", "type"), dig(spec, "hardware", "gpuSku"), dig(doc, "gpu")),
        "backend": _first(is_text, resource.status.get("backend"), spec.get("backend"), dig(doc, "backend")),
        "ttft_ms": _first(is_number, sla.get("ttftMs"), dig(spec, "sla", "ttft"), dig(cfg_sla, "ttft")),
        "itl_ms": _first(is_number, sla.get("itlMs"), dig(spec, "sla", "itl"), dig(cfg_sla, "itl")),
        "e2e_ms": _first(is_number, sla.get("e2eMs"), dig(spec, "sla", "e2eLatency")),
        "isl": _first(is_number, sla.get("islTokens"), dig(spec, "workload", "isl"), dig(spec, "sla", "isl"),
                      dig(cfg_sla, "isl")),
        "osl": _first(is_number, sla.get("oslTokens"), dig(spec, "workload", "osl"), dig(spec, "sla", "osl"),
                      dig(cfg_sla, "osl")),
        "concurrency": _first(is_number, sla.get("concurrency"), dig(spec, "workload", "concurrency")),
        "request_rate": _first(is_number, sla.get("requestRate"), dig(spec, "workload", "requestRate")),
        "gpus": chosen.get("totalGpus"),
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
        "model": _first(is_text, direct.get("modelName"), isvc.get("name")),
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
