"""The OME ``ome.io/v1beta1`` BenchmarkJob spec as frozen models, and its validation.

Field names are snake_case in Python and camelCase on the wire (as in the CRD), and values
must have the CRD's JSON types (strict: no "5" or true for an integer). Beyond the
CRD's own schema, ``parse_benchmarkjob`` checks what a correct runner needs: exactly one
endpoint kind, traffic scenarios in genai-bench's grammar (no spaces), positive concurrency
levels, and an output location whose scheme genai-bench can write to.
"""

from __future__ import annotations

import re
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator
from pydantic.alias_generators import to_camel

API_VERSION = "ome.io/v1beta1"
KIND = "BenchmarkJob"

# genai-bench's scenario grammar: D(in,out), N(mean_in,sd_in)/(mean_out,sd_out),
# U(min_in,max_in)/(min_out,max_out) or U(max_in,max_out), E(tokens), R(doc,query),
# I(w,h[,n]), A(chars), dataset.
_SCENARIO = re.compile(
    r"^(?:D\(\d+,\d+\)"
    r"|N\(\d+,\d+\)/\(\d+,\d+\)"
    r"|U\(\d+,\d+\)(?:/\(\d+,\d+\))?"
    r"|E\(\d+\)"
    r"|R\(\d+,\d+\)"
    r"|I\(\d+,\d+(?:,\d+)?\)"
    r"|A\(\d+\)"
    r"|dataset)$"
)
_TASK = re.compile(r"^[a-z]+-to-[a-z]+$")
# Storage schemes the runner maps to genai-bench flags (pvc://, file://, local:// -> a local base dir,
# object stores -> --upload-results --storage-provider ...).
OUTPUT_SCHEMES = ("pvc", "file", "local", "s3", "gs", "az", "oci")


class _Spec(BaseModel):
    # strict: JSON types as the CRD declares them (no "5" or true for an integer).
    model_config = ConfigDict(frozen=True, extra="forbid", strict=True, alias_generator=to_camel, validate_by_name=True)


# A CRD list held as a tuple: the JSON array is converted to one; its items stay strictly typed.
_ARRAY = Field(strict=False)


class InferenceServiceReference(_Spec):
    name: str = Field(min_length=1)
    namespace: str = Field(min_length=1)


class Endpoint(_Spec):
    """A direct URL. ``url`` is the bare base: genai-bench appends ``/v1/chat/completions``."""

    url: str = Field(pattern=r"^(http|https)://")
    api_format: Literal["openai", "oci-cohere", "cohere"]
    model_name: str | None = None


class EndpointSpec(_Spec):
    inference_service: InferenceServiceReference | None = None
    endpoint: Endpoint | None = None

    @model_validator(mode="after")
    def _exactly_one(self) -> EndpointSpec:
        if (self.inference_service is None) == (self.endpoint is None):
            raise ValueError("exactly one of inferenceService or endpoint must be set")
        return self


class ServiceMetadata(_Spec):
    engine: Literal["vLLM", "SGLang", "TGI"]
    version: str
    gpu_type: Literal["H100", "A100", "MI300", "A10"]
    gpu_count: int = Field(gt=0)


class StorageSpec(_Spec):
    """Where data lives: ``storageUri`` such as ``pvc://claim/sub/path`` or ``s3://bucket/prefix``."""

    storage_uri: str = Field(min_length=1)
    path: str | None = None
    schema_path: str | None = None
    parameters: dict[str, str] | None = None
    key: str | None = None
    download_policy: Literal["AlwaysDownload", "ReuseIfExists"] | None = None
    node_selector: dict[str, str] | None = None
    node_affinity: dict[str, Any] | None = None


class HuggingFaceSecretReference(_Spec):
    name: str = Field(min_length=1)


class PodOverride(_Spec):
    """Kubernetes pod fields passed through unchecked (their schemas are Kubernetes' own)."""

    image: str | None = None
    env: list[dict[str, Any]] | None = None
    env_from: list[dict[str, Any]] | None = None
    volume_mounts: list[dict[str, Any]] | None = None
    resources: dict[str, Any] | None = None
    tolerations: list[dict[str, Any]] | None = None
    node_selector: dict[str, str] | None = None
    affinity: dict[str, Any] | None = None
    volumes: list[dict[str, Any]] | None = None


