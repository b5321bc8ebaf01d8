"""Which API versions a cluster serves for each deployment target, and the render options that follow.

Dynamo serves ``nvidia.com/v1alpha1`` (releases up to 2025) and ``v1beta1`` (current, often
both); Kthena moved ModelServing from ``workload.volcano.sh`` (the seed) to
``workload.serving.volcano.sh``; OME serves ``ome.io/v1beta1`` and KubeAI ``kubeai.org/v1``.
``discover`` asks the cluster once per group and picks, for each target, the version to render:
the preferred one when the cluster serves it, else the other.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict

from infra.kube import Cluster, NotServed
from planner.manifests.targets import TARGET_KINDS


class RenderOptions(BaseModel):
    """API version per target (``group/version``) the cluster serves; None = not installed."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    dynamo: str | None = None
    ome: str | None = None
    kthena: str | None = None
    kubeai: str | None = None

    def api_version(self, target: str) -> str:
        """The served ``group/version`` of ``target``; raises NotServed when there is none."""
        found = getattr(self, target)
        if found is None:
            groups, versions, kind = TARGET_KINDS[target]
            raise NotServed(groups[0], versions[0], kind)
        return found

    def render_kwargs(self) -> dict[str, str]:
        """Keyword arguments of ``planner.manifests.targets.render_target`` for these versions."""
        out = {}
        if self.dynamo:
            out["dynamo_version"] = self.dynamo.split("/")[1]
        if self.kthena:
            out["kthena_group"] = self.kthena.split("/")[0]
        return out


def served_version(cluster: Cluster, target: str, prefer: str | None = None) -> str | None:
    """The ``group/version`` to use for ``target`` on ``cluster``: ``prefer`` (a version, a group or a
    ``group/version``) when served, else the first served candidate, else None."""
    groups, versions, kind = TARGET_KINDS[target]
    served = [f"{g}/{v}" for g in groups for v, kinds in cluster.served(g).items() if kind in kinds]
    if prefer:
        match = [s for s in served if s == prefer or s.endswith("/" + prefer) or s.startswith(prefer + "/")]
        if match:
            return match[0]
    ordered = [f"{g}/{v}" for g in groups for v in versions]
    ranked = sorted(served, key=lambda s: ordered.index(s) if s in ordered else len(ordered))
    return ranked[0] if ranked else None


def discover(cluster: Cluster, *, targets: tuple[str, ...] = tuple(TARGET_KINDS),
             prefer: dict[str, str] | None = None) -> RenderOptions:
    """The served version of each of ``targets`` (the others stay None)."""
    prefer = prefer or {}
    return RenderOptions(**{t: served_version(cluster, t, prefer.get(t)) for t in targets})
