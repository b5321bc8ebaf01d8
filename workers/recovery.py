"""Nothing is lost: find requests left unfinished (by a lost task, a dead worker or a broker
restart) and enqueue them again. Tasks are idempotent, so a duplicate costs only time."""

from __future__ import annotations

import logging
from collections.abc import Callable
from datetime import UTC, datetime, timedelta

from sqlalchemy import select

from infra.db import SessionFactory, session_scope
from infra.tables import ResourceRow
from workers import lifecycle
from workers.tasks import BENCH_TASK, PLAN_TASK

log = logging.getLogger(__name__)

# (group, plural) -> (task, queue, states that still need a worker)
WORK = {
    ("nvidia.com", "dynamographdeploymentrequests"): (PLAN_TASK, "plan", lifecycle.DGDR_UNFINISHED - {"Deploying"}),
    ("ome.io", "benchmarkjobs"): (BENCH_TASK, "bench", lifecycle.BENCH_UNFINISHED),
}


def unfinished(sessions: SessionFactory, *, idle_for: timedelta = timedelta(0), now: datetime | None = None):
    """(task, queue, uid) of every request still waiting for a worker and unchanged for ``idle_for``."""
    cutoff = (now or datetime.now(UTC)) - idle_for
    found = []
    with session_scope(sessions) as session:
        for (group, plural), (task, queue, states) in WORK.items():
            rows = session.execute(
                select(ResourceRow.uid, ResourceRow.status, ResourceRow.updated_at).where(
                    ResourceRow.group == group, ResourceRow.plural == plural
                )
            ).all()
            for uid, status, updated in rows:
                updated = updated if updated.tzinfo else updated.replace(tzinfo=UTC)
                if ((status or {}).get("state") or "") in states and updated <= cutoff:
                    found.append((task, queue, uid))
    return found


def requeue_unfinished(
    sessions: SessionFactory,
    send: Callable[[str, str, str], None],
    *,
    idle_for: timedelta = timedelta(0),
) -> int:
    """Enqueue every unfinished request again with ``send(task, uid, queue)``; returns how many."""
    count = 0
    for task, queue, uid in unfinished(sessions, idle_for=idle_for):
        try:
            send(task, uid, queue)
            count += 1
        except Exception:
            log.warning("could not re-enqueue %s; will retry at the next sweep", uid, exc_info=True)
    return count
