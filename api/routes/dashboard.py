"""The web dashboard's routes: pages under ``/`` and ``/ui``, its static files, manifest
downloads and the submit endpoint the form posts to."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from importlib import resources as package_files
from typing import Any

from fastapi import APIRouter, Query, Request
from fastapi.responses import HTMLResponse, JSONResponse, PlainTextResponse, Response

from api.deps import EnqueueDep, SessionDep
from api.errors import ApiError
from api.kinds import BENCHMARKJOB, DGDR
from infra import resources as repo

router = APIRouter(include_in_schema=False)

STATIC_TYPES = {".css": "text/css; charset=utf-8", ".js": "text/javascript; charset=utf-8"}


def _html(text: str, status_code: int = 200) -> HTMLResponse:
    return HTMLResponse(text, status_code=status_code, headers={"Cache-Control": "no-store"})


def _find(session, kind, namespace: str, name: str) -> repo.Resource | None:
    key = repo.ResourceKey(group=kind.group, plural=kind.plural, namespace=namespace, name=name)
    return repo.get_resource(session, key)


def _not_found(what: str, namespace: str, name: str) -> HTMLResponse:
    from api.dashboard.html import error_page

    return _html(error_page("Not found", f'{what} "{namespace}/{name}" does not exist (it may have been deleted).'), 404)


@router.get("/", response_class=HTMLResponse)
def home(
    session: SessionDep,
    state: str = Query(default="", max_length=40),
    kind: str = Query(default="", max_length=20),
    text: str = Query(default="", alias="q", max_length=200),
) -> HTMLResponse:
    from api.dashboard.home import Filters, render_home

    dgdrs = repo.list_resources(session, DGDR.group, DGDR.plural)
    jobs = repo.list_resources(session, BENCHMARKJOB.group, BENCHMARKJOB.plural)
    return _html(render_home(dgdrs, jobs, Filters(state, kind, text.strip()), datetime.now(UTC)))


@router.get("/ui/dgdr/{namespace}/{name}", response_class=HTMLResponse)
def dgdr_page(namespace: str, name: str, session: SessionDep, feasible: bool = False) -> HTMLResponse:
    """The DGDR's page; ``?feasible=1`` lists only the feasible candidates."""
    from api.dashboard.dgdr_page import render_dgdr

    found = _find(session, DGDR, namespace, name)
    if found is None:
        return _not_found("DynamoGraphDeploymentRequest", namespace, name)
    return _html(render_dgdr(found, datetime.now(UTC), feasible_only=feasible))


@router.get("/ui/dgdr/{namespace}/{name}/manifests/{target}")
def dgdr_manifest(namespace: str, name: str, target: str, session: SessionDep) -> Response:
    """One target's manifests as a YAML download."""
    from api.dashboard.targets import render_target

    found = _find(session, DGDR, namespace, name)
    if found is None:
        return PlainTextResponse(f"dynamographdeploymentrequest {namespace}/{name} not found", status_code=404)
    rendered = render_target(found, target.removesuffix(".yaml"))
    if not rendered.text:
        return PlainTextResponse(rendered.problem, status_code=404)
    filename = f"{found.name}.{rendered.target}.yaml"
    return Response(
        rendered.text,
        media_type="application/yaml",
        headers={"Content-Disposition": f'attachment; filename="{filename}"', "Cache-Control": "no-store"},
    )


@router.get("/ui/benchmarkjob/{namespace}/{name}", response_class=HTMLResponse)
def bench_page(namespace: str, name: str, session: SessionDep) -> HTMLResponse:
    from api.dashboard.bench_page import render_bench

    found = _find(session, BENCHMARKJOB, namespace, name)
    if found is None:
        return _not_found("BenchmarkJob", namespace, name)
    return _html(render_bench(found, datetime.now(UTC)))


@router.get("/ui/submit", response_class=HTMLResponse)
def submit_page(request: Request) -> HTMLResponse:
    """The form, with its CSRF token in the page and in a cookie sent only to this path by this site."""
    from api.dashboard.submit import CSRF_COOKIE, csrf_token, render_submit

    token = csrf_token(request.cookies.get(CSRF_COOKIE))
    response = _html(render_submit(request.app.state.settings.api_token is not None, token))
    response.set_cookie(CSRF_COOKIE, token, path="/ui/submit", httponly=True, samesite="strict",
                        secure=request.url.scheme == "https")
    return response


DASHBOARD_MANAGER = "slaplan-dashboard"  # the field manager of objects the form creates


@router.post("/ui/submit")
async def submit(request: Request, session: SessionDep, enqueue: EnqueueDep) -> JSONResponse:
    """Create the pasted object: 201 ``{"href": page}``. A refusal is an answer the form shows, not
    a failed request: 200 ``{"accepted": false, "code": <the API's status code, 422 for invalid
    fields>, "message", "causes": [{field, message, line}]}``. Without the form's CSRF token (its
    cookie repeated in the ``X-CSRF-Token`` header) nothing is read: 403, in the same shape."""
    from api.dashboard.html import q
    from api.dashboard.submit import CSRF_COOKIE, CSRF_HEADER, csrf_matches, parse_text, target_of, with_lines
    from api.routes.resources import create_object

    if not csrf_matches(request.cookies.get(CSRF_COOKIE), request.headers.get(CSRF_HEADER)):
        return JSONResponse({"accepted": False, "code": 403, "causes": [],
                             "message": "This form has expired or was not sent from this site: reload the page."},
                            status_code=403)
    raw = await request.body()
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        return _refused(400, {"message": "The file is not UTF-8 text.", "causes": []})
    obj, error = parse_text(text)
    if error is None:
        served, error = target_of(obj)
    if error is not None:
        return _refused(400 if error["causes"][0]["field"] == "" else 422, with_lines(text, error))
    kind, group, version = served
    metadata = obj.get("metadata") if isinstance(obj.get("metadata"), dict) else {}
    namespace = str(metadata.get("namespace") or "default")
    try:
        response = create_object(group, version, namespace, kind.plural, obj, session, enqueue,
                                 request.app.state.settings, manager=DASHBOARD_MANAGER)
    except ApiError as exc:
        causes: list[dict[str, Any]] = [
            {"field": c.get("field", ""), "message": c.get("message", "")} for c in (exc.details or {}).get("causes") or []
        ]
        if not causes:
            causes = [{"field": "metadata.name" if exc.code == 409 else "", "message": exc.message}]
        return _refused(exc.code, with_lines(text, {"message": exc.message, "causes": causes}))
    name = json.loads(response.body)["metadata"]["name"]
    page = "dgdr" if kind is DGDR else "benchmarkjob"
    return JSONResponse(
        {"accepted": True, "href": f"/ui/{page}/{q(namespace)}/{q(name)}", "name": name, "namespace": namespace}, status_code=201
    )


def _refused(code: int, doc: dict[str, Any]) -> JSONResponse:
    return JSONResponse({"accepted": False, "code": code, **doc}, status_code=200)


@router.get("/ui/static/{filename}")
def static(filename: str) -> Response:
    """One of the dashboard's own static files; 404 for any other name (only names listed in the
    package's static folder reach the file system)."""
    suffix = filename[filename.rfind("."):] if "." in filename else ""
    folder = package_files.files("api.dashboard").joinpath("static")
    found = next((f for f in folder.iterdir() if f.name == filename and f.is_file()), None)
    if found is None or suffix not in STATIC_TYPES:
        return PlainTextResponse("not found", status_code=404)
    return Response(found.read_bytes(), media_type=STATIC_TYPES[suffix], headers={"Cache-Control": "public, max-age=3600"})
