"""Database engine and sessions, built from settings (never at import time)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from sqlalchemy import Engine, create_engine, event, text
from sqlalchemy.orm import Session, sessionmaker

from infra.settings import Settings

SessionFactory = sessionmaker[Session]


def make_engine(settings: Settings) -> Engine:
    """An engine for ``settings.database_url``.

    SQLite runs in WAL mode with a busy timeout so that the API threads and an embedded
    worker can write the same file (its directory is made, as the per-user default's may not
    exist yet); PostgreSQL uses a small pre-pinged pool. JSON columns are decoded by
    pydantic-core's parser (compiled; faster than the standard library's on the large statuses
    lists read).
    """
    from pydantic_core import from_json

    url = settings.database_url
    if url.startswith("sqlite"):
        if settings.database_file is not None:
            settings.database_file.parent.mkdir(parents=True, exist_ok=True)
        engine = create_engine(url, connect_args={"check_same_thread": False, "timeout": 30}, json_deserializer=from_json)
        event.listen(engine, "connect", _sqlite_pragmas)
        return engine
    return create_engine(url, pool_pre_ping=True, pool_size=5, max_overflow=10, json_deserializer=from_json)


def _sqlite_pragmas(dbapi_connection, _record) -> None:
    cursor = dbapi_connection.cursor()
    cursor.execute("PRAGMA journal_mode=WAL")
    cursor.execute("PRAGMA busy_timeout=30000")
    cursor.execute("PRAGMA synchronous=NORMAL")
    cursor.close()


def make_session_factory(engine: Engine) -> SessionFactory:
    return sessionmaker(bind=engine, expire_on_commit=False)


def make_autocommit_session_factory(engine: Engine) -> SessionFactory:
    """Sessions in which each statement commits by itself: for work that only reads, or writes
    in one statement (a create: the row, its version and its change). No transaction is begun
    (on PostgreSQL a round trip) nor ended by the client (another), and no connection sits idle
    in a transaction while its process does other work (a request handing its answer back to
    the event loop; a writer between its statement and its COMMIT, holding the version counter
    that every other writer waits for). Reads see what they would in a transaction:
    PostgreSQL's READ COMMITTED takes a snapshot per statement, and SQLite's driver begins no
    transaction for reads. Work of several writes that must stand or fall together does not
    belong here. On SQLite these are ordinary sessions: its driver begins a transaction only
    for a write, and a create there is three statements (``infra.events.write_versioned``)."""
    if engine.dialect.name == "sqlite":
        return make_session_factory(engine)
    return sessionmaker(bind=engine.execution_options(isolation_level="AUTOCOMMIT"), expire_on_commit=False)


@contextmanager
def session_scope(factory: SessionFactory) -> Iterator[Session]:
    """One unit of work: commit on success, roll back on error."""
    session = factory()
    try:
        yield session
        session.commit()
    except BaseException:
        session.rollback()
        raise
    finally:
        session.close()


def ping(engine: Engine) -> None:
    """Raise if the database cannot answer a trivial query."""
    with engine.connect() as connection:
        connection.execute(text("SELECT 1"))
