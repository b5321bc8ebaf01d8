"""``slaplan serve``: the API; with no broker configured, also a worker, in one process."""

from __future__ import annotations

import argparse
import threading
from datetime import UTC, datetime, timedelta

from api.commands.arguments import port, positive, readable_file
from api.commands.database import add_db_argument

COMPACT_EVERY_S = 60.0  # how often the watch history is pruned
WATCH_HISTORY = timedelta(minutes=15)  # how far back a watch may resume (older: 410 Expired)
GRACEFUL_SHUTDOWN_S = 5  # open watches are cut after this on shutdown
LOG_LEVELS = ("critical", "error", "warning", "info", "debug", "trace")  # uvicorn's


def register(subparsers, summary: str) -> None:
    parser = subparsers.add_parser("serve", help=summary)
    parser.add_argument(
        "--host", default="127.0.0.1",
        help="address to listen on (default: 127.0.0.1, this machine only); on any other, writes need "
        "SLAPLAN_API_TOKEN unless SLAPLAN_ALLOW_UNAUTHENTICATED_WRITES=true, and clients must use a name in "
        "SLAPLAN_ALLOWED_HOSTS (or this address)",
    )
    parser.add_argument("--port", type=port, default=8080, help="TCP port, 1-65535 (default: 8080)")
    parser.add_argument("--concurrency", type=positive, default=2, help="tasks the embedded worker runs at once (≥ 1)")
    parser.add_argument(
        "--processes", type=positive, default=1,
        help="API processes serving the port (≥ 1, default 1), each with its own dispatcher, all on one "
        "database; more than one needs a broker (SLAPLAN_BROKER_URL) and no worker in this process",
    )
    parser.add_argument(
        "--worker", choices=("auto", "yes", "no"), default="auto",
        help="run a worker in this process: auto = only when no broker is configured",
    )
    parser.add_argument("--no-migrate", action="store_true",
                        help="do not migrate the database at start (it must be migrated already)")
    parser.add_argument("--log-level", type=str.lower, choices=LOG_LEVELS, default="info")
    parser.add_argument("--tls-cert-file", type=readable_file, metavar="PEM",
                        help="serve HTTPS with this certificate (PEM; a chain: the server's first); needs "
                        "--tls-private-key-file. kubectl sends a token over HTTPS only")
    parser.add_argument("--tls-private-key-file", type=readable_file, metavar="PEM",
                        help="the private key of --tls-cert-file (PEM, unencrypted)")
    add_db_argument(parser)
    parser.set_defaults(func=run, parser=parser)


def _tls_error(cert: str | None, key: str | None) -> str | None:
    """What is wrong with the TLS options (one given without the other, a key that does not load or
    match the certificate), or None."""
    if cert is None and key is None:
        return None
    if cert is None or key is None:
        return "--tls-cert-file and --tls-private-key-file go together: give both"
    import ssl

    try:
        ssl.create_default_context(ssl.Purpose.CLIENT_AUTH).load_cert_chain(cert, key)
    except ssl.SSLError as exc:
        return f"--tls-cert-file/--tls-private-key-file: cannot use them: {exc.reason or exc}"
    return None


def _warn_if_exposed(settings, host: str) -> None:
    """Log what a listen address off loopback changes: writes refused without a token, and
    clients refused unless they name an allowed host."""
    import logging

    from api.origins import is_loopback
    from infra.settings import LOOPBACK_HOSTS

    if is_loopback(host):
        return
    log = logging.getLogger(__name__)
    if settings.api_token is None and not settings.allow_unauthenticated_writes:
        log.warning("listening on %s with no SLAPLAN_API_TOKEN: writes are refused (set the token, or "
                    "SLAPLAN_ALLOW_UNAUTHENTICATED_WRITES=true)", host)
    if set(settings.allowed_hosts) <= set(LOOPBACK_HOSTS):
        log.warning("listening on %s, but SLAPLAN_ALLOWED_HOSTS names only loopback: requests for other host "
                    "names are refused", host)


