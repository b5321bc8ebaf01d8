"""One DGDR object (either version) → a :class:`planner.types.PlanRequest`, or every problem found."""

from __future__ import annotations

from typing import Any

from pydantic import ValidationError

from planner.request.errors import Causes, RequestError, field_path, message, validate
from planner.request.normalize import NO_GPU, from_v1alpha1, from_v1beta1
from planner.request.versions import V1ALPHA1, type_causes
from planner.request.wire_common import Metadata
from planner.request.wire_v1alpha1 import SpecV1alpha1
from planner.types import PlanRequest

_TOP_LEVEL = {"apiVersion", "kind", "metadata", "spec", "status"}


def parse_dgdr(obj: dict[str, Any]) -> PlanRequest:
    """Validate one DGDR (``nvidia.com/v1alpha1`` or ``v1beta1``) and normalize it.

    Raises :class:`RequestError` listing every problem found. ``status`` (present on
    objects read back from a cluster) is ignored.
    """
    if not isinstance(obj, dict):
        raise RequestError([("", f"a DGDR must be a mapping, got {type(obj).__name__}")])
    causes = type_causes(obj)
    if any(path == "apiVersion" for path, _ in causes):
        raise RequestError(causes)
    causes += [(key, "unknown field") for key in obj if key not in _TOP_LEVEL]

    if "metadata" not in obj:
        causes.append(("metadata.name", "field required"))
        meta = None
    else:
        meta = validate(Metadata, obj["metadata"], "metadata", causes)

    if "spec" not in obj:
        causes.append(("spec", "field required"))
        raise RequestError(causes)
    raw = obj["spec"]
    if obj["apiVersion"] == V1ALPHA1:
        spec = validate(SpecV1alpha1, raw, "spec", causes)
        fields = from_v1alpha1(spec, causes) if spec is not None else None
    else:
        from planner.request.wire_v1beta1 import SpecV1beta1  # built when a v1beta1 DGDR is read

        spec = validate(SpecV1beta1, raw, "spec", causes)
        fields = from_v1beta1(spec, causes) if spec is not None else None
    if spec is None and isinstance(raw, dict):
        causes += _missing(raw, obj["apiVersion"])

    if causes or meta is None or fields is None:
        raise RequestError(list(dict.fromkeys(causes)))
    try:
        request = PlanRequest(name=meta.name, namespace=meta.namespace, **fields)
    except ValidationError as exc:  # a combination the checks above did not foresee
        raise RequestError([(field_path(("spec", *e["loc"])), message(e)) for e in exc.errors()]) from None
    causes = _catalog_causes(raw, request)
    if causes:
        raise RequestError(causes)
    return request


def _catalog_causes(raw: dict[str, Any], request: PlanRequest) -> Causes:
    """An unknown GPU, named by the field the request used, or one the backend does not run on.
    (The model is checked where it is loaded: a name outside the catalog may still be fetched
    from the Hugging Face Hub.)"""
    from profiler.model import ModelError
    from profiler.model import backend_mismatch, get_gpu

    try:
        gpu = get_gpu(request.gpu)
    except ModelError as exc:
        return [("spec.gpu.type" if _get(raw, "gpu", "type") else "spec.hardware.gpuSku", exc.message)]
    mismatch = backend_mismatch(request.backend, gpu)
    return [("spec.backend", mismatch)] if mismatch else []


def _get(d: Any, *keys: str) -> Any:
    """``d[k1][k2]…`` or None when any level is absent or not a mapping."""
    for key in keys:
        if not isinstance(d, dict):
            return None
        d = d.get(key)
    return d


def _missing(raw: dict[str, Any], api_version: str) -> Causes:
    """Required values absent from a spec that failed validation, so they are reported too."""
    causes = []
    gpu = _get(raw, "hardware", "gpuSku")
    if api_version == V1ALPHA1:
        gpu = gpu if gpu is not None else _get(raw, "gpu", "type")
        if "modelName" not in raw and "model" not in raw:
            causes.append(("spec.modelName", "field required"))
        cfg_sla = _get(raw, "profilingConfig", "config", "sla") or {}
        if "sla" not in raw and not (isinstance(cfg_sla, dict) and "ttft" in cfg_sla and "itl" in cfg_sla):
            causes.append(("spec.sla", "field required"))
    if gpu is None:
        causes.append(NO_GPU)
    return causes


def model_field(spec: Any) -> str:
    """The field a DGDR's ``spec`` names its model with, for messages: ``spec.modelName``, or
    ``spec.model`` when that is the one given (v1beta1, the later v1alpha1 revision)."""
    named_model = isinstance(spec, dict) and "model" in spec and "modelName" not in spec
    return "spec.model" if named_model else "spec.modelName"
