"""The ``slaplan`` command line: one sub-command a module in ``api.commands``."""

from __future__ import annotations

import argparse
import importlib
import sys

# Each module defines ``register(subparsers)``, which adds its sub-command and sets
# ``func(args) -> int`` as the parser default (and ``parser``, its own parser, when its usage
# errors are not argparse's).
COMMANDS = ("plan", "estimate", "calibrate", "serve", "worker", "migrate", "apply", "bench", "emulate")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="slaplan", description="SLA profiler and deployment planner for LLM serving")
    sub = parser.add_subparsers(dest="command", required=True)
    for name in COMMANDS:
        importlib.import_module(f"api.commands.{name}").register(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    from infra.settings import SettingsError

    parser = build_parser()
    args, extra = parser.parse_known_args(argv)
    if extra:  # reported by the sub-command's parser, which knows its own usage and exit code
        getattr(args, "parser", parser).error(f"unrecognized arguments: {' '.join(extra)}")
    try:
        return args.func(args)
    except SettingsError as exc:
        print(f"slaplan: invalid setting: {exc}", file=sys.stderr)
        return 2
    except Exception as exc:
        message = unreachable_service(exc)
        if message is None:
            raise
        print(f"slaplan: {message}", file=sys.stderr)
        return 2


def unreachable_service(exc: BaseException) -> str | None:
    """One line for a database or broker that cannot be reached or used, naming its variable;
    None for any other error."""
    from kombu.exceptions import OperationalError as BrokerError
    from sqlalchemy.exc import OperationalError as DatabaseError

    if isinstance(exc, DatabaseError):
        reason = str(exc.orig or exc).strip().splitlines()[0]
        return f"cannot use the database (SLAPLAN_DATABASE_URL): {reason}"
    if isinstance(exc, BrokerError):
        return f"cannot reach the broker (SLAPLAN_BROKER_URL): {str(exc).strip().splitlines()[0]}"
    return None


if __name__ == "__main__":
    sys.exit(main())
