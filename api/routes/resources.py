"""Custom-resource endpoints, served as kube-apiserver serves CRDs.

``/apis/{group}/{version}/namespaces/{namespace}/{plural}[/{name}[/status]]`` and the
all-namespaces list ``/apis/{group}/{version}/{plural}``. The status subresource is the only
way to change ``status``; the main resource ignores status in bodies.
"""

from __future__ import annotations

import asyncio
import re
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Annotated, Any, Literal

import anyio
import anyio.to_thread
from fastapi import APIRouter, Depends, Query, Request
from fastapi.responses import JSONResponse, Response
from pydantic_core import from_json, to_json
from sqlalchemy.orm import Session
from starlette.datastructures import State

from api import errors
from api.deps import (JSON_PATCH_TYPE, BodyDep, EnqueueDep, OptionalBodyDep, PatchBodyDep, SessionDep, SettingsDep,
                      StatementSessionDep)
from api.errors import ApiError
from api.json_response import JsonResponse
from api.kinds import InvalidSpec, ServedKind, find_kind
from api.field_selector import FieldSelectorError, fields_match, parse_field_selector
from api import json_patch, managed_fields, paging
from api.objects import dig, generate_name, is_label, merge_patch, metadata_causes, render
from api.published import published
from api.tables import check_include_object, table, table_version
from api.watch import DEFAULT_TIMEOUT_S, MAX_TIMEOUT_S, WatchRequest, watch_response
from infra import events, outbox
from infra import resources as repo
from infra.db import Reader
from infra.resources import ManagedFieldsEntry
from infra.labels import SelectorError, matches, parse_selector
from infra.settings import Settings

router = APIRouter(tags=["resources"])

NS = "/apis/{group}/{version}/namespaces/{namespace}/{plural}"
ONE = NS + "/{name}"
ALL_NAMESPACES = "/apis/{group}/{version}/{plural}"
MERGE_TYPES = ("application/merge-patch+json", "application/strategic-merge-patch+json", "application/json")
APPLY_TYPE = "application/apply-patch+yaml"  # server-side apply


async def _refuse_dry_run(request: Request) -> None:
    """Writes are not rehearsed: ``kubectl … --dry-run=server`` sends ``dryRun=All`` and expects
    nothing to change, so a dry run is refused (400 naming ``dryRun``) rather than carried out."""
    if "dryRun" in request.query_params:
        raise _bad_field("dryRun", NO_DRY_RUN)


WRITE = [Depends(_refuse_dry_run)]
FieldManagerQuery = Annotated[str | None, Query(
    description="the manager the written fields are recorded for (required for an apply; default: the "
    "User-Agent's product); see metadata.managedFields")]
NO_DRY_RUN = "dryRun: Unsupported value: dry runs are not supported; nothing was changed"


def _kind(group: str, version: str, plural: str) -> ServedKind:
    kind = find_kind(group, version, plural)
    if kind is None:
        raise ApiError(404, "the server could not find the requested resource")
    return kind


def _key(kind: ServedKind, namespace: str, name: str) -> repo.ResourceKey:
    return repo.ResourceKey(group=kind.group, plural=kind.plural, namespace=namespace, name=name)


def _load(session: Session, kind: ServedKind, namespace: str, name: str) -> repo.Resource:
    found = repo.get_resource(session, _key(kind, namespace, name))
    if found is None:
        raise errors.not_found(kind.plural, name, kind.group)
    return found


def load_resource(session: Session, group: str, version: str, plural: str, namespace: str, name: str) -> repo.Resource:
    """The stored object a path names; 404 Status when the kind or the object is not there."""
    return _load(session, _kind(group, version, plural), namespace, name)


VERSION_DIGITS = r"[0-9]{1,19}"
# What the OpenAPI document says of a resourceVersion parameter (empty: the latest).
VERSION_SCHEMA = {"pattern": f"^({VERSION_DIGITS})?$", "description": "a resource version: decimal, below 2^63"}


@dataclass(frozen=True)
class ListQuery:
    """The query of a list call (and of a watch: ``?watch=true``), checked (see ``list_query``)."""

    label_selector: str | None
    field_selector: str | None
    watch: bool
    resource_version: int | None
    timeout_s: int | None
    bookmarks: bool
    send_initial: bool | None
    limit: int | None
    continue_: str | None
    include_object: str


