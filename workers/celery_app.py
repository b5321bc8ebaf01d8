"""The Celery application, built from settings.

Broker: ``settings.broker_url`` (Redis; also the result backend), or, when none is configured,
the in-process ``memory://`` transport, for an API and a worker in one process (``slaplan
serve``). In-process messages do not survive a restart; the requests they stood for are in the
database and the recovery sweep enqueues them again (``workers.recovery``).

Named queues: ``plan`` (fast CPU work) and ``bench`` (long online benchmarks). Tasks are
acknowledged after they finish and rejected (so redelivered) when their worker dies.
"""

from __future__ import annotations

import threading
from typing import Any

from celery import Celery
from kombu import Queue

from infra.settings import Settings

QUEUES = ("plan", "bench")
EMBEDDED_BROKER = "memory://localhost/"


def make_celery(settings: Settings) -> Celery:
    app = Celery("slaplan", set_as_current=False)
    broker = settings.broker_url or EMBEDDED_BROKER
    redis = broker.startswith(("redis://", "rediss://", "unix://"))
    app.conf.update(
        broker_url=broker,
        result_backend=broker if redis else None,
        task_ignore_result=True,  # results live in the resource status, in the database
        task_serializer="json",
        accept_content=["json"],
        task_acks_late=True,
        task_reject_on_worker_lost=True,
        worker_prefetch_multiplier=1,
        task_default_queue="plan",
        task_queues=[Queue(q, routing_key=q) for q in QUEUES],
        task_routes={"slaplan.plan_dgdr": {"queue": "plan"}, "slaplan.run_benchmarkjob": {"queue": "bench"}},
        task_publish_retry_policy={"max_retries": 2, "interval_start": 0, "interval_step": 0.5, "interval_max": 1},
        broker_connection_timeout=3,
        broker_connection_retry_on_startup=True,
        broker_transport_options=(
            {"visibility_timeout": settings.broker_visibility_timeout_s} if redis else {"polling_interval": 0.05}
        ),
        worker_hijack_root_logger=False,
        worker_send_task_events=False,
        task_send_sent_event=False,
    )
    app.slaplan_settings = settings
    from workers.tasks import register_tasks

    register_tasks(app)
    return app


def enqueue(app: Celery, task: str, uid: str, queue: str) -> None:
    """Publish one task for the resource ``uid`` on ``queue``."""
    app.send_task(task, args=[uid], queue=queue)


def broker_reachable(app: Celery, timeout_s: float = 2.0) -> bool:
    try:
        with app.connection_for_write() as connection:
            connection.ensure_connection(max_retries=1, timeout=timeout_s)
        return True
    except Exception:
        return False


_sessions_lock = threading.Lock()


def sessions_for(app: Celery) -> Any:
    """The database session factory of ``app``'s workers, created on first use."""
    factory = getattr(app, "slaplan_sessions", None)
    if factory is not None:
        return factory
    with _sessions_lock:
        factory = getattr(app, "slaplan_sessions", None)
        if factory is None:
            from infra.db import make_engine, make_session_factory

            factory = make_session_factory(make_engine(app.slaplan_settings))
            app.slaplan_sessions = factory
    return factory
