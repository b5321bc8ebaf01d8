"""``JsonResponse``: a JSON response encoded by pydantic-core's serializer (compiled), about three
times faster than the standard library's encoder on the service's objects (a page of 100 planned
DGDRs is 1.2 MB). Same output as Starlette's ``JSONResponse`` for plain JSON values: compact,
UTF-8, keys in their order."""

from __future__ import annotations

from typing import Any

from pydantic_core import to_json
from starlette.responses import JSONResponse


class JsonResponse(JSONResponse):
    """Starlette's ``JSONResponse`` with the faster encoder; the value must hold plain JSON values
    (dict, list, str, int, float, bool, None)."""

    def render(self, content: Any) -> bytes:
        return to_json(content)
