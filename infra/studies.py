"""Optuna studies of online searches, stored in the service database (Optuna's RDB storage).

Optuna creates its own tables (``studies``, ``trials``, ``trial_heartbeats``, …, and its own
``alembic_version``). None of ours shares a name (ours are ``slaplan_*``; our Alembic keeps
``slaplan_alembic_version``); on PostgreSQL they live apart anyway, in the schema
``OPTUNA_SCHEMA``. One study per DGDR (and spec generation), named after its uid, so a restarted worker resumes it and
several workers can run trials of it at once.

A worker that dies mid-trial leaves the trial RUNNING. Each running trial records a heartbeat
every ``heartbeat_s``; a trial whose heartbeat is older than ``2 × heartbeat_s`` is failed by the
next worker that asks for a trial, and retried once (Optuna re-enqueues its parameters).

``StudyLedger`` is the online search's ledger (``planner.ledger.Ledger``) on one such study.
"""

from __future__ import annotations

import logging
import threading
import time
import warnings
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import AbstractContextManager, contextmanager
from typing import Any

import optuna

from planner.ledger import LedgerTrial, Outcome

log = logging.getLogger(__name__)

OPTUNA_SCHEMA = "slaplan_optuna"
STUDY_PREFIX = "slaplan-dgdr-"
CREATE_ATTEMPTS = 4


def study_name(uid: str, generation: int) -> str:
    """The study of generation ``generation`` of the DGDR with ``uid`` (an edited spec starts afresh)."""
    return f"{STUDY_PREFIX}{uid}-g{generation}"


def storage(database_url: str, *, heartbeat_s: int = 60) -> optuna.storages.RDBStorage:
    """Optuna's storage in the database at ``database_url`` (SQLite file or PostgreSQL).

    The first use creates Optuna's tables; workers starting together on a fresh database race
    to do it, so the loser tries again."""
    from sqlalchemy.exc import SQLAlchemyError

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    for attempt in range(CREATE_ATTEMPTS):
        try:
            return _storage(database_url, heartbeat_s)
        except SQLAlchemyError:
            if attempt == CREATE_ATTEMPTS - 1:
                raise
            time.sleep(0.2 * (attempt + 1))
    raise AssertionError("unreachable")


def _storage(database_url: str, heartbeat_s: int) -> optuna.storages.RDBStorage:
    kwargs: dict = {}
    if database_url.startswith("sqlite"):
        kwargs = {"connect_args": {"timeout": 30}}
    elif database_url.startswith("postgresql"):
        _create_schema(database_url)
        kwargs = {"connect_args": {"options": f"-csearch_path={OPTUNA_SCHEMA}"}, "pool_pre_ping": True}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
        store = optuna.storages.RDBStorage(
            database_url, engine_kwargs=kwargs, heartbeat_interval=heartbeat_s, grace_period=2 * heartbeat_s,
            heartbeat_stale_trial_callback=optuna.storages.RetryHeartbeatStaleTrialCallback(max_retry=1))
    if store.engine.dialect.name == "sqlite":
        _lock_on_begin(store.engine)
    return store


def _lock_on_begin(engine) -> None:
    """Make every transaction on a SQLite ``engine`` take the database's write lock when it begins.

    Optuna claims a waiting trial by reading its state and then writing RUNNING, with the row
    locked by ``SELECT … FOR UPDATE``, which SQLite ignores: workers asking at the same moment
    could all claim the same trial and measure the same candidate. PostgreSQL locks the row.
    """
    from sqlalchemy import event

    @event.listens_for(engine, "connect")
    def _no_implicit_begin(dbapi_connection, _record) -> None:
        dbapi_connection.isolation_level = None  # the driver's own BEGIN would take no lock

    @event.listens_for(engine, "begin")
    def _begin_immediate(connection) -> None:
        connection.exec_driver_sql("BEGIN IMMEDIATE")

    engine.dispose()  # connections opened before the listeners (creating the tables) are not reused


def _create_schema(database_url: str) -> None:
    from sqlalchemy import create_engine, text

    engine = create_engine(database_url)
    try:
        with engine.begin() as conn:
            conn.execute(text(f"CREATE SCHEMA IF NOT EXISTS {OPTUNA_SCHEMA}"))
    finally:
        engine.dispose()


