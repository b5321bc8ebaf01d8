"""Parse DynamoGraphDeploymentRequests (DGDRs) into a :class:`planner.types.PlanRequest`.

Two API versions are accepted, both as documents of kind ``DynamoGraphDeploymentRequest``:

``nvidia.com/v1alpha1`` — the first upstream shape::

    spec:
      modelName: meta-llama/Llama-3.1-70B-Instruct   # required (``model`` accepted too)
      backend: vllm | sglang | trtllm                # default trtllm
      sla: {ttft: 500, itl: 20, isl: 3000, osl: 500}  # ms, ms, tokens, tokens; isl/osl optional
      gpu: {type: h200_sxm, minNumGPUsPerEngine: 1, maxNumGPUsPerEngine: 8, pricePerHour: 3.5}
      online: false
      autoApply: false
      deploymentOverrides: {name, namespace, labels, annotations, workersImage}
      profilingConfig: {configMapRef: {name, key: disagg.yaml}, config: {...}, profilerImage}

  The later upstream v1alpha1 revision (``model`` instead of ``modelName``; the SLA inside the
  free-form ``profilingConfig.config.sla`` and GPU bounds in ``profilingConfig.config.hardware``
  as ``min_num_gpus_per_engine`` / ``max_num_gpus_per_engine`` / ``num_gpus_per_node``;
  ``enableGpuDiscovery``, ``useMocker``, ``runtimeVersionOverride``) parses too. With
  ``online: true``, ``profilingConfig.config.online`` (slaplan) sets the search's budgets and
  sweep: ``max_trials`` (candidates measured), ``max_wall_time_minutes`` and ``concurrency``
  (closed-loop clients of each measurement); the service's settings fill what is missing. A v1alpha1
  request may also carry the v1beta1 blocks ``spec.workload`` (a load) and ``spec.hardware``
  (a GPU budget); ``workload.isl/osl`` win over ``sla.isl/osl``.

``nvidia.com/v1beta1`` — the current upstream shape::

    spec:
      model: Qwen/Qwen3-32B                           # required
      backend: auto | vllm | sglang | trtllm          # default auto (= vllm here)
      hardware: {gpuSku, numGpusPerNode, totalGpus, vramMb, interconnect, rdma, pricePerGpuHour}
      workload: {isl: 4000, osl: 1000, concurrency | requestRate}
      sla: {ttft, itl, e2eLatency, optimizationType}  # ms
      searchStrategy: rapid | thorough                 # default rapid
      autoApply: true
      overrides: {dgd: {...}, profilingJob: {...}}
      image, modelCache, features, runtimeVersionOverride   # accepted; not used by the planner

Where each value comes from (first present wins):

- GPU type: ``spec.gpu.type`` (v1alpha1), ``spec.hardware.gpuSku``; one is required and the two
  must agree when both are given. Whether the GPU (or the model) is known is the profiler
  catalog's business, not this module's.
- GPU price (slaplan extension, $ per GPU-hour, for the cost objective):
  ``spec.gpu.pricePerHour`` (v1alpha1) or ``spec.hardware.pricePerGpuHour`` (both versions).
- v1beta1 ``sla.e2eLatency`` without ``ttft``/``itl``: the missing targets are set to bounds
  that the end-to-end target already implies (TTFT ≤ e2e; ITL ≤ e2e / (osl − 1)), so the
  end-to-end target (``e2e_ms``) is the binding one.
- v1beta1 ``overrides.dgd.metadata`` ``name``/``namespace``/``labels``/``annotations`` become
  the generated deployment's metadata; the rest of ``overrides.dgd`` is not interpreted here.

GPUs per engine (``minNumGPUsPerEngine``, ``maxNumGPUsPerEngine`` and their profiler-config
twins) are at most :data:`MAX_ENGINE_GPUS`. YAML is read by :class:`DocumentLoader`, which the
REST API uses for bodies too: no aliases, no key given twice, no YAML 1.1 base-60 numbers.

Errors are reported all at once as a :class:`RequestError` whose ``causes`` are
``(field_path, message)`` pairs with YAML (camelCase) names, e.g.
``("spec.sla.ttft", "must be greater than 0")``.
"""

from __future__ import annotations

import json
import re
from collections.abc import Hashable
from typing import Annotated, Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator
from pydantic.alias_generators import to_camel

from planner.types import MIN_OSL, PlanRequest

