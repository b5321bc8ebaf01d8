"""The engine plain reads run on (``infra.db.make_read_engine``)."""

from __future__ import annotations

import pytest
from sqlalchemy import text
from sqlalchemy.exc import DBAPIError

from infra import resources as repo
from infra.db import make_read_engine, session_scope


def _new(name: str) -> repo.ResourceCreate:
    return repo.ResourceCreate(group="ome.io", version="v1beta1", kind="BenchmarkJob", plural="benchmarkjobs",
                               namespace="default", name=name, spec={"task": "text-to-text"})


def test_on_sqlite_it_is_the_engine_itself(sessions):
    engine = sessions.kw["bind"]
    assert make_read_engine(engine) is engine


def test_on_postgresql_reads_commit_as_they_run_and_a_dropped_pool_is_replaced(pg_sessions):
    engine = pg_sessions.kw["bind"]
    with session_scope(pg_sessions) as s:
        created = repo.create_resource(s, _new("read"))
    reads = make_read_engine(engine)
    try:
        assert reads is not engine and not reads.pool._pre_ping
        with reads.connect() as connection:
            assert repo.get_stored(connection, created.key).name == "read"
            assert connection.execute(text("SELECT count(*) FROM pg_stat_activity WHERE state = 'idle in transaction' "
                                           "AND datname = current_database()")).scalar() == 0
        with engine.connect() as admin:  # the server drops the read pool's connection
            admin.execute(text("SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE pid <> pg_backend_pid() "
                               "AND datname = current_database()"))
        with pytest.raises(DBAPIError):  # not pinged: the first read finds out
            with reads.connect() as connection:
                repo.get_stored(connection, created.key)
        with reads.connect() as connection:  # and the pool's connections were replaced
            assert repo.get_stored(connection, created.key).name == "read"
    finally:
        reads.dispose()


def test_a_row_stored_before_its_text_was_kept_is_not_rendered_on_a_connection(sessions):
    from sqlalchemy import update

    from infra.tables import ResourceRow

    with session_scope(sessions) as s:
        created = repo.create_resource(s, _new("old"))
        s.execute(update(ResourceRow).values(object_json=None))
    with sessions.kw["bind"].connect() as connection:
        with pytest.raises(repo.TextNotKept):
            repo.get_stored(connection, created.key)
