"""The DGDR kind and API versions slaplan reads, and the token lengths each assumes when unset."""

from __future__ import annotations

from typing import Any, NamedTuple

KIND = "DynamoGraphDeploymentRequest"
V1ALPHA1 = "nvidia.com/v1alpha1"
V1BETA1 = "nvidia.com/v1beta1"
API_VERSIONS = (V1ALPHA1, V1BETA1)


class Lengths(NamedTuple):
    """Tokens per request: input (prompt) and output."""

    isl_tokens: int
    osl_tokens: int


V1ALPHA1_LENGTHS = Lengths(isl_tokens=3000, osl_tokens=500)
"""A v1alpha1 request's lengths when neither ``workload``, ``sla`` nor the profiler config states them."""
V1BETA1_LENGTHS = Lengths(isl_tokens=4000, osl_tokens=1000)
"""A v1beta1 request's lengths when ``workload`` does not state them."""


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
