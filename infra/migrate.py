"""Schema migrations: upgrade (``slaplan migrate``) or downgrade the database with Alembic.

Every entry point (``upgrade``, ``downgrade``, ``require_current``) first reads the database's
revision: one this slaplan does not know (written by a newer slaplan, or not a slaplan
database) is refused with ``SchemaError`` instead of Alembic's traceback. Revisions form one
line, oldest first; a target must be a revision of it (or ``head`` / ``base``).
"""

from __future__ import annotations

from pathlib import Path

from alembic import command
from alembic.config import Config
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory
from sqlalchemy import Engine

from infra.db import make_engine
from infra.settings import Settings, SettingsError

VERSION_TABLE = "slaplan_alembic_version"
HEAD = "head"  # the newest revision
BASE = "base"  # the empty database


class SchemaError(SettingsError):
    """The database (SLAPLAN_DATABASE_URL) is at a schema this slaplan cannot use; the message
    names the variable and says why."""


class RevisionError(ValueError):
    """A target revision that does not exist, or lies the wrong way from the database's."""


def _script_location() -> str:
    """The folder of Alembic's scripts: the ``migrations`` package, installed beside ``infra``.
    Read as files, not imported: migrations import infra, never the other way."""
    return str(Path(__file__).resolve().parents[1] / "migrations")


def alembic_config(settings: Settings) -> Config:
    """An Alembic config pointing at our migration scripts and the settings' database."""
    config = Config()
    config.set_main_option("script_location", _script_location())
    # Percent signs in URLs (escaped passwords) must be doubled for configparser.
    config.set_main_option("sqlalchemy.url", settings.database_url.replace("%", "%%"))
    return config


def revisions() -> list[str]:
    """Every revision this slaplan knows, oldest first."""
    return [script.revision for script in reversed(list(ScriptDirectory(_script_location()).walk_revisions()))]


def known_target(revision: str, keyword: str) -> str:
    """``revision`` if it is a known revision or ``keyword`` (``head`` to upgrade, ``base`` to
    downgrade); else RevisionError listing what is accepted."""
    known = revisions()
    if revision != keyword and revision not in known:
        raise RevisionError(f"unknown revision {revision!r}: expected {keyword} or one of {', '.join(known)}")
    return revision


def upgrade(settings: Settings, revision: str = HEAD) -> None:
    """Migrate the database up to ``revision`` (default: the newest); at it already, nothing is done.

    RevisionError for an unknown revision or one the database is already past (that needs a
    downgrade); SchemaError for a database at a revision this slaplan does not know.
    """
    known = revisions()
    target = _position(known_target(revision, HEAD), known)
    current = _current_position(settings, known)
    if target < current:
        raise RevisionError(f"the database is already past it (at {known[current - 1]}); use --down to go back")
    command.upgrade(alembic_config(settings), revision)


def downgrade(settings: Settings, revision: str = BASE) -> None:
    """Migrate the database down to ``revision`` (default: empty); at it already, nothing is done.

    RevisionError for an unknown revision or one above the database's (that needs an upgrade);
    SchemaError for a database at a revision this slaplan does not know.
    """
    known = revisions()
    target = _position(known_target(revision, BASE), known)
    current = _current_position(settings, known)
    if target > current:
        at = known[current - 1] if current else BASE
        raise RevisionError(f"the database is below it (at {at}); a downgrade only goes back: use --revision to go up")
    command.downgrade(alembic_config(settings), revision)


def require_current(settings: Settings) -> None:
    """Raise SchemaError unless the database is at the newest revision (for a service that was
    told not to migrate: tables it lacks would fail every request)."""
    known = revisions()
    current = _current_position(settings, known)
    if current == 0:
        raise SchemaError("SLAPLAN_DATABASE_URL: the database is not migrated: run `slaplan migrate`")
    if current < len(known):
        raise SchemaError(
            f"SLAPLAN_DATABASE_URL: the database is at revision {known[current - 1]}, not the newest "
            f"({known[-1]}): run `slaplan migrate`"
        )


def _position(revision: str | None, known: list[str]) -> int:
    """Where ``revision`` lies on the line: 0 for the empty database, len(known) for the newest."""
    if revision in (None, BASE):
        return 0
    if revision == HEAD:
        return len(known)
    return known.index(revision) + 1


def _current_position(settings: Settings, known: list[str]) -> int:
    """The database's position (see ``_position``); SchemaError at a revision not in ``known``."""
    engine = make_engine(settings)
    try:
        current = current_revision(engine)
    finally:
        engine.dispose()
    if current is not None and current not in known:
        raise SchemaError(
            f"SLAPLAN_DATABASE_URL: the database is at revision {current!r}, which this slaplan does not know: "
            "it was written by a newer slaplan (or is not a slaplan database)"
        )
    return _position(current, known)


def head_revision(settings: Settings) -> str | None:
    """The newest revision."""
    return ScriptDirectory.from_config(alembic_config(settings)).get_current_head()


def current_revision(engine: Engine) -> str | None:
    """The revision the database is at (None when never migrated)."""
    with engine.connect() as connection:
        return MigrationContext.configure(connection, opts={"version_table": VERSION_TABLE}).get_current_revision()


def is_up_to_date(settings: Settings, engine: Engine | None = None) -> bool:
    """True when the database is at the newest revision."""
    engine = engine or make_engine(settings)
    return current_revision(engine) == head_revision(settings)
