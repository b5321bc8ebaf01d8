"""The dispatcher: publishes the tasks the outbox says are due (``infra.outbox``), off every
request's path. ``slaplan serve`` and every ``slaplan worker`` run one; they share the work
through the database (a due request is taken by one dispatcher) and any of them alone suffices.

Each round (every ``DISPATCH_EVERY_S``, or when woken by a create, ``COALESCE_S`` after the
previous round began at the earliest, so that a burst of creates is published by a few rounds
rather than one round each) publishes what is due; the upkeep (steps 1–3) runs in at most one
round every ``DISPATCH_EVERY_S``, so the rounds a stream of creates wakes cost their publishes only:
1. expire leases that were not renewed (their workers are gone): those requests are due now;
2. look at the broker with a short timeout. When it is down, publish nothing (requests stay due)
   and say so (``broker_problem``, which readiness reports) until a later look finds it up. When
   it is a different broker process than the dispatchers saw last (a Redis restart, whose queues
   may be empty; a new ``slaplan serve`` with its in-process queue), every request waiting for a
   worker is made due now, by the one dispatcher that notices first;
3. every ``LOST_CHECK_EVERY``: a request published over ``DELIVERY_GRACE`` ago that no worker
   holds (a worker holds each delivered message from delivery, ``workers.receipts``) and whose
   message is in no queue (``queued_uids``; Redis only) was handed to a worker that never read it
   (Redis pops the next message into the socket of a frozen or lost worker): it is due now;
4. take what is due (a claim of ``CLAIM_FOR``), publish it in one batch (``publish``: one
   connection, one pipeline on Redis), routed by kind and state (``route``), and settle it:
   published, due again ``REPUBLISH_AFTER`` later unless a worker took it meanwhile; not
   published (the broker failed), due now.
On PostgreSQL each of these statements commits by itself (``infra.db.statement_sessions``): each
stands alone (a claim or a settle re-checks its rows), so a round holds no transaction open.
A request's task is published again if no worker took it ``REPUBLISH_AFTER`` after it was
published: the last resort for a message lost some other way. Tasks are idempotent and leased,
so a duplicate costs one database read.

A dispatcher killed between its claim and its settle (SIGKILL, a lost machine: the requests
are stored, their messages may never have reached the broker) leaves them due again when the
claim runs out. Any other dispatcher's next round publishes them: back in the queue at most
``CLAIM_FOR + DISPATCH_EVERY_S + PROBE_TIMEOUT_S`` (12 s) after the claim, then taken by the
next free worker. A live round outlasting its claim (over ``CLAIM_FOR`` to publish one batch:
every publish has a 2 s broker timeout and the first failure ends the batch) costs a duplicate.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

from infra import leases, outbox
from infra.db import SessionFactory, session_scope, statement_sessions
from planner import status as dgdr_states
from workers import lifecycle
from workers.celery_app import broker_identity, publish, queued_uids, reads_queues
from workers.deploy import TRACK_TASK, TRACKED_STATES
from workers.tasks import BENCH_TASK, ONLINE_TASK, PLAN_TASK

log = logging.getLogger(__name__)

DISPATCH_EVERY_S = 1.0  # a round at least this often (s)
# Woken rounds begin at least this long after the previous one began (s): a round costs the
# process a few ms of CPU whether it publishes one request or a hundred.
COALESCE_S = 0.05
BATCH = 200  # requests taken per database round trip
LOST_LIMIT = 20_000  # the most published, untaken requests one look for lost messages considers
REPUBLISH_AFTER = timedelta(minutes=10)  # a published task no worker took is published again
# How long a round holds what it took before publishing it; what a killed dispatcher took is due again
# after this. Longer than a live round takes to publish a batch (a broker timing out: about 4 s).
CLAIM_FOR = timedelta(seconds=10)
PROBE_TIMEOUT_S = 1.0  # the longest a round waits for the broker to answer (s)
# A published message is in a queue or noted by the worker it was handed to within this (the
# worker's note takes milliseconds); an untaken request whose message is in no queue after it
# is published again. Looked for this often: each look reads the queued messages.
DELIVERY_GRACE = timedelta(seconds=10)
LOST_CHECK_EVERY = timedelta(seconds=10)
DGDR = ("nvidia.com", "dynamographdeploymentrequests")
BENCHMARKJOB = ("ome.io", "benchmarkjobs")
NOT_CHECKED = "broker not checked yet"

Clock = Callable[[], datetime]


def _utcnow() -> datetime:
    return datetime.now(UTC)


def route(due: outbox.Due) -> tuple[str, str] | None:
    """(task, queue) for a due request, or None when it has nothing left to do."""
    state = due.status.get("state") or ""
    if (due.group, due.plural) == DGDR:
        if state in TRACKED_STATES and due.status.get("deployment"):
            return TRACK_TASK, "plan"
        if state in dgdr_states.UNFINISHED:
            return (ONLINE_TASK, "bench") if due.spec.get("online") is True else (PLAN_TASK, "plan")
    elif (due.group, due.plural) == BENCHMARKJOB and state in lifecycle.BENCH_UNFINISHED:
        return BENCH_TASK, "bench"
    return None


class Dispatcher:
    """One process's dispatcher: ``start`` runs rounds in a daemon thread, ``wake`` asks for a
    round now (never blocks), ``run_once`` is one round (tests call it with their own clock)."""

    def __init__(self, celery: Any, sessions: SessionFactory, *, clock: Clock = _utcnow):
        self.celery = celery
        self.sessions = statement_sessions(sessions)
        self.clock = clock
        self.broker_problem: str | None = NOT_CHECKED  # what readiness reports; None when it answered
        self._next_upkeep: datetime | None = None
        self._next_lost_check: datetime | None = None
        self._wake = threading.Event()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def wake(self, *_: object) -> None:
        """Ask for a round now (a request was stored). Accepts and ignores the API's (kind, uid)."""
        self._wake.set()

    def start(self) -> None:
        self._thread = threading.Thread(target=self._loop, name="slaplan-dispatcher", daemon=True)
        self._thread.start()

    def stop(self, timeout_s: float = 5.0) -> None:
        self._stop.set()
        self._wake.set()
        if self._thread is not None:
            self._thread.join(timeout_s)

    def _loop(self) -> None:
        while not self._stop.is_set():
            began = time.monotonic()
            self._wake.clear()  # wakes from here on are for the requests this round may miss
            try:
                self.run_once()
            except Exception:  # the database is away for a moment: the next round tries again
                log.warning("dispatch round failed", exc_info=True)
            self._wake.wait(DISPATCH_EVERY_S)
            self._stop.wait(max(0.0, COALESCE_S - (time.monotonic() - began)))  # creates meanwhile join it

    def run_once(self) -> int:
        """One round; returns how many tasks were published."""
        now = self.clock()
        if self._next_upkeep is None or now >= self._next_upkeep:
            self._next_upkeep = now + timedelta(seconds=DISPATCH_EVERY_S)
            self._upkeep(now)
        if self.broker_problem is not None:  # down when last looked at (or a publish failed): wait for the next look
            return 0
        published = 0
        while True:
            taken = self.clock()  # each batch's claim runs from when it is taken, not from the round's start
            with session_scope(self.sessions) as session:
                batch = outbox.take_due(session, taken, limit=BATCH, claim=CLAIM_FOR)
            sent, stopped = self._publish(batch, taken)
            published += sent
            if stopped or len(batch) < BATCH:
                return published

    def _upkeep(self, now: datetime) -> None:
        """Steps 1–3 of a round (the module's docstring)."""
        with session_scope(self.sessions) as session:
            expired = leases.expire(session, now)
        if expired:
            log.info("%d lease(s) ran out; their requests are queued again", expired)
        identity = self._probe()
        if identity is None:
            return
        with session_scope(self.sessions) as session:
            waiting = outbox.republish_waiting(session, now) if outbox.broker_changed(session, identity) else 0
        if waiting:
            log.info("a new broker process: publishing %d waiting request(s) again", waiting)
        if self._next_lost_check is None or now >= self._next_lost_check:
            self._next_lost_check = now + LOST_CHECK_EVERY
            lost = self._find_lost(now)
            if lost:
                log.warning("%d published request(s) in no queue and held by no worker: publishing them again", lost)

    def _find_lost(self, now: datetime) -> int:
        """Make due the requests published over ``DELIVERY_GRACE`` ago, untaken, whose message is
        in no queue; how many. The queues are read after the requests, so a message a worker
        pops meanwhile has its receipt by the time ``make_due`` checks (but for milliseconds)."""
        if not reads_queues(self.celery):  # the in-process queue loses nothing its process keeps
            return 0
        published_before = now - DELIVERY_GRACE
        with session_scope(self.sessions) as session:
            suspects = outbox.undelivered(session, now, published_before, limit=LOST_LIMIT)
        if not suspects:
            return 0
        try:
            queued = queued_uids(self.celery, timeout_s=PROBE_TIMEOUT_S)
        except Exception as exc:
            self._down(f"broker unreachable: {type(exc).__name__}")
            return 0
        if queued is None:
            return 0
        with session_scope(self.sessions) as session:
            return outbox.make_due(session, [uid for uid in suspects if uid not in queued], now, published_before)

    def _publish(self, batch: list[outbox.Due], taken: datetime) -> tuple[int, bool]:
        """Publish ``batch``, taken at ``taken``; (how many were published, whether the broker failed)."""
        idle, tasks = [], []
        for due in batch:
            target = route(due)
            if target is None:
                idle.append(due.uid)
            else:
                tasks.append((target[0], due.uid, target[1]))
        try:
            publish(self.celery, tasks)
            sent, unsent = [uid for _task, uid, _queue in tasks], []
        except Exception as exc:  # which of them reached the broker is unknown: all are due again
            sent, unsent = [], [uid for _task, uid, _queue in tasks]
            self._down(f"broker unreachable: {type(exc).__name__}")
        claimed_until = taken + CLAIM_FOR
        with session_scope(self.sessions) as session:
            outbox.settle_claimed(session, idle, claimed_until, None)
            outbox.settle_claimed(session, sent, claimed_until, taken + REPUBLISH_AFTER, published_at=taken)
            outbox.settle_claimed(session, unsent, claimed_until, taken)
        return len(sent), bool(unsent)

    def _probe(self) -> str | None:
        try:
            identity = broker_identity(self.celery, timeout_s=PROBE_TIMEOUT_S)
        except Exception as exc:
            self._down(f"broker unreachable: {type(exc).__name__}")
            return None
        self.broker_problem = None
        return identity

    def _down(self, problem: str) -> None:
        if self.broker_problem != problem:
            log.warning("%s; requests stay stored and are published when it answers", problem)
        self.broker_problem = problem
