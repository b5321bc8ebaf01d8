"""What the tasks of one Celery app share, typed: its settings, its database sessions, its cluster
and (in ``slaplan serve``) its pool of planning processes.

The tasks close over one ``WorkerContext`` (``workers.celery_app.register_tasks``); nothing is
hung on the Celery app. The session factory and the cluster client are made on first use, so
building an app (the API does, to publish) opens no database and reaches no cluster.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Generic, TypeVar

from infra.db import SessionFactory
from infra.kube import Cluster
from infra.settings import Settings
from workers.plan_pool import PlanPool

T = TypeVar("T")
Connector = Callable[[], Cluster]


class Once(Generic[T]):
    """A value made by ``make`` on the first call, by one thread; the same value after."""

    def __init__(self, make: Callable[[], T]):
        self._make = make
        self._lock = threading.Lock()
        self._made = False
        self._value: T | None = None

    def __call__(self) -> T:
        if not self._made:
            with self._lock:
                if not self._made:
                    self._value = self._make()
                    self._made = True
        return self._value  # type: ignore[return-value]


def _session_factory(settings: Settings) -> SessionFactory:
    from infra.db import make_engine, make_session_factory

    return make_session_factory(make_engine(settings))


def _cluster(settings: Settings) -> Cluster:
    from infra.kube import cluster_from_settings

    return cluster_from_settings(settings)


@dataclass(frozen=True)
class WorkerContext:
    """One app's shared state. ``sessions()``: the database session factory; ``cluster``: a
    connector to the configured cluster (connected once, on first use), None when none is
    configured; ``plan_pool``: child processes to plan DGDRs in, empty unless started."""

    settings: Settings
    sessions: Once[SessionFactory]
    cluster: Connector | None
    plan_pool: PlanPool

    @classmethod
    def of(cls, settings: Settings, *, plan_pool: PlanPool | None = None) -> WorkerContext:
        connect = None if settings.cluster == "none" else Once(lambda: _cluster(settings))
        return cls(settings=settings, sessions=Once(lambda: _session_factory(settings)), cluster=connect,
                   plan_pool=plan_pool or PlanPool(settings))

    def next_check(self) -> datetime:
        """When an applied deployment is next checked (``settings.deploy_check_seconds`` from now)."""
        return datetime.now(UTC) + timedelta(seconds=self.settings.deploy_check_seconds)

    @property
    def lease(self) -> timedelta:
        """How long a task's lease on its request lasts unless renewed."""
        return timedelta(seconds=self.settings.lease_seconds)