async def list_query(
    labelSelector: str | None = None,  # noqa: N803 (Kubernetes' parameter names)
    fieldSelector: str | None = None,  # noqa: N803
    watch: bool = False,
    resourceVersion: str | None = Query(default=None, json_schema_extra=VERSION_SCHEMA),  # noqa: N803
    timeoutSeconds: int | None = Query(default=None, ge=0, le=MAX_TIMEOUT_S),  # noqa: N803
    allowWatchBookmarks: bool = False,  # noqa: N803
    sendInitialEvents: bool | None = None,  # noqa: N803
    limit: int | None = Query(default=None, ge=0, description="most items in this page (0: the server's cap)"),
    continue_: str | None = Query(default=None, alias="continue", description="the token of the previous page"),
    resourceVersionMatch: Literal["", "NotOlderThan", "Exact"] | None = None,  # noqa: N803, ARG001
    includeObject: str | None = Query(default=None, description="Table rows: None, Metadata or Object"),  # noqa: N803
) -> ListQuery:
    """The query parameters of a list call, read by kube-apiserver's names; 400 naming the one that
    is wrong. A coroutine, as the dependencies of ``api.deps`` are."""
    version = _query_version(resourceVersion)
    if continue_ and version is not None:
        raise _bad_field("resourceVersion", "specifying resourceVersion is not allowed when using continue")
    return ListQuery(
        label_selector=labelSelector, field_selector=fieldSelector, watch=watch, resource_version=version,
        timeout_s=timeoutSeconds, bookmarks=allowWatchBookmarks, send_initial=sendInitialEvents, limit=limit,
        continue_=continue_ or None, include_object=check_include_object(includeObject),
    )


ListQueryDep = Annotated[ListQuery, Depends(list_query)]

_DIGITS = re.compile(VERSION_DIGITS)  # int() would also take " 1", "1_0" and "１"
MAX_VERSION = 2**63 - 1  # resource versions are 64-bit SQL integers


def _parse_version(text: str) -> int | None:
    """``text`` as a resource version: plain ASCII digits within the 64-bit range, else None."""
    if not _DIGITS.fullmatch(text) or int(text) > MAX_VERSION:
        return None
    return int(text)


def _query_version(value: str | None) -> int | None:
    """The ``resourceVersion`` query parameter of a list or watch (None when absent or empty); 400
    naming it unless it is a resource version, as kube-apiserver answers."""
    if value in (None, ""):
        return None
    version = _parse_version(value)
    if version is None:
        raise _bad_field("resourceVersion", f'resourceVersion "{value}" is not a valid resource version: '
                                            "it must be a decimal number below 2^63")
    return version


def _list(request: Request, session: Session, kind: ServedKind, version: str, namespace: str | None, query: ListQuery):
    try:
        requirements = parse_selector(query.label_selector)
    except SelectorError as exc:
        raise ApiError(400, f"unable to parse requirement: {exc}") from None
    try:
        fields = parse_field_selector(query.field_selector)
    except FieldSelectorError as exc:
        raise ApiError(400, str(exc)) from None
    as_table = table_version(request.headers.get("accept"))
    columns = published(kind, version).columns if as_table else ()
    latest = events.latest_version(session)
    _check_not_ahead(latest, query.resource_version)
    if query.watch:
        session.close()  # the stream opens its own sessions, one per poll
        watch = _watch_request(kind, version, namespace, requirements, fields, query)
        present = (lambda obj: kind.convert(obj, version))
        if as_table:
            present = _table_events(columns, as_table, query.include_object, present)
        return watch_response(request.app.state.sessions, watch, present)
    settings: Settings = request.app.state.settings
    keep = _keep(requirements, fields)
    if not as_table:
        return json_bytes(_list_body(session, latest, kind, version, namespace, query, keep, settings.list_page_items))
    page, metadata = _page(session, latest, kind, namespace, query, keep, settings.list_page_items)
    objects = [kind.convert(from_json(item.text), version) for item in page.items]
    return plain(table(columns, objects, version=as_table, include_object=query.include_object, metadata=metadata))


def list_page_body(session: Reader, kind: ServedKind, version: str, namespace: str | None, query: ListQuery,
                   cap: int) -> bytes:
    """The JSON body of the page of a list without selectors, as a list answers it (not as a Table
    or a watch); ApiError as it would answer one."""
    latest = events.latest_version(session)
    _check_not_ahead(latest, query.resource_version)
    return _list_body(session, latest, kind, version, namespace, query, None, cap)


def _list_body(session: Reader, latest: int, kind: ServedKind, version: str, namespace: str | None,
               query: ListQuery, keep, cap: int) -> bytes:
    """The page's list as JSON: the stored texts of its items joined (nothing decoded unless an
    item is at another API version), the page's megabytes copied twice."""
    page, metadata = _page(session, latest, kind, namespace, query, keep, cap)
    head = to_json({"apiVersion": f"{kind.group}/{version}", "kind": kind.list_kind, "metadata": metadata}).decode()
    parts = [head[:-1], ',"items":[']
    for item in page.items:
        parts += (_object_text(kind, version, item), ",")
    if page.items:
        parts.pop()  # the last comma
    parts.append("]}")
    return "".join(parts).encode()


def object_body(session: Reader, kind: ServedKind, version: str, namespace: str, name: str) -> bytes | None:
    """The stored object's JSON at ``version`` as a get answers it (None when there is none)."""
    stored = repo.get_stored(session, _key(kind, namespace, name))
    return None if stored is None else _object_text(kind, version, stored).encode()


