"""Planning in child processes, for the worker embedded in ``slaplan serve``.

Planning is CPU-bound Python. Run on the embedded worker's threads, it holds the GIL for most
of each plan and the API's threads wait for it: with a queue of requests, every API call took
hundreds of milliseconds. Here the whole task (lease, load, claim, plan, render, save, release)
runs in a pool of child processes that open the same database; the embedded worker's thread
only waits, and writes the lease only to hand it back when the pool stops under a task. The
children run at a lower CPU priority so that, when the API and planning compete for the cores,
the API answers first and planning takes what is left.
"""

from __future__ import annotations

import logging
import multiprocessing
import os
import threading
from concurrent.futures import CancelledError, ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from infra.db import SessionFactory
    from infra.settings import Settings

log = logging.getLogger(__name__)

CHILD_NICENESS = 10  # added to the children's nice value: the API's threads come first
STOPPED = "stopped"  # the outcome of a DGDR whose planning the pool's stop cut short
_sessions_of: dict[str, Any] = {}  # database URL -> session factory, in each process


def shareable(database_url: str) -> bool:
    """Whether another process can open the same database (not an in-memory SQLite one)."""
    return database_url not in ("sqlite://", "sqlite:///:memory:") and "mode=memory" not in database_url


def start_plan_pool(processes: int) -> ProcessPoolExecutor:
    """A pool of ``processes`` spawned children (spawned, not forked: the parent runs threads)."""
    return ProcessPoolExecutor(
        max_workers=max(1, processes), mp_context=multiprocessing.get_context("spawn"), initializer=_child_start
    )


def stop_plan_pool(pool: ProcessPoolExecutor) -> None:
    """Cancel what waits and end the children at once: a task under way (an online search can run
    for hours) is abandoned; ``PlanPool.process_dgdr`` hands its lease back."""
    children = list((pool._processes or {}).values())
    pool.shutdown(wait=False, cancel_futures=True)
    for child in children:
        child.terminate()


def _child_start() -> None:
    from profiler.bench.tether import tether_to_parent

    try:
        os.nice(CHILD_NICENESS)
    except OSError:  # not permitted here: run at the parent's priority
        pass
    # A parent killed outright (SIGKILL, the OOM killer) cannot stop the pool, and the children,
    # holding each other's ends of the task queue, would wait for work forever with their database
    # connections open: each ends with its parent (engines it started end with it).
    tether_to_parent(lambda: os._exit(0))
    import planner  # noqa: F401  (imported once per child, not on the first request)


def _sessions(settings: Settings) -> SessionFactory:
    """This process's session factory for ``settings.database_url``, made on first use."""
    from infra.db import make_engine, make_session_factory

    sessions = _sessions_of.get(settings.database_url)
    if sessions is None:
        sessions = make_session_factory(make_engine(settings))
        _sessions_of[settings.database_url] = sessions
    return sessions


def _process_dgdr_here(settings: Settings, uid: str, owner: str | None = None) -> str:
    """In a child: ``tasks.process_dgdr`` on this child's own engine for ``settings.database_url``,
    local models allowed under ``settings.model_dirs`` only, online profiling set up from
    ``settings``, holding ``uid``'s lease as ``owner`` (``busy`` when another worker holds it)."""
    from workers.heartbeat import leased
    from workers.online import online_setup
    from workers.tasks import process_dgdr

    sessions = _sessions(settings)
    with leased(sessions, uid, timedelta(seconds=settings.lease_seconds), owner=owner) as lease:
        if lease is None:
            return "busy"
        return process_dgdr(sessions, uid, online=lambda: online_setup(settings), model_dirs=settings.model_dirs)


def _run(pool: ProcessPoolExecutor | None, settings: Settings, uid: str, owner: str) -> str:
    """``_process_dgdr_here`` in one of ``pool``'s children; CancelledError when there is no pool
    or it was shut down."""
    if pool is None:
        raise CancelledError
    try:
        future = pool.submit(_process_dgdr_here, settings, uid, owner)
    except RuntimeError as exc:  # shut down since it was read
        raise CancelledError from exc
    return future.result()


class PlanPool:
    """The child processes one worker with ``settings`` plans the DGDRs of its database in (local
    models allowed under ``settings.model_dirs`` only): empty until ``start``, replaced when a
    child dies, emptied by ``stop``. Used only when no cluster is configured. Thread-safe.
    ``started``: whether ``start`` started children (DGDRs are planned here from then on, and
    after ``stop`` handed back)."""

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self.started = False
        self._lock = threading.Lock()
        self._pool: ProcessPoolExecutor | None = None

    def start(self, processes: int) -> None:
        """Start ``processes`` children, unless the database is one only this process can open
        (then DGDRs are planned in the task, and ``started`` stays False)."""
        if not shareable(self.settings.database_url):
            return
        with self._lock:
            if self._pool is None:
                self._pool = start_plan_pool(processes)
                self.started = True

    def stop(self) -> None:
        with self._lock:
            pool, self._pool = self._pool, None
        if pool is not None:
            stop_plan_pool(pool)

    def process_dgdr(self, uid: str) -> str:
        """Run the DGDR task for ``uid`` in a child, holding its lease there, and wait for its
        outcome. ``STOPPED`` when the pool is stopped (or was never started) before the task
        ended: its lease is handed back, the request due again now (here at the next start, or
        by another worker of the database).

        A child that dies (killed, out of memory) breaks the pool: it is replaced and the task runs
        once more; the task is idempotent, so a half-done first run costs only time.
        """
        from workers.heartbeat import owner_name

        owner = owner_name()
        for attempt in (1, 2):
            pool = self._pool
            try:
                return _run(pool, self.settings, uid, owner)
            except (BrokenProcessPool, CancelledError):
                if self._pool is None:  # stopped: its children were ended, its queue dropped
                    return self._hand_back(uid, owner)
                if attempt == 2:
                    raise
                log.warning("a planning process died; starting a new pool and planning %s again", uid)
                with self._lock:
                    if self._pool is pool:
                        self._pool = start_plan_pool(pool._max_workers)
                        stop_plan_pool(pool)
        raise AssertionError("unreachable")

    def _hand_back(self, uid: str, owner: str) -> str:
        """End ``owner``'s lease on ``uid`` (if its child took it), the request due again now."""
        from infra import leases
        from infra.db import session_scope

        with session_scope(_sessions(self.settings)) as session:
            leases.release(session, uid, owner, datetime.now(UTC))
        log.info("planning of %s stopped with the planning processes; it will be picked up again", uid)
        return STOPPED
