"""Receipts: a ``slaplan worker`` holds each request whose message Redis hands it, from delivery
until the request's task takes the lease (``infra.leases``).

Redis gives a dead worker's unacknowledged messages to another only after its visibility
timeout (an hour by default), and the outbox publishes an untaken request again only after
``workers.dispatcher.REPUBLISH_AFTER``. A worker killed after delivery and before its task took
the lease (a message waiting for its turn in the worker, an ETA retry, or the milliseconds
before any task starts) would leave the request waiting that long. Instead, on delivery, before
anything else, the worker takes a receipt on the request (a lease owned by ``RECEIPT`` and this
worker), renewed every third of the lease until the task takes the lease over. A dead worker's
receipts run out like its leases, and a dispatcher queues their requests again.

A receipt is noted only for the tasks that take a lease (``LEASED``). The worker starts a new
receipt owner whenever its consumer (re)connects: Celery drops the messages it held but had not
started, so receipts taken for them are left to run out. Stopping, it hands its receipts back.
"""

from __future__ import annotations

import logging
import threading
from datetime import UTC, datetime, timedelta

from infra import leases
from infra.db import SessionFactory, session_scope, statement_sessions
from workers.heartbeat import Clock, owner_name
from workers.tasks import BENCH_TASK, ONLINE_TASK, PLAN_TASK

log = logging.getLogger(__name__)

LEASED = frozenset({PLAN_TASK, ONLINE_TASK, BENCH_TASK})  # the tasks that take their request's lease


def _utcnow() -> datetime:
    return datetime.now(UTC)


class Receipts:
    """One worker's receipts: ``received`` on each delivered message (Celery's ``task_received``,
    in the consumer), ``reconnected`` when its consumer is ready, ``stop`` at shutdown. ``ttl``:
    how long a receipt lasts unless renewed."""

    def __init__(self, sessions: SessionFactory, ttl: timedelta, *, clock: Clock = _utcnow):
        self.sessions = statement_sessions(sessions)  # each write one statement (``infra.db.statement_sessions``)
        self.ttl = ttl
        self.clock = clock
        self.owner = leases.RECEIPT + owner_name()
        self._held: set[str] = set()  # the receipts this owner may still hold
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        self._thread = threading.Thread(target=self._beat, name="slaplan-receipts", daemon=True)
        self._thread.start()

    def received(self, request: object = None, **_: object) -> None:
        """Take a receipt on the request of a delivered task message (a Celery ``Request``)."""
        if getattr(request, "task_name", None) not in LEASED or not request.args:
            return
        uid = str(request.args[0])
        with self._lock:
            owner = self.owner
        try:
            with session_scope(self.sessions) as session:
                taken = leases.take(session, uid, owner, self.clock(), self.ttl)
        except Exception:  # the database is away: the request is back only when its republish is due
            log.warning("could not note the delivery of %s", uid, exc_info=True)
            return
        with self._lock:
            if taken and self.owner == owner:
                self._held.add(uid)

    def reconnected(self, **_: object) -> None:
        """Start a new owner: the receipts of the messages dropped with the last connection run out."""
        with self._lock:
            self.owner, self._held = leases.RECEIPT + owner_name(), set()

    def stop(self, timeout_s: float = 5.0) -> None:
        """Stop renewing and hand every receipt back, its request due now."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout_s)
        with self._lock:
            owner, held = self.owner, sorted(self._held)
        try:
            with session_scope(self.sessions) as session:
                leases.release_held(session, held, owner, self.clock())
        except Exception:  # the database is away: the receipts run out
            log.warning("could not hand back %d receipt(s)", len(held), exc_info=True)

    def renew(self) -> None:
        """Renew the receipts still held (each third of ``ttl``, from the thread ``start`` runs)."""
        with self._lock:
            owner, held = self.owner, sorted(self._held)
        if not held:
            return
        try:
            with session_scope(self.sessions) as session:
                kept = leases.renew_held(session, held, owner, self.clock(), self.ttl)
        except Exception:  # the database is away for a moment: try again at the next beat
            log.warning("could not renew %d receipt(s)", len(held), exc_info=True)
            return
        with self._lock:
            if self.owner == owner:
                self._held -= set(held) - kept  # taken over by their tasks, or run out

    def _beat(self) -> None:
        while not self._stop.wait(self.ttl.total_seconds() / 3):
            self.renew()
