"""A Celery worker inside the current process (``slaplan serve`` with no broker configured)."""

from __future__ import annotations

import threading
from typing import NamedTuple

from celery import Celery
from celery.utils.nodenames import anon_nodename
from celery.worker import WorkController

from workers.celery_app import QUEUES
from workers.plan_pool import PlanPool


class EmbeddedWorker(NamedTuple):
    controller: WorkController
    thread: threading.Thread
    plan_pool: PlanPool | None


def start_embedded_worker(
    app: Celery, *, queues: tuple[str, ...] = QUEUES, concurrency: int = 2, plan_pool: PlanPool | None = None
) -> EmbeddedWorker:
    """Start a thread-pool worker consuming ``queues`` in a daemon thread; returns once it is consuming.

    With ``plan_pool`` (the one ``app`` was made with, ``make_celery(..., plan_pool=)``), DGDRs are
    planned in ``concurrency`` child processes (``workers.plan_pool``) so that planning does not
    hold this process's GIL.
    """
    ready = threading.Event()
    app.finalize()
    # The thread pool runs each task by name on Celery's current app, which is the process
    # default in its threads: make it this app, whose task bodies use its settings.
    app.set_default()
    if plan_pool is not None:
        plan_pool.start(concurrency)
    controller = WorkController(
        app=app,
        hostname=anon_nodename(),
        pool="threads",
        concurrency=concurrency,
        queues=list(queues),
        loglevel="WARNING",
        ready_callback=lambda *_: ready.set(),
        without_heartbeat=True,
        without_mingle=True,
        without_gossip=True,
    )
    thread = threading.Thread(target=controller.start, name="slaplan-embedded-worker", daemon=True)
    thread.start()
    if not ready.wait(30):
        raise RuntimeError("the embedded worker did not start within 30 s")
    return EmbeddedWorker(controller, thread, plan_pool)


def stop_embedded_worker(worker: EmbeddedWorker, timeout_s: float = 10.0) -> bool:
    """Stop consuming and end the planning processes at once (a plan under way there is abandoned,
    its lease handed back: the next start plans it again), then let tasks running on this
    process's threads finish, up to ``timeout_s``; returns whether they all did."""
    if worker.plan_pool is not None:
        worker.plan_pool.stop()
    stopping = threading.Thread(target=worker.controller.stop, kwargs={"in_sighandler": False, "exitcode": 0},
                                name="slaplan-embedded-stop", daemon=True)
    stopping.start()
    stopping.join(timeout_s)
    return not stopping.is_alive()
