"""The Celery application, built from settings.

Broker: ``settings.broker_url`` (Redis; also the result backend), or, when none is configured,
the in-process ``memory://`` transport, for an API and a worker in one process (``slaplan
serve``). Messages may be lost (an in-process queue at a restart, a Redis restarted without
persistence); the requests they stood for are in the database, and a dispatcher publishes them
again (``workers.dispatcher``). Only dispatchers publish, each with a short broker timeout.

Named queues: ``plan`` (fast CPU work) and ``bench`` (long online benchmarks). Tasks are
acknowledged after they finish and rejected (so redelivered) when their worker dies. A worker
reconnects to a lost broker for as long as it takes.
"""

from __future__ import annotations

import threading
import uuid
from functools import cache
from typing import Any

from celery import Celery
from kombu import Queue

from infra.settings import Settings

QUEUES = ("plan", "bench")
EMBEDDED_BROKER = "memory://localhost/"
BROKER_TIMEOUT_S = 2.0  # connecting to, or waiting on, the broker (s)
REDIS_SCHEMES = ("redis://", "rediss://", "unix://")


def make_celery(settings: Settings) -> Celery:
    app = Celery("slaplan", set_as_current=False)
    broker = settings.broker_url or EMBEDDED_BROKER
    redis = broker.startswith(REDIS_SCHEMES)
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
        task_publish_retry_policy={"max_retries": 1, "interval_start": 0, "interval_step": 0.2, "interval_max": 0.2},
        broker_connection_timeout=BROKER_TIMEOUT_S,
        broker_connection_retry_on_startup=True,
        broker_connection_max_retries=None,  # a worker waits for its broker as long as it is away
        broker_transport_options=(
            {"visibility_timeout": settings.broker_visibility_timeout_s, "socket_timeout": BROKER_TIMEOUT_S,
             "socket_connect_timeout": BROKER_TIMEOUT_S}
            if redis else {"polling_interval": 0.05}
        ),
        worker_hijack_root_logger=False,
        worker_send_task_events=False,
        task_send_sent_event=False,
    )
    app.slaplan_settings = settings
    from workers.kombu_guard import guard_restore_unacked
    from workers.tasks import register_tasks

    guard_restore_unacked()

    register_tasks(app)
    return app


def enqueue(app: Celery, task: str, uid: str, queue: str) -> None:
    """Publish one task for the resource ``uid`` on ``queue``."""
    app.send_task(task, args=[uid], queue=queue)


def broker_identity(app: Celery, timeout_s: float) -> str:
    """Which broker process answers (for Redis its run id, new at every restart; the in-process
    broker is this process); raises when none answers within about ``timeout_s``."""
    url = app.conf.broker_url
    if url == EMBEDDED_BROKER:
        return f"memory {_process_token()}"
    if url.startswith(REDIS_SCHEMES):
        import redis

        client = redis.Redis.from_url(url, socket_timeout=timeout_s, socket_connect_timeout=timeout_s)
        try:
            return "redis " + client.info("server")["run_id"]
        finally:
            client.close()
    with app.connection_for_write() as connection:
        connection.ensure_connection(max_retries=1, timeout=timeout_s)
    return url


@cache
def _process_token() -> str:
    """A name for this process, unique across restarts (its in-process broker's identity)."""
    return uuid.uuid4().hex


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
