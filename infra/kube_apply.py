"""Apply manifests to a cluster and say what changed: created, configured (which fields) or unchanged.

The object is read before the server-side apply and compared with what the server returns
(with ``dry_run`` the server computes the result and stores nothing), on the fields slaplan
writes: ``metadata.labels``, ``metadata.annotations`` and ``spec``. ``status`` and the
server's bookkeeping (resourceVersion, managedFields, generation, timestamps) are ignored.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict

from infra.kube import Cluster

Action = Literal["created", "configured", "unchanged"]
MAX_CHANGED_PATHS = 20


class ApplyResult(BaseModel):
    """The outcome of applying one object."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    api_version: str
    kind: str
    namespace: str
    name: str
    action: Action
    changed: tuple[str, ...] = ()
    dry_run: bool = False
    state: str | None = None

    def line(self) -> str:
        """``kind.group/name action`` as kubectl prints it, with the changed fields."""
        group = self.api_version.rpartition("/")[0]
        what = f"{self.kind.lower()}.{group}/{self.name}" if group else f"{self.kind.lower()}/{self.name}"
        suffix = " (dry run)" if self.dry_run else ""
        fields = f": {', '.join(self.changed)}" if self.changed else ""
        return f"{what} {self.action}{suffix} in namespace {self.namespace}{fields}"


def _watched(obj: dict[str, Any] | None) -> dict[str, Any]:
    meta = (obj or {}).get("metadata") or {}
    return {
        "metadata": {"labels": meta.get("labels") or {}, "annotations": meta.get("annotations") or {}},
        "spec": (obj or {}).get("spec"),
    }


def changed_paths(before: Any, after: Any, path: str = "") -> list[str]:
    """Dotted paths (``spec.services.Frontend.replicas``, ``spec.roles[1]``) where ``after`` differs."""
    if isinstance(before, dict) and isinstance(after, dict):
        out: list[str] = []
        for key in sorted(set(before) | set(after), key=str):
            sub = f"{path}.{key}" if path else str(key)
            if key not in before or key not in after:
                out.append(sub)
            else:
                out += changed_paths(before[key], after[key], sub)
        return out
    if isinstance(before, list) and isinstance(after, list) and len(before) == len(after):
        out = []
        for i, (b, a) in enumerate(zip(before, after)):
            out += changed_paths(b, a, f"{path}[{i}]")
        return out
    return [] if before == after else [path or "<root>"]


def _summarize(paths: list[str]) -> tuple[str, ...]:
    if len(paths) <= MAX_CHANGED_PATHS:
        return tuple(paths)
    return (*paths[:MAX_CHANGED_PATHS], f"... and {len(paths) - MAX_CHANGED_PATHS} more")


def apply_object(cluster: Cluster, obj: dict[str, Any], *, dry_run: bool = False) -> ApplyResult:
    """Server-side apply ``obj`` (needs ``metadata.namespace``) and report what changed.

    Raises ``infra.kube.ClusterError`` (NotServed, Forbidden, Rejected, Unreachable)."""
    meta = obj["metadata"]
    before = cluster.get(obj["apiVersion"], obj["kind"], meta["namespace"], meta["name"])
    after = cluster.apply(obj, dry_run=dry_run)
    if before is None:
        action: Action = "created"
        paths: list[str] = []
    else:
        paths = changed_paths(_watched(before), _watched(after))
        action = "configured" if paths else "unchanged"
    return ApplyResult(
        api_version=obj["apiVersion"], kind=obj["kind"], namespace=meta["namespace"], name=meta["name"],
        action=action, changed=_summarize(paths), dry_run=dry_run,
        state=((after or {}).get("status") or {}).get("state"),
    )
