"""The repository of stored custom resources. Returns frozen domain objects, never rows.

Every write bumps ``resource_version``; writes given an ``expected_version`` succeed only if
the stored object still has it (optimistic concurrency), else they raise ``Conflict``.
Resource versions come from one counter for the whole table and grow in commit order
(``infra.events``); every write also records the change, which is what watches stream.

Every write also stores the object as JSON text (``to_object``'s, at the version it was stored
with) in its row: gets and lists send that text as it is, without decoding and encoding the
object again (``StoredObject``).
"""

from __future__ import annotations

import uuid
from collections import Counter
from collections.abc import Callable
from datetime import UTC, datetime
from functools import cache
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field
from pydantic_core import to_json
from sqlalchemy import String, bindparam, delete, func, insert, select, tuple_, update
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from infra import events
from infra.db import Reader
from infra.labels import Requirement, matches
from infra.tables import ResourceRow

RESOURCES = ResourceRow.__table__  # writes go through Core: no unit of work to flush
UNCONDITIONAL_TRIES = 5  # reads of a row a write without an expected version makes before it gives up


class ResourceError(Exception):
    """Base of the repository's errors."""


class AlreadyExists(ResourceError):
    pass


class NotFound(ResourceError):
    pass


class Conflict(ResourceError):
    """The object changed since the caller read it (resource version mismatch)."""


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class ResourceKey(_Frozen):
    """Where a resource lives: its API group, plural and namespaced name."""

    group: str
    plural: str
    namespace: str
    name: str


class ManagedFieldsEntry(_Frozen):
    """One entry of ``metadata.managedFields``, as kube-apiserver writes it: the fields a manager
    set, by an ``Apply`` (server-side apply) or an ``Update`` (any other write), in the FieldsV1
    form (``{"f:spec": {"f:sla": {"f:ttft": {}}}}``; see ``api.managed_fields``)."""

    model_config = ConfigDict(frozen=True, extra="forbid", populate_by_name=True)

    manager: str
    operation: Literal["Apply", "Update"]
    api_version: str = Field(alias="apiVersion")
    time: str = Field(description="when the manager last changed its fields, RFC 3339 in seconds (UTC)")
    fields_type: Literal["FieldsV1"] = Field(default="FieldsV1", alias="fieldsType")
    fields_v1: dict[str, Any] = Field(alias="fieldsV1")


class ResourceCreate(_Frozen):
    """What a client submits (already validated by the API layer)."""

    group: str
    version: str
    kind: str
    plural: str
    namespace: str
    name: str
    labels: dict[str, str] = Field(default_factory=dict)
    annotations: dict[str, str] = Field(default_factory=dict)
    spec: dict[str, Any] = Field(default_factory=dict)
    status: dict[str, Any] = Field(default_factory=dict)
    managed_fields: tuple[ManagedFieldsEntry, ...] = ()


class Resource(_Frozen):
    """A stored resource as the rest of slaplan sees it."""

    group: str
    version: str
    kind: str
    plural: str
    namespace: str
    name: str
    uid: str
    generation: int
    resource_version: int
    labels: dict[str, str]
    annotations: dict[str, str]
    spec: dict[str, Any]
    status: dict[str, Any]
    created_at: datetime
    updated_at: datetime
    managed_fields: tuple[ManagedFieldsEntry, ...] = ()

    @property
    def key(self) -> ResourceKey:
        return ResourceKey(group=self.group, plural=self.plural, namespace=self.namespace, name=self.name)

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}"


class StoredObject(_Frozen):
    """A stored resource as the Kubernetes object the API sends: ``text`` is ``to_object``'s
    JSON (UTF-8, compact), written with the resource; ``version`` the API version it is at."""

    namespace: str
    name: str
    version: str
    text: str


def _now() -> datetime:
    return datetime.now(UTC)


def _aware(value: datetime) -> datetime:
    # SQLite returns naive datetimes even for timezone-aware columns; they were stored as UTC.
    return value if value.tzinfo else value.replace(tzinfo=UTC)


