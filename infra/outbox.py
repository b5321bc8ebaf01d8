"""The outbox: the stored request is the message.

A request that needs a worker carries ``publish_due_at``, the time a dispatcher should publish its
task (``workers.dispatcher``). The API sets it to now in the transaction that stores the request,
so a create never waits on the broker. A dispatcher takes due rows for a short claim (moving
them to ``now + claim``, so that no other dispatcher publishes them too, and so that the rows
of a dispatcher killed before it published them are due again once the claim runs out),
publishes, then settles each row it still holds: a published one due again ``republish_after``
later (a message that is lost is published again), one it could not publish due now. A worker
taking the request (``infra.leases``) clears the time; finished work leaves it cleared, work
with a next step (a deployment to check again) sets it to that step's time.

A published request also carries ``published_at`` until a worker takes it (or a dispatcher claims
it again). One still untaken a while after its publish whose message is in no queue was handed
to a worker that never noted it (Redis pops a message into the socket of a frozen or lost worker,
where nobody reads it): ``undelivered`` finds such requests, ``make_due`` publishes them again.

Nothing here bumps a resource version or records a watch event: the outbox is bookkeeping, not
part of the object.
"""

from __future__ import annotations

import hashlib
from datetime import datetime, timedelta
from functools import cache
from typing import Any, NamedTuple

from sqlalchemy import bindparam, select, update
from sqlalchemy.orm import Session

from infra.tables import CounterRow, ResourceRow

RESOURCES = ResourceRow.__table__
BROKER_COUNTER = "broker_identity"  # a hash of the broker process the dispatchers saw last (0: none yet)


class Due(NamedTuple):
    """A request whose task is due to be published."""

    uid: str
    group: str
    plural: str
    spec: dict[str, Any]
    status: dict[str, Any]


def mark_due(session: Session, uid: str, at: datetime) -> None:
    """Make ``uid``'s task due at ``at`` (in the caller's transaction)."""
    session.execute(update(ResourceRow).where(ResourceRow.uid == uid).values(publish_due_at=at)
                    .execution_options(synchronize_session=False))


@cache
def _due_ids():
    """SELECT of the ids due at ``now``, oldest first, at most ``limit`` (built once, in Core: a
    dispatcher runs it every round, and building an ORM statement cost more than running it)."""
    return (select(RESOURCES.c.id).where(RESOURCES.c.publish_due_at <= bindparam("now"))
            .order_by(RESOURCES.c.publish_due_at).limit(bindparam("limit")))


@cache
def _claim():
    """UPDATE claiming the rows ``ids`` still due at ``now`` until ``until``, returning what routes them."""
    return (update(RESOURCES)
            .where(RESOURCES.c.id.in_(bindparam("ids", expanding=True)), RESOURCES.c.publish_due_at <= bindparam("now"))
            .values(publish_due_at=bindparam("until"), published_at=None)
            .returning(RESOURCES.c.uid, RESOURCES.c.group, RESOURCES.c.plural, RESOURCES.c.spec, RESOURCES.c.status))


@cache
def _settle_claim():
    """UPDATE of the next publish time of those rows ``uids`` still under the claim ``claimed``."""
    return (update(RESOURCES)
            .where(RESOURCES.c.uid.in_(bindparam("uids", expanding=True)),
                   RESOURCES.c.publish_due_at == bindparam("claimed"))
            .values(publish_due_at=bindparam("at"), published_at=bindparam("published")))


def take_due(session: Session, now: datetime, *, limit: int, claim: timedelta) -> list[Due]:
    """Up to ``limit`` requests due at ``now``, oldest first, each claimed: due again at
    ``now + claim`` (so a concurrent dispatcher skips them until then). The caller commits, publishes
    them, then settles them (``settle_claimed``). Nothing due: one read, no write."""
    ids = session.scalars(_due_ids(), {"now": now, "limit": limit}).all()
    if not ids:
        return []
    rows = session.execute(_claim(), {"ids": list(ids), "now": now, "until": now + claim}).all()
    return [Due(uid, group, plural, dict(spec or {}), dict(status or {})) for uid, group, plural, spec, status in rows]


def settle(session: Session, uids: list[str], at: datetime | None) -> None:
    """Set the next publish time of ``uids`` (None: nothing more to publish); their task ran."""
    if uids:
        session.execute(update(ResourceRow).where(ResourceRow.uid.in_(uids)).values(publish_due_at=at, published_at=None)
                        .execution_options(synchronize_session=False))


def settle_claimed(session: Session, uids: list[str], claimed_until: datetime, at: datetime | None,
                   published_at: datetime | None = None) -> None:
    """Set the next publish time of those of ``uids`` still under the claim that made them due at
    ``claimed_until`` (``take_due``), and when they were published (None: they were not). The
    others are left alone: a worker took the request (its lease cleared the time), a lease ran
    out or the broker changed (due now), or another dispatcher claimed it after this claim ran out."""
    if uids:
        session.execute(_settle_claim(), {"uids": uids, "claimed": claimed_until, "at": at, "published": published_at})


def undelivered(session: Session, now: datetime, published_before: datetime, *, limit: int) -> list[str]:
    """Up to ``limit`` requests published before ``published_before`` that no worker has taken
    and that wait for a later publish (the uids)."""
    return list(session.scalars(
        select(ResourceRow.uid).where(ResourceRow.published_at < published_before, ResourceRow.lease_owner.is_(None),
                                      ResourceRow.publish_due_at > now)
        .order_by(ResourceRow.published_at).limit(limit)
    ).all())


def make_due(session: Session, uids: list[str], now: datetime, published_before: datetime) -> int:
    """Make those of ``uids`` due now that are still published before ``published_before`` and
    untaken (``undelivered``); how many."""
    if not uids:
        return 0
    return session.execute(
        update(ResourceRow).where(ResourceRow.uid.in_(uids), ResourceRow.published_at < published_before,
                                  ResourceRow.lease_owner.is_(None))
        .values(publish_due_at=now, published_at=None).execution_options(synchronize_session=False)
    ).rowcount


def republish_waiting(session: Session, now: datetime) -> int:
    """Make every request that waits for a publish (or a republish) and that no worker holds due
    now: after a broker restart its queued messages may be gone. Returns how many."""
    return session.execute(
        update(ResourceRow).where(ResourceRow.publish_due_at > now, ResourceRow.lease_owner.is_(None))
        .values(publish_due_at=now).execution_options(synchronize_session=False)
    ).rowcount


def broker_changed(session: Session, identity: str) -> bool:
    """Note that the broker answering is ``identity`` (e.g. a Redis run id); True when it differs
    from the one any dispatcher noted last (a restarted broker, whose queues may be empty). Only
    one of several dispatchers noting the same change gets True."""
    value = int.from_bytes(hashlib.sha256(identity.encode()).digest()[:8], "big") >> 2  # > 0, < 2^63
    if session.scalar(select(CounterRow.value).where(CounterRow.name == BROKER_COUNTER)) == value:
        return False  # the usual round: a read, no write (on SQLite: no wait for the one writer)
    return session.execute(
        update(CounterRow).where(CounterRow.name == BROKER_COUNTER, CounterRow.value != value)
        .values(value=value).execution_options(synchronize_session=False)
    ).rowcount == 1
