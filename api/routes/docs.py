"""``/docs``: Swagger UI for the app's OpenAPI document, served from the files of the installed
``swagger-ui-bundle`` package, so that it works with no network (no CDN)."""

from __future__ import annotations

from pathlib import Path

from fastapi import APIRouter
from fastapi.openapi.docs import get_swagger_ui_html
from fastapi.responses import FileResponse, HTMLResponse

from api.errors import ApiError

router = APIRouter(include_in_schema=False)
ASSETS = "/docs/assets"
SERVED = frozenset({"swagger-ui-bundle.js", "swagger-ui.css", "favicon-32x32.png"})


def _assets_dir() -> Path:
    from swagger_ui_bundle import swagger_ui_path  # on use: the API starts without it

    return Path(swagger_ui_path)


@router.get("/docs", response_class=HTMLResponse)
def docs() -> HTMLResponse:
    return get_swagger_ui_html(
        openapi_url="/openapi.json",
        title="slaplan API",
        swagger_js_url=f"{ASSETS}/swagger-ui-bundle.js",
        swagger_css_url=f"{ASSETS}/swagger-ui.css",
        swagger_favicon_url=f"{ASSETS}/favicon-32x32.png",
    )


@router.get(ASSETS + "/{filename}")
def asset(filename: str) -> FileResponse:
    if filename not in SERVED:
        raise ApiError(404, "the server could not find the requested resource")
    return FileResponse(_assets_dir() / filename, headers={"Cache-Control": "public, max-age=86400"})
