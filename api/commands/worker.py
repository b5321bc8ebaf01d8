"""``slaplan worker``: a Celery worker pulling requests from the broker (SLAPLAN_BROKER_URL).

Beside it runs a dispatcher (``workers.dispatcher``) on its own database engine: it expires the
leases of dead workers and publishes what is due, so recovery does not wait on ``slaplan serve``.
The worker notes each message it is handed (``workers.receipts``), so that a request delivered to
a worker killed before its task took the lease is queued again as a dead worker's lease is.
The worker reconnects to a lost broker for as long as it is away. Asked to stop (SIGTERM), it
abandons its running tasks, hands their leases back and exits 0 (``workers.shutdown``)."""

from __future__ import annotations

import argparse
import os
import sys

from api.commands.arguments import positive
from api.commands.database import add_db_argument

LOG_LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL", "FATAL")  # Celery's


def register(subparsers, summary: str) -> None:
    parser = subparsers.add_parser("worker", help=summary)
    parser.add_argument("--queues", type=queue_list, default="plan,bench",
                        help="comma-separated queues to consume (default: plan,bench)")
    parser.add_argument("--concurrency", type=positive, default=None,
                        help="tasks run at once, ≥ 1 (default: the number of CPUs)")
    parser.add_argument("--pool", default="prefork", choices=("prefork", "threads", "solo"), help="execution pool")
    parser.add_argument("--loglevel", type=str.upper, choices=LOG_LEVELS, default="INFO")
    parser.add_argument("--hostname", default=None, help="worker node name (default: slaplan-<pid>@<host>)")
    add_db_argument(parser)
    parser.set_defaults(func=run)


def queue_list(text: str) -> list[str]:
    """An argparse type: comma-separated names of queues slaplan has, at least one."""
    from workers.celery_app import QUEUES

    queues = [q.strip() for q in text.split(",") if q.strip()]
    if not queues:
        raise argparse.ArgumentTypeError(f"no queue given; known: {', '.join(QUEUES)}")
    unknown = sorted(set(queues) - set(QUEUES))
    if unknown:
        raise argparse.ArgumentTypeError(f"unknown queue(s) {', '.join(unknown)}; known: {', '.join(QUEUES)}")
    return queues


def run(args: argparse.Namespace) -> int:
    from api.commands.database import command_settings, export_database
    from workers.celery_app import make_celery
    from workers.shutdown import stop_promptly

    settings = command_settings(args)
    if settings.embedded:
        print(
            "slaplan worker needs a broker shared with the API: set SLAPLAN_BROKER_URL (e.g. redis://host:6379/0); "
            "without one, `slaplan serve` runs its own worker",
            file=sys.stderr,
        )
        return 2
    argv = ["worker", "--queues", ",".join(args.queues), "--pool", args.pool, "--loglevel", args.loglevel]
    # Celery expands %h (host) in a node name but has no key for the process id: insert it here.
    argv += ["--hostname", args.hostname or f"slaplan-{os.getpid()}@%h", "--without-gossip", "--without-mingle"]
    if args.concurrency is not None:
        argv += ["--concurrency", str(args.concurrency)]
    export_database(settings)
    app = make_celery(settings)
    _dispatch_beside(app, settings)
    stop_promptly()
    app.worker_main(argv)
    return 0


def _dispatch_beside(app, settings) -> None:
    """Run a dispatcher in this process, and note the delivery of each message (``workers.receipts``),
    from when the worker is first ready (its pool's processes forked first) until it shuts down.
    Each time its consumer connects again (Celery drops the messages it held), its receipts start
    afresh."""
    from datetime import timedelta

    from celery import bootsteps, signals

    from infra.db import make_engine, make_session_factory
    from workers.dispatcher import Dispatcher
    from workers.receipts import Receipts

    holder = {}

    def start(**_: object) -> None:
        if "dispatcher" in holder:
            return
        engine = make_engine(settings)
        sessions = make_session_factory(engine)
        holder["engine"] = engine
        holder["receipts"] = Receipts(sessions, timedelta(seconds=settings.lease_seconds))
        holder["receipts"].start()
        holder["dispatcher"] = Dispatcher(app, sessions)
        holder["dispatcher"].start()

    def received(**kwargs: object) -> None:
        if "receipts" in holder:
            holder["receipts"].received(**kwargs)

    class Connected(bootsteps.StartStopStep):
        """Started with each broker connection of the consumer, before it takes a message."""

        requires = {"celery.worker.consumer.connection:Connection"}

        def start(self, consumer) -> None:
            if "receipts" in holder:
                holder["receipts"].reconnected()

    def stop(**_: object) -> None:
        if "dispatcher" in holder:
            holder["receipts"].stop()
            holder["dispatcher"].stop()
            holder["engine"].dispose()

    signals.worker_ready.connect(start, weak=False)
    signals.task_received.connect(received, weak=False)
    signals.worker_shutdown.connect(stop, weak=False)
    app.steps["consumer"].add(Connected)
