"""``slaplan migrate``: bring the database schema up to date (or down to a revision).

Exit codes: 0 migrated (or already at the revision asked for), 2 on invalid input: an unknown
or empty revision, ``--revision`` below the database's or ``--down`` above it, or a database at
a revision this slaplan does not know.
"""

from __future__ import annotations

import argparse
import sys

from api.commands.database import add_db_argument


def register(subparsers, summary: str) -> None:
    parser = subparsers.add_parser("migrate", help=summary)
    target = parser.add_mutually_exclusive_group()
    target.add_argument("--revision", type=revision_type("head"), default="head",
                        help="target revision when upgrading (default: head)")
    target.add_argument("--down", metavar="REVISION", type=revision_type("base"),
                        help="downgrade to REVISION instead ('base' = empty)")
    add_db_argument(parser)
    parser.set_defaults(func=run)


def revision_type(keyword: str):
    """An argparse type: ``keyword`` (head or base) or a revision this slaplan knows."""

    def revision(text: str) -> str:
        from infra.migrate import RevisionError, known_target

        try:
            return known_target(text, keyword)
        except RevisionError as exc:
            raise argparse.ArgumentTypeError(str(exc)) from None

    return revision


def run(args: argparse.Namespace) -> int:
    from api.commands.database import command_settings
    from infra import migrate
    from infra.db import make_engine

    settings = command_settings(args)
    option, revision = ("--down", args.down) if args.down is not None else ("--revision", args.revision)
    try:
        if args.down is not None:
            migrate.downgrade(settings, revision)
        else:
            migrate.upgrade(settings, revision)
    except migrate.RevisionError as exc:
        print(f"slaplan migrate: {option} {revision}: {exc}", file=sys.stderr)
        return 2
    engine = make_engine(settings)
    try:
        print(f"database {settings.database_label} at revision {migrate.current_revision(engine) or 'base'}")
    finally:
        engine.dispose()
    return 0
