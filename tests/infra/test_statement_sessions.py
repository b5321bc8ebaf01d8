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
