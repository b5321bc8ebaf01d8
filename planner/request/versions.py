"""The DGDR kind and API versions slaplan reads, and the token lengths each assumes when unset."""

from __future__ import annotations

from typing import Any

from planner.lengths import V1ALPHA1_LENGTHS, V1BETA1_LENGTHS, Lengths  # noqa: F401 (the lengths each version assumes)

KIND = "DynamoGraphDeploymentRequest"
V1ALPHA1 = "nvidia.com/v1alpha1"
V1BETA1 = "nvidia.com/v1beta1"
API_VERSIONS = (V1ALPHA1, V1BETA1)


def type_causes(doc: dict[str, Any]) -> list[tuple[str, str]]:
    """Problems with ``apiVersion`` / ``kind`` (empty when this is a DGDR we read)."""
    causes = []
    api_version, kind = doc.get("apiVersion"), doc.get("kind")
    if api_version is None:
        causes.append(("apiVersion", "field required"))
    elif api_version not in API_VERSIONS:
        causes.append(("apiVersion", f"must be one of {', '.join(API_VERSIONS)} (got {api_version!r})"))
    if kind is None:
        causes.append(("kind", "field required"))
    elif kind != KIND:
        causes.append(("kind", f"must be {KIND} (got {kind!r})"))
    return causes


def asks_online(api_version: str, spec: Any) -> bool:
    """Whether a DGDR ``spec`` of ``api_version`` (``v1alpha1``/``v1beta1``, with or without the
    group) asks to profile on real deployments: v1alpha1 ``online: true``, v1beta1
    ``searchStrategy: thorough``."""
    if not isinstance(spec, dict):
        return False
    if api_version.rpartition("/")[2] == "v1beta1":
        return spec.get("searchStrategy") == "thorough"
    return spec.get("online") is True


def profiling_label(online: bool) -> str:
    """How a DGDR is (or was) profiled, in the words the dashboard, the CLI and the status use:
    ``online (thorough)`` (candidates deployed and benchmarked) or ``offline (rapid)`` (the
    performance model)."""
    return "online (thorough)" if online else "offline (rapid)"