__all__ = [
    "API_VERSIONS",
    "KIND",
    "MAX_ENGINE_GPUS",
    "DocumentLoader",
    "RefusedYAML",
    "RequestError",
    "load_documents",
    "model_field",
    "parse_dgdr",
    "parse_documents",
]

KIND = "DynamoGraphDeploymentRequest"
V1ALPHA1 = "nvidia.com/v1alpha1"
V1BETA1 = "nvidia.com/v1beta1"
API_VERSIONS = (V1ALPHA1, V1BETA1)

# Names are checked with ``fullmatch``: ``$`` would also match before a final newline.
_DNS1123_SUBDOMAIN = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*")
_DNS1123_LABEL = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?")
_SIMPLE_KEY = re.compile(r"^[A-Za-z_][A-Za-z0-9_-]*$")
# GPUs one engine may span (minNumGPUsPerEngine, maxNumGPUsPerEngine): beyond any deployment run
# today, and a search space of engine shapes still explored in seconds (it grows with the bound).
MAX_ENGINE_GPUS = 1024


class RequestError(ValueError):
    """A request that cannot be planned: every problem found, as ``(field_path, message)``.

    ``field_path`` uses the YAML names joined by dots with list indices as ``[0]``
    (``"spec.sla.ttft"``); it is ``""`` for problems of the document as a whole, such as
    malformed YAML (then ``line`` holds the 1-based line number).
    """

    def __init__(self, causes: list[tuple[str, str]], *, source: str | None = None, line: int | None = None):
        self.causes = list(causes)
        self.source = source
        self.line = line
        super().__init__(self.causes)

    def __str__(self) -> str:
        where = f"{self.source}: " if self.source else ""
        lines = [f"{path}: {msg}" if path else msg for path, msg in self.causes]
        if len(lines) == 1:
            return f"{where}invalid request: {lines[0]}"
        return f"{where}invalid request ({len(lines)} problems):\n" + "\n".join(f"  - {x}" for x in lines)


# --------------------------------------------------------------------------------------------
# The user-facing shapes. Field names map to the YAML's camelCase through the alias generator;
# strict mode keeps Kubernetes typing (no "8" for 8, no "yes" for true).
# --------------------------------------------------------------------------------------------


class _Spec(BaseModel):
    model_config = ConfigDict(
        frozen=True,
        extra="forbid",
        strict=True,
        allow_inf_nan=False,
        alias_generator=to_camel,
        protected_namespaces=(),
    )


class _FreeForm(BaseModel):
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
        return _dns_subdomain(v)

    @field_validator("namespace")
    @classmethod
    def _namespace_is_dns_label(cls, v: str) -> str:
        return _dns_label(v)


def _dns_subdomain(v: str) -> str:
    if len(v) > 253 or not _DNS1123_SUBDOMAIN.fullmatch(v):
        raise ValueError(
            "must be a DNS-1123 subdomain: lowercase letters, digits, '-' and '.', "
            "starting and ending with a letter or digit, at most 253 characters"
        )
    return v


def _dns_label(v: str) -> str:
    if len(v) > 63 or not _DNS1123_LABEL.fullmatch(v):
        raise ValueError(
            "must be a DNS-1123 label: lowercase letters, digits and '-', "
            "starting and ending with a letter or digit, at most 63 characters"
        )
    return v


class Hardware(_Spec):
    """``spec.hardware`` (v1beta1 shape): the GPUs available. ``vramMb`` in MiB."""

    gpu_sku: str | None = Field(default=None, min_length=1)
    num_gpus_per_node: int | None = Field(default=None, gt=0)
    total_gpus: int | None = Field(default=None, gt=0, description="GPU budget of the deployment")
    vram_mb: float | None = Field(default=None, gt=0)
    interconnect: str | None = None
    rdma: bool | None = None
    price_per_gpu_hour: float | None = Field(default=None, gt=0, description="$ per GPU-hour (slaplan)")


class Workload(_Spec):
    """``spec.workload``: token lengths and the offered load (concurrency XOR requests/s)."""

    isl: int | None = Field(default=None, gt=0, description="input tokens per request")
    osl: int | None = Field(default=None, ge=MIN_OSL, description="output tokens per request (ITL needs two)")
    concurrency: float | None = Field(default=None, gt=0, description="closed-loop clients")
    request_rate: float | None = Field(default=None, gt=0, description="requests/s")


