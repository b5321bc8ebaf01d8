"""What Python sources import and name, as resolved module names, read without importing them.

``from ..hub import load`` in ``profiler/model/steps.py`` is ``profiler.hub.load``;
``import time as clock`` then ``clock.time()`` names ``time.time``; ``from os import environ``
then ``environ["A"]`` names ``os.environ``; a builtin such as ``print`` is ``builtins.print``.
Names are resolved through the module's imports wherever they sit (a function's import too),
which is what a boundary check needs: an alias or a relative import hides nothing.
"""

from __future__ import annotations

import ast
import builtins
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

_BUILTINS = frozenset(dir(builtins))


@dataclass(frozen=True)
class Source:
    """One module's parsed source: ``module`` is its dotted name (a package's is its ``__init__``'s)."""

    module: str
    is_package: bool
    tree: ast.Module

    @property
    def package(self) -> str:
        """The package relative imports start from."""
        return self.module if self.is_package else self.module.rpartition(".")[0]


@dataclass(frozen=True)
class Use:
    """A resolved name (``time.time``, ``profiler.hub.load``) a source uses at ``line``."""

    line: int
    name: str


def source_from_text(module: str, text: str, *, is_package: bool = False) -> Source:
    """A source given as text, as if it were the module ``module``."""
    return Source(module, is_package, ast.parse(text, filename=module))


def sources_under(root: Path, packages: Iterable[str]) -> list[Source]:
    """Every ``*.py`` of the named top-level packages under ``root``, in path order."""
    out = []
    for package in packages:
        for path in sorted((root / package).rglob("*.py")):
            parts = path.relative_to(root).with_suffix("").parts
            is_package = parts[-1] == "__init__"
            module = ".".join(parts[:-1] if is_package else parts)
            out.append(Source(module, is_package, ast.parse(path.read_text(encoding="utf-8"), filename=str(path))))
    return out


def _absolute(source: Source, level: int, name: str | None) -> str:
    """The module ``from <level dots><name> import …`` means in ``source``."""
    if level == 0:
        return name or ""
    base = source.package.split(".")
    base = base[: len(base) - (level - 1)] if level - 1 < len(base) else []
    return ".".join([*base, *([name] if name else [])])


def imports(source: Source) -> list[Use]:
    """Every module or module attribute ``source`` imports, by statement or by a constant name given
    to ``importlib.import_module`` / ``__import__``: ``from a import b`` is ``a.b`` (``a`` with ``*``)."""
    out = []
    for node in ast.walk(source.tree):
        if isinstance(node, ast.Import):
            out += [Use(node.lineno, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = _absolute(source, node.level, node.module)
            out += [Use(node.lineno, base if alias.name == "*" else f"{base}.{alias.name}") for alias in node.names]
        elif isinstance(node, ast.Call) and _dynamic_import(node):
            target = node.args[0].value
            dots = len(target) - len(target.lstrip("."))
            out.append(Use(node.lineno, _absolute(source, dots, target[dots:] or None)))
    return out


def _dynamic_import(node: ast.Call) -> bool:
    func = node.func
    named = (isinstance(func, ast.Attribute) and func.attr == "import_module") or \
            (isinstance(func, ast.Name) and func.id in ("import_module", "__import__"))
    return named and bool(node.args) and isinstance(node.args[0], ast.Constant) and isinstance(node.args[0].value, str)


def _bindings(source: Source) -> dict[str, str]:
    """Each name an import binds in ``source`` → the resolved name it stands for."""
    out = {}
    for node in ast.walk(source.tree):
        if isinstance(node, ast.Import):
            for alias in node.names:  # ``import a.b`` binds ``a``; ``import a.b as c`` binds ``c`` to ``a.b``
                top = alias.name.split(".")[0]
                out[alias.asname or top] = alias.name if alias.asname else top
        elif isinstance(node, ast.ImportFrom):
            base = _absolute(source, node.level, node.module)
            out.update({a.asname or a.name: f"{base}.{a.name}" for a in node.names if a.name != "*"})
    return out


def _assigned(tree: ast.AST) -> set[str]:
    """Names the source binds other than by import: assignments, parameters, functions, classes."""
    out: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store | ast.Del):
            out.add(node.id)
        elif isinstance(node, ast.arg):
            out.add(node.arg)
        elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            out.add(node.name)
    return out


def _chains(tree: ast.AST) -> Iterator[tuple[ast.expr, str, list[str]]]:
    """Each outermost ``name.attr.attr`` expression: the node, its root name and its attributes."""
    inner = {id(node.value) for node in ast.walk(tree) if isinstance(node, ast.Attribute)}
    for node in ast.walk(tree):
        if id(node) in inner or not isinstance(node, ast.Attribute | ast.Name):
            continue
        attrs, root = [], node
        while isinstance(root, ast.Attribute):
            attrs.insert(0, root.attr)
            root = root.value
        if isinstance(root, ast.Name) and isinstance(root.ctx, ast.Load):
            yield node, root.id, attrs


def references(source: Source) -> list[Use]:
    """Every name ``source`` reads that an import or the builtins give it, resolved
    (``clock.time`` → ``time.time``, ``print`` → ``builtins.print``)."""
    bound, assigned = _bindings(source), _assigned(source.tree)
    out = []
    for node, root, attrs in _chains(source.tree):
        if root in bound:
            base = bound[root]
        elif root in _BUILTINS and root not in assigned:
            base = f"builtins.{root}"
        else:
            continue
        out.append(Use(node.lineno, ".".join([base, *attrs])))
    return out


def calls(source: Source) -> list[tuple[str, ast.Call]]:
    """Every call in ``source`` with what it calls, its root resolved through the imports
    (``p.read_text``, ``optuna.create_study``, ``importlib.resources.files().joinpath().read_text``)."""
    bound = _bindings(source)
    return [(_dotted(node.func, bound), node) for node in ast.walk(source.tree) if isinstance(node, ast.Call)]


def _dotted(node: ast.AST, bound: dict[str, str]) -> str:
    if isinstance(node, ast.Name):
        return bound.get(node.id, node.id)
    if isinstance(node, ast.Attribute):
        return f"{_dotted(node.value, bound)}.{node.attr}"
    if isinstance(node, ast.Call):
        return f"{_dotted(node.func, bound)}()"
    return "?"


def cycles(edges: Iterable[tuple[str, str]]) -> list[list[str]]:
    """The groups of nodes that reach each other through ``edges`` (a cycle each), sorted."""
    graph: dict[str, set[str]] = {}
    for a, b in edges:
        graph.setdefault(a, set()).add(b)
        graph.setdefault(b, set())

    def reach(start: str) -> set[str]:
        seen, todo = set(), [start]
        while todo:
            for nxt in graph[todo.pop()] - seen:
                seen.add(nxt)
                todo.append(nxt)
        return seen

    reached = {node: reach(node) for node in graph}
    groups = {tuple(sorted(n for n in reached[node] if node in reached[n])) for node in graph if node in reached[node]}
    return sorted(list(g) for g in groups)
