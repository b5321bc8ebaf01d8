"""DESIGN's one dependency rule, checked on resolved module names (sources parsed, not imported).

Every row of DESIGN's layout table is a part below; a part may import its own modules and the
parts :data:`MAY_IMPORT` names, and nothing imports upward (profiler never imports planner;
workers never import api; migrations import only infra). The pure parts (planner and the
performance model in profiler) also import only the third-party libraries the table names (no
Optuna storage in planner) and no I/O library of the standard library, and touch no clock,
environment, console, file, process or network: they are handed what they need.

profiler/ holds the pure model (``profiler.model``, whose front door — its package, names
re-exported through ``__all__`` — is all planner may import) and its I/O packages
(:data:`PROFILER_IO`). No module breaks the rule, and no modules (or top-level packages) import
each other in a circle.
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path

import pytest

from import_graph import Source, Use, calls, cycles, imports, references, source_from_text, sources_under
from paths import ROOT

PACKAGES = ("profiler", "planner", "infra", "workers", "api", "migrations")

PROFILER_IO = {  # the profiler's I/O parts, each a package (or module) of its own
    "profiler.bench": ("profiler.bench",),
    "profiler.emulator": ("profiler.emulator",),
    "profiler.hub": ("profiler.hub",),
}
_PROFILER = {"profiler.model", *PROFILER_IO}
MAY_IMPORT = {  # DESIGN's "may import" column, project parts only (each part may import itself)
    "profiler.model": set(),
    "profiler.bench": {"profiler.model"},
    "profiler.emulator": {"profiler.model"},
    "profiler.hub": {"profiler.model"},
    "planner": {"profiler.model"},
    "infra": {"planner", *_PROFILER},
    "workers": {"infra", "planner", *_PROFILER},
    "api": {"workers", "infra", "planner", *_PROFILER},
    "migrations": {"infra"},
}
THIRD_PARTY = {  # what the pure parts may import besides the standard library; other parts: anything
    "profiler.model": {"numpy", "scipy", "pydantic"},
    "planner": {"numpy", "scipy", "pydantic", "optuna", "yaml"},
}
STDLIB_IO = {
    "subprocess", "multiprocessing", "concurrent", "threading", "_thread", "asyncio", "socket", "socketserver",
    "ssl", "select", "selectors", "signal", "http", "urllib", "ftplib", "smtplib", "imaplib", "poplib", "xmlrpc",
    "wsgiref", "webbrowser", "sqlite3", "dbm", "shelve", "shutil", "tempfile", "glob", "fileinput", "mmap",
    "sched",
}
# Resolved names a pure part must not use, by rule; each matches itself and what is under it.
FORBIDDEN = {
    "clock": ("time", "datetime.datetime.now", "datetime.datetime.utcnow", "datetime.datetime.today",
              "datetime.date.today"),
    "environment": ("os.environ", "os.environb", "os.getenv", "os.getenvb", "os.putenv", "os.unsetenv", "os.getcwd",
                    "os.getcwdb", "os.chdir", "os.path.expanduser", "os.path.expandvars", "pathlib.Path.cwd",
                    "pathlib.Path.home", "pathlib.Path.expanduser", "sys.argv"),
    "print": ("builtins.print", "builtins.input", "sys.stdout", "sys.stderr", "sys.stdin"),
    "i/o": ("builtins.open", "builtins.breakpoint", "builtins.exec", "builtins.eval", "builtins.__import__",
            "io.open"),
}
OS_PURE = ("os.path.join", "os.path.basename", "os.path.dirname", "os.path.splitext", "os.path.split",
           "os.path.normpath", "os.fspath", "os.PathLike", "os.sep")
OPTUNA_STORAGE = ("optuna.storages", "optuna.load_study", "optuna.copy_study", "optuna.delete_study",
                  "optuna.get_all_study_summaries", "optuna.get_all_study_names", "optuna.study.load_study")
# Methods that read or write files on whatever object they are called (pathlib and friends).
IO_METHODS = frozenset({"read_text", "write_text", "read_bytes", "write_bytes", "open", "unlink", "mkdir", "rmdir",
                        "touch", "iterdir", "glob", "rglob", "exists", "is_file", "is_dir", "urlopen", "cwd"})
# The one file a pure module reads: profiler.params, its own package data through importlib.resources.
PACKAGE_DATA_READER, PACKAGE_DATA_CALL = "profiler.model.params", "importlib.resources.files()"



def part(module: str) -> str | None:
    """The row of DESIGN's table a module belongs to (None outside the project)."""
    top = module.split(".")[0]
    if top == "profiler":
        group = [g for g, members in PROFILER_IO.items() if any(_under(module, m) for m in members)]
        return group[0] if group else "profiler.model"
    return top if top in PACKAGES else None


