"""``slaplan migrate``: bring the database schema up to date (or down to a revision)."""

from __future__ import annotations

import argparse


def register(subparsers) -> None:
    parser = subparsers.add_parser(
        "migrate", help="migrate the database (SLAPLAN_DATABASE_URL) to the newest schema"
    )
    parser.add_argument("--revision", default="head", help="target revision when upgrading (default: head)")
    parser.add_argument("--down", metavar="REVISION", help="downgrade to REVISION instead ('base' = empty)")
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from infra import migrate
    from infra.db import make_engine
    from infra.settings import load_settings

    settings = load_settings()
    if args.down:
        migrate.downgrade(settings, args.down)
    else:
        migrate.upgrade(settings, args.revision)
    engine = make_engine(settings)
    try:
        print(f"database at revision {migrate.current_revision(engine) or 'base'}")
    finally:
        engine.dispose()
    return 0