def json_bytes(body: bytes) -> Response:
    """A 200 answer of the JSON text ``body``."""
    return Response(body, media_type="application/json")


def _object_text(kind: ServedKind, version: str, stored: repo.StoredObject) -> str:
    """The stored object at ``version``, JSON text: its stored text as it is when it is at that
    version (a list's body is these joined; nothing is decoded), else decoded, converted and
    encoded."""
    if stored.version == version:
        return stored.text
    return to_json(kind.convert(from_json(stored.text), version)).decode()


def plain(obj: dict[str, Any]) -> Any:
    """``obj`` (plain JSON values only) as the response, past FastAPI's ``jsonable_encoder``, which
    walks every value and took 70% of the time of a page of 100 planned DGDRs (1.2 MB). The
    routes keep their declared return type for the OpenAPI document. Encoded by
    ``api.json_response``."""
    return JsonResponse(obj)


def _check_not_ahead(latest: int, version: int | None) -> None:
    """504 ``Timeout`` with the cause ``ResourceVersionTooLarge`` (what client-go's reflectors
    recognise) for a version this server has not reached (``latest``): versions come from one
    counter, so no client saw it, and waiting for it would wait forever."""
    if version is not None and version > latest:
        message = f"Too large resource version: {version}, current: {latest}"
        raise ApiError(504, message, reason="Timeout", details={
            "causes": [{"reason": "ResourceVersionTooLarge", "message": "Too large resource version"}],
            "retryAfterSeconds": 1})


def _keep(requirements, fields) -> repo.Keep | None:
    """What selects a listed object by its namespace, name and labels; None: every object."""
    if not requirements and not fields:
        return None
    return lambda ns, name, labels: matches(requirements, labels) and fields_match(
        fields, {"metadata": {"namespace": ns, "name": name}})


def _page(session: Reader, latest: int, kind: ServedKind, namespace: str | None, query: ListQuery, keep, cap: int):
    """The page a list asks for (at most ``cap`` objects, as stored JSON) and the list metadata to send with it
    (resourceVersion; continue when more follow, and remainingItemCount when no selector was
    given, as kube-apiserver answers), ``latest`` the last version committed; see ``api.paging``."""
    token = paging.decode(query.continue_, namespace) if query.continue_ else None
    if token is not None:
        if token.resource_version > latest:
            raise _bad_field("continue", "continue key is not valid: it names a resource version this server "
                                         "has not reached")
        if token.resource_version < events.compacted_through(session):
            raise paging.expired(token, latest)
    at = token.resource_version if token else latest
    limit = min(query.limit or cap, cap)
    page = repo.list_page(session, kind.group, kind.plural, namespace, keep=keep,
                          after=token.key if token else None, limit=limit,
                          remaining=token.remaining if token else None)
    metadata: dict[str, Any] = {"resourceVersion": str(at)}
    if page.more:
        last = page.items[-1]
        metadata["continue"] = paging.encode(paging.Continue(at, (last.namespace, last.name), page.remaining))
        if page.remaining is not None:
            metadata["remainingItemCount"] = page.remaining
    return page, metadata


def _table_events(columns, table_v: str, include_object: str, present):
    """``present`` for a watch whose client asked for Tables: each object a one-row Table, the
    column definitions in the first only (as kube-apiserver streams them)."""
    sent = []

    def as_table(obj: dict[str, Any]) -> dict[str, Any]:
        out = table(columns, [present(obj)], version=table_v, include_object=include_object, with_columns=not sent)
        sent.append(True)
        return out

    return as_table


def _watch_request(kind: ServedKind, version: str, namespace: str | None, selector, fields, query: ListQuery) -> WatchRequest:
    start = query.resource_version  # None or 0: from now, with the current objects first
    return WatchRequest(
        group=kind.group,
        plural=kind.plural,
        api_version=f"{kind.group}/{version}",
        kind=kind.kind,
        namespace=namespace,
        selector=selector,
        fields=fields,
        resource_version=start,
        send_initial=query.send_initial if query.send_initial is not None else not start,
        timeout_s=query.timeout_s if query.timeout_s else DEFAULT_TIMEOUT_S,
        bookmarks=query.bookmarks,
    )


LIST_TURNS = 1  # lists of one API process that read and join their pages at a time


def list_turns(state: State) -> anyio.CapacityLimiter:
    """The limiter lists take turns by, one per app (its ``state``) and event loop (a limiter is
    bound to the loop that first waits on it). Lists read and join up to megabytes in a thread:
    run together, the GIL interleaves them and every page ends as late as the last; in turns,
    each waits only for those before it, and the event loop, gets and creates keep running
    meanwhile (docs/performance.md has the figures)."""
    loop = asyncio.get_running_loop()
    turns = getattr(state, "list_turns", None)
    if turns is None or turns[0] is not loop:
        turns = state.list_turns = (loop, anyio.CapacityLimiter(LIST_TURNS))
    return turns[1]


