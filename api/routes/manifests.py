"""``GET …/dynamographdeploymentrequests/{name}/manifests?target=dynamo|ome|kthena|kubeai``

The manifests of a planned DGDR for one deployment target, as a ``v1`` ``List`` (JSON) or as
multi-document YAML (``Accept: application/yaml``). ``dynamo`` is the stored
``status.generatedDeployment``; the other targets (and Dynamo in another API version,
``dynamoVersion``) are rendered from the plan stored in ``status.profilingResults`` — never
planned again, so a newer calibration cannot change what was promised. A target that cannot
express the plan (KubeAI and disaggregation) gets the stored aggregated alternative, said in a
``Warning`` header as the API server says it. 404 when the DGDR does not exist, 409 while it is
not planned yet, when planning failed, or when the stored plan or DynamoGraphDeployment asked for
cannot be read (any client may write the status).
"""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Query, Request
from fastapi.responses import JSONResponse, Response

from api import errors
from api.commands.arguments import KTHENA_GROUPS, kthena_group_problem
from api.deps import SessionDep
from api.errors import ApiError
from api.kinds import DGDR
from api.objects import manifests_yaml
from api.routes.resources import load_resource
from infra import resources as repo
from planner.manifests.targets import TARGETS

router = APIRouter(tags=["manifests"])

PLANNED_STATES = frozenset({"Ready", "Deploying", "DeploymentDeleted"})


def _load_planned(session, version: str, namespace: str, name: str) -> repo.Resource:
    found = load_resource(session, DGDR.group, version, DGDR.plural, namespace, name)
    state = found.status.get("state") or "Pending"
    if state not in PLANNED_STATES or not found.status.get("generatedDeployment"):
        why = "planning failed; see its conditions" if state == "Failed" else "it is not planned yet"
        raise errors.conflict(DGDR.plural, name, DGDR.group, f"no manifests: {why} (state {state})")
    return found


def _stored_version(stored: Any) -> str | None:
    """The API version (``v1alpha1``) of the stored DynamoGraphDeployment, or None when it is not
    a Kubernetes object: an object with ``apiVersion`` and ``kind`` strings."""
    if not isinstance(stored, dict) or not isinstance(stored.get("kind"), str):
        return None
    api_version = stored.get("apiVersion")
    return api_version.split("/")[-1] if isinstance(api_version, str) and api_version else None


def _rendered(resource: repo.Resource, target: str, dynamo_version: str | None,
              kthena_group: str) -> tuple[list[dict[str, Any]], list[str]]:
    stored = resource.status["generatedDeployment"]
    stored_version = _stored_version(stored)
    if target == "dynamo" and dynamo_version is None and stored_version is None:
        raise errors.conflict(DGDR.plural, resource.name, DGDR.group, "the stored plan cannot be rendered: "
                              "status.generatedDeployment is not an object with apiVersion and kind strings")
    if target == "dynamo" and dynamo_version in (None, stored_version):
        return [stored], []
    from planner.manifests.targets import render_target
    from planner.request import parse_dgdr
    from planner.results import ProfilingResults

    results = ProfilingResults.read(resource.status.get("profilingResults"))
    if results is None or results.chosen is None:
        raise errors.conflict(DGDR.plural, resource.name, DGDR.group, "the stored plan cannot be rendered: "
                              "status.profilingResults holds no readable chosen plan")
    request = parse_dgdr(repo.to_object(resource))
    try:
        return render_target(results, request, target, dynamo_version=dynamo_version or "v1alpha1",
                             kthena_group=kthena_group)
    except ValueError as exc:
        raise ApiError(422, f"no {target} manifest for this plan: {exc}", reason="Invalid") from None


@router.get("/apis/nvidia.com/{version}/namespaces/{namespace}/dynamographdeploymentrequests/{name}/manifests",
            summary="Manifests of a planned DGDR for a deployment target")
def manifests(
    request: Request,
    version: str,
    namespace: str,
    name: str,
    session: SessionDep,
    target: str = Query(default="dynamo", description="dynamo | ome | kthena | kubeai"),
    dynamoVersion: str | None = Query(default=None, description="v1alpha1 | v1beta1 (default: as generated)"),  # noqa: N803
    kthenaGroup: str = Query(default=KTHENA_GROUPS[0], description="ModelServing API group"),  # noqa: N803
) -> Response:
    if target not in TARGETS:
        raise ApiError(400, f"target must be one of {', '.join(TARGETS)}, not {target!r}")
    if dynamoVersion not in (None, "v1alpha1", "v1beta1"):
        raise ApiError(400, f"dynamoVersion must be v1alpha1 or v1beta1, not {dynamoVersion!r}")
    if problem := kthena_group_problem(kthenaGroup):
        raise ApiError(400, f"kthenaGroup {problem}")
    resource = _load_planned(session, version, namespace, name)
    items, notes = _rendered(resource, target, dynamoVersion, kthenaGroup)
    headers = {"Warning": ", ".join(f'299 - "{n}"' for n in notes)} if notes else None
    if "yaml" in (request.headers.get("accept") or ""):
        return Response(manifests_yaml(items), media_type="application/yaml", headers=headers)
    return JSONResponse({"apiVersion": "v1", "kind": "List", "metadata": {}, "items": items}, headers=headers)
