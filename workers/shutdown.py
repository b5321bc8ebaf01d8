"""A ``slaplan worker`` asked to stop (SIGTERM) stops within seconds instead of finishing its task.

Celery's warm shutdown waits for the running tasks, and an online search runs for hours. Here
SIGTERM abandons them: Celery's own handler still runs (no new task is taken, its shutdown
signals are sent), then the task is interrupted where it is (``WorkerTerminate``, a
``SystemExit``: a query in flight is cancelled, a benchmark subprocess killed, a deployed
candidate torn down by its context manager). The task's lease is handed back with the request
due at once (``workers.heartbeat``), so any worker's dispatcher publishes it again and the next
worker resumes it (an online study keeps its completed trials). The process exits 0.

Tasks run in the main thread of the process that got the signal (solo and threads pools: the
worker; prefork: each pool process, which the worker's cold shutdown sends SIGTERM too).
"""

from __future__ import annotations

import signal

from celery import signals
from celery.exceptions import WorkerTerminate

EXIT_OK = 0


def stop_promptly() -> None:
    """Make this ``slaplan worker`` (and its pool processes) abandon running tasks on SIGTERM."""
    signals.worker_ready.connect(_take_over_sigterm, weak=False)  # the worker: after Celery set its handlers
    signals.worker_process_init.connect(_take_over_sigterm, weak=False)  # a prefork pool process


def _take_over_sigterm(**_: object) -> None:
    celery_handler = signal.getsignal(signal.SIGTERM)
    if getattr(celery_handler, "abandons_tasks", False):
        return  # already ours: taken over once per process

    def abandon(signum, frame) -> None:
        signal.signal(signal.SIGTERM, signal.SIG_IGN)  # once: the shutdown below must not be interrupted
        if callable(celery_handler):
            celery_handler(signum, frame)
        raise WorkerTerminate(EXIT_OK)

    abandon.abandons_tasks = True
    signal.signal(signal.SIGTERM, abandon)