@router.get(ALL_NAMESPACES, summary="List (or watch) a kind in all namespaces")
async def list_all(request: Request, group: str, version: str, plural: str, session: StatementSessionDep,
                   query: ListQueryDep):
    return await anyio.to_thread.run_sync(_list, request, session, _kind(group, version, plural), version, None,
                                          query, limiter=list_turns(request.app.state))


@router.get(NS, summary="List (or watch) a kind in one namespace")
async def list_namespaced(request: Request, group: str, version: str, namespace: str, plural: str,
                          session: StatementSessionDep, query: ListQueryDep):
    return await anyio.to_thread.run_sync(_list, request, session, _kind(group, version, plural), version, namespace,
                                          query, limiter=list_turns(request.app.state))


@router.post(NS, status_code=201, summary="Create (JSON or YAML body)", dependencies=WRITE)
def create(
    request: Request,
    group: str,
    version: str,
    namespace: str,
    plural: str,
    body: BodyDep,
    session: StatementSessionDep,  # a create is one statement
    enqueue: EnqueueDep,
    settings: SettingsDep,
    fieldManager: FieldManagerQuery = None,  # noqa: N803
) -> JSONResponse:
    manager = managed_fields.manager_of(fieldManager, request.headers.get("user-agent"))
    return create_object(group, version, namespace, plural, body, session, enqueue, settings, manager=manager)


def create_object(
    group: str, version: str, namespace: str, plural: str, body: dict[str, Any], session: Session, enqueue,
    settings: Settings, *, manager: str, operation: str = "Update",
) -> JSONResponse:
    """Create the object ``body`` describes, its fields owned by ``manager`` (by ``operation``:
    ``Update``, or ``Apply`` for a server-side apply that creates); 201 with the object."""
    kind = _kind(group, version, plural)
    _check_type(body, kind, group, version)
    if not is_label(namespace):
        raise ApiError(400, f'namespace "{namespace}" is not a valid RFC 1123 label')
    metadata = body.get("metadata") or {}
    if not isinstance(metadata, dict):
        raise ApiError(400, "metadata must be an object")
    if metadata.get("namespace") not in (None, "", namespace):
        raise ApiError(400, "the namespace of the provided object does not match the namespace sent on the request")
    name = metadata.get("name") or (generate_name(metadata["generateName"]) if metadata.get("generateName") else "")
    metadata = {**metadata, "name": name}
    causes = metadata_causes(metadata)
    if metadata.get("resourceVersion") not in (None, ""):  # as Kubernetes: the server assigns it
        causes.append(("metadata.resourceVersion", "Invalid value: must be empty on create"))
    spec = body.get("spec")
    obj = {
        "apiVersion": f"{group}/{version}",
        "kind": kind.kind,
        "metadata": {
            "name": name,
            "namespace": namespace,
            "labels": metadata.get("labels") or {},
            "annotations": metadata.get("annotations") or {},
        },
        "spec": spec,
    }
    causes += _spec_causes(kind, obj, settings)
    if causes:
        raise errors.invalid(kind.kind, group, name or "", causes)
    new = repo.ResourceCreate(
        group=group,
        version=version,
        kind=kind.kind,
        plural=plural,
        namespace=namespace,
        name=name,
        labels=obj["metadata"]["labels"],
        annotations=obj["metadata"]["annotations"],
        spec=spec,
        status=kind.initial_status(1, datetime.now(UTC)),
        managed_fields=managed_fields.created(manager, operation, f"{group}/{version}", obj),
    )
    try:  # the stored request is the message: due for publishing now (infra.outbox)
        stored = repo.create_resource(session, new, publish_due_at=datetime.now(UTC))
    except repo.AlreadyExists:
        raise errors.already_exists(plural, name, group) from None
    session.commit()
    enqueue(kind, stored.uid)
    return JsonResponse(_present(kind, version, stored), status_code=201)


@router.get(ONE, summary="Get (a Table when the Accept header asks for one)")
def get(
    request: Request,
    group: str,
    version: str,
    namespace: str,
    plural: str,
    name: str,
    session: StatementSessionDep,
    includeObject: str | None = Query(default=None, description="Table rows: None, Metadata or Object"),  # noqa: N803
) -> dict[str, Any]:
    kind = _kind(group, version, plural)
    include_object = check_include_object(includeObject)
    as_table = table_version(request.headers.get("accept"))
    if not as_table:
        body = object_body(session, kind, version, namespace, name)
        if body is None:
            raise errors.not_found(kind.plural, name, kind.group)
        return json_bytes(body)
    stored = repo.get_stored(session, _key(kind, namespace, name))
    if stored is None:
        raise errors.not_found(kind.plural, name, kind.group)
    obj = kind.convert(from_json(stored.text), version)
    resource_version = {"resourceVersion": obj["metadata"]["resourceVersion"]}
    return plain(table(published(kind, version).columns, [obj], version=as_table, include_object=include_object,
                       metadata=resource_version))


