"""FastAPI dependency aliases: ``SettingsDep``, ``SessionDep``, ``EnqueueDep``, ``BodyDep``."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Annotated, Any

from fastapi import Depends, Request
from sqlalchemy.orm import Session

from api.errors import ApiError
from api.objects import BadBody, parse_body
from infra.settings import Settings

# enqueue(kind, uid) -> None: tells the dispatcher that a committed request is due (never waits).
Enqueue = Callable[[Any, str], None]


def get_settings(request: Request) -> Settings:
    return request.app.state.settings


def get_session(request: Request) -> Iterator[Session]:
    session = request.app.state.sessions()
    try:
        yield session
    finally:
        session.close()


def get_enqueue(request: Request) -> Enqueue:
    return request.app.state.enqueue


async def get_body(request: Request) -> dict[str, Any]:
    """The request body as an object, from JSON or YAML (by Content-Type); 400 otherwise."""
    raw = await request.body()
    if not raw.strip():
        raise ApiError(400, "the request body is empty")
    try:
        return parse_body(raw, request.headers.get("content-type"))
    except BadBody as exc:
        raise ApiError(400, str(exc)) from None


async def get_optional_body(request: Request) -> dict[str, Any]:
    """Like ``get_body`` but an empty body is an empty object (DELETE's DeleteOptions)."""
    raw = await request.body()
    if not raw.strip():
        return {}
    try:
        return parse_body(raw, request.headers.get("content-type"))
    except BadBody as exc:
        raise ApiError(400, str(exc)) from None


SettingsDep = Annotated[Settings, Depends(get_settings)]
SessionDep = Annotated[Session, Depends(get_session)]
EnqueueDep = Annotated[Enqueue, Depends(get_enqueue)]
BodyDep = Annotated[dict[str, Any], Depends(get_body)]
OptionalBodyDep = Annotated[dict[str, Any], Depends(get_optional_body)]