class SLAv1alpha1(_Spec):
    """``spec.sla`` (v1alpha1): targets in ms; optional isl/osl in tokens."""

    ttft: float = Field(gt=0)
    itl: float = Field(gt=0)
    isl: int | None = Field(default=None, gt=0)
    osl: int | None = Field(default=None, ge=MIN_OSL)


class GPUv1alpha1(_Spec):
    """``spec.gpu`` (v1alpha1)."""

    type: str | None = Field(default=None, min_length=1)
    min_num_gpus_per_engine: int | None = Field(default=None, gt=0, le=MAX_ENGINE_GPUS, alias="minNumGPUsPerEngine")
    max_num_gpus_per_engine: int | None = Field(default=None, gt=0, le=MAX_ENGINE_GPUS, alias="maxNumGPUsPerEngine")
    price_per_hour: float | None = Field(default=None, gt=0, description="$ per GPU-hour (slaplan)")


class DeploymentOverrides(_Spec):
    """``spec.deploymentOverrides`` (v1alpha1): metadata and image of the generated DGD."""

    name: str | None = None
    namespace: str | None = None
    labels: dict[str, str] = Field(default_factory=dict)
    annotations: dict[str, str] = Field(default_factory=dict)
    workers_image: str | None = Field(default=None, min_length=1)

    @field_validator("name")
    @classmethod
    def _name_ok(cls, v: str | None) -> str | None:
        return None if v is None else _dns_subdomain(v)

    @field_validator("namespace")
    @classmethod
    def _namespace_ok(cls, v: str | None) -> str | None:
        return None if v is None else _dns_label(v)


class ConfigMapRef(_Spec):
    name: str = Field(min_length=1)
    key: str = "disagg.yaml"


class ProfilingConfig(_Spec):
    """``spec.profilingConfig`` (v1alpha1). ``config`` is free-form profiler configuration."""

    config_map_ref: ConfigMapRef | None = None
    config: dict[str, Any] | None = None
    profiler_image: str | None = None
    node_selector: dict[str, str] | None = None
    output_pvc: str | None = Field(default=None, alias="outputPVC")
    resources: dict[str, Any] | None = None
    tolerations: list[dict[str, Any]] | None = None


class _ProfileSLA(_FreeForm):
    ttft: float | None = Field(default=None, gt=0)
    itl: float | None = Field(default=None, gt=0)
    isl: int | None = Field(default=None, gt=0)
    osl: int | None = Field(default=None, ge=MIN_OSL)


class _ProfileHardware(_FreeForm):
    min_num_gpus_per_engine: int | None = Field(default=None, gt=0, le=MAX_ENGINE_GPUS)
    max_num_gpus_per_engine: int | None = Field(default=None, gt=0, le=MAX_ENGINE_GPUS)
    num_gpus_per_node: int | None = Field(default=None, gt=0)


class _ProfileOnline(_Spec):
    """``profilingConfig.config.online`` (slaplan): budgets and sweep of an online search."""

    model_config = ConfigDict(alias_generator=None)

    max_trials: int | None = Field(default=None, gt=0, description="candidates measured at most")
    max_wall_time_minutes: float | None = Field(default=None, gt=0, description="wall time of the search")
    concurrency: list[Annotated[int, Field(gt=0)]] | None = Field(default=None, min_length=1, max_length=16)


class _ProfileConfig(_FreeForm):
    """The parts of the upstream profiler config (``profilingConfig.config``) we read."""

    sla: _ProfileSLA | None = None
    hardware: _ProfileHardware | None = None
    online: _ProfileOnline | None = None


class SpecV1alpha1(_Spec):
    """``spec`` of a ``nvidia.com/v1alpha1`` DGDR (see the module docstring)."""

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


class SLAv1beta1(_Spec):
    """``spec.sla`` (v1beta1): targets in ms."""

    ttft: float | None = Field(default=None, gt=0)
    itl: float | None = Field(default=None, gt=0)
    e2e_latency: float | None = Field(default=None, gt=0, alias="e2eLatency")
    optimization_type: Literal["latency", "throughput"] | None = None


class Overrides(_Spec):
    dgd: dict[str, Any] | None = None
    profiling_job: dict[str, Any] | None = None


class ModelCache(_Spec):
    pvc_name: str | None = None
    pvc_model_path: str | None = None
    pvc_mount_path: str = "/opt/model-cache"


