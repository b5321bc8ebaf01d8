"""The Celery application, built from settings.

Broker: ``settings.broker_url`` (Redis; also the result backend), or, when none is configured,
the in-process ``memory://`` transport, for an API and a worker in one process (``slaplan
serve``). Messages may be lost (an in-process queue at a restart, a Redis restarted without
persistence); the requests they stood for are in the database, and a dispatcher publishes them
again (``workers.dispatcher``). Only dispatchers publish, each with a short broker timeout.

Named queues: ``plan`` (fast CPU work) and ``bench`` (long online benchmarks). Tasks are
acknowledged after they finish and rejected (so redelivered) when their worker dies. A worker
reconnects to a lost broker for as long as it takes.

The tasks are thin (``workers.tasks``, ``workers.deploy``): each closes over the app's typed
``WorkerContext`` (settings, sessions, cluster, planning pool) and holds its request's lease
while it runs (``workers.heartbeat``).
"""

from __future__ import annotations

import re
import time
import uuid
from collections.abc import Callable
from functools import cache

from celery import Celery
from kombu import Queue
from sqlalchemy.exc import OperationalError

from infra.db import session_scope
from infra.settings import Settings
from workers.context import WorkerContext
from workers.deploy import TRACK_TASK, track_dgdr
from workers.plan_pool import PlanPool
from workers.tasks import BENCH_TASK, ONLINE_TASK, PLAN_TASK, process_benchmarkjob, process_dgdr

QUEUES = ("plan", "bench")
EMBEDDED_BROKER = "memory://localhost/"
BROKER_TIMEOUT_S = 2.0  # connecting to, or waiting on, the broker (s)
REDIS_SCHEMES = ("redis://", "rediss://", "unix://")
QUEUED_READ_MAX = 20_000  # the most queued messages queued_uids reads (about 1.5 kB each)
UID = re.compile(rb"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")  # a resource's uid (a UUID)
# Messages an in-process worker holds per thread: its threads take the next task from their own
# queue as soon as one ends, instead of waiting for the next poll of the queue (up to its
# polling interval, 50 ms, per hand-off). Worker processes sharing a broker take one at a time,
# so that a busy worker holds no work an idle one could do.
EMBEDDED_PREFETCH = 8


def make_celery(settings: Settings, *, plan_pool: PlanPool | None = None) -> Celery:
    """The Celery app of ``settings``, its tasks registered; ``plan_pool``: the pool its DGDRs
    are planned in once started (``workers.embedded``), else they are planned in the task."""
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
        worker_prefetch_multiplier=1 if redis else EMBEDDED_PREFETCH,
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
    from workers.kombu_guard import guard_restore_unacked

    guard_restore_unacked()
    register_tasks(app, WorkerContext.of(settings, plan_pool=plan_pool))
    return app


def publish(app: Celery, tasks: list[tuple[str, str, str]]) -> None:
    """Publish ``tasks``, each (task name, resource uid, queue), over one broker connection and, on
    Redis, in one pipeline (kombu's publish batch): a connection and a Redis client per message
    cost the publisher more CPU than building the message. No result is asked for (results live
    in the resource status): otherwise Celery subscribes to each task's result channel first, on a
    connection without a timeout, which hangs the publisher while the broker does not answer.
    Raises when the broker fails; then any of them may have been published or not."""
    if not tasks:
        return
    with app.producer_or_acquire() as producer, producer.batch():
        for task, uid, queue in tasks:
            app.send_task(task, args=[uid], queue=queue, producer=producer, ignore_result=True)


def broker_identity(app: Celery, timeout_s: float) -> str:
    """Which broker process answers (for Redis its run id, new at every restart; the in-process
    broker is this process); raises when none answers within about ``timeout_s``."""
    url = app.conf.broker_url
    if url == EMBEDDED_BROKER:
        return f"memory {_process_token()}"
    if url.startswith(REDIS_SCHEMES):
        return "redis " + _probe_client(url, timeout_s).info("server")["run_id"]
    with app.connection_for_write() as connection:
        connection.ensure_connection(max_retries=1, timeout=timeout_s)
    return url


def reads_queues(app: Celery) -> bool:
    """Whether ``queued_uids`` can read the queues of ``app``'s broker (Redis)."""
    return app.conf.broker_url.startswith(REDIS_SCHEMES)


