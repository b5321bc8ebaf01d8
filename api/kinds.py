"""The custom resources slaplan serves, and how each is validated and initialised."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any

from api.conversion import convert_dgdr
from workers import lifecycle

if TYPE_CHECKING:
    from planner.types import PlanRequest

DGDR_GROUP = "nvidia.com"
BENCH_GROUP = "ome.io"


class InvalidSpec(ValueError):
    """A spec that failed validation; ``causes`` are ``(field_path, message)`` pairs."""

    def __init__(self, causes: list[tuple[str, str]]):
        self.causes = causes
        super().__init__("; ".join(f"{f}: {m}" for f, m in causes))


@dataclass(frozen=True)
class ServedKind:
    group: str
    versions: tuple[str, ...]
    kind: str
    plural: str
    singular: str
    short_names: tuple[str, ...]
    # validate(object) -> the object as read (what the checks below take); InvalidSpec when invalid.
    validate: Callable[[dict[str, Any]], Any]
    initial_status: Callable[[int, datetime], dict[str, Any]]
    # States in which the spec may still change (before work starts).
    editable_states: frozenset[str]
    # convert(object, version) -> the object at that served version (conversion webhook's job).
    convert: Callable[[dict[str, Any], str], dict[str, Any]] = lambda obj, _version: obj
    # deploys(read) -> whether the workers will apply something to the cluster for the object
    # ``validate`` read.
    deploys: Callable[[Any], bool] = lambda _read: False
    # model_causes(read, object, model_dirs) -> (field, message) for each model the object names that
    # the server would not load for a request from the network (model_dirs: the allowed local ones).
    model_causes: Callable[[Any, dict[str, Any], Sequence[str]], list[tuple[str, str]]] = lambda _read, _obj, _dirs: []

    @property
    def list_kind(self) -> str:
        return f"{self.kind}List"


def _validate_dgdr(obj: dict[str, Any]) -> PlanRequest:
    if not isinstance(obj.get("spec"), dict):
        raise InvalidSpec([("spec", "Required value: spec must be an object")])
    from planner.request import RequestError, parse_dgdr

    try:
        return parse_dgdr(obj)
    except RequestError as exc:
        causes = [(str(f), str(m)) for f, m in (getattr(exc, "causes", None) or [("spec", str(exc))])]
        raise InvalidSpec(causes) from None


def _dgdr_deploys(request: PlanRequest) -> bool:
    return request.auto_apply  # the effective value: v1beta1 defaults to true


def _dgdr_model_causes(request: PlanRequest, obj: dict[str, Any], model_dirs: Sequence[str]) -> list[tuple[str, str]]:
    """The model field, when it names neither a catalog model, a Hub id nor a directory under
    ``model_dirs``: the same message for every such name, whether or not it is a path that exists."""
    from planner.request import model_field
    from profiler.model.errors import ModelError
    from profiler.hub import check_model_name

    try:
        check_model_name(request.model, local_roots=model_dirs)
    except ModelError as exc:
        return [(model_field(obj.get("spec")), f"Invalid value: {exc.message}")]
    return []


def _validate_benchmarkjob(obj: dict[str, Any]) -> Any:
    from profiler.bench.spec import BenchmarkJobError, parse_benchmarkjob

    try:
        return parse_benchmarkjob(obj)
    except BenchmarkJobError as exc:
        raise InvalidSpec(exc.causes) from None


DGDR = ServedKind(
    group=DGDR_GROUP,
    versions=("v1alpha1", "v1beta1"),
    kind="DynamoGraphDeploymentRequest",
    plural="dynamographdeploymentrequests",
    singular="dynamographdeploymentrequest",
    short_names=("dgdr",),
    validate=_validate_dgdr,
    initial_status=lifecycle.dgdr_pending,
    editable_states=frozenset({"", "Pending"}),
    convert=convert_dgdr,
    deploys=_dgdr_deploys,
    model_causes=_dgdr_model_causes,
)

BENCHMARKJOB = ServedKind(
    group=BENCH_GROUP,
    versions=("v1beta1",),
    kind="BenchmarkJob",
    plural="benchmarkjobs",
    singular="benchmarkjob",
    short_names=(),
    validate=_validate_benchmarkjob,
    initial_status=lambda _generation, _now: lifecycle.bench_pending(),
    editable_states=frozenset({"", "Pending"}),
)

SERVED: tuple[ServedKind, ...] = (DGDR, BENCHMARKJOB)


def find_kind(group: str, version: str, plural: str) -> ServedKind | None:
    return next((k for k in SERVED if k.group == group and k.plural == plural and version in k.versions), None)


def groups() -> dict[str, list[str]]:
    """API group → served versions (preferred first: the first listed)."""
    out: dict[str, list[str]] = {}
    for k in SERVED:
        versions = out.setdefault(k.group, [])
        versions.extend(v for v in k.versions if v not in versions)
    return out
