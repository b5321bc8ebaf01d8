"""Resource versions and the history of changes that watches read.

Every write of a resource takes the next value of one counter: the UPDATE locks the counter's
row until the writing transaction ends, so versions are handed out in commit order, one sequence
for the whole table, whichever process writes. Each write also records a change with the object
as it became. A reader that first takes the counter's committed value (``latest_version``) and
then reads the changes up to it therefore never misses one that commits later with a smaller
version.

The lock serialises every writer, so it is held as briefly as the database allows
(``write_versioned``): on PostgreSQL one statement takes the version, writes the row and records
the change, and the commit follows; the writing process does none of its own work (building the
object, its JSON) while it holds the counter. A writer held there by its process (a thread waiting
for the interpreter's lock, a niced worker off the CPU) would stall every other writer.

The history is bounded: ``compact`` drops old changes and remembers the highest version
dropped, so a watch resuming from before it is told its version has expired.
"""

from __future__ import annotations

from datetime import datetime
from functools import cache
from collections.abc import Callable
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict
from sqlalchemy import JSON, BigInteger, Text, bindparam, cast, delete, exists, func, insert, select, type_coerce, update
from sqlalchemy.orm import Session

from infra.db import Reader
from infra.tables import CounterRow, ResourceEventRow, ResourceRow

EventType = Literal["ADDED", "MODIFIED", "DELETED"]
VERSION = "resource_version"
COMPACTED = "events_compacted"


class Change(BaseModel):
    """One recorded change of a resource: the version it produced and the object then."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    version: int
    type: EventType
    namespace: str
    labels: dict[str, str]
    prior_labels: dict[str, str] | None
    object: dict[str, Any]


@cache
def _read_counter():
    """SELECT of a counter's value by its name (built once, in Core)."""
    counters = CounterRow.__table__
    return select(counters.c.value).where(counters.c.name == bindparam("name"))


def _counter(session: Reader, name: str) -> int | None:
    return session.scalar(_read_counter(), {"name": name})


@cache
def _bump():
    """UPDATE … RETURNING of the version counter (built once: statement building costs more than running it)."""
    counters = CounterRow.__table__  # Core, not ORM: no session synchronisation to pay for
    return update(counters).where(counters.c.name == VERSION).values(value=counters.c.value + 1).returning(counters.c.value)


def next_version(session: Session) -> int:
    """Take the next resource version (locks the counter until this transaction ends)."""
    version = session.scalar(_bump())
    if version is None:  # a database created without the migration's counter row
        version = int(session.scalar(select(func.coalesce(func.max(ResourceRow.resource_version), 0)))) + 1
        session.execute(insert(CounterRow).values(name=VERSION, value=version))
    return int(version)


# How an object's JSON text (``infra.resources.to_object``, compact) names a version not yet taken:
# the first "resourceVersion" in it, in metadata after name, namespace, uid and generation, none
# of which can hold a quote.
UNVERSIONED = '"resourceVersion":"0"'


def write_versioned(session: Session, write: Callable[[Any, Any], Any], params: dict[str, Any], text: str,
                    change: dict[str, Any]) -> int | None:
    """Take the next resource version for one write of a resource and record its change.

    ``write(version, object_json)``: the INSERT or UPDATE of the resource's row, returning its
    id, built from the SQL expressions of its new version and its object's JSON text, its values
    bind parameters (given in ``params``); ``write`` is a cached function, so the statements
    around it are built once. ``text``: the object's JSON with ``UNVERSIONED`` where the version
    goes; ``change``: the change's row less its version and object. Returns the version; None
    when the write changed no row (the caller rolls back, which returns the version).
    """
    head, found, tail = text.partition(UNVERSIONED)
    if not found:
        raise ValueError("the object's text holds no unversioned resourceVersion")
    values = {**params, **{f"change_{name}": value for name, value in change.items()}}
    if session.get_bind().dialect.name == "postgresql":
        statement = _one_statement(write, tuple(change))
        return session.scalar(statement, {**values, "head": f'{head}"resourceVersion":"', "tail": f'"{tail}'})
    number = next_version(session)  # SQLite: writers take turns on the file; no client round trips
    values.update(taken_version=number, taken_object=f'{head}"resourceVersion":"{number}"{tail}')
    row, recorded = _statements_in_turn(write, tuple(change))
    if session.execute(row, values).first() is None:
        return None
    session.execute(recorded, values)
    return number


