"""Plain reads answered ahead of FastAPI's router: a get of a stored object as JSON, and a page of
a list asked for by ``limit`` and ``continue`` alone (what clients send most: every get of a
DGDR's status, every page of a reflector's list).

Such a read is the stored JSON text of its objects; FastAPI's routing through its included
routers, its solving of the list's eleven query parameters and the session dependency cost a get
more than reading it (docs/performance.md has the figures). Here the path and query are read by
hand and the same functions as the routes' (``api.routes.resources``) give the body. Anything
else, and every read that would not answer 200 (an unknown kind, an object that is not there, a
bad or expired token, a database error), goes on to the routes, which answer it as before, with
their Status; the Host, token and origin guards (``api.guards``) sit in front of both, and the
OpenAPI document still describes the routes."""

from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple
from urllib.parse import parse_qsl

import anyio.to_thread
from sqlalchemy.exc import DBAPIError
from starlette.datastructures import State
from starlette.responses import Response
from starlette.types import ASGIApp, Receive, Scope, Send

from api.errors import ApiError
from api.kinds import ServedKind, find_kind
from api.routes import resources
from api.tables import table_version
from infra.resources import TextNotKept

LIST_PARAMETERS = frozenset({"limit", "continue"})


class Route(NamedTuple):
    """What the request metrics read of the route that answered (``api.guards``): its template."""

    path: str


@dataclass(frozen=True)
class PlainRead:
    """A read this layer answers: the object ``name`` (None: a page of the list of ``kind`` in
    ``namespace``, None for all namespaces) at API ``version``."""

    route: Route
    kind: ServedKind
    version: str
    namespace: str | None
    name: str | None = None
    limit: int | None = None
    continue_: str | None = None


def plain_read(scope: Scope) -> PlainRead | None:
    """The plain read ``scope`` asks for, or None for any other request."""
    if scope["type"] != "http" or scope["method"] != "GET" or scope.get("root_path"):
        return None
    parts = scope["path"].split("/")  # "", "apis", group, version, ["namespaces", namespace,] plural[, name]
    if len(parts) not in (5, 7, 8) or parts[1] != "apis" or not all(parts[2:]):
        return None
    namespaced = len(parts) > 5
    if namespaced and parts[4] != "namespaces":
        return None
    kind = find_kind(parts[2], parts[3], parts[6] if namespaced else parts[4])
    if kind is None or table_version(_header(scope, b"accept")) is not None:
        return None
    query = scope["query_string"]
    if len(parts) == 8:
        return PlainRead(Route(resources.ONE), kind, parts[3], parts[5], parts[7]) if not query else None
    given = parse_qsl(query.decode("latin-1"), keep_blank_values=True)
    params = dict(given)
    if len(params) < len(given) or not params.keys() <= LIST_PARAMETERS:
        return None
    limit = params.get("limit")
    if limit is not None and not (limit.isascii() and limit.isdigit()):
        return None
    return PlainRead(Route(resources.NS if namespaced else resources.ALL_NAMESPACES), kind, parts[3],
                     parts[5] if namespaced else None, limit=None if limit is None else int(limit),
                     continue_=params.get("continue") or None)


def _header(scope: Scope, name: bytes) -> str | None:
    return next((value.decode("latin-1") for key, value in scope["headers"] if key.lower() == name), None)


def _body(state: State, read: PlainRead) -> bytes | None:
    """The answer's body, read on a connection of the app's read engine (``infra.db.make_read_engine``),
    or None when the routes are to answer (see the module's docstring)."""
    try:
        with state.read_engine.connect() as connection:
            if read.name is not None:
                return resources.object_body(connection, read.kind, read.version, read.namespace, read.name)
            query = resources.ListQuery(
                label_selector=None, field_selector=None, watch=False, resource_version=None, timeout_s=None,
                bookmarks=False, send_initial=None, limit=read.limit, continue_=read.continue_,
                include_object="Metadata")
            return resources.list_page_body(connection, read.kind, read.version, read.namespace, query,
                                            state.settings.list_page_items)
    except (ApiError, DBAPIError, TextNotKept):
        return None


def plain_reads(app: ASGIApp, *, state: State) -> ASGIApp:
    """Wrap ``app`` (the API, whose ``state`` holds its read engine and settings): plain reads are
    answered here, every other request goes on to ``app``."""

    async def asgi(scope: Scope, receive: Receive, send: Send) -> None:
        read = plain_read(scope)
        if read is not None:
            turns = resources.list_turns(state) if read.name is None else None
            body = await anyio.to_thread.run_sync(_body, state, read, limiter=turns)
            if body is not None:
                scope["route"] = read.route
                await Response(body, media_type="application/json")(scope, receive, send)
                return
        await app(scope, receive, send)

    return asgi
