"""``Table`` responses (``meta.k8s.io``), as kube-apiserver serves them for custom resources to
clients that ask with ``Accept: application/json;as=Table;v=v1;g=meta.k8s.io`` (``kubectl get``).

The columns are Name and the CRD's printer columns (see ``api.published``); a ``date`` column
shows an age (``5m``, ``3h2m``, ``12d``) as kubectl prints it. Each row carries the object as
``includeObject`` asks: ``Metadata`` (the default: a PartialObjectMetadata), ``Object`` or ``None``.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

from api.errors import ApiError
from api.jsonpath import JSONPathError, find
from api.published import Column

TABLE_VERSIONS = ("v1", "v1beta1")
INCLUDE_OBJECT = ("None", "Metadata", "Object")
NAME_COLUMN = {
    "name": "Name",
    "type": "string",
    "format": "name",
    "description": "Name of the object, unique within its namespace",
    "priority": 0,
}


def table_version(accept: str | None) -> str | None:
    """The ``meta.k8s.io`` version of Table the ``Accept`` header asks for before any plain
    media type, or None when it asks for the object itself."""
    for media_range in (accept or "").split(","):
        media, *params = (part.strip() for part in media_range.split(";"))
        options = dict(p.partition("=")[::2] for p in params)
        if options.get("as") == "Table" and options.get("g") == "meta.k8s.io" and options.get("v") in TABLE_VERSIONS:
            return options["v"]
        if media in ("application/json", "application/*", "*/*") and "as" not in options:
            return None
    return None


def check_include_object(value: str | None) -> str:
    """``includeObject`` (default ``Metadata``); 400 naming it for any other value."""
    if value in (None, ""):
        return "Metadata"
    if value not in INCLUDE_OBJECT:
        message = f"includeObject: Unsupported value: {value!r}: must be one of {', '.join(INCLUDE_OBJECT)}"
        raise ApiError(400, message, details={"causes": [{"reason": "FieldValueNotSupported", "message": message,
                                                          "field": "includeObject"}]})
    return value


def table(
    columns: tuple[Column, ...],
    objects: list[dict[str, Any]],
    *,
    version: str,
    include_object: str,
    metadata: dict[str, Any] | None = None,
    with_columns: bool = True,
) -> dict[str, Any]:
    """A Table of ``objects`` with Name and ``columns`` (their definitions left out when not
    ``with_columns``: the events of a watch after its first)."""
    now = datetime.now(UTC)
    out: dict[str, Any] = {"kind": "Table", "apiVersion": f"meta.k8s.io/{version}", "metadata": metadata or {}}
    if with_columns:
        out["columnDefinitions"] = [NAME_COLUMN, *(_definition(c) for c in columns)]
    out["rows"] = [_row(columns, obj, include_object, now) for obj in objects]
    return out


def _definition(column: Column) -> dict[str, Any]:
    return {"name": column.name, "type": column.type, "format": column.format,
            "description": column.description, "priority": column.priority}


def _row(columns: tuple[Column, ...], obj: dict[str, Any], include_object: str, now: datetime) -> dict[str, Any]:
    row: dict[str, Any] = {"cells": [obj["metadata"]["name"], *(_cell(c, obj, now) for c in columns)]}
    if include_object == "Object":
        row["object"] = obj
    elif include_object == "Metadata":
        row["object"] = {"kind": "PartialObjectMetadata", "apiVersion": "meta.k8s.io/v1", "metadata": obj["metadata"]}
    return row


def _cell(column: Column, obj: dict[str, Any], now: datetime) -> Any:
    """The cell of ``column`` for ``obj``, typed as kube-apiserver types it; None when the path
    reaches nothing or a value of another type."""
    try:
        found = find(column.json_path, obj)
    except JSONPathError:
        return None
    if not found:
        return None
    value = found[0]
    match column.type:
        case "string":
            return value if isinstance(value, str) else json.dumps(value, separators=(",", ":"))
        case "integer":
            return value if isinstance(value, int) and not isinstance(value, bool) else None
        case "number":
            return value if isinstance(value, int | float) and not isinstance(value, bool) else None
        case "boolean":
            return value if isinstance(value, bool) else None
        case "date":
            return _age(value, now)
    return None


def _age(value: Any, now: datetime) -> str | None:
    """An RFC 3339 time as the age kubectl shows; None for anything else."""
    try:
        then = datetime.fromisoformat(str(value).replace("Z", "+00:00"))
    except ValueError:
        return None
    if then.tzinfo is None:
        return None
    return human_duration((now - then).total_seconds())


def human_duration(seconds: float) -> str:
    """A duration in Kubernetes' short form (``HumanDuration``): ``42s``, ``5m10s``, ``3h2m``, ``12d``, ``2y30d``."""
    if seconds < -1:
        return "<invalid>"
    s = max(0, int(seconds))
    m, h, d = s // 60, s // 3600, s // 86400
    if s < 120:
        return f"{s}s"
    if m < 10:
        return f"{m}m{s % 60}s" if s % 60 else f"{m}m"
    if h < 3:
        return f"{m}m"
    if h < 8:
        return f"{h}h{m % 60}m" if m % 60 else f"{h}h"
    if h < 48:
        return f"{h}h"
    if h < 192:
        return f"{d}d{h % 24}h" if h % 24 else f"{d}d"
    if d < 365 * 2:
        return f"{d}d"
    if d < 365 * 8:
        return f"{d // 365}y{d % 365}d" if d % 365 else f"{d // 365}y"
    return f"{d // 365}y"
