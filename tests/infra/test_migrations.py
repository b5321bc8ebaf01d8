"""Alembic migrations: an empty SQLite and an empty PostgreSQL database go up to head and back down;
`slaplan migrate` refuses what it cannot do (unknown revisions, the wrong direction, a newer database)."""

from __future__ import annotations

import pytest
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


@pytest.mark.slow
def test_postgresql_up_and_down(pg_url):
    _round_trip(pg_url)


def _object_json_storage(url: str) -> str:
    engine = create_engine(url)
    try:
        with engine.connect() as connection:
            return connection.exec_driver_sql(
                "SELECT attstorage FROM pg_attribute WHERE attrelid = 'slaplan_resources'::regclass"
                " AND attname = 'object_json'").scalar_one()
    finally:
        engine.dispose()


@pytest.mark.slow
def test_postgresql_keeps_object_texts_uncompressed_and_down_restores_the_default(pg_url):
    settings = load_settings({}, database_url=pg_url)
    migrate.upgrade(settings)
    assert _object_json_storage(pg_url) == "e"  # external: out of line, never compressed
    migrate.downgrade(settings, "0008_measured_runs")
    assert _object_json_storage(pg_url) == "x"  # extended: PostgreSQL's default for text



def _resource_indexes(url: str) -> set[str]:
    engine = create_engine(url)
    try:
        return {index["name"] for index in inspect(engine).get_indexes("slaplan_resources")}
    finally:
        engine.dispose()


@pytest.mark.slow
def test_postgresql_reads_by_key_have_only_the_key_index_and_down_restores_the_kind_index(pg_url):
    settings = load_settings({}, database_url=pg_url)
    migrate.upgrade(settings)
    engine = create_engine(pg_url)
    try:
        with engine.connect() as connection:  # a new table, never analysed: no statistics to go by
            plan = "\n".join(connection.exec_driver_sql(
                "EXPLAIN SELECT id FROM slaplan_resources WHERE \"group\" = 'g' AND plural = 'p'"
                " AND namespace = 'n' AND name = 'x'").scalars())
    finally:
        engine.dispose()
    assert "uq_slaplan_resources_identity" in plan, plan
    assert "ix_slaplan_resources_kind_ns" not in _resource_indexes(pg_url)
    migrate.downgrade(settings, "0009_object_json_uncompressed")
    assert "ix_slaplan_resources_kind_ns" in _resource_indexes(pg_url)


# --- refusals: what cannot be done is said in one line, and the database is left as it was ---------------

HEAD = migrate.revisions()[-1]  # the newest


def _at(url: str) -> str | None:
    engine = create_engine(url)
    try:
        return migrate.current_revision(engine)
    finally:
        engine.dispose()


def _set_version(url: str, revision: str) -> None:
    """Pretend another program (a newer slaplan) wrote the database."""
    from sqlalchemy import text

    engine = create_engine(url)
    try:
        with engine.begin() as connection:
            connection.execute(text(f"UPDATE {migrate.VERSION_TABLE} SET version_num = :r"), {"r": revision})
    finally:
        engine.dispose()


@pytest.fixture
def sqlite_url(tmp_path, monkeypatch):
    """A SQLite database that SLAPLAN_DATABASE_URL names, in a working directory of its own."""
    url = f"sqlite:///{tmp_path / 'slaplan.db'}"
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("SLAPLAN_DATABASE_URL", url)
    return url


def _cli(capsys, *argv: str) -> tuple[int, list[str]]:
    """Run ``slaplan ARGV`` in this process: (exit code, stderr lines)."""
    from api.cli import main

    try:
        code = main(list(argv))
    except SystemExit as exc:  # argparse's usage errors
        code = exc.code
    return code, capsys.readouterr().err.strip().splitlines()


@pytest.mark.parametrize("argv,says", [
    (["--revision", "bogus"], "argument --revision: unknown revision 'bogus': expected head or one of 0001_resources"),
    (["--down", "bogus"], "argument --down: unknown revision 'bogus': expected base or one of 0001_resources"),
    (["--revision", "-1"], "argument --revision: unknown revision '-1'"),  # relative revisions are not offered
    (["--revision", "+5"], "argument --revision: unknown revision '+5'"),
    (["--revision", ""], "argument --revision: unknown revision ''"),
    (["--down", ""], "argument --down: unknown revision ''"),  # once: "not given", so it upgraded to head
    (["--revision", HEAD, "--down", "base"], "argument --down: not allowed with argument --revision"),
])
def test_bad_revision_options_are_refused_before_anything_is_done(sqlite_url, capsys, argv, says):
    assert _cli(capsys, "migrate", "--revision", "0001_resources")[0] == 0
    code, err = _cli(capsys, "migrate", *argv)
    assert code == 2
    assert err[-1].startswith("slaplan migrate: error: ") and says in err[-1], err
    assert _at(sqlite_url) == "0001_resources"


