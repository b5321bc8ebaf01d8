"""``/openapi/v2`` and ``/openapi/v3``: the published schemas of the served kinds, as
kube-apiserver serves them (see ``api.kube_openapi``). Documents are built once per process.

v3 documents are JSON. The v2 document is JSON too, for clients that accept it; one that asks
for the protobuf form only (client-go's ``OpenAPISchema``) is answered 406, as kube-apiserver
answers a form it cannot produce, and falls back or goes without.
"""

from __future__ import annotations

import functools
import json

from fastapi import APIRouter, Request
from fastapi.responses import Response

from api.errors import ApiError
from api.kube_openapi import content_hash, v2_document, v3_document, v3_index

router = APIRouter(tags=["discovery"])
JSON_TYPES = ("application/json", "application/*", "*/*")


@functools.cache
def _v3_body(group: str, version: str) -> bytes | None:
    document = v3_document(group, version)
    return None if document is None else json.dumps(document, separators=(",", ":")).encode()


@functools.cache
def _v3_hash(group: str, version: str) -> str:
    return content_hash(v3_document(group, version) or {})


@functools.cache
def _v2_body() -> bytes:
    return json.dumps(v2_document(), separators=(",", ":")).encode()


def _accepts_json(accept: str | None) -> bool:
    if not accept:
        return True
    return any(part.split(";")[0].strip().lower() in JSON_TYPES for part in accept.split(","))


@router.get("/openapi/v2", summary="The Swagger 2.0 document of the served kinds (JSON)")
def openapi_v2(request: Request) -> Response:
    if not _accepts_json(request.headers.get("accept")):
        raise ApiError(406, "only application/json is served here; the protobuf form is not")
    return Response(_v2_body(), media_type="application/json")


@router.get("/openapi/v3", summary="The index of OpenAPI v3 documents, one per group-version")
def openapi_v3_index() -> dict:
    return v3_index(_v3_hash)


@router.get("/openapi/v3/apis/{group}/{version}", summary="The OpenAPI v3 document of one group-version")
def openapi_v3(group: str, version: str) -> Response:
    body = _v3_body(group, version)
    if body is None:
        raise ApiError(404, "the server could not find the requested resource")
    return Response(body, media_type="application/json", headers={"Cache-Control": "no-cache, private"})
