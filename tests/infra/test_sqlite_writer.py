"""SQLite writers take turns by the writer lock: a second writer waits for the first to end its
transaction instead of meeting SQLite's busy handler. Every connection here has a busy timeout
of 0, so a writer that reached SQLite while another held its write lock would fail at once."""

from __future__ import annotations

import sqlite3
import subprocess
import sys
import threading
import time

import pytest
from paths import ROOT

from infra.sqlite_writer import connection_factory, writer_lock


def _connect(path, lock=None) -> sqlite3.Connection:
    factory = connection_factory(lock or writer_lock(str(path)))
    return sqlite3.connect(path, timeout=0, factory=factory, check_same_thread=False)


@pytest.fixture
def database(tmp_path):
    path = tmp_path / "w.db"
    with sqlite3.connect(path) as setup:
        setup.execute("PRAGMA journal_mode=WAL")
        setup.execute("CREATE TABLE t (who TEXT)")
    return path


def _waiting_in_acquire(thread: threading.Thread) -> bool:
    """Whether ``thread`` is waiting for the writer lock (its innermost frame is ``acquire``)."""
    frame = sys._current_frames().get(thread.ident)
    return frame is not None and frame.f_code.co_name == "acquire"


def _wait_until(check, what: str, limit_s: float = 60.0) -> None:
    deadline = time.monotonic() + limit_s
    while not check():
        assert time.monotonic() < deadline, f"never saw {what}"
        time.sleep(0.01)


def _write_in_thread(path, who: str, lock=None) -> tuple[threading.Thread, list]:
    errors: list = []

    def write() -> None:
        connection = _connect(path, lock)
        try:
            connection.execute("INSERT INTO t VALUES (?)", (who,))
            connection.commit()
        except Exception as exc:  # reported by the test
            errors.append(exc)
        finally:
            connection.close()

    thread = threading.Thread(target=write)
    thread.start()
    return thread, errors


def test_a_second_writer_in_the_process_waits_for_the_first(database):
    first = _connect(database)
    first.execute("INSERT INTO t VALUES ('first')")  # holds SQLite's write lock until its commit
    thread, errors = _write_in_thread(database, "second")
    _wait_until(lambda: _waiting_in_acquire(thread), "the second writer wait for the lock")
    first.commit()
    thread.join(60)
    assert errors == []
    rows = [who for (who,) in first.execute("SELECT who FROM t ORDER BY rowid")]
    assert rows == ["first", "second"]
    first.close()


def test_without_the_lock_the_second_writer_fails_at_once(database):
    """The check above can fail: a plain connection with the same busy timeout is refused."""
    first = _connect(database)
    first.execute("INSERT INTO t VALUES ('first')")
    plain = sqlite3.connect(database, timeout=0)
    with pytest.raises(sqlite3.OperationalError, match="locked"):
        plain.execute("INSERT INTO t VALUES ('second')")
    first.commit()
    first.close()
    plain.close()


HOLDER = """
import sqlite3, sys
sys.path.insert(0, sys.argv[1])
from infra.sqlite_writer import connection_factory, writer_lock
connection = sqlite3.connect(sys.argv[2], timeout=0, factory=connection_factory(writer_lock(sys.argv[2])))
connection.execute("INSERT INTO t VALUES ('other process')")
print("holding", flush=True)
sys.stdin.readline()
connection.commit()
"""


def test_a_writer_waits_for_a_writer_of_another_process(database):
    holder = subprocess.Popen([sys.executable, "-c", HOLDER, str(ROOT), str(database)],
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "holding"
        thread, errors = _write_in_thread(database, "this process")
        _wait_until(lambda: _waiting_in_acquire(thread), "this process's writer wait for the other's")
        holder.stdin.write("\n")
        holder.stdin.flush()
        assert holder.wait(60) == 0
        thread.join(60)
    finally:
        if holder.poll() is None:
            holder.kill()
    assert errors == []
    with sqlite3.connect(database) as reader:
        assert [who for (who,) in reader.execute("SELECT who FROM t ORDER BY rowid")] == ["other process", "this process"]


def test_a_failed_write_lets_the_lock_go(database):
    """A statement that fails (no such table) ends nothing it began: the next writer goes on."""
    first = _connect(database)
    with pytest.raises(sqlite3.OperationalError, match="no such table"):
        first.execute("INSERT INTO missing VALUES (1)")
    first.rollback()
    thread, errors = _write_in_thread(database, "next")
    thread.join(60)
    assert not thread.is_alive() and errors == []
    first.close()
