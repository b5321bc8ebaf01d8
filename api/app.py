"""The FastAPI application factory."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from fastapi import FastAPI

from api.errors import install_error_handlers
from api.guards import guarded
from api.metrics import make_metrics
from api.plain_reads import plain_reads
from api import openapi_doc
from api.routes import bench_results, dashboard, discovery, docs, health, openapi, resources
from api.routes import manifests as manifest_routes
from infra.db import make_engine, make_read_engine, make_session_factory
from infra.settings import Settings, load_settings


def create_app(settings: Settings | None = None, *, celery: Any = None, listen_host: str = "127.0.0.1") -> FastAPI:
    """Build the API. ``celery`` is the Celery app requests are published on (default: one built
    from ``settings``); pass the same app an embedded worker runs so that both share a broker.
    While the app runs (its lifespan), a dispatcher publishes stored requests (``workers.dispatcher``):
    no request waits on the broker. ``listen_host`` is the address the server listens on: off
    loopback, writes need the token (see ``api.guards``)."""
    from workers.dispatcher import Dispatcher

    settings = settings or load_settings()
    engine = make_engine(settings)
    read_engine = make_read_engine(engine)
    if celery is None:
        from workers.celery_app import make_celery

        celery = make_celery(settings)
    sessions = make_session_factory(engine)
    dispatcher = Dispatcher(celery, sessions)

    @asynccontextmanager
    async def lifespan(_app: FastAPI) -> AsyncIterator[None]:
        dispatcher.start()
        try:
            yield
        finally:
            dispatcher.stop()
            if read_engine is not engine:
                read_engine.dispose()

    app = FastAPI(
        lifespan=lifespan,
        title="slaplan",
        description="SLA profiler and deployment planner: DynamoGraphDeploymentRequests and BenchmarkJobs, "
        "served as a Kubernetes API server serves custom resources.",
        version="0.1.0",
        docs_url=None,  # served by api.routes.docs, without a CDN
        redoc_url=None,
    )
    app.state.settings = settings
    app.state.engine = engine
    app.state.read_engine = read_engine
    app.state.sessions = sessions
    app.state.celery = celery
    app.state.dispatcher = dispatcher
    app.state.enqueue = dispatcher.wake
    app.state.metrics = make_metrics(app.state.sessions)
    install_error_handlers(app)
    app.include_router(health.router)
    app.include_router(discovery.router)
    app.include_router(openapi.router)
    app.include_router(resources.router)
    app.include_router(manifest_routes.router)
    app.include_router(bench_results.router)
    app.include_router(dashboard.router)
    app.include_router(docs.router)
    openapi_doc.install(app)
    app.add_middleware(plain_reads, state=app.state)  # inside the guards: added before them
    app.add_middleware(guarded, settings=settings, metrics=app.state.metrics, listen_host=listen_host)
    return app

