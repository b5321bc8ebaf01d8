"""Database engine and sessions, built from settings (never at import time)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from functools import cache

from sqlalchemy import Connection, Engine, create_engine, event, text
from sqlalchemy.orm import Session, sessionmaker

from infra.settings import Settings

SessionFactory = sessionmaker[Session]
# What a read runs on: a session, or a connection (reads of Core statements only).
Reader = Session | Connection


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
    return create_engine(url, pool_pre_ping=True, pool_size=POOL_SIZE, max_overflow=POOL_OVERFLOW,
                         json_deserializer=from_json)


POOL_SIZE = 5  # PostgreSQL connections an engine keeps open
POOL_OVERFLOW = 10  # and opens beyond those while all are in use


def make_read_engine(engine: Engine) -> Engine:
    """An engine on ``engine``'s database for reads whose caller answers another way when they
    fail (``api.plain_reads``). On PostgreSQL: a pool of its own whose connections are not pinged
    at each checkout (a round trip per read: ``engine``'s are), each statement committing by
    itself. A connection the server has dropped fails its read; SQLAlchemy then replaces every
    connection of the pool, and the caller reads again on ``engine``. Elsewhere ``engine`` itself."""
    from pydantic_core import from_json

    if engine.dialect.name != "postgresql":
        return engine
    return create_engine(engine.url, pool_size=POOL_SIZE, max_overflow=POOL_OVERFLOW, json_deserializer=from_json,
                         isolation_level="AUTOCOMMIT")


def _sqlite_pragmas(dbapi_connection, _record) -> None:
    cursor = dbapi_connection.cursor()
    cursor.execute("PRAGMA journal_mode=WAL")
    cursor.execute("PRAGMA busy_timeout=30000")
    cursor.execute("PRAGMA synchronous=NORMAL")
    cursor.close()


def make_session_factory(engine: Engine) -> SessionFactory:
    return sessionmaker(bind=engine, expire_on_commit=False)


@cache
def statement_sessions(factory: SessionFactory) -> SessionFactory:
    """Sessions from ``factory``'s engine in which each statement commits by itself, for work that
    only reads or writes in one statement (a create, a status write: ``infra.events.write_versioned``
    takes the version, writes the row and records the change in one statement on PostgreSQL; a
    lease, a receipt or a dispatcher's claim, each one UPDATE).

    On PostgreSQL (autocommit): no BEGIN and COMMIT round trips, and no connection idle in a
    transaction while its process does other work, holding the version counter's row lock that
    every writer waits for, or a resource's row lock that a versioned write of that row waits for
    while holding the counter (a niced worker off the CPU, a thread waiting for the interpreter). A
    read sees what it would in a transaction (READ COMMITTED takes a snapshot per statement). A
    write that changes no row (a lost race) still uses up a version there: versions may skip,
    never repeat or go back. Work of several writes that stand or fall together does not belong
    here. Elsewhere ``factory`` itself: SQLite's driver begins no transaction for a read, and
    its write is three statements."""
    engine = factory.kw["bind"]
    if engine.dialect.name != "postgresql":
        return factory
    return make_session_factory(engine.execution_options(isolation_level="AUTOCOMMIT"))


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