@cache
def _one_statement(write: Callable[[Any, Any], Any], change_columns: tuple[str, ...]):
    """PostgreSQL: bump the counter, write the row, record the change, in one statement."""
    events = ResourceEventRow.__table__
    version = select(_bump().cte("bumped").c.value).scalar_subquery()
    object_json = bindparam("head", type_=Text) + cast(version, Text) + bindparam("tail", type_=Text)
    written = write(version, object_json).cte("written")
    return insert(events).from_select(
        [*change_columns, "version", "object"],
        select(*_change_values(change_columns), version, cast(object_json, JSON)).where(exists(select(written.c.id))),
    ).returning(events.c.version)


@cache
def _statements_in_turn(write: Callable[[Any, Any], Any], change_columns: tuple[str, ...]):
    """Elsewhere: the row's write and the change's record, given the version taken before them."""
    version, object_json = bindparam("taken_version", type_=BigInteger), bindparam("taken_object", type_=Text)
    recorded = insert(ResourceEventRow.__table__).from_select(
        [*change_columns, "version", "object"],
        select(*_change_values(change_columns), version, type_coerce(func.json(object_json), JSON)),
    )
    return write(version, object_json), recorded


def _change_values(columns: tuple[str, ...]):
    events = ResourceEventRow.__table__
    return [bindparam(f"change_{name}", type_=events.c[name].type) for name in columns]


def latest_version(session: Reader) -> int:
    """The last resource version committed (0 before any write)."""
    return _counter(session, VERSION) or 0


def compacted_through(session: Reader) -> int:
    """Changes up to this version were pruned from the history (0: none)."""
    return _counter(session, COMPACTED) or 0


def change_row(
    kind: EventType,
    obj: dict[str, Any],
    *,
    group: str,
    plural: str,
    prior_labels: dict[str, str] | None = None,
    at: datetime,
) -> dict[str, Any]:
    """The row recording that ``obj`` (a Kubernetes object) changed, less its version and object."""
    meta = obj["metadata"]
    return {
        "type": kind,
        "group": group,
        "plural": plural,
        "namespace": meta["namespace"],
        "labels": meta.get("labels") or {},
        "prior_labels": prior_labels,
        "created_at": at,
    }


def record(session: Session, kind: EventType, obj: dict[str, Any], **where: Any) -> None:
    """Remember that ``obj`` (a Kubernetes object with its new resourceVersion) changed; ``where``:
    ``change_row``'s group, plural, prior_labels and at."""
    row = {**change_row(kind, obj, **where), "version": int(obj["metadata"]["resourceVersion"]), "object": obj}
    session.execute(insert(ResourceEventRow.__table__), row)


def changes(session: Session, group: str, plural: str, namespace: str | None, *, after: int, upto: int, limit: int = 500):
    """Changes of one kind (in one namespace or all) with ``after < version <= upto``, oldest first."""
    query = select(ResourceEventRow).where(
        ResourceEventRow.group == group,
        ResourceEventRow.plural == plural,
        ResourceEventRow.version > after,
        ResourceEventRow.version <= upto,
    )
    if namespace is not None:
        query = query.where(ResourceEventRow.namespace == namespace)
    rows = session.scalars(query.order_by(ResourceEventRow.version).limit(limit)).all()
    return [
        Change(
            version=r.version, type=r.type, namespace=r.namespace, labels=dict(r.labels or {}),
            prior_labels=None if r.prior_labels is None else dict(r.prior_labels), object=dict(r.object),
        )
        for r in rows
    ]


def compact(session: Session, older_than: datetime) -> int:
    """Drop the changes recorded before ``older_than``; returns how many were dropped."""
    cut = session.scalar(select(func.max(ResourceEventRow.version)).where(ResourceEventRow.created_at < older_than))
    if cut is None:
        return 0
    dropped = session.execute(delete(ResourceEventRow).where(ResourceEventRow.version <= cut)).rowcount
    moved = session.execute(update(CounterRow).where(CounterRow.name == COMPACTED).values(value=cut))
    if moved.rowcount != 1:
        session.execute(insert(CounterRow).values(name=COMPACTED, value=cut))
    return dropped