class _Mocker(_Spec):
    enabled: bool | None = None


class Features(_Spec):
    planner: dict[str, Any] | None = None
    mocker: _Mocker | None = None


class SpecV1beta1(_Spec):
    """``spec`` of a ``nvidia.com/v1beta1`` DGDR (see the module docstring)."""

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


# --------------------------------------------------------------------------------------------
# Error reporting
# --------------------------------------------------------------------------------------------


def _path(parts: tuple[Any, ...] | list[Any]) -> str:
    """Join a location into ``spec.sla.ttft`` / ``items[0]`` / ``labels[app.kubernetes.io/x]``."""
    out = ""
    for p in parts:
        if isinstance(p, int):
            out += f"[{p}]"
        elif out and not _SIMPLE_KEY.match(str(p)):
            out += f"[{p}]"
        else:
            out += f".{p}" if out else str(p)
    return out


def _number(x: Any) -> str:
    if isinstance(x, float) and x.is_integer():
        return str(int(x))
    return str(x)


def _message(err: dict[str, Any]) -> str:
    """A short message for one pydantic error, in the vocabulary of the API reference."""
    kind, ctx = err["type"], err.get("ctx") or {}
    if kind == "missing":
        return "field required"
    if kind == "extra_forbidden":
        return "unknown field"
    if kind == "greater_than":
        return f"must be greater than {_number(ctx.get('gt'))}"
    if kind == "greater_than_equal":
        return f"must be at least {_number(ctx.get('ge'))}"
    if kind == "less_than_equal":
        return f"must be at most {_number(ctx.get('le'))}"
    if kind == "literal_error":
        choices = re.findall(r"'([^']*)'", str(ctx.get("expected", "")))
        return "must be one of " + ", ".join(choices)
    if kind == "string_too_short":
        return "must not be empty"
    if kind == "string_type":
        return "must be a string"
    if kind in ("int_type", "int_parsing", "int_from_float"):
        return "must be an integer"
    if kind in ("float_type", "float_parsing"):
        return "must be a number"
    if kind == "finite_number":
        return "must be finite"
    if kind in ("bool_type", "bool_parsing"):
        return "must be a boolean (true or false)"
    if kind in ("dict_type", "model_type", "model_attributes_type"):
        return "must be a mapping"
    if kind == "list_type":
        return "must be a list"
    if kind == "string_pattern_mismatch":
        return f"must match {ctx.get('pattern')}"
    if kind == "value_error":
        return str(err["msg"]).removeprefix("Value error, ")
    return str(err["msg"])


def _validate(model: type[BaseModel], data: Any, prefix: str, causes: list[tuple[str, str]]) -> Any:
    """Validate ``data`` as ``model``; on failure append causes under ``prefix`` and return None."""
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        for err in exc.errors():
            causes.append((_path((prefix, *err["loc"])), _message(err)))
        return None


# --------------------------------------------------------------------------------------------
# Documents
# --------------------------------------------------------------------------------------------


def _type_causes(doc: dict[str, Any]) -> list[tuple[str, str]]:
    """Problems with ``apiVersion`` / ``kind`` (empty when this is a DGDR we read)."""
    causes = []
    api_version, kind = doc.get("apiVersion"), doc.get("kind")
    if api_version is None:
        causes.append(("apiVersion", "field required"))
    elif api_version not in API_VERSIONS:
        causes.append(("apiVersion", f"must be one of {', '.join(API_VERSIONS)} (got {api_version!r})"))
    if kind is None:
        causes.append(("kind", "field required"))
    elif kind != KIND:
        causes.append(("kind", f"must be {KIND} (got {kind!r})"))
    return causes


class DuplicateKey(ValueError):
    """A JSON object that names a key twice: the last would silently replace the first."""


def _unique_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in pairs:
        if key in out:
            raise DuplicateKey(f"duplicate key {key!r}")
        out[key] = value
    return out


def loads_json(text: str) -> Any:
    """``json.loads`` refusing an object with a key given twice (DuplicateKey), as
    :class:`DocumentLoader` refuses it in YAML."""
    return json.loads(text, object_pairs_hook=_unique_keys)


class RefusedYAML(yaml.MarkedYAMLError):
    """YAML that parses but would not say what it seems to: ``problem`` says what, ``problem_mark``
    where (0-based line and column)."""


