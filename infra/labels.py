"""Kubernetes label selectors: parse ``labelSelector`` strings and match label maps.

Grammar (as kube-apiserver accepts it), requirements joined by commas, all must hold:
``key`` (exists), ``!key`` (does not exist), ``key=value`` / ``key==value``, ``key!=value``
(also true when the key is absent), ``key in (a,b)``, ``key notin (a,b)`` (also true when
absent), ``key>n`` / ``key<n`` (integer comparison; false when absent or not an integer).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Literal

from pydantic import BaseModel, ConfigDict

Operator = Literal["exists", "!exists", "=", "!=", "in", "notin", "gt", "lt"]

_KEY = r"(?:[A-Za-z0-9](?:[-A-Za-z0-9_.]*[A-Za-z0-9])?/)?[A-Za-z0-9](?:[-A-Za-z0-9_.]*[A-Za-z0-9])?"
_VALUE = r"(?:[A-Za-z0-9](?:[-A-Za-z0-9_.]*[A-Za-z0-9])?)?"
# All matched with ``fullmatch``. The value list of ``key in (…)`` is split by hand: a regex for it
# (``\(\s*([^()]*)\s*\)``) backtracks in cubic time on ``a in (`` + spaces + ``)x``.
_SET_HEAD = re.compile(rf"({_KEY})\s+(in|notin)\s*")
_CMP = re.compile(rf"({_KEY})\s*(==|!=|=|>|<)\s*({_VALUE})")
_EXISTS = re.compile(rf"(!?)\s*({_KEY})")
_VALUE_RE = re.compile(_VALUE)


class Requirement(BaseModel):
    model_config = ConfigDict(frozen=True)

    key: str
    operator: Operator
    values: tuple[str, ...] = ()


class SelectorError(ValueError):
    """A label selector that does not parse."""


def parse_selector(text: str | None) -> tuple[Requirement, ...]:
    """Parse a selector string; an empty or missing selector matches everything."""
    if not text or not text.strip():
        return ()
    return tuple(_parse_requirement(part.strip()) for part in _split(text))


def _split(text: str) -> list[str]:
    """Split on commas outside parentheses."""
    parts, depth, start = [], 0, 0
    for i, ch in enumerate(text):
        if ch == "(":
            depth += 1
        elif ch == ")":
            depth -= 1
            if depth < 0:
                raise SelectorError(f"unbalanced parenthesis in selector {text!r}")
        elif ch == "," and depth == 0:
            parts.append(text[start:i])
            start = i + 1
    if depth:
        raise SelectorError(f"unbalanced parenthesis in selector {text!r}")
    parts.append(text[start:])
    if any(not p.strip() for p in parts):
        raise SelectorError(f"empty requirement in selector {text!r}")
    return parts


def _parse_requirement(part: str) -> Requirement:
    if requirement := _parse_set(part):
        return requirement
    if m := _CMP.fullmatch(part):
        key, op, value = m.groups()
        if op in (">", "<"):
            if not re.fullmatch(r"-?\d+", value):
                raise SelectorError(f"{part!r}: {op} needs an integer")
            return Requirement(key=key, operator="gt" if op == ">" else "lt", values=(value,))
        return Requirement(key=key, operator="!=" if op == "!=" else "=", values=(value,))
    if m := _EXISTS.fullmatch(part):
        return Requirement(key=m.group(2), operator="!exists" if m.group(1) else "exists")
    raise SelectorError(f"invalid label selector requirement {part!r}")


def _parse_set(part: str) -> Requirement | None:
    """``key in (a, b)`` / ``key notin (a, b)``; None when ``part`` does not have that shape."""
    head, _, rest = part.partition("(")
    inner = rest.removesuffix(")")
    m = _SET_HEAD.fullmatch(head)
    if m is None or inner == rest or "(" in inner or ")" in inner:
        return None
    values = tuple(v.strip() for v in inner.split(",")) if inner.strip() else ()
    if not values or any(not _VALUE_RE.fullmatch(v) for v in values):
        raise SelectorError(f"invalid value set in {part!r}")
    return Requirement(key=m.group(1), operator=m.group(2), values=values)


def matches(requirements: tuple[Requirement, ...], labels: Mapping[str, str]) -> bool:
    """True when ``labels`` satisfy every requirement."""
    return all(_holds(r, labels) for r in requirements)


def _holds(r: Requirement, labels: Mapping[str, str]) -> bool:
    present = r.key in labels
    value = labels.get(r.key)
    match r.operator:
        case "exists":
            return present
        case "!exists":
            return not present
        case "=" | "in":
            return present and value in r.values
        case "!=" | "notin":
            return not present or value not in r.values
        case "gt" | "lt":
            if not present or not re.fullmatch(r"-?\d+", value or ""):
                return False
            n, bound = int(value), int(r.values[0])
            return n > bound if r.operator == "gt" else n < bound
    return False