def run(args: argparse.Namespace) -> int:
    import logging
    import os

    import uvicorn
    from uvicorn.config import LOG_LEVELS as LEVEL_NUMBERS

    from api.app import create_app
    from api.commands.database import command_settings, export_database
    from api.commands.serving_heap import prepare_to_serve
    from infra import migrate
    from workers.celery_app import make_celery
    from workers.embedded import start_embedded_worker, stop_embedded_worker
    from workers.plan_pool import PlanPool

    tls_error = _tls_error(args.tls_cert_file, args.tls_private_key_file)
    if tls_error:
        args.parser.error(tls_error)
    logging.basicConfig(level=LEVEL_NUMBERS[args.log_level], format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    settings = command_settings(args)
    with_worker = args.worker == "yes" or (args.worker == "auto" and settings.embedded)
    if args.processes > 1 and with_worker:
        args.parser.error("--processes: more than one API process needs a broker (SLAPLAN_BROKER_URL) and "
                          "--worker no or auto: the embedded worker and its queue live in one process")
    export_database(settings)
    if args.no_migrate:
        migrate.require_current(settings)
    else:
        migrate.upgrade(settings)
    if args.processes > 1:
        _warn_if_exposed(settings, args.host)
        return _serve_processes(args, settings, LEVEL_NUMBERS[args.log_level])
    plan_pool = PlanPool(settings)
    celery = make_celery(settings, plan_pool=plan_pool)
    app = create_app(settings, celery=celery, listen_host=args.host)
    _warn_if_exposed(settings, args.host)
    worker = start_embedded_worker(celery, concurrency=args.concurrency, plan_pool=plan_pool) if with_worker else None

    # Requests are published by the app's dispatcher while it runs (workers.dispatcher).
    stop = _start_compaction(app.state.sessions)
    _raise_on_sigterm()
    prepare_to_serve()
    try:
        uvicorn.run(app, **_uvicorn_options(args))
    except _Terminated:
        pass
    finally:
        stop.set()
        stopped = worker is None or stop_embedded_worker(worker)
        app.state.engine.dispose()
    if not stopped:  # a task on the worker's threads (an online search) would hold the exit for hours
        logging.getLogger(__name__).warning("stopping with tasks under way; their leases run out and the next "
                                            "start resumes them")
        logging.shutdown()
        os._exit(0)  # the engines of online searches end with this process (profiler.bench.tether)
    return 0


class _Terminated(BaseException):
    """SIGTERM arrived (``_raise_on_sigterm``)."""


def _raise_on_sigterm() -> None:
    """Make SIGTERM raise ``_Terminated``. uvicorn, once it has shut down for a SIGTERM, raises
    the signal again under the handler it found; with the default one the process ended there,
    and the embedded worker, its planning processes and the engines of their online searches
    were never stopped."""
    import signal

    def terminated(_signum, _frame) -> None:
        raise _Terminated

    signal.signal(signal.SIGTERM, terminated)


def _uvicorn_options(args: argparse.Namespace) -> dict:
    from api.http_protocol import MAX_HEAD_BYTES, BoundedH11Protocol

    return dict(
        host=args.host, port=args.port, log_level=args.log_level, timeout_graceful_shutdown=GRACEFUL_SHUTDOWN_S,
        http=BoundedH11Protocol, h11_max_incomplete_event_size=MAX_HEAD_BYTES + 4,  # ours refuses first
        ssl_certfile=args.tls_cert_file, ssl_keyfile=args.tls_private_key_file,
    )


def _start_compaction(sessions) -> threading.Event:
    """Prune the watch history every COMPACT_EVERY_S in a daemon thread, until the event returned is set."""
    import logging

    from infra import events
    from infra.db import session_scope

    log = logging.getLogger(__name__)
    stop = threading.Event()

    def compact() -> None:
        while not stop.wait(COMPACT_EVERY_S):
            try:
                with session_scope(sessions) as session:
                    events.compact(session, datetime.now(UTC) - WATCH_HISTORY)
            except Exception:  # the database is away for a moment: compact on the next round
                log.warning("could not compact the watch history", exc_info=True)

    threading.Thread(target=compact, name="slaplan-compact", daemon=True).start()
    return stop


def _serve_processes(args: argparse.Namespace, settings, log_level: int) -> int:
    """``args.processes`` API processes on one listening socket (uvicorn's supervisor starts them,
    and starts again one that dies); this process prunes the watch history."""
    import os

    import uvicorn

    from api.commands import serve_process
    from infra.db import make_engine, make_session_factory

    os.environ[serve_process.OPTIONS_ENV] = serve_process.options(args.host, log_level)
    engine = make_engine(settings)
    stop = _start_compaction(make_session_factory(engine))
    try:
        uvicorn.run("api.commands.serve_process:create", factory=True, workers=args.processes, **_uvicorn_options(args))
    finally:
        stop.set()
        engine.dispose()
    return 0
