"""The OpenAPI documents kube-apiserver publishes, for the kinds slaplan serves: ``/openapi/v3``
(an index of group-versions, each a document of its own) and ``/openapi/v2`` (one Swagger 2.0
document), built from the CRDs' schemas (``api.published``).

kubectl reads them: ``apply`` and ``create`` check in the v3 document that a PATCH of the kind
takes ``fieldValidation`` and then leave validation to the server (every write operation lists
it: kubectl looks at whichever PATCH of the kind it meets first); ``explain`` prints the schema
found by its ``x-kubernetes-group-version-kind``.
"""

from __future__ import annotations

import copy
import hashlib
import json
from typing import Any

from api.kinds import SERVED, ServedKind
from api.published import published

META = "io.k8s.apimachinery.pkg.apis.meta.v1"
REF3 = "#/components/schemas/"
REF2 = "#/definitions/"
PATCH_TYPES = ("application/merge-patch+json", "application/apply-patch+yaml")
# Dropped from schemas in the v2 document: Swagger 2.0 has no such keywords (kube-apiserver drops them too).
NOT_IN_V2 = ("nullable", "anyOf", "oneOf", "not", "x-kubernetes-validations")


def group_versions() -> list[tuple[str, str]]:
    """(group, version) of every served kind, in the order served."""
    return list(dict.fromkeys((k.group, v) for k in SERVED for v in k.versions))


def v3_index(url_hash: Any) -> dict[str, Any]:
    """The ``/openapi/v3`` discovery document; ``url_hash(group, version)`` names a document's content."""
    return {"paths": {f"apis/{g}/{v}": {"serverRelativeURL": f"/openapi/v3/apis/{g}/{v}?hash={url_hash(g, v)}"}
                      for g, v in group_versions()}}


def content_hash(document: dict[str, Any]) -> str:
    """What the v3 index names a document by: a digest of its JSON (clients cache by it)."""
    return hashlib.sha512(json.dumps(document, sort_keys=True).encode()).hexdigest().upper()


def v3_document(group: str, version: str) -> dict[str, Any] | None:
    """The OpenAPI 3.0 document of one group-version; None when nothing is served there."""
    kinds = [k for k in SERVED if k.group == group and version in k.versions]
    if not kinds:
        return None
    schemas = dict(_meta_schemas())
    paths: dict[str, Any] = {}
    for kind in kinds:
        name = schema_name(kind, version)
        schemas[name] = _kind_schema(kind, version, REF3)
        schemas[name + "List"] = _list_schema(kind, version, name, REF3)
        paths.update(_paths(kind, version, name))
    return {
        "openapi": "3.0.0",
        "info": {"title": "slaplan", "version": version},
        "paths": paths,
        "components": {"schemas": schemas},
    }


def v2_document() -> dict[str, Any]:
    """The Swagger 2.0 document of every served kind (definitions only; kubectl reads no paths there)."""
    definitions: dict[str, Any] = {}
    for name, schema in _meta_schemas():
        definitions[name] = _to_v2(schema)
    for group, version in group_versions():
        for kind in (k for k in SERVED if k.group == group and version in k.versions):
            name = schema_name(kind, version)
            definitions[name] = _to_v2(_kind_schema(kind, version, REF2))
            definitions[name + "List"] = _to_v2(_list_schema(kind, version, name, REF2))
    return {"swagger": "2.0", "info": {"title": "slaplan", "version": "v2"}, "paths": {}, "definitions": definitions}


def schema_name(kind: ServedKind, version: str) -> str:
    """kube-apiserver's name of a custom kind's schema: the group reversed (``com.nvidia.v1alpha1.Kind``)."""
    return ".".join([*reversed(kind.group.split(".")), version, kind.kind])


def _gvk(kind: ServedKind, version: str, list_kind: bool = False) -> dict[str, str]:
    return {"group": kind.group, "version": version, "kind": kind.list_kind if list_kind else kind.kind}


def _kind_schema(kind: ServedKind, version: str, ref: str) -> dict[str, Any]:
    schema = copy.deepcopy(published(kind, version).schema)
    properties = schema.setdefault("properties", {})
    properties["metadata"] = {"description": "Standard object metadata.", "allOf": [{"$ref": ref + f"{META}.ObjectMeta"}]}
    schema["x-kubernetes-group-version-kind"] = [_gvk(kind, version)]
    return schema


def _list_schema(kind: ServedKind, version: str, item: str, ref: str) -> dict[str, Any]:
    return {
        "description": f"A list of {kind.kind}.",
        "type": "object",
        "required": ["items"],
        "properties": {
            "apiVersion": {"type": "string", "description": "The versioned schema of this representation."},
            "kind": {"type": "string", "description": "The REST resource this object represents."},
            "items": {"type": "array", "items": {"$ref": ref + item}, "description": f"The {kind.plural}."},
            "metadata": {"description": "Standard list metadata.", "allOf": [{"$ref": ref + f"{META}.ListMeta"}]},
        },
        "x-kubernetes-group-version-kind": [_gvk(kind, version, list_kind=True)],
    }


