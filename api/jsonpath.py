"""The JSONPath that CRD printer columns use (``additionalPrinterColumns[].jsonPath``).

Kubernetes' dialect, the part CRDs need: ``.field`` and ``['field']`` steps, ``[n]`` (negative
counts from the end), ``[*]``, and filters ``[?(@.a.b=="x")]`` / ``!=`` on a string, number or
boolean. ``find`` returns every value reached, in document order.
"""

from __future__ import annotations

import json
import re
from typing import Any

_FIELD = re.compile(r"\.([A-Za-z0-9_$-]+)")
_QUOTED = re.compile(r"\[\s*'([^']*)'\s*\]|\[\s*\"([^\"]*)\"\s*\]")
_INDEX = re.compile(r"\[\s*(-?\d+|\*)\s*\]")
_FILTER = re.compile(r"\[\s*\?\(\s*@((?:\.[A-Za-z0-9_$-]+)+)\s*(==|!=)\s*(.+?)\s*\)\s*\]")


class JSONPathError(ValueError):
    """A path outside the supported dialect."""


def find(path: str, data: Any) -> list[Any]:
    """The values ``path`` (with or without surrounding ``{}``) reaches in ``data``."""
    values = [data]
    for step in _steps(path.strip().removeprefix("{").removesuffix("}").strip()):
        values = [found for value in values for found in step(value)]
    return values


def _steps(path: str) -> list:
    steps, at = [], 0
    while at < len(path):
        if m := _FIELD.match(path, at):
            steps.append(_child(m.group(1)))
        elif m := _QUOTED.match(path, at):
            steps.append(_child(m.group(1) if m.group(1) is not None else m.group(2)))
        elif m := _INDEX.match(path, at):
            steps.append(_index(m.group(1)))
        elif m := _FILTER.match(path, at):
            steps.append(_filter(m.group(1).split(".")[1:], m.group(2) == "==", _literal(m.group(3))))
        else:
            raise JSONPathError(f"unsupported JSONPath {path!r} at {path[at:]!r}")
        at = m.end()
    return steps


def _literal(text: str) -> Any:
    if text.startswith("'") and text.endswith("'"):
        return text[1:-1]
    try:
        return json.loads(text)
    except ValueError:
        raise JSONPathError(f"unsupported filter value {text!r}") from None


def _child(name: str):
    return lambda value: [value[name]] if isinstance(value, dict) and name in value else []


def _index(which: str):
    def step(value: Any) -> list[Any]:
        if which == "*":
            return list(value.values()) if isinstance(value, dict) else list(value) if isinstance(value, list) else []
        i = int(which)
        return [value[i]] if isinstance(value, list) and -len(value) <= i < len(value) else []

    return step


def _filter(fields: list[str], equal: bool, wanted: Any):
    def holds(item: Any) -> bool:
        for name in fields:
            if not isinstance(item, dict) or name not in item:
                return False
            item = item[name]
        return (item == wanted) == equal

    return lambda value: [item for item in value if holds(item)] if isinstance(value, list) else []
