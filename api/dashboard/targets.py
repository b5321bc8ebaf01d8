"""The chosen plan of a DGDR as manifests for every deployment target, for the dashboard.

Dynamo's DynamoGraphDeployment is the one the worker generated (``status.generatedDeployment``).
The others are rendered by the one registry (``planner.manifests.targets``) from the plan stored
in ``status.profilingResults``, for the request in the stored spec: exactly what the worker saw.
"""

from __future__ import annotations

from typing import Any, NamedTuple

from api.objects import manifests_yaml
from infra.resources import Resource, to_object
from planner.manifests.targets import REGISTRY, TARGETS, render_target as render_stored

__all__ = ["TARGETS", "TARGET_LABELS", "Rendered", "render_target"]

TARGET_LABELS = {name: target.label for name, target in REGISTRY.items()}


class Rendered(NamedTuple):
    target: str
    text: str  # YAML; empty when not available
    problem: str  # why there is no manifest, in plain words
    note: str = ""  # e.g. that another plan than the chosen one was rendered


def _dump(objects: list[dict[str, Any]]) -> str:
    return manifests_yaml(objects, default_flow_style=False, width=120)


def render_target(resource: Resource, target: str) -> Rendered:
    """The manifest(s) of ``target`` for a profiled DGDR, or the reason there are none."""
    from planner.request import RequestError, parse_dgdr
    from planner.results import ProfilingResults

    if target not in REGISTRY:
        return Rendered(target, "", f"unknown target {target!r}; choose one of {', '.join(TARGETS)}")
    generated = resource.status.get("generatedDeployment")
    if target == "dynamo" and isinstance(generated, dict) and generated:
        return Rendered(target, _dump([generated]), "")
    results = ProfilingResults.read(resource.status.get("profilingResults"))
    if results is None or results.chosen is None:
        return Rendered(target, "", "no plan was chosen, so there is nothing to deploy")
    try:
        request = parse_dgdr(to_object(resource))
        objects, notes = render_stored(
            results, request, target, dynamo_version="v1beta1" if resource.version == "v1beta1" else "v1alpha1")
    except RequestError as exc:
        return Rendered(target, "", f"could not render this target: {exc}")
    except ValueError as exc:
        return Rendered(target, "", str(exc))
    return Rendered(target, _dump(objects), "", " ".join(notes))