def _paths(kind: ServedKind, version: str, name: str) -> dict[str, Any]:
    """The operations of ``kind``, each marked with its action and kind as kube-apiserver marks them."""
    base = f"/apis/{kind.group}/{version}"
    collection = f"{base}/namespaces/{{namespace}}/{kind.plural}"
    item = f"{collection}/{{name}}"
    gvk = _gvk(kind, version)
    obj = {"$ref": REF3 + name}
    listed = {"$ref": REF3 + name + "List"}
    validation = _query("fieldValidation", "how to treat unknown fields: Strict (the default here) refuses them")
    manager = _query("fieldManager", "the name of the actor making the change")
    in_path = [_path_param("namespace"), _path_param("name")]

    def op(action: str, summary: str, response: dict, *, body: tuple[str, ...] = (), params: tuple = ()):
        out: dict[str, Any] = {
            "operationId": f"{action}{kind.kind}",
            "summary": summary,
            "parameters": list(params),
            "responses": {"200": {"description": "OK", "content": {"application/json": {"schema": response}}}},
            "x-kubernetes-action": action,
            "x-kubernetes-group-version-kind": gvk,
        }
        if body:
            out["requestBody"] = {"required": True, "content": {t: {"schema": obj} for t in body}}
        return out

    list_params = (_query("labelSelector", "a label selector"), _query("fieldSelector", "a field selector"),
                   _query("limit", "most items in one page", "integer"), _query("continue", "the previous page's token"),
                   _query("watch", "stream changes instead", "boolean"))
    return {
        f"{base}/{kind.plural}": {"get": op("list", f"list {kind.plural} in all namespaces", listed, params=list_params)},
        collection: {
            "parameters": [_path_param("namespace")],
            "get": op("list", f"list {kind.plural}", listed, params=list_params),
            "post": op("post", f"create a {kind.kind}", obj, body=("application/json", "application/yaml"),
                       params=(validation, manager)),
        },
        item: {
            "parameters": in_path,
            "get": op("get", f"read a {kind.kind}", obj),
            "put": op("put", f"replace a {kind.kind}", obj, body=("application/json",), params=(validation, manager)),
            "patch": op("patch", f"patch a {kind.kind}", obj, body=PATCH_TYPES,
                        params=(validation, manager, _query("force", "apply: take over conflicting fields", "boolean"))),
            "delete": op("delete", f"delete a {kind.kind}", {"$ref": REF3 + f"{META}.Status"}),
        },
        f"{item}/status": {
            "parameters": in_path,
            "get": op("get", f"read the status of a {kind.kind}", obj),
            "put": op("put", f"replace the status of a {kind.kind}", obj, body=("application/json",),
                      params=(validation, manager)),
            "patch": op("patch", f"patch the status of a {kind.kind}", obj, body=PATCH_TYPES[:1],
                        params=(validation, manager)),
        },
    }


def _query(name: str, description: str, type_: str = "string") -> dict[str, Any]:
    return {"name": name, "in": "query", "description": description, "schema": {"type": type_}, "uniqueItems": True}


def _path_param(name: str) -> dict[str, Any]:
    return {"name": name, "in": "path", "required": True, "description": f"the object's {name}",
            "schema": {"type": "string"}, "uniqueItems": True}


def _meta_schemas() -> list[tuple[str, dict[str, Any]]]:
    """ObjectMeta, ListMeta and Status: the part of ``meta/v1`` the kinds' documents refer to."""
    text = {"type": "string"}
    labels = {"type": "object", "additionalProperties": text}
    object_meta = {
        "description": "Metadata every stored object has; name and namespace identify it.",
        "type": "object",
        "properties": {
            "name": {**text, "description": "Unique within the namespace; a DNS-1123 subdomain."},
            "generateName": {**text, "description": "A prefix from which the server makes a unique name."},
            "namespace": {**text, "description": "The namespace the object lives in."},
            "uid": {**text, "description": "Unique in time and space; set by the server."},
            "resourceVersion": {**text, "description": "Changes with every write; opaque to clients."},
            "generation": {"type": "integer", "format": "int64", "description": "Changes with every spec change."},
            "creationTimestamp": {**text, "format": "date-time", "description": "When the object was created (UTC)."},
            "labels": {**labels, "description": "Key-value pairs to select objects by."},
            "annotations": {**labels, "description": "Key-value pairs for tools; not selectable."},
        },
    }
    list_meta = {
        "description": "Metadata of a list.",
        "type": "object",
        "properties": {
            "resourceVersion": {**text, "description": "The version the list was read at."},
            "continue": {**text, "description": "Set when more items follow: pass it as continue to get them."},
            "remainingItemCount": {"type": "integer", "format": "int64", "description": "Items after this page."},
        },
    }
    status = {
        "description": "The result of a call that returns no object, or of one that failed.",
        "type": "object",
        "properties": {
            "apiVersion": text, "kind": text, "status": text, "message": text, "reason": text,
            "code": {"type": "integer", "format": "int32"},
            "details": {"type": "object", "x-kubernetes-preserve-unknown-fields": True},
            "metadata": {"allOf": [{"$ref": REF3 + f"{META}.ListMeta"}]},
        },
        "x-kubernetes-group-version-kind": [{"group": "", "version": "v1", "kind": "Status"}],
    }
    return [(f"{META}.ObjectMeta", object_meta), (f"{META}.ListMeta", list_meta), (f"{META}.Status", status)]


def _to_v2(node: Any) -> Any:
    """A v3 schema as Swagger 2.0 has it: refs into ``definitions``, v3-only keywords dropped."""
    if isinstance(node, list):
        return [_to_v2(item) for item in node]
    if not isinstance(node, dict):
        return node
    out = {}
    for key, value in node.items():
        if key in NOT_IN_V2:
            continue
        if key == "$ref" and isinstance(value, str):
            out[key] = value.replace(REF3, REF2)
        elif key in ("properties", "definitions") and isinstance(value, dict):
            out[key] = {name: _to_v2(sub) for name, sub in value.items()}  # property names, never keywords
        else:
            out[key] = _to_v2(value)
    return out