def queued_uids(app: Celery, timeout_s: float) -> set[str] | None:
    """The uids of the requests whose tasks wait in a queue of a Redis broker (read from the
    messages' headers); None when the broker is not Redis, or when its queues hold more than
    ``QUEUED_READ_MAX`` messages (reading them would cost more than the answer is worth)."""
    if not reads_queues(app):
        return None
    client = _probe_client(app.conf.broker_url, timeout_s)
    if sum(client.llen(queue) for queue in QUEUES) > QUEUED_READ_MAX:
        return None
    with client.pipeline(transaction=False) as pipe:
        for queue in QUEUES:
            pipe.lrange(queue, 0, -1)
        messages = [m for queued in pipe.execute() for m in queued]
    return {uid.decode() for m in messages for uid in UID.findall(m)}


@cache
def _probe_client(url: str, timeout_s: float):
    """One Redis client per broker URL for the dispatcher's probes, kept for the process: a new
    client per round cost more CPU than the round's own work (redis-py reads its package metadata
    for every new connection). A connection the broker dropped (a restart) is replaced at once
    within the probe; a broker that does not answer is not waited on twice."""
    import redis
    from redis.backoff import NoBackoff
    from redis.retry import Retry

    return redis.Redis.from_url(url, socket_timeout=timeout_s, socket_connect_timeout=timeout_s,
                                retry=Retry(NoBackoff(), 1, supported_errors=(redis.ConnectionError,)))


@cache
def _process_token() -> str:
    """A name for this process, unique across restarts (its in-process broker's identity)."""
    return uuid.uuid4().hex


def _measured(name: str, run: Callable[[], str]) -> str:
    from workers.metrics import task_metrics

    metrics = task_metrics()
    started = time.perf_counter()
    outcome = "error"
    try:
        outcome = run()
        return outcome
    finally:
        metrics.runs.labels(name, outcome).inc()
        metrics.seconds.labels(name).observe(time.perf_counter() - started)


def register_tasks(app: Celery, context: WorkerContext) -> None:
    """Define the tasks on ``app``, each bound to ``context``. Each holds its request's lease
    while it runs; a duplicate arriving meanwhile returns ``busy``."""
    from workers.heartbeat import leased

    settings = context.settings
    common = {
        "shared": False,  # bound to this app's settings and database: never lent to another app
        "bind": True,
        "acks_late": True,
        "reject_on_worker_lost": True,
        "autoretry_for": (OperationalError,),  # the database went away for a moment
        "retry_backoff": True,
        "max_retries": 5,
    }

    def leased_run(name: str, uid: str, run: Callable[[], str]) -> str:
        with leased(context.sessions(), uid, context.lease) as lease:
            if lease is None:
                return "busy"
            outcome = _measured(name, run)
            lease.next_due = context.next_check() if outcome == "deploying" else None  # then its deployment is checked
            return outcome

    def online():
        from workers.online import online_setup

        return online_setup(settings, context.cluster)

    @app.task(name=PLAN_TASK, **common)
    def plan_dgdr(self, uid: str) -> str:
        if context.plan_pool.started and context.cluster is None:  # the child holds the lease
            return _measured(PLAN_TASK, lambda: context.plan_pool.process_dgdr(uid))
        return leased_run(PLAN_TASK, uid, lambda: process_dgdr(context.sessions(), uid, cluster=context.cluster,
                                                               online=online, model_dirs=settings.model_dirs))

    @app.task(name=ONLINE_TASK, **common)
    def profile_dgdr_online(self, uid: str) -> str:
        return leased_run(ONLINE_TASK, uid, lambda: process_dgdr(context.sessions(), uid, cluster=context.cluster,
                                                                 online=online, model_dirs=settings.model_dirs))

    @app.task(name=BENCH_TASK, **common)
    def run_benchmarkjob(self, uid: str) -> str:
        return leased_run(BENCH_TASK, uid,
                          lambda: process_benchmarkjob(context.sessions(), uid, cluster=context.cluster))

    @app.task(name=TRACK_TASK, shared=False, bind=True, acks_late=True, ignore_result=True)
    def track_deployment(self, uid: str) -> str:
        """One check of an applied deployment, then the next one is due."""
        from infra import outbox

        sessions = context.sessions()
        outcome = track_dgdr(sessions, uid, context.cluster)
        with session_scope(sessions) as session:
            outbox.settle(session, [uid], context.next_check() if outcome in ("deploying", "ready") else None)
        return outcome