def _to_domain(row: ResourceRow) -> Resource:
    return Resource(
        group=row.group,
        version=row.version,
        kind=row.kind,
        plural=row.plural,
        namespace=row.namespace,
        name=row.name,
        uid=row.uid,
        generation=row.generation,
        resource_version=row.resource_version,
        labels=dict(row.labels or {}),
        annotations=dict(row.annotations or {}),
        spec=dict(row.spec or {}),
        status=dict(row.status or {}),
        created_at=_aware(row.created_at),
        updated_at=_aware(row.updated_at),
        managed_fields=tuple(ManagedFieldsEntry.model_validate(e) for e in row.managed_fields or ()),
    )


def _stored_entries(entries: tuple[ManagedFieldsEntry, ...]) -> list[dict[str, Any]]:
    return [e.model_dump(by_alias=True) for e in entries]


def _json_text(obj: dict[str, Any]) -> str:
    return to_json(obj).decode()


def _select_key(key: ResourceKey):
    return select(ResourceRow).where(
        ResourceRow.group == key.group,
        ResourceRow.plural == key.plural,
        ResourceRow.namespace == key.namespace,
        ResourceRow.name == key.name,
    )


def create_resource(session: Session, new: ResourceCreate, *, publish_due_at: datetime | None = None) -> Resource:
    """Insert a new resource (its task due for publishing at ``publish_due_at``, see
    ``infra.outbox``; None: nothing to publish); ``AlreadyExists`` (after rolling the session
    back) if its key is taken."""
    now = _now()
    created = Resource(
        **new.model_dump(exclude={"managed_fields"}),
        managed_fields=new.managed_fields,
        uid=str(uuid.uuid4()),
        generation=1,
        resource_version=0,  # taken with the write (events.write_versioned)
        created_at=now,
        updated_at=now,
    )
    obj = to_object(created)
    columns = {**created.model_dump(exclude={"managed_fields", "resource_version"}),
               "managed_fields": _stored_entries(new.managed_fields), "publish_due_at": publish_due_at}
    try:
        version = events.write_versioned(session, _insert_row(tuple(columns)), _row_params(columns), _json_text(obj),
                                         _change("ADDED", created, obj))
    except IntegrityError as exc:
        session.rollback()
        raise AlreadyExists(f'{new.plural} "{new.name}" already exists') from exc
    return created.model_copy(update={"resource_version": version})


def get_resource(session: Session, key: ResourceKey) -> Resource | None:
    row = session.scalars(_select_key(key)).one_or_none()
    return _to_domain(row) if row else None


def get_resource_by_uid(session: Session, uid: str) -> Resource | None:
    row = session.scalars(select(ResourceRow).where(ResourceRow.uid == uid)).one_or_none()
    return _to_domain(row) if row else None


def list_resources(
    session: Session,
    group: str,
    plural: str,
    namespace: str | None = None,
    selector: tuple[Requirement, ...] = (),
) -> list[Resource]:
    """Resources of one kind, in one namespace or all, filtered by a parsed label selector,
    ordered by namespace and name."""
    query = select(ResourceRow).where(ResourceRow.group == group, ResourceRow.plural == plural)
    if namespace is not None:
        query = query.where(ResourceRow.namespace == namespace)
    query = query.order_by(ResourceRow.namespace, ResourceRow.name)
    rows = session.scalars(query).all()
    return [_to_domain(r) for r in rows if matches(selector, r.labels or {})]


# keep(namespace, name, labels) -> whether a listed resource is selected.
Keep = Callable[[str, str, dict[str, str]], bool]


class Page(_Frozen):
    """One page of a list: the objects, whether selected ones follow, and how many (None when not
    known: lists with ``keep``, as kube-apiserver counts them only for lists without selectors, and
    later pages not handed the count of the previous one)."""

    items: list[StoredObject]
    more: bool
    remaining: int | None


# What a page reads of each row: the stored text, and what rebuilds it for a row stored without.
_PAGE_COLUMNS = (ResourceRow.id, ResourceRow.namespace, ResourceRow.name, ResourceRow.version, ResourceRow.object_json)