def _under(name: str, prefix: str) -> bool:
    return name == prefix or name.startswith(prefix + ".")


def violations(source: Source) -> set[tuple[str, str, str]]:
    """``(module, rule, name)`` for each way ``source`` breaks the rule of its part."""
    mine = part(source.module)
    found = {(use.name, rule) for use in imports(source) if (rule := _import_rule(mine, use.name))}
    if mine in THIRD_PARTY:
        found |= {(use.name, rule) for use in imports(source) + references(source) if (rule := _purity_rule(mine, use))}
        found |= {(name, rule) for name, call in calls(source) if (rule := _call_rule(source.module, name, call))}
    return {(source.module, rule, name) for name, rule in found}


def _import_rule(mine: str | None, name: str) -> str | None:
    """Why importing ``name`` breaks the rule of part ``mine``, or None."""
    theirs, top = part(name), name.split(".")[0]
    if mine == "planner" and theirs == "profiler.model" and _past_front_door(name):
        return "import past profiler.model's front door"
    if theirs is not None:
        return None if theirs in (mine, *MAY_IMPORT[mine]) else f"import of {theirs}"
    if mine in THIRD_PARTY and top in STDLIB_IO:
        return "import of an I/O library"
    if mine in THIRD_PARTY and top not in sys.stdlib_module_names and top not in THIRD_PARTY[mine]:
        return "import of a library the table does not allow"
    return None


def _past_front_door(name: str) -> bool:
    """Whether ``name`` (resolved) reaches into a module of the model rather than a name its
    package exports: ``profiler.model.steps.decode_step_s`` does, ``profiler.model.estimate`` (the
    function the package exports) does not."""
    import profiler.model as front

    rest = name.removeprefix("profiler.model").lstrip(".")
    return bool(rest) and rest.split(".")[0] not in front.__all__


def _purity_rule(mine: str, use: Use) -> str | None:
    """The rule a pure part breaks by using ``use.name`` (imported or referenced), or None."""
    if mine == "planner" and any(_under(use.name, n) for n in OPTUNA_STORAGE):
        return "optuna storage"
    if any(_under(use.name, n) for n in OS_PURE):
        return None
    rule = next((rule for rule, names in FORBIDDEN.items() if any(_under(use.name, n) for n in names)), None)
    return rule or ("i/o" if use.name.startswith("os.") else None)  # the rest of os: files and processes


def _call_rule(module: str, name: str, call: ast.Call) -> str | None:
    """The rule a pure module breaks by a call of ``name`` (its root resolved), or None: a file
    method on any object (not the package-data read), or a study kept in an Optuna storage."""
    func = call.func
    if isinstance(func, ast.Attribute) and func.attr in IO_METHODS:
        package_data = module == PACKAGE_DATA_READER and name.startswith(PACKAGE_DATA_CALL)
        return None if package_data else "i/o"
    if part(module) == "planner" and name in ("optuna.create_study", "optuna.study.create_study"):
        stored = any(k.arg == "storage" and not (isinstance(k.value, ast.Constant) and k.value.value is None)
                     for k in call.keywords)
        return "optuna storage" if stored else None
    return None


SOURCES = sources_under(ROOT, PACKAGES)


def test_there_is_something_to_check():
    modules = {s.module: part(s.module) for s in SOURCES}
    assert modules["profiler.model.estimate"] == modules["profiler.model.steps"] == "profiler.model"
    assert modules["profiler.hub"] == "profiler.hub" and modules["profiler.bench.runner"] == "profiler.bench"
    assert {"planner", "infra", "workers", "api", "migrations"} <= set(modules.values())
    assert set(MAY_IMPORT) == set(modules.values())


