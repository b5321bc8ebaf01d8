"""A task holds the lease on its request while it runs (``infra.leases``), renewed by a heartbeat
thread every third of the lease; if the worker dies, the lease runs out and a dispatcher queues
the request again (``workers.dispatcher``)."""

from __future__ import annotations

import logging
import os
import socket
import threading
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from infra import leases
from infra.db import SessionFactory, session_scope, statement_sessions

log = logging.getLogger(__name__)

Clock = Callable[[], datetime]


def _utcnow() -> datetime:
    return datetime.now(UTC)


@dataclass
class Lease:
    """The lease a running task holds. ``next_due``: when the request's task is due again once this
    run ends (None: not again), set by the task before it returns."""

    owner: str
    next_due: datetime | None = None


def owner_name() -> str:
    """A name unique to one run of a task: host, process id and a random suffix."""
    return f"{socket.gethostname()}/{os.getpid()}/{uuid.uuid4().hex[:8]}"


@contextmanager
def leased(sessions: SessionFactory, uid: str, ttl: timedelta, *, owner: str | None = None,
           clock: Clock = _utcnow) -> Iterator[Lease | None]:
    """Hold ``uid``'s lease for the block (as ``owner``, default a new ``owner_name()``), renewing
    it every ``ttl / 3``; yields None when another worker holds a live lease (the caller does
    nothing). A block that raises leaves the request due again one ``ttl`` later; one interrupted
    because its process is stopping (``SystemExit``, ``KeyboardInterrupt``) leaves it due at once,
    for another worker to resume."""
    owner = owner or owner_name()
    sessions = statement_sessions(sessions)  # each lease write one statement: no row lock held across round trips
    with session_scope(sessions) as session:
        if not leases.take(session, uid, owner, clock(), ttl):
            yield None
            return
    lease, stop = Lease(owner), threading.Event()
    beat = threading.Thread(target=_beat, args=(sessions, uid, owner, ttl, stop, clock),
                            name=f"lease-{uid[:8]}", daemon=True)
    beat.start()
    try:
        yield lease
    except (SystemExit, KeyboardInterrupt):
        lease.next_due = clock()
        raise
    except BaseException:
        lease.next_due = clock() + ttl
        raise
    finally:
        stop.set()
        beat.join()
        try:
            with session_scope(sessions) as session:
                leases.release(session, uid, owner, lease.next_due)
        except Exception:  # the database is away: the lease runs out and the dispatcher takes over
            log.warning("could not release the lease on %s; it expires in %.0f s", uid, ttl.total_seconds(),
                        exc_info=True)


def _beat(sessions: SessionFactory, uid: str, owner: str, ttl: timedelta, stop: threading.Event, clock: Clock) -> None:
    while not stop.wait(ttl.total_seconds() / 3):
        try:
            with session_scope(sessions) as session:
                kept = leases.renew(session, uid, owner, clock(), ttl)
        except Exception:  # the database is away for a moment: try again at the next beat
            log.warning("could not renew the lease on %s", uid, exc_info=True)
            continue
        if not kept:
            log.warning("lost the lease on %s (renewed too late); another worker may take it over", uid)
            return
