"""Alembic migrations: an empty SQLite and an empty PostgreSQL database go up to head and back down."""

from __future__ import annotations


from sqlalchemy import create_engine, inspect

from infra import migrate
from infra.settings import load_settings

PG_ADMIN = "postgresql+psycopg://postgres@127.0.0.1:5432/postgres"


def _tables(url: str) -> set[str]:
    engine = create_engine(url)
    try:
        return set(inspect(engine).get_table_names())
    finally:
        engine.dispose()


def _round_trip(url: str) -> None:
    settings = load_settings({}, database_url=url)
    assert _tables(url) == set()
    migrate.upgrade(settings)
    tables = _tables(url)
    assert {"slaplan_resources", "slaplan_alembic_version"} <= tables
    assert "alembic_version" not in tables  # our version table must not collide with other tools'
    engine = create_engine(url)
    try:
        assert migrate.current_revision(engine) == migrate.head_revision(settings)
        assert migrate.is_up_to_date(settings, engine)
        assert _schema_matches_models(engine)
    finally:
        engine.dispose()
    migrate.upgrade(settings)  # idempotent
    migrate.downgrade(settings, "base")
    assert _tables(url) <= {"slaplan_alembic_version"}


def _schema_matches_models(engine) -> bool:
    from alembic.autogenerate import compare_metadata
    from alembic.runtime.migration import MigrationContext

    from infra.tables import Base

    with engine.connect() as connection:
        context = MigrationContext.configure(connection, opts={"version_table": migrate.VERSION_TABLE})
        diff = compare_metadata(context, Base.metadata)
    assert diff == [], diff
    return True


def test_sqlite_up_and_down(tmp_path):
    _round_trip(f"sqlite:///{tmp_path / 'slaplan.db'}")


def test_postgresql_up_and_down(pg_url):
    _round_trip(pg_url)
