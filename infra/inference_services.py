"""A BenchmarkJob's ``endpoint.inferenceService`` → the base URL to benchmark, through the cluster.

As OME's benchmark controller does, the URL is the InferenceService's ``status.url``, reduced to
its scheme and host[:port] (``http`` when it has no scheme); slaplan falls back to
``status.address.url`` (the cluster-internal address) when ``status.url`` is not set. Unlike
OME, which takes whatever ``status.url`` says, slaplan waits for the service's ``Ready``
condition, up to ``timeout_s`` (engines take minutes to load their weights), polling every
``poll_s``; then the job fails with the condition's reason. A service that does not exist, or a
cluster without OME's InferenceService, fails at once; an unreachable API server is retried
until the deadline.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any
from urllib.parse import urlsplit

from infra.kube import Cluster, ClusterError
from profiler.bench.spec import InferenceServiceReference
from profiler.bench.runner import Failure, ServiceResolver

API_VERSION = "ome.io/v1beta1"
KIND = "InferenceService"
POLL_S = 5.0


def advertised_url(obj: dict[str, Any]) -> str | None:
    """``scheme://host[:port]`` from ``status.url`` (else ``status.address.url``), or None."""
    status = obj.get("status") or {}
    for url in (status.get("url"), (status.get("address") or {}).get("url")):
        if not isinstance(url, str) or not url.strip():
            continue
        parts = urlsplit(url.strip() if "://" in url else "http://" + url.strip())
        if parts.netloc:
            return f"{parts.scheme or 'http'}://{parts.netloc}"
    return None


def readiness(obj: dict[str, Any]) -> tuple[bool | None, str]:
    """(the ``Ready`` condition's status — None when there is none —, its reason and message)."""
    for cond in (obj.get("status") or {}).get("conditions") or []:
        if isinstance(cond, dict) and cond.get("type") == "Ready":
            why = ": ".join(str(cond[k]) for k in ("reason", "message") if cond.get(k))
            return str(cond.get("status")) == "True", why
    return None, ""


def resolve(cluster: Cluster, ref: InferenceServiceReference, *, timeout_s: float, poll_s: float = POLL_S,
            clock: Callable[[], float] = time.monotonic, sleep: Callable[[float], None] = time.sleep,
            progress: Callable[[str], None] | None = None) -> str:
    """The base URL of the InferenceService ``ref`` once it is ready (waiting up to ``timeout_s``
    seconds). Raises ``Failure`` naming the service when it is missing or not ready in time."""
    name = f"InferenceService {ref.namespace}/{ref.name}"
    deadline = clock() + timeout_s
    while True:
        try:
            obj = cluster.get(API_VERSION, KIND, ref.namespace, ref.name)
        except ClusterError as exc:
            if not exc.transient:
                raise Failure(f"{name}: {exc}") from None
            waiting = f"the cluster did not answer ({exc})"
        else:
            if obj is None:
                raise Failure(f"{name} not found in the cluster (spec.endpoint.inferenceService)")
            url = advertised_url(obj)
            ready, why = readiness(obj)
            if url and ready is not False:
                return url
            waiting = ("not ready" + (f" ({why})" if why else "")) if ready is False else "no URL in its status yet"
        left = deadline - clock()
        if left <= 0:
            raise Failure(f"{name} is not ready after {timeout_s:g} s: {waiting}")
        if progress:
            progress(f"waiting for {name}: {waiting}")
        sleep(min(poll_s, left))


def resolver_for(connect: Callable[[], Cluster], *, timeout_s: float, poll_s: float = POLL_S,
                 progress: Callable[[str], None] | None = None) -> ServiceResolver:
    """A resolver for ``profiler.bench.runner`` on the cluster that ``connect`` returns."""

    def resolve_ref(ref: InferenceServiceReference) -> str:
        try:
            cluster = connect()
        except ClusterError as exc:
            raise Failure(f"InferenceService {ref.namespace}/{ref.name}: {exc}") from None
        return resolve(cluster, ref, timeout_s=timeout_s, poll_s=poll_s, progress=progress)

    return resolve_ref
