"""The app's own OpenAPI document (``/openapi.json``), completed with what the routes do not
declare themselves: the ``Status`` every error is, the error codes each operation answers
(400 for any malformed request; 404 where a path names an object; 401, 403, 409, 413, 415 and
422 for writes) and the request bodies of writes (JSON or YAML objects, merge or apply patches).
"""

from __future__ import annotations

from typing import Any

from fastapi import FastAPI
from fastapi.openapi.utils import get_openapi

STATUS_REF = {"$ref": "#/components/schemas/Status"}
STATUS_SCHEMA = {
    "title": "Status",
    "description": "What kube-apiserver answers instead of an object: every error, and a delete.",
    "type": "object",
    "required": ["kind", "apiVersion", "status", "code"],
    "properties": {
        "kind": {"type": "string", "enum": ["Status"]},
        "apiVersion": {"type": "string", "enum": ["v1"]},
        "metadata": {"type": "object", "properties": {"continue": {"type": "string"}}},
        "status": {"type": "string", "enum": ["Success", "Failure"]},
        "message": {"type": "string"},
        "reason": {"type": "string", "description": "BadRequest, NotFound, AlreadyExists, Conflict, Invalid, …"},
        "code": {"type": "integer"},
        "details": {
            "type": "object",
            "properties": {
                "name": {"type": "string"},
                "group": {"type": "string"},
                "kind": {"type": "string"},
                "uid": {"type": "string"},
                "causes": {"type": "array", "items": {"type": "object", "properties": {
                    "reason": {"type": "string"}, "message": {"type": "string"}, "field": {"type": "string"}}}},
            },
        },
    },
}
OBJECT_SCHEMA = {
    "title": "Object",
    "description": "A custom resource: apiVersion and kind as in the path, metadata (name or generateName, "
    "labels, annotations) and spec; its schema is the CRD's (see /openapi/v3).",
    "type": "object",
    "properties": {
        "apiVersion": {"type": "string"},
        "kind": {"type": "string"},
        "metadata": {"type": "object"},
        "spec": {"type": "object"},
        "status": {"type": "object"},
    },
}
OBJECT_REF = {"$ref": "#/components/schemas/Object"}
ERRORS = {
    "400": "BadRequest: a malformed body, query parameter or continue token",
    "401": "Unauthorized: the bearer token is missing or wrong",
    "403": "Forbidden: a write from another origin, or without a token where one is needed",
    "404": "NotFound: no such kind or object",
    "406": "NotAcceptable: no representation the Accept header allows",
    "409": "AlreadyExists, or Conflict: the object changed since the resourceVersion given",
    "410": "Expired: the continue token or resourceVersion is older than the kept history",
    "413": "RequestEntityTooLarge: the body is larger than the server takes",
    "415": "UnsupportedMediaType: the body or patch is of a type not read here",
    "422": "Invalid: the object breaks a rule of its kind; the causes name the fields",
}
WRITE_CODES = ("400", "401", "403", "409", "413", "415", "422")
BODY_TYPES = {
    "post": ("application/json", "application/yaml"),
    "put": ("application/json", "application/yaml"),
    "patch": ("application/merge-patch+json", "application/apply-patch+yaml", "application/json-patch+json"),
}
JSON_PATCH_SCHEMA = {  # RFC 6902
    "type": "array",
    "items": {"type": "object", "required": ["op", "path"], "properties": {
        "op": {"type": "string", "enum": ["add", "remove", "replace", "move", "copy", "test"]},
        "path": {"type": "string"}, "from": {"type": "string"}, "value": {}}},
}


def install(app: FastAPI) -> None:
    """Make ``app.openapi`` build (once) the completed document."""

    def openapi() -> dict[str, Any]:
        if app.openapi_schema is None:
            document = get_openapi(title=app.title, version=app.version, description=app.description, routes=app.routes)
            app.openapi_schema = complete(document)
        return app.openapi_schema

    app.openapi = openapi


def complete(document: dict[str, Any]) -> dict[str, Any]:
    """``document`` with Status error responses and write bodies on every operation."""
    schemas = document.setdefault("components", {}).setdefault("schemas", {})
    schemas["Status"] = STATUS_SCHEMA
    schemas["Object"] = OBJECT_SCHEMA
    for name in ("HTTPValidationError", "ValidationError"):  # FastAPI's; this API answers a Status
        schemas.pop(name, None)
    for path, operations in document.get("paths", {}).items():
        for method, operation in operations.items():
            _complete_operation(path, method, operation)
    return document


def _complete_operation(path: str, method: str, operation: dict[str, Any]) -> None:
    codes = ["400"]
    if "{name}" in path or "{group}" in path:
        codes.append("404")
    if method == "get" and path.endswith("/{plural}"):
        codes.append("410")  # a list or watch from a token or version older than the history
    if method in BODY_TYPES or method == "delete":
        codes += [c for c in WRITE_CODES if c not in codes]
    if path.startswith("/openapi/v2"):
        codes.append("406")
    responses = operation.setdefault("responses", {})
    responses.pop("422", None)  # FastAPI's validation error: re-added below as a Status where it applies
    for code in codes:
        responses[code] = {"description": ERRORS[code], "content": {"application/json": {"schema": STATUS_REF}}}
    if method in BODY_TYPES and "requestBody" not in operation:
        types = BODY_TYPES[method][:1] if method == "patch" and path.endswith("/status") else BODY_TYPES[method]
        operation["requestBody"] = {"required": True, "content": {
            t: {"schema": JSON_PATCH_SCHEMA if t.startswith("application/json-patch") else OBJECT_REF} for t in types}}