class DocumentLoader(yaml.SafeLoader):
    """``yaml.SafeLoader`` for manifests and API bodies, which refuses (RefusedYAML):

    - aliases (``*name``, also in ``<<: *name``): an alias repeats a whole anchored value, so a few
      hundred bytes of aliases of aliases expand to gigabytes;
    - a key given twice in one mapping: the last would silently replace the first (a second
      ``spec:`` the whole spec);

    and reads plain scalars with a colon, YAML 1.1's base-60 numbers (``isl: 1:30`` = 90), as the
    strings YAML 1.2 (and Kubernetes) read.
    """

    def compose_node(self, parent: Any, index: Any) -> Any:
        if self.check_event(yaml.AliasEvent):
            event = self.peek_event()
            raise RefusedYAML(problem=f"a YAML alias (*{event.anchor}): anchors and aliases are not supported, "
                                      "write the value out", problem_mark=event.start_mark)
        return super().compose_node(parent, index)

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
        first: dict[Any, yaml.Node] = {}
        for key_node, _ in node.value:
            if key_node.tag == "tag:yaml.org,2002:merge":  # ``<<``: merged keys may be overridden
                continue
            key = self.construct_object(key_node, deep=deep)
            if not isinstance(key, Hashable):  # the base class refuses it
                continue
            if key in first:
                raise RefusedYAML(problem=f"duplicate key {key!r} (first at line {first[key].start_mark.line + 1})",
                                  problem_mark=key_node.start_mark)
            first[key] = key_node
        return super().construct_mapping(node, deep=deep)

    def resolve(self, kind: type[yaml.Node], value: Any, implicit: tuple[bool, bool]) -> str:
        tag = super().resolve(kind, value, implicit)
        if tag in ("tag:yaml.org,2002:int", "tag:yaml.org,2002:float") and ":" in value:
            return "tag:yaml.org,2002:str"
        return tag


_UNREADABLE = "nested too deeply, or holds a number or date out of range"


def load_documents(text: str, source: str) -> list[dict[str, Any]]:
    """Read one or many DGDR documents from YAML (``---``-separated) or JSON text.

    JSON may be one object or an array of objects. Empty documents are skipped. Each document
    must be a mapping with ``apiVersion`` in :data:`API_VERSIONS` and ``kind``
    ``DynamoGraphDeploymentRequest``; problems of the later documents name them
    ("document 2"). ``source`` (a file name, "<stdin>", …) is only used in messages.
    YAML is read with :class:`DocumentLoader` (no aliases, no duplicate keys, no base-60
    numbers). Raises :class:`RequestError`; malformed text reports its 1-based line number.
    """
    stripped = text.lstrip()
    docs: list[Any]
    if stripped.startswith(("{", "[")):
        try:
            loaded = loads_json(text)
        except json.JSONDecodeError as exc:
            msg = f"invalid JSON at line {exc.lineno}, column {exc.colno}: {exc.msg}"
            raise RequestError([("", msg)], source=source, line=exc.lineno) from None
        except DuplicateKey as exc:
            raise RequestError([("", f"invalid JSON: {exc}")], source=source) from None
        except (RecursionError, ValueError):
            raise RequestError([("", _UNREADABLE)], source=source) from None
        docs = loaded if isinstance(loaded, list) else [loaded]
    else:
        try:
            docs = list(yaml.load_all(text, Loader=DocumentLoader))
        except (RecursionError, ValueError):
            raise RequestError([("", _UNREADABLE)], source=source) from None
        except yaml.YAMLError as exc:
            mark = getattr(exc, "problem_mark", None) or getattr(exc, "context_mark", None)
            line = mark.line + 1 if mark is not None else None
            problem = getattr(exc, "problem", None) or str(exc)
            where = f" at line {line}, column {mark.column + 1}" if mark is not None else ""
            raise RequestError([("", f"invalid YAML{where}: {problem}")], source=source, line=line) from None

    docs = [d for d in docs if d is not None]
    if not docs:
        raise RequestError([("", "no documents found")], source=source)
    many = len(docs) > 1
    causes: list[tuple[str, str]] = []
    for i, doc in enumerate(docs, start=1):
        tag = f" (document {i})" if many else ""
        if not isinstance(doc, dict):
            causes.append(("", f"document {i} must be a mapping, got {type(doc).__name__}"))
            continue
        causes.extend((path, msg + tag) for path, msg in _type_causes(doc))
    if causes:
        raise RequestError(causes, source=source)
    return docs


