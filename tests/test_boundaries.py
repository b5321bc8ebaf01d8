"""The one dependency rule: planner/ and the pure part of profiler/ touch no network,
database, queue, cluster, file or clock of their own.

Their sources are parsed (not imported) and searched for imports of web, DB, queue,
Kubernetes, HTTP and process libraries, of the service packages (api, infra, workers), and
for calls that do I/O or read the clock. The I/O edges that are allowed:
- ``profiler/hub.py``: reads local config.json files and fetches them from the Hub;
- ``profiler/params.py``: reads its own package data through ``importlib.resources`` (only that);
- future I/O modules of profiler, by name: ``bench*``, ``emulat*``, ``genai*``, ``runner*``.
Pure modules must not import those I/O modules either.
"""

from __future__ import annotations

import ast
from fnmatch import fnmatch
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

FORBIDDEN_IMPORTS = {
    "fastapi", "starlette", "uvicorn", "sqlalchemy", "alembic", "psycopg", "psycopg2", "sqlite3", "celery",
    "kombu", "redis", "kubernetes", "httpx", "requests", "aiohttp", "urllib", "urllib3", "http", "socket",
    "subprocess", "multiprocessing", "asyncio", "huggingface_hub", "shutil", "tempfile", "genai_bench",
    "api", "infra", "workers",
}
IO_MODULES = ("profiler/hub.py", "profiler/bench*.py", "profiler/emulat*.py", "profiler/genai*.py",
              "profiler/runner*.py")
# Calls that do I/O: builtins, file methods (pathlib and friends, on any object), and os functions.
IO_BUILTINS = {"open", "input", "exec", "eval", "__import__"}
IO_METHODS = {"read_text", "write_text", "read_bytes", "write_bytes", "open", "unlink", "mkdir", "rmdir",
              "touch", "iterdir", "glob", "rglob", "exists", "is_file", "is_dir", "urlopen"}
OS_FUNCTIONS = {"listdir", "walk", "system", "popen", "remove", "rename", "replace", "scandir", "getenv",
                "makedirs", "stat", "startfile", "getcwd"}
CLOCK_CALLS = {("time", "time"), ("time", "time_ns"), ("time", "monotonic"), ("time", "perf_counter"),
               ("datetime", "now"), ("datetime", "utcnow"), ("datetime", "today"), ("date", "today")}
ENVIRON = {("os", "environ")}


def _rel(path: Path) -> str:
    return path.relative_to(ROOT).as_posix()


def pure_sources() -> list[Path]:
    files = sorted((ROOT / "planner").rglob("*.py")) + sorted((ROOT / "profiler").rglob("*.py"))
    return [p for p in files if not any(fnmatch(_rel(p), pattern) for pattern in IO_MODULES)]


def _io_module(name: str) -> bool:
    path = name.replace(".", "/") + ".py"
    return any(fnmatch(path, pattern) for pattern in IO_MODULES)


def imported_modules(tree: ast.AST) -> list[tuple[int, str]]:
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out += [(node.lineno, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            out.append((node.lineno, node.module))
            out += [(node.lineno, f"{node.module}.{alias.name}") for alias in node.names]
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and \
                node.func.attr == "import_module" and node.args and isinstance(node.args[0], ast.Constant):
            out.append((node.lineno, str(node.args[0].value)))
    return out


def _dotted(node: ast.AST) -> str:
    """``a.b.c`` of an attribute chain (calls in the chain shown as ``f()``)."""
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return f"{_dotted(node.value)}.{node.attr}"
    if isinstance(node, ast.Call):
        return f"{_dotted(node.func)}()"
    return "?"


def _package_data_read(node: ast.Call, relpath: str) -> bool:
    """profiler/params.py may read its package data: ``resources.files(...)...read_text()``."""
    chain = _dotted(node.func)
    return relpath == "profiler/params.py" and chain.startswith("resources.files()") and chain.endswith(".read_text")


def io_calls(tree: ast.AST, relpath: str) -> list[tuple[int, str]]:
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            func = node.func
            if isinstance(func, ast.Name) and func.id in IO_BUILTINS:
                out.append((node.lineno, f"{func.id}()"))
            elif isinstance(func, ast.Attribute):
                owner = func.value.id if isinstance(func.value, ast.Name) else None
                if func.attr in IO_METHODS and not _package_data_read(node, relpath):
                    out.append((node.lineno, f"{_dotted(func)}()"))
                elif owner == "os" and func.attr in OS_FUNCTIONS:
                    out.append((node.lineno, f"os.{func.attr}()"))
                elif (owner, func.attr) in CLOCK_CALLS:
                    out.append((node.lineno, f"{owner}.{func.attr}() (a clock)"))
        elif isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and \
                (node.value.id, node.attr) in ENVIRON:
            out.append((node.lineno, "os.environ"))
    return out


def test_there_is_something_to_check():
    names = {_rel(p) for p in pure_sources()}
    assert {"profiler/estimate.py", "profiler/engine.py", "profiler/serving.py", "profiler/params.py"} <= names
    assert "profiler/hub.py" not in names
    assert any(n.startswith("planner/") for n in names)


@pytest.mark.parametrize("path", pure_sources(), ids=_rel)
def test_pure_modules_import_no_service_or_io_library(path: Path):
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    bad = [(line, name) for line, name in imported_modules(tree)
           if name.split(".")[0] in FORBIDDEN_IMPORTS or _io_module(name)]
    assert not bad, f"{_rel(path)} imports {bad}"


@pytest.mark.parametrize("path", pure_sources(), ids=_rel)
def test_pure_modules_do_no_io(path: Path):
    rel = _rel(path)
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    bad = io_calls(tree, rel)
    assert not bad, f"{rel} does I/O or reads a clock: {bad}"


def test_the_checker_catches_what_it_should():
    sample = ast.parse(
        "import subprocess\nfrom sqlalchemy import select\nimport urllib.request\nfrom profiler import hub\n"
        "from profiler.bench_runner import run\n"
        "def f(p, items):\n    open('x')\n    p.read_text()\n    time.time()\n    os.environ['A']\n"
        "    os.getenv('B')\n    items.remove(3)\n"
        "    resources.files('profiler').joinpath('data/x.json').read_text()\n")
    names = [n for _, n in imported_modules(sample)]
    assert any(n.split(".")[0] in FORBIDDEN_IMPORTS for n in names)
    assert any(_io_module(n) for n in names)  # profiler.hub and profiler.bench_runner
    calls = [c for _, c in io_calls(sample, "profiler/steps.py")]
    assert sorted(calls) == sorted(["open()", "p.read_text()", "time.time() (a clock)", "os.environ", "os.getenv()",
                                    "resources.files().joinpath().read_text()"])  # list.remove is not I/O
    # the package-data read is allowed in params.py only
    assert len(io_calls(sample, "profiler/params.py")) == 5