def test_revision_below_the_database_says_to_go_down(sqlite_url, capsys):
    assert _cli(capsys, "migrate")[0] == 0
    code, err = _cli(capsys, "migrate", "--revision", "0001_resources")
    assert (code, err) == (2, [f"slaplan migrate: --revision 0001_resources: the database is already past it "
                               f"(at {HEAD}); use --down to go back"])
    assert _at(sqlite_url) == HEAD


def test_down_above_the_database_says_to_go_up(sqlite_url, capsys):
    assert _cli(capsys, "migrate", "--revision", "0001_resources")[0] == 0
    code, err = _cli(capsys, "migrate", "--down", "0002_calibrations")
    assert (code, err) == (2, ["slaplan migrate: --down 0002_calibrations: the database is below it "
                               "(at 0001_resources); a downgrade only goes back: use --revision to go up"])
    assert _at(sqlite_url) == "0001_resources"
    assert _cli(capsys, "migrate", "--down", "0001_resources") == (0, [])  # already there: nothing to do
    assert _cli(capsys, "migrate", "--down", "base") == (0, [])
    assert _cli(capsys, "migrate", "--down", "0001_resources")[0] == 2  # empty database: nothing is below


def test_revision_and_down_move_step_by_step(sqlite_url, capsys):
    for argv, revision in [(["--revision", "0002_calibrations"], "0002_calibrations"), ([], HEAD),
                           (["--down", "0001_resources"], "0001_resources"), (["--down", "base"], None)]:
        assert _cli(capsys, "migrate", *argv) == (0, [])
        assert _at(sqlite_url) == revision


NEWER = ("slaplan: invalid setting: SLAPLAN_DATABASE_URL: the database is at revision '0009_future', which this "
         "slaplan does not know: it was written by a newer slaplan (or is not a slaplan database)")


@pytest.mark.parametrize("argv", [["migrate"], ["migrate", "--down", "base"], ["calibrate", "--list-calibrations"]])
def test_a_database_from_a_newer_slaplan_is_one_line(sqlite_url, capsys, argv):
    assert _cli(capsys, "migrate")[0] == 0
    _set_version(sqlite_url, "0009_future")
    assert _cli(capsys, *argv) == (2, [NEWER])
    assert _at(sqlite_url) == "0009_future"


@pytest.mark.slow
def test_a_database_from_a_newer_slaplan_is_refused_by_every_entry_point(pg_url):
    settings = load_settings({}, database_url=pg_url)
    migrate.upgrade(settings)
    _set_version(pg_url, "0009_future")
    for call in (migrate.upgrade, migrate.downgrade, migrate.require_current):
        with pytest.raises(migrate.SchemaError, match="written by a newer slaplan"):
            call(settings)
    assert _at(pg_url) == "0009_future"


def test_require_current_says_what_to_run(tmp_path):
    settings = load_settings({}, database_url=f"sqlite:///{tmp_path / 'r.db'}")
    with pytest.raises(migrate.SchemaError, match=r"the database is not migrated: run `slaplan migrate`"):
        migrate.require_current(settings)
    migrate.upgrade(settings, "0002_calibrations")
    with pytest.raises(migrate.SchemaError, match=rf"at revision 0002_calibrations, not the newest \({HEAD}\)"):
        migrate.require_current(settings)
    migrate.upgrade(settings)
    migrate.require_current(settings)


@pytest.mark.slow
def test_the_cli_never_shows_a_traceback(tmp_path):
    # The refusals above, as a user sees them: one line, no Traceback, in a real process.
    import os
    import subprocess

    from procs import SLAPLAN

    env = {**os.environ, "SLAPLAN_DATABASE_URL": f"sqlite:///{tmp_path / 'x.db'}"}
    for argv in (["--revision", "+5"], ["--down", "bogus"]):
        done = subprocess.run([*SLAPLAN, "migrate", *argv], env=env, cwd=tmp_path, capture_output=True,
                              text=True, timeout=60)
        assert done.returncode == 2 and "Traceback" not in done.stderr, done.stderr
        assert done.stderr.strip().splitlines()[-1].startswith("slaplan migrate: error: argument ")