class BenchmarkJobSpec(_Spec):
    """What to benchmark, with which traffic, for how long, and where results go.

    ``max_time_per_iteration`` is in minutes; one iteration is one (scenario, concurrency) pair.
    Empty scenario or concurrency lists mean genai-bench's defaults.
    """

    hugging_face_secret_reference: HuggingFaceSecretReference | None = None
    endpoint: EndpointSpec
    service_metadata: ServiceMetadata | None = None
    task: str
    traffic_scenarios: Annotated[tuple[str, ...], _ARRAY] = ()
    num_concurrency: Annotated[tuple[int, ...], _ARRAY] = ()
    max_time_per_iteration: int = Field(gt=0, description="minutes")
    max_requests_per_iteration: int = Field(gt=0)
    additional_request_params: dict[str, str] | None = None
    dataset: StorageSpec | None = None
    output_location: StorageSpec
    result_folder_name: str | None = None
    pod_override: PodOverride | None = None

    @field_validator("task")
    @classmethod
    def _task(cls, value: str) -> str:
        if not _TASK.match(value):
            raise ValueError('must look like "<input>-to-<output>", e.g. "text-to-text"')
        return value

    @field_validator("traffic_scenarios", "num_concurrency")
    @classmethod
    def _set(cls, values: tuple[Any, ...]) -> tuple[Any, ...]:
        if len(set(values)) != len(values):
            raise ValueError("Duplicate value: the list is a set (each value at most once)")
        return values

    @field_validator("traffic_scenarios")
    @classmethod
    def _scenarios(cls, values: tuple[str, ...]) -> tuple[str, ...]:
        bad = [v for v in values if not _SCENARIO.match(v)]
        if bad:
            raise ValueError(
                f"invalid traffic scenario(s) {bad}: expected D(in,out), N(m,s)/(m,s), U(..), E(n), "
                "R(doc,query), I(w,h[,n]), A(chars) or dataset, without spaces"
            )
        return values

    @field_validator("num_concurrency")
    @classmethod
    def _concurrency(cls, values: tuple[int, ...]) -> tuple[int, ...]:
        if any(v <= 0 for v in values):
            raise ValueError("concurrency levels must be positive")
        return values

    @field_validator("output_location")
    @classmethod
    def _output(cls, value: StorageSpec) -> StorageSpec:
        scheme = value.storage_uri.split("://", 1)[0] if "://" in value.storage_uri else ""
        if scheme not in OUTPUT_SCHEMES:
            raise ValueError(f"storageUri must start with one of {', '.join(s + '://' for s in OUTPUT_SCHEMES)}")
        return value

    @model_validator(mode="after")
    def _dataset_needed(self) -> BenchmarkJobSpec:
        if not self.task.startswith("text-to-") and self.dataset is None:
            raise ValueError(f'task "{self.task}" needs a dataset')
        return self


class BenchmarkJobError(ValueError):
    """An invalid BenchmarkJob; ``causes`` lists ``(field_path, message)`` pairs."""

    def __init__(self, causes: list[tuple[str, str]]):
        self.causes = causes
        super().__init__("; ".join(f"{f}: {m}" for f, m in causes))


def parse_benchmarkjob(obj: dict[str, Any]) -> BenchmarkJobSpec:
    """Validate a BenchmarkJob object (``apiVersion``, ``kind``, ``metadata``, ``spec``).

    Raises ``BenchmarkJobError`` naming each bad field as a path such as
    ``spec.endpoint.endpoint.url``. Messages never repeat the submitted values.
    """
    spec = obj.get("spec")
    if not isinstance(spec, dict):
        raise BenchmarkJobError([("spec", "Required value: spec must be an object")])
    try:
        return BenchmarkJobSpec.model_validate(spec)
    except ValidationError as exc:
        raise BenchmarkJobError([(_path(e["loc"]), _message(e)) for e in exc.errors(include_input=False)]) from None


def _path(loc: tuple[Any, ...]) -> str:
    path = "spec"
    for part in loc:
        path += f"[{part}]" if isinstance(part, int) else f".{part}"
    return path


def _message(error: dict[str, Any]) -> str:
    if error["type"] == "missing":
        return "Required value"
    if error["type"] == "extra_forbidden":
        return "unknown field"
    if error["type"] == "tuple_type":
        return "Input should be a valid list"
    return error["msg"].removeprefix("Value error, ")