@router.get(NS + "/{name}/status", summary="Get (status subresource)")
def get_status(group: str, version: str, namespace: str, plural: str, name: str,
               session: StatementSessionDep) -> dict[str, Any]:
    kind = _kind(group, version, plural)
    return plain(_present(kind, version, _load(session, kind, namespace, name)))


@router.delete(NS + "/{name}", summary="Delete (what a DGDR deployed is kept)", dependencies=WRITE)
def delete(
    group: str, version: str, namespace: str, plural: str, name: str, options: OptionalBodyDep, session: SessionDep
) -> dict[str, Any]:
    kind = _kind(group, version, plural)
    preconditions = _delete_preconditions(options)
    current = _load(session, kind, namespace, name)
    if preconditions.get("uid") not in (None, current.uid):
        raise errors.conflict(plural, name, group, "Precondition failed: UID does not match")
    if preconditions.get("resourceVersion") not in (None, str(current.resource_version)):
        raise errors.conflict(plural, name, group, "Precondition failed: resourceVersion does not match")
    repo.delete_resource(session, current.key)
    session.commit()
    return {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Success",
        "details": {"name": name, "group": group, "kind": plural, "uid": current.uid},
    }


PROPAGATION_POLICIES = ("Orphan", "Background", "Foreground")


def _delete_preconditions(options: dict[str, Any]) -> dict[str, Any]:
    """The preconditions of a DeleteOptions body, after checking the fields Kubernetes types:
    400 naming the field when one has the wrong type or value, or asks for a dry run."""
    if options.get("dryRun"):
        raise _bad_field("dryRun", NO_DRY_RUN)
    policy = options.get("propagationPolicy")
    if policy is not None and policy not in PROPAGATION_POLICIES:
        raise ApiError(400, f"propagationPolicy: Unsupported value: must be one of {', '.join(PROPAGATION_POLICIES)}")
    preconditions = options.get("preconditions")
    if preconditions is None:
        return {}
    if not isinstance(preconditions, dict):
        raise ApiError(400, "preconditions: Invalid value: must be an object")
    for field in ("uid", "resourceVersion"):
        value = preconditions.get(field)
        if value is not None and not isinstance(value, str):
            raise ApiError(400, f"preconditions.{field}: Invalid value: must be a string")
    return preconditions


@router.patch(NS + "/{name}", summary="Merge-patch metadata (and spec before work starts), or apply", dependencies=WRITE)
def patch(
    request: Request,
    group: str,
    version: str,
    namespace: str,
    plural: str,
    name: str,
    body: PatchBodyDep,
    session: SessionDep,
    enqueue: EnqueueDep,
    settings: SettingsDep,
    fieldManager: FieldManagerQuery = None,  # noqa: N803
    force: bool | None = Query(default=None, description="an apply takes over the fields other managers own"),
) -> dict[str, Any]:
    kind = _kind(group, version, plural)
    applying = _media_type(request) == APPLY_TYPE
    if not applying:
        _check_merge_type(request, json_patch=True)
        if force is not None:
            raise errors.invalid("PatchOptions", "meta.k8s.io", "", [("force", "Forbidden: may not be specified for non-apply patch")])
    manager = managed_fields.manager_of(fieldManager, request.headers.get("user-agent"))
    if _media_type(request) == JSON_PATCH_TYPE:
        if not isinstance(body, list):
            raise ApiError(400, "a JSON patch is a list of operations")
        return _json_patch(session, enqueue, settings, kind, version, namespace, name, body, manager)
    _check_type(body, kind, group, version)  # a patch cannot change what the object is
    if applying:
        body = _applied(request, kind, name, body)
        if repo.get_resource(session, _key(kind, namespace, name)) is None:
            return create_object(group, version, namespace, plural, body, session, enqueue, settings,
                                 manager=manager, operation="Apply")

    def attempt() -> dict[str, Any]:
        current = _load(session, kind, namespace, name)
        presented = _present(kind, version, current)
        if not applying:
            return _update(session, enqueue, settings, kind, version, current, merge_patch(presented, body),
                           require_version=False, manager=manager)
        try:
            entries, desired = managed_fields.applied(current.managed_fields, manager, f"{group}/{version}", presented,
                                                      body, force=bool(force))
        except managed_fields.ApplyConflict as exc:
            raise managed_fields.conflict_error(exc.conflicts, plural, group, name) from None
        return _update(session, enqueue, settings, kind, version, current, desired, require_version=False,
                       manager=manager, entries=entries)

    return _unless_raced(body, attempt)


