"""One writer at a time on a SQLite file, handed on at once instead of by SQLite's busy handler.

SQLite lets one connection write at a time. A connection that finds the write lock taken calls
its busy handler, which sleeps and tries again (1, 2, 5, 10, … up to 100 ms between tries), so a
write that waited for another of a few milliseconds often waited tens: the long tail of the
embedded service's answers. Here every connection of ``infra.db`` takes a writer lock before the
first write statement of a transaction and lets it go when the transaction ends: a thread of this
process waits on a lock that wakes it when the writer before it is done, and processes (``slaplan
serve`` and its planning children) take turns by an ``flock`` of a file beside the database, which
the kernel hands on the same way. Reads take nothing (WAL: readers never wait for the writer).
Connections outside (the ``sqlite3`` shell, another program) still meet SQLite's busy handler.
"""

from __future__ import annotations

import fcntl
import os
import sqlite3
import threading

WRITES = ("INSERT", "UPDATE", "DELETE", "REPLAC")  # the statements that take SQLite's write lock
SUFFIX = "-writer"  # the lock file: the database file's name with this added

_locks: dict[str, WriterLock] = {}
_locks_guard = threading.Lock()


class WriterLock:
    """The writer lock of one database file in this process, held across processes by an
    ``flock`` of ``path`` (None: this process only, e.g. where the directory is read-only).
    Re-entrant for the thread holding it (a thread writing on two connections at once waits on
    SQLite, as it did before); let go by any thread (a session may be closed by another thread
    than the one that wrote)."""

    def __init__(self, path: str | None) -> None:
        self._lock = threading.Lock()
        self._owner: int | None = None  # the thread holding it
        self._depth = 0
        self._path = path
        self._fd: int | None = None

    def acquire(self) -> None:
        me = threading.get_ident()
        if self._owner == me:
            self._depth += 1
            return
        self._lock.acquire()
        self._owner, self._depth = me, 1
        if self._file() is not None:
            fcntl.flock(self._fd, fcntl.LOCK_EX)

    def release(self) -> None:
        self._depth -= 1
        if self._depth == 0:
            if self._fd is not None:
                fcntl.flock(self._fd, fcntl.LOCK_UN)
            self._owner = None
            self._lock.release()

    def _file(self) -> int | None:
        """The lock file, opened on first use and kept open (None when it cannot be)."""
        if self._fd is None and self._path is not None:
            try:
                self._fd = os.open(self._path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
            except OSError:  # a read-only directory: nothing here can write the database either
                self._path = None
        return self._fd


def writer_lock(database_file: str | None) -> WriterLock:
    """The process's writer lock of ``database_file`` (None: an in-memory database)."""
    key = os.path.realpath(database_file) if database_file else ""
    with _locks_guard:
        if key not in _locks:
            _locks[key] = WriterLock(key + SUFFIX if key else None)
        return _locks[key]


class _Cursor(sqlite3.Cursor):
    def execute(self, sql, parameters=(), /):
        self.connection.before(sql)
        try:
            return super().execute(sql, parameters)
        finally:
            self.connection.after()

    def executemany(self, sql, parameters, /):
        self.connection.before(sql)
        try:
            return super().executemany(sql, parameters)
        finally:
            self.connection.after()


class WriterConnection(sqlite3.Connection):
    """A sqlite3 connection that holds its database's ``WriterLock`` from its first write
    statement until its transaction ends (commit, rollback, close, or a statement that ended it).
    Made by ``sqlite3.connect(..., factory=connection_factory(lock))``."""

    writer: WriterLock
    holding = False

    def cursor(self, factory=_Cursor):
        return super().cursor(factory)

    def execute(self, sql, parameters=(), /):  # the shortcut would bypass the cursor's execute
        return self.cursor().execute(sql, parameters)

    def executemany(self, sql, parameters, /):
        return self.cursor().executemany(sql, parameters)

    def before(self, sql: str) -> None:
        if not self.holding and sql.lstrip()[:6].upper() in WRITES:
            self.writer.acquire()
            self.holding = True

    def after(self) -> None:
        if self.holding and not self.in_transaction:  # autocommit, or the statement failed before BEGIN
            self._let_go()

    def commit(self) -> None:
        try:
            super().commit()
        finally:
            self._let_go()

    def rollback(self) -> None:
        try:
            super().rollback()
        finally:
            self._let_go()

    def close(self) -> None:
        try:
            super().close()
        finally:
            self._let_go()

    def _let_go(self) -> None:
        if self.holding:
            self.holding = False
            self.writer.release()


def connection_factory(lock: WriterLock) -> type[WriterConnection]:
    """A ``WriterConnection`` class whose connections take ``lock``."""
    return type("WriterConnection", (WriterConnection,), {"writer": lock})