def parse_documents(text: str, source: str) -> list[PlanRequest]:
    """:func:`load_documents` then :func:`parse_dgdr` on each; all problems raised together."""
    docs = load_documents(text, source)
    out: list[PlanRequest] = []
    causes: list[tuple[str, str]] = []
    for i, doc in enumerate(docs, start=1):
        try:
            out.append(parse_dgdr(doc))
        except RequestError as exc:
            tag = f" (document {i})" if len(docs) > 1 else ""
            causes.extend((p, m + tag) for p, m in exc.causes)
    if causes:
        raise RequestError(causes, source=source)
    return out


# --------------------------------------------------------------------------------------------
# Parsing
# --------------------------------------------------------------------------------------------

_TOP_LEVEL = {"apiVersion", "kind", "metadata", "spec", "status"}


def parse_dgdr(obj: dict[str, Any]) -> PlanRequest:
    """Validate one DGDR (``nvidia.com/v1alpha1`` or ``v1beta1``) and normalize it.

    Raises :class:`RequestError` listing every problem found. ``status`` (present on
    objects read back from a cluster) is ignored.
    """
    if not isinstance(obj, dict):
        raise RequestError([("", f"a DGDR must be a mapping, got {type(obj).__name__}")])
    causes = _type_causes(obj)
    if any(path == "apiVersion" for path, _ in causes):
        raise RequestError(causes)
    causes += [(key, "unknown field") for key in obj if key not in _TOP_LEVEL]

    if "metadata" not in obj:
        causes.append(("metadata.name", "field required"))
        meta = None
    else:
        meta = _validate(Metadata, obj["metadata"], "metadata", causes)

    if "spec" not in obj:
        causes.append(("spec", "field required"))
        raise RequestError(causes)
    raw = obj["spec"]
    if obj["apiVersion"] == V1ALPHA1:
        spec = _validate(SpecV1alpha1, raw, "spec", causes)
        fields = _from_v1alpha1(spec, causes) if spec is not None else None
    else:
        spec = _validate(SpecV1beta1, raw, "spec", causes)
        fields = _from_v1beta1(spec, causes) if spec is not None else None
    if spec is None and isinstance(raw, dict):
        causes += _missing(raw, obj["apiVersion"])

    if causes or meta is None or fields is None:
        raise RequestError(list(dict.fromkeys(causes)))
    try:
        request = PlanRequest(name=meta.name, namespace=meta.namespace, **fields)
    except ValidationError as exc:  # a combination the checks above did not foresee
        raise RequestError([(_path(("spec", *e["loc"])), _message(e)) for e in exc.errors()]) from None
    causes = _catalog_causes(raw, request)
    if causes:
        raise RequestError(causes)
    return request


def model_field(spec: Any) -> str:
    """The field a DGDR's ``spec`` names its model with, for messages: ``spec.modelName``, or
    ``spec.model`` when that is the one given (v1beta1, the later v1alpha1 revision)."""
    named_model = isinstance(spec, dict) and "model" in spec and "modelName" not in spec
    return "spec.model" if named_model else "spec.modelName"


def _catalog_causes(raw: dict[str, Any], request: PlanRequest) -> list[tuple[str, str]]:
    """An unknown GPU, named by the field the request used, or one the backend does not run on.
    (The model is checked where it is loaded: a name outside the catalog may still be fetched
    from the Hugging Face Hub.)"""
    from profiler.errors import ModelError
    from profiler.gpus import backend_mismatch, get_gpu

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


def _missing(raw: dict[str, Any], api_version: str) -> list[tuple[str, str]]:
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
        causes.append(_NO_GPU)
    return causes


_NO_GPU = ("spec.gpu.type", "a GPU type is required: set spec.gpu.type or spec.hardware.gpuSku")


def _agree(a: tuple[str, Any], b: tuple[str, Any], causes: list[tuple[str, str]]) -> Any:
    """The value of two alternative fields, or a cause when both are set and differ."""
    (path_a, val_a), (path_b, val_b) = a, b
    if val_a is not None and val_b is not None and val_a != val_b:
        causes.append((path_a, f"conflicts with {path_b} ({val_a!r} != {val_b!r})"))
    return val_a if val_a is not None else val_b


def _first(*values: Any) -> Any:
    return next((v for v in values if v is not None), None)