class TextNotKept(LookupError):
    """A row stored before objects' JSON texts were kept, read on a connection: only a session
    renders it from its columns."""


def _stored(session: Reader, row) -> StoredObject:
    """The object of a row read with ``_PAGE_COLUMNS``; rendered from the full row when it was
    stored before the text was kept (it is kept from its next write on), on a session
    (``TextNotKept`` on a connection)."""
    text = row.object_json
    if text is None:
        if not isinstance(session, Session):
            raise TextNotKept(f"{row.namespace}/{row.name}")
        text = _json_text(to_object(_to_domain(session.get(ResourceRow, row.id))))
    return StoredObject(namespace=row.namespace, name=row.name, version=row.version, text=text)


def list_page(
    session: Reader,
    group: str,
    plural: str,
    namespace: str | None = None,
    *,
    keep: Keep | None = None,
    after: tuple[str, str] | None = None,
    limit: int,
    remaining: int | None = None,
) -> Page:
    """At most ``limit`` objects of one kind (in one namespace or all) that ``keep`` selects, in
    (namespace, name) order, starting after the key ``after``, as their stored JSON. Without
    ``keep`` the page is read by the database alone, with one row more to tell whether more
    follow; the objects after the page are counted only on a first page (``after`` None), by
    the key index, and a later page's count is ``remaining`` (the count the previous page
    reported) less the objects it holds: counting the rest on every page made a whole list of N
    objects count N²/(2·limit) rows. With ``keep``, keys and labels are scanned, in order, until
    one more selected resource than the page holds is found."""
    params = {"group": group, "plural": plural, "namespace": namespace, "after_ns": after[0] if after else None,
              "after_name": after[1] if after else None}
    if keep is None:
        page, count = _page_statements(namespace is not None, after is not None)
        rows = session.execute(page, {**params, "limit": limit + 1}).all()
        more = len(rows) > limit
        rows = rows[:limit]
        if not more:
            remaining = 0
        elif after is None:
            remaining = session.scalar(count, params) - limit
        elif remaining is not None:
            remaining = remaining - limit if remaining > limit else None  # the list changed: not known
        return Page(items=[_stored(session, r) for r in rows], more=more, remaining=remaining)
    where = _page_where(namespace is not None, after is not None)
    keys = session.execute(
        select(RESOURCES.c.id, RESOURCES.c.namespace, RESOURCES.c.name, RESOURCES.c.labels)
        .where(*where).order_by(RESOURCES.c.namespace, RESOURCES.c.name).execution_options(yield_per=1000), params,
    )
    ids: list[int] = []
    for key in keys:
        if keep(key.namespace, key.name, key.labels or {}):
            ids.append(key.id)
            if len(ids) > limit:
                break
    keys.close()
    rows = session.execute(select(*_PAGE_COLUMNS).where(ResourceRow.id.in_(ids[:limit]))
                           .order_by(ResourceRow.namespace, ResourceRow.name)).all() if ids else []
    return Page(items=[_stored(session, r) for r in rows], more=len(ids) > limit, remaining=None)


def _page_where(namespaced: bool, after: bool) -> list:
    """The WHERE of a list's rows of one kind (``group``, ``plural`` bind parameters), in one
    ``namespace`` or all, after the key (``after_ns``, ``after_name``) when ``after``."""
    where = [RESOURCES.c.group == bindparam("group"), RESOURCES.c.plural == bindparam("plural")]
    if namespaced:
        where.append(RESOURCES.c.namespace == bindparam("namespace"))
        if after:  # a plain range on the unique index: no sort, no scan of the rest
            where.append(RESOURCES.c.name > bindparam("after_name"))
    elif after:
        where.append(tuple_(RESOURCES.c.namespace, RESOURCES.c.name)
                     > tuple_(bindparam("after_ns", type_=String), bindparam("after_name", type_=String)))
    return where