def test_the_io_modules_named_exist():
    modules = {s.module for s in SOURCES}
    assert {m for members in PROFILER_IO.values() for m in members} <= modules


@pytest.mark.parametrize("source", SOURCES, ids=lambda s: s.module)
def test_module_keeps_the_rule_of_its_part(source: Source):
    found = violations(source)
    assert not found, f"{source.module} ({part(source.module)}) breaks DESIGN's dependency rule: {sorted(found)}"


def test_top_level_packages_import_each_other_in_no_cycle():
    edges = {(s.module.split(".")[0], use.name.split(".")[0]) for s in SOURCES for use in imports(s)}
    edges = {(a, b) for a, b in edges if a != b and b in PACKAGES}
    assert cycles(edges) == [], "top-level packages that import each other"


def test_modules_import_each_other_in_no_cycle():
    modules = {s.module for s in SOURCES}

    def owner(name: str) -> str:  # the module an imported name lives in: its longest prefix that is one
        while name and name not in modules:
            name = name.rpartition(".")[0]
        return name

    edges = {(s.module, owner(use.name)) for s in SOURCES for use in imports(s)}
    found = cycles((a, b) for a, b in edges if b and a != b)
    assert not found, f"modules that import each other (in a circle): {found}"


# --------------------------------------------------------------------------------------------
# The checker itself: each probe must be flagged, and the harmless look-alikes must not.
# --------------------------------------------------------------------------------------------

PROBES = [  # (module, source, a violation it must give as (rule, name))
    ("planner.probe", "import time as clock\nclock.time()\n", ("clock", "time.time")),
    ("planner.probe", "from time import monotonic as tick\ntick()\n", ("clock", "time.monotonic")),
    ("planner.probe", "from datetime import datetime as dt\ndt.now()\n", ("clock", "datetime.datetime.now")),
    ("planner.probe", "from os import environ\n", ("environment", "os.environ")),
    ("planner.probe", "import os as o\no.getenv('A')\n", ("environment", "os.getenv")),
    ("planner.probe", "from pathlib import Path\nPath.cwd()\n", ("environment", "pathlib.Path.cwd")),
    ("planner.probe", "import optuna\noptuna.storages.RDBStorage('sqlite://')\n",
     ("optuna storage", "optuna.storages.RDBStorage")),
    ("planner.probe", "from optuna.storages import RDBStorage\n", ("optuna storage", "optuna.storages.RDBStorage")),
    ("planner.probe", "import optuna\noptuna.create_study(storage='sqlite://')\n",
     ("optuna storage", "optuna.create_study")),
    ("planner.probe", "print('hi')\n", ("print", "builtins.print")),
    ("profiler.probe", "import sys\nsys.stderr.write('x')\n", ("print", "sys.stderr.write")),
    ("planner.probe", "def f(p):\n    return open(p)\n", ("i/o", "builtins.open")),
    ("planner.probe", "def f(p):\n    return p.read_text()\n", ("i/o", "p.read_text")),
    ("planner.probe", "import subprocess\n", ("import of an I/O library", "subprocess")),
    ("planner.probe", "import httpx\n", ("import of a library the table does not allow", "httpx")),
    ("profiler.probe", "import yaml\n", ("import of a library the table does not allow", "yaml")),
    ("profiler.probe", "from . import hub\n", ("import of profiler.hub", "profiler.hub")),
    ("profiler.model.probe", "from ..bench.runner import run\n", ("import of profiler.bench", "profiler.bench.runner.run")),
    ("planner.probe", "from profiler.model.steps import decode_step_s\n",
     ("import past profiler.model's front door", "profiler.model.steps.decode_step_s")),
    ("profiler.probe", "import importlib\nimportlib.import_module('profiler.hub')\n",
     ("import of profiler.hub", "profiler.hub")),
    ("planner.probe", "from profiler.hub import load_model\n", ("import of profiler.hub", "profiler.hub.load_model")),
    ("profiler.probe", "from planner.types import Plan\n", ("import of planner", "planner.types.Plan")),
    ("profiler.bench.runner", "from planner import request\n", ("import of planner", "planner.request")),
    ("workers.probe", "from api import app\n", ("import of api", "api.app")),
    ("workers.probe", "def f():\n    from api.kinds import KINDS\n", ("import of api", "api.kinds.KINDS")),
    ("migrations.probe", "from planner import plan\n", ("import of planner", "planner.plan")),
    ("migrations.probe", "import workers\n", ("import of workers", "workers")),
    ("infra.probe", "from workers.tasks import plan_task\n", ("import of workers", "workers.tasks.plan_task")),
    ("infra.probe", "from api.objects import dig\n", ("import of api", "api.objects.dig")),
]


