"""Request errors: every problem found, as ``(field_path, message)`` pairs with YAML names."""

from __future__ import annotations

import re
from typing import Any

from pydantic import BaseModel, ValidationError

_SIMPLE_KEY = re.compile(r"^[A-Za-z_][A-Za-z0-9_-]*$")
Causes = list[tuple[str, str]]


class RequestError(ValueError):
    """A request that cannot be planned: every problem found, as ``(field_path, message)``.

    ``field_path`` uses the YAML names joined by dots with list indices as ``[0]``
    (``"spec.sla.ttft"``); it is ``""`` for problems of the document as a whole, such as
    malformed YAML (then ``line`` holds the 1-based line number).
    """

    def __init__(self, causes: Causes, *, source: str | None = None, line: int | None = None):
        self.causes = list(causes)
        self.source = source
        self.line = line
        super().__init__(self.causes)

    def __str__(self) -> str:
        where = f"{self.source}: " if self.source else ""
        lines = [f"{path}: {msg}" if path else msg for path, msg in self.causes]
        if len(lines) == 1:
            return f"{where}invalid request: {lines[0]}"
        return f"{where}invalid request ({len(lines)} problems):\n" + "\n".join(f"  - {x}" for x in lines)


def field_path(parts: tuple[Any, ...] | list[Any]) -> str:
    """Join a location into ``spec.sla.ttft`` / ``items[0]`` / ``labels[app.kubernetes.io/x]``."""
    out = ""
    for p in parts:
        if isinstance(p, int):
            out += f"[{p}]"
        elif out and not _SIMPLE_KEY.match(str(p)):
            out += f"[{p}]"
        else:
            out += f".{p}" if out else str(p)
    return out


def _number(x: Any) -> str:
    if isinstance(x, float) and x.is_integer():
        return str(int(x))
    return str(x)


_FIXED = {  # pydantic error type -> message, where the message needs no context
    "missing": "field required",
    "extra_forbidden": "unknown field",
    "string_too_short": "must not be empty",
    "string_type": "must be a string",
    **dict.fromkeys(("int_type", "int_parsing", "int_from_float"), "must be an integer"),
    **dict.fromkeys(("float_type", "float_parsing"), "must be a number"),
    "finite_number": "must be finite",
    **dict.fromkeys(("bool_type", "bool_parsing"), "must be a boolean (true or false)"),
    **dict.fromkeys(("dict_type", "model_type", "model_attributes_type"), "must be a mapping"),
    "list_type": "must be a list",
}
_BOUNDS = {"greater_than": ("gt", "must be greater than"), "greater_than_equal": ("ge", "must be at least"),
           "less_than_equal": ("le", "must be at most")}


def message(err: dict[str, Any]) -> str:
    """A short message for one pydantic error, in the vocabulary of the API reference."""
    kind, ctx = err["type"], err.get("ctx") or {}
    if kind in _FIXED:
        return _FIXED[kind]
    if kind in _BOUNDS:
        key, words = _BOUNDS[kind]
        return f"{words} {_number(ctx.get(key))}"
    if kind == "literal_error":
        choices = re.findall(r"'([^']*)'", str(ctx.get("expected", "")))
        return "must be one of " + ", ".join(choices)
    if kind == "string_pattern_mismatch":
        return f"must match {ctx.get('pattern')}"
    if kind == "value_error":
        return str(err["msg"]).removeprefix("Value error, ")
    return str(err["msg"])


def validate(model: type[BaseModel], data: Any, prefix: str, causes: Causes) -> Any:
    """Validate ``data`` as ``model``; on failure append causes under ``prefix`` and return None."""
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        for err in exc.errors():
            causes.append((field_path((prefix, *err["loc"])), message(err)))
        return None