@cache
def _page_statements(namespaced: bool, after: bool):
    """(SELECT of a page's ``_PAGE_COLUMNS`` in key order, at most ``limit``; SELECT of the count of
    the rows from the page's start, run on first pages only), for each shape of list, built once in Core: a list page ran
    two ORM statements it built anew, whose building and row loading cost a list more CPU than
    receiving its megabyte."""
    where = _page_where(namespaced, after)
    page = (select(*(RESOURCES.c[column.key] for column in _PAGE_COLUMNS)).where(*where)
            .order_by(RESOURCES.c.namespace, RESOURCES.c.name).limit(bindparam("limit")))
    return page, select(func.count()).select_from(RESOURCES).where(*where)


@cache
def _stored_by_key():
    """SELECT of one row's ``_PAGE_COLUMNS`` by its key, the key's parts bind parameters (built
    once, in Core: building the statement and its ORM compile state cost more than running it)."""
    return select(*(RESOURCES.c[column.key] for column in _PAGE_COLUMNS)).where(
        *(RESOURCES.c[part] == bindparam(part) for part in ResourceKey.model_fields))


def get_stored(session: Reader, key: ResourceKey) -> StoredObject | None:
    """The stored object of ``key`` as its JSON text (None when absent)."""
    row = session.execute(_stored_by_key(), key.model_dump()).one_or_none()
    return _stored(session, row) if row else None


def delete_resource(session: Session, key: ResourceKey) -> Resource:
    """Delete a resource and return what it was (with the version of its deletion); ``NotFound``
    if absent."""
    version = events.next_version(session)
    row = session.scalars(_select_key(key)).one_or_none()
    if row is None:
        raise NotFound(f'{key.plural} "{key.name}" not found')
    gone = _to_domain(row).model_copy(update={"resource_version": version})
    session.execute(delete(ResourceRow).where(ResourceRow.id == row.id))
    _record(session, "DELETED", gone)
    return gone


def _record(session: Session, kind: events.EventType, resource: Resource) -> None:
    """Record the change for watches."""
    obj = to_object(resource)
    events.record(session, kind, obj, group=resource.group, plural=resource.plural, at=resource.updated_at)


def _change(kind: events.EventType, resource: Resource, obj: dict[str, Any], prior_labels: dict | None = None):
    return events.change_row(kind, obj, group=resource.group, plural=resource.plural, prior_labels=prior_labels,
                             at=resource.updated_at)


def _row_params(columns: dict[str, Any]) -> dict[str, Any]:
    return {f"row_{name}": value for name, value in columns.items()}


@cache
def _insert_row(columns: tuple[str, ...]) -> Callable:
    """The INSERT of a resource's row with ``columns`` (bind parameters ``row_<column>``)."""

    def insert_row(version, object_json):
        return insert(RESOURCES).from_select(
            [*columns, "resource_version", "object_json"],
            select(*(bindparam(f"row_{name}", type_=RESOURCES.c[name].type) for name in columns), version, object_json),
        ).returning(RESOURCES.c.id)

    return insert_row


@cache
def _update_row(columns: tuple[str, ...]) -> Callable:
    """The UPDATE of ``columns`` of the row ``row_id`` if still at version ``row_seen``."""

    def update_row(version, object_json):
        return (update(RESOURCES)
                .where(RESOURCES.c.id == bindparam("row_id"), RESOURCES.c.resource_version == bindparam("row_seen"))
                .values(**{name: bindparam(f"row_{name}", type_=RESOURCES.c[name].type) for name in columns},
                        resource_version=version, object_json=object_json)
                .returning(RESOURCES.c.id))

    return update_row


