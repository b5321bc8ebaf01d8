"""Planning in child processes, for the worker embedded in ``slaplan serve``.

Planning is CPU-bound Python. Run on the embedded worker's threads, it holds the GIL for most
of each plan and the API's threads wait for it: with a queue of requests, every API call took
hundreds of milliseconds. Here the whole task (load, claim, plan, render, save) runs in a pool
of child processes that open the same database; the embedded worker's thread only waits. The
children run at a lower CPU priority so that, when the API and planning compete for the cores,
the API answers first and planning takes what is left.
"""

from __future__ import annotations

import logging
import multiprocessing
import os
import threading
from concurrent.futures import ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from infra.settings import Settings

log = logging.getLogger(__name__)

CHILD_NICENESS = 10  # added to the children's nice value: the API's threads come first
_child_sessions: dict[str, Any] = {}  # database URL -> session factory, in each child


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
    for hours) is abandoned, its lease runs out and another start resumes it."""
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


def _process_dgdr_here(settings: Settings, uid: str) -> str:
    """In a child: ``tasks.process_dgdr`` on this child's own engine for ``settings.database_url``,
    local models allowed under ``settings.model_dirs`` only, online profiling set up from ``settings``."""
    from infra.db import make_engine, make_session_factory
    from workers.online import online_setup
    from workers.tasks import process_dgdr

    sessions = _child_sessions.get(settings.database_url)
    if sessions is None:
        sessions = make_session_factory(make_engine(settings))
        _child_sessions[settings.database_url] = sessions
    return process_dgdr(sessions, uid, online=lambda: online_setup(settings), model_dirs=settings.model_dirs)


class PlanPool:
    """The child processes one worker with ``settings`` plans the DGDRs of its database in (local
    models allowed under ``settings.model_dirs`` only): empty until ``start``, replaced when a
    child dies, emptied by ``stop``. Used only when no cluster is configured. Thread-safe."""

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self._lock = threading.Lock()
        self._pool: ProcessPoolExecutor | None = None

    @property
    def running(self) -> bool:
        return self._pool is not None

    def start(self, processes: int) -> None:
        """Start ``processes`` children, unless the database is one only this process can open
        (then DGDRs are planned in the task, and ``running`` stays False)."""
        if not shareable(self.settings.database_url):
            return
        with self._lock:
            if self._pool is None:
                self._pool = start_plan_pool(processes)

    def stop(self) -> None:
        with self._lock:
            pool, self._pool = self._pool, None
        if pool is not None:
            stop_plan_pool(pool)

    def process_dgdr(self, uid: str) -> str:
        """Run the DGDR task for ``uid`` in a child and wait for its outcome.

        A child that dies (killed, out of memory) breaks the pool: it is replaced and the task runs
        once more; the task is idempotent, so a half-done first run costs only time.
        """
        for attempt in (1, 2):
            pool = self._pool
            if pool is None:
                raise RuntimeError("the planning pool is not running")
            try:
                return pool.submit(_process_dgdr_here, self.settings, uid).result()
            except BrokenProcessPool:
                if attempt == 2:
                    raise
                log.warning("a planning process died; starting a new pool and planning %s again", uid)
                with self._lock:
                    if self._pool is pool:
                        self._pool = start_plan_pool(pool._max_workers)
                        stop_plan_pool(pool)
        raise AssertionError("unreachable")