def _json_patch(session: Session, enqueue, settings: Settings, kind: ServedKind, version: str, namespace: str,
                name: str, operations: list[Any], manager: str) -> dict[str, Any]:
    """A JSON patch's ``operations`` carried out on the object (as read at ``version``) and written
    by ``manager``; 422 when one cannot be, 400 when the result is another kind of object."""
    current = _load(session, kind, namespace, name)
    try:
        desired = json_patch.apply_patch(_present(kind, version, current), operations)
    except json_patch.PatchError as exc:
        raise ApiError(422, f"the JSON patch cannot be applied: {exc}") from None
    if not isinstance(desired, dict):
        raise ApiError(422, "the JSON patch cannot be applied: the result is not an object")
    _check_type(desired, kind, kind.group, version)
    return _update(session, enqueue, settings, kind, version, current, desired, require_version=False, manager=manager)


@router.put(NS + "/{name}", summary="Replace (metadata.resourceVersion required)", dependencies=WRITE)
def replace(
    request: Request,
    group: str,
    version: str,
    namespace: str,
    plural: str,
    name: str,
    body: BodyDep,
    session: SessionDep,
    enqueue: EnqueueDep,
    settings: SettingsDep,
    fieldManager: FieldManagerQuery = None,  # noqa: N803
) -> dict[str, Any]:
    kind = _kind(group, version, plural)
    _check_type(body, kind, group, version)
    manager = managed_fields.manager_of(fieldManager, request.headers.get("user-agent"))
    current = _load(session, kind, namespace, name)
    return _update(session, enqueue, settings, kind, version, current, body, require_version=True, manager=manager)


@router.patch(NS + "/{name}/status", summary="Merge-patch status", dependencies=WRITE)
def patch_status(
    request: Request, group: str, version: str, namespace: str, plural: str, name: str, body: BodyDep, session: SessionDep
) -> dict[str, Any]:
    kind = _kind(group, version, plural)
    _check_merge_type(request)
    _check_metadata(kind, name, body, required=False)

    def attempt() -> dict[str, Any]:
        current = _load(session, kind, namespace, name)
        patch = body.get("status")
        status = current.status if patch is None else merge_patch(current.status, patch)
        return _write_status(session, kind, version, current, status, _given_version(body))

    return _unless_raced(body, attempt)


@router.put(NS + "/{name}/status", summary="Replace status (metadata.resourceVersion required)", dependencies=WRITE)
def replace_status(
    group: str, version: str, namespace: str, plural: str, name: str, body: BodyDep, session: SessionDep
) -> dict[str, Any]:
    kind = _kind(group, version, plural)
    current = _load(session, kind, namespace, name)
    _check_metadata(kind, name, body, required=False)
    given = _given_version(body)
    if given is None:
        raise errors.invalid(kind.kind, group, name, [("metadata.resourceVersion", "Invalid value: must be specified for an update")])
    status = body.get("status")
    return _write_status(session, kind, version, current, {} if status is None else status, given)


def _check_type(body: dict[str, Any], kind: ServedKind, group: str, version: str) -> None:
    """400 naming ``apiVersion`` or ``kind`` when the body sets it to other than the URL's."""
    api_version = body.get("apiVersion")
    if api_version not in (None, f"{group}/{version}"):
        message = f"the API version in the data ({api_version}) does not match the expected API version ({group}/{version})"
        raise _bad_field("apiVersion", message)
    if body.get("kind") not in (None, kind.kind):
        raise _bad_field("kind", f"the kind in the data ({body.get('kind')}) does not match the expected kind ({kind.kind})")


def _bad_field(field: str, message: str) -> ApiError:
    """400 BadRequest whose cause names ``field``."""
    return ApiError(400, message, details={"causes": [{"reason": "FieldValueInvalid", "message": message, "field": field}]})


def _media_type(request: Request) -> str:
    return (request.headers.get("content-type") or "").split(";")[0].strip().lower()


def _check_merge_type(request: Request, *, json_patch: bool = False) -> None:
    """415 unless the patch is a merge patch (or, with ``json_patch``, a JSON patch)."""
    ctype = _media_type(request)
    if ctype not in (*MERGE_TYPES, *((JSON_PATCH_TYPE,) if json_patch else ())):
        others = f"{JSON_PATCH_TYPE} or {APPLY_TYPE}" if json_patch else APPLY_TYPE
        raise ApiError(415, f'the patch type "{ctype}" is not supported; use application/merge-patch+json or {others}')


def _applied(request: Request, kind: ServedKind, name: str, body: dict[str, Any]) -> dict[str, Any]:
    """The configuration a server-side apply sends (``kubectl apply --server-side``), as the patch
    it is merged as: without status and managedFields. 422 without ``fieldManager`` (as
    kube-apiserver), 400 when it names another object. Who owns which field: ``api.managed_fields``."""
    if not request.query_params.get("fieldManager"):
        raise errors.invalid("PatchOptions", "meta.k8s.io", "", [("fieldManager", "Required value: is required for apply patch")])
    metadata = body.get("metadata")
    if not isinstance(metadata, dict) or metadata.get("name") != name:
        raise ApiError(400, f"the name of the applied object ({dig(body, 'metadata', 'name')}) does not match the name "
                            f"on the URL ({name})")
    metadata = {k: v for k, v in metadata.items() if k != "managedFields"}
    return {**{k: v for k, v in body.items() if k != "status"}, "metadata": metadata,
            "apiVersion": body.get("apiVersion") or f"{kind.group}/{request.path_params['version']}"}


