"""The ``slaplan`` command line: one sub-command a module in ``api.commands``.

Registering the sub-commands imports only the standard library (and ``api.commands``); each
command imports its own libraries (the planner, SQLAlchemy, Celery, …) when it runs, so that a
command starts in the time it needs, not in the time all of them need
(``benchmarks/cli_startup.py``)."""

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
    parser = build_parser()
    args, extra = parser.parse_known_args(argv)
    if extra:  # reported by the sub-command's parser, which knows its own usage and exit code
        getattr(args, "parser", parser).error(f"unrecognized arguments: {' '.join(extra)}")
    try:
        return args.func(args)
    except Exception as exc:
        message = service_error(exc)
        if message is None:
            raise
        print(f"slaplan: {message}", file=sys.stderr)
        return 2


def _raised_by(exc: BaseException, module: str, name: str) -> bool:
    """Whether ``exc`` is ``module.name``: never when the command did not import ``module`` (so
    that a command is not slowed by importing the libraries of the others to check)."""
    loaded = sys.modules.get(module)
    return loaded is not None and isinstance(exc, getattr(loaded, name))


def service_error(exc: BaseException) -> str | None:
    """One line for a bad setting, or a database or broker that cannot be reached or used, naming
    its variable; None for any other error."""
    if _raised_by(exc, "infra.settings", "SettingsError"):
        return f"invalid setting: {exc}"
    if _raised_by(exc, "sqlalchemy.exc", "OperationalError"):
        reason = str(exc.orig or exc).strip().splitlines()[0]
        return f"cannot use the database (SLAPLAN_DATABASE_URL): {reason}"
    if _raised_by(exc, "kombu.exceptions", "OperationalError"):
        return f"cannot reach the broker (SLAPLAN_BROKER_URL): {str(exc).strip().splitlines()[0]}"
    return None


if __name__ == "__main__":
    sys.exit(main())
