"""Schema migrations: upgrade (``slaplan migrate``) or downgrade the database with Alembic."""

from __future__ import annotations

from pathlib import Path

from alembic import command
from alembic.config import Config
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory
from sqlalchemy import Engine

from infra.db import make_engine
from infra.settings import Settings

VERSION_TABLE = "slaplan_alembic_version"


def alembic_config(settings: Settings) -> Config:
    """An Alembic config pointing at our migration scripts and the settings' database."""
    import migrations

    config = Config()
    config.set_main_option("script_location", str(Path(migrations.__file__).parent))
    # Percent signs in URLs (escaped passwords) must be doubled for configparser.
    config.set_main_option("sqlalchemy.url", settings.database_url.replace("%", "%%"))
    return config


def upgrade(settings: Settings, revision: str = "head") -> None:
    """Migrate the database up to ``revision`` (default: the newest)."""
    command.upgrade(alembic_config(settings), revision)


def downgrade(settings: Settings, revision: str = "base") -> None:
    """Migrate the database down to ``revision`` (default: empty)."""
    command.downgrade(alembic_config(settings), revision)


def head_revision(settings: Settings) -> str | None:
    return ScriptDirectory.from_config(alembic_config(settings)).get_current_head()


def current_revision(engine: Engine) -> str | None:
    """The revision the database is at (None when never migrated)."""
    with engine.connect() as connection:
        return MigrationContext.configure(connection, opts={"version_table": VERSION_TABLE}).get_current_revision()


def is_up_to_date(settings: Settings, engine: Engine | None = None) -> bool:
    engine = engine or make_engine(settings)
    return current_revision(engine) == head_revision(settings)
