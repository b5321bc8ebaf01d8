"""API discovery as kube-apiserver serves it: ``/api``, ``/apis``, ``/apis/{group}``,
``/apis/{group}/{version}``; and the core ``v1`` group's one resource here, ``events``, always
an empty list (slaplan records no Kubernetes Events; ``kubectl describe`` lists them, and
``kubectl api-resources`` refuses a group that has no resources)."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter

from api.errors import ApiError
from api.kinds import SERVED, groups

router = APIRouter(tags=["discovery"])


def _group(name: str, versions: list[str]) -> dict[str, Any]:
    listed = [{"groupVersion": f"{name}/{v}", "version": v} for v in versions]
    return {"name": name, "versions": listed, "preferredVersion": listed[0]}


@router.get("/api")
def core_versions() -> dict[str, Any]:
    return {"kind": "APIVersions", "versions": ["v1"], "serverAddressByClientCIDRs": []}


EVENTS = {"name": "events", "singularName": "event", "namespaced": True, "kind": "Event", "verbs": ["list"],
          "shortNames": ["ev"]}


@router.get("/api/v1")
def core_resources() -> dict[str, Any]:
    return {"kind": "APIResourceList", "apiVersion": "v1", "groupVersion": "v1", "resources": [EVENTS]}


def _no_events() -> dict[str, Any]:
    return {"kind": "EventList", "apiVersion": "v1", "metadata": {}, "items": []}


@router.get("/api/v1/events", summary="Events in all namespaces (none are recorded)")
def all_events() -> dict[str, Any]:
    return _no_events()


@router.get("/api/v1/namespaces/{namespace}/events", summary="Events in a namespace (none are recorded)")
def events(namespace: str) -> dict[str, Any]:  # noqa: ARG001
    return _no_events()


@router.get("/apis")
def group_list() -> dict[str, Any]:
    return {"kind": "APIGroupList", "apiVersion": "v1", "groups": [_group(n, v) for n, v in groups().items()]}


@router.get("/apis/{group}")
def group(group: str) -> dict[str, Any]:
    versions = groups().get(group)
    if not versions:
        raise ApiError(404, "the server could not find the requested resource")
    return {"kind": "APIGroup", "apiVersion": "v1", **_group(group, versions)}


@router.get("/apis/{group}/{version}")
def resource_list(group: str, version: str) -> dict[str, Any]:
    kinds = [k for k in SERVED if k.group == group and version in k.versions]
    if not kinds:
        raise ApiError(404, "the server could not find the requested resource")
    resources: list[dict[str, Any]] = []
    for k in kinds:
        resources.append(
            {
                "name": k.plural,
                "singularName": k.singular,
                "namespaced": True,
                "kind": k.kind,
                "verbs": ["create", "delete", "get", "list", "patch", "update", "watch"],
                **({"shortNames": list(k.short_names)} if k.short_names else {}),
            }
        )
        resources.append(
            {"name": f"{k.plural}/status", "singularName": "", "namespaced": True, "kind": k.kind, "verbs": ["get", "patch", "update"]}
        )
    return {"kind": "APIResourceList", "apiVersion": "v1", "groupVersion": f"{group}/{version}", "resources": resources}


@router.get("/version")
def version() -> dict[str, Any]:
    return {"major": "1", "minor": "31", "gitVersion": "v1.31.0-slaplan", "platform": "slaplan"}