def _spec_causes(kind: ServedKind, obj: dict[str, Any], settings: Settings) -> list[tuple[str, str]]:
    if not isinstance(obj.get("spec"), dict):
        return [("spec", "Required value: spec must be an object")]
    try:
        read = kind.validate(obj)  # read once: the checks below take what it read
    except InvalidSpec as exc:
        return exc.causes
    model_causes = kind.model_causes(read, obj, settings.model_dirs)
    if model_causes:
        return model_causes
    if settings.cluster != "none" and settings.api_token is None and not settings.allow_unauthenticated_apply:
        if kind.deploys(read):
            return [("spec.autoApply", UNAUTHENTICATED_APPLY)]
    return []


UNAUTHENTICATED_APPLY = (
    "Forbidden: autoApply would deploy to the configured cluster, and this API has no token, so anyone who can "
    "reach it could deploy: set SLAPLAN_API_TOKEN, or SLAPLAN_ALLOW_UNAUTHENTICATED_APPLY=true to allow it "
    "(or set autoApply: false and apply status.generatedDeployment yourself)"
)


PATCH_ATTEMPTS = 5


def _unless_raced(body: dict[str, Any], attempt):
    """Run a read-merge-write ``attempt``; when the patch names no resourceVersion and another
    write lands between its read and its write, read and merge again, as the Kubernetes API
    server does (a patch that names a version keeps its 409)."""
    for tries in range(1, PATCH_ATTEMPTS + 1):
        try:
            return attempt()
        except ApiError as exc:
            raced = exc.code == 409 and exc.reason == "Conflict" and _given_version(body) is None
            if not raced or tries == PATCH_ATTEMPTS:
                raise


def _check_metadata(kind: ServedKind, name: str, body: dict[str, Any], *, required: bool) -> None:
    """422 naming ``metadata`` unless ``body``'s metadata is an object (or absent, when not ``required``)."""
    metadata = body.get("metadata")
    if metadata is None and required:
        raise errors.invalid(kind.kind, kind.group, name, [("metadata", "Required value: an update cannot remove metadata")])
    if metadata is not None and not isinstance(metadata, dict):
        raise errors.invalid(kind.kind, kind.group, name, [("metadata", "Invalid value: must be an object")])


def _given_version(body: dict[str, Any]) -> int | None:
    """The resourceVersion the body names (-1 for one that is not a resource version, see
    ``_parse_version``), or None."""
    metadata = body.get("metadata")
    value = metadata.get("resourceVersion") if isinstance(metadata, dict) else None
    if value in (None, ""):
        return None
    version = _parse_version(str(value))
    return -1 if version is None else version  # -1 never matches: a conflict, as for any stale version


def _present(kind: ServedKind, version: str, resource: repo.Resource) -> dict[str, Any]:
    """The stored resource as a Kubernetes object at the requested ``version``."""
    return kind.convert(render(resource), version)


def _update(
    session: Session,
    enqueue,
    settings: Settings,
    kind: ServedKind,
    version: str,
    current: repo.Resource,
    desired: dict[str, Any],
    *,
    require_version: bool,
    manager: str,
    entries: tuple[ManagedFieldsEntry, ...] | None = None,
) -> dict[str, Any]:
    """Write ``desired`` (at ``version``) over ``current``; its fields' owners become ``entries``, or
    (None) what ``manager`` changing them by an update makes them (``api.managed_fields``)."""
    _check_metadata(kind, current.name, desired, required=True)
    if entries is None:
        entries = _entries_after_update(kind, version, current, desired, manager)
    # Written at ``version``; stored at the version it was created with.
    desired = kind.convert({**desired, "apiVersion": f"{kind.group}/{version}"}, current.version)
    metadata = desired["metadata"]
    if metadata.get("name", current.name) != current.name:
        raise ApiError(400, f'the name of the object ({metadata.get("name")}) does not match the name on the URL ({current.name})')
    if metadata.get("namespace", current.namespace) != current.namespace:
        raise ApiError(400, "the namespace of the provided object does not match the namespace sent on the request")
    if metadata.get("uid") not in (None, current.uid):
        raise errors.conflict(kind.plural, current.name, kind.group, "Precondition failed: UID does not match")
    given = _given_version(desired)
    if require_version and given is None:
        raise errors.invalid(kind.kind, kind.group, current.name, [("metadata.resourceVersion", "Invalid value: must be specified for an update")])
    labels = metadata.get("labels") or {}
    annotations = metadata.get("annotations") or {}
    causes = metadata_causes({"name": current.name, "labels": labels, "annotations": annotations})
    spec = desired.get("spec")
    spec_changed = spec != current.spec
    state = current.status.get("state") or ""
    if spec_changed:
        if not isinstance(state, str) or state not in kind.editable_states:
            causes.append(("spec", f"Forbidden: the spec cannot change once work has started (state {state})"))
        else:
            obj = {
                "apiVersion": current.api_version,
                "kind": kind.kind,
                "metadata": {"name": current.name, "namespace": current.namespace, "labels": labels, "annotations": annotations},
                "spec": spec,
            }
            causes += _spec_causes(kind, obj, settings)
    if causes:
        raise errors.invalid(kind.kind, kind.group, current.name, causes)
    try:
        updated = repo.update_spec(
            session,
            current.key,
            spec if spec_changed else current.spec,
            labels=labels,
            annotations=annotations,
            managed_fields=entries,
            expected_version=given if given is not None else current.resource_version,
        )
        if spec_changed:
            status = kind.initial_status(updated.generation, datetime.now(UTC))
            updated = repo.update_status(session, status, key=current.key, expected_version=updated.resource_version)
            outbox.mark_due(session, updated.uid, updated.updated_at)
    except repo.Conflict as exc:
        session.rollback()
        raise errors.conflict(kind.plural, current.name, kind.group, str(exc)) from None
    session.commit()
    if spec_changed:
        enqueue(kind, updated.uid)
    return _present(kind, version, updated)


