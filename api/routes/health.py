"""Liveness, readiness and metrics."""

from __future__ import annotations

from fastapi import APIRouter, Request
from fastapi.responses import PlainTextResponse, Response

from api.errors import status_response
from api.metrics import CONTENT_TYPE, exposition
from infra.db import ping

router = APIRouter(tags=["health"])


@router.get("/healthz", response_class=PlainTextResponse)
def healthz() -> str:
    return "ok"


@router.get("/readyz", response_class=PlainTextResponse)
def readyz(request: Request):
    """Ready when the database answers and is migrated, and (when one is configured) the broker answers."""
    state = request.app.state
    problems = []
    try:
        ping(state.engine)
    except Exception as exc:
        problems.append(f"database unreachable: {type(exc).__name__}")
    else:
        from infra.migrate import is_up_to_date

        try:
            if not is_up_to_date(state.settings, state.engine):
                problems.append("database schema is not at the newest migration: run `slaplan migrate`")
        except Exception as exc:
            problems.append(f"database schema unknown: {type(exc).__name__}")
    if state.settings.broker_url is not None:
        from workers.celery_app import broker_reachable

        if not broker_reachable(state.celery):
            problems.append("broker unreachable")
    if problems:
        return status_response(503, "; ".join(problems))
    return "ok"


@router.get("/metrics")
def metrics(request: Request) -> Response:
    state = request.app.state
    body = exposition(state.metrics, include_tasks=state.settings.embedded)
    return Response(body, media_type=CONTENT_TYPE)
