"""FastAPI dependency aliases: ``SettingsDep``, ``SessionDep``, ``StatementSessionDep``, ``EnqueueDep``,
``BodyDep``, ``PatchBodyDep``.

The dependencies are coroutines: FastAPI runs a plain function (or generator) dependency in its
thread pool, and each such hand-off between the event loop and a thread costs a request up to
the interpreter's switch interval (5 ms) of waiting for the GIL on a busy server. None of them
waits on anything: a session connects on first use (in the route, in the pool), and closing
it returns its connection."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from typing import Annotated, Any

from fastapi import Depends, Request
from sqlalchemy.orm import Session

from api.errors import ApiError
from api.objects import BadBody, parse_body
from infra.db import SessionFactory, statement_sessions
from infra.settings import Settings

JSON_PATCH_TYPE = "application/json-patch+json"  # RFC 6902: the body is a list of operations
# enqueue(kind, uid) -> None: tells the dispatcher that a committed request is due (never waits).
Enqueue = Callable[[Any, str], None]


async def get_settings(request: Request) -> Settings:
    return request.app.state.settings


def _session_from(factory_of: Callable[[Request], SessionFactory]) -> Callable[[Request], AsyncIterator[Session]]:
    """The dependency that opens a session from ``factory_of(request)`` and closes it after the request."""

    async def session_dependency(request: Request) -> AsyncIterator[Session]:
        session = factory_of(request)()
        try:
            yield session
        finally:
            session.close()

    return session_dependency


get_session = _session_from(lambda request: request.app.state.sessions)
# For routes that only read, or write in one statement: on PostgreSQL each statement commits by
# itself (infra.db.statement_sessions), so no transaction is held while the answer is sent.
get_statement_session = _session_from(lambda request: statement_sessions(request.app.state.sessions))


async def get_enqueue(request: Request) -> Enqueue:
    return request.app.state.enqueue


async def _parsed(request: Request, *, empty: dict[str, Any] | None = None, array: bool = False) -> Any:
    """The body, from JSON or YAML (by Content-Type): ``empty`` when there is none (None: 400), an
    object, or (``array``) an array; 400 otherwise."""
    raw = await request.body()
    if not raw.strip():
        if empty is None:
            raise ApiError(400, "the request body is empty")
        return empty
    try:
        return parse_body(raw, request.headers.get("content-type"), array=array)
    except BadBody as exc:
        raise ApiError(400, str(exc)) from None


async def get_body(request: Request) -> dict[str, Any]:
    """The request body as an object, from JSON or YAML (by Content-Type); 400 otherwise."""
    return await _parsed(request)


async def get_patch_body(request: Request) -> dict[str, Any] | list[Any]:
    """Like ``get_body``, but a JSON patch (``application/json-patch+json``) is its list of operations."""
    media = (request.headers.get("content-type") or "").split(";")[0].strip().lower()
    return await _parsed(request, array=media == JSON_PATCH_TYPE)


async def get_optional_body(request: Request) -> dict[str, Any]:
    """Like ``get_body`` but an empty body is an empty object (DELETE's DeleteOptions)."""
    return await _parsed(request, empty={})


SettingsDep = Annotated[Settings, Depends(get_settings)]
SessionDep = Annotated[Session, Depends(get_session)]
StatementSessionDep = Annotated[Session, Depends(get_statement_session)]
EnqueueDep = Annotated[Enqueue, Depends(get_enqueue)]
BodyDep = Annotated[dict[str, Any], Depends(get_body)]
PatchBodyDep = Annotated[dict[str, Any] | list[Any], Depends(get_patch_body)]
OptionalBodyDep = Annotated[dict[str, Any], Depends(get_optional_body)]
