"""Which database: its URL's default and checks, and where a SQLite database's file is, without
pydantic or SQLAlchemy (a server's URL is parsed by SQLAlchemy, which connects to it anyway), so
that a command finds out whether there is a database to read before it builds its settings
(``infra.settings``, which uses these)."""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from pathlib import Path

DATABASE_FILE = Path("slaplan", "slaplan.db")  # under the user's data directory (XDG base directories)
DATABASE_DRIVERS = ("sqlite", "sqlite+pysqlite", "postgresql+psycopg")  # the drivers slaplan installs
_URL_DRIVER = re.compile(r"([\w+]+)://")  # how SQLAlchemy's URL starts (sqlalchemy.engine.url)


def default_database_url(env: Mapping[str, str]) -> str:
    """The per-user SQLite file: ``$XDG_DATA_HOME/slaplan/slaplan.db``, or with XDG_DATA_HOME unset
    or not absolute (as the XDG specification says), ``~/.local/share/slaplan/slaplan.db``."""
    data = env.get("XDG_DATA_HOME", "")
    if not os.path.isabs(data):
        home = env.get("HOME") or os.path.expanduser("~")
        data = os.path.join(home, ".local", "share")
    return f"sqlite:///{Path(data) / DATABASE_FILE}"


def check_database_url(value: str) -> str:
    """``value`` when it is a SQLAlchemy URL with a driver slaplan installs; ValueError saying why not.

    A SQLite URL is checked without importing SQLAlchemy (its URL grammar: ``driver://…``); a
    server's URL is parsed in full (host, port), as SQLAlchemy will parse it to connect."""
    driver = _URL_DRIVER.match(value)
    if driver is None:
        raise ValueError("not a database URL: expected sqlite:///PATH or postgresql+psycopg://USER@HOST:PORT/DB")
    if driver[1] not in DATABASE_DRIVERS:
        raise ValueError(f"unsupported database driver {driver[1]!r}: use one of {', '.join(DATABASE_DRIVERS)}")
    if not driver[1].startswith("sqlite"):
        from sqlalchemy.engine import make_url

        make_url(value)
    return value


def sqlite_file(url: str) -> Path | None:
    """The database file a SQLite ``url`` names (relative: to the working directory), as SQLAlchemy's
    pysqlite dialect reads it; None for another database or SQLite in memory."""
    driver = _URL_DRIVER.match(url)
    if driver is None or not driver[1].startswith("sqlite"):
        return None
    rest, _, query = url[driver.end():].partition("?")
    database = rest.partition("/")[2]
    if "uri=true" in query.split("&"):
        database = database.removeprefix("file:")
    if database in ("", ":memory:"):
        return None
    return Path(database).absolute()


def database_exists(url: str) -> bool:
    """False only for a SQLite file that does not exist yet: nothing is stored there to read."""
    path = sqlite_file(url)
    return path is None or path.exists()


def database_label(url: str) -> str:
    """Where the database is, for messages: a SQLite file's path, or the URL without its password."""
    path = sqlite_file(url)
    if path is not None:
        return str(path)
    if url.startswith("sqlite"):
        return url
    from sqlalchemy.engine import make_url

    return make_url(url).render_as_string(hide_password=True)