def _write(session: Session, key: ResourceKey | None, uid: str | None, expected_version: int | None, **changes) -> Resource:
    """Conditional update of one row, by key or uid: ``changes`` are ``Resource`` fields (spec,
    labels, annotations, managed_fields, status); returns the new state. The row is read before
    the version is taken (the version counter is held only by the write itself); a write without
    ``expected_version`` that loses a race with another writer reads the row again."""
    query = _select_key(key) if key is not None else select(ResourceRow).where(ResourceRow.uid == uid)
    for _attempt in range(UNCONDITIONAL_TRIES):
        row = session.scalars(query.execution_options(populate_existing=True)).one_or_none()
        if row is None:
            raise NotFound(f'{key.plural if key else "resource"} "{key.name if key else uid}" not found')
        if expected_version is not None and row.resource_version != expected_version:
            raise Conflict(
                f'the object "{row.name}" has been modified; please apply your changes to the latest version and try again'
            )
        current = _to_domain(row)
        fields = {**changes, "resource_version": 0, "updated_at": _now()}  # the version: taken with the write
        if "spec" in changes and changes["spec"] != current.spec:
            fields["generation"] = current.generation + 1
        updated = current.model_copy(update=fields)
        obj = to_object(updated)
        values = {name: value for name, value in fields.items() if name != "resource_version"}
        if "managed_fields" in changes:
            values["managed_fields"] = _stored_entries(changes["managed_fields"])

        params = {**_row_params(values), "row_id": row.id, "row_seen": current.resource_version}
        version = events.write_versioned(session, _update_row(tuple(values)), params, _json_text(obj),
                                         _change("MODIFIED", updated, obj, dict(current.labels)))
        session.expire(row)
        if version is not None:
            return updated.model_copy(update={"resource_version": version})
        if expected_version is not None:
            break
    raise Conflict(f'the object "{row.name}" has been modified concurrently; try again')


def update_spec(
    session: Session,
    key: ResourceKey,
    spec: dict[str, Any],
    *,
    labels: dict[str, str] | None = None,
    annotations: dict[str, str] | None = None,
    managed_fields: tuple[ManagedFieldsEntry, ...] | None = None,
    expected_version: int | None = None,
) -> Resource:
    """Replace the spec (and, when given, labels, annotations and managed fields); bumps generation
    if the spec changed."""
    changes: dict[str, Any] = {"spec": spec}
    if labels is not None:
        changes["labels"] = labels
    if annotations is not None:
        changes["annotations"] = annotations
    if managed_fields is not None:
        changes["managed_fields"] = managed_fields
    return _write(session, key, None, expected_version, **changes)


def update_status(
    session: Session,
    status: dict[str, Any],
    *,
    key: ResourceKey | None = None,
    uid: str | None = None,
    expected_version: int | None = None,
) -> Resource:
    """Replace the status of the resource named by ``key`` or ``uid``."""
    if (key is None) == (uid is None):
        raise ValueError("give exactly one of key or uid")
    return _write(session, key, uid, expected_version, status=status)


def count_by_state(session: Session) -> dict[tuple[str, str], int]:
    """How many resources are stored of each (kind, ``status.state``) ("" when unset)."""
    rows = session.execute(select(ResourceRow.kind, ResourceRow.status)).all()
    return dict(Counter((kind, (status or {}).get("state") or "") for kind, status in rows))


def to_object(resource: Resource, version: str | None = None) -> dict[str, Any]:
    """The resource as a Kubernetes object (apiVersion, kind, metadata, spec, status).

    ``apiVersion`` names the version it was stored with unless ``version`` is given; the body
    keeps the stored shape (converting it is the API's business).
    """
    metadata: dict[str, Any] = {
        "name": resource.name,
        "namespace": resource.namespace,
        "uid": resource.uid,
        "generation": resource.generation,
        "resourceVersion": str(resource.resource_version),
        "creationTimestamp": resource.created_at.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
    }
    if resource.labels:
        metadata["labels"] = dict(resource.labels)
    if resource.annotations:
        metadata["annotations"] = dict(resource.annotations)
    if resource.managed_fields:
        metadata["managedFields"] = _stored_entries(resource.managed_fields)
    body: dict[str, Any] = {
        "apiVersion": f"{resource.group}/{version or resource.version}",
        "kind": resource.kind,
        "metadata": metadata,
        "spec": resource.spec,
    }
    if resource.status:
        body["status"] = resource.status
    return body
