"""Alembic environment: the URL comes from slaplan's settings; the version table is our own
(``slaplan_alembic_version``) so that other tools sharing the database (Optuna) never collide."""

from __future__ import annotations

from alembic import context
from sqlalchemy import engine_from_config, pool

from infra.migrate import VERSION_TABLE
from infra.settings import load_settings
from infra.tables import Base


def _url() -> str:
    config = context.config
    return config.get_main_option("sqlalchemy.url") or load_settings().database_url


def run_offline() -> None:
    context.configure(
        url=_url(),
        target_metadata=Base.metadata,
        version_table=VERSION_TABLE,
        literal_binds=True,
        render_as_batch=True,
    )
    with context.begin_transaction():
        context.run_migrations()


def run_online() -> None:
    config = context.config
    connection = config.attributes.get("connection")
    if connection is not None:
        _run(connection)
        return
    section = dict(config.get_section(config.config_ini_section) or {})
    section["sqlalchemy.url"] = _url()
    engine = engine_from_config(section, prefix="sqlalchemy.", poolclass=pool.NullPool)
    with engine.connect() as connection:
        _run(connection)
    engine.dispose()


def _run(connection) -> None:
    context.configure(
        connection=connection,
        target_metadata=Base.metadata,
        version_table=VERSION_TABLE,
        render_as_batch=connection.dialect.name == "sqlite",
    )
    with context.begin_transaction():
        context.run_migrations()


if context.is_offline_mode():
    run_offline()
else:
    run_online()