@pytest.mark.parametrize(("module", "text", "expected"), PROBES,
                         ids=[f"{m}: {t.splitlines()[-1]}" for m, t, _ in PROBES])
def test_the_checker_flags_each_probe(module: str, text: str, expected: tuple[str, str]):
    found = {(rule, name) for _, rule, name in violations(source_from_text(module, text))}
    assert expected in found, found


def test_a_new_model_module_importing_the_hub_relatively_is_flagged(tmp_path: Path):
    """A module added under a new subpackage, written to disk and read as the tree is."""
    probe = tmp_path / "profiler" / "model" / "probe.py"
    probe.parent.mkdir(parents=True)
    probe.write_text("from ..hub import load_model\n", encoding="utf-8")
    (source,) = sources_under(tmp_path, ["profiler"])
    assert source.module == "profiler.model.probe"
    assert violations(source) == {("profiler.model.probe", "import of profiler.hub", "profiler.hub.load_model")}


HARMLESS = [  # (module, source): nothing to flag
    ("planner.probe", "import optuna\noptuna.create_study(sampler=optuna.samplers.TPESampler(seed=1))\n"),
    ("planner.probe", "import optuna\noptuna.create_study(storage=None)\n"),
    ("planner.probe", "from pydantic import BaseModel\nimport numpy, yaml\nfrom profiler.model import decode_step_s\n"),
    ("planner.probe", "def f(items, print):\n    items.remove(3)\n    print('a parameter, not the builtin')\n"),
    ("planner.probe", "import os\nos.path.join('a', 'b')\n"),
    ("planner.probe", "import math\nmath.sqrt(2)\nfrom . import hub\n"),  # planner.hub would be planner's own
    ("profiler.model.params", "from importlib import resources\nresources.files('profiler').joinpath('x').read_text()\n"),
    ("profiler.hub", "import os\nimport httpx\nos.environ.get('HF_HOME')\nopen('config.json')\n"),
    ("workers.probe", "import time\nfrom infra.db import engine\nfrom planner import plan\ntime.time()\n"),
]


@pytest.mark.parametrize(("module", "text"), HARMLESS, ids=[f"{m}: {t.splitlines()[-1]}" for m, t in HARMLESS])
def test_the_checker_leaves_harmless_code_alone(module: str, text: str):
    assert not violations(source_from_text(module, text))


def test_the_package_data_read_is_allowed_in_params_only():
    text = "from importlib import resources\nresources.files('profiler').joinpath('x').read_text()\n"
    assert violations(source_from_text("profiler.steps", text)) == {
        ("profiler.steps", "i/o", "importlib.resources.files().joinpath().read_text")}


def test_relative_imports_resolve_from_their_package():
    module = source_from_text("profiler.model.steps", "from ..hub import load\nfrom . import gpus\nfrom .gpus import *\n")
    assert [use.name for use in imports(module)] == ["profiler.hub.load", "profiler.model.gpus", "profiler.model.gpus"]
    package = source_from_text("profiler.model", "from . import steps\n", is_package=True)
    assert [use.name for use in imports(package)] == ["profiler.model.steps"]


def test_cycles_are_found():
    assert cycles([("a", "b"), ("b", "c"), ("c", "a"), ("c", "d")]) == [["a", "b", "c"]]
    assert cycles([("a", "b"), ("b", "c")]) == []
