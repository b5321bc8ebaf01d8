"""The DGDR kind and API versions slaplan reads, and the token lengths each assumes when unset."""

from __future__ import annotations

from typing import Any

from planner.types import V1ALPHA1_LENGTHS, V1BETA1_LENGTHS, Lengths  # noqa: F401 (the lengths each version assumes)

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
