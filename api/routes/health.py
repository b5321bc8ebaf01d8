"""Liveness, readiness and metrics. Neither probe waits on the broker: readiness reports what the
dispatcher last saw of it (``workers.dispatcher``, at most a second old)."""

from __future__ import annotations

from fastapi import APIRouter, Request
from fastapi.responses import PlainTextResponse, Response

from api.errors import status_response
from api.metrics import CONTENT_TYPE, exposition
from infra.db import ping

router = APIRouter(tags=["health"])


@router.get("/healthz", response_class=PlainTextResponse)
async def healthz() -> str:
    """Alive: answered on the event loop, so not even busy request threads delay it."""
    return "ok"


@router.get("/readyz", response_class=PlainTextResponse)
def readyz(request: Request):
    """Ready when the database answers and is migrated, and (when one is configured) the broker
    answered the dispatcher's last look; else 503 naming each dependency that is down."""
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
    if state.settings.broker_url is not None and state.dispatcher.broker_problem:
        problems.append(state.dispatcher.broker_problem)
    if problems:
        return status_response(503, "; ".join(problems))
    return "ok"


@router.get("/metrics")
def metrics(request: Request) -> Response:
    state = request.app.state
    body = exposition(state.metrics, include_tasks=state.settings.embedded)
    return Response(body, media_type=CONTENT_TYPE)
