"""The ``--db`` option of the commands that read or write the database.

Which database: ``--db``, else SLAPLAN_DATABASE_URL, else the per-user SQLite file
(``infra.settings.default_database_url``) — never one that happens to be in the working
directory. Importing this module costs argparse only: commands register it cheaply.
"""

from __future__ import annotations

import argparse
import os
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from infra.settings import Settings


def database_url(text: str) -> str:
    """An argparse type: a SQLAlchemy URL (``driver://…``), or the path of a SQLite file."""
    from infra.database_url import check_database_url

    if not text:
        raise argparse.ArgumentTypeError("must name a SQLite file or a database URL")
    url = text if "://" in text else f"sqlite:///{Path(text).absolute()}"
    try:
        return check_database_url(url)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def add_db_argument(parser: argparse.ArgumentParser) -> argparse.Action:
    """Add ``--db PATH|URL`` to ``parser``."""
    return parser.add_argument(
        "--db", metavar="PATH|URL", type=database_url, default=None,
        help="the database of calibrations and requests: a SQLite file or a SQLAlchemy URL (default: "
             "$SLAPLAN_DATABASE_URL, else $XDG_DATA_HOME/slaplan/slaplan.db, ~/.local/share/slaplan/slaplan.db "
             "without XDG_DATA_HOME)")


def command_database_url(args: argparse.Namespace) -> str:
    """The database a command uses (``--db``, SLAPLAN_DATABASE_URL or the per-user file), found
    without building the settings; a SLAPLAN_DATABASE_URL that is not one raises SettingsError
    naming it, as ``command_settings`` would."""
    from infra.database_url import check_database_url, default_database_url

    if args.db:
        return args.db  # checked by its argparse type
    url = os.environ.get("SLAPLAN_DATABASE_URL")
    if not url:
        return default_database_url(os.environ)
    try:
        return check_database_url(url)
    except ValueError as exc:
        from infra.settings import SettingsError

        raise SettingsError(f"SLAPLAN_DATABASE_URL: {exc}") from None


def command_settings(args: argparse.Namespace) -> Settings:
    """The settings from the environment, with ``--db`` (when given) as the database."""
    from infra.settings import load_settings

    return load_settings(**({"database_url": args.db} if args.db else {}))


def export_database(settings: Settings) -> None:
    """Name the database of ``settings`` in SLAPLAN_DATABASE_URL, for the worker tasks and processes a
    serving command starts, which read their settings from the environment: all use one database."""
    os.environ["SLAPLAN_DATABASE_URL"] = settings.database_url
