"""What the real CRDs publish for each served kind and version: the ``openAPIV3Schema`` and the
printer columns (``additionalPrinterColumns``).

Read from the CRD folder (``infra.crds.default_crd_dir``: ``$SLAPLAN_CRD_DIR`` or the shared
``crds`` folder beside the repository). Without a CRD for a kind, the schema keeps spec and status
open (``x-kubernetes-preserve-unknown-fields``) and the only column is Age, as kube-apiserver
serves a CRD that names no columns.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from api.kinds import ServedKind

OPEN_OBJECT = {"type": "object", "x-kubernetes-preserve-unknown-fields": True}
AGE = {"name": "Age", "type": "date", "jsonPath": ".metadata.creationTimestamp"}


@dataclass(frozen=True)
class Column:
    """One printer column: ``name``, ``type`` (string, integer, number, boolean, date), the JSONPath
    of its value, and ``priority`` (above 0: shown by ``-o wide`` only)."""

    name: str
    type: str
    json_path: str
    description: str = ""
    format: str = ""
    priority: int = 0


@dataclass(frozen=True)
class Published:
    schema: dict[str, Any]
    columns: tuple[Column, ...]


def published(kind: ServedKind, version: str) -> Published:
    """The schema and printer columns of ``kind`` at ``version``."""
    from infra.crds import published_version

    entry = published_version(f"{kind.group}/{version}", kind.kind)
    if entry is None:
        return Published(schema=_open_schema(kind), columns=(_column(AGE),))
    schema = (entry.get("schema") or {}).get("openAPIV3Schema") or _open_schema(kind)
    columns = entry.get("additionalPrinterColumns") or [AGE]
    return Published(schema=schema, columns=tuple(_column(c) for c in columns))


def _column(spec: dict[str, Any]) -> Column:
    return Column(
        name=spec["name"],
        type=spec.get("type", "string"),
        json_path=spec["jsonPath"],
        description=spec.get("description", ""),
        format=spec.get("format", ""),
        priority=int(spec.get("priority", 0)),
    )


def _open_schema(kind: ServedKind) -> dict[str, Any]:
    return {
        "description": f"{kind.kind} (no CRD schema is installed beside this server)",
        "type": "object",
        "properties": {
            "apiVersion": {"type": "string"},
            "kind": {"type": "string"},
            "metadata": {"type": "object"},
            "spec": OPEN_OBJECT,
            "status": OPEN_OBJECT,
        },
    }
