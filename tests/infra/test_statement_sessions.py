"""Sessions whose statements commit by themselves (``infra.db.statement_sessions``)."""

from __future__ import annotations

from sqlalchemy import text

from infra import resources as repo
from infra.db import session_scope, statement_sessions


def _new(name: str) -> repo.ResourceCreate:
    return repo.ResourceCreate(group="ome.io", version="v1beta1", kind="BenchmarkJob", plural="benchmarkjobs",
                               namespace="default", name=name, spec={"task": "text-to-text"})


def test_on_sqlite_they_are_the_ordinary_sessions(sessions):
    assert statement_sessions(sessions) is sessions


def test_on_postgresql_a_write_is_committed_and_releases_the_counter_as_it_runs(pg_sessions):
    with session_scope(pg_sessions) as s:
        created = repo.create_resource(s, _new("first"))
    with session_scope(statement_sessions(pg_sessions)) as s:
        written = repo.update_status(s, {"state": "Running"}, uid=created.uid, expected_version=created.resource_version)
        # the writing session is still open: another sees the write, and takes the next version
        # without waiting for the counter's lock (an error, not a hang, if it had to)
        with session_scope(pg_sessions) as other:
            other.execute(text("SET LOCAL lock_timeout = '30s'"))
            assert repo.get_resource(other, created.key).status == {"state": "Running"}
            later = repo.create_resource(other, _new("later"))
        assert s.execute(text("SELECT count(*) FROM pg_stat_activity WHERE state = 'idle in transaction' "
                              "AND datname = current_database()")).scalar() == 0
    assert later.resource_version > written.resource_version > created.resource_version


def test_lease_and_receipt_writes_hold_no_row_lock_past_their_statement(pg_sessions, monkeypatch):
    """A worker's receipt and lease writes commit as they run: a versioned write of the same row
    (which holds the version counter while it waits) never waits for a worker whose process is
    off the CPU between its UPDATE and its COMMIT."""
    from datetime import timedelta
    from types import SimpleNamespace

    from infra import leases
    from workers import heartbeat, receipts
    from workers.tasks import PLAN_TASK

    with session_scope(pg_sessions) as s:
        created = repo.create_resource(s, _new("leased"))
    taken = leases.take
    written: list[str] = []

    def take_then_write(session, uid, owner, now, ttl):
        done = taken(session, uid, owner, now, ttl)
        with session_scope(pg_sessions) as other:  # while the worker's session is still open
            other.execute(text("SET LOCAL lock_timeout = '2s'"))  # an error, not a hang, if it had to wait
            repo.update_status(other, {"state": owner}, uid=uid)
        written.append(owner)
        return done

    monkeypatch.setattr(leases, "take", take_then_write)
    receipts.Receipts(pg_sessions, timedelta(seconds=15)).received(
        request=SimpleNamespace(task_name=PLAN_TASK, args=[created.uid]))
    with heartbeat.leased(pg_sessions, created.uid, timedelta(seconds=15), owner="task") as lease:
        assert lease is not None
    assert written[0].startswith(leases.RECEIPT) and written[1:] == ["task"]