def _entries_after_update(kind: ServedKind, version: str, current: repo.Resource, desired: dict[str, Any],
                          manager: str) -> tuple[ManagedFieldsEntry, ...]:
    """The managed fields after ``manager`` writes ``desired``: the ones the body sets when they differ
    from the stored ones (as Kubernetes: a client may reset them), else the stored ones with the
    fields it changes moved to it."""
    given = managed_fields.given_entries(desired["metadata"], kind.kind, kind.group, current.name)
    if given is not None and given != current.managed_fields:
        return given
    return managed_fields.updated(current.managed_fields, manager, f"{kind.group}/{version}",
                                  _present(kind, version, current), desired)


def _write_status(session: Session, kind: ServedKind, version: str, current: repo.Resource, status: Any, given: int | None):
    """Store ``status`` (422 naming the field when it is malformed) and return the object."""
    causes = _status_causes(status, CONDITION_REQUIRED.get(kind.kind, ()))
    if causes:
        raise errors.invalid(kind.kind, kind.group, current.name, causes)
    try:
        updated = repo.update_status(
            session, status, key=current.key, expected_version=given if given is not None else current.resource_version
        )
    except repo.Conflict as exc:
        session.rollback()
        raise errors.conflict(kind.plural, current.name, kind.group, str(exc)) from None
    session.commit()
    return _present(kind, version, updated)


# A condition's string fields; the DGDR CRDs require all of them, OME's BenchmarkJob CRD none.
CONDITION_STRINGS = ("type", "status", "reason", "message", "lastTransitionTime")
CONDITION_REQUIRED = {"DynamoGraphDeploymentRequest": CONDITION_STRINGS}


def _status_causes(status: Any, required: tuple[str, ...]) -> list[tuple[str, str]]:
    """What is wrong with ``status`` in the fields slaplan reads, by the types the CRDs give them:
    ``state`` a string, ``observedGeneration`` an integer, ``conditions`` a list of condition objects
    with the ``required`` fields."""
    if not isinstance(status, dict):
        return [("status", "Invalid value: must be an object")]
    causes = []
    if not isinstance(status.get("state", ""), str):
        causes.append(("status.state", "Invalid value: must be a string"))
    if not _is_int(status.get("observedGeneration", 0)):
        causes.append(("status.observedGeneration", "Invalid value: must be an integer"))
    conditions = status.get("conditions", [])
    if not isinstance(conditions, list):
        return [*causes, ("status.conditions", "Invalid value: must be a list")]
    for i, condition in enumerate(conditions):
        causes += _condition_causes(f"status.conditions[{i}]", condition, required)
    return causes


def _condition_causes(path: str, condition: Any, required: tuple[str, ...]) -> list[tuple[str, str]]:
    """What is wrong with one condition at ``path``: its strings (the ``required`` ones present), its
    observedGeneration."""
    if not isinstance(condition, dict):
        return [(path, "Invalid value: must be an object")]
    causes = []
    for field in CONDITION_STRINGS:
        if field not in condition:
            if field in required:
                causes.append((f"{path}.{field}", "Required value"))
        elif not isinstance(condition[field], str):
            causes.append((f"{path}.{field}", "Invalid value: must be a string"))
    if not _is_int(condition.get("observedGeneration", 0)):
        causes.append((f"{path}.observedGeneration", "Invalid value: must be an integer"))
    return causes


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)
