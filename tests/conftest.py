"""Fixtures shared by the test modules: a migrated SQLite database with its sessions, the engine
emulator, and the real services the integration tests use: the machine's PostgreSQL (a fresh
database per test) and a redis-server the test session starts on a free port.

Outside CI a missing service skips the test with the reason; in CI (``CI`` set), where
.ci/run starts PostgreSQL, it fails the test instead, so a broken service cannot hide.
"""

from __future__ import annotations

import os
import shutil
import uuid

import pytest

PG_ADMIN = "host=127.0.0.1 port=5432 user=postgres dbname=postgres"


@pytest.fixture(autouse=True, scope="session")
def _no_hub_network():
    """Tests never reach the Hugging Face Hub: names the catalog lacks are looked up in the
    local cache only (``HF_HUB_OFFLINE``), failing at once instead of after network retries."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("HF_HUB_OFFLINE", "1")
        yield


@pytest.fixture(autouse=True, scope="session")
def _no_user_database(tmp_path_factory):
    """Tests never read or write the user's database: the per-user default lives in a data
    directory of the session's own (``XDG_DATA_HOME``), and SLAPLAN_DATABASE_URL from the shell is
    dropped; tests that want a database name one."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("XDG_DATA_HOME", str(tmp_path_factory.mktemp("data-home")))
        patch.delenv("SLAPLAN_DATABASE_URL", raising=False)
        yield


def _unavailable(message: str) -> None:
    if os.environ.get("CI"):
        pytest.fail(message)
    pytest.skip(message)


@pytest.fixture
def pg_url():
    """URL of a fresh PostgreSQL database, dropped afterwards."""
    import psycopg

    name = f"slaplan_test_{uuid.uuid4().hex[:10]}"
    try:
        admin = psycopg.connect(PG_ADMIN, autocommit=True, connect_timeout=3)
    except psycopg.OperationalError as exc:
        _unavailable(f"PostgreSQL not reachable on 127.0.0.1:5432: {exc}")
    try:
        admin.execute(f'CREATE DATABASE "{name}"')
        yield f"postgresql+psycopg://postgres@127.0.0.1:5432/{name}"
    finally:
        admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        admin.close()


@pytest.fixture(scope="session")
def _session_redis(tmp_path_factory):
    """Port of a redis-server this test session starts and stops: another checkout's tests on the
    same machine never take this session's tasks, nor it theirs."""
    from procs import free_port, start_redis, stop

    if shutil.which("redis-server") is None:
        _unavailable("redis-server is not installed")
    port = free_port()
    proc = start_redis(tmp_path_factory.mktemp("redis"), port)
    yield port
    stop(proc)


@pytest.fixture
def redis_url(_session_redis):
    """URL of the Redis database the tests may use (the session's own redis-server)."""
    return f"redis://127.0.0.1:{_session_redis}/11"


@pytest.fixture
def database_url(tmp_path):
    """URL of the SQLite file the ``sessions`` fixture opens."""
    return f"sqlite:///{tmp_path / 'sessions.db'}"


def _migrated_sessions(database_url: str):
    """A session factory on the database at ``database_url``, migrated first; the engine is
    disposed of when the generator closes (a fixture's body)."""
    from infra import migrate
    from infra.db import make_engine, make_session_factory
    from infra.settings import load_settings

    settings = load_settings({}, database_url=database_url)
    migrate.upgrade(settings)
    engine = make_engine(settings)
    yield make_session_factory(engine)
    engine.dispose()


@pytest.fixture
def sessions(database_url):
    """A session factory on a freshly migrated SQLite database."""
    yield from _migrated_sessions(database_url)


@pytest.fixture
def pg_sessions(pg_url):
    """A session factory on a freshly migrated PostgreSQL database."""
    yield from _migrated_sessions(pg_url)


@pytest.fixture(scope="module")
def emulator():
    """Base URL of a ``slaplan emulate`` process serving the module's tests."""
    from procs import start_emulator, stop

    proc, base = start_emulator()
    yield base
    stop(proc)
