"""Resource versions and the history of changes that watches read.

Every write of a resource first takes the next value of one counter (``next_version``): the
UPDATE locks the counter's row until the writing transaction ends, so versions are handed
out in commit order, one sequence for the whole table, whichever process writes. Each write
also records a change (``record``) with the object as it became. A reader that first takes
the counter's committed value (``latest_version``) and then reads the changes up to it
therefore never misses one that commits later with a smaller version.

The history is bounded: ``compact`` drops old changes and remembers the highest version
dropped, so a watch resuming from before it is told its version has expired.
"""

from __future__ import annotations

from datetime import datetime
from functools import cache
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict
from sqlalchemy import delete, func, insert, select, update
from sqlalchemy.orm import Session

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


def _counter(session: Session, name: str) -> int | None:
    return session.scalar(select(CounterRow.value).where(CounterRow.name == name))


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


def latest_version(session: Session) -> int:
    """The last resource version committed (0 before any write)."""
    return _counter(session, VERSION) or 0


def compacted_through(session: Session) -> int:
    """Changes up to this version were pruned from the history (0: none)."""
    return _counter(session, COMPACTED) or 0


def record(
    session: Session,
    kind: EventType,
    obj: dict[str, Any],
    *,
    group: str,
    plural: str,
    prior_labels: dict[str, str] | None = None,
    at: datetime,
) -> None:
    """Remember that ``obj`` (a Kubernetes object with its new resourceVersion) changed."""
    meta = obj["metadata"]
    row = {
        "version": int(meta["resourceVersion"]),
        "type": kind,
        "group": group,
        "plural": plural,
        "namespace": meta["namespace"],
        "labels": meta.get("labels") or {},
        "prior_labels": prior_labels,
        "object": obj,
        "created_at": at,
    }
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
