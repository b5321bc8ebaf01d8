"""Field selectors, as kube-apiserver serves them for custom resources: ``metadata.name`` and
``metadata.namespace`` with ``=``, ``==`` or ``!=``, comma-separated, all must hold
(``kubectl get dgdr NAME -w`` watches one object this way)."""

from __future__ import annotations

import re
from typing import Any

FIELDS = ("metadata.name", "metadata.namespace")
_TERM = re.compile(r"^\s*([A-Za-z.]+)\s*(==|!=|=)\s*([^,]*?)\s*$")

Requirement = tuple[str, bool, str]  # (field, must equal?, value)


class FieldSelectorError(ValueError):
    """A field selector that does not parse or names a field that cannot be selected on."""


def parse_field_selector(text: str | None) -> tuple[Requirement, ...]:
    if not text or not text.strip():
        return ()
    out = []
    for term in text.split(","):
        found = _TERM.match(term)
        if found is None:
            raise FieldSelectorError(f"invalid selector: {term.strip()!r}; expected field=value or field!=value")
        field, op, value = found.groups()
        if field not in FIELDS:
            raise FieldSelectorError(f'field label not supported: "{field}" (supported: {", ".join(FIELDS)})')
        out.append((field, op != "!=", value))
    return tuple(out)


def fields_match(requirements: tuple[Requirement, ...], obj: dict[str, Any]) -> bool:
    """Whether the Kubernetes object ``obj`` satisfies every requirement."""
    metadata = obj.get("metadata") or {}
    return all((str(metadata.get(field.split(".", 1)[1], "")) == value) == equal for field, equal, value in requirements)
