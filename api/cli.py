"""The ``slaplan`` command line: one sub-command a module in ``api.commands``.

A run imports the module of the sub-command it runs and no other (the rest are listed in the
usage by their one-line summary), and that module imports its own libraries (the planner,
SQLAlchemy, Celery, …) when it runs, so that a command starts in the time it needs, not in the
time all of them need (``benchmarks/cli_startup.py``). The program (``program``: the console
script and ``python -m api.cli``) ends the process as soon as a command that asks for it has
flushed its output, without the interpreter's teardown."""

from __future__ import annotations

import argparse
import importlib
import os
import sys
from typing import NoReturn

# Each module defines ``register(subparsers, summary)``, which adds its sub-command with
# ``summary`` as its help and sets ``func(args) -> int`` as the parser default (and ``parser``,
# its own parser, when its usage errors are not argparse's; ``ends_at_once``, when the
# command leaves nothing for the interpreter's teardown to do: ``program``).
COMMANDS = {
    "plan": "plan DynamoGraphDeploymentRequests offline",
    "estimate": "predict TTFT, ITL and throughput of one configuration, or of every row of a CSV",
    "calibrate": "refit the performance model's parameters from measured data (writes params.json)",
    "serve": "serve the API (and, with no SLAPLAN_BROKER_URL, a worker in the same process)",
    "worker": "run a worker for the plan and bench queues (needs SLAPLAN_BROKER_URL)",
    "migrate": "migrate the database (--db, SLAPLAN_DATABASE_URL or the per-user file) to the newest schema",
    "apply": "apply planned manifests to a Kubernetes cluster (server-side apply)",
    "bench": "run one BenchmarkJob (ome.io/v1beta1) locally with genai-bench and print its results",
    "emulate": "serve an OpenAI-compatible API whose token timing follows the performance model",
}


def build_parser(only: str | None = None) -> argparse.ArgumentParser:
    """The parser of every sub-command; with ``only`` (a sub-command's name), that one's module
    alone is imported and registered, the others are listed by name and summary (the same usage
    and help, a parser that parses only that sub-command's options)."""
    parser = argparse.ArgumentParser(prog="slaplan", description="SLA profiler and deployment planner for LLM serving")
    sub = parser.add_subparsers(dest="command", required=True)
    for name, summary in COMMANDS.items():
        if only is None or name == only:
            importlib.import_module(f"api.commands.{name}").register(sub, summary)
        else:
            sub.add_parser(name, help=summary)
    return parser


def _named(argv: list[str]) -> str:
    """The sub-command ``argv`` names: its first word that is not an option (the top-level parser
    has no option that takes a value); "" when there is none, or it names no sub-command."""
    word = next((a for a in argv if not a.startswith("-")), "")
    return word if word in COMMANDS else ""


def main(argv: list[str] | None = None) -> int:
    """Run the sub-command ``argv`` (default: the program's arguments) names; its exit code."""
    return _run(sys.argv[1:] if argv is None else argv)[0]


def _run(argv: list[str], *, program: bool = False) -> tuple[int, bool]:
    """(exit code, whether the command asks to end the process at once: ``ends_at_once``). In the
    program, such a command starts with the collector held (``api.commands.start_up``)."""
    parser = build_parser(_named(argv))
    args, extra = parser.parse_known_args(argv)
    if extra:  # reported by the sub-command's parser, which knows its own usage and exit code
        getattr(args, "parser", parser).error(f"unrecognized arguments: {' '.join(extra)}")
    at_once = getattr(args, "ends_at_once", False)
    if program and at_once:
        from api.commands.start_up import hold

        hold()
    try:
        code = args.func(args)
    except Exception as exc:
        message = service_error(exc)
        if message is None:
            raise
        print(f"slaplan: {message}", file=sys.stderr)
        code = 2
    return code, at_once


def program() -> NoReturn:
    """The ``slaplan`` program: ``main`` on its arguments, then the process ends with its exit code.
    After a command that set ``ends_at_once`` (it has closed its files and waited for its
    processes), the process ends as soon as its output is flushed, without the interpreter's
    teardown (freeing every module and object: about a tenth of ``plan``'s wall time); an output
    that cannot be flushed (a closed pipe) is left to the usual exit, which reports it."""
    code, at_once = _run(sys.argv[1:], program=True)
    if at_once:
        try:
            sys.stdout.flush()
            sys.stderr.flush()
        except (OSError, ValueError):
            sys.exit(code)
        os._exit(code)
    sys.exit(code)


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
    program()