def open_study(store: optuna.storages.RDBStorage, name: str) -> optuna.Study:
    """The study ``name`` (created on first use, loaded after), maximizing goodput per GPU."""
    return optuna.create_study(storage=store, study_name=name, direction="maximize", load_if_exists=True)


def fail_stale(study: optuna.Study) -> None:
    """Fail (and re-enqueue once) trials of workers that stopped sending heartbeats."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
        optuna.storages.fail_stale_trials(study)


def ask(study: optuna.Study) -> optuna.Trial:
    """``study.ask()`` outside ``optimize`` (Optuna warns about heartbeats there; we send them)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        return study.ask()


@contextmanager
def heartbeat(store: optuna.storages.RDBStorage, trial: optuna.Trial) -> Iterator[None]:
    """Record ``trial``'s heartbeat every interval while the block runs."""
    stop = threading.Event()
    interval = store.get_heartbeat_interval() or 60

    def beat() -> None:
        while True:
            try:
                store.record_heartbeat(trial._trial_id)
            except Exception:  # the database away for a moment: the next beat may get through
                log.warning("could not record the heartbeat of trial %s", trial.number, exc_info=True)
            if stop.wait(interval):
                return

    thread = threading.Thread(target=beat, name=f"heartbeat-{trial.number}", daemon=True)
    thread.start()
    try:
        yield
    finally:
        stop.set()
        thread.join()


UNIT_PARAM = "unit"  # the trial parameters: the unit's key and the run's closed-loop clients
CONCURRENCY_PARAM = "concurrency"
_STATES = {optuna.trial.TrialState.WAITING: "waiting", optuna.trial.TrialState.RUNNING: "running",
           optuna.trial.TrialState.COMPLETE: "complete", optuna.trial.TrialState.FAIL: "fail",
           optuna.trial.TrialState.PRUNED: "pruned"}
_OUTCOMES = {"complete": optuna.trial.TrialState.COMPLETE, "fail": optuna.trial.TrialState.FAIL,
             "pruned": optuna.trial.TrialState.PRUNED}


class StudyLedger:
    """``planner.ledger.Ledger`` on an Optuna study in an RDB storage: a trial's run is its
    parameters ``UNIT_PARAM`` and ``CONCURRENCY_PARAM``, what the search records are its user attributes, and the start of
    the search is the study's user attribute ``started``."""

    def __init__(self, store: optuna.storages.RDBStorage, study: optuna.Study):
        self._store = store
        self._study = study
        self._asked: dict[int, optuna.Trial] = {}  # the trials this worker asked for, by number

    @property
    def name(self) -> str:
        return self._study.study_name

    def trials(self) -> list[LedgerTrial]:
        return [LedgerTrial(number=t.number, state=_STATES[t.state], unit=t.params.get(UNIT_PARAM), value=t.value,
                            attrs=t.user_attrs, concurrency=t.params.get(CONCURRENCY_PARAM))
                for t in self._study.get_trials(deepcopy=False)]

    def started(self, clock: Callable[[], float]) -> float:
        if "started" not in self._study.user_attrs:
            self._study.set_user_attr("started", clock())
        return self._study.user_attrs["started"]

    def fail_stale(self) -> None:
        fail_stale(self._study)

    def enqueue(self, unit: str, concurrency: int) -> None:
        self._study.enqueue_trial({UNIT_PARAM: unit, CONCURRENCY_PARAM: concurrency})

    def ask(self, units: Sequence[str], concurrency: Sequence[int]) -> LedgerTrial:
        trial = ask(self._study)
        unit = trial.suggest_categorical(UNIT_PARAM, list(units))
        clients = trial.suggest_categorical(CONCURRENCY_PARAM, list(concurrency))
        self._asked[trial.number] = trial
        return LedgerTrial(number=trial.number, state="running", unit=unit, value=None, attrs={}, concurrency=clients)

    def set_attrs(self, number: int, attrs: Mapping[str, Any]) -> None:
        trial = self._asked[number]
        for key, value in attrs.items():
            trial.set_user_attr(key, value)

    def tell(self, number: int, outcome: Outcome, value: float | None = None) -> None:
        trial = self._asked.pop(number)
        if outcome == "complete":
            self._study.tell(trial, value)
        else:
            self._study.tell(trial, state=_OUTCOMES[outcome])

    def keep_alive(self, number: int) -> AbstractContextManager[None]:
        return heartbeat(self._store, self._asked[number])