def _gpu_type(gpu_type: str | None, gpu_sku: str | None, causes: list[tuple[str, str]]) -> str | None:
    gpu = _agree(("spec.gpu.type", gpu_type), ("spec.hardware.gpuSku", gpu_sku), causes)
    if gpu is None:
        causes.append(_NO_GPU)
    return gpu


def _load(workload: Workload | None, causes: list[tuple[str, str]]) -> dict[str, Any]:
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


def _budget(hw: Hardware | None) -> dict[str, Any]:
    if hw is None:
        return {}
    return {"gpus_per_node": hw.num_gpus_per_node, "total_gpus": hw.total_gpus}


def _engine_bounds(lo: int, hi: int, causes: list[tuple[str, str]], path: str) -> None:
    if lo > hi:
        causes.append((path, f"minimum GPUs per engine ({lo}) exceeds the maximum ({hi})"))


def _from_v1alpha1(spec: SpecV1alpha1, causes: list[tuple[str, str]]) -> dict[str, Any] | None:
    """PlanRequest fields (besides name/namespace) from a validated v1alpha1 spec."""
    model = _agree(("spec.modelName", spec.model_name), ("spec.model", spec.model), causes)
    if model is None:
        causes.append(("spec.modelName", "field required"))

    config = None
    if spec.profiling_config is not None and spec.profiling_config.config is not None:
        config = _validate(_ProfileConfig, spec.profiling_config.config, "spec.profilingConfig.config", causes)
    cfg_sla = config.sla if config is not None and config.sla is not None else _ProfileSLA()
    cfg_hw = config.hardware if config is not None and config.hardware is not None else _ProfileHardware()

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
    lo = _first(gpu.min_num_gpus_per_engine, cfg_hw.min_num_gpus_per_engine, 1)
    hi = _first(gpu.max_num_gpus_per_engine, cfg_hw.max_num_gpus_per_engine, 8)
    _engine_bounds(lo, hi, causes, "spec.gpu.minNumGPUsPerEngine")
    load = _load(spec.workload, causes)
    budget = _budget(hw)
    if budget.get("gpus_per_node") is None:
        budget["gpus_per_node"] = cfg_hw.num_gpus_per_node

    online = config.online if config is not None and config.online is not None else _ProfileOnline()
    over = spec.deployment_overrides or DeploymentOverrides()
    if model is None or gpu_type is None or ttft is None or itl is None:
        return None
    return {
        "model": model,
        "backend": spec.backend,
        "gpu": gpu_type,
        "isl_tokens": _first(workload.isl, sla.isl if sla else None, cfg_sla.isl, 3000),
        "osl_tokens": _first(workload.osl, sla.osl if sla else None, cfg_sla.osl, 500),
        "ttft_ms": float(ttft),
        "itl_ms": float(itl),
        "min_gpus_per_engine": lo,
        "max_gpus_per_engine": hi,
        "gpu_price_per_hour": price,
        "online": spec.online,
        "max_trials": online.max_trials,
        "max_wall_minutes": online.max_wall_time_minutes,
        "sweep_concurrency": tuple(sorted(set(online.concurrency))) if online.concurrency else None,
        "auto_apply": spec.auto_apply,
        "deployment_name": over.name,
        "deployment_namespace": over.namespace,
        "labels": dict(over.labels),
        "annotations": dict(over.annotations),
        "image": over.workers_image,
        **load,
        **budget,
    }


def _dgd_metadata(overrides: Overrides | None, causes: list[tuple[str, str]]) -> dict[str, Any]:
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
    checks = (("name", "deployment_name", _dns_subdomain), ("namespace", "deployment_namespace", _dns_label))
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


def _from_v1beta1(spec: SpecV1beta1, causes: list[tuple[str, str]]) -> dict[str, Any] | None:
    """PlanRequest fields (besides name/namespace) from a validated v1beta1 spec."""
    hw = spec.hardware
    workload = spec.workload or Workload()
    isl = workload.isl if workload.isl is not None else 4000
    osl = workload.osl if workload.osl is not None else 1000
    gpu_type = _gpu_type(None, hw.gpu_sku if hw else None, causes)

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
        "e2e_ms": float(e2e) if e2e is not None else None,
        "gpu_price_per_hour": hw.price_per_gpu_hour if hw else None,
        "search_strategy": spec.search_strategy,
        "auto_apply": spec.auto_apply,
        **load,
        **_budget(hw),
        **meta,
    }
